"""The worker: imports the student's module and serves the grader's requests.

Runs in the worker process, as the student's uid, under the limits that
`confine` applies before the student's module is imported. Its loop reads one
request (`protocol.Op`) at a time from the request pipe and writes one reply
(`protocol.Tag`) on the reply pipe, in `wire`'s format.

Nothing here is trusted by the grader: the student's code shares this
process and can change any of it, so every reply is parsed as untrusted data
on the other side. The worker's job is only to make an honest student's life
easy: clear, structured errors (`protocol.error_reply`) with the traceback
of the student's own lines, never the grader's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import traceback

from . import cells as load_cells, confine
from .protocol import Kind, Missing, Op, Tag, error_reply

def _student_traceback(tb, module_file: str, limit: int = 8) -> str:
    frames = [fr for fr in traceback.extract_tb(tb) if fr.filename == module_file]
    if not frames:
        return ""
    frames = frames[-limit:]
    lines = []
    for fr in frames:
        where = f"  line {fr.lineno}, in {fr.name}"
        if fr.line:
            where += f"\n    {fr.line.strip()}"
        lines.append(where)
    return "\n".join(lines)


def _safe_str(x, limit=2000) -> str:
    try:
        s = str(x)
    except BaseException:
        s = "<the exception's message could not be shown>"
    if type(s) is not str:
        s = "<message>"
    return s[:limit]


def _error(kind: Kind, exc: BaseException | None = None, message: str = "", module_file: str = "", **fields) -> dict:
    """An error reply for `exc` (its type, message and the student's lines of its traceback)."""
    etype = ""
    tb = ""
    if exc is not None:
        etype = type(exc).__name__ if isinstance(type(exc).__name__, str) else "Exception"
        if not message:
            message = _safe_str(exc)
        tb = _student_traceback(exc.__traceback__, module_file)
    return error_reply(kind, type=str(etype), message=str(message), traceback=tb, **fields)


class _Absent:
    """Without bubblewrap, the libraries an assignment leaves out (`lmcourse.grading.sandbox.libraries`) are
    still on disk: this finder, first on ``sys.meta_path``, makes importing one fail as if it were not.

    It answers a look-up with a spec whose loader raises ``ModuleNotFoundError`` when the module is loaded,
    and never raises from ``find_spec`` itself: code that only probes whether a library is installed
    (``importlib.util.find_spec``, as torch does for a list of libraries) must not fail. Advice, not
    enforcement (the student's process could remove it); under bubblewrap the libraries are simply absent.
    """

    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in self.names:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        top = module.__name__.split(".")[0]
        sys.modules.pop(module.__name__, None)
        raise ModuleNotFoundError(f"No module named '{top}'", name=top)


def _refuse_imports(names) -> None:
    if names:
        sys.meta_path.insert(0, _Absent(names))


def worker(config_path: str, boot: str) -> int:
    """Set the process up from its config, import ``boot/submission.py``, serve until EOF."""
    with open(config_path) as f:
        cfg = json.load(f)
    parent = os.getppid()
    if cfg.get("uid") is not None and os.getuid() == 0:
        confine.drop_privileges(cfg["uid"], cfg["gid"])
    lib = confine.libc()
    if lib is not None:     # die with the supervisor / namespace init (set after the uid change,
        lib.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)   # which clears it)
        if os.getppid() != parent:
            return 1
    confine.apply_limits(cfg)
    seccomp = bool(cfg.get("seccomp", True)) and confine.install_seccomp()
    os.chdir(cfg["home"])
    sys.dont_write_bytecode = True
    sys.path.append(cfg["home"])

    # Notebooks import lmcourse (data loaders, Vocab). A grader run from a checkout on PYTHONPATH
    # has it where -I does not look: without this, every honest student would get an import error
    # for the grader's own set-up. Under bubblewrap only the package itself is bound in that folder.
    if cfg.get("package_parent") and importlib.util.find_spec("lmcourse") is None:
        sys.path.append(cfg["package_parent"])
    # Imported here, under the limits: NumPy and torch count against the worker's own budgets.
    from . import probes, wire

    _refuse_imports(cfg.get("absent") or [])

    req_fd, rep_fd = cfg["request_fd"], cfg["reply_fd"]
    os.set_inheritable(req_fd, False)
    os.set_inheritable(rep_fd, False)
    reader = wire.FrameReader(req_fd)
    main_pid = os.getpid()

    def flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except BaseException:
                pass

    def send(msg_id, tag, payload):
        if os.getpid() != main_pid:
            os._exit(0)
        flush()
        try:
            frame = wire.encode_frame(msg_id, Tag(tag).value, payload)
        except wire.RefusedValue as exc:
            frame = wire.encode_frame(msg_id, Tag.ERROR.value, error_reply(
                Kind.REFUSED_OUTPUT, message=exc.message, where=exc.where))
        except wire.WireError as exc:
            frame = wire.encode_frame(msg_id, Tag.ERROR.value, error_reply(Kind.OUTPUT_TOO_LARGE, message=str(exc)))
        except BaseException as exc:
            frame = wire.encode_frame(msg_id, Tag.ERROR.value, _error(
                Kind.REFUSED_OUTPUT, exc, f"the value could not be converted ({type(exc).__name__})"))
        wire.write_all(rep_fd, frame)

    # Everything above is the grader's own setup. Say so before any student code runs: if the
    # process dies before this frame, the sandbox failed (a grader error), not the submission.
    if cfg.get("boot_id"):
        send(cfg["boot_id"], Tag.OK, {"booted": True})

    module_file = os.path.join(boot, "submission.py")
    module = None
    import_error = None
    cell_errors: list[dict] = []
    spec = importlib.util.spec_from_file_location("submission", module_file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = mod
    try:
        with open(module_file, encoding="utf-8") as f:
            lines = f.read().split("\n")
        cells = load_cells.cell_ranges(lines)
        if cells is not None:   # a notebook's cells: each one that raises is reported, the others still run
            cell_errors = load_cells.run_cells(mod.__dict__, module_file, cells, lines)
        else:
            spec.loader.exec_module(mod)
        module = mod
    except SystemExit as exc:
        import_error = _error(Kind.IMPORT_ERROR, exc, f"your code called sys.exit({_safe_str(exc.code, 100)}) "
                              "while it was being imported", module_file)
    except SyntaxError as exc:
        import_error = error_reply(Kind.IMPORT_ERROR, type="SyntaxError",
                                   message=f"{_safe_str(exc.msg)} (line {exc.lineno})",
                                   traceback=_safe_str(exc.text or "", 500))
    except BaseException as exc:
        import_error = _error(Kind.IMPORT_ERROR, exc, module_file=module_file)

    if import_error is not None:
        send(cfg["hello_id"], Tag.ERROR, import_error)
    else:
        names = sorted(n for n in vars(module) if type(n) is str and not n.startswith("__"))[:10000]
        send(cfg["hello_id"], Tag.OK, {"names": names, "pid": os.getpid(), "seccomp": seccomp,
                                       "cell_errors": cell_errors})

    main_pid = os.getpid()
    while True:
        if os.getpid() != main_pid:
            # a fork of the worker made by student code came back here: it must not serve requests
            os._exit(0)
        try:
            msg_id, op, payload = wire.decode_body(*reader.read_blocking())
        except EOFError:
            return 0
        if import_error is not None:
            send(msg_id, Tag.ERROR, import_error)
            continue
        try:
            if op == Op.HAS:
                send(msg_id, Tag.OK, bool(hasattr(module, payload["name"])))
                continue
            name = payload["name"]
            if op == Op.CALL:
                if not hasattr(module, name):
                    send(msg_id, Tag.ERROR, error_reply(Kind.MISSING, name=name, reason=Missing.UNDEFINED))
                    continue
                fn = getattr(module, name)
                if not callable(fn):
                    send(msg_id, Tag.ERROR, error_reply(Kind.MISSING, name=name, reason=Missing.NOT_CALLABLE,
                                                        type=_safe_str(type(fn).__name__, 200)))
                    continue
                result = fn(*payload["args"], **payload["kwargs"])
            elif op == Op.PROBE:
                fn = probes.PROBES.get(name)
                if fn is None:
                    send(msg_id, Tag.ERROR, error_reply(Kind.PROBE_ERROR, message=f"unknown probe {name}"))
                    continue
                result = fn(module, *payload["args"], **payload["kwargs"])
            else:
                send(msg_id, Tag.ERROR, error_reply(Kind.PROBE_ERROR, message=f"unknown operation {op}"))
                continue
        except probes.Missing as exc:
            send(msg_id, Tag.ERROR, error_reply(Kind.MISSING, name=exc.name, reason=exc.reason))
            continue
        except probes.WrongResult as exc:
            send(msg_id, Tag.ERROR, error_reply(Kind.WRONG_RESULT, message=_safe_str(exc)))
            continue
        except probes.ProbeUsageError as exc:
            send(msg_id, Tag.ERROR, error_reply(Kind.PROBE_ERROR, message=_safe_str(exc)))
            continue
        except SystemExit as exc:
            send(msg_id, Tag.ERROR, _error(Kind.EXCEPTION, exc,
                                           f"your code called sys.exit({_safe_str(exc.code, 100)})", module_file))
            continue
        except BaseException as exc:
            send(msg_id, Tag.ERROR, _error(Kind.EXCEPTION, exc, module_file=module_file))
            continue
        send(msg_id, Tag.OK, result)


def main(argv: list[str]) -> int:
    """``__main__.py [--supervise] CONFIG``: the worker, or its supervisor (`supervisor`)."""
    entry = os.path.abspath(argv[0])
    boot = os.path.dirname(os.path.dirname(entry))   # BOOT/lmc_inside/__main__.py
    if len(argv) == 3 and argv[1] == "--supervise":
        from .supervisor import supervise
        return supervise(argv[2], entry)
    if len(argv) == 2:
        return worker(argv[1], boot)
    print("usage: python -I BOOT/lmc_inside/__main__.py [--supervise] CONFIG.json", file=sys.stderr)
    return 2
