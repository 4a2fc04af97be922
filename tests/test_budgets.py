"""A submission's budgets (issue #37, classes 4 and 5).

Memory is the submission's, all its processes together: three children each
holding 1.5 GB under a 4 GB budget are a ``memory`` failure, not ``ok``,
whether a control group bounds them (root) or the grader watches them (no
control group), while one process may still use 3 GB.

Time is the student's own: a call's limit counts wall-clock time less the
time the worker waited for a CPU, and its CPU time is bounded too. On a
machine made busy by the test's own spinning processes, an honest submission
keeps full marks or ends as ``grader-error`` (graded again), never loses a
point; an infinite loop, a sleep, spinning children of its own or a lowered
priority are still the student's timeout.

The heavy proof, a real training notebook graded on a loaded machine, is
opt-in: ``LMCOURSE_UNDER_LOAD=1`` (README, "Tests beyond make test").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lmcourse.errors import GraderError
from lmcourse.grading import runner
from lmcourse.instructor import preflight
from lmcourse.grading.result import Status
from lmcourse.grading.sandbox import Limits, StudentError, Worker, cgroups, meter
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"
GIB = 1 << 30
HAS_GROUP = sys.platform.startswith("linux") and cgroups.available()[0] is not None


def src(text: str) -> str:
    return textwrap.dedent(text)


@pytest.fixture(params=["control group", "watched"])
def memory_bound(request, monkeypatch):
    """Each memory test twice: with the control group this machine gives (skipped where there is none) and
    without one, as a grader that is not root gets."""
    if request.param == "control group":
        if not HAS_GROUP:
            pytest.skip(f"no control group here: {cgroups.available()[1]}")
    else:
        monkeypatch.setitem(cgroups._CACHE, "where", (None, "none, for this test"))
    return request.param


# --------------------------------------------------------------------------- 4. memory of the whole submission

MEMORY = src('''
    import os, time
    def children(n, gib):
        """n children, each holding `gib` GB that it has written to, for a few seconds."""
        pids = []
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                held = b"\\1" * int(gib * (1 << 30))
                time.sleep(4)
                os._exit(0)
            pids.append(pid)
        return [os.waitpid(p, 0)[1] for p in pids]
    def one(gib):
        held = b"\\1" * int(gib * (1 << 30))
        return len(held)
''')
MEMORY_LIMITS = Limits(memory_bytes=4 * GIB, call_timeout=60, import_timeout=60, cpu_seconds=60, threads=1)


def test_children_together_cannot_hold_more_than_the_submissions_memory(memory_bound):
    """Three children of 1.5 GB each (4.5 GB) against a 4 GB budget: the per-process limit let them all end
    well; the submission as a whole is bounded, so the call is the student's memory failure."""
    with Worker(MEMORY, limits=MEMORY_LIMITS) as w:
        with pytest.raises(StudentError) as e:
            w.call("children", 3, 1.5)
        assert e.value.kind == "memory", e.value
        assert "4.0 GB" in e.value.message and "together" in e.value.message
        assert w.call("one", 0.1) == int(0.1 * GIB)           # the next call gets a fresh process
        expected = "cgroup" if memory_bound == "control group" else "watched while a call runs"
        assert expected in w.isolation, w.isolation          # which bound applies, said
    assert w.alive_pids() == [] and w.leaked == []


def test_one_honest_process_may_use_most_of_the_budget(memory_bound):
    with Worker(MEMORY, limits=MEMORY_LIMITS) as w:
        assert w.call("one", 3) == 3 * GIB


def test_a_memory_failure_is_a_status_of_its_own():
    assert Status("memory").graded
    assert "memory" in runner.STUDENT_KINDS and "memory" in runner.STATUS_KINDS


# --------------------------------------------------------------------------- 5. time that is the student's own


class Load:
    """`n` busy processes of the test's own, each in a session of its own as independent jobs are (with
    autogroups the scheduler shares a CPU between sessions first), for at most `seconds`. With `one_core`,
    they and this thread, so every worker it starts, are confined to one core while they run: the other cores
    stay free for whatever else runs (CI's other test worker), whose time limits this test must not eat into."""

    def __init__(self, n: int = 4, seconds: float = 120.0, one_core: bool = True) -> None:
        self.before = os.sched_getaffinity(0)
        if one_core:
            os.sched_setaffinity(0, {max(self.before)})
        code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
        self.procs = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for _ in range(n)]

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        os.sched_setaffinity(0, self.before)

    def __enter__(self) -> "Load":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


SPIN = src('''
    import os, time
    def spin():
        while True:
            pass
    def sleep():
        time.sleep(1000)
        return 1
    def spinning_children(n):
        """The main thread waits while its own children keep every core busy."""
        pids = []
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                while True:
                    pass
            pids.append(pid)
        for p in pids:
            os.waitpid(p, 0)
        return n
    def spin_at_low_priority(how):
        if how == "autogroup-check":
            try:
                with open("/proc/self/autogroup", "w") as f:
                    f.write("0")
                return "allowed"
            except OSError as e:
                return f"not allowed: {e}"
        if how == "nice":
            os.nice(19)
        elif how == "affinity":            # itself and three spinning children on one core
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
            for _ in range(3):
                if os.fork() == 0:
                    while True:
                        pass
        else:
            try:
                with open("/proc/self/autogroup", "w") as f:
                    f.write("19")
            except OSError as e:
                return f"not allowed: {e}"
        while True:
            pass
    def add(a, b):
        return a + b
    def work(n):
        return sum(i * i for i in range(n))
''')
TIME_LIMITS = Limits(call_timeout=30, import_timeout=60, cpu_seconds=120, threads=1, total_timeout=300)


def test_an_infinite_loop_is_still_the_students_timeout():
    """(With a far fence: on a machine so busy that the loop reaches its fence it would be the grader's failure,
    graded again.)"""
    with Worker(SPIN, limits=Limits(**{**TIME_LIMITS.__dict__, "wall_factor": 20})) as w:
        with pytest.raises(StudentError) as e:
            w.call("spin", timeout=2)
        assert e.value.kind == "timeout" and "did not finish in time" in e.value.message
        assert w.call("add", 1, 2) == 3


def test_a_call_that_only_waits_is_the_students_timeout():
    """Sleeping is not waiting for a CPU: the time is the student's, and the message says what it was."""
    with Worker(SPIN, limits=TIME_LIMITS) as w:
        with pytest.raises(StudentError) as e:
            w.call("sleep", timeout=1.5)
        assert e.value.kind == "timeout" and "waiting most of that time" in e.value.message


def test_spinning_children_of_its_own_are_not_a_busy_machine():
    """A submission that keeps the cores busy itself makes its main thread wait for a CPU: that wait is paid for
    in CPU time, so the call ends as the student's timeout (its CPU budget), never as the grader's failure."""
    with Worker(SPIN, limits=TIME_LIMITS) as w:
        with pytest.raises(StudentError) as e:
            w.call("spinning_children", 3 * (os.cpu_count() or 1), timeout=3)
        assert e.value.kind == "timeout" and "CPU time" in e.value.message, e.value.message
    assert w.alive_pids() == []


def test_last_call_tells_the_students_time_from_the_machines():
    """What a speed check compares (`student.last_call.own`): on a busy machine, less than the wall clock by the
    time the worker waited for a CPU."""
    with Worker(SPIN, limits=TIME_LIMITS) as w:
        assert w.call("work", 10) == 285
        with Load(seconds=60):
            time.sleep(0.5)
            w.call("work", 5_000_000, timeout=30)
        taken = w.last_call
        assert taken.starved > 0 and taken.own < taken.wall and taken.cpu > 0, taken
        assert abs(taken.wall - taken.own - taken.starved) < 1e-6


@pytest.mark.parametrize("how", ["nice", "autogroup", "affinity"])
def test_a_lowered_priority_is_not_a_busy_machine(how):
    """``nice 19`` (or its session's autogroup at nice 19) on a busy machine: the worker then waits for a CPU by
    its own choice, which is its own time. So does a worker that pins itself and its own spinning children to
    one core: there they keep it waiting while using one core's CPU time, under the budget of a worker given
    more threads than the fence's factor, until the fence."""
    limits = Limits(**{**TIME_LIMITS.__dict__, "threads": 8}) if how == "affinity" else TIME_LIMITS
    if how == "affinity":
        if len(os.sched_getaffinity(0)) < 2:
            pytest.skip("needs two cores to narrow to one")
        with Worker(SPIN, limits=limits) as w, pytest.raises(StudentError) as e:
            w.call("spin_at_low_priority", how, timeout=3)
        assert e.value.kind == "timeout", e.value
        return
    with Load(seconds=60), Worker(SPIN, limits=limits) as w:
        if how == "autogroup" and str(w.call("spin_at_low_priority", "autogroup-check", timeout=3)).startswith("not"):
            pytest.skip("this worker may not change its autogroup (it dropped root): test_task_times covers it")
        with pytest.raises(StudentError) as e:
            w.call("spin_at_low_priority", how, timeout=3)
        assert e.value.kind == "timeout", e.value


def test_task_times_tell_waiting_at_a_lowered_priority_apart():
    """The scheduler's count for each thread, and whether its waiting is the machine's: not once the process, or
    its session's autogroup, runs at a lower priority."""
    code = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end:\n    time.sleep(0.01)\n"
    procs = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for _ in range(2)]
    try:
        for p in procs:
            times = meter.task_times(p.pid)
            assert list(times) == [p.pid] and all(ordinary for _, ordinary in times.values()), times
        os.setpriority(os.PRIO_PROCESS, procs[0].pid, 19)
        assert not any(ordinary for _, ordinary in meter.task_times(procs[0].pid).values())
        if os.path.exists(f"/proc/{procs[1].pid}/autogroup"):
            Path(f"/proc/{procs[1].pid}/autogroup").write_text("19")
            assert not any(ordinary for _, ordinary in meter.task_times(procs[1].pid).values())
    finally:
        for p in procs:
            p.kill()
            p.wait()


def course_with_a_long_call(tmp_path: Path, timeout: float) -> Path:
    """The fixture course with one more check: count_words on 7 million words (about a second on an idle
    machine) with a time limit of `timeout` seconds."""
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    (course / "autograder" / AID / "test_long_text.py").write_text(src(f'''
        from lmcourse.grading.checks import check, expect_equal

        WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog"]


        @check(points=1, cell="test_count_words", name="count_words on a long text, within a short time limit")
        def test_count_words_long(student, reference):
            text = " ".join(WORDS * 1_000_000)
            found = student.call("count_words", text, timeout={timeout})
            expect_equal(found, {{word: 1_000_000 for word in WORDS}}, what="count_words of 7 million words")
    '''))
    return course


def test_an_honest_submission_on_a_busy_machine_loses_no_point(tmp_path):
    """The machine busy with four spinning processes per core: the honest notebook keeps full marks, or is not
    graded at all (grader-error: graded again on the next run). A lost point would be the machine's load
    charged to the student. The long check's limit is about four times what it needs on an idle machine,
    the margin of a training check."""
    course = course_with_a_long_call(tmp_path, timeout=4)
    notebook = submission_from_solution(course, AID, tmp_path / "honest")
    idle = runner.grade_or_fail(course, AID, notebook)
    assert idle.status == "ok" and idle.score == idle.max_score, idle.message
    with Load(seconds=120):
        loaded = runner.grade_or_fail(course, AID, notebook)
    if loaded.status == Status.GRADER_ERROR:
        assert "overloaded" in loaded.message and not loaded.graded, loaded.message
    else:
        assert loaded.status == "ok" and loaded.score == loaded.max_score, \
            [(t.name, t.output) for t in loaded.tests if not t.passed]


# --------------------------------------------------------------------------- the fence: the grader's failure


@pytest.fixture
def overloaded(monkeypatch):
    """A machine that never gives the worker a CPU (the readings made up): no call gets time of its own or uses
    CPU time, so each one that does not answer at once reaches its wall-clock fence."""

    def never_given_a_cpu(self, now, baseline=False):
        self.starved, self.cpu = now - self.started, 0.0
        self._last, self._next = now, now + meter.SAMPLE_SECONDS

    monkeypatch.setattr(meter.Clock, "sample", never_given_a_cpu)


def test_a_call_stopped_by_the_fence_is_the_graders_failure(overloaded):
    with Worker(SPIN, limits=TIME_LIMITS) as w:
        t0 = time.monotonic()
        with pytest.raises(meter.Overloaded) as e:
            w.call("spin", timeout=0.5)
        assert time.monotonic() - t0 >= 0.5 * TIME_LIMITS.wall_factor
        assert "overloaded" in str(e.value) and "graded again" in str(e.value)
        with pytest.raises(meter.Overloaded):                # nothing more is run: the grade is void anyway
            w.call("add", 1, 2)


def test_an_overloaded_grade_is_no_grade_and_the_preflight_caches_no_verdict(overloaded, tmp_path, monkeypatch):
    """The fence reached in a check: the submission's result is grader-error (no score: a batch grades it again),
    and a preflight that meets it fails and caches nothing, so no later batch takes it for a verdict."""
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    course = course_with_a_long_call(tmp_path, timeout=0.1)
    notebook = submission_from_solution(course, AID, tmp_path / "honest")
    result = runner.grade_or_fail(course, AID, notebook, tier="cpu")
    assert result.status == Status.GRADER_ERROR and not result.graded, result.message
    assert "overloaded" in result.message and "count_words" in result.message
    with pytest.raises(GraderError, match="overloaded"):
        preflight.preflight(course, AID, "cpu")
    assert not list((tmp_path / "cache").rglob("*.json"))


# --------------------------------------------------------------------------- opt-in: a real training run


@pytest.mark.skipif(not os.environ.get("LMCOURSE_UNDER_LOAD"), reason="opt-in: LMCOURSE_UNDER_LOAD=1 grades a "
                    "training notebook on a machine loaded by the test (about 10 minutes)")
@pytest.mark.parametrize("assignment", ["07-gpt"])
def test_an_honest_training_notebook_on_a_busy_machine_loses_no_point(assignment, tmp_path):
    """07's solution with four spinning processes per core on the whole machine (load 8 on two cores: under
    it, train_gpt used to reach its 400 s limit): full marks or grader-error."""
    notebook = submission_from_solution(ROOT, assignment, tmp_path / "honest")
    checks = json.loads((ROOT / "autograder" / assignment / "limits.json").read_text())
    assert checks["threads"] == 1
    with Load(4 * len(os.sched_getaffinity(0)), seconds=3600, one_core=False):
        result = runner.grade_or_fail(ROOT, assignment, notebook)
    if result.status == Status.GRADER_ERROR:
        assert "overloaded" in result.message, result.message
    else:
        assert result.score == result.max_score, [(t.name, t.output) for t in result.tests if not t.passed]
