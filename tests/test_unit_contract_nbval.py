"""The unit contract's nbval run (`unit_contract.run_nbval`) is not vacuous: a test cell that no
longer prints its pass line fails it. Once, on unit 1's notebook cut after its first test cell
(no torch: about two seconds)."""

from __future__ import annotations

from lmcourse.course import load_source
from lmcourse.grading import notebook as nbmod
from unit_contract import PASS_LINE, ROOT, nbval_copy, run_nbval


def test_nbval_fails_a_test_cell_that_prints_nothing(tmp_path):
    nb = nbval_copy(load_source(ROOT, "01-ngrams"))
    first = next(i for i, c in enumerate(nb.cells) if "nbval-check-output" in c.metadata.get("tags", []))
    nb.cells = nb.cells[:first + 1]
    cell = nb.cells[first]
    line = f'print("{nbmod.grade_id(cell)}: {PASS_LINE}")'
    assert line in cell.source
    cell.source = cell.source.replace(line, "pass")
    run = run_nbval(nb, tmp_path, "01-ngrams")
    last = f"Cell {sum(c.cell_type == 'code' for c in nb.cells) - 1}"
    assert run.returncode != 0 and run.cells[last] == "failed", run.tail
    assert all(v == "passed" for k, v in run.cells.items() if k != last), run.tail
    assert "Missing output fields from running code: {'stdout'}" in run.tail, run.tail
