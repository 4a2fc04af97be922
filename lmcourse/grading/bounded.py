"""Reading a submission in a child process with a memory and time budget.

A notebook is untrusted input, and the trusted grader must not be at its
mercy: JSON of many tiny objects, or an answer cell of a million short lines
handed to ``ast.parse``, can cost hundreds of times the file's size in memory
(a 5 MiB notebook took the trusted process to 1.3 GiB). So the work that
grows with the submission (JSON parsing, the structure check, parsing every
answer cell) runs in a forked child whose address space and CPU time are
capped; only the small result comes back, as JSON on a pipe.

Outcomes, and whose they are:

- the child finishes: its result (or the `NotebookError` it found);
- the child runs out of memory, CPU time or wall-clock time, or recurses too
  deeply: the *submission* is too large or too deep to read
  (``NotebookError("too-large", ...)``): the student's input did it;
- the child fails in any other way (an exception in our own code, a crash,
  a stall with the CPU idle): `BoundedError`, which the runner turns into
  ``grader-error``: never a grade.

The function run in the child must use only modules already imported by the
parent: a fork copies one thread, and a lock another thread held at that
moment (the import lock, say) is never released in the child.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import time
import traceback
from collections.abc import Callable

from lmcourse.grading.notebook import NotebookError

MEMORY_BYTES = 1 << 30      # address space the child may add to what the parent already maps
CPU_SECONDS = 60
WALL_SECONDS = 90.0
_EXIT_OK, _EXIT_LIMIT = 0, 3


class BoundedError(RuntimeError):
    """The bounded child failed for a reason that is not the submission's (a grader failure)."""


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _child(fn: Callable, args: tuple, write_fd: int, memory_bytes: int, cpu_seconds: int) -> None:
    code = 1
    try:
        base = _vm_size()
        if base:
            resource.setrlimit(resource.RLIMIT_AS, (base + memory_bytes, base + memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
        try:
            payload = {"ok": fn(*args)}
            code = _EXIT_OK
        except NotebookError as err:
            payload = {"notebook_error": [err.status, err.message]}
            code = _EXIT_OK
        except (MemoryError, RecursionError) as err:
            payload = {"limit": type(err).__name__}
            code = _EXIT_LIMIT
        except BaseException as err:  # our own failure: say what, for the instructor
            tb = traceback.extract_tb(err.__traceback__)[-1:]
            where = f" at {tb[0].filename.rsplit('/', 1)[-1]}:{tb[0].lineno}" if tb else ""
            payload = {"error": f"{type(err).__name__}: {err}{where}"[:2000]}
        data = json.dumps(payload).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view):]
    except MemoryError:
        code = _EXIT_LIMIT
    except BaseException:
        pass
    finally:
        os._exit(code)


def _runnable_wait(pid: int) -> float:
    """Seconds `pid` spent ready to run but waiting for a CPU (Linux's schedstat; 0.0 where it cannot tell)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def run(fn: Callable, *args, what: str = "the notebook", memory_bytes: int = MEMORY_BYTES,
        cpu_seconds: int = CPU_SECONDS, wall_seconds: float = WALL_SECONDS):
    """``fn(*args)`` in a forked child with capped memory and time; its JSON-able result.

    Raises `NotebookError` (the child's own, or ``too-large`` when a limit was
    hit) or `BoundedError` (a failure of the grader's own code or setup).
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(fn, args, write_fd, memory_bytes, cpu_seconds)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + wall_seconds
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_fd)
        waited = 0.0
        if timed_out:
            waited = _runnable_wait(pid)
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    too_large = NotebookError(
        "too-large", f"{what} takes more than the grader's budget to read ({memory_bytes >> 20} MiB of memory, "
        f"{cpu_seconds} s): a notebook is expected to hold short answer cells. Remove huge or generated "
        "cells and outputs, then save and submit again")
    if timed_out:
        # Out of wall-clock time. A child that was working hard was given too much to read; one that
        # hardly ran was stuck on something of ours (a lock held at fork time), not on the notebook.
        # (a child that waited for a CPU, on a loaded machine, was working too: its wait counts as work)
        if usage.ru_utime + usage.ru_stime + waited < 0.5 * wall_seconds:
            raise BoundedError(f"reading {what} stalled in the grader's own child process "
                               f"({usage.ru_utime + usage.ru_stime:.1f} s of CPU and {waited:.1f} s waiting for one "
                               f"in {wall_seconds:g} s)")
        raise too_large
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    if code == _EXIT_LIMIT or sig in (signal.SIGXCPU, signal.SIGKILL):
        raise too_large
    try:
        payload = json.loads(b"".join(chunks).decode())
    except (ValueError, UnicodeDecodeError):
        why = f"signal {sig}" if sig else f"exit status {code}"
        raise BoundedError(f"reading {what} failed in the grader's own code ({why}, no result)") from None
    if "error" in payload:
        raise BoundedError(f"reading {what} failed in the grader's own code: {payload['error']}")
    if "notebook_error" in payload:
        raise NotebookError(*payload["notebook_error"])
    return payload["ok"]
