"""Measure what grading one submission costs, per assignment, and write instructors/grading-cost.json.

For each assignment: the solution, typed into the released notebook as a
student would submit it, is graded once by `lmcourse grade` (the real path:
structure check, sandboxed worker, hidden checks; no preflight), on one
submission at a time. Recorded: wall-clock seconds, the largest process's
peak memory, the score (full marks expected: a run that is not full marks
is refused), the machine, and the tier (cpu here; gpu where CUDA is present).

The instructor notes (lmcourse.instructor.notes) show these numbers under "Time
and cost"; a tier never measured is shown as such, not guessed.

    python tools/measure_grading_cost.py [ASSIGNMENT ...] [--tier cpu|gpu]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "instructors" / "grading-cost.json"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}"


def measure(assignment: str, tier: str) -> dict:
    from lmcourse.instructor.testing import submission_from_solution

    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        subs.mkdir()
        path = submission_from_solution(ROOT, assignment, subs)
        path.rename(path.with_name("student.ipynb"))
        cmd = [sys.executable, "-m", "lmcourse.cli", "grade", assignment, str(subs), "--out", str(Path(tmp) / "out"),
               "--no-preflight", "--no-progress", "--jobs", "1", "--tier", tier]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        rows = list(csv.DictReader((Path(tmp) / "out" / "grades.csv").open())) if proc.returncode == 0 else []
    if not rows or rows[0].get("status") != "ok" or rows[0].get("score") != rows[0].get("max_score"):
        raise SystemExit(f"{assignment}: the solution did not grade to full marks; nothing recorded\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    # This process grades one assignment (see main), so its children's peak is this grade's.
    return {"seconds": round(seconds, 1), "peak_mb": round(peak / 1024), "score": rows[0]["score"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--tier", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one, print JSON
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.tier)))
        return 0
    ids = args.assignments or sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    for assignment in ids:
        # A fresh process per assignment: peak memory (ru_maxrss of the children) is per grade, not cumulative.
        proc = subprocess.run([sys.executable, __file__, "--one", assignment, "--tier", args.tier],
                              capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return 1
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result.update(machine=machine(), date=datetime.date.today().isoformat())
        data.setdefault(assignment, {})[args.tier] = result
        print(f"{assignment} {args.tier}: {result['seconds']} s, peak {result['peak_mb']} MB", flush=True)
        OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
