"""What `lmcourse report` costs on a cohort of N results, against reading those results alone.

A cohort of 01-ngrams is made from real grades: the solution, the untouched release and each known
mistake, graded once each (identical notebooks grade identically), then copied to N students as
``lmcourse grade --out`` writes them (``students/<student>/results.json``). Timed side by side, in this
process, on the same folder:

- baseline: `cohort.collect`, reading and parsing every results.json (what any tool reading the cohort pays);
- report: `cohort.build` with the known mistakes' signatures in hand (matching every submission against
  every mistake, the page and the two CSV files).

The signatures themselves are made once per course version (every mistake graded as a submission, then
cached): their time is printed too, separately.

    python benchmarks/cohort_report.py [--students 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LMCOURSE_DATA_MIRROR", str(ROOT.parent / "shared" / "data"))

AID = "01-ngrams"


def main() -> int:
    from lmcourse.grading import grade_notebook
    from lmcourse.grading.result import Result
    from lmcourse.instructor import batch, cohort, mistakes
    from lmcourse.instructor.testing import released_notebook, submission_from_solution

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        graded = mistakes.grade_all(ROOT, AID, tmp / "mistakes")
        signatures = mistakes.signatures_from(ROOT, AID, graded)
        sig_seconds = time.perf_counter() - t0
        pool = [r for r in graded.values()]
        pool.append(grade_notebook(ROOT, AID, submission_from_solution(ROOT, AID, tmp / "honest"), tier="cpu"))
        pool.append(grade_notebook(ROOT, AID, released_notebook(ROOT, AID, tmp / "release"), tier="cpu"))
        grades = tmp / "grades"
        for i in range(args.students):
            # a third honest, the rest spread over the mistakes and the release
            r = pool[-2] if i % 3 == 0 else pool[i % len(pool)]
            batch.write_student_files(grades, f"s{i:04d}", Result.loads(r.dumps()))
        base, report = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            cohort.collect(grades, AID)
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            _, summary = cohort.build(ROOT, grades, AID, signatures=signatures)  # as the cache hands them over
            report.append(time.perf_counter() - t)
    b, r = statistics.median(base), statistics.median(report)
    print(f"{AID}, {args.students} results, {len(signatures)} known mistakes (median of {args.repeat})")
    print(f"  baseline (cohort.collect: read the results)  {b:7.2f} s")
    print(f"  lmcourse report (collect, match, page, CSVs) {r:7.2f} s   ratio {r / b:.2f}")
    print(f"  signatures, once per course version: {sig_seconds:.1f} s ({len(signatures)} mistakes graded)")
    print(f"  attributed exactly: {sum(a['exact'] for a in summary.attribution.values())} of "
          f"{len(summary.graded)} graded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
