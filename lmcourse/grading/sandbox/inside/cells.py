"""Loading a notebook's module cell by cell, as a kernel's "run all" does (issue #37).

The module the grader extracts from a notebook (`lmcourse.grading.notebook`)
says on its second line where each cell's code is (`CELLS_LINE`). The worker
(`main`) runs it one cell at a time in the module's namespace: a cell that
raises (a scratch ``print(debug_tensor.shape)`` left at its top level) keeps
what it defined before that line, the next cells still run, and the worker
reports each such cell in its hello reply. The grader names the cell from its
own line map and decides what that costs (`lmcourse.grading.runner`); nothing
a cell reports here can earn points. Any other module (no cells line, or a
malformed one) is imported whole, as before.

Standard library only: this file runs in the worker before the student's code.
"""

from __future__ import annotations

import json
import traceback

# Line 2 of a module extracted from a notebook: `[[first, last, grade_id], ...]` in JSON, the line map
# (`lmcourse.grading.notebook.CELLS_LINE`, restated: this package imports nothing of the grader's).
CELLS_LINE = "# lmcourse-cells: "
MAX_CELL_ERRORS = 200


def cell_ranges(lines: list[str]) -> list[tuple[int, int]] | None:
    """The (first, last) line of each cell that line 2 of the module lists, in order and within the
    module; None when there is no such line or it is malformed in any way."""
    if len(lines) < 2 or not lines[1].startswith(CELLS_LINE):
        return None
    try:
        cells = json.loads(lines[1][len(CELLS_LINE):])
    except ValueError:
        return None
    if type(cells) is not list:
        return None
    out, previous = [], 2
    for cell in cells:
        if not (type(cell) is list and len(cell) == 3 and type(cell[0]) is int and type(cell[1]) is int):
            return None
        first, last = cell[0], cell[1]
        if not previous < first <= last <= len(lines):
            return None
        out.append((first, last))
        previous = last
    return out


def _text(x, limit: int = 2000) -> str:
    """str(x), whatever the student's object does in its __str__ (the grader checks it again)."""
    try:
        s = str(x)
    except BaseException:
        s = "<the exception's message could not be shown>"
    return (s if type(s) is str else "<message>")[:limit]


def _student_lines(tb, module_file: str, limit: int = 8) -> str:
    """The frames of `tb` in the student's module, as "  line N, in f" and its code (the grader's
    frames never: they are not the student's business)."""
    frames = [fr for fr in traceback.extract_tb(tb) if fr.filename == module_file][-limit:]
    out = []
    for fr in frames:
        out.append(f"  line {fr.lineno}, in {fr.name}" + (f"\n    {fr.line.strip()}" if fr.line else ""))
    return "\n".join(out)[:4000]


def _error(exc: BaseException, first: int, module_file: str) -> dict:
    """What the grader is told of a cell that raised: the cell's first line and the line of its top-level
    statement that raised (numbered in the module), the exception, and the student's lines."""
    frames = [fr for fr in traceback.extract_tb(exc.__traceback__) if fr.filename == module_file]
    line = frames[0].lineno if frames and type(frames[0].lineno) is int else first
    message = _text(exc)
    if isinstance(exc, SystemExit):
        message = f"your code called sys.exit({_text(exc.code, 100)})"
    name = type(exc).__name__
    return {"first": first, "line": line, "type": name if type(name) is str else "Exception",
            "message": message, "traceback": _student_lines(exc.__traceback__, module_file)}


def run_cells(namespace: dict, module_file: str, cells: list[tuple[int, int]], lines: list[str]) -> list[dict]:
    """Run the module's cells in ``namespace`` (the module's), in order; return the cells that raised.

    Each cell is compiled on its own, padded with blank lines so that its code
    keeps the module's line numbers (tracebacks and the grader's line map
    agree), and without this package's ``__future__`` flags (``dont_inherit``:
    a student's annotations behave as in the kernel). A cell that parses but
    does not compile (``return`` outside a function) runs nothing and is
    reported as a ``SyntaxError`` without a traceback. Every exception a cell
    raises is caught (``sys.exit`` included: a kernel carries on after it
    too); one that ends the process (``os._exit``, a signal, the time limit)
    ends the import, as before.
    """
    errors = []
    spans = [(1, cells[0][0] - 1)] + cells if cells else [(1, len(lines))]  # first: the module's docstring
    for first, last in spans:
        code = "\n" * (first - 1) + "\n".join(lines[first - 1:last]) + "\n"
        try:
            compiled = compile(code, module_file, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            errors.append({"first": first, "line": line if type(line) is int else first, "type": "SyntaxError",
                           "message": _text(getattr(exc, "msg", exc)), "traceback": ""})
            continue
        try:
            exec(compiled, namespace)
        except BaseException as exc:
            errors.append(_error(exc, first, module_file))
    return errors[:MAX_CELL_ERRORS]
