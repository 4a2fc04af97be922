"""Seconds per submission: `lmcourse grade --slurm` through a real single-node Slurm vs a local `lmcourse grade`.

Both grade the same N honest notebooks, two at a time: the local batch with
``--jobs 2``, Slurm with one core per task on a two-core node (so two tasks
run at once). Each side is warmed first on one submission (the preflight's
verdict is then cached on both, as it is after a cohort's first round), then
timed end to end as an instructor runs it: for Slurm from ``--slurm
--submit`` until the jobs have left the queue, plus ``--collect``. The
difference, divided by N, is what a Slurm task costs a submission on top of
a local grade; the tasks' own seconds say how much of it is starting a
runner per task (a local batch reuses one for 25 submissions) and how much
is the scheduler's.

Needs root and Debian's slurmctld, slurmd, slurm-client and munge
(tests/slurmcluster.py starts them in a temporary folder).

    python benchmarks/slurm.py                           # 01-ngrams, 8 submissions
    python benchmarks/slurm.py --assignment 00-fixture --n 12
    python benchmarks/slurm.py --record                  # also write the result into instructors/grading-cost.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from grading import course_of, env  # noqa: E402  (benchmarks/grading.py: the same course lookup and environment)
from slurmcluster import LocalSlurm, unavailable  # noqa: E402


def lmcourse(args: list, environment: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "lmcourse.cli", *map(str, args)], env=environment,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): lmcourse {' '.join(map(str, args))}\n{done.stdout[-2000:]}\n"
                 f"{done.stderr[-2000:]}")
    return done


def submissions(assignment: str, folder: Path, n: int) -> Path:
    from lmcourse.instructor.testing import submission_from_solution

    honest = submission_from_solution(course_of(assignment), assignment, folder / "_honest")
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        shutil.copy(honest, folder / f"student{i:03d}.ipynb")
    shutil.rmtree(folder / "_honest")
    return folder


def local(assignment: str, subs: Path, out: Path) -> float:
    course = course_of(assignment)
    start = time.perf_counter()
    lmcourse(["grade", assignment, subs, "--out", out, "--course", course, "--jobs", 2, "--no-progress"], env())
    return time.perf_counter() - start


def on_slurm(cluster: LocalSlurm, assignment: str, subs: Path, out: Path) -> tuple[float, list[float]]:
    course = course_of(assignment)
    environment = {**env(), "SLURM_CONF": cluster.env["SLURM_CONF"]}
    start = time.perf_counter()
    lmcourse(["grade", assignment, subs, "--out", out, "--course", course, "--slurm", "--submit",
              "--cpus-per-task", 1], environment)
    cluster.wait_idle(timeout=3600)
    lmcourse(["grade", assignment, subs, "--out", out, "--course", course, "--collect"], environment)
    seconds = time.perf_counter() - start
    tasks = [json.loads(p.read_text())["extra_data"]["slurm"]["seconds"] for p in out.glob("students/*/results.json")]
    return seconds, tasks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", default="01-ngrams")
    p.add_argument("--n", type=int, default=8, help="number of submissions")
    p.add_argument("--record", action="store_true", help="write the result into instructors/grading-cost.json")
    args = p.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"cannot run: {why}")
    with tempfile.TemporaryDirectory(prefix="lmcourse-slurm-bench-") as tmp, LocalSlurm(cpus=2) as cluster:
        tmp = Path(tmp)
        warm = submissions(args.assignment, tmp / "warm", 1)
        local(args.assignment, warm, tmp / "warm-local")
        on_slurm(cluster, args.assignment, warm, tmp / "warm-slurm")
        subs = submissions(args.assignment, tmp / "subs", args.n)
        base = local(args.assignment, subs, tmp / "local")
        total, tasks = on_slurm(cluster, args.assignment, subs, tmp / "slurm")
    n = args.n
    overhead = (total - base) / n
    print(f"{args.assignment}, {n} submissions, two at a time on 2 cores")
    print(f"  local `lmcourse grade --jobs 2`       {base:7.1f} s  ({base / n:5.2f} s per submission)  [baseline]")
    print(f"  Slurm round (submit .. collect)      {total:7.1f} s  ({total / n:5.2f} s per submission)  "
          f"ratio {total / base:.2f}x")
    print(f"  overhead of a Slurm task             {overhead:+7.2f} s per submission")
    print(f"  a task's own time (runner start + grade): median {statistics.median(tasks):.1f} s, "
          f"{min(tasks):.1f} to {max(tasks):.1f} s")
    if args.record:
        path = ROOT / "instructors" / "grading-cost.json"
        data = json.loads(path.read_text())
        data.setdefault("_slurm", {})[args.assignment] = {
            "date": datetime.date.today().isoformat(), "submissions": n, "local_seconds": round(base / n, 2),
            "slurm_seconds": round(total / n, 2), "overhead_seconds": round(overhead, 2),
            "task_seconds": round(statistics.median(tasks), 1), "machine": "2 cores, single-node Slurm 22.05"}
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"recorded in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
