"""What every unit's assignment promises, tested the same way for each unit.

A unit's test file subclasses :class:`UnitContract` and fills in the class
attributes; the tests below then grade, end to end as a student's submission
would be graded (structure check, sandboxed worker, hidden checks):

- the solution, typed into the released notebook: full marks;
- the released notebook, unchanged: zero on every check, without crashing;
- each known mistake (``autograder/<id>/mistakes.py``: the solution with one
  function swapped for a wrong version): the checks written to catch it score
  0, their messages hold no code, and what `lmcourse report` makes of its
  grade is that mistake (its signature matches exactly); an honest notebook
  matches no mistake, and every mistake's hint is advice, not code.

And, as a student would run it in Jupyter, the solution notebook under nbval
(``pytest --nbval-lax`` in a subprocess, demo cells included): every cell runs,
and each test cell prints its own pass line.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from lmcourse.course import load_release, load_source
from lmcourse.grading import grade_notebook
from lmcourse.grading import notebook as nbmod
from lmcourse.grading import signatures as sig
from lmcourse.grading.report import feedback_html
from lmcourse.grading.result import Result
from lmcourse.instructor import mistakes, notes
from lmcourse.instructor.testing import Edit, released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent


def scores_by_name(result: dict) -> dict[str, float]:
    return {t["name"]: t["score"] for t in result["tests"]}


# pytest's explanation of a failed assertion: never in what a student reads (issue #39)
NOISE = re.compile(r"assert False|where False =|^E\s|\+\s+where ", re.M)
PASS_LINE = "the visible checks pass"  # a test cell's last line prints "<grade_id>: the visible checks pass"
# What nbval compares, on both sides, of a test cell's output: the text with every line but the pass
# line dropped. The other lines (a loss or a cosine after a short training run) depend on floating point.
SANITIZE = f"regex: (?m)^(?!.*: {PASS_LINE}$).*\\n\nreplace: \n"
# `python -m pytest`, except that jsonschema's optional rfc3987_syntax is marked absent before nbval
# imports nbformat (as `notebook.skip_slow_jsonschema_formats` does): two seconds less per notebook.
PYTEST_MAIN = ("import sys; sys.modules.setdefault('rfc3987_syntax', None); import pytest; "
               "sys.exit(pytest.main(sys.argv[1:]))")


def nbval_copy(source, demos: bool = False):
    """The solution source notebook as nbval is to run it (``--nbval-lax``: only tagged cells are compared).

    - a first cell changes to the course root, the working directory the course's tools use;
    - demo cells are tagged ``nbval-skip``, unless `demos` (then they run like given cells: their
      output, a loss or a sample, is not compared, but they must not fail);
    - each visible test cell is tagged ``nbval-check-output`` and holds, as its recorded output, the one
      line it prints when it passes (its other lines are dropped by :data:`SANITIZE`); nothing on
      stderr is expected;
    - every other code cell is unrun, without outputs: it must run without an error, its output is
      not compared.
    """
    import nbformat

    nb = nbformat.from_dict(json.loads(json.dumps(source)))
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in cell.metadata.get("tags", []) if not str(t).startswith("nbval")]
        cell.outputs, cell.execution_count = [], None
        if nbmod.is_demo(cell):
            if not demos:
                tags.append("nbval-skip")
        elif nbmod.role(cell) == "test":
            tags.append("nbval-check-output")
            cell.execution_count = 1
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                   text=f"{nbmod.grade_id(cell)}: {PASS_LINE}\n")]
        cell.metadata["tags"] = tags
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"__import__('os').chdir({str(ROOT)!r})"))  # binds no name
    return nb


@dataclass
class NbvalRun:
    returncode: int
    tail: str  # the end of pytest's output: the failing cell, its source and its traceback or output diff
    cells: dict[str, str]  # nbval's item ("Cell 3": the fourth code cell) -> "passed", "failed" or "skipped"


def run_nbval(nb, directory: Path, name: str = "notebook", timeout: float = 600) -> NbvalRun:
    """Run ``pytest --nbval-lax`` on ``nb`` in a subprocess, stopping at the first failing cell.

    The kernel is ipykernel on this interpreter (``--nbval-current-env``: no kernelspec need be
    installed), started in ``directory``; it inherits the environment (LMCOURSE_DATA_MIRROR), less
    the PYTEST_ADDOPTS and PYTEST_PLUGINS meant for the outer pytest. Only the nbval plugin is
    loaded, and a ``pytest.ini`` of its own keeps the course's pytest settings out.
    """
    import nbformat

    path, ini, sanitize, report = (directory / f"{name}.ipynb", directory / "pytest.ini",
                                   directory / "nbval-sanitize.cfg", directory / "cells.xml")
    nbformat.write(nb, path)
    ini.write_text("[pytest]\n")
    sanitize.write_text(SANITIZE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # nbval alone: hypothesis's plugin takes a second to import
    # One thread in the kernel: beside another test worker on a 2-core machine, torch's OpenMP threads
    # spin against a busy core, and 03's 15-second training cell once ran past nbval's 300 s cell limit.
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-c", PYTEST_MAIN, "-p", "nbval.plugin", "--nbval-lax", "--nbval-current-env",
           "--nbval-sanitize-with", str(sanitize), "--nbval-cell-timeout", "300",
           "-c", str(ini), "--rootdir", str(directory), "-p", "no:cacheprovider",
           "-x", "-q", "--color=no", "--junitxml", str(report), str(path)]
    try:
        proc = subprocess.run(cmd, cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        output = err.stdout if isinstance(err.stdout, str) else (err.stdout or b"").decode(errors="replace")
        pytest.fail(f"nbval ran past {timeout} s:\n{output[-6000:]}")
    cells = {}
    if report.exists():
        for case in ET.parse(report).iter("testcase"):
            found = [s for tag, s in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped"))
                     if case.find(tag) is not None]
            cells[case.get("name")] = found[0] if found else "passed"
    output = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)  # the kernel colours its tracebacks
    return NbvalRun(proc.returncode, output[-6000:], cells)


class UnitContract:
    AID: str
    MAX_SCORE: float
    STUDENT_FUNCTIONS: int  # how many `raise NotImplementedError()` stubs the release holds
    RELEASE_MUST_NOT_CONTAIN: tuple[str, ...] = ()  # tell-tale fragments of the solution
    # variant name -> (function replaced, wrong definition, names of the checks that must score 0): the
    # catalogue's, autograder/<id>/mistakes.py (`lmcourse.instructor.mistakes`)
    VARIANTS: dict[str, tuple[str, "str | Edit | list[Edit]", tuple[str, ...]]] = {}
    # checks too slow to run for every correct alternate (a training run); a known mistake runs every check
    # but its catalogue's LEAVE_OUT, less its own catchers; the solution and the release run everything
    EXPENSIVE: tuple[str, ...] = ()
    # EXPENSIVE checks whose known-wrong variants run only with LMCOURSE_ALL_TRAINING=1 (README, "Tests beyond
    # make test"): a unit whose training proofs do not fit CI says so here
    EXPENSIVE_OPT_IN: tuple[str, ...] = ()
    # correct alternative implementations (other algorithms, not renamings), as a student might write
    # them: alternate name -> {function replaced: its definition, or Edits of the solution's own}.
    # Each must get full marks; the EXPENSIVE checks run only for those named in ALTERNATES_THAT_TRAIN.
    ALTERNATES: dict[str, dict[str, "str | Edit | list[Edit]"]] = {}
    ALTERNATES_THAT_TRAIN: tuple[str, ...] = ()
    # variant -> words its failing check's message must contain: the symptom named, not a neighbour's (issue #40,
    # class 7: "could not see the clipping" for an ignored lr, "zero the gradients" for a wrong loss)
    SYMPTOMS: dict[str, str] = {}
    # whether the solution notebook's nbval run executes the demo cells too (what a student runs from
    # top to bottom); a unit whose demos are too slow for CI says why and sets it False
    RUN_DEMOS: bool = True

    @pytest.fixture(scope="class")
    @classmethod
    def solution_result(cls, tmp_path_factory):
        nb = submission_from_solution(ROOT, cls.AID, tmp_path_factory.mktemp("solution"))
        return grade_notebook(ROOT, cls.AID, nb, tier="cpu")

    def test_release_has_no_solution(self):
        release = load_release(ROOT, self.AID)
        code = "\n".join(nbmod.cell_source(c) for c in release.cells if c.cell_type == "code")
        assert "BEGIN SOLUTION" not in code
        for fragment in self.RELEASE_MUST_NOT_CONTAIN:
            assert fragment not in code, f"{fragment!r} (solution code) is in the release"
        assert code.count("raise NotImplementedError()") == self.STUDENT_FUNCTIONS

    def test_part_headings_state_their_points(self):
        """Each "## Part N — ... (k points)" heading says what its test cells are worth, and every test
        cell sits under a Part heading: the student plans their time by these numbers."""
        release = load_release(ROOT, self.AID)
        points = nbmod.graded_cells(release)
        titles = nbmod.part_titles(release)
        per_part: dict[str, float] = {}
        for gid, worth in points.items():
            assert titles.get(gid), f"test cell {gid} sits under no 'Part' heading"
            per_part[titles[gid]] = per_part.get(titles[gid], 0.0) + worth
        stated = {}
        for title in per_part:
            m = re.search(r"\((\d+(?:\.\d+)?) points?\)\s*$", title)
            assert m, f"the heading {title!r} does not state its points as '(k points)'"
            stated[title] = float(m.group(1))
        assert stated == per_part, f"the headings state {stated}; their test cells are worth {per_part}"
        assert sum(per_part.values()) == self.MAX_SCORE

    @pytest.mark.slow
    def test_test_cells_points_match_checks(self, solution_result):
        cells = nbmod.test_cells(load_release(ROOT, self.AID))
        assert sum(cells.values()) == solution_result["max_score"] == self.MAX_SCORE
        per_cell: dict[str, float] = {}
        for t in solution_result["tests"]:
            per_cell[t["cell"]] = per_cell.get(t["cell"], 0.0) + t["max_score"]
        assert per_cell == {k: float(v) for k, v in cells.items()}

    @pytest.mark.slow
    def test_solution_scores_full_marks(self, solution_result):
        r = solution_result
        failed = {t["name"]: t.get("output", "") for t in r["tests"] if t["score"] < t["max_score"]}
        assert not failed, failed
        assert r["score"] == r["max_score"] == self.MAX_SCORE
        assert r["status"] == "ok"

    @pytest.mark.slow
    def test_solution_notebook_runs_and_its_test_cells_pass(self, tmp_path):
        """What an honest student sees in Jupyter: with the solution typed in, every given cell
        and every visible test cell runs without an error, and each test cell prints its pass
        line; so do the demo cells, which load the corpora and train (unless the unit's
        `RUN_DEMOS` is False). Run by nbval: see :func:`nbval_copy` for what is compared."""
        nb = nbval_copy(load_source(ROOT, self.AID), demos=self.RUN_DEMOS)
        code = [c for c in nb.cells if c.cell_type == "code"]
        checked = {f"Cell {i}": nbmod.grade_id(c) for i, c in enumerate(code)
                   if "nbval-check-output" in c.metadata.get("tags", [])}
        assert list(checked.values()) == list(nbmod.test_cells(load_release(ROOT, self.AID)))
        run = run_nbval(nb, tmp_path, self.AID)
        assert run.returncode == 0, f"nbval failed on the solution notebook:\n{run.tail}"
        # every code cell ran and passed (demo cells too, unless left out); each test cell printed its pass line
        skipped = {f"Cell {i}" for i, c in enumerate(code) if nbmod.is_demo(c) and not self.RUN_DEMOS}
        assert run.cells == {f"Cell {i}": "skipped" if f"Cell {i}" in skipped else "passed"
                             for i in range(len(code))}, run.tail
        assert sum(run.cells[item] == "passed" for item in checked) == len(checked)

    @pytest.mark.slow
    def test_release_scores_zero(self, tmp_path):
        r = grade_notebook(ROOT, self.AID, released_notebook(ROOT, self.AID, tmp_path), tier="cpu")
        assert r["score"] == 0 and r["max_score"] == self.MAX_SCORE
        assert all("NotImplementedError" in t.get("output", "") for t in r["tests"])

    @pytest.fixture(scope="class")
    @classmethod
    def mistake_grades(cls, tmp_path_factory, solution_result):
        """Every known mistake graded as a submission once per unit (`lmcourse.instructor.mistakes.grade_all`);
        the per-mistake tests below read their grade here. Those `_fully_graded` run every check but the slow
        ones of the catalogue's LEAVE_OUT (their signatures are the catalogue's, proven below); the others run
        only their catchers, which is what CI's time allows. The notebook's test cells (what `lmcourse check`'s
        hints are matched on) run only with LMCOURSE_ALL_MISTAKES=1; tests/test_hints.py runs 01's."""
        names = [name for name, (_, _, catchers) in cls.VARIANTS.items() if not cls._opted_out(catchers)]
        every = {t["name"] for t in solution_result["tests"]}
        full = cls._fully_graded()
        return mistakes.grade_all(ROOT, cls.AID, tmp_path_factory.mktemp("mistakes"), tier="cpu", names=names,
                                  exclude=lambda m: None if m.name in full else every - set(cls._proven(m.catches)),
                                  test_cells=os.environ.get("LMCOURSE_ALL_MISTAKES") == "1")

    @classmethod
    def _proven(cls, catchers) -> tuple[str, ...]:
        """The catchers a mistake graded with its catchers only is graded with: under make test, where it has one
        outside the catalogue's LEAVE_OUT (the checks too slow for every mistake: real weights, training runs),
        those only; the slow ones are proven too with LMCOURSE_ALL_MISTAKES=1 (README, "Tests beyond make test").
        A mistake only slow checks catch is graded with them."""
        if os.environ.get("LMCOURSE_ALL_MISTAKES") == "1":
            return tuple(catchers)
        slow = set(mistakes.leave_out(ROOT, cls.AID))
        return tuple(c for c in catchers if c not in slow) or tuple(catchers)

    @classmethod
    def _fully_graded(cls) -> set[str]:
        """The mistakes whose grades run every check (whose attribution is proven): all of them with
        LMCOURSE_ALL_MISTAKES=1 (README, "Tests beyond make test"); in make test, the common mistakes the
        unit's instructor notes teach from (3-8 a unit)."""
        if os.environ.get("LMCOURSE_ALL_MISTAKES") == "1":
            return set(cls.VARIANTS)
        return set(notes.common_mistakes(ROOT, cls.AID))

    @classmethod
    def _opted_out(cls, catchers) -> bool:
        return bool(set(cls._proven(catchers)) & set(cls.EXPENSIVE_OPT_IN)) and \
            os.environ.get("LMCOURSE_ALL_TRAINING") != "1"

    def test_every_mistake_has_a_hint_and_no_code_in_it(self):
        """A hint is advice a student reads beside a failing check: what to look at and why, never code
        (no assignment, indexing, braces or call), and never the solution's or the mistake's own lines."""
        catalogue = mistakes.load(ROOT, self.AID)
        assert list(catalogue) == list(self.VARIANTS)
        module = mistakes.module(ROOT, self.AID)
        assert list(module.HINTS) == list(module.VARIANTS), "HINTS must name the VARIANTS, in their order"
        code = re.compile(r"[=\[\]{};]|\w\(|\.\w+\(")
        special = re.compile(r"\[(?:CLS|SEP|MASK|PAD|UNK)\]")  # BERT's tokens are words of the course, not code
        for name, m in catalogue.items():
            assert m.hint.strip() and len(m.hint) <= 280, f"{name!r}: a hint of 1-280 characters"
            assert not code.search(special.sub("", m.hint)), f"{name!r}: the hint holds code: {m.hint!r}"
            edits = [m.wrong] if isinstance(m.wrong, (str, Edit)) else list(m.wrong)
            for edit in edits:
                for line in ([edit] if isinstance(edit, str) else [edit.old, edit.new]):
                    for fragment in line.splitlines():
                        fragment = fragment.strip()
                        assert len(fragment) < 12 or fragment not in m.hint, f"{name!r}: the hint quotes code"

    @pytest.mark.slow
    def test_known_wrong_variant_is_caught(self, variant, mistake_grades, solution_result):
        function, source, catchers = self.VARIANTS[variant]
        if self._opted_out(catchers):
            pytest.skip(f"{self.AID}: a training-run proof that CI's 30 minutes cannot hold; "
                        "LMCOURSE_ALL_TRAINING=1 runs it")
        r = mistake_grades[variant]
        if isinstance(r, Exception):
            raise r
        scores = scores_by_name(r)
        # every check ran but the slow ones (LEAVE_OUT) this mistake is not written to fail, or only its catchers
        # (its fast ones, where it has any: `_proven`)
        every = {t["name"] for t in solution_result["tests"]}
        if variant in self._fully_graded():
            left_out = set(mistakes.leave_out(ROOT, self.AID)) - set(catchers)
        else:
            catchers = self._proven(catchers)
            left_out = every - set(catchers)
        assert set(scores) == every - left_out
        for name in catchers:
            assert name in scores, f"no check named {name!r}"
            assert scores[name] == 0, f"{variant}: check {name!r} should fail but scored {scores[name]}"
            output = next(t.get("output", "") for t in r["tests"] if t["name"] == name)
            assert output and "def " not in output  # a message, never code
        noise = [t["name"] for t in r["tests"] if NOISE.search(t.get("output", ""))]
        assert not noise, f"{variant}: pytest's assertion rewrite reached the student in {noise}"
        assert r["score"] < r["max_score"] and r["status"] != "grader-error", r["message"]
        left_out_points = sum(t["max_score"] for t in solution_result["tests"] if t["name"] in left_out)
        assert math.isclose(r["max_score"] + left_out_points, self.MAX_SCORE)

    @pytest.mark.slow
    def test_a_mistake_s_message_names_its_symptom(self, mistake_grades):
        """The message a student reads for each mistake of SYMPTOMS says what is wrong in its own words."""
        for variant, words in self.SYMPTOMS.items():
            r = mistake_grades.get(variant)
            if r is None or isinstance(r, Exception):
                pytest.fail(f"{variant!r} was not graded: {r!r}")
            catchers = self.VARIANTS[variant][2]
            outputs = [t.get("output", "") for t in r["tests"] if t["name"] in catchers and t["score"] == 0]
            assert any(words in out for out in outputs), (variant, words, outputs)

    @pytest.mark.slow
    def test_a_graded_mistake_is_attributed_to_itself(self, variant, mistake_grades):
        """What `lmcourse report` says of a submission with this mistake: its own signature is the top match
        (exact), shared only with mistakes whose grades are the same (those it cannot be told apart from)."""
        if variant not in mistake_grades:
            pytest.skip(f"{variant!r} is graded only with LMCOURSE_ALL_TRAINING=1")
        if variant not in self._fully_graded():
            pytest.skip("make test grades this mistake with its catchers only; LMCOURSE_ALL_MISTAKES=1 proves "
                        "its attribution (the common mistakes of the instructor notes are proven in every run)")
        if isinstance(mistake_grades[variant], Exception):
            pytest.fail(f"{variant!r} could not be graded: {mistake_grades[variant]}")
        found = mistakes.signatures_from(ROOT, self.AID, mistake_grades)
        top = sig.best(sig.matches(mistake_grades[variant]["tests"], found))
        assert top and top[0].exact, f"{variant!r} matches no known mistake exactly"
        assert variant in [m.mistake for m in top], \
            f"{variant!r} is attributed to {[m.mistake for m in top]}"
        # and its student reads its hint as the likely cause, unless too many mistakes fail as it does
        graded = Result.loads(mistake_grades[variant].dumps())
        sig.attach(graded, found)
        hint = mistakes.load(ROOT, self.AID)[variant].hint
        if len(sig.best(sig.matches(sig.entries(graded), found))) <= sig.MOST_HINTS:
            assert hint in [h["hint"] for h in graded.hints or []], (variant, graded.hints)
            assert html.escape(hint) in feedback_html(graded, "s")
        else:
            assert not graded.hints

    @pytest.mark.slow
    def test_an_honest_notebook_matches_no_mistake(self, solution_result, mistake_grades):
        unknown = set(mistakes.leave_out(ROOT, self.AID)) - {t["name"] for t in solution_result["tests"]}
        assert not unknown, f"LEAVE_OUT names no check of {self.AID}: {unknown}"
        graded = {n: r for n, r in mistake_grades.items() if not isinstance(r, Exception)}
        found = mistakes.signatures_from(ROOT, self.AID, graded)
        assert sig.matches(solution_result["tests"], found) == []
        assert sig.likely_causes(solution_result, found) == []

    @pytest.mark.slow
    def test_correct_alternate_gets_full_marks(self, alternate, tmp_path):
        nb = submission_from_solution(ROOT, self.AID, tmp_path, replace=self.ALTERNATES[alternate])
        left_out = set() if alternate in self.ALTERNATES_THAT_TRAIN else set(self.EXPENSIVE)
        r = grade_notebook(ROOT, self.AID, nb, tier="cpu", exclude=left_out)
        failed = {t["name"]: t.get("output", "") for t in r["tests"] if t["score"] < t["max_score"]}
        assert not failed, f"{alternate}: a correct implementation lost points: {failed}"
        assert r["status"] == "ok" and r["score"] == r["max_score"] > 0


def parametrize_variants(metafunc) -> None:
    """pytest_generate_tests hook: one test per known-wrong variant, and per correct alternate, of the unit's class."""
    if metafunc.cls is None or not issubclass(metafunc.cls, UnitContract):
        return
    if "variant" in metafunc.fixturenames:
        metafunc.parametrize("variant", list(metafunc.cls.VARIANTS))
    if "alternate" in metafunc.fixturenames:
        metafunc.parametrize("alternate", list(metafunc.cls.ALTERNATES))
