"""`lmcourse similarity`: copies rank first, honest students written independently stay below the threshold.

For two units, a planted cohort: three honest notebooks written independently (tests/similarity_cohorts.py), a
copy of one of them with every local name renamed, comments dropped, reformatted and its definitions and methods
reordered, a notebook that copied only one function, the untouched release, an unreadable file and a link. The
instructor's solution is a party too.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import nbformat
import pytest

from axe import audit, blocking, describe
from lmcourse.grading import notebook as nbmod
from lmcourse.instructor import similarity as sim
from similarity_cohorts import HONEST, disguised, keep_names, notebook, release_of

ROOT = Path(__file__).resolve().parent.parent
# The function lifted whole into an otherwise empty notebook, per unit: a long one and a middle-sized one.
LIFTED = {"04-attention": "MultiHeadAttention", "01-ngrams": "ngram_counts"}


@pytest.fixture(scope="module", params=sorted(HONEST))
def cohort(request, tmp_path_factory):
    unit = request.param
    folder = tmp_path_factory.mktemp(f"cohort-{unit}")
    subs = folder / "submitted"
    honest = HONEST[unit]
    for student, answers in honest.items():
        notebook(unit, answers, subs / f"{student}.ipynb")
    keep = keep_names(unit)
    # rena: ana's notebook renamed, reformatted and reordered, in the nbgrader layout
    notebook(unit, {n: disguised(c, keep) for n, c in honest["ana"].items()},
              subs / "rena" / unit / f"{unit}.ipynb", reverse=True)
    notebook(unit, {LIFTED[unit]: honest["ana"][LIFTED[unit]]}, subs / "dora.ipynb")  # one function lifted
    notebook(unit, {}, subs / "eve.ipynb")  # the release, untouched
    (subs / "finn.ipynb").write_text('{"cells": [')  # not a notebook
    os.symlink(subs / "ana.ipynb", subs / "gus.ipynb")  # a link to another student's work
    marker = folder / "ran"
    notebook(unit, honest["ben"], subs / "hal.ipynb")
    hal = nbformat.read(subs / "hal.ipynb", as_version=4)
    for cell in hal.cells:  # code that would leave a mark if anything ran it
        if nbmod.role(cell) == "solution":
            cell["source"] = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n" + cell["source"]
    nbformat.write(hal, subs / "hal.ipynb")
    result = sim.run(ROOT, unit, subs, folder / "out")
    return unit, result, folder


def _pair(result, a, b):
    return next((p for p in result.pairs if {p.a, p.b} == {a, b}), None)


def test_the_copies_rank_first_and_the_honest_pairs_stay_below(cohort):
    unit, result, _ = cohort
    copies = [{"ana", "rena"}, {"ana", "dora"}, {"dora", "rena"}]
    flagged = [{p.a, p.b} for p in result.flagged()]
    # hal is ben with a line added to each answer cell: ben's copy too, and nothing else
    assert sorted(map(sorted, flagged)) == sorted(map(sorted, copies + [{"ben", "hal"}])), \
        [(p.a, p.b, round(p.score, 2)) for p in result.pairs[:8]]
    assert [{p.a, p.b} for p in result.pairs[:4]] == flagged  # the copies are the top of the ranking
    renamed = _pair(result, "ana", "rena")
    assert renamed.score > 0.9 and len(renamed.flagged(result.threshold)) >= 3
    ranking = [{p.a, p.b} for p in result.pairs]
    assert ranking.index({"ana", "rena"}) < ranking.index({"ana", "dora"})  # the whole notebook before one function
    lifted = _pair(result, "ana", "dora")
    assert [m.unit for m in lifted.flagged(result.threshold)] == [LIFTED[unit]]
    honest = ["ana", "ben", "chen", sim.SOLUTION]
    below = {(a, b): round(_pair(result, a, b).score, 2) if _pair(result, a, b) else 0.0
             for i, a in enumerate(honest) for b in honest[i + 1:]}
    assert all(score < result.threshold for score in below.values()), below


def test_the_release_and_the_unreadable_are_listed_not_fatal(cohort):
    unit, result, folder = cohort
    assert not any("eve" in (p.a, p.b) for p in result.pairs)  # nothing of the release counts
    problems = {p.name: p.problem for p in result.parties if p.problem}
    assert set(problems) == {"finn", "gus"}, problems
    assert "not-json" in problems["finn"] and "link" in problems["gus"]
    rows = {r["student"]: r for r in csv.DictReader(open(folder / "out" / "students.csv"))}
    assert rows["finn"]["read"] == "0" and rows["eve"]["read"] == "1" and rows["eve"]["judged_units"] == "0"
    page = (folder / "out" / "index.html").read_text()
    assert "Not compared" in page and "finn" in page and "gus" in page


def test_student_code_is_never_run(cohort):
    _, result, folder = cohort
    assert not (folder / "ran").exists()
    assert _pair(result, "ben", "hal") is not None  # hal was read and compared


def test_the_page_shows_each_copied_region_side_by_side_and_the_csv_ranks_pairs(cohort):
    unit, result, folder = cohort
    page = (folder / "out" / "index.html").read_text()
    assert page.count("<div class='side'>") == sum(len(p.flagged(result.threshold)) for p in result.flagged())
    assert page.count("<mark>") >= 2 * len(result.flagged())
    assert "<script" not in page and "http" not in page  # self-contained: no remote asset, nothing run
    rows = list(csv.DictReader(open(folder / "out" / "pairs.csv")))
    assert [int(r["rank"]) for r in rows] == list(range(1, len(result.pairs) + 1))
    flags, at = [r["flagged"] for r in rows], [int(r["units_at_threshold"]) for r in rows]
    assert flags == sorted(flags, reverse=True) and at == sorted(at, reverse=True)  # copies of more units first
    assert {frozenset((r["student_a"], r["student_b"])) for r in rows if r["flagged"] == "1"} == \
        {frozenset((p.a, p.b)) for p in result.flagged()}
    units = list(csv.DictReader(open(folder / "out" / "functions.csv")))
    assert units and {r["unit"] for r in units} <= nbmod.answer_names(release_of(unit))


def test_the_command_line(tmp_path, capsys):
    from lmcourse import cli

    subs = tmp_path / "subs"
    notebook("04-attention", HONEST["04-attention"]["ana"], subs / "ana.ipynb")
    notebook("04-attention", HONEST["04-attention"]["ana"], subs / "bo.ipynb")
    assert cli.main(["similarity", "04-attention", str(subs), "--out", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out
    assert "2 submissions, 0 not compared" in said and "ana and bo" in said and (tmp_path / "out" / "index.html").exists()
    assert cli.main(["similarity", "04-attention", str(tmp_path / "nope"), "--out", str(tmp_path / "o2")]) != 0
    assert cli.main(["similarity", "04-attention", str(subs), "--out", str(tmp_path / "o3"), "--threshold", "3"]) != 0


def test_a_posted_solution_copied_by_much_of_the_class_still_shows(tmp_path):
    """Four of six students hand in the solution, disguised: its code is then an idiom between students (more
    than a quarter hold it), and each of them is still listed against the solution."""
    unit, subs = "04-attention", tmp_path / "subs"
    keep = keep_names(unit)
    solution = sim.solution_units(ROOT, unit)
    assert set(solution) == nbmod.answer_names(release_of(unit))
    for student in ("ana", "ben"):
        notebook(unit, HONEST[unit][student], subs / f"{student}.ipynb")
    copiers = ["kim", "lea", "max", "ned"]
    for student in copiers:
        notebook(unit, {u: disguised(code, keep) for u, code in solution.items()}, subs / f"{student}.ipynb")
    result = sim.run(ROOT, unit, subs, tmp_path / "out")
    against_solution = {p.a if p.b == sim.SOLUTION else p.b for p in result.flagged() if sim.SOLUTION in (p.a, p.b)}
    assert against_solution == set(copiers)
    assert not any({"ana", "ben"} & {p.a, p.b} for p in result.flagged())


def test_a_page_of_many_pairs_shows_the_closest_and_points_to_the_csv(cohort, monkeypatch):
    _, result, folder = cohort
    monkeypatch.setattr(sim, "PAGE_PAIRS", 2)
    page = sim._page(result)
    assert page.count("<div class='side'>") == sum(len(p.flagged(result.threshold)) for p in result.flagged()[:2])
    assert f"the other {len(result.flagged()) - 2} are in pairs.csv" in page


def test_the_page_in_a_browser(cohort):
    """Chromium at 1280 px: the ranked table and the highlighted regions are on screen; a screenshot is kept
    (book/_build/instructor-screenshots/similarity-UNIT.png)."""
    from lmcourse.instructor.slides import CHROMIUM_ARGS, chromium

    unit, result, folder = cohort
    binary = chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (tools/ensure-system-deps.sh); test_browser.py says the same")
    from playwright.sync_api import sync_playwright

    shot = ROOT / "book" / "_build" / "instructor-screenshots" / f"similarity-{unit}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=binary, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((folder / "out" / "index.html").as_uri())
        assert page.locator("#ranking tr").count() == len(result.flagged()) + 1
        page.locator("#pair-1").scroll_into_view_if_needed()
        assert page.locator("mark").first.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # no sideways scrolling
        page.screenshot(path=str(shot), full_page=False)
        violations = blocking(audit(page))
        browser.close()
    assert shot.stat().st_size > 10_000
    assert not violations, f"the similarity page fails WCAG checks:\n{describe(violations)}"
