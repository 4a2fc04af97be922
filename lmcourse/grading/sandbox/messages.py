"""What the student reads when their code fails in the worker, and what the grader's own failures are.

`StudentError` is the student's failure: its `message` says what was expected,
what was found and what to do, with no grader internals, no hidden inputs and
no names the student's code chose for its own classes (a class could be named
after the hidden inputs it was given). `SandboxError` is the grader's: never a
grade. `from_error_reply` turns the worker's structured error (`inside.protocol`)
into one of them; every field is checked, since the worker is the student's
process.
"""

from __future__ import annotations

import re
import signal

from ..kinds import STUDENT_KINDS
from .inside.protocol import ERROR_FIELDS, Kind, Missing

KINDS = tuple(STUDENT_KINDS)  # what `StudentError.kind` can be (lmcourse.grading.kinds)


class StudentError(Exception):
    """A failure caused by the student's code.

    kind: one of ``missing``, ``exception``, ``timeout``, ``crashed``,
    ``refused-output``, ``import-error``, ``output-too-large``, ``memory``.
    message: for the student: what was expected, what was found, what to do.
    name: the function / probe concerned (None for import errors).
    """

    def __init__(self, kind: str, message: str, *, name: str | None = None) -> None:
        super().__init__(message)
        if kind not in KINDS:
            raise ValueError(f"not a student's kind of failure: {kind!r}")
        self.kind = kind
        self.message = message
        self.name = name

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"StudentError(kind={self.kind!r}, message={self.message!r})"


def probe_label(probe_name: str, kwargs: dict) -> str:
    """What a student recognises in a message about a probe: the class, method or function it runs
    (or the notebook's test cell it runs, by its grade_id)."""
    cls, method, fn, cell = (kwargs.get(k) for k in ("cls", "method", "fn", "cell"))
    if type(cls) is str and type(method) is str:
        return f"{cls}.{method}"
    for name in (fn, cls, cell):
        if type(name) is str and name:
            return name
    return probe_name


class SandboxError(RuntimeError):
    """The grader's own setup cannot provide the requested sandbox (not the student's fault)."""


class GarbledReply(Exception):
    """The worker's reply does not follow the protocol: the worker is killed, the student told."""


def clean(text: str) -> str:
    """Student-controlled text made safe to store and show: valid UTF-8 (a lone surrogate
    becomes U+FFFD) and no control characters but newlines and tabs."""
    text = text.encode("utf-8", "replace").decode("utf-8", "replace")
    return "".join(c if c >= " " or c in "\n\t" else " " for c in text)


# Type names a message may quote: the ones the grader's own modules produce. Any other name was
# chosen by the student's code (a class, perhaps named after the hidden inputs it was given).
_KNOWN_TYPE = re.compile(r"^(?:numpy|torch|collections|builtins|types|decimal|fractions)(?:\.\w+)+$|^(?:"
                         + "|".join(("bool", "int", "float", "complex", "str", "bytes", "bytearray", "list",
                                     "tuple", "dict", "set", "frozenset", "NoneType", "range", "object",
                                     "function", "generator", "module", "type", "method", "Tensor",
                                     "Parameter", "ndarray", "value"))
                         + r")$")


def generic_types(message: str) -> str:
    """``... of type X`` / ``it returned a X`` with X a student-made class name becomes a generic phrase."""
    def swap(m: re.Match) -> str:
        name = m.group(2)
        if _KNOWN_TYPE.match(name):
            return m.group(0)
        return "of a class defined in your code" if m.group(1) == "of type " else \
            f"{m.group(1).split()[0]} an object of a class defined in your code"
    return re.sub(r"((?:of type|returned an?|it is an?) )([\w.<>]+)", swap, message)[:500]


def generic_where(where: str) -> str:
    """Where in a returned value the problem is, without dict keys (the student's code chose them)."""
    where = re.sub(r"\[(?!\d+\])[^\]]*\]", "[…]", where)
    return where[:120] if re.fullmatch(r"[\w \[\]…().-]*", where) else "somewhere inside it"


def fmt_bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# --------------------------------------------------------------------------- #
# The student's words for each failure
# --------------------------------------------------------------------------- #

def while_running(name: str) -> str:
    return "while your code was being imported" if name == "import" else f"while `{name}` was running"


def budget_error(name: str, total_timeout: float) -> StudentError:
    return StudentError("timeout", f"Your code used up its whole time budget for this notebook "
                        f"({total_timeout:g} s), so `{name}` was not run.", name=name)


def timeout_error(name: str, limits, budget_spent: bool, *, seconds: float | None = None, cpu: float | None = None,
                  threads: int = 1, waiting: bool = False) -> StudentError:
    """The call (or import) ran out of its own time (`meter.Clock`), or of its CPU time when `cpu` is given."""
    if name == "import":
        seconds = limits.effective_import_timeout() if seconds is None else seconds
        return StudentError("timeout", f"importing your code did not finish within {seconds:g} seconds. Look for "
                            "loops or long computations at the top level of your solution cells (move them into "
                            "demo cells).")
    if budget_spent:
        return StudentError("timeout", f"Your code used up its whole time budget for this notebook "
                            f"({limits.total_timeout:g} s) {while_running(name)}.", name=name)
    if cpu is not None:
        per = f"{threads} threads × {seconds:g} s" if threads > 1 else f"{seconds:g} s"
        return StudentError("timeout", f"`{name}` did not finish in time: it used {cpu:.0f} s of CPU time, its "
                            f"whole budget for this call ({per}). Look for an infinite loop, or work much slower "
                            "than needed.", name=name)
    limit = f" within {seconds:g} s" if seconds is not None else ""
    why = (" It was waiting most of that time, not computing: a sleep, input(), a lock, or a process it waits for "
           "that never ends." if waiting else " Look for an infinite loop, or work much slower than needed.")
    return StudentError("timeout", f"`{name}` did not finish in time{limit} (its time limit; time the grading "
                        f"machine kept it waiting for a CPU is not counted).{why}", name=name)


def memory_error(name: str, memory_bytes: int) -> StudentError:
    """The kernel stopped a process of the submission: all of them together were over the memory budget."""
    what = "the processes of your code" if name != "import" else "the processes importing your code"
    return StudentError("memory", f"{what[0].upper() + what[1:]} used more than {fmt_bytes(memory_bytes)} of "
                        f"memory together {while_running(name)} (the limit for one submission, all its processes "
                        "counted), so they were stopped. Use less memory: smaller batches or models, fewer "
                        "processes (each one started holds its own copy of what it touches).", name=name)


def exit_reason(rc: int | None, cpu_seconds: int) -> tuple[str, str]:
    """(kind, words) for a worker process that ended with status `rc` (None: it stopped answering)."""
    if rc is None:
        return "crashed", "it stopped answering"
    sig = -rc if rc < 0 else (rc - 128 if rc > 128 else 0)
    if sig == signal.SIGXCPU:
        return "timeout", f"it used more than {cpu_seconds} seconds of CPU time"
    if sig:
        extra = " (this often means it ran out of memory or CPU time)" if sig == signal.SIGKILL else ""
        return "crashed", f"it was killed by {_describe_signal(sig)}{extra}"
    return "crashed", f"it exited with status {rc} (does your code call sys.exit(), os._exit() or kill processes?)"


def dead_error(name: str, kind: str, how: str) -> StudentError:
    if name == "import":
        return StudentError(kind, f"the process importing your code stopped: {how}.")
    return StudentError(kind, f"The process running your code stopped {while_running(name)}: {how}.", name=name)


def garbled_error(name: str) -> StudentError:
    return StudentError("crashed", f"The process running your code sent the grader a malformed reply "
                        f"{while_running(name)} (does your code write to file descriptors it did not open?).",
                        name=name)


def flood_error(name: str, flood_bytes: int) -> StudentError:
    return StudentError("output-too-large", f"`{name}` printed more than {fmt_bytes(flood_bytes)} of "
                        "output. Remove the prints inside your function (or print much less).", name=name)


def cell_errors(hello) -> list[dict]:
    """The cells that raised while the worker loaded a notebook's module, from its hello reply.

    Each is ``{"first", "line", "type", "message", "traceback"}``: the first
    line of the cell and the line that raised, numbered in the module, and the
    exception, as `inside.cells.run_cells` reports it. The reply comes from
    the student's process, so every field is checked and cleaned, and an
    entry of any other shape is dropped: a forged entry can only cost its
    sender points, never earn any (the grader names the cell from its own
    line map).
    """
    items = hello.get("cell_errors") if type(hello) is dict else None
    if type(items) is not list:
        return []
    out = []
    for item in items[:200]:
        if type(item) is not dict or not all(type(item.get(k)) is int for k in ("first", "line")) or \
                not all(type(item.get(k)) is str for k in ("type", "message", "traceback")):
            continue
        out.append({"first": item["first"], "line": item["line"], "type": clean(item["type"][:200]),
                    "message": clean(item["message"][:2000]), "traceback": clean(item["traceback"][:4000])})
    return out


def from_error_reply(payload, name: str | None, limits, importing: bool = False) -> StudentError:
    """The student's error for the worker's error reply (`inside.protocol.error_reply`).

    Raises `SandboxError` for `Kind.PROBE_ERROR` (a check used a probe wrongly: the grader's
    fault, never the student's grade) and `GarbledReply` for a payload outside the protocol."""
    if type(payload) is not dict or not all(type(payload.get(k, "")) is str for k in ERROR_FIELDS):
        raise GarbledReply("malformed error reply")
    try:
        kind = Kind(payload.get("kind", ""))
    except ValueError:
        raise GarbledReply(f"unknown error kind {payload.get('kind', '')[:50]!r}") from None
    etype = clean(payload.get("type", "")[:200])
    msg = clean(payload.get("message", "")[:2000])
    tb = clean(payload.get("traceback", "")[:4000])
    where = f"\nIn your code:\n{tb}" if tb else ""
    if importing or kind is Kind.IMPORT_ERROR:
        what = f"{etype}: {msg}" if etype and not msg.startswith("your code") else msg
        return StudentError("import-error", f"Your code could not be imported: {what}{where}")
    if kind is Kind.MISSING:
        thing = clean(payload.get("name", "")[:200]) or name
        if payload.get("reason") == Missing.NOT_CALLABLE:
            return StudentError("missing", f"`{thing}` is defined in your notebook but it is not a function "
                                f"(it is a {etype or 'value'}).", name=name)
        return StudentError("missing", f"Your notebook does not define `{thing}`. Check the spelling, and "
                            "that it is defined in a solution cell (not a demo cell).", name=name)
    if kind is Kind.REFUSED_OUTPUT:
        at = generic_where(payload.get("where", ""))
        return StudentError("refused-output", f"`{name}` returned {generic_types(msg)}{' at ' + at if at else ''}, "
                            "which the grader does not accept. Return plain data: numbers, strings, lists, "
                            "tuples, dicts, NumPy arrays or torch tensors.", name=name)
    if kind is Kind.OUTPUT_TOO_LARGE:
        return StudentError("output-too-large", f"`{name}` returned a value too large for the grader "
                            f"(more than {fmt_bytes(limits.reply_bytes)}).", name=name)
    if kind is Kind.PROBE_ERROR:
        raise SandboxError(f"a check used the probe for `{name}` wrongly (reported by the worker): {msg[:300]}")
    if kind is Kind.WRONG_RESULT:
        return StudentError("exception", f"`{name}`: {generic_types(msg)}", name=name)
    head = f"{etype}: {msg}" if etype and msg else (etype or msg)          # Kind.EXCEPTION
    if etype == "MemoryError":
        head += f" (it needed more memory than the limit of {fmt_bytes(limits.memory_bytes)})"
    return StudentError("exception", f"`{name}` raised {head}{where}", name=name)


def _describe_signal(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
