"""The sandboxed worker: calls, errors, restarts, limits, probes, isolation layers."""

from __future__ import annotations

import os
import socket
import textwrap
import time
import types

import numpy as np
import pytest

import sys
from pathlib import Path

from lmcourse.grading import sandbox
from lmcourse.grading.sandbox.inside import probes
from lmcourse.grading.sandbox import Limits, SandboxError, StudentError, Worker
from lmcourse.grading.sandbox.plan import bwrap_status, reachable_by_others
from procs import alive

ROOT = os.geteuid() == 0
FULL = ROOT and bwrap_status()[0]
needs_full = pytest.mark.skipif(not FULL, reason="full isolation needs root and a working bubblewrap")
FAST = Limits(call_timeout=10, import_timeout=20, total_timeout=120, cpu_seconds=30)


def src(text: str) -> str:
    return textwrap.dedent(text)


BASIC = src('''
    import numpy as np
    CONSTANT = 3
    def add(a, b=0):
        return a + b
    def scale(x, k):
        return np.asarray(x) * k
    def fail():
        raise KeyError("no such word")
    def gen():
        yield 1
    def spin():
        while True:
            pass
    def chatty(n):
        print("x" * n)
        return n
    def read(name):
        with open(name) as f:
            return f.read()
''')


@pytest.fixture(scope="module")
def basic():
    with Worker(BASIC, limits=FAST, extra_files={"data/words.txt": b"cat dog\n"}) as w:
        yield w


def test_calls_return_plain_data(basic):
    assert basic.import_error is None
    assert basic.call("add", 2, b=3) == 5
    out = basic.call("scale", np.arange(4, dtype=np.float32), 2)
    assert type(out) is np.ndarray and out.dtype == np.float32 and out.tolist() == [0, 2, 4, 6]
    assert basic.call("add", [1], [2]) == [1, 2]
    assert basic.call("read", "data/words.txt") == "cat dog\n"
    assert basic.has("add") and basic.has("CONSTANT") and not basic.has("nope")
    assert "add" in basic.names


def test_student_errors_have_kinds_and_readable_messages(basic):
    with pytest.raises(StudentError) as e:
        basic.call("fail")
    assert e.value.kind == "exception" and "KeyError" in e.value.message and "no such word" in e.value.message
    assert "raise KeyError" in e.value.message          # the student's own line, not grader internals
    assert "lmc_inside" not in e.value.message and "sandbox" not in e.value.message
    with pytest.raises(StudentError) as e:
        basic.call("nope")
    assert e.value.kind == "missing" and "`nope`" in e.value.message
    with pytest.raises(StudentError) as e:
        basic.call("CONSTANT")
    assert e.value.kind == "missing" and "not a function" in e.value.message
    with pytest.raises(StudentError) as e:
        basic.call("gen")
    assert e.value.kind == "refused-output" and "generator" in e.value.message
    assert basic.call("add", 1, 1) == 2                   # still serving


def test_output_is_captured_and_capped():
    with Worker(BASIC, limits=Limits(output_bytes=1000, flood_bytes=1 << 20, call_timeout=10)) as w:
        assert w.call("chatty", 10) == 10
        assert "xxxxxxxxxx" in w.captured_output
        assert w.call("chatty", 500_000) == 500_000        # over the cap, under the flood limit
        out = w.captured_output
        assert len(out) < 1200 and "more output not shown" in out
        with pytest.raises(StudentError) as e:
            w.call("chatty", 3 << 20)
        assert e.value.kind == "output-too-large"


@pytest.mark.parametrize("body,needle", [
    ("def f(:\n    pass\n", "SyntaxError"),
    ("raise RuntimeError('setup failed')\n", "setup failed"),
    ("import sys\nsys.exit(0)\n", "sys.exit"),
    ("import os\nos._exit(0)\n", "exit"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "SIGKILL"),
    ("while True:\n    pass\n", "did not finish"),
])
def test_import_failures_never_raise_from_init(body, needle):
    t0 = time.monotonic()
    w = Worker(body + "\ndef f():\n    return 1\n", limits=Limits(import_timeout=3, call_timeout=5))
    try:
        err = w.import_error
        assert err is not None and err.kind == "import-error", err
        assert needle in err.message, err.message
        for _ in range(2):
            with pytest.raises(StudentError) as e:
                w.call("f")
            assert e.value is err
        assert not w.has("f")
        assert w.alive_pids() == []
    finally:
        w.close()
    assert time.monotonic() - t0 < 30


def test_timeout_kills_then_next_call_gets_a_fresh_process():
    with Worker(BASIC, limits=FAST) as w:
        before = set(w.alive_pids())
        t0 = time.monotonic()
        with pytest.raises(StudentError) as e:
            w.call("spin", timeout=1.5)
        assert e.value.kind == "timeout" and time.monotonic() - t0 < 8
        assert not any(alive(p) for p in before)
        assert w.call("add", 1, 2) == 3                    # restarted, module imported again


def test_total_timeout_and_restart_budget():
    with Worker(BASIC, limits=Limits(total_timeout=4, call_timeout=30, import_timeout=20)) as w:
        with pytest.raises(StudentError) as e:
            w.call("spin")
        assert e.value.kind == "timeout"
        with pytest.raises(StudentError) as e:
            w.call("add", 1, 2)
        assert e.value.kind == "timeout" and "whole time budget" in e.value.message
    with Worker(BASIC, limits=Limits(max_restarts=1, call_timeout=1, import_timeout=20)) as w:
        for _ in range(2):
            with pytest.raises(StudentError):
                w.call("spin")
        with pytest.raises(StudentError) as e:
            w.call("add", 1, 2)
        assert e.value.kind == "crashed" and "stopped 2 times" in e.value.message


FORGER = src('''
    import glob, json, os, struct
    def _fds():
        cfg = json.load(open(sorted(glob.glob(os.path.join(os.path.dirname(__file__), "config-*.json")))[-1]))
        return cfg["reply_fd"]
    def _frame(msg_id, value):
        body = json.dumps([msg_id, "ok", value]).encode()
        return b"LMCW" + struct.pack(">II", len(body), 0) + body
    def forge(n):
        fd = _fds()
        for i in range(n):
            os.write(fd, _frame("%032x" % i, 999))      # replies to requests that were never made
        return 1
    def garble():
        os.write(_fds(), b"LMCW\\xff\\xff\\xff\\xff garbage")
        return 1
    def close_pipe():
        os.close(_fds())
        return 1
    def add(a, b):
        return a + b
''')


def test_forged_replies_are_never_taken_for_a_later_answer():
    with Worker(FORGER, limits=FAST) as w:
        assert w.call("forge", 20) == 1
        assert w.call("add", 1, 2) == 3
        assert w.call("add", 2, 2) == 4
        with pytest.raises(StudentError) as e:
            w.call("garble")
        assert e.value.kind == "crashed" and "malformed" in e.value.message
        assert w.call("add", 5, 5) == 10                   # fresh process after the garbage
        with pytest.raises(StudentError) as e:
            w.call("close_pipe")
        assert e.value.kind == "crashed"
        assert w.call("add", 6, 6) == 12


# ------------------------------------------------------------------ probes

PROBE_MODULE = src('''
    import torch
    from torch import nn
    from torch.nn.functional import scaled_dot_product_attention as sdpa  # bound at import, before any guard

    class Block(nn.Module):
        def __init__(self, d, hidden=8):
            super().__init__()
            self.up = nn.Linear(d, hidden)
            self.down = nn.Linear(hidden, d)
        def forward(self, x):
            return x + self.down(torch.tanh(self.up(x)))
        def norm(self, x, p=2):
            return torch.linalg.vector_norm(x, ord=p, dim=-1)

    class Carry(nn.Module):  # takes and returns a (h, c) pair, as an LSTM cell does
        def __init__(self, d):
            super().__init__()
            self.w = nn.Linear(d, d)
        def forward(self, x, state):
            h, c = state
            return torch.tanh(self.w(x) + h), c * 2 + h

    class BuiltIn(nn.Module):  # PyTorch's own recurrent cell
        def __init__(self, d):
            super().__init__()
            self.cell = nn.LSTMCell(d, d)
        def forward(self, x):
            return self.cell(x)[0]

    class BuiltInAttention(nn.Module):  # PyTorch's own attention, through the name bound at import
        def forward(self, x):
            return sdpa(x, x, x)

    def mean_square(x, scale=1.0):
        return scale * (x ** 2).mean()

    def halve_grads(parameters, factor=0.5):
        n = 0
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(factor)
                n += 1
        return n

    def train(steps, d):
        torch.manual_seed(0)
        m = Block(d)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(steps):
            x = torch.randn(16, d)
            loss = ((m(x) - x.flip(-1)) ** 2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
        return m
''')


@pytest.fixture(scope="module")
def probe_worker():
    with Worker(PROBE_MODULE, limits=Limits(call_timeout=60, import_timeout=90, total_timeout=300)) as w:
        assert w.import_error is None, w.import_error
        yield w


@pytest.fixture(scope="module")
def trusted_module():
    pytest.importorskip("torch")
    mod = types.ModuleType("trusted_copy")
    exec(compile(PROBE_MODULE, "trusted_copy", "exec"), mod.__dict__)
    return mod


def test_probe_module_forward_matches_trusted_run(probe_worker, trusted_module):
    rng = np.random.default_rng(0)
    sd = {"up.weight": rng.standard_normal((8, 4)).astype(np.float32),
          "up.bias": rng.standard_normal(8).astype(np.float32),
          "down.weight": rng.standard_normal((4, 8)).astype(np.float32),
          "down.bias": rng.standard_normal(4).astype(np.float32)}
    x = rng.standard_normal((3, 4)).astype(np.float32)
    kw = dict(cls="Block", init_kwargs={"d": 4}, state_dict=sd, inputs=[x], grad=True, seed=3)
    got = probe_worker.probe("module_forward", **kw)
    ref = probes.run_local("module_forward", trusted_module, **kw)
    assert set(got) == {"outputs", "input_grads", "param_grads"}
    np.testing.assert_allclose(got["outputs"][0], ref["outputs"][0], rtol=1e-6)
    np.testing.assert_allclose(got["input_grads"][0], ref["input_grads"][0], rtol=1e-5)
    assert set(got["param_grads"]) == set(sd)
    for k in sd:
        assert got["param_grads"][k].shape == sd[k].shape
        np.testing.assert_allclose(got["param_grads"][k], ref["param_grads"][k], rtol=1e-5, atol=1e-7)
    # the given weights were really used: other weights give other outputs
    sd2 = {k: v + 1 for k, v in sd.items()}
    other = probe_worker.probe("module_forward", **{**kw, "state_dict": sd2, "grad": False})
    assert not np.allclose(other["outputs"][0], got["outputs"][0])


def test_probe_shapes_methods_training(probe_worker, trusted_module):
    shapes = probe_worker.probe("parameter_shapes", cls="Block", init_kwargs={"d": 4, "hidden": 6})
    assert shapes == {"up.weight": (6, 4), "up.bias": (6,), "down.weight": (4, 6), "down.bias": (4,),
                      "__total__": 6 * 4 + 6 + 4 * 6 + 4}
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = probe_worker.probe("call_method", cls="Block", init_kwargs={"d": 4}, method="norm",
                             args=[x], kwargs={"p": 1}, tensors=True)
    assert type(out) is np.ndarray and out.tolist() == [6.0, 22.0]
    ev = np.ones((5, 4), np.float32)
    kept = probe_worker.probe("train_and_keep", fn="train", config={"steps": 3, "d": 4})
    got = probe_worker.probe("evaluate_kept", eval_inputs=ev)
    ref_kept = probes.run_local("train_and_keep", trusted_module, fn="train", config={"steps": 3, "d": 4})
    ref = probes.run_local("evaluate_kept", trusted_module, eval_inputs=ev)
    np.testing.assert_allclose(got["logits"], ref["logits"], rtol=1e-5)
    assert set(kept["state_dict"]) == set(ref_kept["state_dict"]) and "logits" not in kept
    with pytest.raises(StudentError, match="no trained model is kept"):  # evaluated once, then dropped
        probe_worker.probe("evaluate_kept", eval_inputs=ev)
    with pytest.raises(StudentError) as e:
        probe_worker.probe("module_forward", cls="Missing", inputs=[x])
    assert e.value.kind == "missing" and "Missing" in e.value.message
    with pytest.raises(ValueError):
        probe_worker.probe("no_such_probe")


def test_probe_tuple_inputs_tensor_functions_and_parameters(probe_worker, trusted_module):
    rng = np.random.default_rng(1)
    x, h, c = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
    kw = dict(cls="Carry", init_kwargs={"d": 3}, inputs=[x, (h, c)], seed=0)
    got = probe_worker.probe("module_forward", **kw)
    ref = probes.run_local("module_forward", trusted_module, **kw)
    gx, (gh, gc) = got["input_grads"]  # a pair in, a pair of gradients out
    for a, b in zip((gx, gh, gc), (ref["input_grads"][0], *ref["input_grads"][1])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert np.abs(gc).sum() > 0

    out = probe_worker.probe("call_with_tensors", fn="mean_square", args=[x], kwargs={"scale": 2.0}, grad_args=[0])
    np.testing.assert_allclose(out["result"], 2 * (x.astype(np.float64) ** 2).mean(), rtol=1e-6)
    np.testing.assert_allclose(out["grads"][0], 4 * x / x.size, rtol=1e-5)
    assert type(probe_worker.probe("call_with_tensors", fn="mean_square", args=[x])) is np.ndarray

    grads = [np.ones((2, 2), np.float32), None, np.full(3, 4.0, np.float32)]
    out = probe_worker.probe("call_with_parameters", fn="halve_grads", grads=grads, iterator=True)
    assert out["result"] == 2 and out["grads"][1] is None
    np.testing.assert_allclose(out["grads"][0], 0.5)
    np.testing.assert_allclose(out["grads"][2], 2.0)


def test_probe_refuses_builtin_rnn_only_when_asked(probe_worker, trusted_module):
    x = np.ones((2, 3), np.float32)
    kw = dict(cls="BuiltIn", init_kwargs={"d": 3}, inputs=[x], grad=False)
    with pytest.raises(StudentError) as e:
        probe_worker.probe("module_forward", no_builtin_rnn=True, **kw)
    assert e.value.kind == "exception" and "BuiltinRNNUsed" in e.value.message
    assert e.value.message.startswith("`BuiltIn` raised")  # the student's class, not the probe's name
    assert probe_worker.probe("module_forward", **kw)["outputs"][0].shape == (2, 3)  # restored afterwards
    import torch
    with probes.without_builtin_rnn():
        with pytest.raises(probes.BuiltinRNNUsed):
            torch.nn.LSTM(3, 4)(torch.ones(1, 2, 3))
        with pytest.raises(probes.BuiltinRNNUsed):
            torch.nn.GRUCell(3, 4)(torch.ones(2, 3))
    assert torch.nn.LSTM(3, 4)(torch.ones(1, 2, 3))[0].shape == (1, 2, 4)


def test_probe_refuses_builtin_attention_only_when_asked(probe_worker):
    """As with recurrent layers; the student's module called PyTorch's function by a name it bound at import."""
    x = np.ones((2, 3, 4), np.float32)
    kw = dict(cls="BuiltInAttention", inputs=[x], grad=False)
    with pytest.raises(StudentError) as e:
        probe_worker.probe("module_forward", no_builtin_attention=True, **kw)
    assert e.value.kind == "exception" and "BuiltinAttentionUsed" in e.value.message
    assert "asks for attention written with tensor operations" in e.value.message
    assert e.value.message.startswith("`BuiltInAttention` raised")
    assert probe_worker.probe("module_forward", **kw)["outputs"][0].shape == (2, 3, 4)  # restored afterwards


# ------------------------------------------------------------------ partial mode (no namespaces)

LIMITS_MODULE = src('''
    import os, time
    def burn():
        x = 0
        while True:
            x += 1
    def eat(gb):
        return len(bytearray(int(gb * (1 << 30))))
    def big_file(mb):
        with open("big.bin", "wb") as f:
            f.write(b"x" * int(mb * (1 << 20)))
        return os.path.getsize("big.bin")
    def many_files(n):
        return len([open(__file__) for _ in range(n)])
    def orphan():
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(w, str(os.getpid()).encode())
                time.sleep(300)
            os._exit(0)
        os.wait()
        return int(os.read(r, 100))
    def whoami():
        return os.getuid()
''')


def test_partial_mode_still_applies_limits():
    lim = Limits(cpu_seconds=2, memory_bytes=1 << 30, file_size_bytes=1 << 20, open_files=64,
                 call_timeout=20, import_timeout=30)
    with Worker(LIMITS_MODULE, limits=lim, isolate=False) as w:
        assert w.isolation.startswith("partial") and "turned off" in w.isolation
        with pytest.raises(StudentError) as e:
            w.call("eat", 2)
        assert e.value.kind == "exception" and "MemoryError" in e.value.message
        with pytest.raises(StudentError) as e:
            w.call("big_file", 2)
        assert e.value.kind == "exception" and "File too large" in e.value.message
        assert w.call("big_file", 0.5) == 1 << 19
        with pytest.raises(StudentError) as e:
            w.call("many_files", 100)
        assert "Too many open files" in e.value.message
        orphan = w.call("orphan")
        assert alive(orphan)                              # a double-forked, setsid'd orphan...
        t0 = time.monotonic()
        with pytest.raises(StudentError) as e:
            w.call("burn")                                # CPU limit (2 s) before the wall clock (20 s)
        assert e.value.kind == "timeout" and "CPU" in e.value.message and time.monotonic() - t0 < 15
        assert not alive(orphan)                          # ...is gone with its worker
        orphan = w.call("orphan")
        assert alive(orphan)
    assert not alive(orphan)                              # and on close()
    assert w.alive_pids() == [] and w.leaked == []


def test_partial_mode_killing_the_supervisor_is_survivable():
    code = LIMITS_MODULE + src('''
        import signal
        def kill_parent():
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(5)
            return 1
    ''')
    with Worker(code, limits=FAST, isolate=False) as w:
        uid = w.call("whoami")
        orphan = w.call("orphan")
        with pytest.raises(StudentError) as e:
            w.call("kill_parent")
        if uid == os.getuid():                            # the worker may signal the supervisor: it dies
            assert e.value.kind == "crashed"
            assert not alive(orphan)                      # found by its marker, killed
        else:  # root whose Python others can read: a private uid, which cannot signal root's supervisor
            assert e.value.kind == "exception" and "PermissionError" in e.value.message
        assert w.call("whoami") == uid                    # the next call is served (by a fresh worker)
    assert w.alive_pids() == [] and w.leaked == []


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_root_without_bubblewrap_drops_root_or_refuses():
    reachable = reachable_by_others(Path(sys.base_prefix)) and \
        reachable_by_others(Path(sys.prefix))
    if not reachable:                                   # never student code as root by default
        with pytest.raises(SandboxError, match="refusing to run student code as root"):
            Worker(LIMITS_MODULE, limits=FAST, _force_no_bwrap=True)
        return
    with Worker(LIMITS_MODULE, limits=FAST, _force_no_bwrap=True) as w:
        assert w.isolation.startswith("partial: root, but")
        assert "NOT hidden" in w.isolation
        assert w.call("whoami") != 0
        orphan = w.call("orphan")
        assert alive(orphan)
    assert not alive(orphan)


# ------------------------------------------------------------------ full isolation

VIEW = src('''
    import os
    def view():
        return {"root": sorted(os.listdir("/")), "uid": os.getuid(), "gid": os.getgid(),
                "groups": os.getgroups(), "cwd": os.getcwd(), "pid": os.getpid(),
                "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))],
                "nnp": [l.split()[1] for l in open("/proc/self/status") if l.startswith("NoNewPrivs")][0],
                "visible_pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
    def exists(path):
        return os.path.exists(path)
    def writable(path):
        try:
            with open(path, "w") as f:
                f.write("x")
            return True
        except OSError:
            return False
''')


@needs_full
def test_full_isolation_layers():
    with Worker(VIEW, limits=FAST) as w:
        assert w.isolation.startswith("full: uid ")
        v = w.call("view")
        assert v["uid"] != 0 and v["uid"] == v["gid"] and v["groups"] == []
        assert str(v["uid"]) in w.isolation
        assert v["caps"] == ["0000000000000000", "0000000000000000"] and v["nnp"] == "1"
        assert v["pid"] < 10 and len(v["visible_pids"]) <= 3    # own PID namespace
        assert v["cwd"] == "/sandbox/home"
        repo = Path(sandbox.__file__).resolve().parents[3]
        for hidden in ("autograder", "solutions", "tests", "Makefile"):
            assert w.call("exists", str(repo / hidden)) is False
        assert w.call("exists", sys.prefix) is True and w.call("exists", "/etc/shadow") is False
        assert w.call("writable", "/sandbox/home/x.txt") is True
        assert w.call("writable", "/sandbox/boot/submission.py") is False
        assert w.call("writable", "/usr/x") is False
        host_pids = w.alive_pids()
        assert len(host_pids) == 2                        # namespace init + the worker
    assert all(not alive(p) for p in host_pids)


@needs_full
def test_two_workers_get_different_uids_and_cannot_see_each_other():
    with Worker(VIEW, limits=FAST) as a, Worker(VIEW, limits=FAST) as b:
        assert a.call("view")["uid"] != b.call("view")["uid"]
        assert a.workdir != b.workdir
        assert a.call("writable", str(b.workdir / "home" / "x")) is False


@needs_full
def test_network_is_private():
    code = src('''
        import socket
        def connect(port):
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", port))
                return "connected"
            except OSError as e:
                return type(e).__name__
    ''')
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.5)
    with Worker(code, limits=FAST) as w:
        assert w.call("connect", srv.getsockname()[1]) != "connected"
    with pytest.raises(socket.timeout):
        srv.accept()
    srv.close()


GRADER_SCRIPT = src('''
    import json, sys, time
    from lmcourse.grading.sandbox import Limits, Worker
    isolate = {"full": None, "partial": False}[sys.argv[1]]
    w = Worker(sys.argv[2], limits=Limits(call_timeout=20, import_timeout=60), isolate=isolate)
    orphan = w.call("orphan")
    print(json.dumps({"pids": w.alive_pids(), "orphan": orphan, "isolation": w.isolation,
                      "workdir": str(w.workdir)}), flush=True)
    time.sleep(300)
''')


@pytest.mark.parametrize("mode", ["full", "partial"])
def test_no_worker_process_survives_a_killed_grader(mode, tmp_path):
    if mode == "full" and not FULL:
        pytest.skip("needs full isolation")
    import json
    import subprocess
    script = tmp_path / "grader.py"
    script.write_text(GRADER_SCRIPT)
    grader = subprocess.Popen([sys.executable, str(script), mode, LIMITS_MODULE], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        info = json.loads(grader.stdout.readline())
        assert info["isolation"].startswith(mode)
        pids = set(info["pids"]) | ({info["orphan"]} if mode == "partial" else set())
        assert pids and all(alive(p) for p in pids)
        grader.kill()                                   # SIGKILL: no cleanup code runs in the grader
        grader.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pids)
    finally:
        if grader.poll() is None:
            grader.kill()
        import shutil
        if "info" in locals():
            shutil.rmtree(info["workdir"], ignore_errors=True)


SYSCALLS = src('''
    import ctypes, os, subprocess, threading
    libc = ctypes.CDLL(None, use_errno=True)
    def probe_syscalls():
        out = {}
        for name, flag in (("user", 0x10000000), ("net", 0x40000000), ("mount", 0x20000)):
            out["unshare_" + name] = libc.unshare(flag) == 0
        out["ptrace_init"] = libc.ptrace(16, 1, 0, 0) == 0
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        out["fork"] = os.waitpid(pid, 0)[1] >> 8 == 7
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        out["subprocess"] = subprocess.run(["/bin/echo", "hi"], capture_output=True).stdout == b"hi\\n"
        return out
''')


@pytest.mark.parametrize("isolate", [None, False])
def test_seccomp_refuses_namespaces_and_ptrace_but_not_processes(isolate):
    if sandbox.worker._SECCOMP_SUPPORTED is False:
        pytest.skip("seccomp filter only on x86_64 Linux")
    with Worker(SYSCALLS, limits=FAST, isolate=isolate) as w:
        assert "seccomp filter" in w.isolation
        got = w.call("probe_syscalls")
    assert got == {"unshare_user": False, "unshare_net": False, "unshare_mount": False, "ptrace_init": False,
                   "fork": True, "subprocess": True}


FORKY = src('''
    import os
    def forky():
        os.fork()              # parent and child both return into the worker loop
        return 1
    def pool():
        import multiprocessing as mp
        with mp.get_context("fork").Pool(2) as p:
            return p.map(abs, [-1, -2, -3])
    def add(a, b):
        return a + b
''')


def test_forks_returning_into_the_worker_and_multiprocessing():
    with Worker(FORKY, limits=FAST) as w:
        for i in range(3):
            assert w.call("forky") == 1
            assert w.call("add", i, 1) == i + 1            # exactly one answer per request
        assert w.call("pool") == [1, 2, 3]
        assert w.call_with("add", (2,), {"b": 5}) == 7
