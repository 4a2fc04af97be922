"""Errors shared across layers, so that every module imports downwards, never the one that uses it.

`CommandError` is what every command raises for an expected failure; the
command modules (``lmcourse.cli``, ``lmcourse.grading.cli``, ``lmcourse.instructor.cli``) import it from
here, never from a command module above them. `GraderError` is the grader's own failure: the
course layout (``lmcourse.course``) raises it for a reference solution that
does not import, the runner for a missing check, preflight for a solution that
loses points, and the commands turn it into a `CommandError`.
"""


class CommandError(Exception):
    """An expected failure of a command: printed as one line, exit status 1, no traceback."""


class GraderError(Exception):
    """The grader itself is misconfigured (missing checks, broken check file): not the student's fault."""
