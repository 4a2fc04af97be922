"""Submissions for tests: the release as handed out, an honest solution, known-wrong variants.

``submission_from_solution`` plays an honest student: it takes the released
notebook (with its nbgrader checksums) and fills each answer cell with the
instructor's solution code, as if typed in. ``replace`` swaps in another
definition of a function (a known-wrong variant) so a test can show that the
check meant to catch it does.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

from lmcourse.course import load_release, load_source
from lmcourse.grading import notebook as nbmod

nbmod.skip_slow_jsonschema_formats()
import nbformat  # noqa: E402  (after the line above, on purpose)


def released_notebook(root: Path, assignment_id: str, dest_dir: Path) -> Path:
    """Copy the student version, unchanged, to ``dest_dir/<id>.ipynb``."""
    from lmcourse.course import Assignment, Course

    src = Assignment(Course(root), assignment_id).release_path
    dest = Path(dest_dir) / f"{assignment_id}.ipynb"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return dest


@dataclass(frozen=True)
class Edit:
    """A known-wrong variant as a small change to the solution: ``old`` becomes ``new``.

    ``old`` must occur exactly once in the solution's definition of the
    function or class it is applied to, or `submission_from_solution` raises:
    a variant written as an edit cannot silently drift from the solution it
    breaks (a whole copied function can). ``why`` says what the bug is.
    """

    old: str
    new: str
    why: str = ""


def definition_source(code: str, name: str) -> str | None:
    """The source of the top-level def/class ``name`` in ``code`` (decorators included); None if absent."""
    tree = ast.parse(code)
    lines = code.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return "\n".join(lines[first:node.end_lineno])
    return None


def apply_edits(definition: str, edits, name: str) -> str:
    """``definition`` with every `Edit` applied; ValueError when one's ``old`` is not there exactly once."""
    for edit in edits:
        count = definition.count(edit.old)
        if count != 1:
            raise ValueError(f"the variant's edit of {name} expects {edit.old!r} exactly once in the solution's "
                             f"definition, found it {count} times: update the variant")
        definition = definition.replace(edit.old, edit.new)
    return definition


def replace_definition(code: str, name: str, new: str) -> str | None:
    """``code`` with the top-level def/class ``name`` (decorators included) replaced by ``new``; None if absent."""
    tree = ast.parse(code)
    lines = code.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return "\n".join(lines[:first] + new.rstrip("\n").splitlines() + lines[node.end_lineno:])
    return None


def submission_from_solution(root: Path, assignment_id: str, dest_dir: Path,
                             replace: dict[str, str] | None = None) -> Path:
    """Write ``dest_dir/<id>.ipynb``: the release with every answer cell holding the solution code.

    ``replace={"name": "def name(...):\\n    ..."}`` swaps that top-level
    definition for the given one; ``replace={"name": Edit(old, new)}`` (or a
    list of edits) changes the solution's own definition instead. A name
    defined in no answer cell is a KeyError.
    """
    root = Path(root)
    release = load_release(root, assignment_id)
    solution = {nbmod.grade_id(c): c for c in load_source(root, assignment_id).cells if nbmod.grade_id(c)}
    todo = dict(replace or {})
    for cell in release.cells:
        gid = nbmod.grade_id(cell)
        if nbmod.role(cell) != "solution" or gid not in solution:
            continue
        code = nbmod.strip_markers(nbmod.cell_source(solution[gid]))
        for name in list(todo):
            change = todo[name]
            if isinstance(change, Edit):
                change = [change]
            if cell.cell_type != "code" or definition_source(code, name) is None:
                continue
            if not isinstance(change, str):  # edits of the solution's own definition
                change = apply_edits(definition_source(code, name), change, name)
            swapped = replace_definition(code, name, change.strip("\n"))
            if swapped is not None:
                code = swapped
                del todo[name]
        cell.source = code
    if todo:
        raise KeyError(f"no answer cell of {assignment_id} defines {', '.join(sorted(todo))}")
    dest = Path(dest_dir) / f"{assignment_id}.ipynb"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(release, dest)
    return dest


def check_module(root: Path, assignment_id: str, name: str):
    """One of a unit's check files (``autograder/<id>/<name>.py``), imported as the grader imports it: its
    folder first on the path, for its ``conftest``. For the course's own tests, which read a check's constants
    or its decorators; a ``conftest`` imported before is put back afterwards."""
    import importlib.util
    import sys

    folder = Path(root) / "autograder" / assignment_id
    sys.path.insert(0, str(folder))
    saved = sys.modules.pop("conftest", None)
    try:
        spec = importlib.util.spec_from_file_location(f"checks_{assignment_id.replace('-', '_')}_{name}",
                                                      folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("conftest", None)
        if saved is not None:
            sys.modules["conftest"] = saved


def check_infos(root: Path, assignment_id: str) -> list:
    """Every check of a unit, as the `checks.CheckInfo` its decorator gives (name, points, cell, visibility),
    in file and definition order."""
    from lmcourse.grading.checks import info_of

    folder = Path(root) / "autograder" / assignment_id
    found = []
    for path in sorted(folder.glob("test_*.py")):
        module = check_module(root, assignment_id, path.stem)
        found += [info for info in map(info_of, vars(module).values()) if info is not None]
    return found
