"""Grade a folder of submissions: one runner process each, resumable, in parallel.

Layout of ``--out``::

    grades.csv                     one row per student (written at the end, atomically); a
                                   submission the grader failed on has no score, only its status
    students/<student>/results.json  Gradescope schema; written last, atomically: its presence
                                   with a matching key means "graded, nothing to redo"
    students/<student>/feedback.html names, points, messages

Student ids are file or folder names the students chose, so they live in a
folder of their own (``students/``) and can never collide with the grader's
own files (a student called ``grades.csv`` is just another student).

Each submission is graded by ``python -m lmcourse.grading.runner`` in its own
process: a submission that somehow takes the grader down takes only its own
grade with it, ``--jobs N`` runs N at once, and a killed batch loses only the
submissions in flight. A re-run skips a submission whose *key* (hash of the
notebook bytes and of everything that decides a grade: checks, solution,
release, grader code, tier) matches the one stored in its results.json.
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
import warnings
from dataclasses import dataclass
from pathlib import Path

from lmcourse.grading import notebook as nbmod
from lmcourse.grading.runner import failed_result, write_json_atomic

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
STUDENTS = "students"  # the folder of --out that holds one folder per student


def runner_timeout(root: Path, assignment_id: str) -> float:
    """How long a runner may take for one submission before it counts as stuck.

    It must exceed everything a submission may legitimately use, or a
    student who uses up the worker's whole budget would turn a grade into a
    grader error: the worker's total budget (restarts included), one more
    import, and time for the trusted side (reference values, scoring).
    """
    from lmcourse.grading.runner import _limits

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


def grader_fingerprint(root: Path, assignment_id: str, tier: str) -> str:
    """Hash of everything besides the notebook that decides a grade."""
    from lmcourse import __version__

    from lmcourse.course import Assignment, Course

    # The grader's own version, not its code bytes: editing a docstring must not force
    # re-grading a cohort; --force does that deliberately.
    return Assignment(Course(root), assignment_id).fingerprint(f"tier={tier}", f"lmcourse={__version__}")


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


def stored_result(out: Path, student: str) -> dict | None:
    try:
        return json.loads((student_dir(out, student) / "results.json").read_text())
    except (OSError, ValueError):
        return None


RECYCLE_AFTER = 25  # submissions per runner process before a fresh one (bounds any slow leak)


def _runner_env() -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


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
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=_runner_env())
        self.graded = 0

    def grade(self, task: dict, timeout: float) -> str | None:
        """Send one task; return None when it was answered, else why the runner failed."""
        try:
            self.proc.stdin.write(json.dumps(task) + "\n")
            self.proc.stdin.flush()
        except OSError:
            return f"the grader process stopped (status {self.proc.poll()}){self._tail()}"
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return f"the grader process did not finish within {timeout:.0f} s"
        if not self.proc.stdout.readline():
            return f"the grader process stopped (status {self.proc.wait()}){self._tail()}"
        self.graded += 1
        return None

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


def grade_all(root: Path, assignment_id: str, todo: list, out: Path, tier: str, jobs: int):
    """Yield (submission, result) as they finish, ``jobs`` runner processes at a time."""
    tasks: queue.Queue = queue.Queue()
    for item in todo:
        tasks.put(item)
    finished: queue.Queue = queue.Queue()

    def work() -> None:
        runner = None
        while True:
            try:
                sub, key = tasks.get_nowait()
            except queue.Empty:
                break
            try:
                if runner is None or runner.graded >= RECYCLE_AFTER:
                    if runner is not None:
                        runner.close()
                    runner = Runner(root, assignment_id, tier)
                result = _grade_with(runner, root, assignment_id, sub, key, out)
                if runner.proc.poll() is not None or result.get("status") == "grader-error":
                    runner.close(kill=True)  # after any failure, a fresh runner for the next one
                    runner = None
                finished.put((sub, result))
            except Exception as err:  # never leave the main loop waiting for a result
                finished.put((sub, failed_result(assignment_id, "grader-error", f"{type(err).__name__}: {err}")))
        if runner is not None:
            runner.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(jobs, len(todo))))]
    for t in threads:
        t.start()
    for _ in todo:
        yield finished.get()
    for t in threads:
        t.join()


def _grade_with(runner: Runner, root: Path, assignment_id: str, sub: Submission, key: str, out: Path) -> dict:
    dest = student_dir(out, sub.student)
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.glob(".*.tmp"):  # left by a runner killed mid-write
        stale.unlink(missing_ok=True)
    results = dest / "results.json"
    task = {"notebook": str(sub.path), "out": str(results), "feedback": str(dest / "feedback.html"),
            "student": sub.student, "extra": {"student_id": sub.student, "key": key}}
    failure = runner.grade(task, runner_timeout(root, assignment_id))
    result = stored_result(out, sub.student)
    if failure or result is None or result.get("extra_data", {}).get("key") != key:
        result = failed_result(assignment_id, "grader-error", failure or "the grader wrote no result")
        result["extra_data"] = {"student_id": sub.student, "key": None}  # None: re-graded on the next run
        write_json_atomic(results, result)
    return result


def test_columns(results: list[dict]) -> list[str]:
    names: list[str] = []
    for r in results:
        for t in r.get("tests", []):
            if t["name"] not in names:
                names.append(t["name"])
    return names


def write_grades_csv(out: Path, rows: list[tuple[str, dict]]) -> Path:
    cols = test_columns([r for _, r in rows])
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student_id", "score", "max_score", "status", *cols])
    for student, r in sorted(rows):
        if r.get("status") == "grader-error":  # not graded: no score at all, only why
            w.writerow([student, "", "", "grader-error", *[""] * len(cols)])
            continue
        by_name = {t["name"]: t["score"] for t in r.get("tests", [])}
        w.writerow([student, f"{r.get('score', 0):g}", f"{r.get('max_score', 0):g}", r.get("status", ""),
                    *[f"{by_name[c]:g}" if c in by_name else "" for c in cols]])
    path = Path(out) / "grades.csv"
    tmp = path.with_name(".grades.csv.tmp")
    tmp.write_text(buf.getvalue())
    os.replace(tmp, path)
    return path


def run(root: Path, assignment_id: str, submissions: Path, out: Path, *, jobs: int = 1, force: bool = False,
        tier: str = "cpu", gradebook: Path | None = None, progress: bool = True, log=print,
        preflight: bool = True) -> dict:
    """Grade every submission in ``submissions`` into ``out``; return a summary dict.

    preflight: first grade the solution and the release on this machine (cached; see
    `lmcourse.grading.preflight`); when either is off, raise `GraderError` before any
    student's work is touched.
    """
    from tqdm import tqdm

    root, out = Path(root).resolve(), Path(out).resolve()
    nbmod.load_release(root, assignment_id)  # fail early, with the fix, when the release is missing
    if preflight:
        from lmcourse.grading.preflight import preflight_in_subprocess

        log(preflight_in_subprocess(root, assignment_id, tier))
    subs, skipped = find_submissions(submissions, assignment_id)
    for s in skipped:
        log(f"skipped {s}")
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = grader_fingerprint(root, assignment_id, tier)
    todo, done = [], []
    for sub in subs:
        key = submission_key(sub.path, fingerprint)
        prev = stored_result(out, sub.student)
        if not force and prev is not None and prev.get("extra_data", {}).get("key") == key:
            done.append((sub.student, prev))
        else:
            todo.append((sub, key))
    started = time.perf_counter()
    book = Gradebook(gradebook, root, assignment_id) if gradebook else None
    with tqdm(total=len(subs), initial=len(done), desc=f"grading {assignment_id}", unit="nb",
              disable=not progress, file=sys.stderr) as bar:
        for sub, result in grade_all(root, assignment_id, todo, out, tier, jobs):
            done.append((sub.student, result))
            if book:
                _record(book, sub.student, result, log)  # as each finishes: a killed batch keeps these
            bar.set_postfix_str(f"{sub.student}: {result.get('score', 0):g}/{result.get('max_score', 0):g}")
            bar.update(1)
    if book:
        for student, result in done:  # idempotent: also covers grades skipped this run
            _record(book, student, result, log)
    csv_path = write_grades_csv(out, done)
    seconds = time.perf_counter() - started
    bad = [(s, r) for s, r in done if r.get("status") != "ok"]
    summary = {"graded": len(todo), "skipped": len(done) - len(todo), "total": len(done), "seconds": seconds,
               "problems": len(bad), "grades_csv": str(csv_path),
               "grader_errors": sum(r.get("status") == "grader-error" for _, r in done)}
    log(f"{assignment_id}: graded {len(todo)}, unchanged {len(done) - len(todo)}, in {seconds:.1f} s "
        f"({seconds / max(1, len(todo)):.2f} s per submission, --jobs {jobs}); {csv_path}")
    for s, r in sorted(bad):
        log(f"  {s}: {r.get('status')}: {r.get('message')}")
    if summary["grader_errors"]:
        log(f"{summary['grader_errors']} submission(s) were NOT graded because the grader failed (status "
            "grader-error above: no score was recorded for them). Fix the cause and run the same command "
            "again: it grades only those.")
    return summary


def _record(book: "Gradebook", student: str, result: dict, log) -> None:
    """Record one grade in the gradebook; a failure is reported and the batch goes on."""
    try:
        book.record(student, result)
    except Exception as err:  # the gradebook's problem, not the student's; their results.json stands
        log(f"  {student}: not recorded in the gradebook ({type(err).__name__}: {err})")


def _alembic_head() -> str:
    """nbgrader's ``get_alembic_version`` without the subprocess."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        return ScriptDirectory.from_config(Config(ini)).get_current_head()


class Gradebook:
    """Scores into nbgrader's own SQLite gradebook, so formgrader and ``nbgrader export`` work.

    The assignment's structure (notebook, grade cells with their points,
    solution cells, source cells) comes from the release notebook, as nbgrader's
    ``generate_assignment`` would record it; each test cell's ``auto_score`` is
    the sum of the points its checks earned.
    """

    def __init__(self, path: Path, root: Path, assignment_id: str):
        from lmcourse.grading.assign import tools_on_path

        tools_on_path()  # nbgrader runs `alembic` when it creates a gradebook
        self.url = f"sqlite:///{Path(path).resolve()}"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.assignment = assignment_id
        self.release = nbmod.load_release(root, assignment_id)
        self._created = False
        self._setup()

    def _open(self):
        nbmod.skip_slow_jsonschema_formats()
        import nbgrader.api

        if not self._created:
            # Creating a gradebook asks `alembic heads` in a subprocess for the schema
            # revision (10+ s on a busy machine). Ask alembic in this process instead:
            # same script directory, same answer; put back right after.
            self._created = True
            original = nbgrader.api.get_alembic_version
            nbgrader.api.get_alembic_version = _alembic_head
            try:
                return nbgrader.api.Gradebook(self.url)
            finally:
                nbgrader.api.get_alembic_version = original
        return nbgrader.api.Gradebook(self.url)

    def _setup(self) -> None:
        from nbgrader.utils import compute_checksum

        aid = nb = self.assignment
        with self._open() as gb:
            gb.update_or_create_assignment(aid)
            gb.update_or_create_notebook(nb, aid)
            for cell in self.release.cells:
                meta, gid = nbmod.nbgrader_meta(cell), nbmod.grade_id(cell)
                if not gid:
                    continue
                if meta.get("grade"):
                    gb.update_or_create_grade_cell(gid, nb, aid, max_score=float(meta.get("points", 0)),
                                                   cell_type=cell.cell_type)
                if meta.get("solution"):
                    gb.update_or_create_solution_cell(gid, nb, aid)
                gb.update_or_create_source_cell(gid, nb, aid, cell_type=cell.cell_type,
                                                locked=bool(meta.get("locked")), source=nbmod.cell_source(cell),
                                                checksum=meta.get("checksum") or compute_checksum(cell))

    def record(self, student: str, result: dict) -> None:
        from nbgrader.api import MissingEntry

        if result.get("status") == "grader-error":
            return  # not graded: leave the submission ungraded in formgrader rather than record a 0
        cells = result.get("cells", {})
        with self._open() as gb, warnings.catch_warnings():
            # nbgrader's add_submission triggers SQLAlchemy autoflush warnings; harmless, noisy
            warnings.simplefilter("ignore")
            gb.update_or_create_student(student)
            try:
                gb.find_submission(self.assignment, student)
            except MissingEntry:
                gb.add_submission(self.assignment, student)
            for cell in self.release.cells:
                meta, gid = nbmod.nbgrader_meta(cell), nbmod.grade_id(cell)
                if not (gid and meta.get("grade")) or meta.get("solution"):
                    continue  # manually graded answers (grade + solution) are left for formgrader
                grade = gb.find_grade(gid, self.assignment, self.assignment, student)
                grade.auto_score = float(cells.get(gid, {}).get("score", 0.0))
            gb.db.commit()
