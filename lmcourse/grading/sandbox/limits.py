"""How much one submission's worker may use: CPU, memory, processes, files, time, output."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60            # RLIMIT_CPU of one worker process
    memory_bytes: int = 4 << 30      # RLIMIT_AS (RLIMIT_DATA when a GPU is exposed)
    max_processes: int = 64          # RLIMIT_NPROC budget of the worker's uid (threads count)
    file_size_bytes: int = 64 << 20  # RLIMIT_FSIZE
    open_files: int = 256            # RLIMIT_NOFILE
    call_timeout: float = 30.0       # wall clock per call
    total_timeout: float = 600.0     # wall clock per Worker, restarts included
    output_bytes: int = 64 << 10     # captured stdout+stderr kept (the rest is counted, dropped)
    # additions
    import_timeout: float | None = None   # wall clock for start + import; None: max(call_timeout, 30)
    flood_bytes: int = 8 << 20            # more output than this during one call fails it
    reply_bytes: int = 512 << 20          # arrays in one reply, all together
    max_restarts: int = 3                 # fresh processes after a timeout / crash
    threads: int = 0                      # OMP/MKL/torch threads; 0: min(4, cpu count)
    memory_rlimit: str = "auto"           # "as", "data" or "auto" (data when a GPU is exposed)
    gpu: bool | None = None               # expose /dev/nvidia*; None: when present

    def effective_import_timeout(self) -> float:
        return self.import_timeout if self.import_timeout is not None else max(self.call_timeout, 30.0)
