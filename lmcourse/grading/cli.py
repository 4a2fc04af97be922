"""``lmcourse grade | check | gradescope``: the command-line faces of the grader."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path


def _known(root: Path, assignment_id: str) -> None:
    from lmcourse.cli import CommandError
    from lmcourse.grading.assign import assignment_ids

    known = assignment_ids(root)
    if assignment_id not in known:
        raise CommandError(f"no assignment '{assignment_id}' in {root / 'solutions'}; known: {', '.join(known) or 'none'}")


def grade(root: Path, args: argparse.Namespace) -> int:
    """Grade a folder of submissions (see :mod:`lmcourse.grading.batch`)."""
    from lmcourse.cli import CommandError
    from lmcourse.grading import batch
    from lmcourse.grading.runner import GraderError, resolve_tier

    _known(root, args.assignment)
    if not args.submissions.is_dir():
        raise CommandError(f"{args.submissions} is not a folder (expected <student>.ipynb or <student>/{args.assignment}/"
                           f"{args.assignment}.ipynb inside)")
    try:
        summary = batch.run(root, args.assignment, args.submissions, args.out, jobs=args.jobs, force=args.force,
                            tier=resolve_tier(args.tier), gradebook=args.gradebook,
                            progress=not getattr(args, "no_progress", False),
                            preflight=not getattr(args, "no_preflight", False))
    except (FileNotFoundError, GraderError) as err:
        raise CommandError(str(err)) from None
    return 1 if summary["grader_errors"] else 0


def check(root: Path, args: argparse.Namespace) -> int:
    """(students) Structure check and visible checks, printed as what is wrong and where."""
    from lmcourse.cli import CommandError
    from lmcourse.grading.runner import GraderError, grade as grade_one

    _known(root, args.assignment)
    if not args.notebook.exists():
        raise CommandError(f"{args.notebook} does not exist")
    try:
        result = grade_one(root, args.assignment, args.notebook, tier="cpu", visible_only=True)
    except (GraderError, FileNotFoundError) as err:
        raise CommandError(str(err)) from None
    print(report_text(result, args.notebook))
    return 0 if result["status"] == "ok" and result["score"] == result["max_score"] else 1


def report_text(result: dict, notebook: Path) -> str:
    out = [f"lmcourse check {result['assignment']} {notebook}"]
    iso = str(result.get("isolation", ""))
    out.append(f"isolation: {iso}" + ("" if iso.startswith("full") else
               "  (partial: run as root for a separate user and no network; your own machine is fine for checking)"
               if "partial" in iso else ""))
    if result["problems"]:
        out.append("notebook problems:")
        for p in result["problems"]:
            mark = "!" if p.get("warning") else "✗"  # a warning costs nothing: say so by its mark
            out.append(f"  {mark} [{p['status']}] " + (f"cell '{p['cell']}': " if p.get("cell") else "") + p["message"])
    elif result["status"] != "ok":
        out.append(f"  ✗ [{result['status']}] {result['message']}")
    else:
        out.append("notebook structure: ok")
    out.append("visible checks:")
    for t in result["tests"]:
        mark = "✓" if t["status"] == "passed" else "✗"
        where = f"cell '{t['cell']}'" + (f", function {t['function']}" if t.get("function") else "")
        out.append(f"  {mark} {t['name']}  [{t['score']:g}/{t['max_score']:g}]  ({where})")
        if t["status"] != "passed" and t["output"]:
            for line in t["output"].splitlines():  # keep the message's own lines (a traceback of your code)
                out.append(textwrap.fill(line, 100, initial_indent="      ", subsequent_indent="        ")
                           if line.strip() else "")
    out.append(f"visible checks: {result['score']:g} / {result['max_score']:g} points")
    if result.get("not_run"):
        out.append(f"{result['not_run']} hidden check(s) run when your work is graded; passing the visible ones "
                   "does not guarantee them")
    return "\n".join(out)


def gradescope(root: Path, args: argparse.Namespace) -> int:
    """Build the Gradescope autograder zip (see :mod:`lmcourse.grading.gradescope`)."""
    from lmcourse.grading import gradescope as gs

    _known(root, args.assignment)
    path = gs.build(root, args.assignment, args.out)
    print(f"{args.assignment}: Gradescope autograder written to {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `lmcourse` command")
