"""Reading notebooks defensively, checking their structure, extracting code.

A submitted notebook is untrusted input: it may not be JSON, may be empty, may
be some other JSON document, may come from an old Jupyter, and its nbgrader
metadata may have been edited or lost (VS Code, Colab, a copy-paste, a
jupytext ``.py`` or ``.md`` export). Nothing here executes it. We read it with
plain ``json`` (see :class:`Node`; ``.py``/``.md`` files through jupytext),
then line it up against the *release* notebook (what the student was given,
in ``assignments/<id>/``):

- by nbgrader ``grade_id`` where the submission still has it;
- by content where it does not: a given (locked) or test cell by its
  normalised source (:func:`normalise`: line endings, trailing whitespace and
  blank lines do not count), an answer cell by the functions and classes the
  release's stub of that cell defines.

Roles (solution / locked / test / demo) always come from the release, never
from the submission's own metadata, so a student cannot promote or hide a cell
by editing its metadata; what was recovered is reported as a warning, which
costs nothing.

The *student module* is the concatenation, in release order, of the student's
answer cells and the release's locked non-test code cells, minus cells tagged
``demo``, with what IPython reads as a magic or a shell escape neutralised
(`comment_magics`, with IPython's own transformer: a ``%`` that continues a
line inside brackets is Python and stays). A locked cell
is always taken from the release: editing the given code changes nothing, and
a student cell can never stand in for one. Test cells never reach the module
(their points come from the trusted checks), so a test cell that was edited or
deleted costs nothing. Several cells for one answer (a copy, a split cell, a
cell found by its function names) are kept in notebook order: the last
definition wins, as in the student's kernel. A cell that does not parse is
replaced by a comment (its functions are then missing, and only the checks
that need them fail). The same extraction on the solution notebook gives the
*reference module*.

The module's second line lists its cells' line ranges (`CELLS_LINE`): the
worker loads it cell by cell, as a kernel's "run all" does, so a cell that
raises at its top level costs the checks that need it, not the notebook
(`lmcourse.grading.runner._cells_that_raised`).
"""

from __future__ import annotations

import ast
import errno
import functools
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
MAX_CELL_NAMES = 5000  # names one cell defines at top level, as far as the grader keeps them


@dataclass
class Problem:
    """One thing wrong with a submission: a short status code and a readable line."""

    status: str  # e.g. "not-json", "missing-cell", "modified-cell", "syntax-error", "recovered-cells"
    message: str
    cell: str | None = None  # the grade_id it concerns, if any
    # a warning is reported and costs nothing: the result's status stays "ok" (e.g. cells recovered by
    # content, a copied answer cell, an edited test cell)
    warning: bool = False

    def as_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "cell": self.cell, "warning": self.warning}


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
    # grade_id -> why the checks of that test cell score 0. Nothing blocks a test cell any more: the
    # grader never runs test cells, so an edited or missing one changes nothing (kept for the plugin's API).
    blocked_cells: dict[str, str] = field(default_factory=dict)
    # (first line, last line, grade_id) of each cell in `source`, to name the cell of an error
    line_map: list[tuple[int, int, str]] = field(default_factory=list)
    # what `rules.scan_answers` found in the answer cells (filled in by the runner)
    findings: dict = field(default_factory=dict)
    # names bound only by cells the module leaves out (demo cells, cells of the student's own, test
    # cells) -> which cell: an answer cell that uses one fails as graded though it runs in Jupyter
    skipped_names: dict[str, str] = field(default_factory=dict)
    # every nbgrader grade_id the submission holds, known to the release or not (which assignment
    # a notebook belongs to)
    found_ids: list[str] = field(default_factory=list)
    # `readiness` of the module: stubs still missing or unimplemented (filled in by the runner)
    readiness: dict = field(default_factory=dict)
    # what each cell of `line_map` defines (`defined_names`), in its order: read here, in the reader's
    # bounded child, so that the grader never parses the student's code itself (`names_lost`)
    cell_names: list[list[str]] = field(default_factory=list)
    # answer-cell name -> the answer-cell names its definition refers to (`uses`), read here too
    uses: dict[str, list[str]] = field(default_factory=dict)


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


# Contents managers for a Jupyter server: jupytext's __init__ imports them if it can (tornado,
# jupyter_server: a fifth of a second), and reading a text notebook needs none of them.
_JUPYTEXT_SERVER_PARTS = ("jupytext.sync_contentsmanager", "jupytext.async_contentsmanager")


def _import_jupytext():
    """jupytext, to read ``.py`` (percent) and ``.md`` notebooks; None where it is not installed.

    Imported when this module is, never later: a submission is read in a forked
    child (`lmcourse.grading.bounded`), which must not import anything (a lock
    another thread of the parent held at fork time would never be released).
    Its Jupyter-server contents managers are skipped (jupytext treats them as
    optional); the placeholders are removed again, so a later explicit import
    of those modules still works.
    """
    if "jupytext" in sys.modules:
        return sys.modules["jupytext"]
    skip_slow_jsonschema_formats()
    skipped = [name for name in _JUPYTEXT_SERVER_PARTS if name not in sys.modules]
    for name in skipped:
        sys.modules[name] = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import jupytext
        return jupytext
    except ImportError:
        for name in [m for m in sys.modules if m == "jupytext" or m.startswith("jupytext.")]:
            del sys.modules[name]
        try:  # a jupytext that no longer treats them as optional: import it whole
            import jupytext
            return jupytext
        except ImportError:
            return None
    finally:
        for name in skipped:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


jupytext = _import_jupytext()


def _import_ipython_transformer():
    """IPython's input transformer (`comment_magics`), or None where IPython is not installed.

    Imported with this module, never later, for the same reason as jupytext
    (a submission is read in a forked child). About 30 ms next to jupytext,
    once per grading process.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from IPython.core import inputtransformer2
        return inputtransformer2
    except Exception:  # not installed, or an IPython too different to use: the plain reading
        return None


_ipy = _import_ipython_transformer()
TEXT_FORMATS = {".py": "py", ".md": "md"}  # suffix -> jupytext format (jupytext tells percent from light)


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
    return _checked_v4(data, name)


def parse_text_notebook(text: str, name: str, fmt: str) -> Node:
    """Parse a jupytext text notebook (``fmt`` "py": percent or light format; "md") into a v4 :class:`Node`."""
    if jupytext is None:
        raise NotebookError("not-a-notebook", f"{name} is a text file and jupytext is not installed where it "
                            "is graded; submit the .ipynb notebook")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = jupytext.reads(text, fmt=fmt)
    except MemoryError:
        raise  # `bounded` turns it into the status too-large
    except RecursionError:  # a YAML header that refers to itself (`a: &a [*a]`), or nests too deeply
        raise NotebookError("invalid-notebook", f"{name} has a header that nests too deeply to be a notebook's; "
                            "submit the .ipynb notebook saved from Jupyter") from None
    except Exception as err:
        raise NotebookError("invalid-notebook", f"{name} could not be read as a jupytext {fmt} notebook "
                            f"({type(err).__name__}); submit the .ipynb notebook saved from Jupyter") from None
    try:
        data = json.loads(json.dumps(nb))
    except (RecursionError, ValueError, TypeError):  # metadata that refers to itself, or values JSON cannot hold
        raise NotebookError("invalid-notebook", f"{name} has a header that nests too deeply or holds values "
                            "a notebook cannot; submit the .ipynb notebook saved from Jupyter") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("invalid-notebook", f"{name} could not be read as a jupytext {fmt} notebook")
    if _depth(data) > MAX_DEPTH:
        raise NotebookError("invalid-notebook", f"{name} nests its metadata more than {MAX_DEPTH} levels deep")
    return _checked_v4(data, name)


def _checked_v4(data: dict, name: str) -> Node:
    """``data`` (a v4 notebook as parsed JSON) checked cell by cell, sources joined into strings."""
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
        text = data.decode("utf-8-sig")  # a byte order mark (some Windows editors write one) is not content
    except UnicodeDecodeError:
        raise NotebookError("not-json", f"{path.name} is not a text file; expected a Jupyter notebook (.ipynb)") from None
    if not text.strip():
        raise NotebookError("empty", f"{path.name} holds only whitespace, not a notebook; submit the saved .ipynb")
    fmt = TEXT_FORMATS.get(path.suffix.lower())
    if fmt is not None:  # a jupytext export (percent .py, .md) of the notebook
        return parse_text_notebook(text, path.name, fmt)
    return parse_notebook(text, path.name)


def compute_checksum(cell) -> str:
    """nbgrader's ``nbgrader.utils.compute_checksum``, restated so grading need not import nbgrader.

    (A test keeps the two equal.) Raises KeyError/ValueError on metadata that
    nbgrader itself could not have written. Grading compares sources made equal
    by :func:`normalise` instead: a checksum changes with a line ending or a
    trailing space.
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


@functools.lru_cache(maxsize=1024)  # every cell is read several times (names, stubs, parsing, extraction)
def comment_magics(source: str) -> str:
    """``source`` as Python: what IPython would run as a magic or a shell escape is neutralised.

    Only what IPython itself treats as its syntax counts, found with IPython's
    own input transformer (`_ipython_lines`): a ``%magic``, ``!shell``,
    ``x = %magic``, ``x = !shell`` or ``obj?`` that starts a *logical* line.
    A line that starts with ``%`` inside brackets is Python (PEP 8's break
    before a binary operator, ``(a\n % b)``) and is left alone, as is a ``%``
    in a string. Each such command becomes ``pass  # <the command>`` (``x =
    None  # ...`` for an assignment; its continuation lines comments), so the
    lines keep their numbers and a command inside a block leaves the block
    valid; none of them runs (a ``%time`` of a training run at the top level
    would train at every import). A cell magic's ``%%`` line is commented out
    and its body kept, as before. Where IPython's transformer is not installed,
    a line that starts with ``%`` or ``!`` is commented out unless the source
    is valid Python as it is.
    """
    lines = source.splitlines()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (invalid escape sequences: the kernel says so, not the grader)
        try:
            ast.parse(source)
            return "\n".join(lines)  # valid Python: IPython's syntax never is, so there is none here
        except (SyntaxError, ValueError):
            pass
    if _ipy is not None:
        try:
            out = _ipython_lines(lines)
        except (MemoryError, RecursionError):
            raise  # `bounded` turns them into the status too-large
        except Exception:  # IPython failed on odd input: the plain reading below
            out = None
        if out is not None:
            return "\n".join(out)
    return "\n".join(MAGIC.sub(r"\1# \2", line) for line in lines)


def _ipython_lines(lines: list[str]) -> list[str] | None:
    """``lines`` with what IPython's `TransformerManager` transforms neutralised, the same number of lines.

    IPython's `transform_cell` runs its clean-up (leading blank lines, the
    common indentation, ``>>>``/``In [1]:`` prompts: the kernel runs the cell
    that way, so the module does too), then finds one escaped command at a
    time on tokens (not on text) and replaces its lines by one call. The same
    steps run here, each recording which of the cell's lines it replaced;
    those lines are then rewritten in place. None when the clean-up changed
    the number of lines (never seen; the caller falls back).
    """
    lead = 0
    while lead < len(lines) and not lines[lead].strip():
        lead += 1
    work = [line + "\n" for line in lines[lead:]]
    if not work:
        return lines
    for clean in (_ipy.leading_indent, _ipy.classic_prompt, _ipy.ipython_prompt):
        work = clean(work)
    if len(work) != len(lines) - lead:
        return None
    cleaned = [line.rstrip("\n") for line in work]
    out = list(cleaned)
    if cleaned[0].startswith("%%"):  # a cell magic (%%time, %%capture): its body is the cell's code
        out[0] = "# " + cleaned[0]
        work[0] = "\n"
    origin = [[i] for i in range(len(work))]  # line of `work` -> the lines of the cell it stands for
    transformers = _ipy.TransformerManager().token_transformers
    for _ in range(_ipy.TRANSFORM_LOOP_LIMIT):
        tokens = _ipy.make_tokens_by_line(work)
        found = sorted((t for t in (cls.find(tokens) for cls in transformers) if t),
                       key=_ipy.TokenTransformBase.sortby)
        for t in found:
            try:
                new = t.transform(work)
            except SyntaxError:
                continue
            start, span = t.start_line, len(work) - len(new) + 1
            replaced = [i for group in origin[start:start + span] for i in group]
            first = replaced[0]
            # what stays of the first line: its indentation, or the `x = ` of `x = %time f()`
            keep = cleaned[first][:t.start_col] if len(origin[start]) == 1 else ""
            if not keep.strip():
                keep = cleaned[first][:len(cleaned[first]) - len(cleaned[first].lstrip())]
            stand_in = "None" if keep.strip() else "pass"
            out[first] = f"{keep}{stand_in}  # {cleaned[first][len(keep):].strip()}"
            for i in replaced[1:]:
                out[i] = "# " + cleaned[i]
            work, origin[start:start + span] = new, [replaced]
            break
        else:
            break
    return lines[:lead] + out


# The second line of every extracted module: its cells' line ranges, as `_join`'s line map in JSON. The
# worker loads such a module cell by cell (`sandbox.inside.main`), as a kernel runs them.
CELLS_LINE = "# lmcourse-cells: "


def _join(parts: list[tuple[str, str, str]]) -> tuple[str, list[tuple[int, int, str]]]:
    """Concatenate (grade_id, role, code) parts with a header comment per cell.

    Line 2 lists the cells' line ranges (`CELLS_LINE`); it comes before any
    cell's code, so nothing a cell holds can change it.
    """
    lines: list[str] = ['"""Extracted by lmcourse.grading: solution cells and locked cells, in notebook order."""',
                        CELLS_LINE]
    line_map = []
    for gid, kind, code in parts:
        lines += ["", "", f"# ---- cell {gid} ({kind})"]
        first = len(lines) + 1
        body = code.splitlines() or ["pass"]
        lines += body
        line_map.append((first, len(lines), gid))
    lines[1] = CELLS_LINE + json.dumps(line_map)
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


def normalise(source: str) -> tuple[str, ...]:
    """A cell's source up to what cannot change its code: its non-blank lines without trailing whitespace.

    Line endings (CRLF, CR), trailing whitespace, blank lines, a final newline
    and a byte order mark do not count. A given or test cell whose normalised
    source is the release's is that cell, unmodified (its code is taken from
    the release in any case).
    """
    return tuple(line.rstrip() for line in str(source).lstrip("\ufeff").splitlines() if line.strip())


_DEF_LINE = re.compile(r"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.MULTILINE)


def defined_names(source: str) -> set[str]:
    """The names a code cell defines at top level: functions, classes, plain assignments.

    Parsed, never run. A cell that does not parse is read line by line
    (``def NAME`` / ``class NAME`` at the start of a line), so that an answer
    cell with a syntax error is still recognised (and then reported).
    """
    code = comment_magics(source)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set(_DEF_LINE.findall(code))
    names: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.If, ast.With, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())):
            todo += getattr(node, "body", []) + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                todo += handler.body
    return names


def uses(source: str, names) -> dict[str, list[str]]:
    """Which of ``names`` each top-level definition of ``names`` in ``source`` refers to (its own name aside).

    ``{"EncoderBlock": ["LayerNorm", "MultiHeadAttention"], ...}``: the names
    read anywhere in the definition (its body, decorators, base classes and
    defaults), from its last definition in the module, the one a kernel keeps.
    Parsed, never run; a module that does not parse uses nothing. It is how a
    failing check learns that the code it calls relies on code that fails its
    own check (`lmcourse.grading.causes`).
    """
    names = set(names)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    last = {node.name: node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names}
    out = {}
    for name, node in last.items():
        read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        out[name] = sorted((read & names) - {name})
    return out


def stub_names(release_cell) -> set[str]:
    """What the release's stub of an answer cell defines: how the cell is recognised without its metadata."""
    return defined_names(cell_source(release_cell)) if release_cell.get("cell_type") == "code" else set()


def answer_names(release) -> set[str]:
    """Every function and class the release's answer cells ask the student to write."""
    return {name for cell in release.cells if role(cell) == "solution" for name in stub_names(cell)}


def _content_match(target: tuple[str, ...], cell_type: str, pool: list[int], cells, norm) -> list[int]:
    """Cells of ``pool`` (indices, in notebook order) that are the release cell ``target``, by content.

    Every cell whose normalised source is ``target``; failing that, the first
    run of consecutive cells that together make it (a cell split in two).
    """
    same = [i for i in pool if cells[i].get("cell_type") == cell_type and norm(i) == target]
    if same or not target:
        return same
    allowed = set(pool)
    for start in pool:
        if cells[start].get("cell_type") != cell_type:
            continue
        piece = norm(start)
        if not piece or piece[0] != target[0] or target[:len(piece)] != piece:
            continue
        run, have, j = [start], len(piece), start + 1
        while have < len(target) and j in allowed and cells[j].get("cell_type") == cell_type:
            piece = norm(j)
            if piece and target[have:have + len(piece)] != piece:
                break
            run.append(j)
            have += len(piece)
            j += 1
        if have == len(target):
            return run
    return []


def check_and_extract(student_nb, release_nb, release_path: str | None = None) -> Extraction:
    """Line the submission up with the release; return the student module and the problems found.

    Cells are found by nbgrader ``grade_id`` where the submission kept it, by
    content where it did not (see the module's docstring): given and test
    cells by their normalised source, answer cells by the names their stubs
    define. Locked code always comes from the release, test cells never reach
    the module, and every answer cell found is kept, in notebook order.
    ``release_path`` (as the student knows it) is named where a cell must be
    copied back.
    """
    released = f"the released notebook ({release_path})" if release_path else "the released notebook"
    release_cells = list(release_nb.cells)
    roles: dict[str, tuple[str, object]] = {}  # grade_id -> (role, release cell); the first one wins
    for rcell in release_cells:
        kind, gid = role(rcell), grade_id(rcell)
        if kind is not None and gid not in roles:
            roles[gid] = (kind, rcell)
    cells = list(student_nb.cells)
    n = len(cells)
    # a grade_id the release does not know (renamed, or nbgrader's "cell-..." of another notebook) is no id
    label = [grade_id(c) if grade_id(c) in roles else None for c in cells]
    _norms: dict[int, tuple[str, ...]] = {}

    def norm(i: int) -> tuple[str, ...]:
        if i not in _norms:
            _norms[i] = normalise(cell_source(cells[i]))
        return _norms[i]

    problems: list[Problem] = []
    consumed: set[int] = set()  # cells that are a given, test or demo cell of the release, unmodified
    given_by_content = 0

    # Given (locked) and test cells: by id if unmodified (or split in pieces that keep the id), else by content.
    for gid, (kind, rcell) in roles.items():
        if kind not in ("locked", "test"):
            continue
        target, ctype = normalise(cell_source(rcell)), rcell.get("cell_type")
        ids = [i for i in range(n) if label[i] == gid]
        found = [i for i in ids if cells[i].get("cell_type") == ctype and norm(i) == target]
        if not found and ids and all(cells[i].get("cell_type") == ctype for i in ids) and \
                tuple(line for i in ids for line in norm(i)) == target:
            found = ids  # split into several cells that kept the id
        if found:
            if len(ids) > len(found) or (len(found) > 1 and found != ids):
                problems.append(Problem("duplicate-cell", f"the {'test' if kind == 'test' else 'given'} cell "
                                        f"'{gid}' appears {len(ids)} times (a copied cell keeps its nbgrader id); "
                                        "the grader uses the released version, so the copies change nothing",
                                        gid, warning=True))
        else:
            pool = [i for i in range(n) if label[i] is None and i not in consumed]
            found = _content_match(target, ctype, pool, cells, norm)
            given_by_content += bool(found)
        consumed.update(found)
        if found:
            continue
        what = "test cell" if kind == "test" else "given (locked) cell"
        if kind == "test":
            done = ("your copy of a test cell is never run (its points come from the grader's own checks, "
                    "and `lmcourse check` runs the released copy), so this changes nothing")
            if ids:
                msg = f"the test cell '{gid}' was modified; {done}. Restore it from {released}"
            else:
                msg = (f"the test cell '{gid}' is missing (deleted, or changed and its nbgrader metadata lost); "
                       f"{done}. Copy it back from {released} for its quick checks")
            problems.append(Problem("modified-cell" if ids else "missing-cell", msg, gid, warning=True))
        elif ids:
            problems.append(Problem("modified-cell", f"the {what} '{gid}' was modified; the grader used the "
                                    f"original. Restore it from {released} so your code runs as graded",
                                    gid))
        else:
            problems.append(Problem("missing-cell", f"the {what} '{gid}' is missing (deleted, or changed and its "
                                    "nbgrader metadata lost); the grader used the released version. Copy it back "
                                    f"from {released} so your code runs as graded", gid))
    # Demo cells of the release, unmodified, whatever their metadata: never an answer.
    for rcell in release_cells:
        if rcell.get("cell_type") == "code" and is_demo(rcell) and role(rcell) is None:
            pool = [i for i in range(n) if label[i] is None and i not in consumed]
            target = normalise(cell_source(rcell))
            consumed.update(i for i in pool if cells[i].get("cell_type") == "code" and target and norm(i) == target)

    # Answer cells: every cell that keeps the id; for the functions that no such cell defines, every other
    # code cell that defines them (not a demo cell, not a given/test/demo cell of the release).
    answers = [(gid, rcell) for gid, (kind, rcell) in roles.items() if kind == "solution"]
    slot = {gid: k for k, (gid, _) in enumerate(answers)}
    stubs = {gid: stub_names(rcell) for gid, rcell in answers}
    _names: dict[int, set[str]] = {}

    def names(i: int) -> set[str]:
        if i not in _names:
            _names[i] = defined_names(cell_source(cells[i]))
        return _names[i]

    chosen: dict[str, list[int]] = {}
    for gid, rcell in answers:
        chosen[gid] = []
        for i in (i for i in range(n) if label[i] == gid):
            if cells[i].get("cell_type") == rcell.get("cell_type"):
                chosen[gid].append(i)
            else:
                problems.append(Problem("modified-cell", f"cell '{gid}' was changed from {rcell.get('cell_type')} "
                                        f"to {cells[i].get('cell_type')}; change it back", gid))
    code_answers = [gid for gid, rcell in answers if rcell.get("cell_type") == "code"]
    defined = {name for gid in code_answers for i in chosen[gid] for name in names(i)}
    missing = {gid: stubs[gid] - defined for gid in code_answers}
    wanted = set().union(*missing.values()) if missing else set()
    serving: dict[int, list[str]] = {}  # a cell found by content -> the answers whose missing names it defines
    if wanted:
        mentions = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(wanted))) + r")\b")
        for i in range(n):
            # never an answer: a cell of the release found by content, a demo cell, a cell that keeps the
            # id of an answer (it is in that answer's place) or of a test cell (never run, whatever it holds)
            if i in consumed or cells[i].get("cell_type") != "code" or is_demo(cells[i]) or \
                    (label[i] is not None and roles[label[i]][0] in ("solution", "test")):
                continue
            if not mentions.search(cell_source(cells[i])):
                continue  # cheap: most cells name none of the missing functions
            serves = [gid for gid in code_answers if missing[gid] & names(i)]
            if serves:
                serving[i] = serves
    matched = [gid for gid in code_answers if any(gid in serves for serves in serving.values())]
    for i, serves in serving.items():
        # in the place of the last answer it serves: after all the given code that answer may use, and
        # before all the given code the release places after it (which it therefore cannot replace)
        chosen[max(serves, key=slot.get)].append(i)
    for gid in code_answers:
        chosen[gid].sort()

    for gid, rcell in answers:
        if chosen[gid] or gid in matched:
            continue
        if gid in missing and stubs[gid] and not missing[gid]:
            problems.append(Problem("missing-cell", f"your answer cell '{gid}' was not found by its nbgrader id, "
                                    "but another answer cell defines its functions "
                                    f"({', '.join(sorted(stubs[gid]))}); they are graded from there",
                                    gid, warning=True))
        else:  # (a markdown answer is graded by hand, not here: a warning)
            problems.append(Problem("missing-cell", f"your answer cell '{gid}' is missing (deleted, or its "
                                    f"functions renamed and its nbgrader metadata lost); copy it back from {released}",
                                    gid, warning=rcell.get("cell_type") != "code"))
    if matched or given_by_content:
        found = []
        if matched:
            several = len(matched) > 1
            found.append(f"{len(matched)} answer cell{'s' if several else ''} by {'their' if several else 'its'} "
                         f"function names ({', '.join(matched)})")
        if given_by_content:
            found.append(f"{given_by_content} given and test cell{'s' if given_by_content > 1 else ''} "
                         "by their content")
        problems.insert(0, Problem("recovered-cells", "cell metadata was missing or changed; matched "
                                   + " and ".join(found) + ". Nothing is lost: graded as usual", warning=True))
    # A function defined by several cells: all are kept, so the last definition wins, as in the kernel.
    count: dict[str, int] = {}
    for gid in code_answers:
        for i in chosen[gid]:
            for name in names(i):
                count[name] = count.get(name, 0) + 1
    for gid in code_answers:
        twice = sorted(name for name in stubs[gid] if count.get(name, 0) > 1)
        if twice:
            copies = sum(label[i] == gid for i in chosen[gid]) > 1
            problems.append(Problem("duplicate-cell", f"{', '.join(twice)} (answer cell '{gid}') "
                                    f"{'is' if len(twice) == 1 else 'are'} defined in more than one cell"
                                    f"{' (a copied cell keeps its nbgrader id)' if copies else ''}; every copy is "
                                    "kept, in order, so the last definition wins, as in your kernel", gid,
                                    warning=True))

    parts = []
    for rcell in release_cells:
        kind, gid = role(rcell), grade_id(rcell)
        if rcell.get("cell_type") != "code" or kind not in ("solution", "locked") or is_demo(rcell):
            continue
        if kind == "locked":
            parts.append((gid, kind, comment_magics(cell_source(rcell))))
            continue
        if roles[gid][1] is not rcell:
            continue
        if not chosen.get(gid):
            parts.append((gid, kind, f"# cell '{gid}' is missing from the submission"))
            continue
        for i in chosen[gid]:
            code = comment_magics(cell_source(cells[i]))
            err = _parses(code)
            if err is not None:
                where = f"line {err.lineno}" if getattr(err, "lineno", None) else "somewhere"
                which = f"cell '{gid}'" if label[i] == gid else f"a cell matched to '{gid}' by its function names"
                problems.append(Problem("syntax-error",
                                        f"{which} has a syntax error at {where}: "
                                        f"{err.msg if hasattr(err, 'msg') else err}; "
                                        "nothing in this cell could be graded", gid))
                code = f"# cell '{gid}' has a syntax error and was left out"
            parts.append((gid, kind, code))
    # In the release's order of cells (the first problem that is not a warning gives the status).
    order = {gid: k for k, gid in enumerate(roles)}
    problems.sort(key=lambda p: order.get(p.cell, -1))
    source, line_map = _join(parts)
    used = {i for gid in code_answers for i in chosen[gid]}
    skipped: dict[str, str] = {}
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code" or i in used:
            continue
        if label[i] is not None and roles[label[i]][0] == "locked":
            continue  # a given cell: its names are in the module (from the release)
        if is_demo(cell):
            what = "a demo cell (demo cells are not run when your notebook is checked or graded)"
        elif i in consumed and label[i] is None:  # a demo or test cell of the release, found by its content
            what = "a demo or test cell (neither is part of your code when your notebook is checked or graded)"
        elif label[i] is not None and roles[label[i]][0] == "test":
            what = f"the test cell '{label[i]}' (test cells are not part of your code)"
        else:
            what = (f"cell {i + 1} of the notebook, which is not an answer cell (only answer cells and "
                    "the given cells are run when your notebook is checked or graded)")
        for name in sorted(bound_names(cell_source(cell))):
            skipped.setdefault(name, what)
    module_names = bound_names(source)
    skipped = {k: v for k, v in skipped.items() if k not in module_names}
    found_ids = [grade_id(c) for c in cells if grade_id(c)]
    cell_names = [sorted(defined_names(code))[:MAX_CELL_NAMES] for _, _, code in parts]
    return Extraction(source, problems, {}, line_map, skipped_names=skipped, found_ids=found_ids,
                      cell_names=cell_names)


def bound_names(source: str) -> set[str]:
    """Names a cell binds at top level: what `defined_names` finds, plus imports and loop targets."""
    names = defined_names(source)
    try:
        tree = ast.parse(comment_magics(source))
    except (SyntaxError, ValueError):
        return names
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With)):
            targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else \
                [item.optional_vars for item in node.items if item.optional_vars is not None]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def free_names(source: str) -> set[str]:
    """Names a cell uses without binding them itself: what it takes from the cells before it."""
    try:
        tree = ast.parse(comment_magics(source))
    except (SyntaxError, ValueError):
        return set()
    used, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return used - bound


def tested_by(release) -> dict[str, str]:
    """Name an answer or given cell of the release defines -> grade_id of the test cell that tests it.

    That is the first test cell, in notebook order, that uses the name:
    nbgrader notebooks put the test right after its answer, and a later test
    cell that uses the name too uses it as a tool (the multi-head attention's
    test cell builds its masks with the mask functions, tested before it).
    Read from the release only: a submission cannot move a check.
    """
    defined: set[str] = set()
    out: dict[str, str] = {}
    for cell in release.cells:
        if cell.get("cell_type") != "code" or is_demo(cell):
            continue
        kind = role(cell)
        if kind == "solution":
            defined |= stub_names(cell)
        elif kind == "locked":
            defined |= defined_names(cell_source(cell))
        elif kind == "test":
            for name in free_names(cell_source(cell)) & defined:
                out.setdefault(name, grade_id(cell))
    return out


def names_lost(line_map, cell_names, failed) -> dict[int, set[str]]:
    """First line of each cell of ``failed`` (first lines of ``line_map``'s cells) -> the names it defines
    (``cell_names``, `Extraction.cell_names`) whose last definition in the module is in that cell: what a
    kernel would have taken from a cell that raised. A name a later cell defines again is that cell's (the
    kernel keeps the last)."""
    owner: dict[str, int] = {}
    for (first, _, _), names in zip(line_map, cell_names):
        for name in names:
            owner[name] = first
    lost: dict[int, set[str]] = {first: set() for first in failed}
    for name, first in owner.items():
        if first in lost:
            lost[first].add(name)
    return lost


def _still_a_stub(node) -> bool:
    """A def that always reaches ``raise NotImplementedError`` (at the top level of its body, no return
    before it), as the release's stubs do; a class with such a method."""
    if isinstance(node, ast.ClassDef):
        return any(_still_a_stub(n) for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for stmt in node.body:
        if isinstance(stmt, ast.Return):
            return False
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def readiness(source: str, release) -> dict[str, list[list[str]]]:
    """What of the release's stubs the student module still lacks, as [answer cell, name] pairs.

    ``missing``: a function or class of a stub that the module does not define
    at top level; ``unimplemented``: one whose last definition still only
    raises NotImplementedError (a class: one of its methods). Parsed, never
    run; a module that does not parse reports nothing (its syntax error is
    reported instead).
    """
    out: dict[str, list[list[str]]] = {"missing": [], "unimplemented": []}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return out
    last: dict[str, ast.AST] = {}  # top-level name -> its last binding (the one the kernel keeps)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            last[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    last[target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                last[(alias.asname or alias.name).split(".")[0]] = node
    for cell in release.cells:
        if role(cell) != "solution" or cell.get("cell_type") != "code":
            continue
        try:
            stub_tree = ast.parse(comment_magics(cell_source(cell)))
        except (SyntaxError, ValueError):
            continue
        for node in stub_tree.body:  # in the stub's order: the order the instructions give
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _still_a_stub(node):
                if node.name not in last:
                    out["missing"].append([grade_id(cell), node.name])
                elif _still_a_stub(last[node.name]):
                    out["unimplemented"].append([grade_id(cell), node.name])
    return out


_PART = re.compile(r"^#{1,3}\s+(Part\b.*)$")


def part_titles(release) -> dict[str, str]:
    """grade_id of every graded cell (answers and tests) -> the title of the part it sits in ("Part 2 — ...")."""
    titles: dict[str, str] = {}
    current = ""
    for cell in release.cells:
        if cell.get("cell_type") == "markdown":
            for line in cell_source(cell).splitlines():
                m = _PART.match(line.strip())
                if m:
                    current = m.group(1).strip()
        elif grade_id(cell) and role(cell) in ("solution", "test"):
            titles[grade_id(cell)] = current
    return titles
