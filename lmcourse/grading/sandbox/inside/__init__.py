"""Everything that runs inside the worker, on the far side of the trust boundary.

- `protocol`:   what both sides agree on (operations, reply tags, error kinds, exit codes)
- `wire`:       the frame format (JSON + ``.npy`` without pickle), used by both sides
- `probes`:     trusted helpers the checks run next to the student's module
- `confine`:    the limits the worker applies to itself (uid, rlimits, seccomp)
- `supervisor`: the worker's subreaper where bubblewrap gives no PID namespace
- `cells`:      loading a notebook's module cell by cell, reporting the cells that raise
- `main`:       the worker's loop: import the student's module, serve requests
- `__main__`:   the process's entry point

The grader imports `protocol`, `wire` and `probes` from here; it copies the
whole package into the worker's boot folder (`lmcourse.grading.sandbox.staging`)
and runs it there. Nothing in it imports from outside the package but the
standard library, NumPy and torch, and this file imports nothing, so the
worker loads only what it uses.
"""
