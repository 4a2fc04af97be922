"""Attacks on the grader beyond the cheating suite, one group per class of hole (issue 12).

Each group is a class, not an example: links, inputs that exhaust or crash the
trusted process, student-chosen names and texts, rules the student's code could
switch off, budgets, and failures of the grader's own that must never become a
student's grade. An honest submission in the same run keeps its exact score.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmcourse.course import load_source
from lmcourse.grading import runner, sandbox
from lmcourse.instructor import batch
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"
ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
FULL = os.geteuid() == 0 and sandbox.plan.bwrap_status()[0]


def lmcourse(*args):
    return subprocess.run([sys.executable, "-m", "lmcourse.cli", *map(str, args)], capture_output=True, text=True,
                          env=ENV, stdin=subprocess.DEVNULL)


def honest(folder: Path, name: str = "honest") -> Path:
    path = submission_from_solution(FIXTURE, AID, folder / f"_{name}")
    dest = folder / f"{name}.ipynb"
    path.rename(dest)
    path.parent.rmdir()
    return dest


def with_answer(folder: Path, name: str, old: str, new: str) -> Path:
    """An honest notebook with one piece of answer code replaced (a JSON-level edit)."""
    path = honest(folder, name)
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if old in src:
            cell["source"] = src.replace(old, new)
            break
    else:
        raise AssertionError(f"{old!r} is in no cell")
    path.write_text(json.dumps(nb))
    return path


def rows(out: Path) -> dict:
    return {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open())}


# --------------------------------------------------------------------------- 3. links


def test_symlinked_submissions_are_never_followed(tmp_path):
    """A link to the solution, to another student's notebook or folder: status symlink, 0 points, batch goes on."""
    subs = tmp_path / "subs"
    subs.mkdir()
    honest(subs, "alice")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = honest(elsewhere, "other")
    (subs / "linker.ipynb").symlink_to(FIXTURE / "solutions" / AID / f"{AID}.ipynb")
    (subs / "copier.ipynb").symlink_to(other)
    theirs = submission_from_solution(FIXTURE, AID, tmp_path / "theirs" / AID)  # another student's nbgrader folder
    (subs / "folder").mkdir()
    (subs / "folder" / AID).symlink_to(theirs.parent, target_is_directory=True)  # nbgrader layout, linked folder
    (subs / "dirlink").symlink_to(subs / "folder", target_is_directory=True)
    os.mkfifo(subs / "fifo.ipynb")  # a reader that follows it would block forever
    out = tmp_path / "out"
    run = lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--no-progress")
    assert run.returncode == 0, run.stderr
    got = rows(out)
    assert got["alice"]["score"] == "6" and got["alice"]["status"] == "ok"
    for student in ("linker", "copier", "folder", "dirlink"):
        assert got[student]["status"] == "symlink" and got[student]["score"] == "0", (student, got[student])
        message = json.loads((out / "students" / student / "results.json").read_text())["message"]
        assert "symbolic link" in message and "Submit the notebook file itself" in message
    assert got["fifo"]["status"] == "unreadable" and got["fifo"]["score"] == "0"


def test_runner_refuses_a_linked_notebook_path(tmp_path):
    link = tmp_path / "x.ipynb"
    link.symlink_to(FIXTURE / "solutions" / AID / f"{AID}.ipynb")
    result = runner.grade(FIXTURE, AID, link)
    assert result["status"] == "symlink" and result["score"] == 0


# --------------------------------------------------------------------------- 4. the trusted process's resources


def _peak_rss_of_grading(notebook: Path) -> tuple[dict, float]:
    # VmHWM, the peak of this process's own memory: ru_maxrss would also count the pytest process
    # this one was forked from (Linux carries it across exec).
    code = ("import json, sys; from pathlib import Path; from lmcourse.grading import runner; "
            f"r = runner.grade(Path({str(FIXTURE)!r}), {AID!r}, Path({str(notebook)!r})); "
            "hwm = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
            "print(json.dumps([r['status'], r['score'], r['message'], hwm / 1024]))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    status, score, message, rss_mib = json.loads(cp.stdout.strip().splitlines()[-1])
    return {"status": status, "score": score, "message": message}, rss_mib


@pytest.mark.parametrize("shape", ["many short lines", "many tiny JSON objects"])
def test_a_huge_notebook_cannot_exhaust_the_trusted_process(tmp_path, shape):
    """5 MiB that cost ~1.3 GiB to parse in the trusted process: now parsed in a bounded child."""
    path = honest(tmp_path, "big")
    nb = json.loads(path.read_text())
    if shape == "many short lines":
        cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
        cell["source"] = "".join(cell["source"]) + "\n" + "".join(f"x{i}=1\n" for i in range(500_000))
    else:
        nb["metadata"]["junk"] = "JUNK"
    text = json.dumps(nb)
    if shape != "many short lines":  # 45 MiB of `{},` (under the 50 MiB cap): ~1 GiB of Python dicts
        text = text.replace('"JUNK"', "[" + "{}," * 15_000_000 + "{}]")
    path.write_text(text)
    result, rss = _peak_rss_of_grading(path)
    assert result["status"] == "too-large" and result["score"] == 0, result
    assert "budget" in result["message"]
    assert rss < 400, f"the trusted process peaked at {rss:.0f} MiB"
    ok, rss_honest = _peak_rss_of_grading(honest(tmp_path, "fine"))
    assert ok["status"] == "ok" and ok["score"] == 6


# --------------------------------------------------------------------------- 5. inputs that crashed the grader


def test_malformed_inputs_get_a_status_and_the_batch_goes_on(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    honest(subs, "alice")
    # a lone UTF-16 surrogate in an exception message (JSON can carry one; UTF-8 cannot)
    with_answer(subs, "surrogate", "def count_words(text):",
                "def count_words(text):\n    raise ValueError('bad \\ud800 text')\ndef _unused(text):")
    deep = honest(subs, "deep")
    nb = json.loads(deep.read_text())
    nested: dict = {}
    node = nested
    for _ in range(600):
        node["a"] = {}
        node = node["a"]
    nb["metadata"]["deep"] = nested
    deep.write_text(json.dumps(nb))
    honest(subs, "grades.csv")  # a student id that is the grader's own file name
    (subs / "results.json").mkdir()
    shutil.copy(honest(tmp_path, "x"), (subs / "results.json" / f"{AID}.ipynb"))
    (subs / "results.json" / AID).mkdir()
    shutil.move(subs / "results.json" / f"{AID}.ipynb", subs / "results.json" / AID / f"{AID}.ipynb")
    out = tmp_path / "out"
    run = lmcourse("grade", AID, subs, "--out", out, "--course", FIXTURE, "--no-progress")
    assert run.returncode == 0, run.stderr + run.stdout
    got = rows(out)
    assert got["alice"]["score"] == "6" and got["grades.csv"]["score"] == "6" and got["results.json"]["score"] == "6"
    assert got["deep"]["status"] == "invalid-notebook" and "levels deep" in \
        json.loads((out / "students" / "deep" / "results.json").read_text())["message"]
    assert got["surrogate"]["status"] == "ok" and got["surrogate"]["score"] == "4"
    page = (out / "students" / "surrogate" / "feedback.html").read_text(encoding="utf-8")
    assert "bad" in page and "\ud800" not in page
    assert (out / "grades.csv").is_file()


# --------------------------------------------------------------------------- 6. message channels


def test_hidden_inputs_do_not_leak_through_type_names_or_the_top_line(tmp_path):
    """A class named after the hidden input, an exception quoting it: never in what students see at once."""
    path = with_answer(tmp_path, "leaky", "def count_words(text):", (
        "def count_words(text):\n"
        "    if text == 'the cat sat on the mat':\n"
        "        return _count_words(text)\n"
        "    tag = ''.join(c for c in text if c.isalpha())[:40]\n"
        "    return type('Leak_' + tag, (), {})()\n"
        "def _count_words(text):"))
    result = runner.grade(FIXTURE, AID, path)
    hidden = next(t for t in result["tests"] if t["name"] == "count_words on random text with repeated spaces")
    assert hidden["score"] == 0 and hidden["visibility"] == "after_published"
    assert "Leak_" not in hidden["output"] and "class defined in your code" in hidden["output"]
    assert "Leak_" not in result["message"] and "Leak_" not in result["output"]
    # an exception message quoting a hidden input stays with its (hidden) check, out of the top line
    path = with_answer(tmp_path, "raiser", "def softmax(x):", (
        "def softmax(x):\n    raise ValueError('SECRET ' + repr(x.tolist()))\ndef _softmax(x):"))
    result = runner.grade(FIXTURE, AID, path)
    assert "SECRET" not in result["message"] + result["output"]
    assert any("SECRET" in t["output"] for t in result["tests"] if t["visibility"] != "visible"), \
        "the hidden check keeps its message, for after publication"


# --------------------------------------------------------------------------- 7. rules the student could switch off


@pytest.mark.parametrize("cheat", [
    "import sys\nsys.modules['lmc_inside.probes'].BUILTIN_RNN = ()\n",
    "import lmc_inside.probes\n",
    "from lmc_inside import probes\n",
    "guard = __import__('lmc_inside.probes')\n",
    "cell_class = getattr(nn, 'LSTM' + 'Cell')\n",
    "from torch.nn import LSTMCell as Cell\n",
    "kernel = torch._VF.lstm_cell\n",
    "exec('import gc')\n",
])
def test_rule_scan_flags_what_could_switch_the_guard_off(cheat):
    from lmcourse.grading import rules

    assert rules.scan("import torch\nfrom torch import nn\n" + cheat), cheat


def test_rule_scan_passes_every_reference_solution():
    """Each solution keeps the rules its checks apply (``no_builtin_rnn=True`` in autograder/<id>/), and holds
    nothing that could switch a guard off; a built-in that no rule of its unit refuses is allowed (nn.GRU
    in a unit that refuses built-in attention only)."""
    from lmcourse.grading import notebook as nbmod, rules

    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        aid = path.parent.name
        found = rules.scan(nbmod.extract_reference(load_source(ROOT, aid)))
        checks = "".join(f.read_text() for f in sorted((ROOT / "autograder" / aid).glob("*.py")))
        for keyword in (k for k in rules.RULES if f"{k}=True" in checks):
            assert rules.applying(found, keyword) == {}, (aid, keyword)
        assert all(rules.families(what) for what in found), (aid, found)


# --------------------------------------------------------------------------- 8. budgets


def test_every_runner_timeout_exceeds_its_worker_budget():
    for folder in sorted((ROOT / "autograder").iterdir()):
        if not folder.is_dir():
            continue
        limits = runner._limits(ROOT, folder.name, None)
        assert batch.runner_timeout(ROOT, folder.name) >= limits.total_timeout + limits.effective_import_timeout() + 300


def test_a_submission_that_burns_its_budget_is_graded_not_a_grader_error(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    (course / "autograder" / AID / "limits.json").write_text(json.dumps(
        {"call_timeout": 2, "total_timeout": 6, "import_timeout": 20}))
    subs = tmp_path / "subs"
    subs.mkdir()
    with_answer(subs, "spinner", "def count_words(text):", "def count_words(text):\n    while True:\n        pass\n"
                "def _count_words(text):")
    out = tmp_path / "out"
    before = _tree(course)
    run = lmcourse("grade", AID, subs, "--out", out, "--course", course, "--no-progress", "--no-preflight")
    assert run.returncode == 0, run.stdout + run.stderr
    assert rows(out)["spinner"]["status"] == "timeout"
    # Grading writes nothing into the course tree (it can live on a read-only mount; outputs go to --out).
    assert _tree(course) == before


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


# --------------------------------------------------------------------------- 9. the grader's failures are not grades


def test_a_worker_that_cannot_start_is_a_grader_error_not_a_student_error(tmp_path, monkeypatch):
    path = honest(tmp_path)
    # The worker's interpreter cannot be found (as when a private /tmp hid the venv): under bubblewrap
    # the sandbox starts and its execvp fails, otherwise the process cannot be started at all.
    monkeypatch.setattr(sys, "executable", str(tmp_path / "hidden-venv" / "bin" / "python"))
    with pytest.raises(runner.GraderError, match="worker process did not start"):
        runner.grade(FIXTURE, AID, path)
    out = tmp_path / "r.json"
    result = runner.grade_to_files(FIXTURE, AID, path, out)
    assert result["status"] == "grader-error" and result["max_score"] == 0


@pytest.mark.skipif(not FULL, reason="needs root and bubblewrap")
def test_bind_sources_under_tmp_stay_visible(tmp_path, monkeypatch):
    """A venv or package under /tmp is mounted on top of the worker's private /tmp, not hidden by it."""
    lib = Path("/tmp") / f"lmcourse-test-lib-{os.getpid()}"
    lib.mkdir()
    try:
        (lib / "helper_under_tmp.py").write_text("VALUE = 42\n")
        os.chmod(lib, 0o755)
        os.chmod(lib / "helper_under_tmp.py", 0o644)
        original = sandbox.bwrap.bind_sources
        monkeypatch.setattr(sandbox.bwrap, "bind_sources", lambda secrets: original(secrets) + [str(lib)])
        source = f"import sys\nsys.path.append({str(lib)!r})\nimport helper_under_tmp\ndef f():\n    return helper_under_tmp.VALUE\n"
        with sandbox.Worker(source, isolate=True) as w:
            assert w.import_error is None, w.import_error
            assert w.call("f") == 42
    finally:
        shutil.rmtree(lib)


def test_probe_errors_say_what_is_wrong_and_probe_misuse_voids_the_grade(tmp_path):
    import numpy as np

    with sandbox.Worker("import torch\ndef vector(x):\n    return x * 2\n", isolate=False) as w:
        with pytest.raises(sandbox.StudentError) as err:
            w.probe("call_with_tensors", fn="vector", args=[np.array([1.0, 2.0])], grad_args=[0])
        assert "does not define" not in err.value.message and "scalar" in err.value.message
        with pytest.raises(sandbox.SandboxError):
            w.probe("call_with_tensors", fn="vector", args=[np.array([1.0])], grad_args=[7])  # a check's mistake
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    with (course / "autograder" / AID / "test_checks.py").open("a") as f:
        f.write("\n\n@check(points=0, cell='test_count_words', name='misuses a probe')\n"
                "def test_misuse(student):\n"
                "    student.probe('call_many', fn='count_words', each='not a list')\n")
    result = runner.grade_to_files(course, AID, honest(tmp_path), tmp_path / "r.json")
    assert result["status"] == "grader-error" and "wrongly" in result["message"]


@pytest.mark.parametrize("fault", [
    ("check", "NameError", "    assert student.count_words('a b') == expected_countz\n"),
    ("fixture", "FileNotFoundError", "    assert missing_data\n"),
    ("check", "ImportError", "    from lmcourse import no_such_helper\n"),
    ("check", "DataError", "    from lmcourse import data\n    data.fetch('a-corpus-the-grader-lacks')\n"),
])
def test_a_check_that_breaks_on_its_own_is_a_grader_error_not_a_zero(tmp_path, fault):
    """A check that misspells a name, or whose fixture cannot find its data, voids the grade; a check that trips
    over the value the student's code returned stays the student's (an `error` with that value's type)."""
    where, name, body = fault
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    with (course / "autograder" / AID / "test_checks.py").open("a") as f:
        f.write("\n\nimport pytest\n\n\n@pytest.fixture\ndef missing_data(tmp_path):\n    return open(tmp_path / 'no-such-file').read()\n"
                "\n\n@check(points=1, cell='test_count_words', name='breaks on its own')\n"
                f"def test_breaks(student{', missing_data' if where == 'fixture' else ''}):\n{body}")
    result = runner.grade_to_files(course, AID, honest(tmp_path), tmp_path / "r.json")
    assert result["status"] == "grader-error" and result["max_score"] == 0, result
    assert name in result["message"] and "breaks" in result["message"], result["message"]

    # The same check tripping over a returned value (a dict has no .shape) is the student's, with the type named.
    course2 = tmp_path / "course2"
    shutil.copytree(FIXTURE, course2)
    with (course2 / "autograder" / AID / "test_checks.py").open("a") as f:
        f.write("\n\n@check(points=1, cell='test_count_words', name='trips over the value')\n"
                "def test_trips(student):\n    assert student.count_words('a b').shape\n")
    result = runner.grade_to_files(course2, AID, honest(tmp_path, "honest2"), tmp_path / "r2.json")
    assert result["status"] != "grader-error", result
    tripped = [c for c in result["tests"] if c["name"] == "trips over the value"]
    assert tripped and tripped[0]["score"] == 0 and tripped[0]["kind"] == "error", tripped
    assert "AttributeError" in tripped[0]["output"], tripped


def test_preflight_refuses_a_course_whose_release_scores(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    with (course / "autograder" / AID / "test_checks.py").open("a") as f:
        f.write("\n\n@check(points=0.5, cell='test_count_words', name='passes for anyone')\n"
                "def test_anyone(student):\n    pass\n")
    subs = tmp_path / "subs"
    subs.mkdir()
    honest(subs)
    out = tmp_path / "out"
    env_cache = tmp_path / "cache"
    run = subprocess.run([sys.executable, "-m", "lmcourse.cli", "grade", AID, str(subs), "--out", str(out),
                          "--course", str(course), "--no-progress"], capture_output=True, text=True,
                         env=dict(ENV, LMCOURSE_CACHE=str(env_cache)))
    assert run.returncode == 1 and "release scored 0.5" in run.stderr and "passes for anyone" in run.stderr
    assert not (out / "students").exists()


def _stuck():
    import time

    time.sleep(30)


def _busy():
    while True:
        pass


def _our_bug():
    raise KeyError("a bug of the grader's")


def test_bounded_reading_says_whose_failure_it_was():
    """Too much to read is the notebook's; a stall or an exception in our code is the grader's."""
    from lmcourse.grading import bounded
    from lmcourse.grading.notebook import NotebookError

    assert bounded.run(lambda: {"fine": [1, 2]}) == {"fine": [1, 2]}
    with pytest.raises(NotebookError) as err:
        bounded.run(_busy, wall_seconds=3)
    assert err.value.status == "too-large"
    with pytest.raises(bounded.BoundedError, match="stalled"):
        bounded.run(_stuck, wall_seconds=2)
    with pytest.raises(bounded.BoundedError, match="KeyError"):
        bounded.run(_our_bug)


def test_rule_scan_follows_names_across_answer_cells():
    """`import sys as s` in one answer cell and `s.modules` in another is still `sys.modules`."""
    from lmcourse.grading import rules

    source = "import sys as s\n\nx = 1\n\nguard = s.modules\n"
    found = rules.scan_answers(source, [(1, 2, "first"), (3, 3, "given"), (4, 5, "second")], {"first", "second"})
    assert found == {"sys.modules": [["second", 2]]}
    assert rules.scan_answers(source, [(1, 2, "first"), (3, 5, "given")], {"first"}) == {}
