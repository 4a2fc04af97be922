"""The grader reads top-down: `lmcourse grade` -> batch -> runner -> plugin -> sandbox -> inside; and the
package's folders say who gets what: `lmcourse.instructor` (instructors only) sits above everything a student
installs, which never imports it.

Imports are read from the source (every ``import``, also inside functions), so
a lazy import that hides a circle from Python's import system does not hide
it from these tests.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lmcourse"

# The path of a submission, top to bottom: none of these imports one above it.
CHAIN = ["lmcourse.cli", "lmcourse.instructor.cli", "lmcourse.instructor.batch", "lmcourse.grading.runner",
         "lmcourse.grading.plugin", "lmcourse.grading.sandbox", "lmcourse.grading.sandbox.inside"]
INSIDE = "lmcourse.grading.sandbox.inside"
# Every module of the grader, top-down, as `lmcourse.grading`'s docstring lists them.
LAYOUT = ["lmcourse.grading." + m for m in (
    "cli", "runner", "causes", "report", "result", "signatures", "bounded", "notebook", "plugin", "rules", "seq2seq",
    "compare", "training", "optimizer", "layers", "checks", "replay", "sandbox", "sandbox.inside", "kinds")]
# `lmcourse.instructor`'s modules, as its docstring lists them (publishing, then grading a cohort top-down).
INSTRUCTOR = ["lmcourse.instructor." + m for m in (
    "book", "slides", "lecture", "notes", "release", "leaks", "publish",
    "cli", "slurm", "batch", "gradebook", "gradescope", "leaderboard", "cohort", "late", "similarity",
    "export", "mistakes", "preflight",
    "testing")]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every lmcourse module `path` imports: ``from a import b`` counts ``a.b`` when it is a module,
    else ``a`` (a name its ``__init__`` defines)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:
                found.add(f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module)
    return {m for m in found if m.split(".")[0] == "lmcourse" and m in MODULES}


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}
GRAPH = {module_name(p): imports_of(p) - {module_name(p)} for p in PACKAGE.rglob("*.py")}


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_chain_exists():
    assert set(CHAIN) <= MODULES


@pytest.mark.parametrize("lower", CHAIN[1:])
def test_no_module_of_the_chain_imports_one_above_it(lower):
    above = CHAIN[:CHAIN.index(lower)]
    # a module belongs to the lowest link of the chain whose name it starts with
    members = [m for m in GRAPH if under(m, lower)
               and not any(under(m, deeper) for deeper in CHAIN[CHAIN.index(lower) + 1:])]
    for m in members:
        for target in GRAPH[m]:
            owner = max((c for c in CHAIN if under(target, c)), key=len, default=None)
            assert owner not in above, f"{m} imports {target}, which is above it ({owner})"


def test_the_graders_layout_is_top_down_and_documented():
    import lmcourse.grading

    def owner(m):
        return max((x for x in LAYOUT if under(m, x)), key=len, default=None)

    listed = [line.split()[0].rstrip("/").replace("/", ".") for line in lmcourse.grading.__doc__.splitlines()
              if line.startswith("    ") and line.split() and not line.strip().startswith("(")]
    assert ["lmcourse.grading." + m for m in listed] == LAYOUT
    unlisted = {m for m in GRAPH if under(m, "lmcourse.grading") and m != "lmcourse.grading" and owner(m) is None}
    assert not unlisted, f"grader modules missing from the layout: {unlisted}"
    for m, targets in GRAPH.items():
        for target in targets:
            a, b = owner(m), owner(target)
            if a and b and a != b:
                assert LAYOUT.index(b) > LAYOUT.index(a), f"{m} imports {target}, which is above it in the layout"


def test_the_worker_side_imports_nothing_from_outside_its_package():
    """What runs in the worker is a copy of `inside/`: it can only import itself and third-party
    libraries (the package name differs there, so an absolute lmcourse import would even
    reach the worker's own, possibly different, lmcourse)."""
    for m in GRAPH:
        if under(m, INSIDE):
            outside = {t for t in GRAPH[m] if not under(t, INSIDE)}
            assert not outside, f"{m} imports {outside}"
    for path in (PACKAGE / "grading" / "sandbox" / "inside").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level:
                assert (node.module or "").split(".")[0] != "lmcourse", f"{path.name}: from {node.module}"
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "lmcourse" for a in node.names), path.name


def test_the_import_graph_has_no_circle():
    """Among lmcourse's modules. A module's own packages aside: Python imports them before the module,
    and ``from . import x`` names the package too; a package's ``__init__`` importing its submodules counts."""
    graph = {m: {t for t in ts if not (m + ".").startswith(t + ".")} for m, ts in GRAPH.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_a_known_circle_is_found(monkeypatch):
    """The circle finder is not vacuous: a planted circle fails it."""
    monkeypatch.setitem(GRAPH, "lmcourse.grading.sandbox.inside.wire",
                        GRAPH["lmcourse.grading.sandbox.inside.wire"] | {"lmcourse.grading.runner"})
    with pytest.raises(AssertionError, match="import circle"):
        test_the_import_graph_has_no_circle()
    with pytest.raises(AssertionError, match="above it"):
        test_no_module_of_the_chain_imports_one_above_it(INSIDE)
    with pytest.raises(AssertionError, match="above it in the layout"):
        test_the_graders_layout_is_top_down_and_documented()


def _listed(doc: str) -> list[str]:
    return [line.split()[0] for line in doc.splitlines() if line.startswith("    ") and line.split()]


def test_the_instructor_package_lists_its_modules():
    import lmcourse.instructor

    assert ["lmcourse.instructor." + m for m in _listed(lmcourse.instructor.__doc__)] == INSTRUCTOR
    found = {m for m in GRAPH if under(m, "lmcourse.instructor") and m != "lmcourse.instructor"}
    assert found == set(INSTRUCTOR), f"modules of lmcourse.instructor its docstring does not list: {found - set(INSTRUCTOR)}"


def what_imports_the_instructor_package() -> dict[str, set[str]]:
    """Modules outside `lmcourse.instructor` that import it (the `lmcourse` command's instructor subcommands
    aside: they are registered only where the package is installed)."""
    return {m: {t for t in targets if under(t, "lmcourse.instructor")} for m, targets in GRAPH.items()
            if not under(m, "lmcourse.instructor") and m != "lmcourse.cli"
            and any(under(t, "lmcourse.instructor") for t in targets)}


def test_what_students_install_never_imports_the_instructor_package():
    """The student edition ships `lmcourse` without `lmcourse.instructor`: nothing it holds may need it."""
    assert what_imports_the_instructor_package() == {}


def test_an_import_of_the_instructor_package_is_found(monkeypatch):
    monkeypatch.setitem(GRAPH, "lmcourse.grading.report",
                        GRAPH["lmcourse.grading.report"] | {"lmcourse.instructor.batch"})
    assert what_imports_the_instructor_package() == {"lmcourse.grading.report": {"lmcourse.instructor.batch"}}
