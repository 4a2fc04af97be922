"""Grade a cohort on a Slurm cluster: one array task per submission, collected as a local batch would write it.

No grading platform has GPUs, and universities run theirs under Slurm. Two
commands, both on the cluster's login node, with the course checkout, its
``.venv`` and the submissions on a filesystem the compute nodes share::

    lmcourse grade 05-transformer subs/ --out grades/ --slurm --partition gpu --gpus-per-task 1 --submit
    lmcourse grade 05-transformer subs/ --out grades/ --collect --gradebook gradebook.db

The first writes a *round* and (with ``--submit``) hands it to ``sbatch``: a
preflight job (the solution must earn full marks and the release 0, on a node
of the same kind, `lmcourse.instructor.preflight`), then an array job, one task
per submission that needs grading, which Slurm starts only if the preflight
passed (``--dependency=afterok``, ``--kill-on-invalid-dep``). Each task runs the
same runner process as ``lmcourse grade`` (`batch.Runner`: the sandboxed
worker, the same limits, killed when stuck) and writes the submission's
`Result` to its round's ``results/<student>.json``. Nothing else is written on a
node: ``--collect`` reads those files and writes ``students/``, ``grades.csv``
and the gradebook through the very functions a local batch uses, so the files
are the same whichever way a cohort was graded (``tests/test_slurm.py`` shows
it against a real single-node Slurm).

Resuming works as for a local batch: a submission whose key (its bytes and the
grader's fingerprint, `batch.submission_key`) matches a graded result, or a
task still queued for it, is not submitted again; a changed notebook, a new
student and every ``grader-error`` are. A task that ended without a result
(Slurm's time limit, a node failure, ``scancel``) is a ``grader-error`` whose
message carries Slurm's state and the last line of the task's log, never a 0.

The tier is decided when the round is written, so that the resume key is the
same on the login node (often without CUDA) and on the nodes: ``--tier auto``
means the GPU tier when tasks ask for GPUs (``--gpus-per-task``), else the CPU
tier. A GPU-tier task on a node without CUDA is a ``grader-error`` saying so,
never a silent fall back to the CPU tier.

Layout under ``--out`` (beside the files a local batch writes)::

    slurm/round-<n>/tasks.json       what the round grades: array index -> student, notebook, key
    slurm/round-<n>/preflight.sbatch the preflight job
    slurm/round-<n>/array.sbatch     the array job: `task` for ``$SLURM_ARRAY_TASK_ID``
    slurm/round-<n>/submit.sh        sbatch both, the array after the preflight; writes jobs.json
    slurm/round-<n>/preflight.json   the preflight's verdict, written on its node
    slurm/round-<n>/logs/            Slurm's output files: preflight-<job>.out, task-<job>_<index>.out
    slurm/round-<n>/results/<student>.json  a task's `Result` (where and when it ran: extra_data.slurm)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lmcourse.course import load_release
from lmcourse.errors import GraderError
from lmcourse.files import atomic_write
from lmcourse.grading import signatures
from lmcourse.instructor import late as late_work
from lmcourse.instructor import mistakes
from lmcourse.instructor.batch import (Runner, RunnerFailure, _record, find_submissions, runner_timeout, stored_result,
                                    submission_key, write_grades_csv, write_late_feedback, write_student_files)
from lmcourse.grading.result import Result, Status
from lmcourse.grading.runner import grader_fingerprint

SLURM = "slurm"  # the folder of --out that holds the rounds and the tasks' results
ROUND = re.compile(r"^round-(\d+)$")
# What may follow an #SBATCH option: no spaces, quotes or shell syntax (the lines are not quoted).
OPTION_VALUE = re.compile(r"^[A-Za-z0-9_.,:=@%+/-]+$")
MAX_TASKS = 1000  # per round: Slurm's default MaxArraySize (1001) allows array indices 0..1000
STARTUP_SECONDS = 300  # a task's Python, torch and runner start, on a busy node, on top of the grading budget
ACTIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED",
                 "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}


@dataclass
class Options:
    """What the jobs ask Slurm for. None leaves a setting to the cluster's defaults."""

    partition: str | None = None
    gpus_per_task: int = 0
    time: str | None = None  # Slurm's format ("90", "1:30:00", "1-00:00:00"); default: the grading budget
    cpus_per_task: int = 2
    mem: str | None = None  # "16G"
    max_running: int | None = None  # array throttle: at most this many tasks at once ("%N")
    sbatch_args: list[str] = field(default_factory=list)  # more #SBATCH lines, verbatim ("--account=cs336")

    def check(self) -> None:
        for name, value in (("--partition", self.partition), ("--time", self.time), ("--mem", self.mem)):
            if value is not None and not OPTION_VALUE.match(value):
                raise GraderError(f"{name} {value!r}: expected a Slurm value without spaces or quotes")
        for value in self.sbatch_args:
            if not value.startswith("-") or "\n" in value or not OPTION_VALUE.match(value.lstrip("-")):
                raise GraderError(f"--sbatch-arg {value!r}: expected one sbatch option such as --account=cs336 "
                                  "(no spaces or quotes)")
        if self.gpus_per_task < 0 or self.cpus_per_task < 1 or (self.max_running is not None and self.max_running < 1):
            raise GraderError("--gpus-per-task must be 0 or more, --cpus-per-task and --max-running 1 or more")


def slurm_tier(tier: str | None, options: Options) -> str:
    """The round's tier, decided on the login node: 'auto' is the GPU tier exactly when tasks ask for GPUs."""
    tier = os.environ.get("LMCOURSE_TIER", "").strip() or tier or "auto"
    if tier == "auto":
        return "gpu" if options.gpus_per_task > 0 else "cpu"
    if tier not in ("cpu", "gpu"):
        raise GraderError(f"tier must be 'cpu', 'gpu' or 'auto', got {tier!r}")
    return tier


def slurm_time(seconds: float) -> str:
    """Seconds as Slurm's D-HH:MM:SS, rounded up to a whole minute."""
    minutes = -(-int(seconds) // 60)
    days, minutes = divmod(minutes, 24 * 60)
    return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00"


# ---------------------------------------------------------------------------------------------------------------
# Rounds on disk


def slurm_dir(out: Path) -> Path:
    return Path(out) / SLURM


def rounds(out: Path) -> list[Path]:
    """The round folders under ``out``, oldest first."""
    folder = slurm_dir(out)
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := ROUND.match(p.name)) and p.is_dir()] \
        if folder.is_dir() else []
    return [p for _, p in sorted(found)]


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def manifest(round_dir: Path) -> dict:
    data = read_json(Path(round_dir) / "tasks.json")
    if data is None or not isinstance(data.get("tasks"), list):
        raise GraderError(f"{round_dir}/tasks.json is missing or unreadable: write the round again with --slurm")
    return data


def task_result(round_dir: Path, student: str) -> Result | None:
    """What the round's task for ``student`` wrote; None when it wrote nothing (yet)."""
    return Result.read(Path(round_dir) / "results" / f"{student}.json")


def _sbatch_header(options: Options, job_name: str, log: str, seconds: float) -> list[str]:
    lines = [f"#SBATCH --job-name={job_name}", f"#SBATCH --output={log}", "#SBATCH --ntasks=1",
             f"#SBATCH --cpus-per-task={options.cpus_per_task}", f"#SBATCH --time={options.time or slurm_time(seconds)}"]
    if options.partition:
        lines.append(f"#SBATCH --partition={options.partition}")
    if options.gpus_per_task:
        lines.append(f"#SBATCH --gpus-per-task={options.gpus_per_task}")
    if options.mem:
        lines.append(f"#SBATCH --mem={options.mem}")
    lines += [f"#SBATCH {arg}" for arg in options.sbatch_args]
    return lines


def _environment(tier: str) -> list[str]:
    """The lines that give a task this machine's interpreter, data mirror and tier, whatever the node's shell set."""
    lines = [f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:\"$PATH\"",
             f"export LMCOURSE_TIER={tier}", "export PYTHONDONTWRITEBYTECODE=1"]
    for name in ("LMCOURSE_DATA_MIRROR", "LMCOURSE_CACHE"):
        if os.environ.get(name):
            lines.append(f"export {name}={shlex.quote(os.environ[name])}")
    return lines


def write_round(root: Path, assignment_id: str, out: Path, todo: list[tuple], tier: str, options: Options,
                submissions: Path | None = None) -> Path:
    """A new round folder holding tasks.json and the three scripts; returns it."""
    existing = rounds(out)
    number = int(ROUND.match(existing[-1].name).group(1)) + 1 if existing else 1
    slurm_dir(out).mkdir(parents=True, exist_ok=True)
    while True:  # a second --slurm writing at the same moment takes the next number
        folder = slurm_dir(out) / f"round-{number}"
        try:
            folder.mkdir()
            break
        except FileExistsError:
            number += 1
    (folder / "logs").mkdir()
    (folder / "results").mkdir()
    atomic_write(folder / "tasks.json", json.dumps({
        "assignment": assignment_id, "root": str(root), "out": str(out), "tier": tier, "round": number,
        "submissions": os.path.abspath(submissions) if submissions is not None else None,
        "written": time.strftime("%Y-%m-%d %H:%M:%S"), "python": sys.executable,
        "tasks": [{"index": i, "student": sub.student, "notebook": os.path.abspath(sub.path), "key": key}
                  for i, (sub, key) in enumerate(todo)]}, indent=1))
    budget = runner_timeout(root, assignment_id)
    python = shlex.quote(sys.executable)
    here = shlex.quote(str(folder))
    n = len(todo)
    array = f"0-{n - 1}" + (f"%{options.max_running}" if options.max_running else "")
    atomic_write(folder / "preflight.sbatch", "\n".join([
        "#!/bin/bash",
        f"# lmcourse: the preflight of round {number} of {assignment_id} ({tier} tier): the solution must earn",
        "# full marks and the release 0 on a node like the tasks' own, or the array job never starts.",
        *_sbatch_header(options, f"lmcourse-{assignment_id}-preflight", "logs/preflight-%j.out",
                        2 * budget + STARTUP_SECONDS),
        *_environment(tier),
        f"exec {python} -m lmcourse.instructor.slurm preflight {here}", ""]))
    atomic_write(folder / "array.sbatch", "\n".join([
        "#!/bin/bash",
        f"# lmcourse: round {number} of {assignment_id} ({tier} tier), one task per submission ({n}); tasks.json",
        "# says which. Submit it with submit.sh, after the preflight job.",
        *_sbatch_header(options, f"lmcourse-{assignment_id}", "logs/task-%A_%a.out", budget + STARTUP_SECONDS),
        f"#SBATCH --array={array}",
        *_environment(tier),
        f"exec {python} -m lmcourse.instructor.slurm task {here} \"$SLURM_ARRAY_TASK_ID\"", ""]))
    atomic_write(folder / "submit.sh", "\n".join([
        "#!/bin/bash",
        f"# Submit round {number} of {assignment_id}: the preflight job, then the array job, which Slurm starts",
        "# only when the preflight has passed (and cancels if it failed). Records both job ids in jobs.json.",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        f'if [ -e jobs.json ]; then echo "round {number} was already submitted (jobs.json)" >&2; exit 1; fi',
        "preflight=$(sbatch --parsable preflight.sbatch)",
        "preflight=${preflight%%;*}",
        'array=$(sbatch --parsable --dependency=afterok:"$preflight" --kill-on-invalid-dep=yes array.sbatch) '
        '|| { scancel "$preflight"; exit 1; }',
        "array=${array%%;*}",
        'printf \'{"preflight": "%s", "array": "%s"}\\n\' "$preflight" "$array" > jobs.json.tmp',
        "mv jobs.json.tmp jobs.json",
        f'echo "round {number}: preflight job $preflight, then array job $array ({n} task{"s" if n != 1 else ""})"',
        ""]))
    (folder / "submit.sh").chmod(0o755)
    return folder


# ---------------------------------------------------------------------------------------------------------------
# What Slurm says about a round's jobs


def _slurm_tool(name: str) -> str | None:
    return shutil.which(name)


def active_tasks(job_ids: list[str]) -> set[str] | None:
    """Array task ids (``"12_3"``) and job ids that Slurm still has queued or running; None when squeue cannot tell."""
    if not job_ids:
        return set()
    squeue = _slurm_tool("squeue")
    if squeue is None:
        return None
    active: set[str] = set()
    for job in job_ids:  # one at a time: squeue fails the whole query when one job id is unknown (long finished)
        try:
            cp = subprocess.run([squeue, "-h", "-r", "-j", job, "-o", "%i|%T"], capture_output=True, text=True,
                                timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if cp.returncode != 0:
            if "Invalid job id" in cp.stderr:
                continue  # finished so long ago that the controller forgot it
            return None
        for line in cp.stdout.splitlines():
            task, _, state = line.strip().partition("|")
            if state in ACTIVE_STATES:
                active.add(task)
    return active


def job_state(task_id: str) -> str | None:
    """Slurm's state of a finished task (TIMEOUT, CANCELLED, OUT_OF_MEMORY, ...) while the controller remembers it."""
    scontrol = _slurm_tool("scontrol")
    if scontrol is None:
        return None
    try:
        cp = subprocess.run([scontrol, "-o", "show", "job", task_id], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\bJobState=(\S+)", cp.stdout)
    reason = re.search(r"\bReason=(\S+)", cp.stdout)
    if not m:
        return None
    return m.group(1) + (f" ({reason.group(1)})" if reason and reason.group(1) not in ("None", "(null)") else "")


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 2000))
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


# ---------------------------------------------------------------------------------------------------------------
# The login node: write (and submit) a round


class Cohort:
    """Where each submission stands across the rounds under ``out``: graded, queued, failed, or not submitted.

    One submission is ``(student, key)``; the key is `batch.submission_key` of
    the file as it is now, so a changed notebook is a new submission. Both
    `prepare` (what to submit) and `collect` (what to write) read this.
    """

    GRADED, QUEUED, FAILED, UNSUBMITTED = "graded", "queued", "failed", "unsubmitted"

    def __init__(self, out: Path):
        self.out = Path(out)
        self.rounds, self.broken = [], []
        self.latest: dict[tuple[str, str], tuple[Path, dict]] = {}  # the newest round that holds a submission
        for folder in rounds(self.out):
            try:
                tasks = manifest(folder)["tasks"]
            except GraderError:  # a round whose writing was interrupted: nothing of it was submitted
                self.broken.append(folder)
                continue
            self.rounds.append(folder)
            for task in tasks:
                self.latest[task["student"], task["key"]] = (folder, task)
        self.jobs = {folder: _jobs(folder) for folder in self.rounds}
        self.active = active_tasks([j for info in self.jobs.values() if info
                                    for j in (info.get("array"), info.get("preflight")) if j])

    def state(self, assignment_id: str, student: str, key: str) -> tuple[str, Result | None, str]:
        """(state, the task's result or the grader-error that says why there is none, where)."""
        if (student, key) not in self.latest:
            return self.UNSUBMITTED, None, "new or changed since the last round"
        folder, task = self.latest[student, key]
        done = task_result(folder, student)
        if done is not None and ((done.extra_data or {}).get("slurm") or {}).get("submitted_key") == key:
            return (self.GRADED if done.graded else self.FAILED), done, folder.name
        jobs = self.jobs.get(folder) or {}
        if not jobs.get("array"):
            return self.UNSUBMITTED, None, f"{folder.name} was written but not submitted (its submit.sh)"
        task_id = f"{jobs['array']}_{task['index']}"
        if self.active is None:
            return self.QUEUED, None, f"task {task_id} (squeue is not available here to say whether it ended)"
        if {task_id, jobs["array"], jobs.get("preflight")} & self.active:
            return self.QUEUED, None, f"task {task_id}"
        preflight = read_json(folder / "preflight.json")
        if preflight is not None and not preflight.get("passed"):
            why = (f"the preflight of {folder.name} failed on node {preflight.get('node')}, so Slurm did not run the "
                   f"array: {preflight.get('verdict')}")
        elif preflight is None:
            line = _last_line(folder / "logs" / f"preflight-{jobs.get('preflight')}.out")
            why = (f"the preflight job {jobs.get('preflight')} of {folder.name} ended without a verdict (state "
                   f"{job_state(str(jobs.get('preflight'))) or 'unknown'})" + (f"; its log ends: {line}" if line else
                   "; it left no log: is the output folder on a filesystem the compute nodes share, at the same "
                   "path?"))
        else:
            log = folder / "logs" / f"task-{task_id}.out"
            line, state = _last_line(log), job_state(task_id)
            if state is None and not log.exists():
                why = (f"Slurm task {task_id} of {folder.name} never started (cancelled while it was queued, or the "
                       f"array job was)")
            else:
                why = (f"Slurm task {task_id} of {folder.name} ended without a result (state {state or 'unknown'})"
                       + (f"; its log ends: {line}" if line else "; it left no log"))
        return self.FAILED, Result.failed(assignment_id, Status.GRADER_ERROR, why), folder.name


def prepare(root: Path, assignment_id: str, submissions: Path, out: Path, *, tier: str | None = "auto",
            options: Options | None = None, force: bool = False, submit: bool = False, log=print) -> dict:
    """Write a round for the submissions that need grading (and submit it); return a summary dict.

    Not submitted again: a submission graded and unchanged (collected or
    not), and one whose task is still queued or running. Everything else is:
    new and changed notebooks, and every ``grader-error``.
    """
    options = options or Options()
    options.check()
    root, out = Path(root).resolve(), Path(out).resolve()
    load_release(root, assignment_id)  # fail early, with the fix, when the release is missing
    tier = slurm_tier(tier, options)
    if submit and _slurm_tool("sbatch") is None:
        raise GraderError("--submit needs Slurm's sbatch, which is not on PATH here: run this on the cluster's login "
                          "node, or leave out --submit and run the round's submit.sh there")
    subs, skipped = find_submissions(submissions, assignment_id)
    for s in skipped:
        log(f"skipped {s}")
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = grader_fingerprint(root, assignment_id, tier)
    cohort = None if force else Cohort(out)  # --force submits everything: no need to ask Slurm what runs
    for folder in cohort.broken if cohort else []:
        log(f"ignored {folder}: its tasks.json is missing or unreadable (an interrupted --slurm; delete the folder)")
    todo, graded, queued = [], [], []
    for sub in subs:
        key = submission_key(sub.path, fingerprint)
        if not force:
            prev = stored_result(out, sub.student)
            if prev is not None and prev.graded and (prev.extra_data or {}).get("key") == key:
                graded.append(sub.student)
                continue
            state, _, where = cohort.state(assignment_id, sub.student, key)
            if state == Cohort.GRADED:
                graded.append(sub.student)
                continue
            if state == Cohort.QUEUED:
                queued.append(f"{sub.student} ({where})")
                continue
        todo.append((sub, key))
    summary = {"todo": len(todo), "graded": len(graded), "queued": len(queued), "round": None, "submitted": False}
    if queued:
        log(f"still queued or running, not submitted again: {', '.join(queued)}")
    if not todo:
        log(f"{assignment_id}: nothing to submit ({len(graded)} graded and unchanged, {len(queued)} queued); "
            f"gather the grades with --collect")
        return summary
    later = todo[MAX_TASKS:]
    todo = todo[:MAX_TASKS]
    folder = write_round(root, assignment_id, out, todo, tier, options, submissions)
    summary.update(round=str(folder), todo=len(todo), later=len(later))
    if later:
        log(f"{len(later)} more submission(s) than one array job may hold ({MAX_TASKS}): run this command again once "
            f"this round is submitted, and the next round takes them")
    log(f"{assignment_id}: {folder.name} written: {len(todo)} task(s), {tier} tier ({len(graded)} already graded and "
        f"unchanged); {folder}")
    if submit:
        cp = subprocess.run(["bash", str(folder / "submit.sh")], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise GraderError(f"sbatch refused {folder.name}: {(cp.stderr or cp.stdout).strip()[-500:]} (if a setting "
                              f"is wrong for this cluster, edit {folder}/*.sbatch and run {folder}/submit.sh)")
        log(cp.stdout.strip())
        summary["submitted"] = True
        log(f"when the jobs have ended (squeue --me), gather the grades with: lmcourse grade {assignment_id} "
            f"{shlex.quote(str(submissions))} --out {shlex.quote(str(out))} --collect")
    else:
        log(f"submit it with: bash {shlex.quote(str(folder / 'submit.sh'))} (or run this command again with "
            f"--submit); then gather the grades with --collect")
    return summary


def _jobs(round_dir: Path) -> dict | None:
    return read_json(round_dir / "jobs.json")


# ---------------------------------------------------------------------------------------------------------------
# A node: the preflight job and the array's tasks


def _node() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _cuda_problem(tier: str) -> str | None:
    if tier != "gpu":
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (f"node {_node()} has no CUDA GPU, and this round grades the GPU tier: ask for GPUs (--gpus-per-task 1, "
            f"a GPU --partition) or grade the CPU tier (--tier cpu)")


def _unseen(data: dict) -> str | None:
    """The folder of submissions when this node cannot see it (not on a filesystem the nodes share)."""
    folder = data.get("submissions")
    if folder and not Path(folder).is_dir():
        return (f"node {_node()} cannot see the submissions folder {folder}: put it on a filesystem the compute "
                f"nodes share, at the same path")
    return None


def run_preflight(round_dir: Path) -> int:
    """The preflight job: grade the solution and the release here; write preflight.json; exit 0 only if it held."""
    from lmcourse.instructor.preflight import preflight_in_subprocess

    round_dir = Path(round_dir)
    data = manifest(round_dir)
    started = time.perf_counter()
    try:
        problem = _unseen(data) or _cuda_problem(data["tier"])
        if problem:
            raise GraderError(f"preflight of {data['assignment']} failed: {problem}")
        verdict, passed = preflight_in_subprocess(Path(data["root"]), data["assignment"], data["tier"]), True
    except (GraderError, FileNotFoundError) as err:
        verdict, passed = " ".join(str(err).split()), False
    atomic_write(round_dir / "preflight.json", json.dumps({
        "passed": passed, "verdict": verdict, "node": _node(), "job": os.environ.get("SLURM_JOB_ID"),
        "seconds": round(time.perf_counter() - started, 1)}, indent=1))
    print(verdict, file=sys.stdout if passed else sys.stderr)
    return 0 if passed else 4


def run_task(round_dir: Path, index: int) -> int:
    """One array task: grade the submission at ``index`` with a runner process; write its result file.

    The result goes to the round's ``results/<student>.json``, atomically; a task
    that cannot grade (no preflight, no GPU, the runner failed) writes a
    ``grader-error`` result that says why, so that ``--collect`` can tell the
    instructor. Exit 0 when the submission was graded, 3 when it was not.
    """
    round_dir = Path(round_dir)
    data = manifest(round_dir)
    entry = data["tasks"][index]
    root, assignment_id, tier, student = Path(data["root"]), data["assignment"], data["tier"], entry["student"]
    notebook = Path(entry["notebook"])
    started = time.perf_counter()
    key = submission_key(notebook, grader_fingerprint(root, assignment_id, tier))  # what is graded: the file now
    preflight = read_json(round_dir / "preflight.json") or {}
    problem = None
    if not preflight.get("passed"):
        problem = (f"the preflight of {round_dir.name} did not pass{': ' + preflight['verdict'] if preflight else ''}"
                   if preflight else f"the preflight of {round_dir.name} has not run: submit the round with its "
                                     f"submit.sh, which starts the array only after the preflight passed")
    else:
        problem = _unseen(data) or _cuda_problem(tier)
    if problem:
        result = Result.failed(assignment_id, Status.GRADER_ERROR, problem)
    else:
        runner, healthy = None, False
        try:
            runner = Runner(root, assignment_id, tier)
            result = runner.grade(notebook, runner_timeout(root, assignment_id))
            healthy = True
        except RunnerFailure as err:
            result = Result.failed(assignment_id, Status.GRADER_ERROR, str(err))
        except Exception as err:  # a bug of ours or the node's (cannot start a process, disk full): never a grade
            result = Result.failed(assignment_id, Status.GRADER_ERROR, f"{type(err).__name__}: {err}")
        finally:
            if runner is not None:
                runner.close(kill=not healthy)
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    result.extra_data = {"student_id": student, "key": key if result.graded else None, "slurm": {
        "round": data["round"], "task": f"{job}_{index}" if job else None, "node": _node(), "submitted_key": key,
        "seconds": round(time.perf_counter() - started, 2), "finished": time.strftime("%Y-%m-%d %H:%M:%S")}}
    result.write(round_dir / "results" / f"{student}.json")
    print(f"{student}: {result.status} {result.score:g}/{result.max_score:g} on {_node()}"
          + (f": {result.message}" if not result.graded else ""))
    return 0 if result.graded else 3


# ---------------------------------------------------------------------------------------------------------------
# The login node again: collect


def collect(root: Path, assignment_id: str, submissions: Path, out: Path, *, gradebook: Path | None = None,
            log=print, hints: str | None = None, term: Path | None = None) -> dict:
    """Merge the tasks' results into students/, grades.csv and the gradebook, as a local batch writes them.

    Rows: every submission graded (now or before) and every ``grader-error``
    (a task that failed or ended without a result: no score, the reason in
    its message; the next ``--slurm`` round submits it again). Left out, and
    named: submissions still queued, and new or changed ones no round holds.
    """
    from lmcourse.instructor.gradebook import Gradebook

    root, out = Path(root).resolve(), Path(out).resolve()
    load_release(root, assignment_id)
    cohort = Cohort(out)
    for folder in cohort.broken:
        log(f"ignored {folder}: its tasks.json is missing or unreadable (an interrupted --slurm; delete the folder)")
    if not cohort.rounds:
        raise GraderError(f"{out} holds no Slurm round ({SLURM}/round-*): write and submit one first with "
                          f"`lmcourse grade {assignment_id} SUBMISSIONS --out {out} --slurm --submit`")
    tier = manifest(cohort.rounds[-1])["tier"]
    fingerprint = grader_fingerprint(root, assignment_id, tier)
    subs, skipped = find_submissions(submissions, assignment_id)
    for s in skipped:
        log(f"skipped {s}")
    rows: list[tuple[str, Result]] = []
    new: list[tuple[str, Result]] = []
    left: dict[str, list[str]] = {Cohort.QUEUED: [], Cohort.UNSUBMITTED: []}
    for sub in subs:
        key = submission_key(sub.path, fingerprint)
        prev = stored_result(out, sub.student)
        if prev is not None and prev.graded and (prev.extra_data or {}).get("key") == key:
            rows.append((sub.student, prev))  # collected (or graded by a local batch) before
            continue
        state, result, where = cohort.state(assignment_id, sub.student, key)
        if result is None:
            left[state].append(f"{sub.student} ({where})")
            continue
        if not result.graded:  # as a local batch keeps a grader-error: graded again on the next run
            result.extra_data = {**(result.extra_data or {}), "student_id": sub.student, "key": None}
        rows.append((sub.student, result))
        new.append((sub.student, result))

    # the likely-cause hints: plain data over the results, so added here (from the CPU tier's signatures: the
    # checks' names and kinds are the tiers'; a login node need not have a GPU)
    known = mistakes.for_feedback(root, assignment_id, tier="cpu", mode=hints, log=log) if new else []
    for student, result in new:
        signatures.attach(result, known)
        write_student_files(out, student, result)
    late = late_work.finish(root, assignment_id, {s.student: Path(s.path) for s in subs}, rows, term, log)
    write_late_feedback(out, rows, late)
    book = Gradebook(gradebook, root, assignment_id) if gradebook else None
    if book:
        for student, result in rows:
            _record(book, student, result, log, late.get(student))
    csv_path = write_grades_csv(out, rows, late)

    bad = [(s, r) for s, r in rows if r.status != Status.OK]
    errors = sum(not r.graded for _, r in rows)
    summary = {"collected": len(new), "unchanged": len(rows) - len(new), "total": len(rows),
               "queued": len(left[Cohort.QUEUED]), "unsubmitted": len(left[Cohort.UNSUBMITTED]),
               "grader_errors": errors, "problems": len(bad), "grades_csv": str(csv_path)}
    log(f"{assignment_id}: collected {len(new)}, unchanged {len(rows) - len(new)}; {csv_path}")
    ran = [(r.extra_data or {}).get("slurm") or {} for _, r in new if r.graded]
    seconds = sorted(info.get("seconds", 0.0) for info in ran)
    if seconds:
        nodes = sorted({str(info.get("node")) for info in ran})
        log(f"  tasks took {seconds[len(seconds) // 2]:.1f} s (median; {seconds[0]:.1f} to {seconds[-1]:.1f} s), "
            f"on {', '.join(nodes)}")
    for isolation in sorted({r.isolation for _, r in new if r.graded and r.isolation.startswith("partial")}):
        log(f"  warning: student code ran with {isolation}")
    for s, r in sorted(bad, key=lambda row: row[0]):
        log(f"  {s}: {r.status}: {r.message}")
    if left[Cohort.QUEUED]:
        log(f"{len(left[Cohort.QUEUED])} still queued or running, not in grades.csv yet: "
            f"{', '.join(left[Cohort.QUEUED])}; run --collect again when their jobs have ended")
    if left[Cohort.UNSUBMITTED]:
        log(f"{len(left[Cohort.UNSUBMITTED])} not submitted, not in grades.csv: {', '.join(left[Cohort.UNSUBMITTED])}; "
            f"run --slurm --submit to grade them")
    if errors:
        log(f"{errors} submission(s) were NOT graded because the grader failed (status grader-error above: no score "
            "was recorded for them). Fix the cause and run --slurm --submit again: it submits only those.")
    return summary


# ---------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lmcourse.instructor.slurm",
                                description="What a Slurm job of `lmcourse grade --slurm` runs on its node.")
    sub = p.add_subparsers(dest="what", required=True)
    sub.add_parser("preflight", help="grade the solution and the release on this node").add_argument("round", type=Path)
    t = sub.add_parser("task", help="grade one submission of the round")
    t.add_argument("round", type=Path)
    t.add_argument("index", type=int)
    args = p.parse_args(argv)
    sys.dont_write_bytecode = True
    if args.what == "preflight":
        return run_preflight(args.round)
    return run_task(args.round, args.index)


if __name__ == "__main__":
    # Run with -m, this file is __main__: hand over to the package's module (one copy of GraderError).
    from lmcourse.instructor.slurm import main as _main

    sys.exit(_main())
