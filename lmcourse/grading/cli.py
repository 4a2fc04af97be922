"""``lmcourse check``: the grader's face for students.

It calls the runner directly (`runner` → `plugin` → `sandbox`), with the visible
checks only, and reads the result with `report`. The instructors' commands
(``lmcourse grade | leaderboard | gradescope``) live in `lmcourse.instructor.cli`,
which is not part of the student edition. Imported by ``lmcourse.cli`` and
imports nothing from it: the errors both share live in `lmcourse.errors`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def known(root: Path, assignment_id: str) -> None:
    """Raise a `CommandError` naming the course's assignments when ``assignment_id`` is not one of them."""
    from lmcourse.course import Course, UnknownAssignment
    from lmcourse.errors import CommandError

    try:
        Course(root).assignment(assignment_id)
    except UnknownAssignment as err:
        raise CommandError(str(err)) from None


def check(root: Path, args: argparse.Namespace) -> int:
    """(students) The notebook's own test cells, the visible checks and what is left to do.

    Exit 0 only when the notebook is ready to submit: nothing left to
    implement, no notebook problem, every visible check and test cell passes.
    """
    from lmcourse.errors import CommandError, GraderError
    from lmcourse.grading.report import check_text, readiness
    from lmcourse.grading.runner import grade as grade_one

    known(root, args.assignment)
    if not args.notebook.exists():
        raise CommandError(f"{args.notebook} does not exist")
    try:
        result = grade_one(root, args.assignment, args.notebook, tier="cpu", visible_only=True, test_cells=True,
                           own_machine=True)
    except (GraderError, FileNotFoundError) as err:
        raise CommandError(str(err)) from None
    print(check_text(result, args.notebook, verbose=getattr(args, "verbose", False)))
    return 0 if readiness(result)["ready"] else 1
