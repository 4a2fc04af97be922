"""The Gradescope autograder bundle: the same checks, run in Gradescope's container.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once
when the image is built, then ``run_autograder`` once per submission with the
student's files in ``/autograder/submission``; it reads
``/autograder/results/results.json``. Our ``run_autograder`` calls the very
runner ``lmcourse grade`` uses, on a course tree shipped inside the zip::

    setup.sh  run_autograder  requirements.txt
    src/lmcourse/...                          the grader (and library) source
    course/solutions/<id>/<id>.ipynb          the reference solution
    course/assignments/<id>/<id>.ipynb        the release (checksums of locked cells)
    course/autograder/<id>/...                the hidden checks

Two environment variables let a test run ``run_autograder`` without
Gradescope: ``LMCOURSE_AUTOGRADER_DIR`` (instead of ``/autograder``) and
``LMCOURSE_PYTHON`` (an interpreter that already has the dependencies).
"""

from __future__ import annotations

import os
import stat
import tomllib
import zipfile
from pathlib import Path

BOOK_ONLY = ("jupyter-book", "sphinxcontrib-bibtex", "playwright")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope image setup (runs once): Python 3.11, bubblewrap for the sandbox, pinned packages.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends software-properties-common bubblewrap
if ! command -v python3.11 >/dev/null; then
    add-apt-repository -y ppa:deadsnakes/ppa && apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
fi
python3.11 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --upgrade pip
/autograder/venv/bin/python -m pip install --extra-index-url https://download.pytorch.org/whl/cpu \\
    -r /autograder/source/requirements.txt
# The corpora the checks train on (TinyShakespeare for 03-rnnlm), fetched once into the image's
# cache and verified by checksum, so that grading a submission needs no network.
PYTHONPATH=/autograder/source/src /autograder/venv/bin/python -m lmcourse.cli data \
    || echo "warning: corpora not prefetched; the grader will download them when a check needs them"
# The hidden checks and the solution: readable by root (the grader) only, never by the worker's uid.
chmod -R go-rwx /autograder/source/course
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this once per submission. It grades the notebook with the same
# runner as `lmcourse grade` and writes results/results.json in Gradescope's schema.
set -uo pipefail
AG="${{LMCOURSE_AUTOGRADER_DIR:-/autograder}}"
PY="${{LMCOURSE_PYTHON:-/autograder/venv/bin/python}}"
ID="{assignment}"
NB="$AG/submission/$ID.ipynb"
if [ ! -f "$NB" ]; then
    # Gradescope keeps the uploaded file name; take the one notebook there is.
    FOUND="$(find "$AG/submission" -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' | sort | head -n 1)"
    [ -n "$FOUND" ] && NB="$FOUND"
fi
mkdir -p "$AG/results"
export PYTHONPATH="$AG/source/src${{PYTHONPATH:+:$PYTHONPATH}}"
export PYTHONDONTWRITEBYTECODE=1
export PATH="$(dirname "$PY"):$PATH"
"$PY" -m lmcourse.grading.runner "$AG/source/course" "$ID" "$NB" \\
    --out "$AG/results/results.json" --tier auto --gradescope
status=$?
if [ ! -s "$AG/results/results.json" ]; then
    # The grader itself failed: tell Gradescope so instead of leaving no result.
    printf '{{"score": 0, "output": "The autograder failed (status %s); please contact the course staff.", "tests": []}}\\n' \\
        "$status" > "$AG/results/results.json"
fi
exit 0
"""


def requirements(root: Path) -> str:
    """Pinned runtime dependencies from pyproject.toml (minus book-only ones) plus pytest."""
    pyproject = Path(root) / "pyproject.toml"
    if not pyproject.exists():  # a course tree without the package (the tests' fixture): use this checkout's
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    meta = tomllib.loads(pyproject.read_text())["project"]
    deps = [d for d in meta["dependencies"] if not d.split("=")[0].strip().startswith(BOOK_ONLY)]
    deps += [d for d in meta.get("optional-dependencies", {}).get("test", []) if d.startswith("pytest==")]
    return "\n".join(deps) + "\n"


def _add_tree(z: zipfile.ZipFile, folder: Path, arcbase: str) -> None:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(p in ("__pycache__", ".ipynb_checkpoints", ".pytest_cache") for p in rel.parts):
            continue
        if path.suffix == ".pyc":
            continue
        _write(z, f"{arcbase}/{rel.as_posix()}", path.read_bytes())


def _write(z: zipfile.ZipFile, name: str, data: bytes | str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # fixed: the same input gives the same zip
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    z.writestr(info, data)


def build(root: Path, assignment_id: str, out: Path) -> Path:
    """Write the autograder zip for ``assignment_id`` to ``out``."""
    from lmcourse.grading import notebook as nbmod
    from lmcourse.grading.runner import checks_dir

    root, out = Path(root), Path(out)
    nbmod.load_release(root, assignment_id)  # fails with "run lmcourse assign" when missing
    folder = checks_dir(root, assignment_id)
    package = Path(__file__).resolve().parents[1]  # lmcourse/
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w") as z:
        _write(z, "setup.sh", SETUP_SH, executable=True)
        _write(z, "run_autograder", RUN_AUTOGRADER.format(assignment=assignment_id), executable=True)
        _write(z, "requirements.txt", requirements(root))
        _add_tree(z, package, "src/lmcourse")
        _add_tree(z, root / "solutions" / assignment_id, f"course/solutions/{assignment_id}")
        _add_tree(z, root / "assignments" / assignment_id, f"course/assignments/{assignment_id}")
        _add_tree(z, folder, f"course/autograder/{assignment_id}")
    os.replace(tmp, out)
    return out
