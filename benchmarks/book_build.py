"""Book build benchmark: the full executed build from clean, then a rebuild with nothing changed.

    python benchmarks/book_build.py            # builds a copy of book/ in a temporary folder
    python benchmarks/book_build.py --keep     # ... and keeps it (prints where)

The copy holds book/, package.json, package-lock.json and a link to
node_modules/, so the checkout's own book/_build/ and its execution cache are
left alone and the first build really executes every chapter. Both builds
run `lmcourse book --no-assign --check` (every warning fails), exactly what
`make test` runs.

Budget (issue 3, on a 2-core CPU machine): clean build under 10 minutes with
every unit executed; a rebuild with nothing changed under 1 minute.

Columns
-------
clean s     wall time of the first build: every chapter executed, every page written
rebuild s   wall time of the second build: chapters served from the jupyter-cache
            execution cache, Sphinx finds nothing outdated
ratio       clean s / rebuild s
Per chapter, the execution time reported by MyST-NB during the clean build.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLEAN_BUDGET_S, REBUILD_BUDGET_S = 600, 60


def _copy_course(dest: Path) -> None:
    shutil.copytree(ROOT / "book", dest / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / name, dest / name)
    from lmcourse.instructor.book import ensure_mathjax

    ensure_mathjax(ROOT)
    (dest / "node_modules").symlink_to(ROOT / "node_modules")
    (dest / "solutions").mkdir()  # the CLI recognises a course checkout by book/ + solutions/


def _build(root: Path, env: dict[str, str]) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "lmcourse.cli", "book", "--no-assign", "--check"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"the book build failed in {root} (exit {proc.returncode}); last lines:\n"
                 + "\n".join(log.splitlines()[-40:]))
    return seconds, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
    args = parser.parse_args()

    env = dict(os.environ)
    mirror = ROOT.parent / "shared" / "data"
    if "LMCOURSE_DATA_MIRROR" not in env and (mirror / "SHA256SUMS").exists():
        env["LMCOURSE_DATA_MIRROR"] = str(mirror)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    tmp = Path(tempfile.mkdtemp(prefix="lmcourse-book-bench-"))
    try:
        _copy_course(tmp)
        clean, log = _build(tmp, env)
        rebuild, _ = _build(tmp, env)
        chapters = re.findall(r"(\S+\.(?:md|ipynb)): Executed notebook in ([\d.]+) seconds", log)
        pages = len(list((tmp / "book" / "_build" / "html").rglob("*.html")))
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"book build, {os.cpu_count()} CPU cores, {pages} HTML files")
    print(f"{'clean s':>10} {'rebuild s':>10} {'ratio':>8}")
    print(f"{clean:10.1f} {rebuild:10.1f} {clean / rebuild:8.1f}x")
    for path, seconds in chapters:
        print(f"  executed {Path(path).relative_to(tmp) if path.startswith(str(tmp)) else path}: {float(seconds):.1f} s")
    ok_clean, ok_rebuild = clean < CLEAN_BUDGET_S, rebuild < REBUILD_BUDGET_S
    print(f"budget: clean < {CLEAN_BUDGET_S} s {'ok' if ok_clean else 'OVER'}; "
          f"rebuild < {REBUILD_BUDGET_S} s {'ok' if ok_rebuild else 'OVER'}")


if __name__ == "__main__":
    main()
