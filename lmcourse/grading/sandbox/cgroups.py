"""The worker's control group: one submission's memory and tasks, bounded over all its processes together.

Rlimits bound each process (`Limits.memory_bytes` of address space each), and a
submission may start up to `Limits.max_processes` of them: three children
could hold three times the memory budget. A control group bounds them as a
whole: every process of the worker (bubblewrap, the supervisor, the student's
children, double-forked or not) is in it from its first instruction, so the
kernel refuses more than `memory_bytes` of memory (no swap) and more than
`max_processes` tasks to all of them together, counts their CPU time, and
counts the processes it killed for memory (`oom_kills`), which the grader
reports as the student's ``memory`` failure.

Two kernel interfaces, the first that works here:

* cgroup v2 (the unified hierarchy): a child of a group whose
  ``cgroup.subtree_control`` already enables ``memory`` and ``pids`` (the
  hierarchy's root, or the grader's own group where it was delegated to it);
  ``memory.max``, ``memory.swap.max``, ``pids.max``, ``memory.events``,
  ``cpu.stat``, ``cgroup.kill``.
* cgroup v1 (a ``memory`` hierarchy, ``pids`` and ``cpuacct`` where mounted):
  a child of the grader's own group in each; ``memory.limit_in_bytes``,
  ``memory.memsw.limit_in_bytes``, ``pids.max``, ``memory.oom_control``,
  ``cpuacct.usage``.

Neither needs anything of the grader's own group but the right to make a
child in it (root, usually). Where there is none (not root, a laptop,
macOS), `create` says why and the worker bounds memory as it can without one
(`Worker`: each process by its rlimit, all of them together watched while a
call runs), and says so in ``isolation``.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from .reaping import kill_until_gone

_CACHE: dict = {}


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root in the hierarchy, mount point, fs type, super options) of each cgroup mount."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((fields[3], fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """The grader's own group in each hierarchy: controller (or "" for v2) -> path in it."""
    out = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[1] == "":
            out[""] = parts[2]
        for controller in parts[1].split(","):
            if controller:
                out[controller] = parts[2]
    return out


def _under(mount_root: str, mount_point: str, path: str) -> Path | None:
    """The folder of group `path` in a hierarchy mounted at `mount_point` (None when outside the mount)."""
    root = mount_root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return Path(mount_point + path[len(root):])


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _field(text: str, key: str) -> int | None:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def available() -> tuple[str, dict[str, Path]] | tuple[None, str]:
    """("v2" or "v1", controller -> the folder the worker's groups go under) or (None, why not); once a process."""
    if "where" in _CACHE:
        return _CACHE["where"]
    _CACHE["where"] = _find()
    return _CACHE["where"]


def _find():
    if not os.path.exists("/proc/self/cgroup"):
        return None, "no control groups on this system"
    mounts, own = _mounts(), _own_paths()
    reasons = []
    for root, point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        candidates = [Path(point)]
        mine = _under(root, point, own.get("", "/"))
        if mine is not None and mine != Path(point):
            candidates.append(mine)
        for base in candidates:
            enabled = set(_read(base / "cgroup.subtree_control").split())
            if {"memory", "pids"} <= enabled and os.access(base, os.W_OK):
                return "v2", {"memory": base, "pids": base, "cpu": base}
        reasons.append(f"cgroup v2 at {point}: memory and pids are not enabled for children of a group this "
                       "process may write to")
    v1 = {}
    for controller, key in (("memory", "memory"), ("pids", "pids"), ("cpuacct", "cpu")):
        for root, point, fstype, options in mounts:
            if fstype == "cgroup" and controller in options and controller in own:
                base = _under(root, point, own[controller])
                if base is not None and base.is_dir() and os.access(base, os.W_OK):
                    v1[key] = base
                    break
    if "memory" in v1:
        return "v1", v1
    reasons.append("no writable cgroup v1 memory hierarchy" if any(m[2] == "cgroup" for m in mounts)
                   else "no cgroup v1 hierarchy")
    return None, "; ".join(reasons) if os.geteuid() == 0 else f"not root ({'; '.join(reasons)})"


class Group:
    """One worker's control group (a folder per hierarchy: one under v2, up to three under v1)."""

    def __init__(self, version: str, dirs: dict[str, Path], memory_bytes: int, max_tasks: int) -> None:
        self.version, self.dirs = version, dirs
        self.memory_bytes, self.max_tasks = memory_bytes, max_tasks

    # -- what the worker's start needs ----------------------------------------------------

    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join the group (each hierarchy's ``cgroup.procs``)."""
        return sorted({str(d / "cgroup.procs") for d in self.dirs.values()})

    def wrap(self, cmd: list[str]) -> list[str]:
        """`cmd` run by a shell that first moves itself into the group: every process the worker starts is in
        it from the start (a process moved later would leave its children started before outside)."""
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 1; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "lmcourse-cgroup", *self.procs_files(), "--", *cmd]

    def describe(self) -> str:
        tasks = f" and {self.max_tasks} tasks" if "pids" in self.dirs else ""
        return (f"memory {_gb(self.memory_bytes)}{tasks} for all the submission's processes together "
                f"(cgroup {self.version})")

    # -- what it used ----------------------------------------------------------------------

    def cpu_seconds(self) -> float | None:
        """CPU time of every process that was ever in the group, threads and ended children included."""
        d = self.dirs.get("cpu")
        if d is None:
            return None
        if self.version == "v2":
            usec = _field(_read(d / "cpu.stat"), "usage_usec")
            return None if usec is None else usec / 1e6
        try:
            return int(_read(d / "cpuacct.usage").strip()) / 1e9
        except ValueError:
            return None

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for the group's memory limit so far."""
        d = self.dirs["memory"]
        text = _read(d / ("memory.events" if self.version == "v2" else "memory.oom_control"))
        return _field(text, "oom_kill") or 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs.values():
            for word in _read(d / "cgroup.procs").split():
                if word.isdigit():
                    found.add(int(word))
        return sorted(found)

    # -- the end ---------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL every process in the group (repeatedly: one may fork while it is being killed)."""
        kill_file = self.dirs["memory"] / "cgroup.kill"
        if self.version == "v2" and kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        kill_until_gone(self.pids, 10.0)

    def remove(self) -> None:
        """Kill what is left, then remove the group's folders (a group can go only once it is empty)."""
        self.kill()
        for d in sorted(set(self.dirs.values()), key=lambda p: len(p.parts), reverse=True):
            deadline = time.monotonic() + 5
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    # EBUSY while the last killed processes are being torn down
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                    time.sleep(0.02)


def _gb(n: int) -> str:
    return f"{n / (1 << 30):.1f} GB"


def create(name: str, *, memory_bytes: int, max_tasks: int) -> tuple[Group | None, str]:
    """A new group `name` for one worker, its limits set: (group, "") or (None, why there is none here)."""
    version, where = available()
    if version is None:
        return None, str(where)
    dirs: dict[str, Path] = {}
    made: list[Path] = []
    try:
        for key, base in where.items():
            d = base / name
            if d not in made:
                d.mkdir(mode=0o755)
                made.append(d)
            dirs[key] = d
        mem = dirs["memory"]
        if version == "v2":
            (mem / "memory.max").write_text(str(memory_bytes))
            if (mem / "memory.swap.max").exists():
                (mem / "memory.swap.max").write_text("0")
            (dirs["pids"] / "pids.max").write_text(str(max_tasks))
        else:
            (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():   # swap accounting on: no swap either
                (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            if "pids" in dirs:
                (dirs["pids"] / "pids.max").write_text(str(max_tasks))
    except OSError as err:
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                pass
        return None, f"a control group could not be made ({err.strerror or err}: {err.filename or ''})"
    return Group(version, dirs, memory_bytes, max_tasks), ""
