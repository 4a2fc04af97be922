"""The pytest plugin that turns hidden checks into scores.

Pytest runs in the trusted grader process over ``autograder/<id>/``. This
plugin provides the fixtures a check uses (``student``, ``reference``, ``rng``,
``tier``) and records one result per check. A failing check earns 0 and keeps
only a message taken from the exception itself: the ``AssertionError``'s text
(assertion rewriting is off, so pytest adds no introspection) or the
:class:`StudentError`'s message. Tracebacks, check source and pytest's report
text are never kept, so nothing of a hidden check can leak into feedback.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmcourse.data import DataError
from lmcourse.grading.checks import info_of
from lmcourse.grading.rules import RULES, applying, describe
from lmcourse.grading.replay import NotRecorded

MAX_MESSAGE = 1500


def sandbox_module():
    """lmcourse.grading.sandbox (Worker, Limits, StudentError), imported when first needed."""
    from lmcourse.grading import sandbox

    return sandbox


def _student_error_type():
    try:
        return sandbox_module().StudentError
    except ImportError:  # the sandbox is not installed: nothing can raise it
        return None


class StudentProxy:
    """``student.NAME(*args)`` calls the student's ``NAME`` in the isolated worker.

    Use ``student.call("NAME", ...)`` for a function whose name clashes with
    ``call``, ``probe`` or ``has``. Only plain data crosses: see the worker.
    """

    def __init__(self, worker, plugin: "GradingPlugin"):
        self._worker = worker
        self._plugin = plugin

    def call(self, name: str, *args, timeout: float | None = None, **kwargs) -> Any:
        self._plugin._note_function(name)
        self._plugin.refuse_unloaded(name)
        return self._worker.call(name, *args, timeout=timeout, **kwargs)

    def probe(self, probe_name: str, *, timeout: float | None = None, **kwargs) -> Any:
        label = kwargs.get("name") or kwargs.get("fn") or kwargs.get("cls") or probe_name
        self._plugin._note_function(label)
        for keyword in RULES:
            if kwargs.get(keyword):
                # The worker refuses the built-ins while the probe runs; the student's code could
                # switch that guard off, so the rule is verified here too, from the source (`rules`).
                self._plugin.require_rule(keyword, str(label))
        self._plugin.refuse_unloaded(*(kwargs.get(k) for k in ("fn", "cls", "load_fn")))
        return self._worker.probe(probe_name, timeout=timeout, **kwargs)

    def has(self, name: str) -> bool:
        return self._worker.has(name)

    @property
    def last_call(self):
        """What the last call or probe took (`sandbox.meter.CallTime`): a speed check compares ``own``, the
        time its limit counts (wall-clock time less the time the worker waited for a busy machine's CPU),
        never the wall clock, which charges the machine's load to the student."""
        return self._worker.last_call

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            return self.call(name, *args, **kwargs)

        call.__name__ = name
        return call


class GradingPlugin:
    """Fixtures and result collection for one grading session (one submission)."""

    def __init__(self, *, worker, reference, tier: str, assignment: str, blocked: dict[str, str] | None = None,
                 block_all: tuple[str, str] | None = None, visible_only: bool = False,
                 exclude: frozenset[str] = frozenset(), findings: dict | None = None,
                 unloaded: dict[str, str] | None = None, unloaded_names: dict[str, str] | None = None):
        # underscored: the fixture methods below own the plain names
        self._worker = worker
        self._reference = reference
        self._tier = tier
        self.assignment = assignment
        self.blocked = blocked or {}  # test cell grade_id -> why its checks earn nothing
        self.block_all = block_all  # (status, message): nothing of the submission can run
        self.visible_only = visible_only
        self.exclude = frozenset(exclude)  # check names left out (not run, not counted)
        self.findings = dict(findings or {})  # `rules.scan_answers` of the submission
        # A cell that raised when the module was loaded (the rest was loaded, `runner._cells_that_raised`):
        # test cell grade_id -> why its checks are not run, and name the cell defines -> why a check
        # that calls it fails. Both say which cell raised; the notebook's problems say how.
        self.unloaded = dict(unloaded or {})
        self.unloaded_names = dict(unloaded_names or {})
        self.results: dict[str, dict] = {}
        self.order: list[str] = []
        self.not_run: list[dict] = []  # checks left out by visible_only or exclude, for a count
        self.config_errors: list[str] = []
        self._current: str | None = None
        self._started: dict[str, float] = {}
        self.StudentError = _student_error_type()

    def require_rule(self, keyword: str, label: str) -> None:
        """Fail the current check (as the student's error) when the answer cells could use a built-in
        that the rule `keyword` (``"no_builtin_rnn"``, see `rules.RULES`) refuses, or switch off the
        worker's guard against one."""
        found = applying(self.findings, keyword)
        if not found or self.StudentError is None:
            return
        rule = RULES[keyword]
        raise self.StudentError(
            "exception", f"`{label}` was not run: this assignment asks for {rule.asks_for}, and your answer "
            f"cells use {describe(found)}. {rule.refused}, torch's kernel tables, dynamic code (eval, exec, "
            "computed getattr) and the grader's own modules are not allowed in this assignment's answers",
            name=label)

    def refuse_unloaded(self, *names) -> None:
        """Fail the current check (as the student's error) when it calls a function or class whose
        cell raised when the module was loaded: whatever that cell left defined is not graded, as a
        stub would not be."""
        for name in names:
            why = self.unloaded_names.get(name) if type(name) is str else None
            if why and self.StudentError is not None:
                raise self.StudentError("import-error", why, name=name)

    # -- fixtures ---------------------------------------------------------------------------

    @pytest.fixture
    def student(self):
        return StudentProxy(self._worker, self)

    @pytest.fixture
    def reference(self):
        return self._reference

    @pytest.fixture
    def rng(self, request):
        """A generator seeded from the assignment and the check's id: same inputs every run."""
        digest = hashlib.sha256(f"{self.assignment}::{request.node.nodeid}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    @pytest.fixture
    def tier(self):
        return self._tier

    @pytest.fixture
    def measure(self):
        """`measure(name, value)`: record a number the check computed on the trusted side (a graded training
        run's validation loss) in its result, under ``measured`` (results.json, `lmcourse leaderboard`).
        Only finite numbers are kept; what is recorded stays whether the check then passes or fails."""
        import math

        def record(name: str, value: float) -> None:
            value = float(value)
            if self._current in self.results and math.isfinite(value):
                self.results[self._current].setdefault("measured", {})[str(name)] = value

        return record

    # -- collection ---------------------------------------------------------------------------

    def pytest_configure(self, config):
        # A failure's default rendering parses the check's whole file once per frame (0.15 s a failing
        # check); the report is dropped below, and a collection error needs only its last line.
        config.option.tbstyle = "native"

    def pytest_collection_modifyitems(self, session, config, items):
        keep = []
        for item in items:
            info = info_of(getattr(item, "function", None))
            if info is None:
                self.config_errors.append(f"{item.nodeid} has no @check(points=..., cell=..., name=...)")
                continue
            entry = {
                "check": item.nodeid, "name": info.name, "cell": info.cell, "max_score": info.points,
                "visibility": info.visibility, "gradescope_visibility": info.gradescope_visibility,
            }
            if (self.visible_only and info.visibility != "visible") or info.name in self.exclude:
                self.not_run.append(entry)
                continue
            keep.append(item)
            self.order.append(item.nodeid)
            self.results[item.nodeid] = dict(entry, score=0.0, status="failed", output="", kind=None,
                                             function=None, seconds=0.0)
            why = self.block_all[1] if self.block_all else self.blocked.get(info.cell)
            kind = self.block_all[0] if self.block_all else "structure"
            if not why and info.cell in self.unloaded:
                why, kind = self.unloaded[info.cell], "import-error"
            if why:
                self.results[item.nodeid].update(output=why, kind=kind)
                item.add_marker(pytest.mark.skip(reason="lmcourse-blocked"))
        items[:] = keep

    def pytest_collectreport(self, report):
        if report.failed:
            # An instructor's error (a check file that does not import): never the student's fault.
            text = str(report.longrepr).strip().splitlines()
            self.config_errors.append(f"cannot collect {report.nodeid or 'checks'}: {text[-1] if text else 'error'}")

    # -- running ------------------------------------------------------------------------------

    def _note_function(self, name: str) -> None:
        if self._current and self._current in self.results and not self.results[self._current]["function"]:
            self.results[self._current]["function"] = name

    def pytest_runtest_setup(self, item):
        self._current = item.nodeid
        self._started[item.nodeid] = time.perf_counter()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        result = self.results.get(item.nodeid)
        if result is None:
            return
        if item.get_closest_marker("skip") is not None and result["kind"] is not None:
            pass  # blocked before it ran: the reason is already recorded
        elif report.when == "call" and report.passed:
            result.update(score=result["max_score"], status="passed", output="")
        elif (report.failed or report.skipped) and not (report.when == "teardown" and result["output"]):
            # (a teardown error after a failure keeps the first failure's message)
            result.update(score=0.0, status="failed", **self._explain(call.excinfo, report.when))
        if report.when == "teardown":
            result["seconds"] = round(time.perf_counter() - self._started.get(item.nodeid, time.perf_counter()), 3)
            self._current = None
        # Drop pytest's rendering of the failure (it quotes the check's source) right here.
        report.longrepr = None

    def _explain(self, excinfo, when: str = "call") -> dict:
        """Score-0 message from the exception alone: never a traceback, never source."""
        if excinfo is None:
            return {"output": "the check did not complete", "kind": "error"}
        exc = excinfo.value
        sandbox_error = getattr(sandbox_module(), "SandboxError", ())
        if isinstance(exc, GRADER_FAULTS) and not (self.StudentError is not None and isinstance(exc, self.StudentError)):
            self.config_errors.append(f"{self._current or 'a check'} ({when}): {type(exc).__name__}: {exc}")
            return {"output": "the grader failed while running this check", "kind": "grader-error"}
        if isinstance(exc, sandbox_error):
            # The grader's own failure (the sandbox, a check misusing a probe): the whole grade is
            # void (the runner raises GraderError), never a 0 for this check.
            self.config_errors.append(f"{self._current or 'a check'}: {exc}")
            return {"output": "the grader failed while running this check", "kind": "grader-error"}
        if self.StudentError is not None and isinstance(exc, self.StudentError):
            kind = getattr(exc, "kind", "exception")
            message = getattr(exc, "message", None) or str(exc)
            return {"output": _clip(message), "kind": kind}
        if isinstance(exc, AssertionError):
            text = str(exc).strip() or "the result did not have the expected property"
            return {"output": _clip(text), "kind": "assertion"}
        if isinstance(exc, pytest.skip.Exception):
            return {"output": _clip(f"not run: {exc.msg}"), "kind": "skipped"}
        # The check itself tripped over what came back (e.g. a list where an array was
        # expected). The exception's own text names types, not the check's code.
        text = f"{type(exc).__name__}: {exc}".strip()
        return {"output": _clip(f"the value your code returned could not be checked ({text})"), "kind": "error"}


# Exceptions that no value a student's code returned can cause in a check: a name the check misspells, a module
# or data file the grader cannot load, the grading process itself out of memory or stack. Raised in a check or in
# its fixtures, they are the grader's failure: the grade is void, never a 0 for the student. (What a student's
# code raises reaches the checks as StudentError; what a check raises about a returned value of the wrong type or
# shape, TypeError, AttributeError, ValueError, IndexError, KeyError, RuntimeError, is explained to the student as
# such, and so, for now, is one of those raised by a check's own trusted computation.) DataError: a corpus or the
# weights a check needs could not be had or failed its checksum. NotRecorded: the student edition's record of the
# solution's answers lacks one a check asked for (lmcourse.grading.replay).
GRADER_FAULTS = (NameError, ImportError, SyntaxError, OSError, MemoryError, RecursionError, SystemError, DataError,
                 NotRecorded)


def _clip(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _forget_modules_under(folder: Path) -> None:
    """Drop the check modules (and conftest) imported from `folder` from ``sys.modules``.

    pytest's importlib mode names a module by its path below the rootdir, so
    every assignment's ``test_training.py`` is ``test_training``, and a later
    pytest run in the same process would be handed the cached module of the
    previous assignment (or of an older version of this one).
    """
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and _resolved(file).is_relative_to(folder):
            del sys.modules[name]


_RESOLVED: dict[str, Path] = {}


def _resolved(file: str) -> Path:
    """A module file's real path, remembered: resolving the ~2,700 modules a grading process has loaded
    (torch's) took a third of a second per grade, twice."""
    path = _RESOLVED.get(file)
    if path is None:
        path = _RESOLVED[file] = Path(file).resolve()
    return path


def _stash_namesakes(folder: Path) -> dict:
    """Take out of ``sys.modules`` every module named like a check file in `folder` but loaded
    from elsewhere; return them so that they can be put back.

    pytest's importlib mode looks a file's bare name up in ``sys.modules`` first and, on a hit,
    uses whatever module is there. A process that has already imported some other
    ``test_seq2seq`` (the course's own tests do) would run that module's tests in place of
    the hidden checks: a wrong grade, however it came out.
    """
    stems = {path.stem for path in folder.rglob("*.py")}
    stashed = {}
    for name in stems:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if module is not None and not (file and _resolved(file).is_relative_to(folder)):
            stashed[name] = sys.modules.pop(name)
    return stashed


def run_checks(checks_dir: Path, plugin: GradingPlugin) -> GradingPlugin:
    """Run pytest over ``checks_dir`` in this process with ``plugin``; results land on the plugin.

    No cache, no bytecode, no assertion rewriting, no terminal output, and an
    empty ini file so the course's own pytest settings do not apply.
    """
    checks_dir = Path(checks_dir).resolve()
    with tempfile.TemporaryDirectory(prefix="lmcourse-pytest-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\npython_files = test_*.py check_*.py\n")
        args = [
            str(checks_dir), "-c", str(ini), "--rootdir", str(checks_dir),
            "--confcutdir", str(checks_dir.parent), "--import-mode=importlib", "--assert=plain",
            "-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:stepwise",
            # its teardown collects the grader's whole heap five times: 0.26 s of a 2 s grade
            "-p", "no:unraisableexception",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",
        ]
        previous = sys.dont_write_bytecode, os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        sys.dont_write_bytecode = True
        # Only our plugin: third-party ones (xdist, nbval, hypothesis...) cost time and could report.
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        _forget_modules_under(checks_dir.parent)
        namesakes = _stash_namesakes(checks_dir)
        try:
            code = pytest.main(args, plugins=[plugin])
            if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
                plugin.config_errors.append(f"pytest stopped with {code.name} while running {checks_dir}")
        finally:
            _forget_modules_under(checks_dir.parent)
            sys.modules.update(namesakes)
            sys.dont_write_bytecode = previous[0]
            if previous[1] is None:
                os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
            else:
                os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = previous[1]
    return plugin
