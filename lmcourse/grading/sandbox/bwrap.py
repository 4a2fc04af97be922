"""Bubblewrap's arguments: the filesystem view and namespaces a fully isolated worker gets."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .libraries import Libraries, bwrap_arguments
from .messages import SandboxError
from .plan import user_namespace
from .staging import SANDBOX_BOOT, SANDBOX_HOME

PACKAGE_DIR = Path(__file__).resolve().parents[2]      # lmcourse/: notebooks import its public modules


def bind_sources(secrets: list[Path]) -> list[str]:
    """Host folders the worker reads (Python install, venv, public lmcourse package), read-only.

    Refuses (`SandboxError`) a folder that holds one of `secrets`: the course's hidden checks
    and solutions must not be in the worker's view even when they sit inside the package."""
    paths: list[Path] = []
    for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))):
        paths.append(Path(os.path.realpath(p)))
    paths.append(PACKAGE_DIR)
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
        for secret in secrets:
            if p == secret or p in secret.parents:
                raise SandboxError(f"refusing to expose {p} to the worker: it contains {secret}")
        out.append(p)
    return [str(p) for p in out]


def command(bwrap: str, folder: Path, python_args: list[str], *, info_fd: int, gpu: bool,
            secrets: list[Path], libraries: Libraries | None = None) -> list[str]:
    """bwrap's command line running `python_args` in the worker's view of the filesystem: /usr,
    the Python install and venv, the public lmcourse package, the staged `folder`, nothing else;
    private PID, network, IPC and UTS namespaces. With `libraries`, site-packages holds only the
    libraries it allows (`libraries.bwrap_arguments`)."""
    d = folder
    cmd = [bwrap, *user_namespace(), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
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
    if gpu:
        for dev in sorted(Path("/dev").glob("nvidia*")):
            cmd += ["--dev-bind", str(dev), str(dev)]
        cmd += ["--ro-bind", "/sys", "/sys"]
    # The private /tmp first: a venv or package that lives under the host's /tmp is bound on top
    # of it below (the other way round, the private /tmp would hide the interpreter).
    cmd += ["--bind", str(d / "tmp"), "/tmp"]
    made = {"/", "/etc", "/usr", "/proc", "/dev", "/tmp"}
    for src in bind_sources(secrets):
        for anc in reversed(Path(src).parents):
            if str(anc) not in made:
                made.add(str(anc))
                cmd += ["--perms", "0755", "--dir", str(anc)]
        cmd += ["--ro-bind", src, src]
        made.add(src)
    if libraries is not None:
        cmd += bwrap_arguments(libraries, bind_sources(secrets))
    cmd += ["--perms", "0755", "--dir", "/sandbox",
            "--ro-bind", str(d / "boot"), SANDBOX_BOOT,
            "--bind", str(d / "home"), SANDBOX_HOME,
            "--chdir", SANDBOX_HOME, "--"]
    return cmd + python_args
