"""What every unit's assignment promises, tested the same way for each unit.

A unit's test file subclasses :class:`UnitContract` and fills in the class
attributes; the tests below then grade, end to end as a student's submission
would be graded (structure check, sandboxed worker, hidden checks):

- the solution, typed into the released notebook: full marks;
- the released notebook, unchanged: zero on every check, without crashing;
- each known-wrong variant (the solution with one function swapped for a
  wrong version): the checks written to catch it score 0, and their messages
  hold no code.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lmcourse.grading import grade_notebook
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.testing import Edit, released_notebook, submission_from_solution  # noqa: F401 (Edit: the type of variants)

ROOT = Path(__file__).resolve().parent.parent


def scores_by_name(result: dict) -> dict[str, float]:
    return {t["name"]: t["score"] for t in result["tests"]}


class UnitContract:
    AID: str
    MAX_SCORE: float
    STUDENT_FUNCTIONS: int  # how many `raise NotImplementedError()` stubs the release holds
    RELEASE_MUST_NOT_CONTAIN: tuple[str, ...] = ()  # tell-tale fragments of the solution
    # variant name -> (function replaced, wrong definition, names of the checks that must score 0)
    VARIANTS: dict[str, tuple[str, "str | Edit | list[Edit]", tuple[str, ...]]] = {}
    # checks too slow to run for every variant (a training run): left out of a variant's grade
    # unless the variant is meant to fail them; the solution and the release run everything
    EXPENSIVE: tuple[str, ...] = ()

    @pytest.fixture(scope="class")
    @classmethod
    def solution_result(cls, tmp_path_factory):
        nb = submission_from_solution(ROOT, cls.AID, tmp_path_factory.mktemp("solution"))
        return grade_notebook(ROOT, cls.AID, nb, tier="cpu")

    def test_release_has_no_solution(self):
        release = nbmod.load_release(ROOT, self.AID)
        code = "\n".join(nbmod.cell_source(c) for c in release.cells if c.cell_type == "code")
        assert "BEGIN SOLUTION" not in code
        for fragment in self.RELEASE_MUST_NOT_CONTAIN:
            assert fragment not in code, f"{fragment!r} (solution code) is in the release"
        assert code.count("raise NotImplementedError()") == self.STUDENT_FUNCTIONS

    @pytest.mark.slow
    def test_test_cells_points_match_checks(self, solution_result):
        cells = nbmod.test_cells(nbmod.load_release(ROOT, self.AID))
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
    def test_solution_notebook_runs_and_its_test_cells_pass(self):
        """What an honest student sees in Jupyter: with the solution typed in, every given cell
        and every visible test cell runs without an error (demo cells, which load corpora and
        train, are left out)."""
        import nbclient
        import nbformat

        source = nbmod.load_source(ROOT, self.AID)
        nb = nbformat.v4.new_notebook(metadata=source.metadata)
        nb.cells = [c for c in source.cells if "demo" not in c.metadata.get("tags", [])]
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=False,
                                         resources={"metadata": {"path": str(ROOT)}})
        client.execute()  # raises CellExecutionError, naming the cell, on the first failure
        printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        cells = nbmod.test_cells(nbmod.load_release(ROOT, self.AID))
        assert printed.count("the visible checks pass") == len(cells), printed[-2000:]

    @pytest.mark.slow
    def test_release_scores_zero(self, tmp_path):
        r = grade_notebook(ROOT, self.AID, released_notebook(ROOT, self.AID, tmp_path), tier="cpu")
        assert r["score"] == 0 and r["max_score"] == self.MAX_SCORE
        assert all("NotImplementedError" in t.get("output", "") for t in r["tests"])

    @pytest.mark.slow
    def test_known_wrong_variant_is_caught(self, variant, tmp_path, solution_result):
        function, source, catchers = self.VARIANTS[variant]
        nb = submission_from_solution(ROOT, self.AID, tmp_path, replace={function: source})
        left_out = set(self.EXPENSIVE) - set(catchers)
        r = grade_notebook(ROOT, self.AID, nb, tier="cpu", exclude=left_out)
        scores = scores_by_name(r)
        assert not left_out & set(scores) and r["not_run"] == len(left_out)
        for name in catchers:
            assert name in scores, f"no check named {name!r}"
            assert scores[name] == 0, f"{variant}: check {name!r} should fail but scored {scores[name]}"
            output = next(t.get("output", "") for t in r["tests"] if t["name"] == name)
            assert output and "def " not in output  # a message, never code
        assert r["score"] < r["max_score"]
        left_out_points = sum(t["max_score"] for t in solution_result["tests"] if t["name"] in left_out)
        assert math.isclose(r["max_score"] + left_out_points, self.MAX_SCORE)


def parametrize_variants(metafunc) -> None:
    """pytest_generate_tests hook: one test per known-wrong variant of the unit's class."""
    if "variant" in metafunc.fixturenames and metafunc.cls is not None and issubclass(metafunc.cls, UnitContract):
        metafunc.parametrize("variant", list(metafunc.cls.VARIANTS))
