"""`lmcourse report`: what a cohort got wrong, and which known mistake each submission looks like.

The matching itself (`lmcourse.grading.signatures`) is tested on plain data first; then a cohort of 30
submissions of 01-ngrams (honest ones, known mistakes, a notebook with two mistakes, the untouched release,
grader errors, a damaged file), graded for real, is read back from each layout the command accepts (a
``lmcourse grade --out`` folder, Gradescope results, Gradescope's export) and rendered; the page is opened
in Chromium and its counts read off the page. That every known mistake of every unit is attributed to
itself is the unit contract's (tests/unit_contract.py).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from axe import audit, blocking, describe
from lmcourse.grading.result import Result, Status
from lmcourse.grading.signatures import Signature, best, matches, signature
from lmcourse.instructor import batch, cohort, mistakes
from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
AID = "01-ngrams"


def _tests(**outcomes) -> list[dict]:
    """Check results: name -> None (passed) or the kind it failed with."""
    return [{"name": n, "score": 0.0 if k else 1.0, "max_score": 1.0, "kind": k} for n, k in outcomes.items()]


# ------------------------------------------------------------------ matching, on plain data


def test_a_mistakes_own_failures_match_it_exactly_and_an_honest_result_matches_nothing():
    a = signature("A", _tests(x="assertion", y="assertion", z=None))
    b = signature("B", _tests(x="assertion", y=None, z=None))
    found = matches(_tests(x="assertion", y="assertion", z=None), [a, b])
    assert [m.mistake for m in found] == ["A", "B"] and found[0].exact and not found[1].exact
    assert found[1].similarity == 0.5
    assert matches(_tests(x=None, y=None, z=None), [a, b]) == []


def test_a_failure_of_another_kind_counts_half_and_a_distant_one_is_not_named():
    a = signature("A", _tests(x="assertion", y="assertion", p=None, q=None))
    (m,) = matches(_tests(x="exception", y="assertion", p=None, q=None), [a])
    assert m.similarity == 0.75 and not m.exact
    assert matches(_tests(x="assertion", y=None, p="assertion", q="assertion"), [a]) == []  # 1/4 < 1/2
    # checks the mistake's grade did not run (a training run it leaves out) are not compared
    (m,) = matches(_tests(x="assertion", y="assertion", train="assertion"), [a])
    assert m.exact


def test_a_mistake_whose_failures_the_submission_did_not_run_is_less_certain():
    """B also fails a training run that the submission's grade left out: over the checks both ran, A and B
    look the same, and A (every failure seen) comes first."""
    a = signature("A", _tests(x="assertion", train=None))
    b = signature("B", _tests(x="assertion", train="assertion"))
    found = matches(_tests(x="assertion"), [b, a])
    assert [m.mistake for m in best(found)] == ["A"] and found[1].coverage == 0.5


def test_mistakes_with_one_signature_share_the_top():
    a, b = signature("A", _tests(x="assertion")), signature("B", _tests(x="assertion"))
    assert {m.mistake for m in best(matches(_tests(x="assertion"), [a, b]))} == {"A", "B"}


def test_signatures_read_gradescope_results_and_survive_json():
    tests = [{"name": "x", "score": 0, "max_score": 2, "extra_data": {"kind": "timeout"}}]
    s = signature("A", tests, hint="look at the loop")
    assert s.failing == {"x": "timeout"}
    assert Signature.from_json(json.loads(json.dumps(s.to_json()))) == s


def test_signatures_are_cached_per_course_version(tmp_path, monkeypatch):
    """Made once per course version: a second call grades nothing; a changed catalogue grades again."""
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    course = tmp_path / "course"
    for part in ("solutions", "assignments", "autograder"):
        shutil.copytree(ROOT / part / AID, course / part / AID)
    calls = []

    def fake_grade_all(root, aid, dest, **kwargs):
        calls.append(aid)
        return {name: {"status": "ok", "tests": _tests(**{m.catches[0]: "assertion"}), "message": "graded"}
                for name, m in mistakes.load(root, aid).items()}

    monkeypatch.setattr(mistakes, "grade_all", fake_grade_all)
    first = mistakes.signatures(course, AID)
    assert len(calls) == 1 and len(first) == len(mistakes.load(course, AID))
    assert mistakes.signatures(course, AID) == first and len(calls) == 1
    catalogue = course / "autograder" / AID / "mistakes.py"
    catalogue.write_text(catalogue.read_text() + "\n# a new hint\n")
    mistakes.signatures(course, AID)
    assert len(calls) == 2


def test_a_mistake_that_cannot_be_graded_is_the_graders_error_not_a_hole():
    from lmcourse.errors import GraderError

    graded = {name: {"status": "ok", "tests": _tests(x="assertion"), "message": "graded"}
              for name in mistakes.load(ROOT, AID)}
    graded[next(iter(graded))] = ValueError("the edit no longer applies")
    with pytest.raises(GraderError, match="could not be graded.*no longer applies"):
        mistakes.signatures_from(ROOT, AID, graded)


def test_messages_fold_their_numbers():
    assert cohort.message_kind("differs by up to 0.117 at (3, 4)\nmore") == cohort.message_kind(
        "differs by up to 2e-05 at (1, 0)")
    assert cohort.histogram([0, 5, 10, 10], 10, bins=2) == [(0, 5, 1), (5, 10, 3)]


# ------------------------------------------------------------------ a cohort graded for real


MISTAKES = ("sentence_probs forgets the <EOS>", "bits computed with log base 10", "sampling ignores the seed",
            "vocabulary ties not broken alphabetically")
# Who the 30 submissions are: honest ones, four of each mistake, one notebook with two mistakes at once,
# one untouched release, three grader errors, and one damaged results.json (not a submission: a file)
COHORT = ([("honest", f"h{i:02d}") for i in range(9)] + [(m, f"m{j}{i}") for j, m in enumerate(MISTAKES)
                                                          for i in range(4)]
          + [("mixed", "mixed01"), ("release", "release01")] + [("error", f"e{i}") for i in range(3)])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Each distinct notebook graded once (identical notebooks grade identically: the 30 submissions are 8
    notebooks), and the signatures of the four mistakes from their grades."""
    tmp = tmp_path_factory.mktemp("cohort")
    catalogue = mistakes.load(ROOT, AID)
    results = {}
    for name, r in mistakes.grade_all(ROOT, AID, tmp / "mistakes", names=list(MISTAKES)).items():
        assert not isinstance(r, Exception), r
        results[name] = r
    from lmcourse.grading import grade_notebook

    results["honest"] = grade_notebook(ROOT, AID, submission_from_solution(ROOT, AID, tmp / "honest"), tier="cpu")
    a, c = catalogue[MISTAKES[0]], catalogue[MISTAKES[2]]
    both = submission_from_solution(ROOT, AID, tmp / "mixed", replace={a.function: a.wrong, c.function: c.wrong})
    results["mixed"] = grade_notebook(ROOT, AID, both, tier="cpu")
    results["release"] = grade_notebook(ROOT, AID, released_notebook(ROOT, AID, tmp / "release"), tier="cpu")
    results["error"] = Result.failed(AID, Status.GRADER_ERROR, "the sandbox did not start: bubblewrap is missing")
    sigs = mistakes.signatures_from(ROOT, AID, {m: results[m] for m in MISTAKES})
    return results, sigs


def _batch_folder(results, dest: Path) -> Path:
    for what, student in COHORT:
        batch.write_student_files(dest, student, Result.loads(results[what].dumps()))
    (dest / "students" / "zz-damaged").mkdir(parents=True)
    (dest / "students" / "zz-damaged" / "results.json").write_text('{"score": ')
    return dest


def test_the_report_counts_the_cohort(graded, tmp_path):
    results, sigs = graded
    s = cohort.summarise(cohort.collect(_batch_folder(results, tmp_path / "grades"), AID), sigs)
    assert (s.total, len(s.graded), len(s.grader_errors), s.unreadable) == (29 + 1, 27, 3, ["students/zz-damaged/results.json"])
    by_name = {m["name"]: m for m in s.mistakes}
    for j, m in enumerate(MISTAKES):
        assert sorted(by_name[m]["exact"]) == [f"m{j}{i}" for i in range(4)], m
    # the notebook with two mistakes is explained by one of them (the closest), not exactly
    assert s.attribution["mixed01"]["mistakes"][0] in (MISTAKES[0], MISTAKES[2])
    assert not s.attribution["mixed01"]["exact"]
    # an honest notebook is never attributed; the untouched release is unexplained: nothing is written
    assert not any(w.startswith("h") for w in s.attribution) and "release01" in s.unexplained
    assert s.scores.count(31.0) == 9 and len(s.seconds) == 27
    checks = {c.name: c for c in s.checks}
    sentence_probs_check = next(n for n in checks if n.startswith("sentence_probs"))
    assert checks[sentence_probs_check].failed == 4 + 1 + 1  # its mistake, the mixed notebook, the release
    assert checks[sentence_probs_check].unwritten == 1  # the release


def test_every_layout_reads_as_the_same_cohort(graded, tmp_path):
    """A Slurm or local batch folder, Gradescope's results.json per submission, and Gradescope's export."""
    results, sigs = graded
    local = cohort.summarise(cohort.collect(_batch_folder(results, tmp_path / "grades"), AID), sigs)
    per_folder, export = tmp_path / "gradescope", tmp_path / "export"
    meta = {}
    for what, student in COHORT:
        data = json.loads(Result.loads(results[what].dumps()).dumps(gradescope=True))
        (per_folder / student).mkdir(parents=True)
        (per_folder / student / "results.json").write_text(json.dumps(data))
        meta[f"submission_{student}"] = {":submitters": [{":name": student.upper(), ":sid": student}],
                                         ":score": data["score"], ":results": _ruby(data)}
    export.mkdir()
    import yaml

    (export / "submission_metadata.yml").write_text(yaml.safe_dump(meta))
    for folder in (per_folder, export):
        other = cohort.summarise(cohort.collect(folder, AID), sigs)
        assert (other.total, len(other.graded), len(other.grader_errors)) == (30, 27, 3), folder
        assert sorted(other.scores) == sorted(local.scores)
        assert {m["name"]: len(m["exact"]) for m in other.mistakes} == \
            {m["name"]: len(m["exact"]) for m in local.mistakes}
        assert {c.name: c.failed for c in other.checks} == {c.name: c.failed for c in local.checks}


def _ruby(value):
    """Gradescope's metadata keys are Ruby symbols (``:score``)."""
    if isinstance(value, dict):
        return {f":{k}": _ruby(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ruby(v) for v in value]
    return value


def test_the_page_in_chromium(graded, tmp_path):
    """The page as an instructor opens it: counts on the page, nothing fetched, every name escaped; its CSVs."""
    from playwright.sync_api import sync_playwright

    from lmcourse.instructor import slides

    results, sigs = graded
    grades = _batch_folder(results, tmp_path / "grades")
    batch.write_student_files(grades, "x-late", Result.loads(results[MISTAKES[1]].dumps()))
    page, summary = cohort.build(ROOT, grades, AID, signatures=sigs)
    chromium = slides.chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (make test installs it)")
    requests = []
    shot = ROOT / "book" / "_build" / "report-screenshots" / f"{AID}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True)
        view = browser.new_page(viewport={"width": 1280, "height": 900})
        view.on("request", lambda r: requests.append(r.url))
        view.goto(page.as_uri(), wait_until="load")
        counts = view.eval_on_selector("#counts", "e => ({...e.dataset})")
        bars = view.eval_on_selector_all("rect.bar", "es => es.map(e => +e.dataset.count)")
        exact = view.eval_on_selector_all("#mistakes tr[data-mistake]",
                                          "es => Object.fromEntries(es.map(e => [e.dataset.mistake, +e.dataset.exact]))")
        failed = view.eval_on_selector_all("#checks tr[data-check]", "es => es.map(e => +e.dataset.failed)")
        errors = view.eval_on_selector_all("#grader-errors tbody tr", "es => es.length")
        view.screenshot(path=str(shot), full_page=True)
        violations = blocking(audit(view))  # axe-core, injected inline: no request
        browser.close()
    assert not violations, f"the cohort page fails WCAG checks:\n{describe(violations)}"
    assert requests == [page.as_uri()], requests  # the page alone: no script, no remote asset
    assert counts == {"total": "31", "graded": "28", "graderErrors": "3", "unreadable": "1"}
    assert sum(bars) == 28 and len(bars) == cohort.BINS
    assert exact[MISTAKES[1]] == 5 and exact[MISTAKES[0]] == 4  # x-late has the log-10 bits too
    assert failed == sorted(failed, reverse=True) and errors == 3
    rows = list(csv.DictReader(page.with_name(cohort.STUDENTS_CSV).open()))
    assert len(rows) == 31 and {r["student"] for r in rows if r["status"] == "grader-error"} == {"e0", "e1", "e2"}
    assert {r["mistake"] for r in rows if r["student"].startswith("m1")} == {MISTAKES[1]}
    assert all(r["score"] == "" for r in rows if r["status"] == "grader-error")  # never a grade


def test_hostile_student_ids_and_messages_are_escaped(graded, tmp_path):
    results, sigs = graded
    r = Result.loads(results[MISTAKES[0]].dumps())
    r.tests[0].output = "<script>alert(1)</script> differs by 1"
    r.tests[0].score = 0
    c = cohort.Cohort(AID, [cohort.Submission("<b>x</b>", r, "x")], [], "test")
    text = cohort.render(cohort.summarise(c, sigs))
    assert "<script>" not in text and "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text


def test_the_command(graded, tmp_path, capsys):
    from lmcourse.cli import main

    results, _ = graded
    grades = _batch_folder(results, tmp_path / "grades")
    assert main(["report", AID, str(grades), "--no-mistakes"]) == 0
    out = capsys.readouterr().out
    assert "30 submissions (27 graded, 3 grader errors)" in out and (grades / "report.html").is_file()
    assert (grades / cohort.CHECKS_CSV).is_file() and (grades / cohort.STUDENTS_CSV).is_file()
    assert main(["report", AID, str(tmp_path / "nowhere")]) == 1
