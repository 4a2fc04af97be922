"""`lmcourse similarity`: copies rank first, honest students written independently stay below the threshold.

For two units, a planted cohort: three honest notebooks written independently (tests/similarity_cohorts.py), a
copy of one of them with every local name renamed, comments dropped, reformatted and its definitions and methods
reordered, a notebook that copied only one function, the untouched release, an unreadable file and a link. The
instructor's solution is a party too.
"""

from __future__ import annotations

import ast
import builtins
import copy
import csv
import os
from pathlib import Path

import nbformat
import pytest

from lmcourse.course import Course
from lmcourse.grading import notebook as nbmod
from lmcourse.instructor import similarity as sim
from similarity_cohorts import HONEST

ROOT = Path(__file__).resolve().parent.parent
# The function lifted whole into an otherwise empty notebook, per unit: a long one and a middle-sized one.
LIFTED = {"04-attention": "MultiHeadAttention", "01-ngrams": "ngram_counts"}


def _release(unit: str):
    return Course(ROOT).assignment(unit).load_release()


def _replace_definitions(cell_source: str, code: dict[str, str], reverse: bool = False) -> str:
    """The release's answer cell with the definitions named in `code` replaced (the others kept as stubs)."""
    tree = ast.parse(cell_source)
    lines = cell_source.splitlines()
    pieces, last = [], 0
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for node in defs:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        pieces.append(("keep", "\n".join(lines[last:first])))
        pieces.append(("def", code.get(node.name, "\n".join(lines[first:node.end_lineno])).strip("\n")))
        last = node.end_lineno
    pieces.append(("keep", "\n".join(lines[last:])))
    if reverse:
        order = [p for p in pieces if p[0] == "def"][::-1]
        pieces = [order.pop(0) if kind == "def" else (kind, text) for kind, text in pieces]
    return "\n\n".join(text for _, text in pieces if text.strip()) + "\n"


def _notebook(unit: str, answers: dict[str, str], path: Path, reverse: bool = False) -> Path:
    nb = copy.deepcopy(_release(unit))
    for cell in nb.cells:
        if nbmod.role(cell) == "solution" and nbmod.stub_names(cell) & set(answers):
            cell["source"] = _replace_definitions(nbmod.cell_source(cell), answers, reverse)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.from_dict(nb), path)
    return path


class _Rename(ast.NodeTransformer):
    """Renames every local name and argument (not the graded names, the release's globals or builtins)."""

    def __init__(self, keep: set[str]):
        self.keep, self.names = keep, {}

    def _new(self, name: str) -> str:
        if name in self.keep:
            return name
        return self.names.setdefault(name, f"x{len(self.names)}")

    def visit_Name(self, node):
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._new(node.arg)
        return node

    def visit_ClassDef(self, node):  # methods in another order
        self.generic_visit(node)
        node.body = node.body[::-1]
        return node


def _disguised(code: str, keep: set[str]) -> str:
    """Renamed, comments and docstrings gone, reformatted by ast.unparse, methods reordered."""
    tree = _Rename(keep).visit(ast.parse(code))
    return ast.unparse(tree)


def _keep(unit: str) -> set[str]:
    release = _release(unit)
    given = set()
    for cell in release.cells:
        if cell.get("cell_type") == "code" and nbmod.role(cell) != "solution":
            given |= nbmod.defined_names(nbmod.cell_source(cell))
            try:
                for node in ast.walk(ast.parse(nbmod.comment_magics(nbmod.cell_source(cell)))):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        given |= {(a.asname or a.name).split(".")[0] for a in node.names}
            except SyntaxError:
                pass
    return given | nbmod.answer_names(release) | set(dir(builtins)) | {"self", "super"}


@pytest.fixture(scope="module", params=sorted(HONEST))
def cohort(request, tmp_path_factory):
    unit = request.param
    folder = tmp_path_factory.mktemp(f"cohort-{unit}")
    subs = folder / "submitted"
    honest = HONEST[unit]
    for student, answers in honest.items():
        _notebook(unit, answers, subs / f"{student}.ipynb")
    keep = _keep(unit)
    # rena: ana's notebook renamed, reformatted and reordered, in the nbgrader layout
    _notebook(unit, {n: _disguised(c, keep) for n, c in honest["ana"].items()},
              subs / "rena" / unit / f"{unit}.ipynb", reverse=True)
    _notebook(unit, {LIFTED[unit]: honest["ana"][LIFTED[unit]]}, subs / "dora.ipynb")  # one function lifted
    _notebook(unit, {}, subs / "eve.ipynb")  # the release, untouched
    (subs / "finn.ipynb").write_text('{"cells": [')  # not a notebook
    os.symlink(subs / "ana.ipynb", subs / "gus.ipynb")  # a link to another student's work
    marker = folder / "ran"
    _notebook(unit, honest["ben"], subs / "hal.ipynb")
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
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True) and len(rows) == len(result.pairs)
    assert {frozenset((r["student_a"], r["student_b"])) for r in rows if r["flagged"] == "1"} == \
        {frozenset((p.a, p.b)) for p in result.flagged()}
    units = list(csv.DictReader(open(folder / "out" / "functions.csv")))
    assert units and {r["unit"] for r in units} <= nbmod.answer_names(_release(unit))


def test_the_command_line(tmp_path, capsys):
    from lmcourse import cli

    subs = tmp_path / "subs"
    _notebook("04-attention", HONEST["04-attention"]["ana"], subs / "ana.ipynb")
    _notebook("04-attention", HONEST["04-attention"]["ana"], subs / "bo.ipynb")
    assert cli.main(["similarity", "04-attention", str(subs), "--out", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out
    assert "2 submissions, 0 not compared" in said and "ana and bo" in said and (tmp_path / "out" / "index.html").exists()
    assert cli.main(["similarity", "04-attention", str(tmp_path / "nope"), "--out", str(tmp_path / "o2")]) != 0
    assert cli.main(["similarity", "04-attention", str(subs), "--out", str(tmp_path / "o3"), "--threshold", "3"]) != 0
