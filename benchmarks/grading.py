"""Seconds per submission: `lmcourse grade` (isolated) vs `nbgrader autograde` (in-kernel).

Both grade the same N honest notebooks (the solution as a student would
submit it). nbgrader executes each notebook in a Jupyter kernel and runs its
test cells there; lmcourse checks structure, extracts the code, starts a
sandboxed worker per submission and runs the hidden checks in a trusted
process. Both are timed end to end as an instructor runs them (one command
over the folder, startup included), then divided by N. A second lmcourse run
with ``--jobs 2`` gives batch throughput.

    python benchmarks/grading.py                          # the tests' fixture assignment, 6 notebooks
    python benchmarks/grading.py --assignment 01-ngrams --n 4
    python benchmarks/grading.py --n 200 --only-jobs2     # the 200-submission goal (< 10 min on 2 cores)

Goal (issue 4): isolation costs at most 1.5x nbgrader's time per submission.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"


def course_of(assignment: str) -> Path:
    return FIXTURE if (FIXTURE / "solutions" / assignment).is_dir() else ROOT


def env() -> dict:
    e = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    e["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{e.get('PATH', '')}"  # nbgrader needs `alembic`
    mirror = ROOT.parent / "shared" / "data"
    if (mirror / "SHA256SUMS").exists():
        e.setdefault("LMCOURSE_DATA_MIRROR", str(mirror))
    return e


def timed(cmd: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", default="00-fixture")
    p.add_argument("--n", type=int, default=6, help="number of submissions")
    p.add_argument("--skip-nbgrader", action="store_true")
    p.add_argument("--only-jobs2", action="store_true", help="only the --jobs 2 batch (for large --n)")
    args = p.parse_args()
    aid, n = args.assignment, args.n
    course = course_of(aid)
    sys.path.insert(0, str(ROOT))
    from lmcourse.instructor.testing import submission_from_solution

    with tempfile.TemporaryDirectory(prefix="lmcourse-bench-") as tmp:
        tmp = Path(tmp)
        honest = submission_from_solution(course, aid, tmp / "honest")
        subs = tmp / "subs"
        nbg = tmp / "nbgrader"
        for i in range(n):
            student = f"s{i:03d}"
            (subs / student / aid).mkdir(parents=True)
            shutil.copy(honest, subs / student / aid / f"{aid}.ipynb")
        print(f"{aid}: {n} honest submissions, {os.cpu_count()} CPU cores, python {sys.version.split()[0]}")

        lm = [sys.executable, "-m", "lmcourse.cli", "grade", aid, str(subs), "--course", str(course), "--no-progress"]
        t1 = None if args.only_jobs2 else timed(lm + ["--out", str(tmp / "out1"), "--jobs", "1"])
        t2 = timed(lm + ["--out", str(tmp / "out2"), "--jobs", "2"])
        if t1 is not None:
            print(f"lmcourse grade --jobs 1 : {t1:7.1f} s total, {t1 / n:6.2f} s per submission")
        print(f"lmcourse grade --jobs 2 : {t2:7.1f} s total, {t2 / n:6.2f} s per submission "
              f"({n / t2 * 60:.1f} submissions/minute; 200 would take {200 * t2 / n / 60:.1f} min)")

        if args.skip_nbgrader or t1 is None:
            return 0
        (nbg / "source" / aid).mkdir(parents=True)
        shutil.copy(course / "solutions" / aid / f"{aid}.ipynb", nbg / "source" / aid)
        shutil.copytree(subs, nbg / "submitted")
        root = f"--CourseDirectory.root={nbg}"
        timed([sys.executable, "-m", "nbgrader", "generate_assignment", aid, "--force", root], cwd=nbg)
        t0 = timed([sys.executable, "-m", "nbgrader", "autograde", aid, "--create", "--force", root], cwd=nbg)
        print(f"nbgrader autograde      : {t0:7.1f} s total, {t0 / n:6.2f} s per submission")
        ratio = t1 / t0
        print(f"ratio lmcourse/nbgrader per submission (jobs 1): {ratio:.2f}x  "
              f"(goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}); with --jobs 2: {t2 / t0:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
