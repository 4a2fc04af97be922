"""The cheating suite: every known trick scores nothing; an honest module keeps its exact score.

A minimal trusted harness stands in for the pipeline: it computes the
reference here, asks the worker for the student's value, and compares with
*its own* numpy / math functions.  Each test asserts on the real effect of the
trick (file not created, listener got no connection, process not alive,
score zero), not on the worker's say-so.
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import shlex
import socket
import sqlite3
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from lmcourse.grading import sandbox
from lmcourse.grading.sandbox import Limits, StudentError, Worker
from lmcourse.grading.sandbox.plan import make_plan
from procs import alive

# Full isolation: bubblewrap, as root (a uid of its own) or, without root, in a user namespace.
# test_the_cheating_suite_without_root runs this whole file again as a user who is not root.
FULL = make_plan(None, force_no_bwrap=False, allocate=False).mode == "bwrap"
needs_full = pytest.mark.skipif(not FULL, reason="needs a working bubblewrap (full isolation)")
REPO = Path(sandbox.__file__).resolve().parents[3]
LIMITS = Limits(call_timeout=5, import_timeout=20, total_timeout=90, max_processes=32,
                memory_bytes=2 << 30, max_restarts=3)

INPUTS = [[1.0, 2.0, 4.0], [3.0], [0.1, 0.2, 0.3, 0.4], [float(i) for i in range(10)], [-5.0, 5.0, 1e-3]]
MAX = len(INPUTS)
HONEST = "def mean(xs):\n    return sum(xs) / len(xs)\n"


def reference_mean(xs):
    return sum(xs) / len(xs)                        # the "solution", computed on the trusted side


def grade(worker: Worker, name: str = "mean") -> int:
    """The trusted check: one point per input where the student's value is the reference."""
    points = 0
    for xs in INPUTS:
        expected = reference_mean(xs)
        try:
            found = worker.call(name, xs)
        except StudentError:
            continue
        if type(found) is float and math.isclose(found, expected, rel_tol=1e-12) \
                and bool(np.allclose(found, expected, rtol=1e-12, atol=0)):
            points += 1
    return points


def cheat(text: str) -> str:
    return textwrap.dedent(text)


@pytest.fixture(scope="module")
def honest():
    """An honest submission graded alongside every cheat (same process, same time)."""
    with Worker(HONEST, limits=LIMITS) as w:
        assert grade(w) == MAX
        yield w
        assert grade(w) == MAX


@pytest.fixture(autouse=True)
def honest_keeps_exact_score(honest):
    yield
    assert grade(honest) == MAX, "a cheat disturbed the honest submission graded next to it"


def score(source: str, limits: Limits = LIMITS, name: str = "mean") -> tuple[int, Worker]:
    w = Worker(source, limits=limits)
    try:
        return grade(w, name), w
    finally:
        w.close()


# --------------------------------------------------------------------------- #

def test_harness_can_fail():
    """Sanity: the harness gives partial credit to a half-right module, so zeros below mean something."""
    half = "def mean(xs):\n    return sum(xs) / len(xs) if len(xs) < 4 else 0.0\n"
    assert score(half)[0] == 3


def test_patched_comparison_functions_are_irrelevant():
    src = cheat('''
        import builtins, math
        import numpy, numpy.testing, torch
        numpy.allclose = lambda *a, **k: True
        numpy.isclose = lambda *a, **k: True
        numpy.array_equal = lambda *a, **k: True
        numpy.testing.assert_allclose = lambda *a, **k: None
        math.isclose = lambda *a, **k: True
        torch.allclose = lambda *a, **k: True
        def mean(xs):
            return 0.0
        def patched():
            return [numpy.allclose(1, 2), math.isclose(1, 2), torch.allclose(torch.zeros(1), torch.ones(1))]
    ''')
    w = Worker(src, limits=Limits(**{**LIMITS.__dict__, "import_timeout": 60}))
    try:
        assert w.import_error is None, w.import_error
        assert w.call("patched") == [True, True, True]        # patched in the worker...
        assert grade(w) == 0                                  # ...and worthless to the student
    finally:
        w.close()
    assert not np.allclose(1, 2) and not math.isclose(1, 2)   # untouched on the trusted side


@pytest.mark.parametrize("patch", ["builtins.isinstance = lambda *a: True", "builtins.type = lambda *a: float",
                                   "builtins.abs = lambda x: 0.0", "builtins.sum = lambda *a: 0.0",
                                   "builtins.float = LyingFloat"])
def test_patched_builtins_score_nothing(patch):
    src = cheat(f'''
        import builtins
        class LyingFloat(float):
            def __eq__(self, other): return True
            __hash__ = float.__hash__
        {patch}
        def mean(xs):
            return LyingFloat(0.0)
    ''')
    assert score(src)[0] == 0


@pytest.mark.parametrize("returned", [
    "AlwaysEqual()", "LyingFloat(0.0)", "LyingFloat(sum(xs) / len(xs))", "LyingList([0.0])",
    "LyingDict()", "LyingInt(0)", "LyingStr('0')", "numpy.array([AlwaysEqual()], dtype=object)",
    "(x for x in [0.0])", "numpy.zeros(1).view(LyingArray)",
])
def test_always_equal_objects_and_lying_subclasses(returned):
    src = cheat(f'''
        import numpy
        class AlwaysEqual:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = object.__hash__
        class LyingFloat(float):
            def __eq__(self, other): return True
            __hash__ = float.__hash__
        class LyingList(list):
            def __eq__(self, other): return True
        class LyingDict(dict):
            def __eq__(self, other): return True
        class LyingInt(int):
            def __eq__(self, other): return True
            __hash__ = int.__hash__
        class LyingStr(str):
            def __eq__(self, other): return True
            __hash__ = str.__hash__
        class LyingArray(numpy.ndarray):
            def __eq__(self, other): return numpy.ones(self.shape, bool)
        def mean(xs):
            return {returned}
    ''')
    w = Worker(src, limits=LIMITS)
    try:
        with pytest.raises(StudentError) as e:
            w.call("mean", [1.0])
        assert e.value.kind == "refused-output", e.value
        assert grade(w) == 0
    finally:
        w.close()


@pytest.mark.parametrize("where,how", [
    ("import", "sys.exit(0)"), ("import", "os._exit(0)"), ("call", "sys.exit(0)"), ("call", "os._exit(0)"),
    ("call", "raise KeyboardInterrupt"), ("call", "os.kill(os.getpid(), signal.SIGKILL)"),
])
def test_exits_score_nothing(where, how):
    body = f"    {how}\n    return sum(xs) / len(xs)\n" if where == "call" else "    return sum(xs) / len(xs)\n"
    src = "import os, sys, signal\n" + (f"{how}\n" if where == "import" else "") + "def mean(xs):\n" + body
    points, w = score(src)
    assert points == 0
    if where == "import":
        assert w.import_error is not None and w.import_error.kind == "import-error"
    assert w.alive_pids() == []


def test_written_results_files_change_nothing(tmp_path):
    out = tmp_path / "grades-out"
    (out / "alice").mkdir(parents=True)
    grades = out / "grades.csv"
    grades.write_text("student_id,score,max_score\nalice,0,5\n")
    before = grades.read_bytes()
    token = os.urandom(8).hex()
    src = cheat(f'''
        import json, os
        FAKE = json.dumps({{"score": 5, "max_score": 5, "tests": [], "token": "{token}"}})
        TARGETS = ["results.json", "grades.csv", "/tmp/results.json", "/tmp/grades.csv",
                   "{out}/grades.csv", "{out}/alice/results.json", "{out}/results.json",
                   "{Path.cwd()}/results.json", "/autograder/results/results.json"]
        def _write():
            done = []
            for t in TARGETS:
                try:
                    os.makedirs(os.path.dirname(t) or ".", exist_ok=True)
                    with open(t, "w") as f:
                        f.write(FAKE if t.endswith(".json") else "student_id,score\\nalice,5\\n{token}")
                    done.append(t)
                except OSError:
                    pass
            return done
        _write()
        def mean(xs):
            _write()
            return 0.0
    ''')
    points, w = score(src)
    assert points == 0
    if not FULL:
        # Without full isolation the student can write into the host's folders (the
        # isolation string says so); the grader still never reads what the worker wrote.
        return
    assert grades.read_bytes() == before
    assert not (out / "alice" / "results.json").exists() and not (out / "results.json").exists()
    for host_path in ("/tmp/results.json", "/tmp/grades.csv", Path.cwd() / "results.json",
                      "/autograder/results/results.json"):
        p = Path(host_path)
        assert not (p.exists() and token in p.read_text(errors="replace")), p


@needs_full
def test_hidden_checks_solutions_and_other_submissions_are_unreadable(tmp_path):
    other = tmp_path / "submissions" / "bob.ipynb"
    other.parent.mkdir()
    secret = "SECRET-" + os.urandom(8).hex()
    other.write_text(secret)
    os.chmod(tmp_path, 0o755)
    targets = [str(other), str(REPO / "autograder" / "README.md"), str(REPO / "solutions"),
               str(REPO / "autograder"), str(REPO / "Makefile"), str(REPO / "tests"), "/etc/shadow",
               "/root", str(Path.home())]
    src = cheat(f'''
        import os
        def peek():
            found = {{}}
            for t in {targets!r}:
                try:
                    found[t] = sorted(os.listdir(t)) if os.path.isdir(t) else open(t).read()
                except OSError as e:
                    found[t] = "ERR " + type(e).__name__
            return found
        def mean(xs):
            peek()
            return 0.0
    ''')
    with Worker(src, limits=LIMITS) as w:
        found = w.call("peek")
        assert grade(w) == 0
    for t in targets[:6]:
        assert found[t].startswith("ERR") or found[t] == [], (t, found[t])
    assert secret not in repr(found)
    readme = (REPO / "autograder" / "README.md")
    if readme.exists():
        assert readme.read_text()[:200] not in repr(found)


def test_gradebook_edits_are_impossible(tmp_path):
    db = tmp_path / "out" / "gradebook.db"
    db.parent.mkdir()
    with sqlite3.connect(db) as con:
        con.execute("create table grade (student text, score real)")
        con.execute("insert into grade values ('alice', 0)")
    os.chmod(db, 0o666)                 # even a world-writable gradebook
    os.chmod(db.parent, 0o777)
    os.chmod(tmp_path, 0o755)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    src = cheat(f'''
        import sqlite3
        def mean(xs):
            try:
                with sqlite3.connect("{db}") as con:
                    con.execute("update grade set score = 100")
            except Exception:
                pass
            try:
                with open("{db}", "r+b") as f:
                    f.write(b"corrupt")
            except OSError:
                pass
            return 0.0
    ''')
    points, _ = score(src)
    assert points == 0
    if FULL:
        assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    with sqlite3.connect(db) as con:
        if FULL:
            assert con.execute("select score from grade").fetchall() == [(0.0,)]


def test_ipython_input_transformers_do_nothing():
    src = cheat('''
        import IPython
        from IPython.core.interactiveshell import InteractiveShell
        BEFORE = IPython.get_ipython()
        shell = InteractiveShell.instance()
        def always_pass(lines):
            return ["assert True\\n"] + [l.replace("assert", "pass #") for l in lines]
        shell.input_transformers_post.append(always_pass)
        shell.input_transformers_cleanup.append(always_pass)
        def mean(xs):
            return 0.0
        def state():
            return [BEFORE is None, len(shell.input_transformers_post)]
    ''')
    w = Worker(src, limits=Limits(**{**LIMITS.__dict__, "import_timeout": 60}))
    try:
        assert w.import_error is None, w.import_error
        assert w.call("state")[0] is True          # no IPython kernel in the worker to hook into
        assert grade(w) == 0
    finally:
        w.close()
    import IPython
    assert IPython.get_ipython() is None           # nothing registered on the trusted side


@needs_full
def test_killing_the_parent_and_everything_else():
    grader = os.getpid()
    src = cheat(f'''
        import os, signal
        def _kill_all():
            if os.getuid() == 0:
                return      # test safety net: never run this as root outside the namespace sandbox
            for target in (os.getppid(), {grader}, 1, -1):
                try:
                    os.kill(target, signal.SIGKILL)
                except OSError:
                    pass
            for p in os.listdir("/proc"):
                if p.isdigit() and int(p) != os.getpid():
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except OSError:
                        pass
        _kill_all()
        def mean(xs):
            _kill_all()
            return 0.0
    ''')
    with Worker("def whoami():\n    import os\n    return os.getuid()\n", limits=LIMITS) as probe:
        assert probe.isolation.startswith("full") and probe.call("whoami") != 0
    points, w = score(src)
    assert points == 0 and w.isolation.startswith("full")
    assert alive(grader)                            # we are still here (the honest fixture checks too)


@needs_full
def test_bounded_fork_bomb():
    src = cheat('''
        import os, time
        def bomb(n):
            made = 0
            for _ in range(n):
                try:
                    if os.fork() == 0:
                        time.sleep(120)
                        os._exit(0)
                    made += 1
                except OSError:
                    pass
            return made
        def mean(xs):
            bomb(500)
            return 0.0
    ''')
    # RLIMIT_NPROC counts every task of a uid. As root the worker has a fresh uid, so the limit is its own;
    # without root it shares yours, and gets max_processes on top of the tasks (threads too) you already run.
    allowance = 0 if os.geteuid() == 0 else sandbox.reaping.count_tasks_of_uid(os.geteuid()) + 8
    with Worker(src, limits=LIMITS) as w:
        made = w.call("bomb", 500)
        pids = w.alive_pids()
        assert made < LIMITS.max_processes + allowance, made
        assert len(pids) <= LIMITS.max_processes + allowance + 1   # + namespace init
        assert grade(w) == 0
    assert not any(alive(p) for p in pids)


def test_bounded_memory_bomb():
    src = cheat('''
        def mean(xs):
            hog = bytearray(20 << 30)
            return 0.0
        def creep(xs):
            hog = []
            for _ in range(200):
                hog.append(bytearray(100 << 20))       # 20 GB in 100 MB steps
            return 0.0
    ''')
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Worker(src, limits=Limits(**{**LIMITS.__dict__, "memory_bytes": 1 << 30})) as w:
        assert grade(w) == 0
        with pytest.raises(StudentError) as e:
            w.call("creep", [1.0])
        assert "MemoryError" in e.value.message
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 200_000   # KB: grader unaffected


def test_memory_spread_over_children():
    """Each process within its own limit, all of them over the submission's: three children holding 1.5 GB
    each against a 4 GB budget. The submission is bounded as a whole (a control group as root; without one,
    its processes watched together while a call runs), so the call is a memory failure, not a grade."""
    src = cheat('''
        import os, time
        def mean(xs):
            pids = []
            for _ in range(3):
                pid = os.fork()
                if pid == 0:
                    held = b"\\1" * (3 << 29)
                    time.sleep(4)
                    os._exit(0)
                pids.append(pid)
            for p in pids:
                os.waitpid(p, 0)
            return sum(xs) / len(xs)
    ''')
    with Worker(src, limits=Limits(**{**LIMITS.__dict__, "memory_bytes": 4 << 30, "call_timeout": 60})) as w:
        with pytest.raises(StudentError) as e:
            w.call("mean", [1.0])
        assert e.value.kind == "memory", e.value
    assert w.alive_pids() == [] and w.leaked == []


def test_output_flood():
    src = cheat('''
        import sys
        def mean(xs):
            sys.stdout.write("A" * (100 << 20))
            return sum(xs) / len(xs)
    ''')
    with Worker(src, limits=Limits(**{**LIMITS.__dict__, "call_timeout": 20})) as w:
        with pytest.raises(StudentError) as e:
            w.call("mean", [1.0])
        assert e.value.kind == "output-too-large"
        assert len(w.captured_output) < LIMITS.output_bytes + 200
    points, w = score("print('B' * (100 << 20))\n" + HONEST)
    assert points == 0 and w.import_error is not None


def test_infinite_loops():
    points, w = score("while True:\n    pass\n" + HONEST, limits=Limits(**{**LIMITS.__dict__, "import_timeout": 3}))
    assert points == 0 and "did not finish" in w.import_error.message
    with Worker("def mean(xs):\n    while True:\n        pass\n",
                limits=Limits(**{**LIMITS.__dict__, "call_timeout": 1})) as w:
        with pytest.raises(StudentError) as e:
            w.call("mean", [1.0])
        assert e.value.kind == "timeout", e.value
        assert grade(w) == 0
    assert w.alive_pids() == []


@needs_full
def test_network_connection_to_a_loopback_listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(1.0)
    port = srv.getsockname()[1]
    src = cheat(f'''
        import socket
        def mean(xs):
            for host in ("127.0.0.1", "localhost", "::1"):
                try:
                    s = socket.create_connection((host, {port}), timeout=1)
                    s.sendall(b"score=100")
                except OSError:
                    pass
            return 0.0
    ''')
    try:
        points, _ = score(src)
        assert points == 0
        with pytest.raises(socket.timeout):
            srv.accept()                             # nobody ever connected
    finally:
        srv.close()


@needs_full
def test_orphaned_background_process_is_gone_after_close():
    src = cheat('''
        import os, time
        def mean(xs):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(300)
                os._exit(0)
            os.wait()
            return 0.0
    ''')
    w = Worker(src, limits=LIMITS)
    try:
        assert grade(w) == 0
        pids = w.alive_pids()
        assert len(pids) >= 3                        # namespace init, worker, the orphan(s)
    finally:
        w.close()
    assert not any(alive(p) for p in pids)
    assert w.alive_pids() == [] and w.leaked == []


def test_honest_submission_graded_fresh_at_the_end():
    points, w = score(HONEST)
    assert points == MAX and w.import_error is None


NOT_ROOT_UID = 4321  # a uid with no account: what a grader without root has is only its uid


def _reachable_as(uid_path: Path) -> list[tuple[str, str]]:
    """(closed folder, its child on the way to ``uid_path``) for every folder a user who is not root
    cannot pass through (no o+x), such as /root above a pyenv Python."""
    closed = []
    path = Path(os.path.realpath(uid_path))
    for folder in reversed(path.parents):
        if folder != path and not os.stat(folder).st_mode & 0o001:
            closed.append((str(folder), path.relative_to(folder).parts[0]))
    return closed


@pytest.mark.skipif(os.geteuid() != 0, reason="runs this file again as a user who is not root: needs root to start")
def test_the_cheating_suite_without_root(tmp_path):
    """A grader without root (a cluster account, say) gets bubblewrap in a user namespace: every cheat above
    must still score nothing there. The whole file runs again as uid 4321, with no capability at all, in a
    mount namespace of its own where the folders above the Python install that only root may pass through
    (/root for a pyenv Python) are replaced by open ones holding just the Python install."""
    import shutil
    import subprocess
    import sys

    for tool in ("unshare", "setpriv", "mount", "bwrap"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    closed = {c for target in (sys.base_prefix, sys.prefix, REPO) for c in _reachable_as(Path(target))}
    hidden = tmp_path / "hidden"
    steps = []
    for i, (folder, child) in enumerate(sorted(closed)):
        keep = hidden / str(i)
        keep.mkdir(parents=True)
        steps += [f"mount --bind {shlex.quote(folder)} {shlex.quote(str(keep))}",
                  f"mount -t tmpfs -o mode=755 tmpfs {shlex.quote(folder)}",
                  f"mkdir -p {shlex.quote(folder + '/' + child)}",
                  f"mount --bind {shlex.quote(str(keep / child))} {shlex.quote(folder + '/' + child)}"]
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, NOT_ROOT_UID, NOT_ROOT_UID)
    os.chmod(tmp_path, 0o755)
    pytest_cmd = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rs", __file__])
    script = " && ".join(steps + [
        f"exec setpriv --reuid={NOT_ROOT_UID} --regid={NOT_ROOT_UID} --clear-groups --inh-caps=-all -- "
        f"env HOME={shlex.quote(str(home))} PYTHONDONTWRITEBYTECODE=1 {pytest_cmd}"])
    run = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
                         capture_output=True, text=True, cwd="/", timeout=900)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    assert " passed" in run.stdout and "needs a working bubblewrap" not in run.stdout, tail
    assert "1 skipped" in run.stdout, tail  # this test itself, and nothing else
