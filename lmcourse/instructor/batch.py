"""Grade a folder of submissions: one runner process each, resumable, in parallel.

Layout of ``--out``::

    grades.csv                     one row per student (written at the end, atomically); a
                                   submission the grader failed on has no score, only its status
    students/<student>/results.json  the `Result` (Gradescope schema plus lmcourse's keys); written
                                   last, atomically: its presence with a matching key means
                                   "graded, nothing to redo"
    students/<student>/feedback.html names, points, messages

Student ids are file or folder names the students chose, so they live in a
folder of their own (``students/``) and can never collide with the grader's
own files (a student called ``grades.csv`` is just another student).

Each submission is graded by a ``python -m lmcourse.grading.runner --serve``
process, never in the batch's own: a submission that somehow takes the grader
down takes only its own grade with it (the runner is replaced), a runner that
hangs is killed after `runner_timeout`, ``--jobs N`` grades N at once (a
`concurrent.futures` thread pool, each thread driving one runner at a time),
and a killed batch loses only the submissions in flight. A runner answers with
the `Result` on its pipe and writes nothing; this process is the only writer
of the files above (through `lmcourse.files.atomic_write`) and of the
gradebook (`lmcourse.instructor.gradebook`, recorded as each grade comes in). A
``grader-error`` is never a grade: it gets no score in grades.csv, is not
recorded in the gradebook, and is graded again on the next run.

A re-run skips a submission whose *key* (hash of the notebook bytes and of
everything that decides a grade: checks, solution, release, grader version,
tier; `runner.grader_fingerprint`) matches the one stored in its results.json.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import queue
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from lmcourse.course import load_release
from lmcourse.files import TMP_SUFFIX, atomic_write
from lmcourse.grading import signatures
from lmcourse.grading.report import feedback_html
from lmcourse.instructor import late as late_work
from lmcourse.instructor import mistakes
from lmcourse.instructor.gradebook import Gradebook
from lmcourse.grading.result import Result, Status
from lmcourse.grading.runner import _limits, grader_fingerprint

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
STUDENTS = "students"  # the folder of --out that holds one folder per student


def runner_timeout(root: Path, assignment_id: str) -> float:
    """How long a runner may take for one submission before it counts as stuck.

    It must exceed everything a submission may legitimately use, or a
    student who uses up the worker's whole budget would turn a grade into a
    grader error: the worker's total budget (restarts included), one more
    import, and time for the trusted side (reference values, scoring).
    """
    limits = _limits(root, assignment_id, None)
    return limits.total_timeout + limits.effective_import_timeout() + max(300.0, 0.5 * limits.total_timeout)


@dataclass
class Submission:
    student: str
    path: Path


FORMATS = (".ipynb", ".py", ".md")  # a notebook, or its jupytext export (percent-format .py, .md)


def find_submissions(folder: Path, assignment_id: str) -> tuple[list[Submission], list[str]]:
    """``<student>.ipynb`` or nbgrader's ``<student>/<id>/<id>.ipynb`` (or a jupytext ``.py`` / ``.md``
    export in their place; a notebook wins over an export); also returns what was skipped and why."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of submissions")
    found: dict[str, Submission] = {}
    skipped: list[str] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        # Symbolic links are never followed (a link to the solution or to another student's work
        # is not a submission): a linked notebook is handed to the runner, which refuses it with
        # the status `symlink`; a linked folder is the same as a linked notebook inside it.
        candidates = [entry / assignment_id / f"{assignment_id}{ext}" for ext in FORMATS]
        nested = next((c for c in candidates if c.is_symlink() or c.exists()), candidates[0])
        if entry.suffix in FORMATS and (entry.is_symlink() or not entry.is_dir()):  # a FIFO too: refused later
            if entry.suffix != ".ipynb" and (entry.stem.upper().startswith(("README", "LICENSE"))
                                             or entry.with_suffix(".ipynb").exists()):
                skipped.append(f"{entry.name} (not a submission, or the student's .ipynb is graded instead)")
                continue
            student, path = entry.stem, entry
        elif entry.is_dir() and (nested.is_symlink() or nested.is_file()):
            linked = entry if entry.is_symlink() else entry / assignment_id if nested.parent.is_symlink() else None
            student, path = entry.name, (linked if linked is not None else nested)
        else:
            if entry.is_dir():
                skipped.append(f"{entry.name}/ (no {assignment_id}/{assignment_id}.ipynb, .py or .md inside)")
            continue
        if not STUDENT_ID.match(student):
            skipped.append(f"{entry.name} (not a usable student id: letters, digits and ._@+- only)")
        elif student in found:
            skipped.append(f"{entry.name} (student {student} already has a submission here)")
        else:
            found[student] = Submission(student, path)
    return list(found.values()), skipped


def submission_key(path: Path, fingerprint: str) -> str:
    """Hash of the submission as it is (a link's target path, never the file it points to) and the grader."""
    path = Path(path)
    try:
        if path.is_symlink():
            data = b"symlink:" + os.readlink(path).encode()
        elif path.is_file():
            data = path.read_bytes()
        else:  # a FIFO or device would block or never end: the runner refuses it, this only names it
            data = f"not-a-file:{path.stat().st_mode}".encode()
    except OSError as err:  # unreadable: graded (and reported) as such, and tried again next run
        data = f"unreadable:{err}:{time.time()}".encode()
    return hashlib.sha256(data + fingerprint.encode()).hexdigest()


def student_dir(out: Path, student: str) -> Path:
    return Path(out) / STUDENTS / student


def stored_result(out: Path, student: str) -> Result | None:
    """The result a previous run wrote for ``student``; None when there is none (or it is unreadable)."""
    return Result.read(student_dir(out, student) / "results.json")


RECYCLE_AFTER = 25  # submissions per runner process before a fresh one (bounds any slow leak)


def _runner_env() -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


class RunnerFailure(Exception):
    """The runner process failed (stopped, hung, answered nonsense): the grader's failure, not a grade."""


class Runner:
    """One trusted ``runner --serve`` process grading submissions one after another.

    Python, pytest and the reference solution load once per runner rather
    than once per submission; every submission still gets its own sandboxed
    worker (student code never runs in a runner). A runner that dies or hangs
    costs only the submission it was grading: it is killed and replaced.
    It stays in the batch's process group, so killing the batch stops it too.
    """

    def __init__(self, root: Path, assignment_id: str, tier: str):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lmcourse.grading.runner", str(root), assignment_id, "--serve", "--tier", tier],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, encoding="utf-8",
            env=_runner_env())
        self.graded = 0

    def grade(self, notebook: Path, timeout: float) -> Result:
        """The runner's result for ``notebook``; `RunnerFailure` when the process did not give one."""
        try:
            self.proc.stdin.write(json.dumps({"notebook": str(notebook)}) + "\n")
            self.proc.stdin.flush()
        except OSError:
            raise RunnerFailure(f"the grader process stopped (status {self.proc.poll()}){self._tail()}") from None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise RunnerFailure(f"the grader process did not finish within {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RunnerFailure(f"the grader process stopped (status {self.proc.wait()}){self._tail()}")
        self.graded += 1
        try:
            return Result.loads(line)
        except ValueError as err:
            raise RunnerFailure(f"the grader process answered with something that is not a result ({err})") from None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _tail(self) -> str:
        self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, self.log.tell() - 400))
        tail = self.log.read().decode(errors="replace").strip()
        return f": {tail.splitlines()[-1]}" if tail else ""

    def close(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class _Runners:
    """The batch's runner processes: a job borrows one (started when first needed), grades, gives it back.

    There are ``n`` places, one per thread of the pool, so a job never waits
    for one. After any failure the runner is killed and the next job starts a
    fresh one; after `RECYCLE_AFTER` submissions one is replaced too.
    """

    def __init__(self, root: Path, assignment_id: str, tier: str, n: int):
        self.root, self.assignment_id, self.tier = root, assignment_id, tier
        self.idle: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(n):
            self.idle.put(None)  # a free place; its runner starts when first borrowed
        self.busy: set[Runner] = set()
        self.closed = False
        self.lock = threading.Lock()

    def borrow(self) -> Runner:
        runner = self.idle.get()
        try:
            if self.closed:
                raise RunnerFailure("the batch stopped")
            if runner is not None and runner.graded >= RECYCLE_AFTER:
                runner.close()
                runner = None
            if runner is None:
                runner = Runner(self.root, self.assignment_id, self.tier)
        except BaseException:
            if runner is not None:
                runner.close(kill=True)
            self.idle.put(None)
            raise
        with self.lock:
            self.busy.add(runner)
        return runner

    def give_back(self, runner: Runner, healthy: bool) -> None:
        with self.lock:
            self.busy.discard(runner)
            keep = healthy and not self.closed
            self.idle.put(runner if keep else None)
        if not keep:
            runner.close(kill=True)

    def close(self) -> None:
        """Stop every runner: the idle ones cleanly, those still grading (an interrupted batch) by force."""
        idle = []
        with self.lock:
            self.closed = True
            busy = list(self.busy)
            while True:
                try:
                    idle.append(self.idle.get_nowait())
                except queue.Empty:
                    break
            for _ in idle:
                self.idle.put(None)  # the places stay: a job that starts now is told the batch stopped
        for runner in busy:
            runner.proc.kill()  # its job sees the runner stop and gives it back
        for runner in idle:
            if runner is not None:
                runner.close()


def grade_all(root: Path, assignment_id: str, todo: list, out: Path, tier: str, jobs: int, hints=()):
    """Grade ``todo`` (``(submission, key)`` pairs), ``jobs`` at a time; yield (submission, result) as each ends.

    Each result is already written to ``out`` when it is yielded, with the likely-cause `hints` its failures
    match (`lmcourse.grading.signatures.attach`). Closing the
    generator early (an interrupted batch) cancels what has not started and
    kills the runners still grading; nothing of theirs is written.
    """
    if not todo:
        return
    timeout = runner_timeout(root, assignment_id)
    n = max(1, min(jobs, len(todo)))
    runners = _Runners(root, assignment_id, tier, n)
    stopping = threading.Event()
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="lmcourse-grade")
    try:
        futures = {pool.submit(_grade_one, runners, assignment_id, sub, key, out, timeout, stopping, hints): sub
                   for sub, key in todo}
        for future in as_completed(futures):
            sub = futures[future]
            try:
                result = future.result()
            except Exception as err:  # a bug of ours, or the disk: never leave the batch without an answer
                result = Result.failed(assignment_id, Status.GRADER_ERROR, f"{type(err).__name__}: {err}")
            yield sub, result
    finally:
        stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        runners.close()
        pool.shutdown(wait=True)


def _grade_one(runners: _Runners, assignment_id: str, sub: Submission, key: str, out: Path, timeout: float,
               stopping: threading.Event, hints=()) -> Result:
    """One job of the pool: the runner grades ``sub``, this process adds the hints and writes its files."""
    runner = runners.borrow()
    healthy = False
    try:
        result = runner.grade(sub.path, timeout)
        healthy = result.graded and runner.alive  # after any failure, a fresh runner for the next one
    except RunnerFailure as err:
        result = Result.failed(assignment_id, Status.GRADER_ERROR, str(err))
    finally:
        runners.give_back(runner, healthy)
    if stopping.is_set():  # the batch was interrupted: what its runners said last is not trusted
        raise RunnerFailure("the batch stopped")
    # key None: a result that is not a grade is graded again on the next run
    result.extra_data = {"student_id": sub.student, "key": key if result.graded else None}
    signatures.attach(result, hints)
    write_student_files(out, sub.student, result)
    return result


def write_student_files(out: Path, student: str, result: Result) -> None:
    """feedback.html, then results.json (last: its presence marks the submission as graded), atomically."""
    dest = student_dir(out, student)
    for stale in dest.glob(f".*{TMP_SUFFIX}"):  # left by a batch killed mid-write
        stale.unlink(missing_ok=True)
    atomic_write(dest / "feedback.html", feedback_html(result, student))
    result.write(dest / "results.json")


def write_late_feedback(out: Path, rows: list[tuple[str, Result]], late: dict) -> None:
    """Each student under a due date gets their feedback again, with what lateness did to the score."""
    for student, result in rows:
        if student in late:
            atomic_write(student_dir(out, student) / "feedback.html", feedback_html(result, student, late=late[student]))


def test_columns(results: list[Result]) -> list[str]:
    names: list[str] = []
    for r in results:
        for t in r.tests:
            if t.name not in names:
                names.append(t.name)
    return names


LATE_COLUMNS = ["raw_score", "days_late", "late_days_used", "late_penalty", "submitted_at", "late_note"]


def write_grades_csv(out: Path, rows: list[tuple[str, Result]], late: dict | None = None) -> Path:
    """grades.csv; with `late` (student -> `late.Adjustment`, under a due date) the score is the adjusted one and
    the raw score and the adjustment stand beside it."""
    cols = test_columns([r for _, r in rows])
    extra = LATE_COLUMNS if late else []
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student_id", "score", "max_score", "status", *extra, *cols])
    for student, r in sorted(rows, key=lambda row: row[0]):
        if not r.graded:  # not graded: no score at all, only why
            w.writerow([student, "", "", r.status, *[""] * (len(extra) + len(cols))])
            continue
        by_name = {t.name: t.score for t in r.tests}
        adj = (late or {}).get(student)
        adjusted = [f"{r.score:g}", "", "", "", "", "no due date"] if late and adj is None else [] if not late else [
            f"{adj.raw_score:g}", adj.days_late, adj.late_days_used, f"{adj.penalty:g}",
            adj.submitted.isoformat(timespec="seconds") if adj.submitted else "", adj.note]
        w.writerow([student, f"{adj.score if adj else r.score:g}", f"{r.max_score:g}", r.status, *adjusted,
                    *[f"{by_name[c]:g}" if c in by_name else "" for c in cols]])
    return atomic_write(Path(out) / "grades.csv", buf.getvalue())


def run(root: Path, assignment_id: str, submissions: Path, out: Path, *, jobs: int = 1, force: bool = False,
        tier: str = "cpu", gradebook: Path | None = None, progress: bool = True, log=print,
        preflight: bool = True, hints: str | None = None, term: Path | None = None) -> dict:
    """Grade every submission in ``submissions`` into ``out``; return a summary dict.

    preflight: first grade the solution and the release on this machine (cached; see
    `lmcourse.instructor.preflight`); when either is off, raise `GraderError` before any
    student's work is touched.
    hints: how to get the known mistakes' signatures for the feedback's likely causes
    (`mistakes.for_feedback`: "compute", "cached", "off"; None: ``$LMCOURSE_HINTS`` or compute).
    term: the term's due dates and late policies (`lmcourse.instructor.late`; None: the course's term.toml, if any).
    """
    from tqdm import tqdm

    root, out = Path(root).resolve(), Path(out).resolve()
    load_release(root, assignment_id)  # fail early, with the fix, when the release is missing
    if preflight:
        from lmcourse.instructor.preflight import preflight_in_subprocess

        log(preflight_in_subprocess(root, assignment_id, tier))
    known = mistakes.for_feedback(root, assignment_id, tier=tier, mode=hints, log=log)
    subs, skipped = find_submissions(submissions, assignment_id)
    for s in skipped:
        log(f"skipped {s}")
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = grader_fingerprint(root, assignment_id, tier)
    todo, done = [], []
    for sub in subs:
        key = submission_key(sub.path, fingerprint)
        prev = stored_result(out, sub.student)
        if not force and prev is not None and prev.graded and (prev.extra_data or {}).get("key") == key:
            done.append((sub.student, prev))
        else:
            todo.append((sub, key))
    started = time.perf_counter()
    book = Gradebook(gradebook, root, assignment_id) if gradebook else None
    with tqdm(total=len(subs), initial=len(done), desc=f"grading {assignment_id}", unit="nb",
              disable=not progress, file=sys.stderr) as bar:
        finished = grade_all(root, assignment_id, todo, out, tier, jobs, known)
        try:
            for sub, result in finished:
                done.append((sub.student, result))
                if book:
                    _record(book, sub.student, result, log)  # as each finishes: a killed batch keeps these
                bar.set_postfix_str(f"{sub.student}: {result.score:g}/{result.max_score:g}")
                bar.update(1)
        finally:
            finished.close()  # an interrupted batch stops its runners now
    # late work: computed again from the raw scores on every run, so never applied twice
    late = late_work.finish(root, assignment_id, {s.student: Path(s.path) for s in subs}, done, term, log)
    write_late_feedback(out, done, late)
    if book:
        for student, result in done:  # idempotent: also covers grades skipped this run
            _record(book, student, result, log, late.get(student))
    csv_path = write_grades_csv(out, done, late)
    seconds = time.perf_counter() - started
    bad = [(s, r) for s, r in done if r.status != Status.OK]
    summary = {"graded": len(todo), "skipped": len(done) - len(todo), "total": len(done), "seconds": seconds,
               "problems": len(bad), "grades_csv": str(csv_path),
               "grader_errors": sum(not r.graded for _, r in done)}
    log(f"{assignment_id}: graded {len(todo)}, unchanged {len(done) - len(todo)}, in {seconds:.1f} s "
        f"({seconds / max(1, len(todo)):.2f} s per submission, --jobs {jobs}); {csv_path}")
    for s, r in sorted(bad, key=lambda row: row[0]):
        log(f"  {s}: {r.status}: {r.message}")
    if summary["grader_errors"]:
        log(f"{summary['grader_errors']} submission(s) were NOT graded because the grader failed (status "
            "grader-error above: no score was recorded for them). Fix the cause and run the same command "
            "again: it grades only those.")
    return summary


def _record(book: Gradebook, student: str, result: Result, log, late=None) -> None:
    """Record one grade in the gradebook; a failure is reported and the batch goes on."""
    try:
        book.record(student, result, late)
    except Exception as err:  # the gradebook's problem, not the student's; their results.json stands
        log(f"  {student}: not recorded in the gradebook ({type(err).__name__}: {err})")
