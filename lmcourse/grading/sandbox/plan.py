"""What isolation this machine can give a worker: host capabilities in, a `Plan` out.

Full isolation needs a working bubblewrap: as root with a fresh uid, without
root inside a user namespace (where the kernel allows one); without it the plan
says, in words shown to the instructor (``isolation``), which layers are
left and what is not protected. It never runs student code as root by
accident (`SandboxError` instead).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .messages import SandboxError

_UID_RANGE = (200_000, 900_000)

# What isolation this machine can give
# --------------------------------------------------------------------------- #

@dataclass
class Plan:
    mode: str                   # "bwrap" | "supervised"
    uid: int | None = None      # drop to this uid (root only)
    unshare_net: bool = False
    description: str = ""
    bwrap: str | None = None


_CACHE: dict = {}


def user_namespace() -> list[str]:
    """bwrap's flag for a user namespace when not root (no privileges to make the other namespaces without one)."""
    return [] if os.geteuid() == 0 else ["--unshare-user"]


def bwrap_status() -> tuple[bool, str]:
    """(usable, version or reason), checked once per process."""
    if "bwrap" in _CACHE:
        return _CACHE["bwrap"]
    exe = shutil.which("bwrap")
    if exe is None:
        result = (False, "bubblewrap (bwrap) is not installed")
    else:
        try:
            cp = subprocess.run(
                [exe, *user_namespace(), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                 "--", "true"],
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


def netns_status() -> bool:
    if "netns" not in _CACHE:
        code = "import ctypes,sys; l=ctypes.CDLL(None); sys.exit(0 if l.unshare(0x40000000)==0 else 1)"
        try:
            _CACHE["netns"] = subprocess.run([sys.executable, "-I", "-c", code], timeout=20,
                                             capture_output=True).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _CACHE["netns"] = False
    return _CACHE["netns"]


def reachable_by_others(path: Path) -> bool:
    """True when every ancestor of `path` can be traversed by any uid."""
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        try:
            if not os.stat(d).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def allocate_uid() -> int:
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
    return make_plan(None, force_no_bwrap=False, allocate=False).description


def make_plan(isolate: bool | None, *, force_no_bwrap: bool, allocate: bool = True, secrets=None) -> Plan:
    common = "own process group and session, rlimits, timeouts"
    python_reachable = reachable_by_others(Path(sys.base_prefix)) and reachable_by_others(Path(sys.prefix))
    if isolate is False:
        if os.geteuid() == 0 and python_reachable:
            uid = allocate_uid() if allocate else 0
            return Plan("supervised", uid=uid, description=f"partial: isolation turned off by the caller; "
                         f"uid {uid if allocate else 'N'}; {common}; no private network, the course files "
                         "are readable")
        who = "as root, " if os.geteuid() == 0 else ""
        return Plan("supervised", description=f"partial: isolation turned off by the caller; {who}{common}; "
                     "no private network, the course files are readable")
    if os.geteuid() != 0:
        # Without root (a cluster account, a laptop) bubblewrap can still give the worker namespaces of its
        # own, inside a user namespace, where the kernel allows unprivileged ones: the same view of the
        # filesystem and no network, only no uid of its own (it keeps yours, outside its view).
        ok, info = (False, "disabled for this worker") if force_no_bwrap else bwrap_status()
        if ok:
            return Plan("bwrap", bwrap=shutil.which("bwrap"),
                        description=f"full, without root: a user namespace (your uid, {os.geteuid()}), private "
                        f"network, private PID namespace, private filesystem view ({info}); {common}")
        if isolate:
            raise SandboxError(f"full isolation is not available without root here: {info}")
        return Plan("supervised", description=f"partial: not root (uid {os.geteuid()}) and {info}; {common}; the "
                     "student code runs as you, with network access, and can read the course files")
    uid = allocate_uid() if allocate else 0
    ok, info = (False, "disabled for this worker") if force_no_bwrap else bwrap_status()
    if ok:
        return Plan("bwrap", uid=uid, bwrap=shutil.which("bwrap"),
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
    net = netns_status()
    layers.append("private network" if net else "network NOT isolated (no network namespace allowed)")
    exposed = [str(p) for p in (secrets or []) if reachable_by_others(p)]
    files = (f"the course files are NOT hidden ({', '.join(exposed)} readable by any uid: chmod o-rwx them)"
             if exposed else "the course files are NOT hidden from view, but file permissions keep the "
             "hidden checks and solutions unreadable for that uid")
    return Plan("supervised", uid=uid, unshare_net=net,
                 description=f"partial: root, but {info}; {', '.join(layers)}; {files}; {common}")


# --------------------------------------------------------------------------- #
# helpers
