"""Likely causes: a submission whose failures are exactly those of a known mistake is told that mistake's hint.

The rules (`lmcourse.grading.signatures.likely_causes`) on plain data first: only an exact match, only when
at most three mistakes share it, never for a function that is not written yet; a match over what the student
sees (visible checks, test cells) is shown at once, one that needs the hidden checks only on release. Then
01-ngrams for real, with the signatures of three of its mistakes graded here: `lmcourse check`'s report, a
batch's feedback.html and results.json, Gradescope's schema and bundle, the `lmcourse mistakes` command.
The student edition's hints file is tested in tests/test_student_edition.py; every unit's own mistakes
getting their hints, in tests/unit_contract.py. Last, no hint of any unit names a hidden check or quotes
what only the hidden checks hold.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path

import pytest

from lmcourse.course import Course
from lmcourse.grading import grade_notebook
from lmcourse.grading import signatures as sig
from lmcourse.grading.report import check_text, feedback_html
from lmcourse.grading.result import CheckResult, Result, Status
from lmcourse.instructor import batch, mistakes, publish
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
AID = "01-ngrams"
SHOWN = "greedy decoding returns the <EOS> it stops at"  # its visible checks and test cells tell it apart
HIDDEN = "temperature applied after the softmax"  # only the hidden checks tell it from the others
OTHER = "sampling ignores the seed"


# ------------------------------------------------------------------ the rules, on plain data


def _sig(name, failing, ran, visible, function="f"):
    return sig.Signature(name, failing, tuple(ran), f"advice about {name}", function, tuple(visible))


def _result(outcomes, cells=None, unwritten=()) -> Result:
    """A graded result: check name -> (None: passed, or the kind it failed with, visibility)."""
    tests = [CheckResult(n, 0.0 if kind else 1.0, 1.0, "failed" if kind else "passed", "why" if kind else "",
                         visibility=vis, kind=kind, function=n.split(":")[0]) for n, (kind, vis) in outcomes.items()]
    return Result(score=0, max_score=len(tests), status=Status.OK, message="graded", output="", assignment="x",
                  tests=tests, test_cells=cells, readiness={"missing": [], "unimplemented": [["c", u] for u in unwritten]})


V, H = "visible", "after_published"
RAN = ("a:shown", "a:hidden", "b:hidden", "test cell 'ta'")
SEEN = ("a:shown", "test cell 'ta'")
SIGS = [_sig("A", {"a:shown": "assertion", "test cell 'ta'": "assertion"}, RAN, SEEN, "a"),
        _sig("B", {"a:shown": "assertion", "a:hidden": "assertion"}, RAN, SEEN, "a"),
        _sig("C", {"a:shown": "assertion", "b:hidden": "error"}, RAN, SEEN, "b")]
CELL_FAILS = [{"cell": "ta", "passed": False, "error": {"type": "AssertionError"}}]


def _said(causes):
    return [(c["hint"].removeprefix("advice about "), c["visibility"]) for c in causes]


def test_an_exact_visible_match_is_shown_at_once_and_one_the_hidden_checks_decide_on_release():
    # lmcourse check: the visible check and the test cell fail as A's do (B and C pass the test cell)
    check_a = _result({"a:shown": ("assertion", V)}, cells=CELL_FAILS)
    assert sig.likely_causes(check_a, SIGS) == [{"function": "a", "hint": "advice about A",
                                                 "checks": ["a:shown", "test cell 'ta'"], "visibility": V}]
    # graded (no test cell run): the visible check alone points at B or C; the hidden checks say B, so B's
    # hint waits for the release (shown at once, it would tell what a hidden check found)
    graded_b = _result({"a:shown": ("assertion", V), "a:hidden": ("assertion", H), "b:hidden": (None, H)})
    causes = sig.likely_causes(graded_b, SIGS)
    assert _said(causes) == [("B", H)] and causes[0]["checks"] == ["a:hidden", "a:shown"]
    graded_a = _result({"a:shown": ("assertion", V), "a:hidden": (None, H), "b:hidden": (None, H)})
    assert _said(sig.likely_causes(graded_a, SIGS)) == [("A", H)]
    # when what the student sees singles out the same mistake, the hidden checks add nothing: shown at once
    two = [SIGS[0], _sig("D", {"b:hidden": "error"}, RAN, SEEN, "b")]
    assert _said(sig.likely_causes(_result({"a:shown": ("assertion", V), "a:hidden": (None, H),
                                            "b:hidden": (None, H)}), two)) == [("A", V)]


def test_no_hint_for_a_partial_match_a_crowd_of_suspects_a_stub_or_an_honest_result():
    # failing more than any mistake does: not exact
    assert sig.likely_causes(_result({"a:shown": ("assertion", V), "a:hidden": ("assertion", H),
                                      "b:hidden": ("error", H)}), SIGS) == []
    # failing the same checks another way: not exact either
    assert sig.likely_causes(_result({"a:shown": ("assertion", V), "b:hidden": ("assertion", H)}), SIGS) == []
    # four mistakes with one signature: the failures do not point at a cause
    crowd = [_sig(f"M{i}", {"b:hidden": "error"}, RAN, (), "b") for i in range(sig.MOST_HINTS + 1)]
    assert sig.likely_causes(_result({"b:hidden": ("error", H)}), crowd) == []
    assert len(sig.likely_causes(_result({"b:hidden": ("error", H)}), crowd[:sig.MOST_HINTS])) == sig.MOST_HINTS
    # a function that is not written yet fails its checks: that is to-do, not a known mistake
    assert sig.likely_causes(_result({"b:hidden": ("error", H)}, unwritten=["b"]), crowd[:1]) == []
    stub_cell = [{"cell": "ta", "passed": False, "error": {"type": "NotImplementedError"}}]
    assert sig.likely_causes(_result({"a:shown": (None, V)}, cells=stub_cell), SIGS[:1]) == []
    assert sig.likely_causes(_result({n: (None, V) for n in RAN[:3]}), SIGS) == []


def test_gradescope_shows_a_visible_hint_on_top_and_a_hidden_one_with_its_check_on_release():
    r = _result({"a:shown": ("assertion", V), "a:hidden": ("assertion", H), "b:hidden": (None, H)})
    r.hints = [{"function": "a", "hint": "look at the shown part", "checks": ["a:shown"], "visibility": V},
               {"function": "a", "hint": "look at the hidden part", "checks": ["a:shown", "a:hidden"],
                "visibility": H}]
    gs = r.to_gradescope()
    assert "look at the shown part" in gs["output"] and "hidden part" not in gs["output"]
    hidden = next(t for t in gs["tests"] if t["name"] == "a:hidden")
    assert hidden["visibility"] == H and "Likely cause (a known mistake in `a`): look at the hidden part" in hidden["output"]
    assert all("hidden part" not in t["output"] for t in gs["tests"] if t["name"] != "a:hidden")
    assert Result.loads(r.dumps()).hints == r.hints  # results.json keeps them
    page = feedback_html(r, "s1")
    assert "Likely causes" in page and "look at the hidden part" in page  # released feedback: all of them


def test_a_hints_file_that_cannot_be_read_is_the_courses_problem(tmp_path):
    assert sig.load_file(tmp_path / "absent.json") == []
    (tmp_path / "bad.json").write_text('{"signatures": [{"mistake": 1}]}')
    with pytest.raises(ValueError, match="not a file of known-mistake signatures"):
        sig.load_file(tmp_path / "bad.json")
    good = tmp_path / "good.json"
    good.write_text(sig.dumps(SIGS, assignment="x"))
    assert sig.load_file(good) == SIGS


def test_the_feedback_commands_modes(tmp_path, monkeypatch):
    monkeypatch.setattr(mistakes, "_cache_dir", lambda: tmp_path / "mistakes")
    said = []
    assert mistakes.for_feedback(ROOT, AID, mode="off", log=said.append) == [] and not said
    assert mistakes.for_feedback(ROOT, AID, mode="cached", log=said.append) == []
    assert "none are cached" in said[-1] and f"lmcourse mistakes {AID}" in said[-1]
    with pytest.raises(ValueError, match="compute, cached or off"):
        mistakes.for_feedback(ROOT, AID, mode="sometimes")


# ------------------------------------------------------------------ 01-ngrams, for real


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """Three of 01's mistakes graded as `lmcourse mistakes` grades them (every check, the test cells too), and
    their signatures; a notebook of each, and an honest one."""
    tmp = tmp_path_factory.mktemp("hints")
    graded = mistakes.grade_all(ROOT, AID, tmp / "graded", names=[SHOWN, HIDDEN, OTHER])
    found = mistakes.signatures_from(ROOT, AID, graded)
    catalogue = mistakes.load(ROOT, AID)
    notebooks = {name: submission_from_solution(ROOT, AID, tmp / f"nb{i}", replace={
        catalogue[name].function: catalogue[name].wrong}) for i, name in enumerate((SHOWN, HIDDEN, OTHER))}
    notebooks["honest"] = submission_from_solution(ROOT, AID, tmp / "honest")
    return found, notebooks


def _edition_view(found):
    """The signatures as the student edition ships them (publish's cut: what a student sees)."""
    return [s for x in found if (s := sig.restricted(x, x.visible)) is not None]


def test_lmcourse_check_names_a_mistake_its_visible_checks_and_test_cells_tell_apart(known):
    found, notebooks = known
    catalogue = mistakes.load(ROOT, AID)
    assert sig.hinted(next(s for s in found if s.mistake == SHOWN), found, where="check")
    for name in (SHOWN, HIDDEN, OTHER, "honest"):
        r = grade_notebook(ROOT, AID, notebooks[name], tier="cpu", visible_only=True, test_cells=True,
                           hints=_edition_view(found))
        text = check_text(r, notebooks[name].name)
        own = next((s for s in found if s.mistake == name), None)
        expect = own is not None and sig.hinted(own, found, where="check")
        assert ("likely causes" in text) == expect, (name, text[-1500:])
        if expect:
            assert catalogue[name].hint.split(":")[0] in text.replace("\n    ", " ")
            assert r.hints and all(h["visibility"] == "visible" for h in r.hints)
        assert not any(n in text for n in _hidden_names(AID))  # nothing of a hidden check reaches the student


def test_a_batch_puts_the_likely_cause_in_feedback_and_results(known, tmp_path, monkeypatch):
    found, notebooks = known
    monkeypatch.setattr(mistakes, "_cache_dir", lambda: tmp_path / "mistakes")
    mistakes.store(ROOT, AID, found)
    subs = tmp_path / "subs"
    subs.mkdir()
    for student, name in (("s-hidden", HIDDEN), ("s-honest", "honest")):
        (subs / f"{student}.ipynb").write_bytes(notebooks[name].read_bytes())
    said = []
    summary = batch.run(ROOT, AID, subs, tmp_path / "out", preflight=False, progress=False, hints="cached",
                        log=said.append)
    assert summary["graded"] == 2 and summary["grader_errors"] == 0
    hint = mistakes.load(ROOT, AID)[HIDDEN].hint
    r = Result.read(tmp_path / "out" / "students" / "s-hidden" / "results.json")
    assert r.hints and r.hints[0]["hint"] == hint and r.hints[0]["function"] == "apply_temperature"
    page = (tmp_path / "out" / "students" / "s-hidden" / "feedback.html").read_text()
    import html

    assert "Likely causes" in page and html.escape(hint) in page
    honest = Result.read(tmp_path / "out" / "students" / "s-honest" / "results.json")
    assert honest.hints is None and "Likely cause" not in (tmp_path / "out" / "students" / "s-honest" /
                                                             "feedback.html").read_text()
    # in Gradescope's schema, a hint the hidden checks decided waits in a hidden check's output
    gs = r.to_gradescope()
    if r.hints[0]["visibility"] == "after_published":
        assert hint not in gs["output"]
        assert any(hint in t["output"] and t["visibility"] == "after_published" for t in gs["tests"])


def test_the_gradescope_bundle_carries_the_signatures(known, tmp_path, monkeypatch):
    from lmcourse.instructor import gradescope

    found, _ = known
    monkeypatch.setattr(mistakes, "_cache_dir", lambda: tmp_path / "mistakes")
    mistakes.store(ROOT, AID, found)
    zipped = gradescope.build(ROOT, AID, tmp_path / "ag.zip", hints="cached", log=lambda line: None)
    with zipfile.ZipFile(zipped) as z:
        data = json.loads(z.read(f"course/autograder/{AID}/{sig.FILE}"))
    assert [sig.Signature.from_json(s) for s in data["signatures"]] == found
    bare = gradescope.build(ROOT, AID, tmp_path / "bare.zip", hints="off")
    assert f"course/autograder/{AID}/{sig.FILE}" not in zipfile.ZipFile(bare).namelist()


def test_the_mistakes_command_says_which_mistakes_the_feedback_can_name(known, tmp_path, monkeypatch, capsys):
    from lmcourse import cli

    found, _ = known
    monkeypatch.setattr(mistakes, "_cache_dir", lambda: tmp_path / "mistakes")
    mistakes.store(ROOT, AID, found)
    assert cli.main(["mistakes", AID]) == 0
    out = capsys.readouterr().out
    assert f"{AID}: 3 known mistakes" in out and "graded feedback 3" in out
    assert re.search(re.escape(SHOWN) + r" \[greedy_decode\]: .*shown in check, graded feedback", out), out


# ------------------------------------------------------------------ what a hint may say


def _hidden_names(aid: str) -> set[str]:
    """The names of the hidden checks of `aid`: the `name=` each is shown under, and its function's name."""
    names = set()
    for path in Course(ROOT).assignment(aid).checks_dir.glob("test_*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if publish._is_check(node) and publish._visibility(node) != "visible":
                names.add(node.name)
                for deco in node.decorator_list:
                    for kw in getattr(deco, "keywords", []):
                        if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                            names.add(str(kw.value.value))
    return names


def _hidden_constants(aid: str) -> set[str]:
    """What only the hidden checks hold: their string and number literals that the release notebook (what
    the student has) never writes; the inputs a hint must not give away."""
    assignment = Course(ROOT).assignment(aid)
    release = assignment.release_path.read_text(encoding="utf-8")
    found = set()
    for path in assignment.checks_dir.glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # the words of a message (an f-string's parts, a docstring) are not inputs
        wording = {id(c) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for c in node.values}
        wording |= {id(node.body[0].value) for node in ast.walk(tree)
                    if isinstance(node, (ast.FunctionDef, ast.Module)) and node.body
                    and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and not isinstance(node.value, bool) and id(node) not in wording:
                text = str(node.value)
                if isinstance(node.value, str) and (len(text.strip()) < 6 or 1 < len(text.split()) < 3):
                    continue  # a short token (a word of the vocabulary, a key), two words of a message
                if isinstance(node.value, (int, float)) and (abs(node.value) < 100 or text.endswith(".0")):
                    continue  # small numbers (sizes, seeds, 0.5) are the course's vocabulary
                if text not in release:
                    found.add(text)
    return found


def _quoted(hint: str, constants: set[str]) -> list[str]:
    return [c for c in constants if re.search(r"(?<![\w.])" + re.escape(c) + r"(?![\w.])", hint)]


@pytest.mark.parametrize("aid", Course(ROOT).assignment_ids())
def test_no_hint_names_a_hidden_check_or_quotes_a_hidden_input(aid):
    names, constants = _hidden_names(aid), _hidden_constants(aid)
    assert names and constants, f"{aid}: nothing hidden found (the test would be vacuous)"
    planted = sorted(constants)[len(constants) // 2]
    assert _quoted(f"Check what your code does with {planted}, then.", constants)  # the scan finds a quote
    for name, m in mistakes.load(ROOT, aid).items():
        assert not [n for n in names if n in m.hint], f"{aid} {name!r}: its hint names a hidden check"
        assert not _quoted(m.hint, constants), \
            f"{aid} {name!r}: its hint quotes what only the hidden checks hold: {_quoted(m.hint, constants)}"
