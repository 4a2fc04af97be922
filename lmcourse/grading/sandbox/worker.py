"""`Worker`: one sandboxed process (restarted when needed) serving one submission.

Its lifecycle: stage the folder (`staging`), start the process under the
isolation `plan` chose (`bwrap` or the worker's own supervisor), wait for the
worker to say it has booted (before that, any failure is the grader's:
`SandboxError`), then for the import of the student's module; then one request
at a time over the pipes, in `inside.wire` frames with a random request id,
every reply parsed as untrusted data; on a timeout, a crash or a garbled reply,
kill everything (`reaping`) and start afresh on the next call. See the
package's docstring for the guarantees.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import bwrap, cgroups, messages, meter, reaping, staging
from .inside import probes, wire
from .inside.protocol import SETUP_EXIT_CODES, Op, Tag
from .libraries import Libraries
from .libraries import absent as libraries_absent
from .libraries import explained as libraries_explained
from .limits import Limits
from .messages import GarbledReply, SandboxError, StudentError
from .meter import Overloaded
from .plan import make_plan

_SECCOMP_SUPPORTED = sys.platform.startswith("linux") and os.uname().machine == "x86_64"


class _Capture(threading.Thread):
    """Drains the student's stdout/stderr pipe: keeps the first `cap` bytes, counts all.

    `busy` (read under `lock`) is True from just before a read takes bytes out of the pipe until they are
    counted: an empty pipe and `busy` False mean that everything written so far has been counted
    (`Worker._drain_output` waits for exactly that, without sleeping when nothing was printed)."""

    def __init__(self, fd: int, cap: int, sink: bytearray, lock: threading.Lock, counter: list) -> None:
        super().__init__(daemon=True, name="lmcourse-sandbox-output")
        self.fd, self.cap, self.sink, self.lock, self.counter = fd, cap, sink, lock, counter
        self.busy = False

    def run(self) -> None:
        waiter = select.poll()  # (not select.select: a batch's descriptors may pass FD_SETSIZE)
        waiter.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            try:
                waiter.poll()  # until there is something to read (or the end)
            except OSError:
                break
            with self.lock:
                self.busy = True
            try:
                chunk = os.read(self.fd, 1 << 20)
            except OSError:
                chunk = b""
            with self.lock:
                self.busy = False
                self.counter[0] += len(chunk)
                room = self.cap - len(self.sink)
                if room > 0:
                    self.sink.extend(chunk[:room])
            if not chunk:
                break


def _grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """Bigger pipe buffers: fewer context switches per large array (Linux only, best effort)."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError):
        pass


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
                 extra_files: dict[str, bytes] | None = None, secret_dirs=(), libraries: Libraries | None = None,
                 _force_no_bwrap: bool = False) -> None:
        if not isinstance(module_source, str):
            raise TypeError("module_source must be str")
        self.limits = limits
        self.libraries = libraries  # None: every installed library importable (the sandbox's own tests)
        # Folders the worker must never see, as the caller names them (the grader: the course's hidden
        # checks and solutions, `lmcourse.course.Course.secret_dirs`); this module knows no layout.
        self._secrets = sorted({Path(os.path.realpath(p)) for p in secret_dirs if Path(p).exists()})
        self._plan = make_plan(isolate, force_no_bwrap=_force_no_bwrap, secrets=self._secrets)
        self._lock = threading.RLock()
        self._out = bytearray()
        self._out_lock = threading.Lock()
        self._out_total = [0]
        self._proc: subprocess.Popen | None = None
        self._closed = False
        self._starts = 0
        self.import_error: StudentError | None = None
        self.names: tuple[str, ...] = ()
        self.cell_errors: list[dict] = []  # cells of a notebook's module that raised when loaded (`messages`)
        self.leaked: list[int] = []        # pids that survived a kill (should stay empty)
        self._seccomp = False
        self._booted = False               # the worker said it is set up: a failure now is the student's
        self._token = secrets.token_hex(16)
        self._spent = 0.0                  # own time of the calls and imports so far (`meter.Clock`)
        self._by_total = False             # the running call's limit is what is left of total_timeout
        self.last_call: meter.CallTime | None = None   # what the last call took (a speed check reads `own`)
        self._void: Overloaded | None = None   # the machine was overloaded: nothing more is run
        self._group: cgroups.Group | None = None
        self._group_missing = ""
        self._dir = Path(tempfile.mkdtemp(prefix="lmcourse-sbx-"))
        try:
            if sys.platform.startswith("linux"):
                self._group, self._group_missing = cgroups.create(
                    f"lmcourse-{self._token[:16]}", memory_bytes=limits.memory_bytes, max_tasks=limits.max_processes)
            else:
                self._group_missing = "no control groups on this system"
            staging.stage(self._dir, module_source, extra_files or {}, uid=self._plan.uid)
            self._start()
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------- public

    @property
    def isolation(self) -> str:
        text = self._plan.description
        if self.libraries is not None:
            text += ("; only the assignment's libraries in view" if self._plan.mode == "bwrap" else
                     "; libraries the assignment leaves out refused by an import hook only (not removed from view)")
        if self._seccomp:
            text += "; seccomp filter (no new namespaces, mounts, ptrace, keyrings, bpf, io_uring)"
        if self._group is not None:
            text += f"; {self._group.describe()}"
        else:
            text += (f"; memory {messages.fmt_bytes(self.limits.memory_bytes)} per process, and for all the "
                     f"submission's processes together only as watched while a call runs (no control group: "
                     f"{self._group_missing})")
        return text

    @property
    def captured_output(self) -> str:
        with self._out_lock:
            text = bytes(self._out).decode("utf-8", errors="replace")
            dropped = self._out_total[0] - len(self._out)
        if dropped > 0:
            text += f"\n[... {messages.fmt_bytes(dropped)} more output not shown]"
        return text

    @property
    def workdir(self) -> Path:
        """The worker's own folder on this machine (`staging`); removed by close()."""
        return self._dir

    def call(self, name: str, *args, timeout: float | None = None, **kwargs):
        """Call the student's ``name(*args, **kwargs)``; plain data in, plain data out."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"not a function name: {name!r}")
        return self._request(Op.CALL, name, {"name": name, "args": tuple(args), "kwargs": dict(kwargs)}, timeout)

    def call_with(self, name: str, args: tuple | list = (), kwargs: dict | None = None, *,
                  timeout: float | None = None):
        """Like `call`, for keyword arguments that clash with ``timeout`` or ``name``."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"not a function name: {name!r}")
        return self._request(Op.CALL, name, {"name": name, "args": tuple(args), "kwargs": dict(kwargs or {})},
                             timeout)

    def probe(self, probe_name: str, *, timeout: float | None = None, **kwargs):
        """Run the trusted probe ``probes.<probe_name>(student_module, **kwargs)`` in the worker."""
        if not isinstance(probe_name, str) or not probe_name.isidentifier():
            raise ValueError(f"not a probe name: {probe_name!r}")
        if probe_name not in probes.PROBES:
            raise ValueError(f"unknown probe {probe_name!r}")
        return self._request(Op.PROBE, messages.probe_label(probe_name, kwargs),
                             {"name": probe_name, "args": (), "kwargs": dict(kwargs)}, timeout)

    def has(self, name: str) -> bool:
        """Whether the student module defines `name` (False after an import error)."""
        if self.import_error is not None:
            return False
        try:
            got = self._request(Op.HAS, name, {"name": str(name)}, None)
        except StudentError:
            return name in self.names
        return got is True

    def close(self) -> None:
        """Kill every process of this worker (verified), then remove its folder and control group. Idempotent."""
        with self._lock:
            self._closed = True
            self._kill()
            shutil.rmtree(self._dir, ignore_errors=True)
            if self._group is not None:
                self._group.remove()

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

    # ----------------------------------------------------------------- start

    def _rlimits(self) -> dict:
        lim = self.limits
        mem_kind = lim.memory_rlimit
        if mem_kind == "auto":
            mem_kind = "data" if self._gpu() else "as"
        nproc = lim.max_processes
        if self._plan.uid is None and os.geteuid() != 0:
            # RLIMIT_NPROC counts every task of the uid: give a budget on top of what already runs.
            nproc += reaping.count_tasks_of_uid(os.geteuid())
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
        threads = self.limits.effective_threads()
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
            home, tmp, boot = staging.SANDBOX_HOME, "/tmp", staging.SANDBOX_BOOT
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
            "package_parent": str(bwrap.PACKAGE_DIR.parent),
            # the libraries left out (`libraries`): absent from bubblewrap's view; without it, refused by an
            # import hook in the worker (advice, not enforcement: the student's process could remove it)
            "absent": libraries_absent(self.libraries) if self.libraries is not None and plan.mode != "bwrap"
            else [],
        }
        cfg_name = f"config-{self._starts}.json"
        (d / "boot" / cfg_name).write_text(json.dumps(config))
        os.chmod(d / "boot" / cfg_name, 0o644)
        worker_py = staging.entry_point(boot)
        if plan.mode == "bwrap":
            cmd = bwrap.command(plan.bwrap, d, [sys.executable, "-I", worker_py, f"{boot}/{cfg_name}"],
                                info_fd=info_w, gpu=self._gpu(), secrets=self._secrets, libraries=self.libraries)
        else:
            cmd = [sys.executable, "-I", worker_py, "--supervise", f"{boot}/{cfg_name}"]
        if self._group is not None:
            cmd = self._group.wrap(cmd)
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
        left = self.limits.total_timeout - self._spent
        clock = self._clock(min(self.limits.effective_import_timeout(), max(left, 0.0)))
        oom_before = self._oom_kills()
        try:
            self._boot_and_import(info_r, boot_id, hello_id, clock, oom_before, by_total=left < clock.seconds + 1e-9)
        finally:
            self._spent += clock.own(time.monotonic())

    def _boot_and_import(self, info_r, boot_id: str, hello_id: str, clock: meter.Clock, oom_before: int,
                         by_total: bool) -> None:
        if info_r is not None:
            self._read_bwrap_info(info_r, clock.started + clock.fence)
        self._booted = False
        try:
            self._read_reply(boot_id, clock, "boot")
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
            tag, payload = self._read_reply(hello_id, clock, "import")
            self._drain_output()
        except StudentError as exc:
            if self._oom_kills() > oom_before:
                exc = messages.memory_error("import", self.limits.memory_bytes)
            elif self._starts > 1 and by_total and exc.kind == "timeout":
                self._kill()
                raise messages.budget_error("import", self.limits.total_timeout) from None
            self.import_error = StudentError("import-error", f"Your code could not be imported: {exc.message}")
            self._kill()
            return
        if self._out_total[0] - out_before > self.limits.flood_bytes:
            self.import_error = StudentError(
                "import-error", "Your code could not be imported: it printed more than "
                f"{messages.fmt_bytes(self.limits.flood_bytes)} while being imported. Remove the prints at the top "
                "level of your solution cells.")
            self._kill()
            return
        if tag == Tag.ERROR:
            self.import_error = self._error_from(payload, "import", importing=True)
            self._kill()
            return
        names = payload.get("names") if type(payload) is dict else None
        if type(names) is list and all(type(n) is str for n in names):
            self.names = tuple(names)
        self.cell_errors = messages.cell_errors(payload)
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
                with self._out_lock:
                    if not self._capture.busy:  # nothing left in the pipe, nothing read and not yet counted
                        return
            time.sleep(0.0005)

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
            if self._void is not None:   # the first call that met it said how: not again for every check
                raise Overloaded(f"`{name}` was not run: the grading machine was overloaded (see above)")
            if self.import_error is not None:
                raise self.import_error
            if self._closed:
                raise StudentError("crashed", "the grader already closed this submission's worker", name=name)
            if self.limits.total_timeout - self._spent <= 0:
                self._kill()
                raise messages.budget_error(name, self.limits.total_timeout)
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._restart(name)
            except Overloaded as exc:
                self._void = exc
                raise
            remaining = self.limits.total_timeout - self._spent
            if remaining <= 0:
                self._kill()
                raise messages.budget_error(name, self.limits.total_timeout)
            t = self.limits.call_timeout if timeout is None else float(timeout)
            msg_id = secrets.token_hex(16)
            try:
                frame = wire.encode_frame(msg_id, Op(op).value, payload)
            except wire.RefusedValue as exc:
                raise TypeError(f"the check passed a value that is not plain data: {exc.message} at {exc.where}")
            out_before = self._out_total[0]
            clock = self._clock(min(t, remaining))
            self._by_total = remaining < t
            oom_before = self._oom_kills()
            try:
                self._send(frame, clock, name)
                tag, value = self._read_reply(msg_id, clock, name)
            except StudentError:
                self._raise_if_out_of_memory(oom_before, name)
                raise
            except Overloaded as exc:
                self._void = exc
                raise
            finally:
                self.last_call = clock.taken(time.monotonic())
                self._spent += self.last_call.own
            self._raise_if_out_of_memory(oom_before, name)
            self._drain_output()
            if self._out_total[0] - out_before > self.limits.flood_bytes:
                raise messages.flood_error(name, self.limits.flood_bytes)
            if tag == Tag.ERROR:
                raise self._error_from(value, name)
            if op == Op.HAS and type(value) is not bool:
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

    def _send(self, frame: bytes, clock: meter.Clock, name: str) -> None:
        view = memoryview(frame)
        while view:
            self._check_clock(clock, name)
            _, w, _ = select.select([], [self._req_w], [], min(clock.wake_in(time.monotonic()), 1.0))
            if not w:
                continue
            try:
                n = os.write(self._req_w, view)
            except BlockingIOError:
                continue
            except OSError:
                raise self._dead_error(name)
            view = view[n:]

    def _read_reply(self, msg_id: str, clock: meter.Clock, name: str):
        skipped = 0
        while True:
            try:
                got = self._reader.try_parse()
            except wire.WireError:
                self._kill()
                raise messages.garbled_error(name)
            if got is not None:
                try:
                    rid, tag, payload = wire.decode_body(*got, caps=self._reader.caps)
                except wire.WireError:
                    self._kill()
                    raise messages.garbled_error(name)
                if rid != msg_id:            # stale or forged: never accepted as this answer
                    skipped += 1
                    if skipped > 100:
                        self._kill()
                        raise messages.garbled_error(name)   # too many replies to other requests
                    continue
                try:
                    tag = Tag(tag)
                except ValueError:
                    self._kill()
                    raise messages.garbled_error(name) from None
                return tag, payload
            self._check_clock(clock, name)
            r, _, _ = select.select([self._rep_r], [], [], min(clock.wake_in(time.monotonic()), 0.25))
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

    def _clock(self, seconds: float) -> meter.Clock:
        """The clock of one call or import of `seconds` of its own (`meter`): CPU budgeted for the threads the
        worker is given, the memory of all its processes watched where no control group bounds it."""
        group = self._group
        return meter.Clock(seconds, cpu_seconds=seconds * self.limits.effective_threads(),
                           fence=seconds * max(1.0, self.limits.wall_factor), processes=self._processes,
                           cpu=group.cpu_seconds if group is not None and "cpu" in group.dirs else None,
                           memory_bytes=None if group is not None else self.limits.memory_bytes)

    def _processes(self) -> list[int]:
        return self._group.pids() if self._group is not None else self._survivors()

    def _check_clock(self, clock: meter.Clock, name: str) -> None:
        """Stop the call when its clock says so: the student's timeout or memory, or the machine's overload."""
        now = time.monotonic()
        verdict = clock.look(now)
        if verdict is None:
            return
        self._kill()
        if verdict == "memory":
            raise messages.memory_error(name, self.limits.memory_bytes)
        if verdict == "fence":
            raise clock.overloaded(name, now)
        by_total = name not in ("import", "boot") and self._by_total
        if verdict == "cpu":
            raise messages.timeout_error(name, self.limits, False, seconds=clock.seconds, cpu=clock.cpu,
                                         threads=self.limits.effective_threads())
        raise messages.timeout_error(name, self.limits, by_total, seconds=clock.seconds,
                                     waiting=clock.cpu < 0.25 * clock.own(now))

    def _oom_kills(self) -> int:
        return self._group.oom_kills() if self._group is not None else 0

    def _raise_if_out_of_memory(self, before: int, name: str) -> None:
        """A process of the submission was killed for the group's memory limit during the call: however the
        call ended (an answer, a crash, a child that died), the submission went over its memory budget."""
        if self._oom_kills() > before:
            self._kill()
            raise messages.memory_error(name, self.limits.memory_bytes)

    def _dead_error(self, name: str) -> StudentError:
        """The process is gone: why (its exit status), in the student's words, after killing the rest."""
        proc = self._proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                rc = None
        self._kill()
        if rc in SETUP_EXIT_CODES and not self._booted:
            raise SandboxError(f"the sandbox could not set itself up (exit status {rc})")
        return messages.dead_error(name, *messages.exit_reason(rc, self.limits.cpu_seconds))

    def _error_from(self, payload, name: str, importing: bool = False) -> StudentError:
        try:
            error = messages.from_error_reply(payload, name, self.limits, importing=importing)
        except GarbledReply:
            self._kill()
            return messages.garbled_error(name)
        if self.libraries is not None:  # "No module named 'tiktoken'": say that the assignment leaves it out
            error.message = libraries_explained(error.message, self.libraries)
            error.args = (error.message,)
        return error

    # ----------------------------------------------------------------- killing

    def _survivors(self) -> list[int]:
        return reaping.survivors(uid=self._plan.uid, pid_namespace=self._ns, token=self._token,
                                 supervised=self._plan.mode == "supervised")

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
        if self._group is not None:
            self._group.kill()
        survivors = reaping.kill_until_gone(self._survivors)
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
