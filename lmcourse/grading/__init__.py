"""The trusted grader: notebook checks, the sandboxed worker, scoring and reports.

Entry points:

- :func:`grade_notebook` grades one notebook and returns its
  :class:`~lmcourse.grading.result.Result` (written as Gradescope's
  ``results.json`` schema plus ``status``, ``message``, ``cells``);
- ``lmcourse check`` (:mod:`lmcourse.grading.cli`) runs the visible checks for a student;
- :mod:`lmcourse.grading.checks` is what hidden checks are written with.

This package ships to students (``lmcourse check`` runs it on their machine);
grading a cohort (batch, gradebook, Slurm, Gradescope, the leaderboard, the
preflight) sits above it in :mod:`lmcourse.instructor`.

The path of a submission, top-down; no module imports one above it
(``tests/test_layers.py``)::

    cli         lmcourse check
    runner      one notebook: structure -> extraction -> worker -> checks -> `Result`
    causes      root cause first: a check that fails because code it uses fails says so
    report      what students see, read off a `Result` (lmcourse check, feedback.html)
    result      `Result`, `CheckResult`, `Status`: the one type every path returns and writes
    signatures  which known mistake a graded submission looks like, and the hint it then reads ("likely cause")
    bounded     reading a submission in a child process with a memory and time budget
    notebook    reading notebooks defensively, their structure, code extraction
    plugin      the pytest plugin that turns hidden checks into scores
    rules       how the code is written (no built-in RNN, no built-in attention), verified outside the worker
    seq2seq     greedy decoding and the training loop step by step, for the encoder-decoder units
    compare     a student's module against a trusted one, same weights
    training    the contract of a graded training run
    optimizer   the optimiser of a training loop, followed step by step (settings, state, every update)
    layers      PyTorch's own layers (recurrent, attention) behind the assignments' interfaces
    checks      what a hidden check is made of (``check``, ``expect_*``)
    replay      the solution's answers recorded, for the student edition's visible checks
    sandbox/    the worker: plan, bwrap, staging, reaping, messages, limits
    sandbox/inside/  what runs in the worker: protocol, wire, probes, confine, supervisor, cells, main
    kinds       the student's kinds of failure and their status words

Around it: `lmcourse.course` (where an assignment's files live), `lmcourse.files`
(the one atomic writer) and `lmcourse.errors`.
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
