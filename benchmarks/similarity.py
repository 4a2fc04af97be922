"""`lmcourse similarity` on a cohort of 200, against copydetect's own whole-file detector on the same code.

    python benchmarks/similarity.py                       # 200 students of 04-attention
    python benchmarks/similarity.py --students 50 --screenshot /tmp/similarity.png

The cohort: each synthetic student answers every graded function of 04-attention with one of the three honest
versions of tests/similarity_cohorts.py, made their own by routing about half of its assignments and returns
through a variable of their own (`own_lines`: students who chose the same approach still write different lines),
then renamed, reformatted and with its methods reordered (`disguised`); one student in ten copied a whole
notebook from another (disguised again). Both sides read the same answer code:

- "lmcourse similarity": `lmcourse.instructor.similarity.run`, from the notebooks (each read in the grader's
  bounded child), every graded function compared with the same function of every other student and of the
  solution, the release and the cohort's idioms removed; the page and the CSV files written.
- "copydetect whole files": `copydetect.CopyDetector` over the same answer code exported as one .py file per
  student (its command-line tool's use: every file against every other, boilerplate the release's code), its
  HTML report written.

Prints each side's seconds, the ratio, and how many of the planted whole-notebook copies each ranks at the
top. Measured (2 shared CPU cores, 2026-11-29): see the closing note of issue #42.
"""

from __future__ import annotations

import argparse
import ast
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from similarity_cohorts import HONEST, disguised, keep_names, notebook  # noqa: E402

from lmcourse.instructor import similarity as sim  # noqa: E402

UNIT = "04-attention"


class _Rewrite(ast.NodeTransformer):
    """A student's own lines: about half of the assignments and returns go through a variable of their own."""

    def __init__(self, rng: random.Random):
        self.rng, self.n = rng, 0

    def _split(self, value, make):
        self.n += 1
        name = f"part{self.n}"
        return [ast.Assign([ast.Name(name, ast.Store())], value), make(ast.Name(name, ast.Load()))]

    def visit_Assign(self, node):
        if self.rng.random() < 0.5:
            return self._split(node.value, lambda v: ast.Assign(node.targets, v))
        return node

    def visit_Return(self, node):
        if node.value is not None and self.rng.random() < 0.5:
            return self._split(node.value, lambda v: ast.Return(v))
        return node


def own_lines(code: str, rng: random.Random) -> str:
    return ast.unparse(ast.fix_missing_locations(_Rewrite(rng).visit(ast.parse(code))))


def cohort(folder: Path, students: int, seed: int = 0) -> tuple[dict[str, dict[str, str]], set[frozenset]]:
    """Write the cohort's notebooks; return each student's answers and the planted copy pairs."""
    rng = random.Random(seed)
    keep = keep_names(UNIT)
    versions = HONEST[UNIT]
    answers: dict[str, dict[str, str]] = {}
    copies: set[frozenset] = set()
    for i in range(students):
        name = f"s{i:03d}"
        if i >= 10 and i % 10 == 0:  # one in ten copies an earlier student's whole notebook
            source = f"s{rng.randrange(i):03d}"
            answers[name] = {f: disguised(code, keep) for f, code in answers[source].items()}
            copies.add(frozenset((name, source)))
        else:
            answers[name] = {f: disguised(own_lines(versions[rng.choice(sorted(versions))][f], rng), keep)
                             for f in versions["ana"]}
        notebook(UNIT, answers[name], folder / "submitted" / f"{name}.ipynb", reverse=rng.random() < 0.5)
    return answers, copies


def copydetect_whole_files(folder: Path, answers: dict[str, dict[str, str]]) -> tuple[float, list]:
    from copydetect import CopyDetector

    from similarity_cohorts import release_of
    from lmcourse.grading import notebook as nbmod

    files = folder / "py"
    files.mkdir()
    for name, units in answers.items():
        (files / f"{name}.py").write_text("\n\n".join(units.values()) + "\n")
    boiler = folder / "boilerplate"
    boiler.mkdir()
    release = release_of(UNIT)
    (boiler / "release.py").write_text("\n\n".join(nbmod.cell_source(c) for c in release.cells
                                                   if c.get("cell_type") == "code"))
    started = time.perf_counter()
    detector = CopyDetector(test_dirs=[str(files)], boilerplate_dirs=[str(boiler)], extensions=["py"],
                            display_t=sim.THRESHOLD, autoopen=False, silent=True,
                            out_file=str(folder / "copydetect.html"))
    detector.run()
    detector.generate_html_report()
    seconds = time.perf_counter() - started
    ranked = sorted(detector.get_copied_code_list(), key=lambda row: -max(row[0], row[1]))
    return seconds, [frozenset((Path(r[2]).stem, Path(r[3]).stem)) for r in ranked]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--screenshot", type=Path, help="also a 1280 px screenshot of the page (needs Chromium)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        answers, copies = cohort(folder, args.students)
        started = time.perf_counter()
        result = sim.run(ROOT, UNIT, folder / "submitted", folder / "out")
        ours = time.perf_counter() - started
        theirs, their_ranking = copydetect_whole_files(folder, answers)
        our_ranking = [frozenset((p.a, p.b)) for p in result.pairs]
        top = len(copies)
        print(f"{args.students} students of {UNIT}, {len(copies)} planted whole-notebook copies; "
              f"{len(result.pairs)} pairs share code, {len(result.flagged())} at or above {sim.THRESHOLD:.0%}")
        print(f"lmcourse similarity (per function, from the notebooks): {ours:6.1f} s "
              f"(of which comparing {result.seconds:.1f} s); planted copies among its closest pairs: "
              f"{len(copies & set(our_ranking[:top]))} of {top} in its top {top}")
        print(f"copydetect whole files (baseline, the same code):       {theirs:6.1f} s; planted copies among its "
              f"closest pairs: {len(copies & set(their_ranking[:top]))} of {top} in its top {top}")
        print(f"ratio lmcourse / copydetect: {ours / theirs:.2f}")
        if args.screenshot:
            from playwright.sync_api import sync_playwright

            from lmcourse.instructor.slides import CHROMIUM_ARGS, chromium

            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto((folder / "out" / "index.html").as_uri())
                page.screenshot(path=str(args.screenshot), full_page=False)
                browser.close()
            print(f"screenshot: {args.screenshot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
