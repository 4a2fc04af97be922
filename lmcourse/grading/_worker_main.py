"""Bootstrap of the sandboxed worker process (runs the student's code).

Self-contained: the sandbox copies this file, ``wire.py`` and ``probes.py``
into a private boot folder (as ``lmc_worker.py``, ``lmc_wire.py``,
``lmc_probes.py``) and runs::

    python -I lmc_worker.py CONFIG.json                # the worker
    python -I lmc_worker.py --supervise CONFIG.json    # partial mode: a subreaper
                                                       # that starts the worker and
                                                       # kills every descendant at the end

Nothing here is trusted by the grader: every reply is parsed as untrusted
data on the other side.  The worker only makes the student's life easy
(clear messages) and applies the limits before any student code runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import traceback

BOOT = os.path.dirname(os.path.abspath(__file__))
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
CLONE_NEWNET = 0x40000000


def _libc():
    """The C library for prctl/unshare, which are Linux's: None elsewhere (macOS), where the worker
    keeps its rlimits, timeouts and process group, and says so (`isolation`)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


# --------------------------------------------------------------------------- #
# Supervisor (partial mode, and root without bubblewrap)
# --------------------------------------------------------------------------- #

def _children(pid: int) -> list[int]:
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(name))
    return out


def supervise(config_path: str) -> int:
    with open(config_path) as f:
        cfg = json.load(f)
    libc = _libc()
    if libc is not None:
        # No death signal for the supervisor itself: when the grader dies, the control
        # channel reaches EOF and the supervisor kills every descendant before exiting.
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if cfg.get("unshare_net"):
        if libc is None or libc.unshare(CLONE_NEWNET) != 0:
            os.write(2, b"lmcourse sandbox: unshare(CLONE_NEWNET) failed\n")
            return 97
    control = cfg["control_fd"]
    keep = [cfg["request_fd"], cfg["reply_fd"]]
    import subprocess
    child = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), config_path],
                             pass_fds=keep, start_new_session=True, close_fds=True,
                             cwd=cfg["home"])
    for fd in keep:
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    status = None
    import select
    while status is None:
        r, _, _ = select.select([control], [], [], 0.2)
        if r:
            try:
                data = os.read(control, 64)
            except OSError:
                data = b""
            if not data:          # the grader closed the channel (or died): stop everything
                break
        status = child.poll()
    # Kill the worker's group, then every process that ended up as our child
    # (orphans re-parent to us: we are their subreaper), until none is left.
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = _children(os.getpid())
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            if not kids:
                break
        if not kids:
            break
        time.sleep(0.01)
    rc = child.returncode
    if rc is None:
        return 0
    return rc if rc >= 0 else 128 - rc


# --------------------------------------------------------------------------- #
# Worker
# --------------------------------------------------------------------------- #

def _drop_privileges(uid: int, gid: int) -> None:
    libc = _libc()
    if libc is not None:
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid:
        raise SystemExit(98)
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise SystemExit(98)


def _apply_limits(cfg: dict) -> None:
    import resource
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for name, value in cfg["rlimits"].items():
        res = getattr(resource, name)
        soft, hard = value
        try:
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            # cannot raise above the current hard limit: lower to it instead
            cur_soft, cur_hard = resource.getrlimit(res)
            if cur_hard != resource.RLIM_INFINITY:
                resource.setrlimit(res, (min(soft, cur_hard), cur_hard))


# x86_64 syscall numbers refused by the seccomp filter (EPERM): new namespaces, mounts,
# keyrings, ptrace, bpf, perf, userfaultfd, io_uring -- the usual kernel attack surface.
_BLOCKED_SYSCALLS = (
    272, 308,                          # unshare, setns
    165, 166, 155, 161,                # mount, umount2, pivot_root, chroot
    428, 429, 430, 431, 432, 442,      # open_tree, move_mount, fsopen, fsconfig, fsmount, mount_setattr
    248, 249, 250,                     # add_key, request_key, keyctl
    101, 310, 311,                     # ptrace, process_vm_readv, process_vm_writev
    321, 298, 323,                     # bpf, perf_event_open, userfaultfd
    425, 426, 427,                     # io_uring_setup, io_uring_enter, io_uring_register
)
_CLONE_NAMESPACE_FLAGS = 0x7E020080    # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET,TIME}


def seccomp_program() -> bytes | None:
    """Classic BPF program for the filter (x86_64 Linux only, else None)."""
    import platform
    import struct
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return None
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, ERRNO, EPERM, ENOSYS = 0x7FFF0000, 0x00050000, 1, 38
    ins = []

    def op(code, k, jt=0, jf=0):
        ins.append(struct.pack("=HBBI", code, jt, jf, k))

    op(LD, 4)                                      # seccomp_data.arch
    op(JEQ, 0xC000003E, 1, 0)                      # AUDIT_ARCH_X86_64, else refuse (no i386 entry)
    op(RET, ERRNO | ENOSYS)
    op(LD, 0)                                      # seccomp_data.nr
    op(JGE, 0x40000000, 0, 1)                      # x32 ABI
    op(RET, ERRNO | ENOSYS)
    op(JEQ, 435, 0, 1)                             # clone3: ENOSYS, so libc falls back to clone
    op(RET, ERRNO | ENOSYS)
    op(JEQ, 56, 0, 4)                              # clone: refuse namespace flags
    op(LD, 16)                                     # args[0] (low 32 bits)
    op(JSET, _CLONE_NAMESPACE_FLAGS, 0, 1)
    op(RET, ERRNO | EPERM)
    op(RET, ALLOW)
    for nr in _BLOCKED_SYSCALLS:
        op(JEQ, nr, 0, 1)
        op(RET, ERRNO | EPERM)
    op(RET, ALLOW)
    return b"".join(ins)


def _install_seccomp() -> bool:
    prog = seccomp_program()
    libc = _libc()
    if prog is None or libc is None:
        return False

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    ok = libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0     # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    libc.prctl.argtypes = None
    return ok


def _student_traceback(tb, module_file: str, limit: int = 8) -> str:
    frames = [fr for fr in traceback.extract_tb(tb) if fr.filename == module_file]
    if not frames:
        return ""
    frames = frames[-limit:]
    lines = []
    for fr in frames:
        where = f"  line {fr.lineno}, in {fr.name}"
        if fr.line:
            where += f"\n    {fr.line.strip()}"
        lines.append(where)
    return "\n".join(lines)


def _safe_str(x, limit=2000) -> str:
    try:
        s = str(x)
    except BaseException:
        s = "<the exception's message could not be shown>"
    if type(s) is not str:
        s = "<message>"
    return s[:limit]


def _error(kind: str, exc: BaseException | None = None, message: str = "", module_file: str = "") -> dict:
    etype = ""
    tb = ""
    if exc is not None:
        etype = type(exc).__name__ if isinstance(type(exc).__name__, str) else "Exception"
        if not message:
            message = _safe_str(exc)
        tb = _student_traceback(exc.__traceback__, module_file)
    return {"kind": kind, "type": str(etype)[:200], "message": str(message)[:4000], "traceback": tb[:8000]}


def worker(config_path: str) -> int:
    with open(config_path) as f:
        cfg = json.load(f)
    parent = os.getppid()
    if cfg.get("uid") is not None and os.getuid() == 0:
        _drop_privileges(cfg["uid"], cfg["gid"])
    libc = _libc()
    if libc is not None:     # die with the supervisor / namespace init (set after the uid change,
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)   # which clears it)
        if os.getppid() != parent:
            return 1
    _apply_limits(cfg)
    seccomp = bool(cfg.get("seccomp", True)) and _install_seccomp()
    os.chdir(cfg["home"])
    sys.dont_write_bytecode = True
    sys.path.insert(0, BOOT)
    sys.path.append(cfg["home"])

    import importlib.util
    # Notebooks import lmcourse (data loaders, Vocab). A grader run from a checkout on PYTHONPATH
    # has it where -I does not look: without this, every honest student would get an import error
    # for the grader's own set-up. Under bubblewrap only the package itself is bound in that folder.
    if cfg.get("package_parent") and importlib.util.find_spec("lmcourse") is None:
        sys.path.append(cfg["package_parent"])
    import lmc_wire as wire
    import lmc_probes as probes

    req_fd, rep_fd = cfg["request_fd"], cfg["reply_fd"]
    os.set_inheritable(req_fd, False)
    os.set_inheritable(rep_fd, False)
    reader = wire.FrameReader(req_fd)
    main_pid = os.getpid()

    def flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except BaseException:
                pass

    def send(msg_id, tag, payload):
        if os.getpid() != main_pid:
            os._exit(0)
        flush()
        try:
            frame = wire.encode_frame(msg_id, tag, payload)
        except wire.RefusedValue as exc:
            frame = wire.encode_frame(msg_id, "error", {
                "kind": "refused-output", "type": "", "message": exc.message, "where": exc.where,
                "traceback": ""})
        except wire.WireError as exc:
            frame = wire.encode_frame(msg_id, "error", {
                "kind": "output-too-large", "type": "", "message": str(exc), "traceback": ""})
        except BaseException as exc:
            frame = wire.encode_frame(msg_id, "error", _error(
                "refused-output", exc, f"the value could not be converted ({type(exc).__name__})"))
        wire.write_all(rep_fd, frame)

    # Everything above is the grader's own setup. Say so before any student code runs: if the
    # process dies before this frame, the sandbox failed (a grader error), not the submission.
    if cfg.get("boot_id"):
        send(cfg["boot_id"], "ok", {"booted": True})

    module_file = os.path.join(BOOT, "submission.py")
    module = None
    import_error = None
    spec = importlib.util.spec_from_file_location("submission", module_file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = mod
    try:
        spec.loader.exec_module(mod)
        module = mod
    except SystemExit as exc:
        import_error = _error("import-error", exc, f"your code called sys.exit({_safe_str(exc.code, 100)}) "
                              "while it was being imported", module_file)
    except SyntaxError as exc:
        import_error = {"kind": "import-error", "type": "SyntaxError",
                        "message": f"{_safe_str(exc.msg)} (line {exc.lineno})",
                        "traceback": _safe_str(exc.text or "", 500)}
    except BaseException as exc:
        import_error = _error("import-error", exc, module_file=module_file)

    if import_error is not None:
        send(cfg["hello_id"], "error", import_error)
    else:
        names = sorted(n for n in vars(module) if type(n) is str and not n.startswith("__"))[:10000]
        send(cfg["hello_id"], "ok", {"names": names, "pid": os.getpid(), "seccomp": seccomp})

    main_pid = os.getpid()
    while True:
        if os.getpid() != main_pid:
            # a fork of the worker made by student code came back here: it must not serve requests
            os._exit(0)
        try:
            msg_id, op, payload = wire.decode_body(*reader.read_blocking())
        except EOFError:
            return 0
        if import_error is not None:
            send(msg_id, "error", import_error)
            continue
        try:
            if op == "has":
                send(msg_id, "ok", bool(hasattr(module, payload["name"])))
                continue
            name = payload["name"]
            if op == "call":
                if not hasattr(module, name):
                    send(msg_id, "error", _error("missing", message=f"not defined: {name}"))
                    continue
                fn = getattr(module, name)
                if not callable(fn):
                    send(msg_id, "error", _error("missing", message=f"not callable: {name}",
                                                 ) | {"type": type(fn).__name__})
                    continue
                result = fn(*payload["args"], **payload["kwargs"])
            elif op == "probe":
                fn = probes.PROBES.get(name)
                if fn is None:
                    send(msg_id, "error", _error("probe-error", message=f"unknown probe {name}"))
                    continue
                result = fn(module, *payload["args"], **payload["kwargs"])
            else:
                send(msg_id, "error", _error("probe-error", message=f"unknown operation {op}"))
                continue
        except probes.Missing as exc:
            send(msg_id, "error", _error("missing", message=_safe_str(exc)))
            continue
        except probes.WrongResult as exc:
            send(msg_id, "error", _error("wrong-result", message=_safe_str(exc)))
            continue
        except probes.ProbeUsageError as exc:
            send(msg_id, "error", _error("probe-error", message=_safe_str(exc)))
            continue
        except SystemExit as exc:
            send(msg_id, "error", _error("exception", exc,
                                         f"your code called sys.exit({_safe_str(exc.code, 100)})", module_file))
            continue
        except BaseException as exc:
            send(msg_id, "error", _error("exception", exc, module_file=module_file))
            continue
        send(msg_id, "ok", result)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--supervise":
        return supervise(argv[2])
    if len(argv) == 2:
        return worker(argv[1])
    print("usage: lmc_worker.py [--supervise] CONFIG.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
