"""Shared fixtures for the project's own tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# One torch thread in each test process under `make test` (two xdist workers on a two-core machine).
# torch's default, a thread per core, makes a worker's threads spin against the core the other worker is
# using: 03's variants that run every test cell in process took 60-86 s instead of 3 s in one CI run. The
# variable reaches the processes the tests start too (the book's kernels, nbval's); the sandboxed grader
# workers start from a clean environment and set their own.
if os.environ.get("PYTEST_XDIST_WORKER") is not None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if "torch" in sys.modules:  # imported before this file (a plugin): the variable came too late
        sys.modules["torch"].set_num_threads(1)

# No known-mistake hints unless a test asks for them (`mistakes.HINTS_ENV`): by default a batch, a
# Gradescope bundle and the student edition grade every known mistake of the assignment first (minutes a
# unit, cached), which the tests of batches and bundles do not need; tests/test_hints.py makes them.
os.environ.setdefault("LMCOURSE_HINTS", "off")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The offline corpus mirror that `make test` and .ci/run point at."""
    env = os.environ.get("LMCOURSE_DATA_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "data")
    for c in candidates:
        if (c / "tinyshakespeare.txt").exists():
            return c
    pytest.skip("no offline mirror of the corpora (set LMCOURSE_DATA_MIRROR)")


def pytest_generate_tests(metafunc):
    from unit_contract import parametrize_variants

    parametrize_variants(metafunc)


# The modules that read the built book (booksite.built_book). Under `make test` (pytest-xdist,
# --dist loadscope) they run as one scope on one worker: the first builds the book (minutes, most of it
# executing the chapters) and the others then read it. As separate modules on two workers, the second
# waited, idle, for the first's build (about 150 s of one core in a 29-minute run).
BOOK_MODULES = ("tests/test_book.py", "tests/test_browser.py", "tests/test_leaks.py", "tests/test_lecture_browser.py",
                "tests/test_quiz_browser.py")


def scope_of(nodeid: str, default: str) -> str:
    """The xdist scope of a test: the book's modules share one; every other test keeps `default`."""
    return "the built book" if nodeid.split("::", 1)[0] in BOOK_MODULES else default


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None  # xdist's own scheduler for every other mode
    from xdist.scheduler import LoadScopeScheduling

    class BookAsOneScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid, super()._split_scope(nodeid))

    return BookAsOneScope(config, log)
