"""Grading one notebook: full marks, zero, known-wrong variants, and every kind of bad input."""

import json
from pathlib import Path

import pytest

from lmcourse.course import Course
from lmcourse.grading import grade_notebook
from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"
FAST = {"call_timeout": 3.0, "import_timeout": 8.0, "total_timeout": 60.0}
CHECK_SOURCE = (FIXTURE / "autograder" / AID / "test_checks.py").read_text()


def scores(result):
    return {t["name"]: t["score"] for t in result["tests"]}


def assert_one_line_and_no_leak(result):
    assert result["status"] and "\n" not in result["status"] and "\n" not in result["message"]
    blob = json.dumps(result.to_json())
    for line in CHECK_SOURCE.splitlines():
        if len(line.strip()) > 20 and not line.strip().startswith(("#", "from", "import", '"""')):
            assert line.strip() not in blob, f"check source leaked: {line.strip()}"
    assert "Traceback" not in blob and "test_checks.py" not in json.dumps([t["output"] for t in result["tests"]])


def test_solution_full_marks_release_zero(tmp_path):
    honest = grade_notebook(FIXTURE, AID, submission_from_solution(FIXTURE, AID, tmp_path / "a"))
    assert honest["status"] == "ok" and honest["score"] == honest["max_score"] == 6, honest
    assert honest["cells"] == {"test_count_words": {"score": 2, "max_score": 2},
                               "test_softmax": {"score": 3, "max_score": 3},
                               "test_perplexity": {"score": 1, "max_score": 1}}
    assert honest["warnings"] == []  # checks' points add up to each test cell's points
    released = grade_notebook(FIXTURE, AID, released_notebook(FIXTURE, AID, tmp_path / "b"))
    assert released["score"] == 0 and released["max_score"] == 6
    assert all("NotImplementedError" in t["output"] for t in released["tests"])
    assert_one_line_and_no_leak(released)
    for t in honest["tests"]:
        assert {"name", "score", "max_score", "output", "visibility", "status"} <= set(t)
        assert t["visibility"] in ("visible", "after_published")
    # grading writes nothing next to the hidden checks (no bytecode, no pytest cache)
    leftovers = [p for p in (FIXTURE / "autograder").rglob("*") if p.name in ("__pycache__", ".pytest_cache")
                 or p.suffix == ".pyc"]
    assert leftovers == []


@pytest.mark.parametrize("name, code, lost", [
    ("softmax", "def softmax(x):\n    z = np.exp(x)\n    return z / z.sum(axis=-1, keepdims=True)",
     {"softmax of a batch with large logits (stability)"}),
    ("count_words", "def count_words(text):\n    out = {}\n    for w in text.split(' '):\n"
                    "        out[w] = out.get(w, 0) + 1\n    return out",
     {"count_words on random text with repeated spaces"}),
    ("perplexity", "def perplexity(probs):\n    return float(np.prod(probs) ** (-1 / len(probs))) + 0.01",
     {"perplexity of random probabilities"}),
])
def test_known_wrong_variant_loses_exactly_its_check(tmp_path, name, code, lost):
    result = grade_notebook(FIXTURE, AID, submission_from_solution(FIXTURE, AID, tmp_path, replace={name: code}))
    assert {n for n, s in scores(result).items() if s == 0} == lost, result["tests"]
    assert result["status"] == "ok"
    failed = next(t for t in result["tests"] if t["name"] in lost)
    assert "expected" in failed["output"] and "found" in failed["output"]
    assert_one_line_and_no_leak(result)


def _edit(nb_path, fn):
    nb = json.loads(nb_path.read_text())
    fn(nb)
    nb_path.write_text(json.dumps(nb))
    return nb_path


def _cell(nb, gid):
    return next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)


def _set(gid, src):
    return lambda nb: _cell(nb, gid).__setitem__("source", src)


ALL = {"count_words on a short sentence", "count_words on random text with repeated spaces",
       "softmax of a vector sums to one", "softmax of a batch with large logits (stability)",
       "perplexity of random probabilities"}
SOFTMAX = {"softmax of a vector sums to one", "softmax of a batch with large logits (stability)"}
COUNT = {"count_words on a short sentence", "count_words on random text with repeated spaces"}

# name -> (how to break an honest notebook, status, checks that must score 0 (the rest keep full marks))
BAD = {
    "non-json": (lambda p: p.write_text("this is not json {"), "not-json", ALL),
    "empty": (lambda p: p.write_bytes(b""), "empty", ALL),
    "json-not-notebook": (lambda p: p.write_text('{"hello": "world"}'), "not-a-notebook", ALL),
    "old-nbformat": (lambda p: p.write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                     "worksheets": [{"cells": []}]})), "old-nbformat", ALL),
    "deleted-answer-cell": (lambda p: _edit(p, lambda nb: nb["cells"].remove(_cell(nb, "softmax"))),
                            "missing-cell", SOFTMAX),
    "modified-locked-cell": (lambda p: _edit(p, _set("setup", "import numpy as np\nimport math\nnp.exp = abs")),
                             "modified-cell", set()),
    "syntax-error": (lambda p: _edit(p, _set("perplexity", "def perplexity(probs)\n    return 1")), "syntax-error",
                     {"perplexity of random probabilities"}),
    # a cell that raises when loaded costs its own checks only: the other cells are loaded, as in a kernel
    "exception-at-import": (lambda p: _edit(p, _set("count_words", "def count_words(t):\n    return {}\n\n1 / 0")),
                            "import-error", COUNT),
    "infinite-loop": (lambda p: _edit(p, _set("perplexity", "def perplexity(probs):\n    while True:\n        pass")),
                      "timeout", {"perplexity of random probabilities"}),
    "infinite-loop-at-import": (lambda p: _edit(p, _set("perplexity", "while True:\n    pass")), "import-error", ALL),
    "missing-function": (lambda p: _edit(p, _set("softmax", "def soft_max(x):\n    return x")), "missing", SOFTMAX),
    "huge-output": (lambda p: _edit(p, _set("count_words", "def count_words(text):\n    print('x' * 30_000_000)\n"
                                            "    return {}")), "output-too-large", COUNT),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_scores_zero_on_what_it_breaks(tmp_path, case):
    breaker, status, zero = BAD[case]
    path = submission_from_solution(FIXTURE, AID, tmp_path)
    breaker(path)
    result = grade_notebook(FIXTURE, AID, path, limits=FAST)
    got = scores(result)
    assert set(got) == ALL
    assert {n for n, s in got.items() if s == 0} == zero, (result["status"], result["tests"])
    assert result["status"] == status, (result["status"], result["message"])
    assert len(result["message"]) > 20
    assert_one_line_and_no_leak(result)


# Test cells are never run (their points come from the trusted checks): renaming, editing or deleting one
# costs nothing. The change is reported as a warning and the status stays ok (issue #13).
HARMLESS = {
    "renamed-test-cell": (lambda p: _edit(p, lambda nb: _cell(nb, "test_count_words")["metadata"]["nbgrader"]
                                          .__setitem__("grade_id", "my_test")), "recovered-cells"),
    "modified-test-cell": (lambda p: _edit(p, _set("test_softmax", "assert True")), "modified-cell"),
    "deleted-test-cell": (lambda p: _edit(p, lambda nb: nb["cells"].remove(_cell(nb, "test_perplexity"))),
                          "missing-cell"),
}


@pytest.mark.parametrize("case", list(HARMLESS))
def test_test_cells_changed_cost_nothing(tmp_path, case):
    breaker, warning = HARMLESS[case]
    path = submission_from_solution(FIXTURE, AID, tmp_path)
    breaker(path)
    result = grade_notebook(FIXTURE, AID, path, limits=FAST)
    assert result["score"] == result["max_score"] == 6 and result["status"] == "ok", result["message"]
    assert [(p["status"], p["warning"]) for p in result["problems"]] == [(warning, True)]
    assert_one_line_and_no_leak(result)


@pytest.mark.skipif("01-ngrams" not in Course(ROOT).assignment_ids(), reason="unit 01-ngrams not present")
def test_real_unit_solution_full_release_zero(tmp_path):
    honest = grade_notebook(ROOT, "01-ngrams", submission_from_solution(ROOT, "01-ngrams", tmp_path / "a"))
    assert honest["score"] == honest["max_score"] > 0, [t for t in honest["tests"] if t["score"] < t["max_score"]]
    assert honest["status"] == "ok" and honest["warnings"] == []
    released = grade_notebook(ROOT, "01-ngrams", released_notebook(ROOT, "01-ngrams", tmp_path / "b"))
    assert released["score"] == 0 and released["max_score"] == honest["max_score"]


def test_two_assignments_with_same_named_check_files_in_one_process(tmp_path):
    """Each grade runs its own checks, even when another assignment's test_checks.py was imported before."""
    import shutil

    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    twin = "00-twin"
    for kind in ("solutions", "assignments"):
        (course / kind / twin).mkdir()
        shutil.copy(course / kind / AID / f"{AID}.ipynb", course / kind / twin / f"{twin}.ipynb")
    (course / "autograder" / twin).mkdir()
    checks = (course / "autograder" / AID / "test_checks.py").read_text()
    assert 'name="count_words on a short sentence"' in checks
    (course / "autograder" / twin / "test_checks.py").write_text(
        checks.replace('name="count_words on a short sentence"', 'name="count_words on a short sentence (twin)"'))
    names = {}
    for aid in (AID, twin, AID):
        nb = submission_from_solution(course, aid, tmp_path / aid)
        result = grade_notebook(course, aid, nb, limits=FAST)
        assert result["score"] == result["max_score"] > 0
        names.setdefault(aid, []).append({t["name"] for t in result["tests"]})
    assert "count_words on a short sentence (twin)" in names[twin][0]
    assert all("count_words on a short sentence" in n for n in names[AID])


def test_a_namesake_module_imported_elsewhere_does_not_replace_the_checks(tmp_path, monkeypatch):
    """The course's own tests once held a ``test_seq2seq`` beside the hidden ``test_seq2seq.py``:
    pytest's importlib mode would hand the grader that module. The grader must run its own file,
    and put the other module back afterwards."""
    import sys
    import types

    impostor = types.ModuleType("test_checks")
    impostor.__file__ = str(tmp_path / "elsewhere" / "test_checks.py")
    impostor.test_always_passes = lambda: None
    monkeypatch.setitem(sys.modules, "test_checks", impostor)
    nb = submission_from_solution(FIXTURE, AID, tmp_path)
    result = grade_notebook(FIXTURE, AID, nb, limits=FAST)
    assert result["status"] == "ok", result["message"]
    assert result["score"] == result["max_score"] > 0
    assert "count_words on a short sentence" in {t["name"] for t in result["tests"]}
    assert sys.modules["test_checks"] is impostor


def test_excluded_checks_are_neither_run_nor_counted(tmp_path):
    nb = submission_from_solution(FIXTURE, AID, tmp_path)
    full = grade_notebook(FIXTURE, AID, nb, limits=FAST)
    left_out = "softmax of a batch with large logits (stability)"
    part = grade_notebook(FIXTURE, AID, nb, limits=FAST, exclude={left_out})
    assert left_out in scores(full) and left_out not in scores(part)
    assert part["not_run"] == 1 and part["max_score"] == full["max_score"] - 2 == part["score"]


def test_tier_resolution(monkeypatch):
    import torch

    from lmcourse.grading.runner import GraderError, resolve_tier

    monkeypatch.delenv("LMCOURSE_TIER", raising=False)
    assert resolve_tier("cpu") == "cpu"
    assert resolve_tier("auto") == ("gpu" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("LMCOURSE_TIER", "cpu")
    assert resolve_tier("auto") == "cpu"  # the setting wins
    monkeypatch.delenv("LMCOURSE_TIER")
    with pytest.raises(ValueError):
        resolve_tier("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(GraderError, match="CUDA is not available"):  # never a cohort of zeros for a setup error
        resolve_tier("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_tier("gpu") == "gpu" and resolve_tier("auto") == "gpu"
