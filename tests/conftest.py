"""Shared fixtures for the project's own tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
BOOK_MODULES = ("tests/test_book.py", "tests/test_browser.py", "tests/test_leaks.py")


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
