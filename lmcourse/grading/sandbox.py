"""The isolated worker that runs untrusted student code.

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
  files, no core files), a wall-clock timeout per call and per worker, a cap
  on captured stdout/stderr, and a protocol on dedicated pipes (``wire.py``:
  JSON + ``.npy`` without pickle, every reply parsed as untrusted data, one
  request at a time with a random request id).  On x86_64 Linux also a
  seccomp filter installed before the student's module is imported: no new
  namespaces (unshare/setns/clone flags), mounts, ptrace, keyrings, bpf,
  perf events, userfaultfd or io_uring.
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
* Not root (a student's laptop, ``lmcourse check``): supervisor (subreaper:
  double-forked orphans come back to it and die with it) + process group +
  rlimits + timeouts; `isolation` says "partial" and why.
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
meant for the student (no grader internals).  After a timeout, a crash or a
garbled reply the process is killed (whole namespace / group, verified) and
the *next* call starts a fresh one (module imported again), so one broken
function does not cost the points of the others; at most
``Limits.max_restarts`` restarts, and never past ``Limits.total_timeout``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import wire
from .kinds import STUDENT_KINDS

__all__ = ["Limits", "SandboxError", "StudentError", "Worker", "isolation_available"]

_HERE = Path(__file__).resolve().parent
_PACKAGE_DIR = _HERE.parent                      # lmcourse/
_SANDBOX_BOOT = "/sandbox/boot"
_SANDBOX_HOME = "/sandbox/home"
_UID_RANGE = (200_000, 900_000)

_SECCOMP_SUPPORTED = sys.platform.startswith("linux") and os.uname().machine == "x86_64"

KINDS = tuple(STUDENT_KINDS)  # what `StudentError.kind` can be (lmcourse.grading.kinds)


class StudentError(Exception):
    """A failure caused by the student's code.

    kind: one of ``missing``, ``exception``, ``timeout``, ``crashed``,
    ``refused-output``, ``import-error``, ``output-too-large``.
    message: for the student: what was expected, what was found, what to do.
    name: the function / probe concerned (None for import errors).
    detail: extra text for instructors' logs (exception type, traceback of the
    student's own lines); never grader internals either.
    """

    def __init__(self, kind: str, message: str, *, name: str | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.name = name
        self.detail = detail

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"StudentError(kind={self.kind!r}, message={self.message!r})"


def _probe_label(probe_name: str, kwargs: dict) -> str:
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


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60            # RLIMIT_CPU of one worker process
    memory_bytes: int = 4 << 30      # RLIMIT_AS (RLIMIT_DATA when a GPU is exposed)
    max_processes: int = 64          # RLIMIT_NPROC budget of the worker's uid (threads count)
    file_size_bytes: int = 64 << 20  # RLIMIT_FSIZE
    open_files: int = 256            # RLIMIT_NOFILE
    call_timeout: float = 30.0       # wall clock per call
    total_timeout: float = 600.0     # wall clock per Worker, restarts included
    output_bytes: int = 64 << 10     # captured stdout+stderr kept (the rest is counted, dropped)
    # additions
    import_timeout: float | None = None   # wall clock for start + import; None: max(call_timeout, 30)
    flood_bytes: int = 8 << 20            # more output than this during one call fails it
    reply_bytes: int = 512 << 20          # arrays in one reply, all together
    max_restarts: int = 3                 # fresh processes after a timeout / crash
    threads: int = 0                      # OMP/MKL/torch threads; 0: min(4, cpu count)
    memory_rlimit: str = "auto"           # "as", "data" or "auto" (data when a GPU is exposed)
    gpu: bool | None = None               # expose /dev/nvidia*; None: when present

    def effective_import_timeout(self) -> float:
        return self.import_timeout if self.import_timeout is not None else max(self.call_timeout, 30.0)


# --------------------------------------------------------------------------- #
# What isolation this machine can give
# --------------------------------------------------------------------------- #

@dataclass
class _Plan:
    mode: str                   # "bwrap" | "supervised"
    uid: int | None = None      # drop to this uid (root only)
    unshare_net: bool = False
    description: str = ""
    bwrap: str | None = None


_CACHE: dict = {}


def _bwrap_status() -> tuple[bool, str]:
    """(usable, version or reason), checked once per process."""
    if "bwrap" in _CACHE:
        return _CACHE["bwrap"]
    exe = shutil.which("bwrap")
    if exe is None:
        result = (False, "bubblewrap (bwrap) is not installed")
    else:
        try:
            cp = subprocess.run(
                [exe, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
                 "--new-session", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=20, text=True)
            if cp.returncode == 0:
                ver = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
                result = (True, ver or "bubblewrap")
            else:
                result = (False, f"bubblewrap cannot create namespaces here: {cp.stderr.strip()[:200]}")
        except (OSError, subprocess.SubprocessError) as exc:
            result = (False, f"bubblewrap failed to run: {exc}")
    _CACHE["bwrap"] = result
    return result


def _netns_status() -> bool:
    if "netns" not in _CACHE:
        code = "import ctypes,sys; l=ctypes.CDLL(None); sys.exit(0 if l.unshare(0x40000000)==0 else 1)"
        try:
            _CACHE["netns"] = subprocess.run([sys.executable, "-I", "-c", code], timeout=20,
                                             capture_output=True).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _CACHE["netns"] = False
    return _CACHE["netns"]


def _reachable_by_others(path: Path) -> bool:
    """True when every ancestor of `path` can be traversed by any uid."""
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        try:
            if not os.stat(d).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _allocate_uid() -> int:
    used = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                used.add(os.stat(f"/proc/{name}").st_uid)
            except OSError:
                pass
    while True:
        uid = _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])
        if uid not in used:
            return uid


def isolation_available() -> str:
    """What `Worker(isolate=None)` would give on this machine (for `lmcourse check` output)."""
    return _plan(None, force_no_bwrap=False, allocate=False).description


def _plan(isolate: bool | None, *, force_no_bwrap: bool, allocate: bool = True, secrets=None) -> _Plan:
    common = "own process group and session, rlimits, timeouts"
    python_reachable = _reachable_by_others(Path(sys.base_prefix)) and _reachable_by_others(Path(sys.prefix))
    if isolate is False:
        if os.geteuid() == 0 and python_reachable:
            uid = _allocate_uid() if allocate else 0
            return _Plan("supervised", uid=uid, description=f"partial: isolation turned off by the caller; "
                         f"uid {uid if allocate else 'N'}; {common}; no private network, the course files "
                         "are readable")
        who = "as root, " if os.geteuid() == 0 else ""
        return _Plan("supervised", description=f"partial: isolation turned off by the caller; {who}{common}; "
                     "no private network, the course files are readable")
    if os.geteuid() != 0:
        if isolate:
            raise SandboxError("full isolation needs root (a private uid, network and filesystem view)")
        return _Plan("supervised", description=f"partial: not root (uid {os.geteuid()}); {common}; the student "
                     "code runs as you, with network access, and can read the course files")
    uid = _allocate_uid() if allocate else 0
    ok, info = (False, "disabled for this worker") if force_no_bwrap else _bwrap_status()
    if ok:
        return _Plan("bwrap", uid=uid, bwrap=shutil.which("bwrap"),
                     description=f"full: uid {uid if allocate else 'N (fresh per worker)'}, private network, "
                     f"private PID namespace, private filesystem view ({info}); {common}")
    if isolate:
        raise SandboxError(f"full isolation is not available: {info}")
    if not python_reachable:
        # Never run untrusted code as root implicitly: kill(-1) alone would end every process here.
        raise SandboxError(
            f"refusing to run student code as root: {info}, and the Python install ({sys.base_prefix}) "
            "is not readable by other users, so the worker cannot switch to an unprivileged uid. Install "
            "bubblewrap, make Python readable by others, or run the grader as a normal user.")
    layers = [f"uid {uid if allocate else 'N (fresh per worker)'}"]
    net = _netns_status()
    layers.append("private network" if net else "network NOT isolated (no network namespace allowed)")
    exposed = [str(p) for p in (secrets or []) if _reachable_by_others(p)]
    files = (f"the course files are NOT hidden ({', '.join(exposed)} readable by any uid: chmod o-rwx them)"
             if exposed else "the course files are NOT hidden from view, but file permissions keep the "
             "hidden checks and solutions unreadable for that uid")
    return _Plan("supervised", uid=uid, unshare_net=net,
                 description=f"partial: root, but {info}; {', '.join(layers)}; {files}; {common}")


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #

class _Capture(threading.Thread):
    """Drains the student's stdout/stderr pipe: keeps the first `cap` bytes, counts all."""

    def __init__(self, fd: int, cap: int, sink: bytearray, lock: threading.Lock, counter: list) -> None:
        super().__init__(daemon=True, name="lmcourse-sandbox-output")
        self.fd, self.cap, self.sink, self.lock, self.counter = fd, cap, sink, lock, counter

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except OSError:
                break
            if not chunk:
                break
            with self.lock:
                self.counter[0] += len(chunk)
                room = self.cap - len(self.sink)
                if room > 0:
                    self.sink.extend(chunk[:room])


def _proc_entries():
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if name.isdigit() and int(name) != os.getpid():
            yield int(name)


def _uid_of(pid: int) -> int | None:
    """Real uid of a live process; None for zombies (already dead, nothing left to kill)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _count_tasks_of_uid(uid: int) -> int:
    n = 0
    for pid in _proc_entries():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return n


def _grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """Bigger pipe buffers: fewer context switches per large array (Linux only, best effort)."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError):
        pass


def _describe_signal(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _clean(text: str) -> str:
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


def _generic_types(message: str) -> str:
    """``... of type X`` / ``it returned a X`` with X a student-made class name becomes a generic phrase."""
    def swap(m: re.Match) -> str:
        name = m.group(2)
        if _KNOWN_TYPE.match(name):
            return m.group(0)
        return "of a class defined in your code" if m.group(1) == "of type " else \
            f"{m.group(1).split()[0]} an object of a class defined in your code"
    return re.sub(r"((?:of type|returned an?|it is an?) )([\w.<>]+)", swap, message)[:500]


def _generic_where(where: str) -> str:
    """Where in a returned value the problem is, without dict keys (the student's code chose them)."""
    where = re.sub(r"\[(?!\d+\])[^\]]*\]", "[…]", where)
    return where[:120] if re.fullmatch(r"[\w \[\]…().-]*", where) else "somewhere inside it"


def _fmt_bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# --------------------------------------------------------------------------- #
# The worker
# --------------------------------------------------------------------------- #

class Worker:
    """One sandboxed process (restarted when needed) serving one submission.

    module_source: the extracted student code, imported as module ``submission``.
    limits: see `Limits`.
    isolate: True (full isolation or `SandboxError`), False (partial layers only),
             None (full when root and available, partial otherwise; see `isolation`).
    extra_files: ``{relative name: bytes}`` written into the worker's own
             working directory (data the student code may read).
    """

    def __init__(self, module_source: str, *, limits: Limits = Limits(), isolate: bool | None = None,
                 extra_files: dict[str, bytes] | None = None, secret_dirs=(),
                 _force_no_bwrap: bool = False) -> None:
        if not isinstance(module_source, str):
            raise TypeError("module_source must be str")
        self.limits = limits
        # Folders the worker must never see, as the caller names them (the grader: the course's hidden
        # checks and solutions, `lmcourse.course.Course.secret_dirs`); this module knows no layout.
        self._secrets = sorted({Path(os.path.realpath(p)) for p in secret_dirs if Path(p).exists()})
        self._plan = _plan(isolate, force_no_bwrap=_force_no_bwrap, secrets=self._secrets)
        self._lock = threading.RLock()
        self._out = bytearray()
        self._out_lock = threading.Lock()
        self._out_total = [0]
        self._proc: subprocess.Popen | None = None
        self._closed = False
        self._starts = 0
        self.import_error: StudentError | None = None
        self.names: tuple[str, ...] = ()
        self.leaked: list[int] = []        # pids that survived a kill (should stay empty)
        self._seccomp = False
        self._token = secrets.token_hex(16)
        self._deadline = time.monotonic() + limits.total_timeout
        self._dir = Path(tempfile.mkdtemp(prefix="lmcourse-sbx-"))
        try:
            self._prepare_files(module_source, extra_files or {})
            self._start()
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------- public

    @property
    def isolation(self) -> str:
        text = self._plan.description
        if self._seccomp:
            text += "; seccomp filter (no new namespaces, mounts, ptrace, keyrings, bpf, io_uring)"
        return text

    @property
    def captured_output(self) -> str:
        with self._out_lock:
            text = bytes(self._out).decode("utf-8", errors="replace")
            dropped = self._out_total[0] - len(self._out)
        if dropped > 0:
            text += f"\n[... {_fmt_bytes(dropped)} more output not shown]"
        return text

    @property
    def workdir(self) -> Path:
        """The worker's own folder on this machine (home/, tmp/, boot/); removed by close()."""
        return self._dir

    def call(self, name: str, *args, timeout: float | None = None, **kwargs):
        """Call the student's ``name(*args, **kwargs)``; plain data in, plain data out."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"not a function name: {name!r}")
        return self._request("call", name, {"name": name, "args": tuple(args), "kwargs": dict(kwargs)}, timeout)

    def call_with(self, name: str, args: tuple | list = (), kwargs: dict | None = None, *,
                  timeout: float | None = None):
        """Like `call`, for keyword arguments that clash with ``timeout`` or ``name``."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"not a function name: {name!r}")
        return self._request("call", name, {"name": name, "args": tuple(args), "kwargs": dict(kwargs or {})},
                             timeout)

    def probe(self, probe_name: str, *, timeout: float | None = None, **kwargs):
        """Run the trusted probe ``probes.<probe_name>(student_module, **kwargs)`` in the worker."""
        if not isinstance(probe_name, str) or not probe_name.isidentifier():
            raise ValueError(f"not a probe name: {probe_name!r}")
        from . import probes
        if probe_name not in probes.PROBES:
            raise ValueError(f"unknown probe {probe_name!r}")
        return self._request("probe", _probe_label(probe_name, kwargs),
                             {"name": probe_name, "args": (), "kwargs": dict(kwargs)}, timeout)

    def has(self, name: str) -> bool:
        """Whether the student module defines `name` (False after an import error)."""
        if self.import_error is not None:
            return False
        try:
            got = self._request("has", name, {"name": str(name)}, None)
        except StudentError:
            return name in self.names
        return got is True

    def close(self) -> None:
        """Kill every process of this worker (verified), then remove its folder. Idempotent."""
        with self._lock:
            self._closed = True
            self._kill()
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    # ----------------------------------------------------------------- files

    def _prepare_files(self, source: str, extra: dict[str, bytes]) -> None:
        d = self._dir
        boot, home, tmp = d / "boot", d / "home", d / "tmp"
        for p in (boot, home, tmp, boot / "etc"):
            p.mkdir()
        shutil.copyfile(_HERE / "_worker_main.py", boot / "lmc_worker.py")
        shutil.copyfile(_HERE / "wire.py", boot / "lmc_wire.py")
        shutil.copyfile(_HERE / "probes.py", boot / "lmc_probes.py")
        (boot / "submission.py").write_text(source, encoding="utf-8")
        uid = self._plan.uid if self._plan.uid is not None else os.getuid()
        gid = uid if self._plan.uid is not None else os.getgid()
        (boot / "etc" / "passwd").write_text(
            f"root:x:0:0:root:/root:/usr/sbin/nologin\nstudent:x:{uid}:{gid}:student:{_SANDBOX_HOME}:/usr/sbin/nologin\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        (boot / "etc" / "group").write_text(f"root:x:0:\nstudent:x:{gid}:\nnogroup:x:65534:\n")
        (boot / "etc" / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
        for name, data in extra.items():
            rel = Path(name)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ValueError(f"extra file name must be a relative path inside the folder: {name!r}")
            target = home / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(bytes(data))
        for sub in (".cache", ".config"):
            (home / sub).mkdir(exist_ok=True)
        os.chmod(d, 0o711)
        for root, dirs, files in os.walk(boot):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        if self._plan.uid is not None:
            for root, dirs, files in os.walk(home):
                os.chown(root, uid, gid)
                for f in files:
                    os.chown(os.path.join(root, f), uid, gid)
            os.chown(tmp, uid, gid)
            os.chmod(home, 0o700)
            os.chmod(tmp, 0o700)

    # ----------------------------------------------------------------- start

    def _rlimits(self) -> dict:
        lim = self.limits
        mem_kind = lim.memory_rlimit
        if mem_kind == "auto":
            mem_kind = "data" if self._gpu() else "as"
        nproc = lim.max_processes
        if self._plan.uid is None and os.geteuid() != 0:
            # RLIMIT_NPROC counts every task of the uid: give a budget on top of what already runs.
            nproc += _count_tasks_of_uid(os.geteuid())
        return {
            "RLIMIT_CPU": [lim.cpu_seconds, lim.cpu_seconds + 5],
            "RLIMIT_AS" if mem_kind == "as" else "RLIMIT_DATA": [lim.memory_bytes, lim.memory_bytes],
            "RLIMIT_NPROC": [nproc, nproc],
            "RLIMIT_FSIZE": [lim.file_size_bytes, lim.file_size_bytes],
            "RLIMIT_NOFILE": [lim.open_files, lim.open_files],
            "RLIMIT_CORE": [0, 0],
        }

    def _gpu(self) -> bool:
        if self.limits.gpu is not None:
            return self.limits.gpu
        return os.path.exists("/dev/nvidiactl")

    def _env(self, home: str, tmp: str) -> dict:
        threads = self.limits.threads or min(4, os.cpu_count() or 1)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": tmp, "USER": "student",
            "LOGNAME": "student", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": f"{home}/.config/matplotlib", "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_CONFIG_HOME": f"{home}/.config", "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
            "TORCHINDUCTOR_CACHE_DIR": f"{home}/.cache/torchinductor", "LMCOURSE_SANDBOX": "1",
            "LMCOURSE_SANDBOX_TOKEN": self._token,
        }
        for key in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
            if key in os.environ:
                env[key] = os.environ[key]
        return env

    def _bind_sources(self) -> list[str]:
        """Host folders the worker reads (Python install, venv, public lmcourse package)."""
        paths: list[Path] = []
        for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(os.path.realpath(sys.executable))):
            paths.append(Path(os.path.realpath(p)))
        paths.append(_PACKAGE_DIR)
        try:
            import site
            paths.extend(Path(os.path.realpath(p)) for p in site.getsitepackages())
        except Exception:
            pass
        out: list[Path] = []
        for p in sorted(set(paths), key=lambda x: len(x.parts)):
            if not p.exists() or str(p) in ("/", "/usr") or str(p).startswith("/usr/"):
                continue
            if any(p == q or q in p.parents for q in out):
                continue
            for secret in self._secrets:
                if p == secret or p in secret.parents:
                    raise SandboxError(f"refusing to expose {p} to the worker: it contains {secret}")
            out.append(p)
        return [str(p) for p in out]

    def _bwrap_command(self, python_args: list[str], info_fd: int) -> list[str]:
        d = self._dir
        cmd = [self._plan.bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--info-fd", str(info_fd),
               "--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            p = Path("/") / name
            if p.is_symlink():
                cmd += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                cmd += ["--ro-bind", str(p), str(p)]
        cmd += ["--dir", "/etc"]
        for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "nsswitch.conf"):
            p = Path("/etc") / name
            if p.exists():
                cmd += ["--ro-bind", str(p), str(p)]
        for name in ("passwd", "group", "hosts"):
            cmd += ["--ro-bind", str(d / "boot" / "etc" / name), f"/etc/{name}"]
        # /dev/shm: multiprocessing's semaphores need it; a small private tmpfs (RAM, so capped)
        cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(64 << 20),
                "--tmpfs", "/dev/shm"]
        if self._gpu():
            for dev in sorted(Path("/dev").glob("nvidia*")):
                cmd += ["--dev-bind", str(dev), str(dev)]
            cmd += ["--ro-bind", "/sys", "/sys"]
        # The private /tmp first: a venv or package that lives under the host's /tmp is bound on top
        # of it below (the other way round, the private /tmp would hide the interpreter).
        cmd += ["--bind", str(d / "tmp"), "/tmp"]
        made = {"/", "/etc", "/usr", "/proc", "/dev", "/tmp"}
        for src in self._bind_sources():
            for anc in reversed(Path(src).parents):
                if str(anc) not in made:
                    made.add(str(anc))
                    cmd += ["--perms", "0755", "--dir", str(anc)]
            cmd += ["--ro-bind", src, src]
            made.add(src)
        cmd += ["--perms", "0755", "--dir", "/sandbox",
                "--ro-bind", str(d / "boot"), _SANDBOX_BOOT,
                "--bind", str(d / "home"), _SANDBOX_HOME,
                "--chdir", _SANDBOX_HOME, "--"]
        return cmd + python_args

    def _start(self) -> None:
        if self._closed:
            raise StudentError("crashed", "the grader already closed this submission's worker")
        self._starts += 1
        plan = self._plan
        d = self._dir
        hello_id = secrets.token_hex(16)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        for fd in (req_w, rep_w):
            _grow_pipe(fd)
        child_fds = [req_r, rep_w]
        ctl_r = ctl_w = info_r = info_w = None
        if plan.mode == "bwrap":
            info_r, info_w = os.pipe()
            child_fds.append(info_w)
            home, tmp, boot = _SANDBOX_HOME, "/tmp", _SANDBOX_BOOT
        else:
            ctl_r, ctl_w = os.pipe()
            child_fds.append(ctl_r)
            home, tmp, boot = str(d / "home"), str(d / "tmp"), str(d / "boot")
        boot_id = secrets.token_hex(16)
        config = {
            "request_fd": req_r, "reply_fd": rep_w, "control_fd": ctl_r, "home": home, "hello_id": hello_id,
            "boot_id": boot_id,
            "uid": plan.uid, "gid": plan.uid, "rlimits": self._rlimits(), "unshare_net": plan.unshare_net,
            # where the grader's own lmcourse lives: the worker falls back to it when lmcourse is not
            # installed in the interpreter (a checkout on PYTHONPATH, which the worker's -I ignores)
            "package_parent": str(_PACKAGE_DIR.parent),
        }
        cfg_name = f"config-{self._starts}.json"
        (d / "boot" / cfg_name).write_text(json.dumps(config))
        os.chmod(d / "boot" / cfg_name, 0o644)
        worker_py = f"{boot}/lmc_worker.py"
        if plan.mode == "bwrap":
            cmd = self._bwrap_command([sys.executable, "-I", worker_py, f"{boot}/{cfg_name}"], info_w)
        else:
            cmd = [sys.executable, "-I", worker_py, "--supervise", f"{boot}/{cfg_name}"]
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w,
                                    pass_fds=child_fds, start_new_session=True, env=self._env(home, tmp),
                                    cwd=str(d / "home"), close_fds=True)
        except OSError as exc:
            for fd in (req_r, req_w, rep_r, rep_w, out_r, out_w, ctl_r, ctl_w, info_r, info_w):
                if fd is not None:
                    os.close(fd)
            raise SandboxError(f"cannot start the worker: {exc}") from exc
        for fd in child_fds + [out_w]:
            os.close(fd)
        self._proc = proc
        self._req_w, self._rep_r, self._ctl_w = req_w, rep_r, ctl_w
        os.set_blocking(req_w, False)
        os.set_blocking(rep_r, False)
        self._reader = wire.FrameReader(rep_r, caps=wire.Caps(max_array_bytes=self.limits.reply_bytes))
        self._capture = _Capture(out_r, self.limits.output_bytes, self._out, self._out_lock, self._out_total)
        self._capture_fd = out_r
        self._capture.start()
        self._ns = None
        self._init_pid = None
        start_deadline = min(time.monotonic() + self.limits.effective_import_timeout(), self._deadline)
        if info_r is not None:
            self._read_bwrap_info(info_r, start_deadline)
        self._booted = False
        try:
            self._read_reply(boot_id, start_deadline, "boot")
        except StudentError as exc:
            # No student code has run yet: the sandbox itself failed to start.
            self._drain_output()
            tail = " ".join(self.captured_output.split())[-300:]
            self._kill()
            raise SandboxError(f"the worker process did not start ({exc.message}){': ' + tail if tail else ''}") \
                from None
        self._booted = True
        out_before = self._out_total[0]
        try:
            tag, payload = self._read_reply(hello_id, start_deadline, "import")
            self._drain_output()
        except StudentError as exc:
            if self._starts > 1 and time.monotonic() >= self._deadline - 0.05:
                self._kill()
                raise self._budget_error("import") from None
            self.import_error = StudentError(
                "import-error", f"Your code could not be imported: {exc.message}", detail=exc.detail)
            self._kill()
            return
        if self._out_total[0] - out_before > self.limits.flood_bytes:
            self.import_error = StudentError(
                "import-error", "Your code could not be imported: it printed more than "
                f"{_fmt_bytes(self.limits.flood_bytes)} while being imported. Remove the prints at the top "
                "level of your solution cells.")
            self._kill()
            return
        if tag == "error":
            self.import_error = self._error_from(payload, None, importing=True)
            self._kill()
            return
        names = payload.get("names") if type(payload) is dict else None
        if type(names) is list and all(type(n) is str for n in names):
            self.names = tuple(names)
        # informational only (the worker says so): the filter is installed before student code runs
        self._seccomp = type(payload) is dict and payload.get("seccomp") is True

    def _drain_output(self, limit: float = 0.5) -> None:
        """Wait (briefly) until the capture thread has read what is already in the output pipe.

        The worker flushes its streams before it replies, so after a reply the
        pipe holds all the output of the call; reading it first makes
        `captured_output` and the flood check exact.
        """
        try:
            import fcntl
            import termios
        except ImportError:
            return
        buf = bytearray(4)
        end = time.monotonic() + limit
        while time.monotonic() < end and self._capture.is_alive():
            try:
                fcntl.ioctl(self._capture_fd, termios.FIONREAD, buf)
            except OSError:
                return
            if int.from_bytes(buf, sys.byteorder) == 0:
                time.sleep(0.001)           # let a chunk just read reach the buffer
                with self._out_lock:
                    return
            time.sleep(0.002)

    def _read_bwrap_info(self, fd: int, deadline: float) -> None:
        data = b""
        try:
            while time.monotonic() < deadline:
                r, _, _ = select.select([fd], [], [], max(0.0, min(1.0, deadline - time.monotonic())))
                if not r:
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
                if b"}" in data:
                    break
        finally:
            os.close(fd)
        try:
            pid = int(json.loads(data.decode())["child-pid"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return   # bwrap failed before setting up: the hello will fail and say so
        self._init_pid = pid
        try:
            self._ns = os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            self._ns = None

    # ----------------------------------------------------------------- requests

    def _request(self, op: str, name: str, payload: dict, timeout: float | None):
        with self._lock:
            if self.import_error is not None:
                raise self.import_error
            if self._closed:
                raise StudentError("crashed", "the grader already closed this submission's worker", name=name)
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                raise self._budget_error(name)
            if self._proc is None or self._proc.poll() is not None:
                self._restart(name)
                remaining = self._deadline - time.monotonic()
            t = self.limits.call_timeout if timeout is None else float(timeout)
            deadline = time.monotonic() + min(t, remaining)
            msg_id = secrets.token_hex(16)
            try:
                frame = wire.encode_frame(msg_id, op, payload)
            except wire.RefusedValue as exc:
                raise TypeError(f"the check passed a value that is not plain data: {exc.message} at {exc.where}")
            out_before = self._out_total[0]
            self._send(frame, deadline, name)
            tag, value = self._read_reply(msg_id, deadline, name)
            self._drain_output()
            if self._out_total[0] - out_before > self.limits.flood_bytes:
                raise StudentError(
                    "output-too-large", f"`{name}` printed more than {_fmt_bytes(self.limits.flood_bytes)} of "
                    "output. Remove the prints inside your function (or print much less).", name=name)
            if tag == "error":
                raise self._error_from(value, name)
            if op == "has" and type(value) is not bool:
                self._kill()
                raise StudentError("crashed", "The process running your code answered the grader with "
                                   "something it did not ask for.", name=name)
            return value

    def _restart(self, name: str) -> None:
        if self._starts > self.limits.max_restarts:
            raise StudentError(
                "crashed", f"The process running your code stopped {self._starts} times (timeouts or crashes), "
                f"so `{name}` was not run. Fix the functions that time out or crash first.", name=name)
        self._kill()
        self._start()
        if self.import_error is not None:
            raise self.import_error

    def _send(self, frame: bytes, deadline: float, name: str) -> None:
        view = memoryview(frame)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise self._timeout_error(name)
            _, w, _ = select.select([], [self._req_w], [], min(left, 1.0))
            if not w:
                continue
            try:
                n = os.write(self._req_w, view)
            except BlockingIOError:
                continue
            except OSError:
                raise self._dead_error(name)
            view = view[n:]

    def _read_reply(self, msg_id: str, deadline: float, name: str):
        skipped = 0
        while True:
            try:
                got = self._reader.try_parse()
            except wire.WireError as exc:
                self._kill()
                raise self._garbled_error(name, str(exc))
            if got is not None:
                try:
                    rid, tag, payload = wire.decode_body(*got, caps=self._reader.caps)
                except wire.WireError as exc:
                    self._kill()
                    raise self._garbled_error(name, str(exc))
                if rid != msg_id:            # stale or forged: never accepted as this answer
                    skipped += 1
                    if skipped > 100:
                        self._kill()
                        raise self._garbled_error(name, "too many replies to other requests")
                    continue
                if tag not in ("ok", "error"):
                    self._kill()
                    raise self._garbled_error(name, "unknown reply tag")
                return tag, payload
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise self._timeout_error(name)
            r, _, _ = select.select([self._rep_r], [], [], min(left, 0.25))
            if not r:
                # The process we started is gone (e.g. the student killed the supervisor) while
                # some descendant still holds the pipe open: no EOF will come, so don't wait for it.
                if self._proc is not None and self._proc.poll() is not None:
                    raise self._dead_error(name)
                continue
            try:
                chunk = os.read(self._rep_r, 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                raise self._dead_error(name)
            self._reader.buffer.extend(chunk)

    # ----------------------------------------------------------------- errors

    def _what(self, name: str) -> str:
        return "while your code was being imported" if name == "import" else f"while `{name}` was running"

    def _budget_error(self, name: str) -> StudentError:
        return StudentError("timeout", f"Your code used up its whole time budget for this notebook "
                            f"({self.limits.total_timeout:g} s), so `{name}` was not run.", name=name)

    def _timeout_error(self, name: str) -> StudentError:
        if name == "import":
            return StudentError("timeout", f"importing your code did not finish within "
                                f"{self.limits.effective_import_timeout():g} seconds. Look for loops or long "
                                "computations at the top level of your solution cells (move them into demo cells).")
        if time.monotonic() >= self._deadline - 0.05:
            return StudentError("timeout", f"Your code used up its whole time budget for this notebook "
                                f"({self.limits.total_timeout:g} s) {self._what(name)}.", name=name)
        return StudentError("timeout", f"`{name}` did not finish in time (wall-clock limit reached). Look for an "
                            "infinite loop, or work much slower than needed.", name=name)

    def _exit_reason(self) -> tuple[str, str]:
        proc = self._proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                rc = None
        self._kill()
        if rc is None:
            return "crashed", "it stopped answering"
        sig = -rc if rc < 0 else (rc - 128 if rc > 128 else 0)
        if rc in (97, 98) and not getattr(self, "_booted", False):
            raise SandboxError(f"the sandbox could not set itself up (exit status {rc})")
        if sig == signal.SIGXCPU:
            return "timeout", f"it used more than {self.limits.cpu_seconds} seconds of CPU time"
        if sig:
            extra = " (this often means it ran out of memory or CPU time)" if sig == signal.SIGKILL else ""
            return "crashed", f"it was killed by {_describe_signal(sig)}{extra}"
        return "crashed", f"it exited with status {rc} (does your code call sys.exit(), os._exit() or kill processes?)"

    def _dead_error(self, name: str) -> StudentError:
        kind, how = self._exit_reason()
        if name == "import":
            return StudentError(kind, f"the process importing your code stopped: {how}.")
        return StudentError(kind, f"The process running your code stopped {self._what(name)}: {how}.", name=name)

    def _garbled_error(self, name: str, why: str) -> StudentError:
        return StudentError("crashed", f"The process running your code sent the grader a malformed reply "
                            f"{self._what(name)} (does your code write to file descriptors it did not open?).",
                            name=name, detail=why)

    def _error_from(self, payload, name: str | None, importing: bool = False) -> StudentError:
        if type(payload) is not dict or not all(type(payload.get(k, "")) is str
                                                 for k in ("kind", "type", "message", "traceback")):
            self._kill()
            return self._garbled_error(name or "import", "malformed error reply")
        kind = payload.get("kind", "")
        etype = _clean(payload.get("type", "")[:200])
        msg = _clean(payload.get("message", "")[:2000])
        tb = _clean(payload.get("traceback", "")[:4000])
        where = f"\nIn your code:\n{tb}" if tb else ""
        if importing or kind == "import-error":
            what = f"{etype}: {msg}" if etype and not msg.startswith("your code") else msg
            return StudentError("import-error", f"Your code could not be imported: {what}{where}", detail=tb)
        if kind == "missing":
            if msg.startswith("not callable"):
                return StudentError("missing", f"`{name}` is defined in your notebook but it is not a function "
                                    f"(it is a {etype or 'value'}).", name=name)
            thing = msg.split(": ", 1)[-1] if ": " in msg else name
            return StudentError("missing", f"Your notebook does not define `{thing}`. Check the spelling, and "
                                "that it is defined in a solution cell (not a demo cell).", name=name, detail=msg)
        if kind == "refused-output":
            at = payload.get("where", "")
            at = _generic_where(at if type(at) is str else "")
            msg = _generic_types(msg)
            return StudentError("refused-output", f"`{name}` returned {msg}{' at ' + at if at else ''}, "
                                "which the grader does not accept. Return plain data: numbers, strings, lists, "
                                "tuples, dicts, NumPy arrays or torch tensors.", name=name)
        if kind == "output-too-large":
            return StudentError("output-too-large", f"`{name}` returned a value too large for the grader "
                                f"(more than {_fmt_bytes(self.limits.reply_bytes)}).", name=name, detail=msg)
        if kind == "probe-error":
            # A check called a probe wrongly: the grader's fault, never the student's grade.
            raise SandboxError(f"a check used the probe for `{name}` wrongly (reported by the worker): {msg[:300]}")
        if kind == "wrong-result":
            return StudentError("exception", f"`{name}`: {_generic_types(msg)}", name=name, detail=msg)
        if kind == "exception":
            head = f"{etype}: {msg}" if etype and msg else (etype or msg)
            if etype == "MemoryError":
                head += f" (it needed more memory than the limit of {_fmt_bytes(self.limits.memory_bytes)})"
            return StudentError("exception", f"`{name}` raised {head}{where}", name=name, detail=tb)
        self._kill()
        return self._garbled_error(name or "import", f"unknown error kind {kind[:50]!r}")

    # ----------------------------------------------------------------- killing

    def _survivors(self) -> list[int]:
        plan = self._plan
        out = []
        token = f"LMCOURSE_SANDBOX_TOKEN={self._token}".encode()
        for pid in _proc_entries():
            uid = _uid_of(pid)
            if uid is None:                  # zombie or gone
                continue
            if plan.uid is not None and uid == plan.uid:
                out.append(pid)
                continue
            if self._ns is not None:
                try:
                    if os.readlink(f"/proc/{pid}/ns/pid") == self._ns:
                        out.append(pid)
                        continue
                except OSError:
                    pass
            if plan.mode == "supervised":
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        if token in f.read().split(b"\0"):
                            out.append(pid)
                except OSError:
                    pass
        return out

    def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if self._ctl_w is not None:          # supervisor: closing the channel makes it kill everything
            try:
                os.close(self._ctl_w)
            except OSError:
                pass
            self._ctl_w = None
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._init_pid is not None:       # init of the PID namespace: the kernel kills the rest
            try:
                os.kill(self._init_pid, signal.SIGKILL)
                proc.wait(timeout=2)         # bwrap reaps its init and exits by itself
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        survivors = self._survivors()
        while survivors and time.monotonic() < deadline:
            for pid in survivors:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
            survivors = self._survivors()
        self.leaked = survivors
        if survivors:
            import warnings
            warnings.warn(f"lmcourse sandbox: {len(survivors)} worker process(es) survived SIGKILL: {survivors}",
                          RuntimeWarning, stacklevel=3)
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._capture.join(timeout=5)
        if not self._capture.is_alive():
            try:
                os.close(self._capture_fd)
            except OSError:
                pass

    def alive_pids(self) -> list[int]:
        """Processes of this worker still alive (for tests and diagnostics)."""
        return self._survivors()
