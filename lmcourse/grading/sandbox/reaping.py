"""Finding every process a worker left behind, and killing it.

A worker's processes are recognised three ways, so none escapes by
double-forking: the worker's fresh uid, its PID namespace (bubblewrap), and
the random token in its environment (supervised mode, where the student's
code may run as the grader's own uid).
"""

from __future__ import annotations

import os
import signal
import time


def proc_entries():
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if name.isdigit() and int(name) != os.getpid():
            yield int(name)


def uid_of(pid: int) -> int | None:
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


def count_tasks_of_uid(uid: int) -> int:
    n = 0
    for pid in proc_entries():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return n



def survivors(*, uid: int | None, pid_namespace: str | None, token: str, supervised: bool) -> list[int]:
    """Live processes of one worker: its `uid`, in its `pid_namespace`, or (supervised) with its
    `token` in their environment."""
    out = []
    marker = f"LMCOURSE_SANDBOX_TOKEN={token}".encode()
    for pid in proc_entries():
        owner = uid_of(pid)
        if owner is None:                  # zombie or gone
            continue
        if uid is not None and owner == uid:
            out.append(pid)
            continue
        if pid_namespace is not None:
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") == pid_namespace:
                    out.append(pid)
                    continue
            except OSError:
                pass
        if supervised:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        out.append(pid)
            except OSError:
                pass
    return out


def kill_until_gone(find, seconds: float = 10.0) -> list[int]:
    """SIGKILL what `find()` returns until it returns nothing (or `seconds` pass); the survivors."""
    deadline = time.monotonic() + seconds
    left = find()
    while left and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
        left = find()
    return left
