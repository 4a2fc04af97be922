"""Writing a file so that a reader sees the old file or the new one, never half of either.

Every file lmcourse writes for someone else to read (a student's results.json
and feedback.html, grades.csv, a cached corpus, a released notebook, the
Gradescope zip, the preflight's verdict) goes through :func:`atomic_file`:
the bytes go to a hidden temporary file in the same folder, which is flushed
to disk and then renamed over the destination (``os.replace``, atomic on one
file system). A writer killed half-way leaves the destination as it was, plus
at most a ``.NAME.*.tmp`` file that nothing reads; a writer that raises leaves
not even that. This module is a leaf: the grader, the data loader and the
release builder all import it, and it imports nothing of lmcourse.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".tmp"  # a leftover is `.NAME.PID.RANDOM.tmp`, next to NAME


def temporary_name(path: Path) -> Path:
    """Where the bytes of ``path`` wait until they are complete: hidden, next to it, unique per writer."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")


@contextlib.contextmanager
def atomic_file(path: Path | str) -> Iterator[BinaryIO]:
    """Open a binary file that replaces ``path`` when the block ends without an exception.

    The file is created with the usual permissions (0666 less the umask), so a
    result reads the same as one written with ``open``; its folder is made when
    missing. On an exception the temporary file is removed and ``path`` is left
    as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path | str, data: str | bytes) -> Path:
    """Write ``data`` (text is written as UTF-8) to ``path`` atomically; return the path."""
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")  # text that came from a submission may hold lone surrogates
    with atomic_file(path) as f:
        f.write(data)
    return Path(path)
