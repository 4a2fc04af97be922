"""The time of one call in the worker: the student's own, not the grading machine's.

A wall-clock limit charges the student for the machine's load: on two cores
busy with ten processes an honest training run takes five times as long and
would lose its points. So a call (or an import) is judged by a `Clock`:

* its *own time* is the wall-clock time less the time the worker's processes
  were ready to run but waiting for a CPU (``run_delay`` in
  ``/proc/<pid>/task/<tid>/schedstat``: the scheduler's own count). On an idle
  machine it is the wall-clock time; on an overloaded one it runs at the pace
  the worker gets a CPU. Time the student's code spends sleeping or waiting
  (``time.sleep``, ``input()``, a lock, a child that never ends) is its own.
* its *CPU time* (all processes, children and threads included: the control
  group's count where there is one, else ``/proc``) is bounded too, at
  ``seconds`` × the threads the worker is given: the student's own processes
  cannot make the worker wait for a CPU without using CPU time, so a
  submission cannot pass its own spinning processes off as a busy machine.
* the *wall-clock fence*, `Limits.wall_factor` × ``seconds``, is the outer
  bound. A call that reaches it before it has used its own time was kept
  waiting for a CPU for most of it: the grading machine was overloaded,
  which is the grader's failure (`Overloaded`, a `SandboxError`: graded again
  on the next run), never the student's timeout.

Only waiting at an ordinary priority counts as the machine's: a task that
lowered its own (``nice``, ``SCHED_IDLE``, its session's autogroup nice) or
narrowed the CPUs it may run on (``sched_setaffinity``: its own processes
then keep it waiting on one core while the CPU they use stays under the
budget of several threads) waits by its own choice.

Without a control group the same look also sums the memory of the worker's
processes (`Clock.memory`), so that a submission's processes together stay
within its budget while a call runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from .messages import SandboxError

SAMPLE_SECONDS = 0.5              # how often a running call is looked at
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_SCHED_OTHER = 0


class Overloaded(SandboxError):
    """A call reached its wall-clock fence with its own time left: the machine, not the student's code."""


@dataclass(frozen=True)
class CallTime:
    """What one call took (`Worker.last_call`): `own` seconds (what its limit counts), `wall`-clock seconds,
    `cpu` seconds of all the worker's processes, seconds `starved` (waiting for a CPU)."""
    own: float
    wall: float
    cpu: float
    starved: float


def _stat_fields(path: str) -> list[str] | None:
    """The fields of a /proc stat file after the command name (field 3 onwards)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:].decode().split()
    except (OSError, ValueError):
        return None


def _affinity(tid: int) -> frozenset[int] | None:
    try:
        return frozenset(os.sched_getaffinity(tid))
    except (OSError, AttributeError):
        return None


def task_times(pid: int, cpus: frozenset[int] | None = None) -> dict[int, tuple[float, bool]]:
    """tid -> (seconds it waited for a CPU so far, whether that wait is the machine's) for each thread of `pid`;
    `cpus`: the CPUs the worker was given (a thread that may use fewer chose to wait)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    # With autogroups (sched_autogroup_enabled) the scheduler shares a CPU between sessions first, at each
    # session's own nice value, which a process may raise for its session (/proc/self/autogroup).
    try:
        with open(f"/proc/{pid}/autogroup") as f:
            session_ordinary = int(f.read().split()[-1]) <= 0
    except (OSError, ValueError, IndexError):
        session_ordinary = True
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/schedstat") as f:
                wait_ns = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        fields = _stat_fields(f"{base}/stat")
        try:
            ordinary = (session_ordinary and fields is not None and int(fields[16]) <= 0
                        and int(fields[38]) == _SCHED_OTHER)
            if ordinary and cpus:
                allowed = _affinity(int(tid))
                ordinary = allowed is None or allowed >= cpus
        except (ValueError, IndexError):
            ordinary = False
        out[int(tid)] = (wait_ns / 1e9, ordinary)
    return out


def process_cpu(pid: int) -> float | None:
    """CPU seconds of `pid`: its threads, ended ones included, and the children it has waited for."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return sum(int(x) for x in fields[11:15]) / _TICK if fields else None
    except ValueError:
        return None


def process_memory(pid: int, proportional: bool) -> int:
    """Resident bytes of `pid`; `proportional`: its share of pages shared with others (PSS), dearer to read."""
    if proportional:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Clock:
    """One call's time: `seconds` of its own, `cpu_seconds` of CPU, a wall-clock fence at `fence` seconds.

    processes: the worker's live processes (pids). cpu: the worker's CPU seconds so far, every process
    ever included (its control group), or None to sum `processes` instead. memory_bytes: without a control
    group, the budget of all processes together, checked at each look (None: the kernel bounds it).
    """

    def __init__(self, seconds: float, *, cpu_seconds: float, fence: float, processes: Callable[[], list[int]],
                 cpu: Callable[[], float | None] | None = None, memory_bytes: int | None = None,
                 now: float | None = None) -> None:
        self.seconds, self.cpu_seconds, self.fence = float(seconds), float(cpu_seconds), float(fence)
        self._processes, self._cpu_source, self.memory_bytes = processes, cpu, memory_bytes
        self.started = time.monotonic() if now is None else now
        self.starved = 0.0            # seconds the worker waited for a CPU (the machine's, not the student's)
        self.cpu = 0.0                # CPU seconds used since the start
        self.memory = 0               # bytes all processes held at the last look (without a control group)
        self._cpu0 = cpu() if cpu is not None else None
        self._cpus = _affinity(0)     # the grader's CPUs, which the worker inherits
        self._proc_cpu: dict[int, float] = {}
        self._waits: dict[int, tuple[float, bool]] | None = None
        self._last = self.started
        self._next = self.started + SAMPLE_SECONDS
        self.sample(self.started, baseline=True)

    # -- the readings ------------------------------------------------------------------------

    def sample(self, now: float, baseline: bool = False) -> None:
        """Read what the worker's processes used since the last look."""
        pids = self._processes()
        waits: dict[int, tuple[float, bool]] = {}
        for pid in pids:
            waits.update(task_times(pid, self._cpus))
        if self._waits is not None and not baseline:
            # The longest any one task of ordinary priority waited in this interval: a task that could not
            # run held the call up for that long, whichever task it was (the main thread, or a child it waits for).
            waited = 0.0
            for tid, (wait, ordinary) in waits.items():
                if ordinary:
                    before = self._waits.get(tid)
                    waited = max(waited, wait - before[0] if before is not None else wait)
            self.starved += min(max(0.0, waited), now - self._last)
        self._waits = waits
        if self._cpu_source is not None:
            used = self._cpu_source()
            if used is not None and self._cpu0 is not None:
                self.cpu = max(self.cpu, used - self._cpu0)
        else:
            cpus = {pid: c for pid in pids if (c := process_cpu(pid)) is not None}
            if not baseline:
                self.cpu += sum(max(0.0, c - self._proc_cpu.get(pid, 0.0)) for pid, c in cpus.items())
            self._proc_cpu = cpus
        if self.memory_bytes is not None:
            total = sum(process_memory(pid, False) for pid in pids)
            if total > self.memory_bytes:   # resident counts shared pages once per process: look closer
                total = sum(process_memory(pid, True) for pid in pids)
            self.memory = total
        self._last = now
        self._next = now + SAMPLE_SECONDS

    def own(self, now: float) -> float:
        """The call's own time so far: wall-clock time less the time it waited for a CPU."""
        return max(0.0, now - self.started - self.starved)

    def taken(self, now: float) -> CallTime:
        """What the call took, once it has ended (looked at once more unless it was too short to matter)."""
        if now - self._last > SAMPLE_SECONDS / 5:
            self.sample(now)
        return CallTime(own=self.own(now), wall=now - self.started, cpu=self.cpu, starved=self.starved)

    # -- the verdicts ------------------------------------------------------------------------

    def wake_in(self, now: float) -> float:
        """Seconds until the call must be looked at again (its own time may run out then)."""
        own_end = self.started + self.starved + self.seconds
        return max(0.0, min(self._next, own_end, self.started + self.fence) - now)

    def look(self, now: float) -> str | None:
        """None while the call may go on; else why it must stop: "memory", "cpu", "time" or "fence"."""
        if now >= min(self._next, self.started + self.starved + self.seconds, self.started + self.fence):
            self.sample(now)
        if self.memory_bytes is not None and self.memory > self.memory_bytes:
            return "memory"
        if self.cpu >= self.cpu_seconds:
            return "cpu"
        if self.own(now) >= self.seconds:
            return "time"
        if now - self.started >= self.fence:
            return "fence"
        return None

    def overloaded(self, name: str, now: float) -> Overloaded:
        what = "importing the submission" if name == "import" else f"`{name}`"
        return Overloaded(
            f"the grading machine was overloaded: {what} waited {self.starved:.0f} s for a CPU in "
            f"{now - self.started:.0f} s of wall-clock time and had used only {self.own(now):.0f} s of its "
            f"{self.seconds:g} s, so it was stopped; not the student's timeout: graded again on the next run "
            "(grade fewer submissions at once, or on a machine with more free cores)")
