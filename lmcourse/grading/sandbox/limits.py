"""How much one submission's worker may use: CPU, memory, processes, files, time, output.

Time is the student's own (`meter.Clock`): a call's ``timeout`` (``call_timeout``
by default), the import's and the worker's ``total_timeout`` count wall-clock
time less the time the worker waited for a CPU, and at most that many CPU
seconds per thread it is given (`effective_threads`). The wall clock is only
the outer fence, ``wall_factor`` times as long: a call stopped there was kept
waiting by a busy machine, which is the grader's failure, not the student's.
Memory and processes are the submission's, all its processes together, where
a control group can be had (`cgroups`); each process keeps its rlimits too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60            # RLIMIT_CPU of one worker process, over its whole life
    memory_bytes: int = 4 << 30      # the submission's: its control group, and RLIMIT_AS (RLIMIT_DATA with a GPU)
    max_processes: int = 64          # tasks (threads count): the control group's pids.max, and RLIMIT_NPROC
    file_size_bytes: int = 64 << 20  # RLIMIT_FSIZE
    open_files: int = 256            # RLIMIT_NOFILE
    call_timeout: float = 30.0       # the call's own time (see above)
    total_timeout: float = 600.0     # own time of all calls and imports of a Worker, restarts included
    output_bytes: int = 64 << 10     # captured stdout+stderr kept (the rest is counted, dropped)
    # additions
    import_timeout: float | None = None   # own time for start + import; None: max(call_timeout, 30)
    flood_bytes: int = 8 << 20            # more output than this during one call fails it
    reply_bytes: int = 512 << 20          # arrays in one reply, all together
    max_restarts: int = 3                 # fresh processes after a timeout / crash
    threads: int = 0                      # OMP/MKL/torch threads; 0: min(4, cpu count)
    memory_rlimit: str = "auto"           # "as", "data" or "auto" (data when a GPU is exposed)
    gpu: bool | None = None               # expose /dev/nvidia*; None: when present
    # The wall-clock fence of a call or import, this many times its time: a worker that gets less than a fifth
    # of a core (more than four busy processes per core) is on a machine too busy to grade on.
    wall_factor: float = 5.0

    def effective_threads(self) -> int:
        """The threads the worker's libraries are told to use (and its CPU budget is sized for)."""
        return self.threads or min(4, os.cpu_count() or 1)

    def effective_import_timeout(self) -> float:
        return self.import_timeout if self.import_timeout is not None else max(self.call_timeout, 30.0)
