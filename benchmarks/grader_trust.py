"""What issue 37's grader changes cost a submission: seconds to grade the solution, this tree against a baseline.

For each assignment (04 to 08 by default), the solution typed into the release is graded by `lmcourse grade`
(one submission, --jobs 1, no preflight, CPU tier) twice, side by side: once by the grader of a baseline
commit (checked out in a temporary git worktree, the same venv), once by this tree's. The same notebook
goes to both. What changed between them: the training runs' two probes (weights first, then the evaluation
batch), the dispatcher's refusal of built-ins and the function mode of module probes, the library view of
the worker (site-packages rebuilt under bubblewrap), the per-cell loading of the notebook.

    python benchmarks/grader_trust.py [ASSIGNMENT ...] [--baseline COMMIT] [--repeat N]

Prints one row per assignment: baseline seconds, this tree's seconds, the ratio (this / baseline), and both
scores (each must be full marks: a run that is not is reported, not hidden). The machine's load shows in the
numbers; the two runs of a row follow each other to share it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "40fbd41"  # main before issue 37's changes
DEFAULT = ["04-attention", "05-transformer", "06-bert", "07-gpt", "08-capstone"]


def grade(tree: Path, assignment: str, notebook: Path, out: Path) -> tuple[float, str]:
    """(seconds, "score / max") of one `lmcourse grade` by the grader in `tree`."""
    subs = out / "subs"
    subs.mkdir(parents=True)
    (subs / "student.ipynb").write_bytes(notebook.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, "-m", "lmcourse.cli", "grade", assignment, str(subs), "--out", str(out / "grades"),
           "--no-preflight", "--no-progress", "--jobs", "1", "--tier", "cpu"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    try:
        result = json.loads((out / "grades" / "students" / "student" / "results.json").read_text())
        score = f"{result['score']:g} / {result['max_score']:g}" + ("" if result.get("status") == "ok" else
                                                                    f" ({result.get('status')})")
    except (OSError, ValueError, KeyError):
        score = f"no result (exit {proc.returncode}: {proc.stderr.strip()[-200:]})"
    return seconds, score


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", default=DEFAULT)
    parser.add_argument("--baseline", default=BASELINE, help=f"the commit to compare with (default {BASELINE})")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    from lmcourse.instructor.testing import submission_from_solution

    with tempfile.TemporaryDirectory(prefix="lmcourse-bench-") as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.baseline], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            print(f"{'assignment':<16} {'baseline s':>11} {'this tree s':>12} {'ratio':>6}  scores (baseline; this)")
            for assignment in args.assignments:
                notebook = submission_from_solution(ROOT, assignment, Path(tmp) / assignment)
                runs: dict[str, list[float]] = {"baseline": [], "this": []}
                scores = {}
                for r in range(args.repeat):
                    for side, tree in (("baseline", base), ("this", ROOT)):
                        seconds, scores[side] = grade(tree, assignment, notebook, Path(tmp) / f"{assignment}-{side}-{r}")
                        runs[side].append(seconds)
                b, t = statistics.median(runs["baseline"]), statistics.median(runs["this"])
                print(f"{assignment:<16} {b:>11.1f} {t:>12.1f} {t / b:>6.2f}  {scores['baseline']}; {scores['this']}",
                      flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
