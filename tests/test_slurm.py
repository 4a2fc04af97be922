"""`lmcourse grade --slurm` / `--collect` through a real single-node Slurm (tests/slurmcluster.py).

The Slurm tests start munged, slurmctld and slurmd in a temporary folder and
grade through them: the fixture course and a real assignment, compared with a
local `lmcourse grade` of the same folder; a resumed round; a task cancelled
by Slurm; a preflight that fails. Where Slurm cannot run (not root, packages
missing) they skip with the reason. The tests at the top need no Slurm.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmcourse.instructor.testing import released_notebook, submission_from_solution
from slurmcluster import LocalSlurm, unavailable
from test_grading_batch import AID, FIXTURE, make_submissions

ROOT = Path(__file__).resolve().parent.parent


def lmcourse(*args, env=None):
    env = dict(env or os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([sys.executable, "-m", "lmcourse.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL)


def rows(out: Path) -> dict[str, dict]:
    return {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open())}


def comparable(out: Path) -> dict:
    """grades.csv, and each student's results.json and feedback.html, less what differs between two runs of
    the same grade (seconds, the worker's uid) and where a Slurm task ran (extra_data.slurm)."""
    found = {"grades.csv": (out / "grades.csv").read_text()}
    for folder in sorted((out / "students").iterdir()):
        result = json.loads((folder / "results.json").read_text())
        result.pop("execution_time")
        for t in result["tests"]:
            t.pop("seconds", None)
        result["isolation"] = " ".join(w for w in result.get("isolation", "").split() if not w.rstrip(",").isdigit())
        (result.get("extra_data") or {}).pop("slurm", None)
        found[folder.name] = (result, (folder / "feedback.html").read_text())
    return found


# ---------------------------------------------------------------------------------------------------------------
# Without Slurm: the round's files, the options, the errors


def test_a_round_is_scripts_a_person_can_read_and_bash_can_run(tmp_path):
    from lmcourse.instructor.slurm import manifest

    subs = make_submissions(tmp_path / "subs")
    out = tmp_path / "out with space"
    run = lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--slurm", "--partition", "gpu-a100",
                   "--gpus-per-task", 1, "--time", "30", "--mem", "16G", "--max-running", 8,
                   "--sbatch-arg=--account=cs336", "--sbatch-arg=--qos=grading")
    assert run.returncode == 0, run.stderr
    folder = out / "slurm" / "round-1"
    assert "submit it with: bash" in run.stdout and str(folder) in run.stdout
    tasks = manifest(folder)
    assert tasks["tier"] == "gpu", "asking for GPUs with --tier auto grades the GPU tier"
    assert [t["student"] for t in tasks["tasks"]] == ["alice", "bob", "carol", "dave"]
    assert [t["index"] for t in tasks["tasks"]] == [0, 1, 2, 3]
    array = (folder / "array.sbatch").read_text()
    for line in ("#SBATCH --array=0-3%8", "#SBATCH --partition=gpu-a100", "#SBATCH --gpus-per-task=1",
                 "#SBATCH --time=30", "#SBATCH --mem=16G", "#SBATCH --account=cs336", "#SBATCH --qos=grading",
                 "#SBATCH --output=logs/task-%A_%a.out", "export LMCOURSE_TIER=gpu"):
        assert line in array.splitlines(), line
    assert "#SBATCH --partition=gpu-a100" in (folder / "preflight.sbatch").read_text()
    assert not (folder / "jobs.json").exists(), "nothing was submitted"
    for script in ("array.sbatch", "preflight.sbatch", "submit.sh"):
        check = subprocess.run(["bash", "-n", str(folder / script)], capture_output=True, text=True)
        assert check.returncode == 0, (script, check.stderr)
    # The paths hold a space: the task's command line quotes them.
    assert f"'{folder}'" in array


def test_the_default_time_limit_is_the_grading_budget_and_the_cpu_tier_without_gpus(tmp_path):
    from lmcourse.instructor.batch import runner_timeout
    from lmcourse.instructor.slurm import STARTUP_SECONDS, manifest, slurm_time

    subs = make_submissions(tmp_path / "subs")
    run = lmcourse("grade", AID, subs, "--out", tmp_path / "out", "--course", FIXTURE, "--slurm")
    assert run.returncode == 0, run.stderr
    folder = tmp_path / "out" / "slurm" / "round-1"
    assert manifest(folder)["tier"] == "cpu"
    budget = slurm_time(runner_timeout(FIXTURE, AID) + STARTUP_SECONDS)
    assert f"#SBATCH --time={budget}" in (folder / "array.sbatch").read_text()
    assert slurm_time(61) == "0-00:02:00" and slurm_time(3600) == "0-01:00:00" and slurm_time(86400 + 60) == "1-00:01:00"
    assert "gpus-per-task" not in (folder / "array.sbatch").read_text()


@pytest.mark.parametrize("args, says", [
    (["--partition", "gpu; rm -rf ~"], "--partition"),
    (["--sbatch-arg=--account=cs 336"], "--sbatch-arg"),
    (["--sbatch-arg", "account=cs336"], "--sbatch-arg"),
    (["--time", "1:00:00\n#SBATCH --uid=0"], "--time"),
    (["--cpus-per-task", "0"], "--cpus-per-task"),
])
def test_options_that_would_break_the_script_are_refused(tmp_path, args, says):
    subs = make_submissions(tmp_path / "subs")
    run = lmcourse("grade", AID, subs, "--out", tmp_path / "out", "--course", FIXTURE, "--slurm", *args)
    assert run.returncode == 1, run.stdout
    assert says in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out" / "slurm").exists()


def test_submit_without_slurm_and_collect_without_a_round_say_what_to_do(tmp_path):
    subs = make_submissions(tmp_path / "subs")
    env = dict(os.environ, PATH="/usr/bin:/bin")  # no sbatch there... unless Debian put it in /usr/bin
    if shutil.which("sbatch", path=env["PATH"]):
        env["PATH"] = str(tmp_path)
    run = lmcourse("grade", AID, subs, "--out", tmp_path / "out", "--course", FIXTURE, "--slurm", "--submit", env=env)
    assert run.returncode == 1 and "sbatch" in run.stderr and "login node" in run.stderr, run.stderr
    run = lmcourse("grade", AID, subs, "--out", tmp_path / "out", "--course", FIXTURE, "--collect")
    assert run.returncode == 1 and "no Slurm round" in run.stderr and "--slurm --submit" in run.stderr, run.stderr
    run = lmcourse("grade", AID, subs, "--out", tmp_path / "out", "--course", FIXTURE, "--submit")
    assert run.returncode == 1 and "--submit goes with --slurm" in run.stderr
    run = lmcourse("grade", AID, subs, "--out", tmp_path / "out", "--course", FIXTURE, "--slurm", "--no-preflight")
    assert run.returncode == 1 and "preflight" in run.stderr
    (tmp_path / "a-file").write_text("")
    for mode in ([], ["--slurm"], ["--collect"]):
        run = lmcourse("grade", AID, subs, "--out", tmp_path / "a-file" / "out", "--course", FIXTURE, *mode)
        assert run.returncode == 1 and "--out" in run.stderr and "cannot create" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr


def test_a_task_grades_only_after_its_preflight_passed(tmp_path):
    """The task's own guard, run as a node would run it (without Slurm): no preflight verdict, no grade."""
    subs = make_submissions(tmp_path / "subs")
    out = tmp_path / "out"
    assert lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--slurm").returncode == 0
    folder = out / "slurm" / "round-1"
    task = [sys.executable, "-m", "lmcourse.instructor.slurm", "task", str(folder), "0"]
    done = subprocess.run(task, capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    result = json.loads((folder / "results" / "alice.json").read_text())
    assert result["status"] == "grader-error" and "preflight of round-1 has not run" in result["message"]
    assert result["extra_data"]["key"] is None

    (folder / "preflight.json").write_text(json.dumps({"passed": True, "verdict": "ok", "node": "here"}))
    # A node that cannot see the submissions (not on a shared filesystem): the grader's failure, never a 0.
    (subs.parent / "elsewhere").mkdir()
    subs.rename(subs.parent / "elsewhere" / "subs")
    done = subprocess.run(task, capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    result = json.loads((folder / "results" / "alice.json").read_text())
    assert result["status"] == "grader-error" and "cannot see the submissions folder" in result["message"]
    preflight = subprocess.run([sys.executable, "-m", "lmcourse.instructor.slurm", "preflight", str(folder)],
                               capture_output=True, text=True)
    assert preflight.returncode == 4 and "cannot see the submissions folder" in preflight.stderr
    assert json.loads((folder / "preflight.json").read_text())["passed"] is False
    (subs.parent / "elsewhere" / "subs").rename(subs)
    (folder / "preflight.json").write_text(json.dumps({"passed": True, "verdict": "ok", "node": "here"}))
    done = subprocess.run(task, capture_output=True, text=True, env=dict(os.environ, LMCOURSE_TIER="cpu"))
    assert done.returncode == 0, done.stderr
    result = json.loads((folder / "results" / "alice.json").read_text())
    assert (result["status"], result["score"], result["max_score"]) == ("ok", 6, 6)
    assert result["extra_data"]["key"] == json.loads((folder / "tasks.json").read_text())["tasks"][0]["key"]


def test_collect_adds_the_likely_causes_as_a_local_batch_does(tmp_path, monkeypatch):
    """--collect, on the login node, gives each collected result the known mistakes' hints (the CPU tier's
    signatures: a login node need not have a GPU) before writing it, through the batch's own `attach`."""
    from lmcourse.instructor import mistakes, slurm

    subs = make_submissions(tmp_path / "subs")
    out = tmp_path / "out"
    assert lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--slurm").returncode == 0
    folder = out / "slurm" / "round-1"
    (folder / "preflight.json").write_text(json.dumps({"passed": True, "verdict": "ok", "node": "here"}))
    task = [sys.executable, "-m", "lmcourse.instructor.slurm", "task", str(folder), "0"]
    assert subprocess.run(task, capture_output=True, text=True, env=dict(os.environ, LMCOURSE_TIER="cpu")).returncode == 0
    asked, attached = [], []
    monkeypatch.setattr(mistakes, "for_feedback", lambda root, aid, **kw: asked.append((aid, kw["tier"], kw["mode"]))
                        or ["a signature"])
    monkeypatch.setattr(slurm.signatures, "attach", lambda result, known: attached.append(
        (result.extra_data["student_id"], known)))
    slurm.collect(FIXTURE, AID, subs, out, hints="cached", log=lambda line: None)
    assert asked == [(AID, "cpu", "cached")] and attached == [("alice", ["a signature"])]
    slurm.collect(FIXTURE, AID, subs, out, hints="cached", log=lambda line: None)  # nothing new: nothing asked
    assert len(asked) == 1


def test_a_cohort_larger_than_one_array_job_goes_in_rounds(tmp_path, monkeypatch):
    """At most MAX_TASKS tasks a round; the next run submits the rest, not what the first round still queues
    (here a stand-in squeue says the first round's two tasks are pending)."""
    from lmcourse.instructor import slurm

    subs = make_submissions(tmp_path / "subs")
    out = tmp_path / "out"
    monkeypatch.setattr(slurm, "MAX_TASKS", 2)
    said = []
    first = slurm.prepare(FIXTURE, AID, subs, out, log=said.append)
    assert (first["todo"], first["later"]) == (2, 2) and any("more submission(s)" in line for line in said)
    (out / "slurm" / "round-1" / "jobs.json").write_text('{"preflight": "40", "array": "41"}')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Slurm 22.05's squeue: a job it has forgotten (finished more than MinJobAge ago) is an error, exit 1.
    (bin_dir / "squeue").write_text('#!/bin/sh\n[ "$4" = 41 ] && printf "41_0|PENDING\\n41_1|PENDING\\n" && exit 0\n'
                                    'echo "slurm_load_jobs error: Invalid job id specified" >&2\nexit 1\n')
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert slurm.active_tasks(["40", "41"]) == {"41_0", "41_1"}, "a forgotten job is finished, not 'cannot tell'"
    second = slurm.prepare(FIXTURE, AID, subs, out, log=said.append)
    assert (second["todo"], second["queued"], second["later"]) == (2, 2, 0)
    names = lambda n: [t["student"] for t in slurm.manifest(out / "slurm" / f"round-{n}")["tasks"]]  # noqa: E731
    assert names(1) == ["alice", "bob"] and names(2) == ["carol", "dave"]
    # A round whose writing was interrupted (no tasks.json) is named and passed over, not fatal.
    (out / "slurm" / "round-3").mkdir()
    said.clear()
    third = slurm.prepare(FIXTURE, AID, subs, out, log=said.append)
    assert any("round-3: its tasks.json is missing" in line for line in said), said
    assert third["todo"] == 2 and names(4) == ["carol", "dave"]  # round 2 was never submitted: written again
    forced = slurm.prepare(FIXTURE, AID, subs, out, force=True, log=said.append)
    assert (forced["todo"], forced["queued"]) == (2, 0) and names(5) == ["alice", "bob"]  # queued or not


def test_the_grading_pages_cost_table_covers_every_assignment_and_says_what_was_not_measured():
    from lmcourse.course import Course
    from lmcourse.instructor.batch import runner_timeout
    from lmcourse.instructor.slurm import STARTUP_SECONDS
    from lmcourse.instructor.notes import cohort_cost_table

    table = cohort_cost_table(ROOT)
    measured = json.loads((ROOT / "instructors" / "grading-cost.json").read_text())
    costs = table.split("\n\n")[0]  # the first table: one row per assignment
    lines = {line.split("|")[1].strip(" `"): line for line in costs.splitlines() if line.startswith("| `")}
    assert set(lines) == set(Course(ROOT).assignment_ids())
    for unit, line in lines.items():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[1] == f"{measured[unit]['cpu']['seconds']} s", line
        assert cells[6] == f"{(runner_timeout(ROOT, unit) + STARTUP_SECONDS) / 60:.0f} min", line
        training = unit in ("03-rnnlm", "04-attention", "05-transformer", "06-bert", "07-gpt")
        if "gpu" not in measured[unit]:
            assert cells[4] == ("not measured yet" if training else "no GPU tier (no training check)"), line
    if "_slurm" in measured:
        assert "a task's overhead" in table and all(f"| `{a}` | {m['submissions']} |" in table
                                                        for a, m in measured["_slurm"].items())


# ---------------------------------------------------------------------------------------------------------------
# Through a real Slurm


@pytest.fixture(scope="module")
def cluster():
    why = unavailable()
    if why:
        if os.geteuid() == 0 and shutil.which("apt-get"):  # make test installs the packages here: a failure to say
            pytest.fail(why + "; this run is root with apt, so run `tools/ensure-system-deps.sh` (or `make test`)")
        pytest.skip(why)
    with LocalSlurm() as running:
        yield running


def slurm_grade(cluster, *args):
    return lmcourse("grade", *args, env=cluster.env)


def test_a_cohort_graded_on_slurm_is_the_same_as_a_local_batch_and_resumes(cluster, tmp_path):
    subs = make_submissions(tmp_path / "subs")
    local, remote = tmp_path / "local", tmp_path / "slurm"
    db_local, db_remote = tmp_path / "local.db", tmp_path / "slurm.db"
    run = lmcourse("grade", AID, subs, "--out", local, "--course", FIXTURE, "--gradebook", db_local, "--no-progress")
    assert run.returncode == 0, run.stderr

    run = slurm_grade(cluster, AID, subs, "--out", remote, "--course", FIXTURE, "--slurm", "--submit",
                      "--cpus-per-task", 1)
    assert run.returncode == 0, run.stderr
    assert "round 1: preflight job" in run.stdout and "(4 tasks)" in run.stdout
    cluster.wait_idle()
    run = slurm_grade(cluster, AID, subs, "--out", remote, "--course", FIXTURE, "--collect", "--gradebook", db_remote)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "collected 4, unchanged 0" in run.stdout and "dave: syntax-error" in run.stdout
    assert comparable(remote) == comparable(local)
    assert [rows(remote)[s]["score"] for s in ("alice", "bob", "carol", "dave")] == ["6", "0", "0", "3"]
    ran = json.loads((remote / "students" / "alice" / "results.json").read_text())["extra_data"]["slurm"]
    assert ran["node"] == "lmnode" and ran["round"] == 1 and ran["task"].endswith("_0")
    assert json.loads((remote / "students" / "alice" / "results.json").read_text())["isolation"].startswith("full")

    from lmcourse.instructor.release import tools_on_path
    tools_on_path()
    from nbgrader.api import Gradebook

    def scores(db):
        with Gradebook(f"sqlite:///{db}") as gb:
            return {s: gb.find_submission(AID, s).score for s in ("alice", "bob", "carol", "dave")}
    assert scores(db_remote) == scores(db_local) == {"alice": 6, "bob": 0, "carol": 0, "dave": 3}

    # Dave fixes his notebook, Erin hands in late: the next round grades exactly those two.
    fixed = submission_from_solution(FIXTURE, AID, tmp_path / "_fixed")
    shutil.copy(fixed, subs / "dave.ipynb")
    shutil.copy(fixed, subs / "erin.ipynb")
    run = slurm_grade(cluster, AID, subs, "--out", remote, "--course", FIXTURE, "--collect")
    assert run.returncode == 1 and "2 not submitted" in run.stdout and "dave" in run.stdout, run.stdout
    run = slurm_grade(cluster, AID, subs, "--out", remote, "--course", FIXTURE, "--slurm", "--submit",
                      "--cpus-per-task", 1)
    assert run.returncode == 0, run.stderr
    assert "(2 tasks)" in run.stdout and "3 already graded and unchanged" in run.stdout
    round2 = json.loads((remote / "slurm" / "round-2" / "tasks.json").read_text())
    assert sorted(t["student"] for t in round2["tasks"]) == ["dave", "erin"]
    again = slurm_grade(cluster, AID, subs, "--out", remote, "--course", FIXTURE, "--slurm", "--submit")
    assert again.returncode == 0 and "not submitted again" in again.stdout and "nothing to submit" in again.stdout
    cluster.wait_idle()
    run = slurm_grade(cluster, AID, subs, "--out", remote, "--course", FIXTURE, "--collect", "--gradebook", db_remote)
    assert run.returncode == 0 and "collected 2, unchanged 3" in run.stdout, run.stdout
    assert not (remote / "slurm" / "round-3").exists()
    run = lmcourse("grade", AID, subs, "--out", local, "--course", FIXTURE, "--gradebook", db_local, "--no-progress")
    assert run.returncode == 0 and "graded 2, unchanged 3" in run.stdout, run.stdout
    assert comparable(remote) == comparable(local)
    assert rows(remote)["dave"]["score"] == rows(remote)["erin"]["score"] == "6"


def test_a_real_assignment_on_slurm_equals_a_local_grade(cluster, tmp_path):
    aid = "01-ngrams"
    subs = tmp_path / "subs"
    submission_from_solution(ROOT, aid, subs / "_h").rename(subs / "honest.ipynb")
    released_notebook(ROOT, aid, subs / "release" / aid)
    local, remote = tmp_path / "local", tmp_path / "slurm"
    run = lmcourse("grade", aid, subs, "--out", local, "--no-progress")
    assert run.returncode == 0, run.stderr
    run = slurm_grade(cluster, aid, subs, "--out", remote, "--slurm", "--submit", "--cpus-per-task", 1)
    assert run.returncode == 0, run.stderr
    cluster.wait_idle()
    run = slurm_grade(cluster, aid, subs, "--out", remote, "--collect")
    assert run.returncode == 0, run.stdout + run.stderr
    assert comparable(remote) == comparable(local)
    got = rows(remote)
    assert got["honest"]["score"] == got["honest"]["max_score"] and float(got["honest"]["score"]) > 20
    assert got["release"]["score"] == "0" and got["release"]["status"] == "ok"


def test_tasks_slurm_cancels_are_grader_errors_and_are_submitted_again(cluster, tmp_path):
    """Dave's task is cancelled while it grades (as Slurm's time limit or a node failure would end it),
    Erin's while it is queued: neither is a grade, both are named with what Slurm said, both go in the next round."""
    subs = make_submissions(tmp_path / "subs")
    slow = (subs / "alice.ipynb").read_text().replace("def softmax(x):", "import time; time.sleep(120)\\ndef softmax(x):")
    assert slow != (subs / "alice.ipynb").read_text()
    (subs / "dave.ipynb").write_text(slow)
    shutil.copy(subs / "alice.ipynb", subs / "erin.ipynb")
    out = tmp_path / "out"
    db = tmp_path / "gradebook.db"
    run = slurm_grade(cluster, AID, subs, "--out", out, "--course", FIXTURE, "--slurm", "--submit",
                      "--cpus-per-task", 1, "--max-running", 1)
    assert run.returncode == 0, run.stderr
    folder = out / "slurm" / "round-1"
    array = json.loads((folder / "jobs.json").read_text())["array"]
    index = {t["student"]: t["index"] for t in json.loads((folder / "tasks.json").read_text())["tasks"]}
    assert cluster.run("scancel", f"{array}_{index['erin']}").returncode == 0  # queued behind the preflight
    deadline = time.time() + 90
    while not (folder / "logs" / f"task-{array}_{index['dave']}.out").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # dave's task is grading (its student code sleeps)
    assert cluster.run("scancel", f"{array}_{index['dave']}").returncode == 0
    cluster.wait_idle()
    run = slurm_grade(cluster, AID, subs, "--out", out, "--course", FIXTURE, "--collect", "--gradebook", db)
    assert run.returncode == 1, run.stdout
    assert "dave: grader-error" in run.stdout and "state CANCELLED" in run.stdout, run.stdout
    assert "erin: grader-error" in run.stdout and "never started" in run.stdout, run.stdout
    assert "2 submission(s) were NOT graded" in run.stdout
    got = rows(out)
    for student in ("dave", "erin"):
        assert got[student]["status"] == "grader-error" and got[student]["score"] == "", "a dead task is never a 0"
    assert got["alice"]["score"] == "6"
    dave = json.loads((out / "students" / "dave" / "results.json").read_text())
    assert dave["extra_data"]["key"] is None and f"task {array}_{index['dave']}" in dave["message"]
    assert "CANCELLED" in dave["message"] and "its log ends" in dave["message"]
    page = (out / "students" / "dave" / "feedback.html").read_text()
    assert "Not graded yet" in page and "not a problem with your notebook" in page and "Score:" not in page
    assert "CANCELLED" not in page and f"{array}_" not in page and f"task {array}" not in page, \
        "Slurm's internals (its state, the job and task ids) are the instructor's, not the student's"

    from lmcourse.instructor.release import tools_on_path
    tools_on_path()
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{db}") as gb:
        assert gb.find_submission(AID, "alice").score == 6
        for student in ("dave", "erin"):
            with pytest.raises(MissingEntry):
                gb.find_submission(AID, student)

    shutil.copy(subs / "alice.ipynb", subs / "dave.ipynb")  # dave's next version does not sleep
    run = slurm_grade(cluster, AID, subs, "--out", out, "--course", FIXTURE, "--slurm", "--submit",
                      "--cpus-per-task", 1)
    assert run.returncode == 0 and "(2 tasks)" in run.stdout, run.stdout
    assert sorted(t["student"] for t in json.loads((out / "slurm" / "round-2" / "tasks.json").read_text())["tasks"]) \
        == ["dave", "erin"]
    cluster.wait_idle()
    run = slurm_grade(cluster, AID, subs, "--out", out, "--course", FIXTURE, "--collect", "--gradebook", db)
    assert run.returncode == 0 and "collected 2, unchanged 3" in run.stdout, run.stdout
    assert rows(out)["dave"]["score"] == rows(out)["erin"]["score"] == "6"


def test_a_failed_preflight_runs_no_task_and_grades_nothing(cluster, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the GPU tier's preflight would pass here")
    subs = make_submissions(tmp_path / "subs")
    out = tmp_path / "out"
    # The GPU tier on a node without a GPU: what a round sent to the wrong partition does.
    run = slurm_grade(cluster, AID, subs, "--out", out, "--course", FIXTURE, "--slurm", "--submit", "--tier", "gpu",
                      "--cpus-per-task", 1)
    assert run.returncode == 0, run.stderr
    cluster.wait_idle()
    folder = out / "slurm" / "round-1"
    verdict = json.loads((folder / "preflight.json").read_text())
    assert not verdict["passed"] and "no CUDA GPU" in verdict["verdict"]
    assert not list((folder / "logs").glob("task-*")) and not list((folder / "results").iterdir()), \
        "the array ran although its preflight failed"
    run = slurm_grade(cluster, AID, subs, "--out", out, "--course", FIXTURE, "--collect")
    assert run.returncode == 1, run.stdout
    assert run.stdout.count("the preflight of round-1 failed on node lmnode") == 4, run.stdout
    assert all(r["status"] == "grader-error" and r["score"] == "" for r in rows(out).values())
