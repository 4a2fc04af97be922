"""Confinement the worker applies to itself before any student code runs.

Dropping to the fresh uid (and proving root cannot be regained), rlimits, no
new privileges, and on x86_64 Linux a seccomp filter: no new namespaces,
mounts, ptrace, keyrings, bpf, perf events, userfaultfd or io_uring. Each is a
layer under bubblewrap's namespaces, and the only layers left where
bubblewrap cannot run (`lmcourse.grading.sandbox.plan`).
"""

from __future__ import annotations

import ctypes
import os
import sys

from .protocol import EXIT_PRIVILEGES_KEPT

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
CLONE_NEWNET = 0x40000000


def libc():
    """The C library for prctl/unshare, which are Linux's: None elsewhere (macOS), where the worker
    keeps its rlimits, timeouts and process group, and says so (`isolation`)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def drop_privileges(uid: int, gid: int) -> None:
    lib = libc()
    if lib is not None:
        for cap in range(64):
            lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid:
        raise SystemExit(EXIT_PRIVILEGES_KEPT)
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise SystemExit(EXIT_PRIVILEGES_KEPT)


def apply_limits(cfg: dict) -> None:
    import resource
    lib = libc()
    if lib is not None:
        lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
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


def install_seccomp() -> bool:
    prog = seccomp_program()
    lib = libc()
    if prog is None or lib is None:
        return False

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    ok = lib.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0     # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    lib.prctl.argtypes = None
    return ok

