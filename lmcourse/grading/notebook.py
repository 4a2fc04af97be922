"""Reading notebooks defensively, checking their structure, extracting code.

A submitted notebook is untrusted input: it may not be JSON, may be empty, may
be some other JSON document, may come from an old Jupyter, and its nbgrader
metadata may have been edited. Nothing here executes it. We read it with
plain ``json`` (see :class:`Node`), then line it up against the *release* notebook (what the student
was given, in ``assignments/<id>/``) by nbgrader ``grade_id``:

- every graded cell of the release (solution cells, locked cells, test cells)
  must still be there, found by its ``grade_id``;
- locked cells must be unmodified: nbgrader's ``compute_checksum`` of the
  student's cell must equal the checksum the release stores.

Roles (solution / locked / test / demo) always come from the release, never
from the submission's own metadata, so a student cannot promote or hide a cell
by editing its metadata.

The *student module* is the concatenation, in release order, of the student's
solution cells and the release's locked non-test code cells, minus cells tagged
``demo``, with IPython magics and shell escapes commented out. A locked cell
is always taken from the release: editing the given code changes nothing. A
solution cell that does not parse is replaced by a comment (its functions are
then missing, and only the checks that need them fail). The same extraction on
the solution notebook gives the *reference module*.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import json
import os
import re
import stat
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path


SOLUTION_MARKERS = re.compile(r"^\s*#+\s*(BEGIN|END)\s+(SOLUTION|HIDDEN TESTS)\b.*$")
MAGIC = re.compile(r"^(\s*)([%!].*)$")
MAX_NOTEBOOK_BYTES = 50 * 2**20  # a notebook with its outputs; anything larger is not a submission


@dataclass
class Problem:
    """One thing wrong with a submission: a short status code and a readable line."""

    status: str  # e.g. "not-json", "missing-cell", "modified-cell", "syntax-error"
    message: str
    cell: str | None = None  # the grade_id it concerns, if any

    def as_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "cell": self.cell}


class NotebookError(Exception):
    """The file cannot be read as a notebook at all: nothing in it can earn points."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Extraction:
    """The student module and what went wrong on the way to it."""

    source: str
    problems: list[Problem] = field(default_factory=list)
    # grade_ids of test cells that are missing or were modified: their checks score 0
    blocked_cells: dict[str, str] = field(default_factory=dict)
    # (first line, last line, grade_id) of each cell in `source`, to name the cell of an error
    line_map: list[tuple[int, int, str]] = field(default_factory=list)
    # what `rules.scan_answers` found in the answer cells (filled in by the runner)
    findings: dict = field(default_factory=dict)

    def cell_at(self, line: int) -> str | None:
        for first, last, grade_id in self.line_map:
            if first <= line <= last:
                return grade_id
        return None


# ----------------------------------------------------------------------------- reading


def skip_slow_jsonschema_formats() -> None:
    """Make ``import nbformat`` take one second instead of ten.

    nbformat imports jsonschema, whose format checkers import ``rfc3987_syntax``
    when installed; that module compiles a Lark grammar at import time (seconds
    on a busy machine). Notebook validation never checks IRI formats, and
    jsonschema treats the module as optional (ImportError is expected), so we
    mark it absent before nbformat is first imported. No effect afterwards.
    """
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


class Node(dict):
    """A dict with attribute access, like nbformat's NotebookNode, without importing nbformat.

    (Importing nbformat pulls in jsonschema and its format checkers: seconds
    per process, paid by every submission of a batch. Reading JSON is enough.)
    """

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


def _node(value):
    if isinstance(value, dict):
        return Node((k, _node(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_node(v) for v in value]
    return value


MAX_DEPTH = 64  # nbformat's own schema is a handful of levels deep; metadata may add a few


def _depth(value) -> int:
    """How deeply ``value`` nests lists and dicts (without recursion: any depth is measured safely)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, d)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((v, d + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse_notebook(text: str, name: str = "notebook") -> Node:
    """Parse notebook JSON text into a v4 :class:`Node` tree, or raise :class:`NotebookError`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise NotebookError(
            "not-json",
            f"{name} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}); "
            "expected a Jupyter notebook saved from Jupyter",
        ) from None
    except RecursionError:
        raise NotebookError("not-json", f"{name} nests JSON too deeply to be a notebook") from None
    depth = _depth(data)
    if depth > MAX_DEPTH:
        raise NotebookError("invalid-notebook", f"{name} nests JSON {depth} levels deep; a notebook needs fewer "
                            f"than {MAX_DEPTH}. Save it from Jupyter again (or remove the odd metadata)")
    if not isinstance(data, dict) or "nbformat" not in data or not ("cells" in data or "worksheets" in data):
        found = f"a JSON {type(data).__name__}" if not isinstance(data, dict) else \
            "a JSON object without 'nbformat' and 'cells'"
        raise NotebookError("not-a-notebook", f"{name} is JSON but not a notebook: found {found}")
    version = data.get("nbformat")
    if not isinstance(version, int) or version < 4:
        # Rare: let nbformat upgrade v3 (nbgrader's cell metadata survives the upgrade).
        try:
            import nbformat

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                data = json.loads(nbformat.writes(nbformat.reads(text, as_version=4)))
        except Exception:
            raise NotebookError(
                "old-nbformat",
                f"{name} uses notebook format v{version}; expected v4. Open it in a current Jupyter and save it again",
            ) from None
        data.setdefault("metadata", {})["lmcourse_upgraded_from"] = version
    if version is not None and isinstance(version, int) and version > 4:
        raise NotebookError("invalid-notebook", f"{name} uses notebook format v{version}, newer than v4")
    cells = data.get("cells")
    if not isinstance(cells, list) or not isinstance(data.get("metadata", {}), dict):
        raise NotebookError("invalid-notebook", f"{name} is not a valid v4 notebook: 'cells' is not a list")
    for i, cell in enumerate(cells):
        ok = isinstance(cell, dict) and cell.get("cell_type") in ("code", "markdown", "raw") and \
            isinstance(cell.get("source", ""), (str, list)) and isinstance(cell.get("metadata", {}), dict)
        if ok and isinstance(cell.get("source"), list):
            ok = all(isinstance(line, str) for line in cell["source"])
        if not ok:
            raise NotebookError("invalid-notebook", f"{name} is not a valid v4 notebook: cell {i + 1} is malformed "
                                "(expected cell_type code/markdown/raw, a text source and a metadata object)")
        cell.setdefault("metadata", {})
        cell["source"] = "".join(cell.get("source", "")) if isinstance(cell.get("source"), list) else cell.get("source", "")
    data.setdefault("metadata", {})
    return _node(data)


def read_notebook(path: Path) -> Node:
    """Read ``path`` as a v4 notebook, or raise :class:`NotebookError` saying why not."""
    path = Path(path)
    # Read the file as it is: a symbolic link (to the solution, to another student's notebook) is
    # never followed, and anything but a regular file (a FIFO would block forever) is refused.
    if path.is_symlink():
        raise NotebookError("symlink", f"{path.name} is a symbolic link, not a notebook file; the grader does not "
                            "follow links. Submit the notebook file itself")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotebookError("symlink", f"{path.name} is a symbolic link, not a notebook file; the grader "
                                "does not follow links. Submit the notebook file itself") from None
        raise NotebookError("unreadable", f"cannot read {path.name}: {err.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError("unreadable", f"{path.name} is not a regular file; submit the saved .ipynb")
        size = info.st_size
        data = f.read(MAX_NOTEBOOK_BYTES + 1) if size <= MAX_NOTEBOOK_BYTES else b""
    if size == 0:
        raise NotebookError("empty", f"{path.name} is an empty file, not a notebook; submit the saved .ipynb")
    if size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(
            "too-large",
            f"{path.name} is {size / 2**20:.0f} MiB; a notebook is expected to be under "
            f"{MAX_NOTEBOOK_BYTES // 2**20} MiB (clear the outputs and save again)",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError("not-json", f"{path.name} is not a text file; expected a Jupyter notebook (.ipynb)") from None
    if not text.strip():
        raise NotebookError("empty", f"{path.name} holds only whitespace, not a notebook; submit the saved .ipynb")
    return parse_notebook(text, path.name)


def compute_checksum(cell) -> str:
    """nbgrader's ``nbgrader.utils.compute_checksum``, restated so grading need not import nbgrader.

    (A test keeps the two equal.) Raises KeyError/ValueError on metadata that
    nbgrader itself could not have written.
    """
    meta = cell["metadata"]["nbgrader"]
    grade, solution = meta.get("grade", False), meta.get("solution", False)
    locked = False if solution else True if grade else meta.get("locked", False)  # nbgrader's is_locked
    m = hashlib.md5()
    m.update(cell_source(cell).encode("utf-8"))
    m.update(str(cell["cell_type"]).encode("utf-8"))
    m.update(str(grade).encode())
    m.update(str(solution).encode())
    m.update(str(locked).encode())
    m.update(str(meta["grade_id"]).encode("utf-8"))
    if grade:
        m.update(str(float(meta["points"])).encode())  # nbgrader's float(): a str like "3" works too
    return m.hexdigest()


def cell_source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def nbgrader_meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def role(cell) -> str | None:
    """The grading role of a (release or source) cell: solution, test, locked, or None."""
    meta = nbgrader_meta(cell)
    if not meta or grade_id(cell) is None:
        return None
    if meta.get("solution"):
        return "solution"
    if meta.get("grade"):
        return "test"
    if meta.get("locked"):
        return "locked"
    return None


def is_demo(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and "demo" in tags


def graded_cells(release) -> dict[str, float]:
    """grade_id -> points of every autograded test cell (``grade: true``, not a manually graded answer)."""
    out = {}
    for cell in release.cells:
        meta = nbgrader_meta(cell)
        if meta.get("grade") and not meta.get("solution") and grade_id(cell):
            out[grade_id(cell)] = float(meta.get("points", 0) or 0)
    return out


graded_cells.__test__ = False  # not a pytest test, wherever it is imported
test_cells = graded_cells  # older name, still used by tests


# ----------------------------------------------------------------------------- extraction


def strip_markers(source: str) -> str:
    """Drop ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines (the reference keeps the code)."""
    return "\n".join(line for line in source.splitlines() if not SOLUTION_MARKERS.match(line))


def comment_magics(source: str) -> str:
    """Comment out ``%magic`` and ``!shell`` lines: they are IPython, not Python."""
    return "\n".join(MAGIC.sub(r"\1# \2", line) for line in source.splitlines())


def _join(parts: list[tuple[str, str, str]]) -> tuple[str, list[tuple[int, int, str]]]:
    """Concatenate (grade_id, role, code) parts with a header comment per cell."""
    lines: list[str] = ['"""Extracted by lmcourse.grading: solution cells and locked cells, in notebook order."""']
    line_map = []
    for gid, kind, code in parts:
        lines += ["", "", f"# ---- cell {gid} ({kind})"]
        first = len(lines) + 1
        body = code.splitlines() or ["pass"]
        lines += body
        line_map.append((first, len(lines), gid))
    return "\n".join(lines) + "\n", line_map


def _parses(code: str) -> SyntaxError | None:
    try:
        ast.parse(code)  # parsing only: nothing is executed
    except SyntaxError as err:
        return err
    except ValueError as err:  # null bytes
        return SyntaxError(str(err) or type(err).__name__)
    # MemoryError and RecursionError propagate: the submission is too large or deep to read at all
    # (`bounded` turns them into the status too-large).
    return None


def extract_reference(source_nb) -> str:
    """The reference module from the instructor's solution notebook."""
    parts = []
    for cell in source_nb.cells:
        kind = role(cell)
        if cell.get("cell_type") != "code" or kind not in ("solution", "locked") or is_demo(cell):
            continue
        parts.append((grade_id(cell), kind, comment_magics(strip_markers(cell_source(cell)))))
    return _join(parts)[0]


def check_and_extract(student_nb, release_nb) -> Extraction:
    """Line the submission up with the release; return the student module and the problems found."""
    by_id: dict[str, list] = {}
    for cell in student_nb.cells:
        gid = grade_id(cell)
        if gid is not None:
            by_id.setdefault(gid, []).append(cell)

    problems: list[Problem] = []
    blocked: dict[str, str] = {}
    parts = []
    for rcell in release_nb.cells:
        kind, gid = role(rcell), grade_id(rcell)
        if kind is None:
            continue
        found = by_id.get(gid, [])
        if len(found) > 1:
            msg = (f"cell '{gid}' appears {len(found)} times (copied cells keep their nbgrader id); "
                   "delete the copies and keep one")
            problems.append(Problem("duplicate-cell", msg, gid))
        scell = found[0] if found else None
        if scell is not None and scell.get("cell_type") != rcell.get("cell_type"):
            problems.append(Problem("modified-cell",
                                    f"cell '{gid}' was changed from {rcell.get('cell_type')} to "
                                    f"{scell.get('cell_type')}; change it back", gid))
            scell = None if kind == "solution" else scell
        if scell is None and not found:
            what = {"solution": "your answer cell", "test": "a test cell", "locked": "a given cell"}[kind]
            msg = (f"{what} '{gid}' is missing (deleted, or its nbgrader metadata was changed); "
                   "copy it back from the released notebook")
            problems.append(Problem("missing-cell", msg, gid))
            if kind == "test":
                blocked[gid] = msg
        if kind in ("locked", "test") and scell is not None:
            stored = nbgrader_meta(rcell).get("checksum")
            try:
                ok = compute_checksum(scell) == stored if stored else cell_source(scell) == cell_source(rcell)
            except Exception:  # the student's metadata lacks points etc.: it was edited
                ok = False
            if not ok:
                what = "test cell" if kind == "test" else "given (locked) cell"
                if kind == "test":
                    msg = (f"the {what} '{gid}' was modified, so its points cannot be awarded; "
                           "restore it from the released notebook")
                    blocked[gid] = msg
                else:
                    msg = (f"the {what} '{gid}' was modified; the grader used the original. "
                           "Restore it from the released notebook so your code runs as graded")
                problems.append(Problem("modified-cell", msg, gid))
        if rcell.get("cell_type") != "code" or kind == "test" or is_demo(rcell):
            continue
        if kind == "locked":
            parts.append((gid, kind, comment_magics(cell_source(rcell))))
            continue
        if scell is None:
            parts.append((gid, kind, f"# cell '{gid}' is missing from the submission"))
            continue
        code = comment_magics(cell_source(scell))
        err = _parses(code)
        if err is not None:
            where = f"line {err.lineno}" if getattr(err, "lineno", None) else "somewhere"
            problems.append(Problem("syntax-error",
                                    f"cell '{gid}' has a syntax error at {where}: {err.msg if hasattr(err, 'msg') else err}; "
                                    "nothing in this cell could be graded", gid))
            code = f"# cell '{gid}' has a syntax error and was left out"
        parts.append((gid, kind, code))
    source, line_map = _join(parts)
    return Extraction(source, problems, blocked, line_map)


def load_release(root: Path, assignment_id: str) -> Node:
    path = Path(root) / "assignments" / assignment_id / f"{assignment_id}.ipynb"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run `lmcourse assign {assignment_id}` first")
    return parse_notebook(path.read_text(encoding="utf-8"), str(path))


def load_source(root: Path, assignment_id: str) -> Node:
    path = Path(root) / "solutions" / assignment_id / f"{assignment_id}.ipynb"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: no such assignment '{assignment_id}'")
    return parse_notebook(path.read_text(encoding="utf-8"), str(path))
