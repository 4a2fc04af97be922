"""What the grader and its worker agree on: operations, reply tags, error kinds, exit codes.

Both sides import this module: the grader as
``lmcourse.grading.sandbox.inside.protocol``, the worker as a module of its
copied ``inside`` package. It is the only place where either side names a
string or a number that the other one reads, so a kind added here is seen
by both, and a typo is an ``AttributeError`` instead of a silent mismatch.

An error crosses the boundary as structured fields (`error_reply`), never as
text for the other side to parse. The worker is the student's process, so
the grader still validates every field it receives (`ERROR_FIELDS`).

Standard library only: this file runs in the worker before the student's
code is imported.
"""

from __future__ import annotations

import enum


class Op(str, enum.Enum):
    """What the grader asks the worker to do."""
    CALL = "call"      # call the student's function with plain data
    PROBE = "probe"    # run a trusted probe (`probes.PROBES`) next to the student's module
    HAS = "has"        # whether the student's module defines a name


class Tag(str, enum.Enum):
    """The first word of every reply."""
    OK = "ok"
    ERROR = "error"


class Kind(str, enum.Enum):
    """Why the worker answered with an error. The grader turns each into a student's message
    (`lmcourse.grading.sandbox.messages`) except `PROBE_ERROR`, which is the grader's own fault."""
    IMPORT_ERROR = "import-error"          # the module raised (or exited) while being imported
    MISSING = "missing"                    # the name is not defined, or not callable (`reason`)
    EXCEPTION = "exception"                # the student's code raised
    WRONG_RESULT = "wrong-result"          # a probe found the student's object of the wrong kind
    REFUSED_OUTPUT = "refused-output"      # the returned value is not plain data (`where`: in it)
    OUTPUT_TOO_LARGE = "output-too-large"  # the returned arrays are over the reply cap
    PROBE_ERROR = "probe-error"            # a check called a probe wrongly: never a grade


class Missing(str, enum.Enum):
    """`reason` of a `Kind.MISSING` error."""
    UNDEFINED = "undefined"
    NOT_CALLABLE = "not-callable"


# The fields of an error reply, all strings; the grader refuses a reply with any other type.
ERROR_FIELDS = ("kind", "type", "message", "traceback", "where", "name", "reason")


def error_reply(kind: Kind, *, type: str = "", message: str = "", traceback: str = "", where: str = "",
                name: str = "", reason: str = "") -> dict:
    """The payload of an error reply (`Tag.ERROR`)."""
    return {"kind": Kind(kind).value, "type": type[:200], "message": message[:4000],
            "traceback": traceback[:8000], "where": where[:500], "name": name[:200], "reason": reason[:50]}


# Exit statuses of a worker that failed while setting itself up, before any student code ran:
# the grader reports them as its own failure (`SandboxError`), never as the student's crash.
EXIT_NO_NETWORK_NAMESPACE = 97   # the supervisor could not unshare its network
EXIT_PRIVILEGES_KEPT = 98        # the worker could not drop to its fresh uid (or could regain root)
SETUP_EXIT_CODES = (EXIT_NO_NETWORK_NAMESPACE, EXIT_PRIVILEGES_KEPT)
