"""The worker's own folder, staged before its process starts.

::

    lmcourse-sbx-XXXX/          0711, the grader's
      boot/                     read-only for the worker (bound at /sandbox/boot)
        lmc_inside/             a copy of `lmcourse.grading.sandbox.inside`: the worker's code
        submission.py           the student's extracted code
        etc/passwd, group, hosts
        config-N.json           written by `Worker` at each start
      home/                     the worker's working directory (/sandbox/home), with the extra files
      tmp/                      its /tmp

The worker runs its code from this copy, not from the grader's package: the
grader's `protocol`, `wire` and `probes` and the worker's are the same files,
whatever ``lmcourse`` the worker's interpreter would find.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

INSIDE = Path(__file__).resolve().parent / "inside"
INSIDE_NAME = "lmc_inside"          # the package's name in the worker
SANDBOX_BOOT = "/sandbox/boot"      # where bubblewrap binds boot/ and home/
SANDBOX_HOME = "/sandbox/home"


def entry_point(boot: str) -> str:
    """The script the worker's interpreter runs (`inside.__main__`)."""
    return f"{boot}/{INSIDE_NAME}/__main__.py"


def stage(folder: Path, source: str, extra: dict[str, bytes], *, uid: int | None) -> None:
    """Fill the empty `folder` (see the module's docstring); `uid`: the worker's fresh uid, if any."""
    boot, home, tmp = folder / "boot", folder / "home", folder / "tmp"
    for p in (boot, home, tmp, boot / "etc", boot / INSIDE_NAME):
        p.mkdir()
    for f in INSIDE.glob("*.py"):
        shutil.copyfile(f, boot / INSIDE_NAME / f.name)
    (boot / "submission.py").write_text(source, encoding="utf-8")
    gid = uid if uid is not None else os.getgid()
    shown = uid if uid is not None else os.getuid()
    (boot / "etc" / "passwd").write_text(
        f"root:x:0:0:root:/root:/usr/sbin/nologin\nstudent:x:{shown}:{gid}:student:{SANDBOX_HOME}:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (boot / "etc" / "group").write_text(f"root:x:0:\nstudent:x:{gid}:\nnogroup:x:65534:\n")
    (boot / "etc" / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    for name, data in extra.items():
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"extra file name must be a relative path inside the folder: {name!r}")
        target = home / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bytes(data))
    for sub in (".cache", ".config"):
        (home / sub).mkdir(exist_ok=True)
    os.chmod(folder, 0o711)
    for root, dirs, files in os.walk(boot):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    if uid is not None:
        for root, dirs, files in os.walk(home):
            os.chown(root, uid, gid)
            for f in files:
                os.chown(os.path.join(root, f), uid, gid)
        os.chown(tmp, uid, gid)
        os.chmod(home, 0o700)
        os.chmod(tmp, 0o700)
