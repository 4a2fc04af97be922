"""Which third-party libraries the worker can import: the allowed ones are there, every other one is absent.

An assignment that asks for byte-pair encoding written by hand cannot keep
tiktoken out by listing its name: ``importlib``, ``pkgutil.resolve_name``,
``operator.attrgetter`` on a module that imports it, or the course's own
helpers that wrap it all reach it without spelling ``import tiktoken``. What
the worker cannot import is what is not in its view of the filesystem. So
the view gets the interpreter's site-packages as an empty folder with only
the allowed libraries bound back into it (`bwrap_arguments`): `Libraries`
names them by their import names (``torch``, ``numpy``, ``matplotlib``),
the caller adds what those need (``sympy`` for torch's fake tensors,
``PIL`` for matplotlib), and everything else in site-packages
(``transformers``, ``tokenizers``, ``gensim``, ``jinja2`` ...) does not exist
there. Package metadata (``*.dist-info``) and the ``.pth`` start-up hooks
stay, so the interpreter starts as it always does.

Where bubblewrap is not available (`lmcourse check` on a laptop), the worker
installs an import hook instead (`inside.main`): the same names are refused,
but the student's process could take the hook away; the isolation
description says that the grader's view was not built.

Either way a refused import raises ``ModuleNotFoundError``, and the grader
words it with `note` (`explained`: what is available and why), so the
student's feedback names the rule instead of a bare "No module named".
"""

from __future__ import annotations

import os
import re
import site
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# The import names `importlib.machinery` recognises for a file in site-packages: pkg/, mod.py, mod.*.so
_SUFFIXES = (".py", ".pyc", ".so", ".pyd")
_METADATA = (".dist-info", ".egg-info", ".egg-link")


@dataclass(frozen=True)
class Libraries:
    """The third-party libraries (top-level import names) a worker can import, and what a refused import says.

    allowed: import names kept in site-packages (``{"numpy", "torch", ...}``), with their ``<name>.libs``
    folders of shared libraries; note: appended to the message of a refused import (say what is allowed and
    why). The standard library is never affected: it does not live in site-packages.
    """

    allowed: frozenset[str]
    note: str = ""

    def refuses(self, name: str) -> bool:
        """True when the top-level module `name` is a library in site-packages that this policy leaves out."""
        top = name.split(".")[0]
        return top not in self.allowed and top in installed()


def site_dirs() -> list[Path]:
    """This interpreter's site-packages folders that exist (a venv's, or the base install's)."""
    out = []
    try:
        paths = site.getsitepackages()
    except AttributeError:  # an old virtualenv's site module
        paths = []
    for p in paths:
        real = Path(os.path.realpath(p))
        if real.is_dir() and real not in out:
            out.append(real)
    return out


def _import_name(entry: str) -> str | None:
    """The top-level import name a site-packages entry provides, or None for metadata and start-up hooks."""
    if entry.startswith(".") or entry == "__pycache__" or entry.endswith(_METADATA) or entry.endswith(".pth"):
        return None
    if entry.endswith(".libs"):  # numpy.libs: a wheel's shared libraries, loaded by path, never imported
        return None
    for suffix in _SUFFIXES:
        if entry.endswith(suffix):
            return entry.split(".")[0]
    return entry if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", entry) else None


@lru_cache(maxsize=None)
def _layout(folder: str) -> tuple[tuple[str, str | None], ...]:
    """(entry, import name or None) for each entry of a site-packages folder."""
    return tuple((e, _import_name(e)) for e in sorted(os.listdir(folder)))


@lru_cache(maxsize=None)
def _startup_names(folder: str) -> frozenset[str]:
    """Modules the folder's ``.pth`` files import when the interpreter starts (the editable install's finder,
    setuptools' distutils shim): kept, or every start would print an error."""
    names = set()
    for entry in os.listdir(folder):
        if entry.endswith(".pth"):
            try:
                text = Path(folder, entry).read_text(errors="replace")
            except OSError:
                continue
            names.update(re.findall(r"\bimport\s+([A-Za-z_]\w*)", text))
            names.update(re.findall(r"__import__\(\s*['\"]([A-Za-z_]\w*)", text))
    return frozenset(names)


def installed() -> frozenset[str]:
    """Every top-level import name found in this interpreter's site-packages."""
    return frozenset(name for folder in site_dirs() for _, name in _layout(str(folder)) if name)


def kept_entries(libraries: Libraries, folder: Path) -> list[Path]:
    """What of `folder` (a site-packages) stays in the worker's view under `libraries`."""
    keep = libraries.allowed | _startup_names(str(folder))
    out = []
    for entry, name in _layout(str(folder)):
        if name is None:  # metadata, .pth hooks, wheels' folders of shared libraries (nothing to import)
            out.append(folder / entry)
        elif name in keep:
            out.append(folder / entry)
    return out


def absent(libraries: Libraries) -> list[str]:
    """The import names in site-packages that the worker will not have, sorted."""
    return sorted(installed() - libraries.allowed - frozenset().union(*(_startup_names(str(f)) for f in site_dirs())))


def bwrap_arguments(libraries: Libraries, bound: list[str]) -> list[str]:
    """bubblewrap's arguments (after the sources in `bound` are bound) that replace each bound site-packages
    folder by an empty one holding only what `libraries` keeps."""
    args: list[str] = []
    for folder in site_dirs():
        if not any(folder == Path(b) or Path(b) in folder.parents for b in bound):
            continue  # not in the worker's view at all
        args += ["--perms", "0755", "--tmpfs", str(folder)]
        for path in kept_entries(libraries, folder):
            args += ["--ro-bind", str(path), str(path)]
    return args


def explained(message: str, libraries: Libraries) -> str:
    """A student's error message with each "No module named 'X'" about a library `libraries` leaves out
    worded as such (read on the grader's side, from the worker's error reply: nothing inside the worker
    changes how an import fails, so code that only probes for a library, as torch does, is unaffected)."""
    def say(match: re.Match) -> str:
        top = match.group(2).split(".")[0]
        if not libraries.refuses(top):
            return match.group(0)
        return (f"{match.group(1)}{top}': the grader's sandbox for this assignment does not have {top}"
                + (f". {libraries.note}" if libraries.note else ""))
    return re.sub(r"(No module named ')([\w.]+)'", say, message, count=1)


__all__ = ["Libraries", "absent", "bwrap_arguments", "explained", "installed", "kept_entries", "site_dirs"]
