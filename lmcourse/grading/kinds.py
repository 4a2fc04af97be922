"""The kinds of failure that are the student's, in one place.

The sandbox raises `StudentError` with one of these kinds; the runner locates
their messages in the student's cells and words the submission's status with
them. Anything else that goes wrong (a probe used wrongly, the sandbox not
starting, a check that breaks) is the grader's: never a kind here, never a
grade. The kinds the worker
itself reports, including ``wrong-result`` (which the sandbox reports as
``exception``) and ``probe-error`` (which is the grader's), are
`lmcourse.grading.sandbox.inside.protocol.Kind`.
"""

from __future__ import annotations

# kind -> the words that open the submission's one-line status message
STUDENT_KINDS: dict[str, str] = {
    "missing": "a function the checks need is not defined",
    "exception": "your code raised an error",
    "timeout": "your code ran past its time limit",
    "crashed": "the process running your code stopped unexpectedly",
    "refused-output": "your code returned a value of a type the grader does not accept",
    "import-error": "your code raised an error or did not run when it was loaded",
    "output-too-large": "your code printed more output than allowed",
    "memory": "your code used more memory than allowed",
}

# the kinds that decide a submission's status: a plain exception fails its check only
STATUS_KINDS = tuple(k for k in STUDENT_KINDS if k != "exception")
