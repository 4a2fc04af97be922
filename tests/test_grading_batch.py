"""`lmcourse grade` over a folder, the gradebook, resuming after SIGKILL, `lmcourse check` (Gradescope: test_gradescope_bundle.py)."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"
CHECK_SOURCE = (FIXTURE / "autograder" / AID / "test_checks.py").read_text()
ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def lmcourse(*args, **kw):
    return subprocess.run([sys.executable, "-m", "lmcourse.cli", *map(str, args)], capture_output=True, text=True,
                          env=ENV, **kw)


def make_submissions(folder: Path) -> Path:
    """alice: honest (flat layout); bob: the release untouched (nbgrader layout); carol: not JSON; dave: broken."""
    folder.mkdir(parents=True)
    (submission_from_solution(FIXTURE, AID, folder / "_a")).rename(folder / "alice.ipynb")
    released_notebook(FIXTURE, AID, folder / "bob" / AID)
    (folder / "carol.ipynb").write_text("{ this is not a notebook")
    dave = submission_from_solution(FIXTURE, AID, folder / "_d")
    dave.write_text(dave.read_text().replace("def softmax(x):", "def softmax(x)"))
    dave.rename(folder / "dave.ipynb")
    (folder / "_a").rmdir(), (folder / "_d").rmdir()
    return folder


def hidden_source_lines():
    return [line.strip() for line in CHECK_SOURCE.splitlines()
            if len(line.strip()) > 20 and not line.strip().startswith(("#", "from", "import", '"""'))]


def test_batch_writes_csv_results_feedback_and_gradebook(tmp_path):
    subs = make_submissions(tmp_path / "subs")
    out, db = tmp_path / "out", tmp_path / "gradebook.db"
    run = lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--jobs", 2, "--gradebook", db)
    assert run.returncode == 0, run.stderr
    assert "carol: not-json" in run.stdout and "dave: syntax-error" in run.stdout

    rows = {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice", "bob", "carol", "dave"}
    assert [rows[s]["score"] for s in ("alice", "bob", "carol", "dave")] == ["6", "0", "0", "3"]
    assert rows["alice"]["status"] == "ok" and rows["carol"]["status"] == "not-json"
    assert rows["dave"]["softmax of a vector sums to one"] == "0" and rows["dave"]["perplexity of random probabilities"] == "1"

    for student in rows:
        result = json.loads((out / "students" / student / "results.json").read_text())
        assert {"score", "max_score", "tests", "status"} <= set(result)
        for t in result["tests"]:
            assert {"name", "score", "max_score", "output", "visibility"} <= set(t)
        page = (out / "students" / student / "feedback.html").read_text()
        assert "count_words on a short sentence" in page
        for line in hidden_source_lines():
            assert line not in page, f"hidden check source in feedback: {line}"
    assert "is not valid JSON" in (out / "students" / "carol" / "feedback.html").read_text()

    # nbgrader's own API reads the grades back (what formgrader and `nbgrader export` use)
    from lmcourse.instructor.release import tools_on_path
    tools_on_path()
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        assert sorted(s.id for s in gb.students) == ["alice", "bob", "carol", "dave"]
        assert gb.find_submission(AID, "alice").score == 6
        assert gb.find_submission(AID, "bob").score == 0
        assert gb.find_grade("test_softmax", AID, AID, "dave").auto_score == 0
        assert gb.find_grade("test_perplexity", AID, AID, "dave").auto_score == 1
        assert gb.find_assignment(AID).max_score == 6
    export = subprocess.run([sys.executable, "-m", "nbgrader", "export", f"--CourseDirectory.db_url=sqlite:///{db}"],
                            cwd=tmp_path, env=ENV, capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    exported = {r["student_id"]: r["score"] for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert exported == {"alice": "6.0", "bob": "0.0", "carol": "0.0", "dave": "3.0"}


def running_with(text: str) -> list[int]:
    """Pids whose command line mentions ``text``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def test_killed_batch_resumes_without_regrading(tmp_path):
    subs = make_submissions(tmp_path / "subs")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lmcourse.cli", "grade", AID, str(subs), "--out", str(out), "--course", str(FIXTURE),
           "--jobs", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob("students/*/results.json")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the batch and its runner, mid-way
    proc.wait()
    time.sleep(0.5)
    assert not running_with(str(subs)), "a runner outlived its batch"
    finished = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("students/*/results.json")}
    assert 1 <= len(finished) < 4, finished
    for p in out.glob("students/*/results.json"):
        json.loads(p.read_text())  # never a half-written file
    again = lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--no-progress")
    assert again.returncode == 0, again.stderr
    assert f"unchanged {len(finished)}" in again.stdout, again.stdout
    for student, mtime in finished.items():
        assert (out / "students" / student / "results.json").stat().st_mtime_ns == mtime, f"{student} was graded again"
    rows = {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice", "bob", "carol", "dave"} and rows["alice"]["score"] == "6"


def test_lmcourse_check_says_what_and_where(tmp_path):
    wrong = submission_from_solution(FIXTURE, AID, tmp_path, replace={
        "softmax": "def softmax(x):\n    return np.asarray(x) / np.sum(x)"})
    run = lmcourse("check", AID, wrong, "--course", FIXTURE)
    assert run.returncode == 1, run.stdout + run.stderr
    text = run.stdout
    assert "isolation:" in text
    assert "✗ check: softmax of a vector sums to one  [0/1]  (function softmax)" in text
    assert "expected" in text and "found" in text
    assert "✓ check: count_words on a short sentence" in text
    assert "✓ test cell 'test_softmax' runs without an error" in text  # the notebook's own (weaker) test
    assert "with large logits" not in text, "hidden checks must not run in `lmcourse check`"
    assert "hidden checks worth 4 points run only when your work is graded" in text
    assert "not ready to submit yet" in text
    honest = lmcourse("check", AID, submission_from_solution(FIXTURE, AID, tmp_path / "ok"), "--course", FIXTURE)
    assert honest.returncode == 0 and "visible checks: 2 / 2 points" in honest.stdout, honest.stdout


def test_a_crashing_grader_costs_only_its_submission(tmp_path):
    """A runner that dies (here: a broken check calling os._exit) is replaced; the batch goes on."""
    import shutil

    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    with (course / "autograder" / AID / "test_checks.py").open("a") as f:
        f.write("\n\n@check(points=0, cell='test_count_words', name='crashes the grader on right answers')\n"
                "def test_crash(student):\n"
                "    if student.count_words('x y') == {'x': 1, 'y': 1}:\n"
                "        import os\n        os._exit(3)\n")
    subs = tmp_path / "subs"
    submission_from_solution(course, AID, subs / "_a").rename(subs / "alice.ipynb")
    released_notebook(course, AID, subs / "bob" / AID)
    out = tmp_path / "out"
    # The preflight grades the solution first, meets the crash, and grades no student at all.
    stopped = lmcourse("grade", AID, subs, "--out", out, "--course", course, "--no-progress")
    assert stopped.returncode == 1 and "preflight" in stopped.stderr and "no submission was graded" in stopped.stderr
    assert not (out / "students").exists()
    # Past the preflight (an instructor's explicit choice), the crash costs only its submission.
    run = lmcourse("grade", AID, subs, "--out", out, "--course", course, "--no-progress", "--no-preflight")
    assert run.returncode == 1  # grader errors are the instructor's to fix: non-zero exit
    assert "NOT graded" in run.stdout
    rows = {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert rows["alice"]["score"] == "" and rows["alice"]["status"] == "grader-error"  # no score recorded
    alice = json.loads((out / "students" / "alice" / "results.json").read_text())
    bob = json.loads((out / "students" / "bob" / "results.json").read_text())
    assert alice["status"] == "grader-error" and "stopped" in alice["message"]
    assert bob["status"] == "ok" and bob["max_score"] == 6 and len(bob["tests"]) == 6
    again = lmcourse("grade", AID, subs, "--out", out, "--course", course, "--no-progress", "--no-preflight")
    assert "graded 1, unchanged 1" in again.stdout, again.stdout  # the failed one is retried, not kept


def test_a_runner_answers_its_result_on_the_pipe_and_writes_nothing(tmp_path):
    """In a batch the runner only grades: the result comes back on its pipe, the batch writes every file."""
    from lmcourse.instructor import batch
    from lmcourse.grading.result import Result

    folder = tmp_path / "subs"
    notebook = submission_from_solution(FIXTURE, AID, folder)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    runner = batch.Runner(FIXTURE, AID, "cpu")
    try:
        result = runner.grade(notebook, timeout=120)
        broken = runner.grade(tmp_path / "no-such.ipynb", timeout=120)
    finally:
        runner.close()
    assert isinstance(result, Result) and result.graded and result.score == result.max_score == 6
    assert [t.name for t in result.tests] and result.extra_data is None
    assert broken.graded and broken.score == 0  # a missing notebook is the submission's problem, not a crash
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
