"""Preflight: grade the solution and the release on this machine before any student's work.

A grade is only as good as the grader that produced it, and the grader depends
on the machine: the sandbox (bubblewrap, the uid switch, where the venv lives),
the installed packages, the data mirror, the tier. Before a batch (and in the
Gradescope bundle's first run) the grader grades two notebooks whose grades it
knows: the instructor's solution must earn full marks and the released
notebook 0. If either is off, nothing is graded and the instructor is told
what broke, instead of a cohort of wrong grades.

The verdict is cached per course content, grader code, machine and tier
(``$LMCOURSE_CACHE/preflight/``), so only the first batch on a machine pays for
it (about one submission's grading time, twice). It runs in a process of its
own (``python -m lmcourse.instructor.preflight ROOT ID``), which a
batch and Gradescope's ``setup.sh`` and ``run_autograder`` start; it sits above
the runner, whose `grade` it calls.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmcourse.errors import GraderError
from lmcourse.files import atomic_write
from lmcourse.grading.result import Result
from lmcourse.grading.runner import grade, grader_fingerprint, resolve_tier


def _cache_dir() -> Path:
    return Path(os.environ.get("LMCOURSE_CACHE") or Path.home() / ".cache" / "lmcourse") / "preflight"


def cache_key(root: Path, assignment_id: str, tier: str) -> str:
    """Course content, grader code, interpreter, isolation and tier: what a verdict depends on."""
    from lmcourse.grading.sandbox import isolation_available

    h = hashlib.sha256(grader_fingerprint(root, assignment_id, tier).encode())
    package = Path(__file__).resolve().parents[1]  # lmcourse/
    for path in [*sorted((package / "grading").glob("*.py")), package / "course.py"]:  # the grader, the course layout
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    # Not the host name: Gradescope builds the image on one host and grades on others; the
    # interpreter, its packages (via the code hash above), the isolation and the tier decide.
    h.update(f"\0{sys.executable}\0{platform.python_version()}\0{Path(root).resolve()}\0".encode())
    try:
        h.update(isolation_available().encode())
    except Exception as err:  # the sandbox cannot start here at all: the preflight will say why
        h.update(repr(err).encode())
    return h.hexdigest()


def _first_failure(result: Result) -> str:
    for t in result.tests:
        if not t.passed:
            return f"first failing check '{t.name}': {t.output[:300]}"
    return result.message[:300]


def preflight(root: Path, assignment_id: str, tier: str = "auto", *, use_cache: bool = True) -> str:
    """Grade the solution (must get full marks) and the release (must get 0); return a one-line verdict.

    Raises `GraderError` saying what broke. Runs in the calling process (which
    then holds the reference module; `preflight_in_subprocess` keeps a batch's
    own process small).
    """
    from lmcourse.instructor.testing import released_notebook, submission_from_solution

    root, tier = Path(root), resolve_tier(tier)
    cache = _cache_dir() / f"{cache_key(root, assignment_id, tier)}.json"
    if use_cache and cache.is_file():
        return f"preflight {assignment_id} ({tier} tier): passed earlier on this machine (cached)"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lmcourse-preflight-") as tmp:
        solution = grade(root, assignment_id, submission_from_solution(root, assignment_id, Path(tmp) / "solution"),
                         tier=tier)
        release = grade(root, assignment_id, released_notebook(root, assignment_id, Path(tmp) / "release"),
                        tier=tier)
    problems = []
    if solution.status != "ok" or solution.score != solution.max_score:
        problems.append(f"the solution scored {solution.score:g}/{solution.max_score:g} "
                        f"(status {solution.status}; {_first_failure(solution)})")
    if release.score != 0:
        passed = [t.name for t in release.tests if t.score > 0]
        problems.append(f"the unmodified release scored {release.score:g} (checks that a stub passes: "
                        f"{', '.join(passed[:3])})")
    if problems:
        raise GraderError(f"preflight of {assignment_id} ({tier} tier) failed on this machine, so no submission "
                          f"was graded: {'; '.join(problems)}. Isolation here: {solution.isolation}")
    seconds = time.perf_counter() - started
    atomic_write(cache, json.dumps({"assignment": assignment_id, "tier": tier, "seconds": round(seconds, 1),
                                    "solution": solution.score, "max_score": solution.max_score,
                                    "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=1))
    return (f"preflight {assignment_id} ({tier} tier): the solution earns {solution.score:g}/"
            f"{solution.max_score:g} and the release 0 on this machine ({seconds:.0f} s)")


def preflight_in_subprocess(root: Path, assignment_id: str, tier: str) -> str:
    """`preflight` in a fresh ``python -m lmcourse.instructor.preflight`` process; the cached verdict without one."""
    root, tier = Path(root), resolve_tier(tier)
    if (_cache_dir() / f"{cache_key(root, assignment_id, tier)}.json").is_file():
        return f"preflight {assignment_id} ({tier} tier): passed earlier on this machine (cached)"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    cp = subprocess.run([sys.executable, "-m", "lmcourse.instructor.preflight", str(root), assignment_id, "--tier", tier],
                        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    lines = [line for line in (cp.stdout + "\n" + cp.stderr).splitlines() if line.strip()]
    if cp.returncode == 4 and lines:  # the preflight's own verdict
        raise GraderError(lines[-1])
    if cp.returncode != 0:
        raise GraderError(f"preflight of {assignment_id} ({tier} tier) failed on this machine, so no submission was "
                          f"graded: the grader process stopped (status {cp.returncode})"
                          + (f": {lines[-1][:300]}" if lines else ""))
    return lines[-1] if lines else f"preflight {assignment_id}: passed"


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with the verdict on stdout when the preflight holds (or held, cached); 4 with the reason on stderr."""
    p = argparse.ArgumentParser(prog="python -m lmcourse.instructor.preflight",
                                description="Grade the solution (full marks expected) and the release (0 expected) "
                                            "on this machine.")
    p.add_argument("root", type=Path, help="course root (solutions/, assignments/, autograder/)")
    p.add_argument("assignment")
    p.add_argument("--tier", default="auto", choices=["auto", "cpu", "gpu"])
    args = p.parse_args(argv)
    sys.dont_write_bytecode = True
    try:
        print(preflight(args.root, args.assignment, args.tier))
    except (GraderError, FileNotFoundError) as err:
        print(" ".join(str(err).split()), file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    # Run with -m, this file is __main__: hand over to the package's module (one copy of GraderError).
    from lmcourse.instructor.preflight import main as _main

    sys.exit(_main())
