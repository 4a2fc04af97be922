"""The grading result: its JSON round trip, Gradescope's schema, its status words, and the atomic writer."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from lmcourse.files import atomic_file, atomic_write
from lmcourse.grading import runner
from lmcourse.grading.report import check_text, feedback_html, readiness
from lmcourse.grading.result import CheckResult, Result, Status

ROOT = Path(__file__).resolve().parent.parent

# Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
TOP_KEYS = {"score", "execution_time", "output", "visibility", "stdout_visibility", "extra_data", "tests",
            "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "number", "output", "tags", "visibility", "extra_data"}


def graded() -> Result:
    """A result as the runner builds it: every optional key set, one passed and one failed check."""
    tests = [
        CheckResult(name="count_words on a short sentence", number="1", score=1.0, max_score=1.0, status="passed",
                    visibility="visible", tags=["test_count"], cell="test_count", check="test_checks.py::test_a",
                    function="count_words", seconds=0.01),
        CheckResult(name="softmax with large logits", number="2", score=0.0, max_score=2.0, status="failed",
                    output="softmax: expected 1.0, found nan \ud800", visibility="after_published",
                    tags=["test_softmax"], cell="test_softmax", check="test_checks.py::test_b", function="softmax",
                    kind="assertion", seconds=0.02),
    ]
    return Result(score=1.0, max_score=3.0, status=Status.OK, message="graded", output="1 / 3 points. ",
                  assignment="00-fixture", tests=tests, execution_time=1.5,
                  cells={"test_count": {"score": 1.0, "max_score": 1.0}, "test_softmax": {"score": 0.0, "max_score": 2.0}},
                  problems=[{"status": "modified-cell", "message": "edited", "cell": "test_count", "warning": True}],
                  not_run=0, notebook="alice.ipynb", tier="cpu", isolation="partial: not root", captured_output="",
                  warnings=[], readiness={"missing": [], "unimplemented": [["softmax", "softmax"]]},
                  parts={"test_count": "Part 1 — Counting", "softmax": "Part 2 — Softmax",
                         "test_softmax": "Part 2 — Softmax"}, hidden_points=2.0,
                  extra_data={"student_id": "alice", "key": "abc"})


def test_json_round_trip_keeps_every_key_and_value():
    result = graded()
    data = result.to_json()
    assert list(data) == [k for k in Result.ORDER if k not in ("test_cells", "hints")]  # results.json's keys, in order
    assert data["status"] == "ok" and type(data["status"]) is str
    assert list(data["tests"][0]) == list(CheckResult.ORDER)
    assert Result.from_json(data) == result
    text = result.dumps()
    again = Result.loads(text)
    assert again.to_json() == json.loads(text)
    assert "\ud800" not in text and again.tests[1].output.startswith("softmax: expected 1.0")  # valid UTF-8
    # a one-line form for the runner's pipe
    assert "\n" not in result.dumps(indent=None) and Result.loads(result.dumps(indent=None)) == again


def test_the_json_view_reads_like_results_json():
    result = graded()
    assert result["score"] == 1.0 and result.get("tier") == "cpu" and "isolation" in result
    assert result["tests"][1]["output"].startswith("softmax") and set(result["tests"][0]) == set(CheckResult.ORDER)
    assert "test_cells" not in result and result.get("test_cells", "absent") == "absent"


def test_a_failed_result_has_only_the_keys_it_always_had():
    failed = Result.failed("00-fixture", "grader-error", "the grader\nprocess stopped")
    assert not failed.graded and failed.status is Status.GRADER_ERROR
    assert failed.message == "the grader process stopped"  # one line
    assert set(failed.to_json()) == {"score", "max_score", "status", "message", "output", "visibility",
                                     "stdout_visibility", "execution_time", "tests", "cells", "problems",
                                     "assignment"}
    assert failed.output == "grader-error: the grader process stopped"
    assert Result.from_json(failed.to_json()) == failed


def test_gradescope_schema_exactly_with_lmcourse_keys_under_extra_data():
    result = graded()
    gs = result.to_gradescope()
    assert set(gs) <= TOP_KEYS
    assert gs["score"] == 1.0 and gs["output"] == result.output and gs["execution_time"] == 1.5
    assert gs["extra_data"]["status"] == "ok" and gs["extra_data"]["max_score"] == 3.0
    assert gs["extra_data"]["extra_data"] == {"student_id": "alice", "key": "abc"}
    assert "tests" not in gs["extra_data"]
    for test, check in zip(gs["tests"], result.tests):
        assert set(test) <= TEST_KEYS
        assert test["name"] == check.name and test["visibility"] == check.visibility
        assert test["extra_data"] == {"cell": check.cell, "check": check.check, "function": check.function,
                                      "kind": check.kind, "seconds": check.seconds}
    json.dumps(gs, allow_nan=False)
    on_disk = json.loads(result.dumps(gradescope=True))
    assert set(on_disk) <= TOP_KEYS and on_disk["extra_data"]["status"] == "ok"


def test_unknown_status_and_non_results_are_refused():
    with pytest.raises(ValueError):
        Result.from_json(dict(graded().to_json(), status="brilliant"))
    for text in ('[1, 2]', '{"tests": 5}', 'not json'):
        with pytest.raises(ValueError):
            Result.loads(text)


def test_every_status_word_the_grader_uses_is_a_status():
    """The words `notebook`, `bounded` and the sandbox raise, and the student kinds: all are `Status` members,
    so the runner never meets a status it cannot type."""
    words = set(runner.STUDENT_KINDS)
    pattern = re.compile(r"(?:NotebookError|Problem|StudentError)\(\s*\"([a-z][a-z-]*)\"")
    for path in (ROOT / "lmcourse" / "grading").rglob("*.py"):
        words |= set(pattern.findall(path.read_text(encoding="utf-8")))
    words |= {"wrong-assignment", "old-nbformat", "no-notebook", "symlink"}
    assert words > {"not-json", "missing-cell", "timeout"}, words  # the scan finds them
    assert words <= {s.value for s in Status}, words - {s.value for s in Status}
    assert all(Status(w).graded for w in words) and not Status("grader-error").graded


def test_report_reads_a_result_or_its_stored_json():
    result = Result.loads(graded().dumps())
    stored = json.loads(result.dumps())
    assert check_text(result, "nb.ipynb") == check_text(stored, "nb.ipynb")
    assert feedback_html(result, "alice") == feedback_html(stored, "alice")
    assert readiness(result)["todo"] == [("Part 2 — Softmax", "softmax", "unimplemented")]


def test_atomic_write_replaces_whole_files(tmp_path):
    path = tmp_path / "deeper" / "results.json"
    atomic_write(path, "first")
    atomic_write(path, b"second")
    assert path.read_text() == "second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # as `open` would make it


def test_atomic_writer_leaves_no_partial_file_when_writing_fails(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("the old result")
    with pytest.raises(RuntimeError):
        with atomic_file(path) as f:
            f.write(b"half of a new res")
            raise RuntimeError("the disk filled up")
    assert path.read_text() == "the old result"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left behind
    fresh = tmp_path / "new.json"
    with pytest.raises(RuntimeError):
        with atomic_file(fresh) as f:
            raise RuntimeError("before any byte")
    assert not fresh.exists() and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_result_whose_write_fails_leaves_the_old_file(tmp_path, monkeypatch):
    """The bytes are written, then the disk fails before they are safe: the old results.json stands."""
    import lmcourse.files

    path = tmp_path / "results.json"
    graded().write(path)
    before = path.read_bytes()
    changed = graded()
    changed.score = 3.0

    def fail(fd):
        raise OSError("no space left on device")

    monkeypatch.setattr(lmcourse.files.os, "fsync", fail)
    with pytest.raises(OSError, match="no space"):
        changed.write(path)
    assert path.read_bytes() == before and Result.read(path) == Result.loads(graded().dumps())
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    assert Result.read(tmp_path / "missing.json") is None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
