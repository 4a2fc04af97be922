"""The student edition (`lmcourse publish student`): the course without its answers, installed on its own.

One edition of every assignment is published per session (about 30 s: the visible checks are cut out of the
check files and run once on the solution to record its answers). On it:

- nothing secret: every file of the edition and of the wheel built from it is scanned for every solution
  cell's compiled functions and every hidden check's source and name, and a planted one is found;
- installed in a fresh venv on a fresh path, with the course repository not importable, `lmcourse check`
  says "ready" (exit 0) for an honest notebook and "not ready" (exit 1) for the release, for every
  assignment, and runs exactly the visible checks the course's own `lmcourse check` runs (`EXPECTED_LEFT_OUT`
  is empty: a visible check that takes more than answers from the solution would be left out and fail here);
- the Colab cell installs the edition from a local folder standing in for its repository, and does nothing
  outside Colab.

The dependencies of the fresh venv are the course venv's, through a .pth file (installing torch again would
cost minutes and the network); the package itself is the edition's, installed by pip from a wheel built
from the edition, and `lmcourse.instructor` is not importable there. Every correct alternate of the units'
contracts passes the edition's checks (a record that missed a call would be a grader error for them).

Opt-in: `LMCOURSE_EDITION_ALL=1` also grades the known-wrong variants in the edition (70 s), and
`LMCOURSE_EDITION_SETUP=1` runs the edition's own `make setup` from the package registries (minutes) and
`make check` in it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lmcourse.course import Course
from lmcourse.grading import replay
from lmcourse.instructor import leaks, mistakes, publish
from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
IDS = Course(ROOT).assignment_ids()
REPOSITORY = "https://github.com/example-university/lm-course-student"
# The visible checks the edition leaves out (publish names them): none. A new visible check that takes more
# than answers from the solution would appear here and fail this test until it is rewritten.
EXPECTED_LEFT_OUT: dict[str, set[str]] = {}

pytestmark = pytest.mark.slow


def _mirror_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    for candidate in (os.environ.get("LMCOURSE_DATA_MIRROR"), str(ROOT.parent / "shared" / "data")):
        if candidate and Path(candidate).is_dir():
            env["LMCOURSE_DATA_MIRROR"] = candidate
            break
    return env


# Known mistakes of 01 whose signatures the edition ships (graded here: every unit's would cost minutes), so
# that `lmcourse check` can name them: the first is told apart by its visible checks and test cells
HINTED = ("greedy decoding returns the <EOS> it stops at", "sampling ignores the seed",
          "temperature applied after the softmax")


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("published")
    out = tmp / "lm-course-student"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mistakes, "_cache_dir", lambda: tmp / "mistakes")
        graded = mistakes.grade_all(ROOT, "01-ngrams", tmp / "graded", names=list(HINTED))
        mistakes.store(ROOT, "01-ngrams", mistakes.signatures_from(ROOT, "01-ngrams", graded))
        summary = publish.build(ROOT, out, repository=REPOSITORY,
                                book_url="https://example-university.github.io/lm-course", hints="cached",
                                log=lambda line: None)
    return out, summary


@pytest.fixture(scope="module")
def wheel(edition, tmp_path_factory) -> Path:
    """The student package's wheel, built from a copy of the edition (setuptools writes beside its source)."""
    source = tmp_path_factory.mktemp("wheel-source") / "edition"
    shutil.copytree(edition[0], source)
    dist = source.parent / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "-w", str(dist), str(source)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return next(dist.glob("lmcourse-*.whl"))


def _fresh_venv(where: Path) -> Path:
    """A venv at `where` whose third-party packages are the course venv's (a .pth file) and which holds no
    lmcourse; returns its python. Its own old setuptools is removed so that the course venv's is the one seen."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = Path(subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "course-dependencies.pth").write_text(str(ours) + "\n")
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "setuptools"], capture_output=True)
    return python


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The python of a fresh venv with the edition's wheel installed; the course repository not importable."""
    python = _fresh_venv(tmp_path_factory.mktemp("fresh") / "venv")
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, cwd=wheel.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


# --------------------------------------------------------------------------- what the edition holds


def test_the_edition_holds_what_a_student_needs_and_no_instructor_material(edition):
    out, summary = edition
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    for aid in IDS:
        assert f"assignments/{aid}/{aid}.ipynb" in files
        assert f"lmcourse/edition/assignments/{aid}/{aid}.ipynb" in files
        # the grader's copy of the release is the course's, byte for byte (its nbgrader checksums included)
        assert (out / f"lmcourse/edition/assignments/{aid}/{aid}.ipynb").read_bytes() == \
            (ROOT / f"assignments/{aid}/{aid}.ipynb").read_bytes()
    assert {"README.md", "Makefile", "pyproject.toml", "requirements.lock", "weights.lock"} <= files
    assert not [f for f in files if f.startswith(("solutions/", "autograder/", "instructors/", "lmcourse/instructor/"))
                or "__pycache__" in f or f.endswith((".pyc", ".whl"))], sorted(files)[:40]
    # the known mistakes (wrong code written as edits of the solution's lines) stay with the instructor
    assert not [f for f in files if f.endswith("mistakes.py")], sorted(f for f in files if "mistakes" in f)
    readme = (out / "README.md").read_text()
    commands = [line for line in readme.split("```")[1].splitlines() if line.strip()]
    assert commands == ["make setup", "make check ID=01-ngrams"], commands
    # the lock holds the course's own pins
    pins = publish._pins(ROOT)
    for line in (out / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            assert pins.get(name, version) == version, line


def test_the_edition_holds_no_secret(edition):
    out, _ = edition
    secrets = leaks.collect(ROOT, published=out / "lmcourse" / "edition" / "autograder")
    assert len(secrets.bytecode) > 200 and len(secrets.names) > 200
    found = leaks.find(out, leaks.Secrets(bytecode=secrets.bytecode, names=secrets.names)) + \
        leaks.find(out / "assignments", secrets)
    assert not found, "\n".join(found[:20])


def test_the_wheel_holds_no_secret_and_no_instructor_package(edition, wheel):
    out, _ = edition
    secrets = leaks.collect(ROOT, published=out / "lmcourse" / "edition" / "autograder")
    found = leaks.find(wheel, leaks.Secrets(bytecode=secrets.bytecode, names=secrets.names))
    assert not found, "\n".join(found[:20])
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("lmcourse/instructor/")]
    assert "lmcourse/edition/autograder/01-ngrams/reference.replay" in names


def _a_solution_function() -> tuple[str, str]:
    """(name, source) of a function of a solution cell that the release does not give."""
    from lmcourse.grading import notebook as nbmod

    source = Course(ROOT).assignment("01-ngrams").load_source()
    for cell in source.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            tree = ast.parse(nbmod.cell_source(cell))
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and len(node.body) > 3:
                    return node.name, ast.get_source_segment(nbmod.cell_source(cell), node)
    raise AssertionError("no solution function found")


@pytest.mark.parametrize("where", ["a given module", "a visible check file", "the wheel, compiled"])
def test_a_planted_secret_is_found(edition, wheel, tmp_path, where):
    """The scan is not vacuous: an answer (or a hidden check's name) planted in the edition or its wheel is found."""
    out, _ = edition
    secrets = leaks.collect(ROOT, published=out / "lmcourse" / "edition" / "autograder")
    scan = leaks.Secrets(bytecode=secrets.bytecode, names=secrets.names)
    name, source = _a_solution_function()
    copy = tmp_path / "edition"
    if where == "the wheel, compiled":
        import py_compile

        planted = tmp_path / "planted.py"
        planted.write_text(source + "\n")
        py_compile.compile(str(planted), cfile=str(tmp_path / "planted.pyc"))
        shutil.copy2(wheel, tmp_path / wheel.name)
        with zipfile.ZipFile(tmp_path / wheel.name, "a") as z:
            z.write(tmp_path / "planted.pyc", "lmcourse/__pycache__/data.cpython-311.pyc")
        found = leaks.find(tmp_path / wheel.name, scan)
    else:
        shutil.copytree(out, copy)
        target = copy / ("lmcourse/data.py" if where == "a given module" else
                         "lmcourse/edition/autograder/01-ngrams/test_counting.py")
        hidden = next(n for n in secrets.names if n.startswith("test_"))
        target.write_text(target.read_text() + "\n\n" + source + f"\n\n# {hidden}\n")
        found = leaks.find(copy, scan)
    assert found and any(name in f or "compiled" in f for f in found), found


def test_publish_refuses_an_edition_that_would_leak(tmp_path, monkeypatch):
    """`publish` itself scans what it wrote and leaves nothing behind when it finds a secret."""
    name, source = _a_solution_function()
    real = publish._cut_checks

    def leaking(assignment, checks, exclude):
        real(assignment, checks, exclude)
        (checks / "conftest.py").write_text((checks / "conftest.py").read_text() + "\n\n" + source + "\n")

    monkeypatch.setattr(publish, "_cut_checks", leaking)
    with pytest.raises(publish.PublishError, match="solution or hidden-check material"):
        publish.build(ROOT, tmp_path / "out", repository=REPOSITORY, ids=["01-ngrams"])
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# --------------------------------------------------------------------------- the visible checks


def _visible_names(folder: Path) -> set[str]:
    names = set()
    for path in folder.glob("test_*.py"):
        for node in ast.parse(path.read_text()).body:
            if publish._is_check(node) and publish._visibility(node) == "visible":
                names.add(node.name)
    return names


def _check_names(folder: Path) -> set[str]:
    return {node.name for path in folder.glob("test_*.py") for node in ast.parse(path.read_text()).body
            if publish._is_check(node)}


@pytest.mark.parametrize("aid", IDS)
def test_the_editions_visible_checks_are_the_courses(edition, aid):
    """The edition holds exactly the course's visible checks, less those it declares left out; it holds no
    other check; and the declared ones are the known list (which may only shrink)."""
    out, summary = edition
    ours = _visible_names(ROOT / "autograder" / aid)
    theirs = _check_names(out / "lmcourse" / "edition" / "autograder" / aid)
    left_out = set(summary["assignments"][aid]["left_out"])
    assert theirs == ours - left_out and not theirs & left_out
    assert left_out == EXPECTED_LEFT_OUT.get(aid, set())
    assert len(summary["assignments"][aid]["visible_checks"]) == len(theirs)  # each ran on the solution


def test_a_check_file_is_cut_to_its_visible_checks_and_what_they_use(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_text('"""Hidden: the tolerance is 1e-9."""\nimport math\n\nfrom lmcourse.grading.checks import check\n\n'
                    'TOL = 1e-3\nSECRET = 42\n\n\ndef _helper(x):\n    return math.sqrt(x) + TOL\n\n\n'
                    'def _hidden_helper():\n    return SECRET\n\n\n'
                    '@check(points=1, cell="c", visibility="visible")\ndef test_shown(student):\n    assert _helper(4)\n\n\n'
                    '@check(points=1, cell="c")\ndef test_hidden(student):\n    assert _hidden_helper()\n')
    cut = publish.visible_checks_source(path)
    compile(cut, "cut", "exec")
    assert "def test_shown" in cut and "def _helper" in cut and "TOL = 1e-3" in cut and "import math" in cut
    assert "test_hidden" not in cut and "_hidden_helper" not in cut and "SECRET" not in cut and "1e-9" not in cut
    assert publish.visible_checks_source(path, exclude=frozenset({"test_shown"})) is None


# --------------------------------------------------------------------------- installed, on its own


def _run(python: Path, args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, env=_mirror_env(),
                          timeout=900, **kw)


def test_the_installed_package_is_the_editions_and_the_course_is_not_importable(installed, tmp_path):
    probe = ("import importlib.util, json, lmcourse, sys\n"
             "print(json.dumps({'file': lmcourse.__file__, 'instructor': importlib.util.find_spec('lmcourse.instructor')"
             " is not None, 'path': sys.path}))")
    seen = json.loads(_run(installed, ["-c", probe], tmp_path).stdout)
    assert seen["file"].startswith(str(installed.parent.parent)), seen["file"]
    assert not seen["instructor"]
    assert not [p for p in seen["path"] if p and Path(p).resolve() == ROOT]
    shown = _run(installed, ["-m", "lmcourse.cli", "--help"], tmp_path).stdout
    commands = set(re.findall(r"^    (\w+) ", shown, re.M))
    assert commands == {"check", "data"}, shown
    refused = _run(installed, ["-m", "lmcourse.cli", "grade", "01-ngrams", "x", "--out", "y"], tmp_path)
    assert refused.returncode == 2 and "invalid choice: 'grade'" in refused.stderr, refused.stderr


@pytest.mark.parametrize("aid", IDS)
def test_lmcourse_check_in_the_installed_edition(installed, edition, tmp_path, aid):
    """Outside any course checkout: ready (exit 0) for an honest notebook, not ready (exit 1) for the
    release; the visible checks run are the edition's (each passes on the honest notebook)."""
    work = tmp_path / "work"
    shutil.copytree(edition[0] / "assignments", work / "assignments")
    honest = submission_from_solution(ROOT, aid, tmp_path / "honest")
    mine = work / "assignments" / aid / "mine.ipynb"
    shutil.copy2(honest, mine)
    ready = _run(installed, ["-m", "lmcourse.cli", "check", aid, str(mine)], work)
    assert ready.returncode == 0, ready.stdout[-3000:] + ready.stderr[-2000:]
    assert "ready to submit" in ready.stdout and "likely cause" not in ready.stdout
    checks = len(edition[1]["assignments"][aid]["visible_checks"])
    if checks:
        assert "visible checks: " in ready.stdout and "✗" not in ready.stdout
    release = work / "assignments" / aid / f"{aid}.ipynb"  # the edition's copy, with its Colab cells
    not_ready = _run(installed, ["-m", "lmcourse.cli", "check", aid, str(release)], work)
    assert not_ready.returncode == 1, not_ready.stdout[-3000:] + not_ready.stderr[-2000:]
    assert "not ready to submit yet" in not_ready.stdout and "grader" not in not_ready.stderr.lower()


def test_the_editions_hints_name_only_what_a_student_sees(edition):
    """hints.json holds each shipped mistake's signature cut to the edition's visible checks and the test
    cells, under a number: no hidden check's name, no mistake's name."""
    from lmcourse.grading import signatures as sig

    out, summary = edition
    shipped = sig.load_file(out / "lmcourse" / "edition" / "autograder" / "01-ngrams" / sig.FILE)
    assert len(shipped) == summary["assignments"]["01-ngrams"]["hints"] >= 2
    seen = set(summary["assignments"]["01-ngrams"]["visible_checks"])
    for s in shipped:
        assert set(s.ran) <= seen | {n for n in s.ran if n.startswith("test cell ")} and set(s.failing) <= set(s.ran)
        assert s.mistake.startswith("01-ngrams:") and s.hint
    assert {s.hint for s in shipped} <= {m.hint for m in mistakes.load(ROOT, "01-ngrams").values()}
    for aid in IDS[1:]:  # none made for the others here (LMCOURSE_HINTS=cached found none): no file
        assert not (out / "lmcourse" / "edition" / "autograder" / aid / sig.FILE).exists()


def test_lmcourse_check_in_the_edition_names_a_known_mistake(installed, edition, tmp_path):
    """A student whose notebook has a known mistake that the visible checks and test cells tell apart reads
    its hint under "likely causes"; the honest notebook reads none (test_lmcourse_check_in_the_installed_edition
    runs it)."""
    catalogue = mistakes.load(ROOT, "01-ngrams")
    m = catalogue[HINTED[0]]
    work = tmp_path / "work"
    wrong = submission_from_solution(ROOT, "01-ngrams", work, replace={m.function: m.wrong})
    checked = _run(installed, ["-m", "lmcourse.cli", "check", "01-ngrams", str(wrong)], work)
    assert checked.returncode == 1, checked.stdout[-3000:] + checked.stderr[-2000:]
    text = " ".join(checked.stdout.split())
    assert "likely causes" in text and " ".join(m.hint.split()) in text, checked.stdout[-3000:]
    assert "greedy_decode" in text.split("likely causes")[1]


def test_a_call_the_record_does_not_hold_is_the_graders_failure():
    answers = {replay.call_key("call", "f", (1,), {}): [1, 2]}
    r = replay.Replay(answers, "01-ngrams")
    assert r.f(1) == [1, 2]
    r.f(1).append(3)  # a check that changes what came back changes no later answer
    assert r.f(1) == [1, 2]
    with pytest.raises(replay.NotRecorded, match="not your code's"):
        r.f(2)
    from lmcourse.grading.plugin import GRADER_FAULTS

    assert issubclass(replay.NotRecorded, GRADER_FAULTS)


def test_a_record_holds_data_only():
    import collections

    import numpy as np
    import torch

    answers = {"a": [np.arange(3.0), torch.ones(2, dtype=torch.bfloat16), collections.Counter("aab"), (1, "x", None)]}
    again = replay.loads(replay.dumps(answers))
    assert replay.digest(again) == replay.digest(answers)
    for smuggled in (print, torch.nn.Linear(2, 2), replay.Replay):
        with pytest.raises(Exception, match="may not hold|cannot be recorded|Can't pickle|can't pickle"):
            replay.dumps({"x": smuggled})


def test_a_digest_is_the_content():
    import collections

    import numpy as np

    assert replay.digest({"a": 1, "b": 2}) == replay.digest({"b": 2, "a": 1})
    assert replay.digest(collections.Counter("ab")) == replay.digest({"a": 1, "b": 1})
    assert replay.digest(np.arange(3)) != replay.digest(np.arange(3.0))
    assert replay.digest([1.0]) != replay.digest([1.0000000001]) and replay.digest((1,)) != replay.digest([1])


# --------------------------------------------------------------------------- the record answers every student


UNITS = {"01-ngrams": "test_unit01_ngrams", "02-word2vec": "test_unit02_word2vec", "03-rnnlm": "test_unit03_rnnlm",
         "04-attention": "test_unit04_attention", "05-transformer": "test_unit05_transformer",
         "06-bert": "test_unit06_bert", "07-gpt": "test_unit07_gpt", "08-capstone": "test_unit08_capstone"}


def _contract(aid: str):
    """The unit's contract class (its correct alternates and known-wrong variants)."""
    import importlib

    module = importlib.import_module(UNITS[aid])
    return next(c for c in vars(module).values() if isinstance(c, type) and getattr(c, "AID", None) == aid
                and c.__name__.startswith("Test"))


def _edition_grade(edition, aid: str, notebook: Path, **kwargs):
    from lmcourse.grading.runner import grade

    return grade(edition[0] / "lmcourse" / "edition", aid, notebook, tier="cpu", visible_only=True, **kwargs)


ALTERNATES = [(aid, name) for aid in IDS if aid != "06-bert"  # no visible check there
              for name in _contract(aid).ALTERNATES]


@pytest.mark.parametrize("aid,alternate", ALTERNATES, ids=[f"{a}-{n[:40]}" for a, n in ALTERNATES])
def test_every_correct_alternate_passes_the_editions_checks(edition, tmp_path, aid, alternate):
    """The record holds every answer a correct student's checks ask for: a call that depended on the
    student's own results would be missing for some other correct implementation (a grader error here)."""
    nb = submission_from_solution(ROOT, aid, tmp_path, replace=_contract(aid).ALTERNATES[alternate])
    r = _edition_grade(edition, aid, nb)
    failed = {t.name: t.output for t in r.tests if not t.passed}
    assert r.status == "ok" and not failed and len(r.tests) == len(edition[1]["assignments"][aid]["visible_checks"]), \
        (r.status, r.message, failed)


def _caught_in_the_edition(edition) -> list[tuple[str, str]]:
    out = []
    for aid in IDS:
        shown = set(edition[1]["assignments"][aid]["visible_checks"])
        out += [(aid, v) for v, (_, _, catchers) in _contract(aid).VARIANTS.items() if set(catchers) & shown]
    return out


@pytest.mark.skipif(os.environ.get("LMCOURSE_EDITION_ALL") != "1",
                    reason="opt-in: LMCOURSE_EDITION_ALL=1 grades the known-wrong variants in the edition (70 s)")
def test_known_wrong_variants_are_caught_in_the_edition_as_in_the_course(edition, tmp_path):
    """Each known-wrong variant that a visible check of the edition must catch is caught there (only its
    catchers run); for each assignment's first one, every visible check's score and message are the course's:
    the replayed answers are the solution's, whatever the student's code did."""
    from lmcourse.grading.runner import grade

    cases = _caught_in_the_edition(edition)
    assert len(cases) >= 5, cases  # not vacuous
    compared = set()
    for i, (aid, variant) in enumerate(cases):
        function, source, catchers = _contract(aid).VARIANTS[variant]
        nb = submission_from_solution(ROOT, aid, tmp_path / str(i), replace={function: source})
        shown = set(edition[1]["assignments"][aid]["visible_checks"])
        if aid not in compared:
            compared.add(aid)
            # A training trace ("step by step") recomputes the loss gradient with the student's own model in the
            # edition (seq2seq.trusted_model): a model bug fails it in the course, not there (its own check
            # catches it); the loop bugs it is for are in both (the catchers below).
            ours = {t.name: (t.score, t.output) for t in grade(ROOT, aid, nb, tier="cpu", visible_only=True).tests
                    if t.name in shown and "step by step" not in t.name}
            theirs = _edition_grade(edition, aid, nb)
            assert theirs.status == "ok" and {t.name: (t.score, t.output) for t in theirs.tests
                                              if "step by step" not in t.name} == ours, (aid, variant, theirs.message)
        else:
            theirs = _edition_grade(edition, aid, nb, exclude=shown - set(catchers))
        scores = {t.name: (t.score, t.kind) for t in theirs.tests}
        for name in set(catchers) & shown:
            assert scores[name][0] == 0 and scores[name][1] != "grader-error", (aid, variant, name, scores[name])


# --------------------------------------------------------------------------- Colab


def test_the_colab_cell_installs_the_edition_only_in_colab(edition, tmp_path):
    out, _ = edition
    nb = json.loads((out / "assignments" / "01-ngrams" / "01-ngrams.ipynb").read_text())
    badge, cell = nb["cells"][0], nb["cells"][1]
    assert "colab.research.google.com/github/example-university/lm-course-student/blob/main/assignments/01-ngrams/" \
           "01-ngrams.ipynb" in "".join(badge["source"])
    assert "demo" in cell["metadata"]["tags"] and cell["cell_type"] == "code"
    assert f"git+{REPOSITORY}@main" in "".join(cell["source"])
    # The same cell, made for a local folder standing in for the repository, run by a fresh python.
    local = tmp_path / "repository"
    shutil.copytree(out, local)
    code = "".join(publish.colab_cells(str(local), "01-ngrams")[1]["source"])
    python = _fresh_venv(tmp_path / "venv")
    fake = tmp_path / "fake-colab"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text("")
    env = dict(_mirror_env(), PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0")
    outside = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert outside.returncode == 0 and "not in Colab" in outside.stdout
    assert subprocess.run([str(python), "-c", "import lmcourse"], capture_output=True, cwd=tmp_path).returncode != 0
    colab = subprocess.run([str(python), "-c", "import google.colab\n" + code], cwd=tmp_path, capture_output=True, text=True,
                           env=dict(env, PYTHONPATH=str(fake)), timeout=600)
    assert colab.returncode == 0, colab.stdout[-2000:] + colab.stderr[-3000:]
    where = subprocess.run([str(python), "-c", "import lmcourse; print(lmcourse.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path)
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout + where.stderr


# --------------------------------------------------------------------------- opt-in: the edition's own setup


@pytest.mark.skipif(os.environ.get("LMCOURSE_EDITION_SETUP") != "1",
                    reason="opt-in: LMCOURSE_EDITION_SETUP=1 runs the edition's `make setup` from the package "
                           "registries (minutes) and `make check` in it")
def test_the_editions_two_commands(edition, tmp_path):
    work = tmp_path / "lm-course-student"
    shutil.copytree(edition[0], work)
    honest = submission_from_solution(ROOT, "01-ngrams", tmp_path / "honest")
    shutil.copy2(honest, work / "assignments" / "01-ngrams" / "01-ngrams.ipynb")
    env = {k: v for k, v in _mirror_env().items() if k not in ("VIRTUAL_ENV",)}
    setup = subprocess.run(["make", "setup"], cwd=work, capture_output=True, text=True, env=env, timeout=3600)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-3000:]
    check = subprocess.run(["make", "check", "ID=01-ngrams"], cwd=work, capture_output=True, text=True, env=env)
    assert check.returncode == 0 and "ready to submit" in check.stdout, check.stdout[-3000:] + check.stderr[-2000:]
    released_notebook(ROOT, "01-ngrams", work / "assignments" / "01-ngrams")  # the release again
    check = subprocess.run(["make", "check", "ID=01-ngrams"], cwd=work, capture_output=True, text=True, env=env)
    assert check.returncode != 0 and "not ready" in check.stdout
