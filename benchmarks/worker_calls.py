"""Seconds per call into the sandboxed worker: the output drain that waits for the capture thread to be idle
(now) vs the one that slept 1 ms after every reply (before 2026-11-29), side by side in one process.

A check makes hundreds of calls (01-ngrams' 27 checks make 328); after each reply the grader waits until the
student's output of that call has been read, so that `captured_output` and the flood limit are exact. The
baseline slept 1 ms after every reply, printed or not; now the capture thread says when it holds nothing
unread, and a call that printed nothing waits for nothing. Both workers run the same module, alternately, so
that a busy machine slows both alike. Also timed: a function that prints a line each call (the drain's real
work), whose output must be captured whole by both.

    python benchmarks/worker_calls.py            # 400 calls each
    python benchmarks/worker_calls.py --n 2000
"""

from __future__ import annotations

import argparse
import fcntl
import sys
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmcourse.grading.sandbox.worker import Worker  # noqa: E402

SOURCE = "def f(x):\n    return x + 1\n\ndef loud(x):\n    print('call', x)\n    return x\n"


class SleepingDrain(Worker):
    """The baseline: the drain as it was, 1 ms of sleep after every reply."""

    def _drain_output(self, limit: float = 0.5) -> None:
        buf = bytearray(4)
        end = time.monotonic() + limit
        while time.monotonic() < end and self._capture.is_alive():
            try:
                fcntl.ioctl(self._capture_fd, termios.FIONREAD, buf)
            except OSError:
                return
            if int.from_bytes(buf, sys.byteorder) == 0:
                time.sleep(0.001)
                with self._out_lock:
                    return
            time.sleep(0.002)


def per_call(worker: Worker, name: str, n: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        assert worker.call(name, i) in (i, i + 1)
    return (time.perf_counter() - started) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=400, help="calls per worker and function (default 400)")
    args = p.parse_args()
    now, before = Worker(SOURCE), SleepingDrain(SOURCE)
    try:
        print(f"isolation: {now.isolation}")
        times = {("now", "f"): [], ("before", "f"): [], ("now", "loud"): [], ("before", "loud"): []}
        for _ in range(4):  # alternate, in rounds, so that both see the same machine
            for name in ("f", "loud"):
                times[("now", name)].append(per_call(now, name, args.n // 4))
                times[("before", name)].append(per_call(before, name, args.n // 4))
        for name, what in (("f", "a call that prints nothing"), ("loud", "a call that prints a line")):
            a = sum(times[("now", name)]) / 4
            b = sum(times[("before", name)]) / 4
            print(f"{what}: {a * 1e3:.3f} ms now, {b * 1e3:.3f} ms with the sleeping drain (baseline): "
                  f"ratio now/baseline {a / b:.2f}")
        want = sum(len(f"call {i}\n") for i in range(args.n // 4)) * 4
        for label, w in (("now", now), ("baseline", before)):
            got = len(w.captured_output)
            print(f"output captured ({label}): {got} of {want} bytes")
            if got != want:
                print("  the drain lost output", file=sys.stderr)
                return 1
    finally:
        now.close()
        before.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
