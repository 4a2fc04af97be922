"""The Gradescope bundle, installed and run the way Gradescope runs it.

For every assignment in ``solutions/``: build the zip, unpack it into an
``/autograder``-like tree (``LMCOURSE_AUTOGRADER_DIR``), and run
``run_autograder`` with a clean environment and the python of a FRESH venv
made by the bundle's own ``install_python.sh`` (once per session, shared by the
assignments: the install does not depend on the assignment). Honest work gets
full marks, the release 0, and a notebook that is a symbolic link (to the
solution, to another student's notebook) 0 with the reason. On the fixture
course: the bundle's contents, and that a failing autograder (preflight,
grader-error) leaves no results.json, so Gradescope records no score.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

from lmcourse import __version__
from lmcourse.instructor.gradescope import FAILURE_BANNER, SYMLINK_MESSAGE, build
from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
FIXTURE_ID = "00-fixture"
ALL_ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").is_file())
# Graded through the bundle: every assignment when LMCOURSE_ALL_BUNDLES=1 (run it after changing the bundle,
# the preflight or run_autograder); otherwise, in `make test`, the first (numpy only) and 03-rnnlm (torch, the
# trusted layers, a corpus and a graded training run, in the cheapest of the torch units: a grade of 03 takes
# about 14 s here, 05-transformer's 33 s). Each graded assignment costs its preflight (the solution and the
# release graded, training runs included) and the honest grade. 06's bundle was graded with
# LMCOURSE_ALL_BUNDLES=1 when it landed (5 passed). Every assignment's bundle is still built and its contents
# checked (test_every_assignment_bundles_its_own_files).
ASSIGNMENTS = ALL_ASSIGNMENTS if os.environ.get("LMCOURSE_ALL_BUNDLES") == "1" else \
    sorted({ALL_ASSIGNMENTS[0], "03-rnnlm"} & set(ALL_ASSIGNMENTS))

# Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
TOP_KEYS = {"score", "execution_time", "output", "visibility", "stdout_visibility", "extra_data", "tests",
            "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "number", "output", "tags", "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = pytest.mark.slow


def _mirror() -> str | None:
    for c in [os.environ.get("LMCOURSE_DATA_MIRROR"), str(ROOT.parent / "shared" / "data")]:
        if c and (Path(c) / "tinyshakespeare.txt").exists():
            return c
    return None


def unpack(root: Path, assignment_id: str, ag: Path) -> Path:
    """Build the zip and unpack it as Gradescope does into ``ag/source``; return ``ag``."""
    zpath = build(root, assignment_id, ag.parent / f"{ag.name}.zip")
    with zipfile.ZipFile(zpath) as z:
        z.extractall(ag / "source")
        for info in z.infolist():  # zipfile drops the modes: restore the scripts' executable bit
            if info.external_attr >> 16 & 0o111:
                (ag / "source" / info.filename).chmod(0o755)
    return ag


class Autograder:
    """One unpacked bundle, graded again and again with a fresh submission folder each time."""

    def __init__(self, ag: Path, python: Path, cache: Path):
        self.ag, self.python, self.cache = ag, python, cache
        self.id = next((ag / "source" / "course" / "solutions").iterdir()).name

    def env(self) -> dict:
        env = {"PATH": SYSTEM_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
               "LMCOURSE_AUTOGRADER_DIR": str(self.ag), "LMCOURSE_PYTHON": str(self.python),
               "LMCOURSE_CACHE": str(self.cache)}
        if _mirror():
            env["LMCOURSE_DATA_MIRROR"] = _mirror()
        return env

    def submission(self) -> Path:
        """An empty /autograder/submission (and no results), as for a new submission."""
        for name in ("submission", "results"):
            shutil.rmtree(self.ag / name, ignore_errors=True)
        (self.ag / "submission").mkdir()
        return self.ag / "submission"

    def run(self) -> tuple[subprocess.CompletedProcess, dict | None]:
        started = time.perf_counter()
        done = subprocess.run([str(self.ag / "source" / "run_autograder")], cwd=self.ag, env=self.env(),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
        print(f"run_autograder {self.id}: {time.perf_counter() - started:.1f} s, exit {done.returncode}")
        path = self.ag / "results" / "results.json"
        return done, (json.loads(path.read_text()) if path.exists() else None)


def check_schema(result: dict) -> None:
    assert set(result) <= TOP_KEYS, set(result) - TOP_KEYS
    assert isinstance(result["score"], (int, float)) and isinstance(result["output"], str)
    assert result.get("visibility", "visible") in VISIBILITY
    assert result.get("stdout_visibility", "hidden") in VISIBILITY
    assert isinstance(result["tests"], list) and isinstance(result["extra_data"], dict)
    for t in result["tests"]:
        assert set(t) <= TEST_KEYS, set(t) - TEST_KEYS
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert isinstance(t["name"], str) and isinstance(t.get("output", ""), str)
        assert t.get("visibility", "visible") in VISIBILITY
    json.dumps(result, allow_nan=False)  # strict JSON: no NaN or Infinity


# --------------------------------------------------------------------------- #
# the fresh install (once per session)
# --------------------------------------------------------------------------- #

@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """LMCOURSE_CACHE of the simulated image: corpora prefetched at install, the preflight's verdicts."""
    return tmp_path_factory.mktemp("gradescope-cache")


@pytest.fixture(scope="session")
def fresh_python(tmp_path_factory, cache_dir):
    """The python of a fresh venv made by the bundle's install_python.sh: what setup.sh installs."""
    ag = unpack(ROOT, ASSIGNMENTS[0], tmp_path_factory.mktemp("gradescope-install") / "autograder")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(LMCOURSE_AUTOGRADER_DIR=str(ag), LMCOURSE_CACHE=str(cache_dir), LMCOURSE_TORCH_INDEX="",
               LMCOURSE_BASE_PYTHON=getattr(sys, "_base_executable", sys.executable))
    if _mirror():
        env["LMCOURSE_DATA_MIRROR"] = _mirror()
    started = time.perf_counter()
    done = subprocess.run(["bash", str(ag / "source" / "install_python.sh")], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=1500)
    print(f"install_python.sh (fresh venv): {time.perf_counter() - started:.0f} s")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    python = ag / "venv" / "bin" / "python"
    # The package is installed (not editable, not found through PYTHONPATH) with every file of src/lmcourse.
    where = subprocess.run([str(python), "-I", "-c", "import lmcourse; print(lmcourse.__file__, lmcourse.__version__)"],
                           cwd="/", capture_output=True, text=True, env={"PATH": SYSTEM_PATH})
    file, version = where.stdout.split()
    installed = Path(file).parent
    assert installed.is_relative_to(ag / "venv") and version == __version__, where.stdout + where.stderr
    src = ag / "source" / "src" / "lmcourse"
    shipped = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    assert shipped and shipped <= {p.relative_to(installed) for p in installed.rglob("*") if p.is_file()}
    yield python
    shutil.rmtree(ag / "venv", ignore_errors=True)  # 1.6 GB; pytest keeps the last three sessions' tmp folders


@pytest.fixture(scope="session")
def autograders(tmp_path_factory, fresh_python, cache_dir):
    """One unpacked bundle per assignment, made on first use: its preflight's verdict is cached for the others."""
    made: dict[str, Autograder] = {}

    def get(assignment_id: str) -> Autograder:
        if assignment_id not in made:
            ag = unpack(ROOT, assignment_id, tmp_path_factory.mktemp(f"gradescope-{assignment_id}") / "autograder")
            for path in [ag / "source" / "course", *(ag / "source" / "course").rglob("*")]:  # setup.sh's chmod
                path.chmod(path.stat().st_mode & ~0o077)
            made[assignment_id] = Autograder(ag, fresh_python, cache_dir)
        return made[assignment_id]

    return get


# --------------------------------------------------------------------------- #
# every real assignment, graded as on Gradescope
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_honest_submission_gets_full_marks(autograders, assignment_id):
    grader = autograders(assignment_id)
    submission_from_solution(ROOT, assignment_id, grader.submission())
    done, result = grader.run()
    assert done.returncode == 0 and result is not None, (done.stdout + done.stderr)[-3000:]
    check_schema(result)
    extra = result["extra_data"]
    assert extra["status"] == "ok", extra["message"]
    assert extra["max_score"] > 0 and result["score"] == extra["max_score"], [
        (t["name"], t.get("output")) for t in result["tests"] if t["score"] < t["max_score"]]
    assert result["score"] == sum(t["score"] for t in result["tests"])


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_release_gets_zero_with_status_ok(autograders, assignment_id):
    grader = autograders(assignment_id)
    nb = released_notebook(ROOT, assignment_id, grader.submission())
    nb.rename(nb.with_name("my work.ipynb"))  # Gradescope keeps the uploaded name
    done, result = grader.run()
    assert done.returncode == 0 and result is not None, (done.stdout + done.stderr)[-3000:]
    check_schema(result)
    assert result["score"] == 0 and result["extra_data"]["status"] == "ok", result["extra_data"]["message"]
    assert result["tests"] and all(t["score"] == 0 for t in result["tests"])


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_a_link_to_the_solution_is_refused(autograders, assignment_id):
    grader = autograders(assignment_id)
    link = grader.submission() / f"{assignment_id}.ipynb"
    link.symlink_to(Path("..") / "source" / "course" / "solutions" / assignment_id / f"{assignment_id}.ipynb")
    assert link.resolve().is_file()
    done, result = grader.run()
    assert done.returncode == 0 and result is not None, (done.stdout + done.stderr)[-3000:]
    check_schema(result)
    assert result["score"] == 0 and result["extra_data"]["status"] == "symlink"
    assert SYMLINK_MESSAGE in result["output"]


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_a_link_to_another_students_notebook_is_refused(autograders, assignment_id, tmp_path):
    grader = autograders(assignment_id)
    other = submission_from_solution(ROOT, assignment_id, tmp_path / "bob")  # full marks, somewhere else
    (grader.submission() / "my notebook.ipynb").symlink_to(other)
    done, result = grader.run()
    assert done.returncode == 0 and result is not None, (done.stdout + done.stderr)[-3000:]
    check_schema(result)
    assert result["score"] == 0 and result["extra_data"]["status"] == "symlink"
    assert SYMLINK_MESSAGE in result["output"]


# --------------------------------------------------------------------------- #
# the bundle itself, and an autograder that fails (the fixture course: quick)
# --------------------------------------------------------------------------- #

def test_bundle_contents(tmp_path):
    ag = unpack(FIXTURE, FIXTURE_ID, tmp_path / "autograder")
    src = ag / "source"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    assert {"setup.sh", "install_python.sh", "run_autograder", "requirements.txt", "weights.txt",
            "pyproject.toml"} <= names
    assert f"course/autograder/{FIXTURE_ID}/test_checks.py" in names and "src/lmcourse/grading/runner.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".egg-info"))]
    assert all(modes[n] & stat.S_IXUSR for n in ("setup.sh", "install_python.sh", "run_autograder"))
    for script in ("setup.sh", "install_python.sh", "run_autograder"):  # valid bash (setup.sh runs only on Gradescope)
        bash_n = subprocess.run(["bash", "-n", str(src / script)], capture_output=True, text=True)
        assert bash_n.returncode == 0, (script, bash_n.stderr)
    setup, install, run = ((src / n).read_text() for n in ("setup.sh", "install_python.sh", "run_autograder"))
    assert "apt-get install" in setup and "apt-get" not in install  # the Python part runs without apt
    assert "install_python.sh" in setup and "chmod -R go-rwx" in setup and "-m lmcourse.instructor.preflight" in setup
    assert "-m lmcourse.cli data" in install  # corpora fetched into the image, not per submission
    assert "LMCOURSE_AUTOGRADER_DIR" in install and '-r "$AG/source/requirements.txt" "$BUILD"' in install
    assert "export PYTHONPATH" not in run and "unset PYTHONPATH" in run and "-m lmcourse.instructor.preflight" in run
    reqs = (src / "requirements.txt").read_text().split()
    assert reqs and all("==" in r for r in reqs) and any(r.startswith("torch==") for r in reqs)
    assert not any(r.startswith(("jupyter-book", "playwright")) for r in reqs)
    project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "lmcourse" and project["version"] == course["version"] == __version__
    assert project["dependencies"] == reqs
    weights = (src / "weights.txt").read_text().split()
    assert weights == course["optional-dependencies"]["weights"] and all("==" in w for w in weights)
    assert '--no-deps -r "$AG/source/weights.txt"' in install
    # `lmcourse gradescope` writes the same bytes (the zip is deterministic)
    cli = subprocess.run([sys.executable, "-m", "lmcourse.cli", "gradescope", FIXTURE_ID,
                          "--out", str(tmp_path / "cli.zip"), "--course", str(FIXTURE)], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "cli.zip").read_bytes() == (tmp_path / "autograder.zip").read_bytes()


@pytest.mark.parametrize("assignment_id", ALL_ASSIGNMENTS)
def test_every_assignment_bundles_its_own_files(assignment_id, tmp_path):
    """What a unit's grading needs from the bundle, for every unit, graded through it or not: its hidden
    checks and limits, its solution (the preflight's) and its release, and the course's package."""
    ag = unpack(ROOT, assignment_id, tmp_path / "autograder")
    course = ag / "source" / "course"
    assert {p.name for p in (course / "solutions").iterdir()} == {assignment_id}
    checks = ROOT / "autograder" / assignment_id
    for path in checks.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            shipped = course / "autograder" / assignment_id / path.relative_to(checks)
            assert shipped.read_bytes() == path.read_bytes(), f"{shipped} differs from {path}"
    assert (course / "solutions" / assignment_id / f"{assignment_id}.ipynb").is_file()
    assert (course / "assignments" / assignment_id / f"{assignment_id}.ipynb").is_file()
    assert (ag / "source" / "src" / "lmcourse" / "grading" / "runner.py").is_file()


@pytest.fixture()
def fixture_grader(tmp_path, fresh_python, cache_dir) -> Autograder:
    return Autograder(unpack(FIXTURE, FIXTURE_ID, tmp_path / "autograder"), fresh_python, cache_dir)


def test_fixture_bundle_grades_and_refuses_links_and_empty_folders(fixture_grader, tmp_path):
    g = fixture_grader
    submission_from_solution(FIXTURE, FIXTURE_ID, g.submission()).rename(g.ag / "submission" / "my work.ipynb")
    done, result = g.run()
    assert done.returncode == 0 and result["score"] == 6 and len(result["tests"]) == 5, done.stdout + done.stderr
    check_schema(result)
    # a linked folder that holds the notebook is a link too
    elsewhere = submission_from_solution(FIXTURE, FIXTURE_ID, tmp_path / "elsewhere" / "work").parent
    (g.submission() / "work").symlink_to(elsewhere, target_is_directory=True)
    done, result = g.run()
    assert done.returncode == 0 and result["extra_data"]["status"] == "symlink" and result["score"] == 0
    # a jupytext export of the notebook (percent-format .py) is graded the same way
    import jupytext

    exported = jupytext.read(submission_from_solution(FIXTURE, FIXTURE_ID, tmp_path / "export"))
    jupytext.write(exported, g.submission() / "my work.py", fmt="py:percent")
    done, result = g.run()
    assert done.returncode == 0 and result["score"] == 6, done.stdout + done.stderr
    g.submission()
    (g.ag / "submission" / "notes.txt").write_text("I forgot the notebook")
    done, result = g.run()
    assert done.returncode == 0 and result["extra_data"]["status"] == "no-notebook" and result["score"] == 0
    check_schema(result)


def test_a_failing_preflight_leaves_no_score(fixture_grader):
    """A check that fails the solution: nothing is graded, no results.json (Gradescope: "failed to execute")."""
    g = fixture_grader
    with (g.ag / "source" / "course" / "autograder" / FIXTURE_ID / "test_checks.py").open("a") as f:
        f.write("\n\n@check(points=1, cell='test_perplexity', name='a broken check')\n"
                "def test_broken(student):\n    assert False, 'this check is wrong'\n")
    submission_from_solution(FIXTURE, FIXTURE_ID, g.submission())
    done, result = g.run()
    assert done.returncode != 0 and result is None, done.stdout + done.stderr
    assert FAILURE_BANNER in done.stdout and "preflight" in done.stdout
    assert "a broken check" in done.stdout + done.stderr  # the instructor is told which check


def test_a_grader_error_leaves_no_score(fixture_grader):
    """The preflight passes, then the grader breaks on one submission: no 0 is recorded for it."""
    g = fixture_grader
    with (g.ag / "source" / "course" / "autograder" / FIXTURE_ID / "test_checks.py").open("a") as f:
        f.write("\n\n@check(points=0, cell='test_count_words', name='trips the grader on one answer')\n"
                "def test_trip(student):\n"
                "    if student.count_words('x y') == {'magic': 1}:\n"
                "        import pytest\n        pytest.exit('a bug of the grader', returncode=3)\n")
    submission_from_solution(FIXTURE, FIXTURE_ID, g.submission(),
                             replace={"count_words": "def count_words(text):\n    return {'magic': 1}"})
    done, result = g.run()
    assert done.returncode != 0 and result is None, done.stdout + done.stderr
    assert FAILURE_BANNER in done.stdout and "grader-error" in done.stdout
    kept = json.loads((g.ag / "results" / "failed-results.json").read_text())
    assert kept["extra_data"]["status"] == "grader-error"


def test_a_late_submission_loses_what_the_terms_policy_says(fresh_python, cache_dir, tmp_path):
    """A course with a term.toml ships it; run_autograder applies it against Gradescope's submission time (its
    metadata), from the raw score, and says so in the output; a term that names no due time falls back to
    Gradescope's own (here, a student's extension)."""
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course, symlinks=True)
    (course / "term.toml").write_text('[late]\npolicy = "penalty"\nper_day = 0.25\n\n'
                                      '[due]\n"00-fixture" = "2027-01-25 23:59+00:00"\n')
    g = Autograder(unpack(course, FIXTURE_ID, tmp_path / "autograder"), fresh_python, cache_dir)
    meta = {"created_at": "2027-01-26T10:00:00+00:00", "assignment": {"due_date": "2027-02-01T00:00:00+00:00"},
            "users": [{"name": "A", "assignment": {"due_date": None}}]}
    submission_from_solution(course, FIXTURE_ID, g.submission())
    (g.ag / "submission_metadata.json").write_text(json.dumps(meta))
    done, result = g.run()
    assert done.returncode == 0, done.stdout + done.stderr
    check_schema(result)
    assert result["score"] == 4.5 and result["extra_data"]["raw_score"] == 6  # 1 day late: -25% of 6
    assert "Late work: 1 day(s) late" in result["output"] and result["extra_data"]["late"]["days_late"] == 1
    (g.ag / "source" / "course" / "term.toml").write_text('[late]\npolicy = "cutoff"\n')  # no [due]: Gradescope's
    meta["users"][0]["assignment"]["due_date"] = "2027-01-26T09:00:00+00:00"  # an extension, an hour short
    (g.ag / "submission_metadata.json").write_text(json.dumps(meta))
    submission_from_solution(course, FIXTURE_ID, g.submission())
    done, result = g.run()
    assert done.returncode == 0 and result["score"] == 0 and "after the cut-off" in result["output"]
