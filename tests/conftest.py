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
