"""The isolated worker that runs untrusted student code: the grader's side of the boundary.

Trusted side of the boundary described in ``shared/guides/architecture.md``::

    with Worker(module_source, limits=Limits(call_timeout=10)) as w:
        print(w.isolation)               # "full: ..." or "partial: ..."
        if w.import_error:                # the module could not be imported
            ...                           # every call raises it too
        value = w.call("ngram_counts", corpus, 3)       # plain data back
        out = w.probe("module_forward", cls="Attention", state_dict=sd, inputs=[x])

Layers
------
* Always: a fresh process in its own session and process group, rlimits
  (CPU seconds, address space or data size, processes, file size, open
  files, no core files), a time limit per call and per worker that is the
  student's own time (`meter`: wall-clock time less the time the worker
  waited for a CPU, and CPU time; a call that reaches its wall-clock fence
  with time left was held up by a busy machine: `Overloaded`, the grader's
  failure, graded again), a cap on captured stdout/stderr, and a protocol on dedicated pipes (`inside.wire`:
  JSON + ``.npy`` without pickle, every reply parsed as untrusted data, one
  request at a time with a random request id).  On x86_64 Linux also a
  seccomp filter installed before the student's module is imported: no new
  namespaces (unshare/setns/clone flags), mounts, ptrace, keyrings, bpf,
  perf events, userfaultfd or io_uring.
* Where the grader may make a control group (root, usually: cgroup v2 with
  ``memory`` and ``pids`` delegated, or v1): every process of the worker is in
  one group from its first instruction, which bounds the memory (no swap) and
  the tasks of the submission as a whole, and counts their CPU time; a process
  the kernel kills for that memory is the student's ``memory`` failure.
  Without one, each process keeps its own limits and the memory of all of them
  together is watched while a call runs; `isolation` says which bound applies.
* Root with a working bubblewrap (``bwrap``): a private PID namespace (killing
  its init kills every process the student started, double-forked or not), a
  private network namespace (only a loopback of its own), private IPC/UTS,
  a fresh unprivileged uid per worker (all capabilities dropped, no new
  privileges), and a filesystem view that holds only /usr, the Python
  install, the venv, the public ``lmcourse`` package and the worker's own
  folder: the course repository (hidden checks, solutions, grades, gradebook,
  other submissions) is not there at all.
* Root without a usable bubblewrap (e.g. an unprivileged container): a
  supervisor that is the subreaper of the worker, a fresh uid, a private
  network namespace when ``unshare(CLONE_NEWNET)`` is allowed; the course
  files are *not* hidden from view (only file permissions protect them:
  ``chmod o-rwx`` the hidden checks), and `isolation` says "partial" with the
  reasons.  If the Python install cannot be read by another uid (e.g. under
  /root), `Worker` raises `SandboxError` rather than run student code as root.
* Not root, with a bubblewrap that can make a user namespace (a grader's
  cluster account, a laptop with bubblewrap): the same namespaces and
  filesystem view as under root, inside a user namespace, keeping the
  caller's uid (RLIMIT_NPROC then counts the caller's own tasks, so the
  worker gets ``max_processes`` on top of those); `isolation` says "full,
  without root". (tests/test_cheats.py runs the whole cheating suite again
  as a uid that is not root.)
* Not root without it (a laptop whose kernel forbids user namespaces,
  ``lmcourse check``): supervisor (subreaper: double-forked orphans come back
  to it and die with it) + process group + rlimits + timeouts; `isolation`
  says "partial" and why.
* ``isolate=False``: the partial layers only (as root: a fresh uid when the
  Python install allows it, else root -- for the caller's own trusted tests).

Import errors
-------------
``Worker(...)`` never raises for the student's faults.  It starts the process
and waits for the module import; a syntax error, an exception, ``sys.exit``
or ``os._exit`` at import, a crash or an import slower than
``Limits.import_timeout`` is recorded in ``worker.import_error`` (a
`StudentError` with kind ``"import-error"``), and every later `call` /
`probe` raises that same error; `has` returns False.  ``Worker(...)`` raises
`SandboxError` only for problems of the grader's own setup (e.g.
``isolate=True`` where full isolation is impossible).

A module extracted from a notebook (its second line lists its cells) is
loaded cell by cell instead (`inside.cells`), as a kernel's "run all" does: a
cell that raises is listed in ``worker.cell_errors`` (its first line, the
line that raised, the exception, the student's lines), what it defined before
that line is kept, and the next cells still run; ``import_error`` stays None
unless the load as a whole fails (the process dies, times out or floods).

Processes
---------
`close()` (also on timeout, crash or garbled reply) kills the PID namespace's
init (full) or lets the supervisor kill every descendant (partial), kills the
process group, then scans /proc for anything left (same PID namespace, the
worker's uid, or the worker's environment marker) and SIGKILLs it until none
is left; `leaked` lists survivors (a RuntimeWarning too; the tests require it
empty) and `alive_pids()` shows the live ones.  If the grader itself dies,
bubblewrap's ``--die-with-parent`` / the supervisor's closed control pipe
take the worker down.

Failures of a call
------------------
Every failure that is the student's raises `StudentError` whose `message` is
meant for the student (no grader internals); a call stopped at its
wall-clock fence raises `Overloaded` (a `SandboxError`), and so does every
later call of that worker: the grade is void, not the student's.  After a timeout, a crash or a
garbled reply the process is killed (whole namespace / group, verified) and
the *next* call starts a fresh one (module imported again), so one broken
function does not cost the points of the others; at most
``Limits.max_restarts`` restarts, and never past ``Limits.total_timeout``.

Modules, top-down (none imports one above it)
---------------------------------------------
- `worker`:    `Worker`, one sandboxed process per submission: lifecycle and transport
- `plan`:      what isolation this machine can give (host capabilities -> `Plan`)
- `bwrap`:     bubblewrap's arguments: the filesystem view the worker gets
- `staging`:   the worker's own folder: boot (the ``inside`` package, the student's module), home, tmp
- `meter`:     a call's own time: CPU and waiting read from /proc, the fence, `Overloaded`
- `cgroups`:   the worker's control group: memory and tasks of the whole submission
- `reaping`:   finding and killing every process a worker left behind
- `messages`:  `StudentError` and the student's words for each worker failure
- `limits`:    `Limits`
- `inside/`:   everything that runs in the worker (protocol, wire, probes, confine, cells, main)
"""

from __future__ import annotations

from .libraries import Libraries
from .limits import Limits
from .messages import SandboxError, StudentError
from .meter import Overloaded
from .plan import isolation_available
from .worker import Worker

__all__ = ["Libraries", "Limits", "Overloaded", "SandboxError", "StudentError", "Worker", "isolation_available"]
