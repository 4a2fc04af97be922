"""The supervisor: the worker's parent when bubblewrap is not there to give it a PID namespace.

``python -I BOOT/lmc_inside/__main__.py --supervise CONFIG`` becomes the
*subreaper* of the worker it starts: a double-forked orphan of the student's
code is re-parented to it, not to the host's init. When the grader closes the
control pipe (or dies), it kills the worker's process group, then every
process that is still its descendant, until none is left.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from . import confine
from .protocol import EXIT_NO_NETWORK_NAMESPACE


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


def supervise(config_path: str, entry: str) -> int:
    with open(config_path) as f:
        cfg = json.load(f)
    libc = confine.libc()
    if libc is not None:
        # No death signal for the supervisor itself: when the grader dies, the control
        # channel reaches EOF and the supervisor kills every descendant before exiting.
        libc.prctl(confine.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if cfg.get("unshare_net"):
        if libc is None or libc.unshare(confine.CLONE_NEWNET) != 0:
            os.write(2, b"lmcourse sandbox: unshare(CLONE_NEWNET) failed\n")
            return EXIT_NO_NETWORK_NAMESPACE
    control = cfg["control_fd"]
    keep = [cfg["request_fd"], cfg["reply_fd"]]
    child = subprocess.Popen([sys.executable, "-I", entry, config_path],
                             pass_fds=keep, start_new_session=True, close_fds=True,
                             cwd=cfg["home"])
    for fd in keep:
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    status = None
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
