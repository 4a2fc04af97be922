"""The course layout (lmcourse.course): one place that knows where an assignment's files live."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lmcourse.course import Course, UnknownAssignment
from lmcourse.grading import runner

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"


def test_an_assignment_knows_its_files():
    a = Course(FIXTURE).assignment("00-fixture")
    assert a.source_path == FIXTURE / "solutions" / "00-fixture" / "00-fixture.ipynb" and a.source_path.exists()
    assert a.release_path == FIXTURE / "assignments" / "00-fixture" / "00-fixture.ipynb" and a.release_path.exists()
    assert a.release_relpath == "assignments/00-fixture/00-fixture.ipynb"
    assert a.check_files() and all(p.parent == FIXTURE / "autograder" / "00-fixture" for p in a.check_files())
    assert a.load_release().cells and a.load_source().cells


def test_an_unknown_id_names_the_known_ones():
    with pytest.raises(UnknownAssignment, match="no assignment '99-nope'.*known: 00-fixture"):
        Course(FIXTURE).assignment("99-nope")
    assert Course(ROOT).assignment_ids()[:3] == ["01-ngrams", "02-word2vec", "03-rnnlm"]


def test_the_fingerprint_follows_checks_limits_and_notebooks(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    a = Course(course).assignment("00-fixture")
    before = a.fingerprint("tier=cpu")
    assert a.fingerprint("tier=cpu") == before and a.fingerprint("tier=gpu") != before
    a.limits_path.write_text('{"call_timeout": 5}')
    assert a.limits_overrides() == {"call_timeout": 5} and a.fingerprint("tier=cpu") != before
    changed = a.fingerprint("tier=cpu")
    (a.checks_dir / "__pycache__").mkdir(exist_ok=True)
    (a.checks_dir / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert a.fingerprint("tier=cpu") == changed  # caches are not the grader


def test_the_worker_is_told_to_hide_both_courses_when_grading_another():
    hidden = runner.secret_dirs(FIXTURE)
    assert FIXTURE / "autograder" in hidden and FIXTURE / "solutions" in hidden
    own = Course.of_package()
    if own is not None:  # an editable install: the course it ships stays hidden too
        assert own.root / "solutions" in hidden and own.root / "autograder" in hidden
