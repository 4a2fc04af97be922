"""Generate the student notebooks (``assignments/<id>/``) from ``solutions/<id>/``.

nbgrader does the real work (``GenerateAssignment``: strip solutions to
``raise NotImplementedError()``, drop hidden tests, lock cells, compute
checksums) in a throw-away course directory. We then normalise the result so
that generating twice gives byte-identical files: outputs and execution counts
cleared, volatile metadata dropped, JSON written with sorted keys. That is
what lets ``lmcourse assign --check`` (and a test) say whether ``assignments/``
is in sync with ``solutions/``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from lmcourse.course import Course
from lmcourse.files import atomic_write
from lmcourse.grading.notebook import skip_slow_jsonschema_formats

skip_slow_jsonschema_formats()
import nbformat  # noqa: E402  (after the line above, on purpose)

VOLATILE_NB_METADATA = ("widgets", "toc", "varInspector", "celltoolbar", "vscode", "colab", "jupytext")
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime", "jupyter", "vscode")


def tools_on_path() -> None:
    """Put this Python's bin/ first on PATH: nbgrader shells out to `alembic` by name."""
    bindir = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if not parts or parts[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir, *[p for p in parts if p != bindir]])


def normalise(nb) -> str:
    """The release as deterministic text."""
    for key in VOLATILE_NB_METADATA:
        nb.metadata.pop(key, None)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        if "attachments" in cell and not cell.attachments:
            del cell["attachments"]
    return nbformat.writes(nb, version=4) + "\n"


def generate(root: Path, assignment_id: str) -> dict[str, bytes]:
    """Run nbgrader on solutions/<id>/ in a temporary course; return {relative path: bytes}."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    tools_on_path()
    src = Path(root) / "solutions" / assignment_id  # the source folder, images and data included
    with tempfile.TemporaryDirectory(prefix="lmcourse-assign-") as tmp:
        course = Path(tmp)
        shutil.copytree(src, course / "source" / assignment_id,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        config = Config()
        config.CourseDirectory.root = str(course)
        config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
        # The throw-away course needs no gradebook: creating one runs `alembic heads` in a
        # subprocess (many seconds). Same pipeline as nbgrader's, minus its database step.
        from nbgrader.converters import GenerateAssignment
        from nbgrader.preprocessors import SaveCells

        config.GenerateAssignment.no_database = True
        config.GenerateAssignment.preprocessors = [
            p for p in GenerateAssignment.class_traits()["preprocessors"].default() if p is not SaveCells]
        api = NbGraderAPI(config=config)
        result = api.generate_assignment(assignment_id, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader could not generate '{assignment_id}':\n{result.get('error') or result.get('log')}")
        out: dict[str, bytes] = {}
        release = course / "release" / assignment_id
        for path in sorted(release.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(release).as_posix()
            if path.suffix == ".ipynb":
                out[rel] = normalise(nbformat.read(path, as_version=4)).encode()
            else:
                out[rel] = path.read_bytes()
        return out


def stale_files(root: Path, assignment_id: str, files: dict[str, bytes]) -> list[str]:
    dest = Path(root) / "assignments" / assignment_id
    stale = [rel for rel, data in files.items() if not (dest / rel).exists() or (dest / rel).read_bytes() != data]
    if dest.is_dir():
        stale += [p.relative_to(dest).as_posix() + " (not in the release)" for p in sorted(dest.rglob("*"))
                  if p.is_file() and p.relative_to(dest).as_posix() not in files]
    return stale


def write(root: Path, assignment_id: str, files: dict[str, bytes]) -> None:
    dest = Path(root) / "assignments" / assignment_id
    if dest.exists():
        shutil.rmtree(dest)
    for rel, data in files.items():
        atomic_write(dest / rel, data)


def main(root: Path, ids: list[str] | None, check_only: bool = False) -> int:
    """Generate (or with ``check_only``, verify) the student versions; 0 when all are in sync."""
    root = Path(root)
    known = Course(root).assignment_ids()
    ids = list(ids or known)
    unknown = [i for i in ids if i not in known]
    if unknown:
        print(f"lmcourse assign: no solutions/<id>/<id>.ipynb for {', '.join(unknown)}; "
              f"known: {', '.join(known) or 'none'}", file=sys.stderr)
        return 1
    stale_ids = []
    for aid in ids:
        files = generate(root, aid)
        stale = stale_files(root, aid, files)
        if check_only:
            if stale:
                stale_ids.append(aid)
                print(f"{aid}: STALE ({', '.join(stale)}); run `lmcourse assign {aid}`")
            else:
                print(f"{aid}: up to date")
        else:
            if stale:
                write(root, aid, files)
            print(f"{aid}: {'written' if stale else 'up to date'} -> assignments/{aid}/")
    if stale_ids:
        print(f"lmcourse assign: assignments/ is out of date with solutions/ for {', '.join(stale_ids)}", file=sys.stderr)
        return 1
    return 0
