"""The trusted grader: notebook checks, the sandboxed worker, scoring and reports.

Entry points:

- :func:`grade_notebook` grades one notebook and returns its
  :class:`~lmcourse.grading.result.Result` (written as Gradescope's
  ``results.json`` schema plus ``status``, ``message``, ``cells``);
- :mod:`lmcourse.grading.batch` grades a folder of submissions (``lmcourse grade``),
  recording them in nbgrader's gradebook with :mod:`lmcourse.grading.gradebook`;
- :mod:`lmcourse.grading.checks` is what hidden checks are written with;
- :mod:`lmcourse.grading.testing` builds honest and known-wrong submissions for tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lmcourse.grading.result import Result


def grade_notebook(root: Path, assignment_id: str, notebook: Path, *, tier: str = "cpu", **kwargs) -> "Result":
    """Grade ``notebook`` for ``assignment_id`` of the course at ``root``; see :func:`runner.grade`."""
    from lmcourse.grading.runner import grade

    return grade(Path(root), assignment_id, Path(notebook), tier=tier, **kwargs)


__all__ = ["grade_notebook"]
