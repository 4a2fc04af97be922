"""Reading, checking and extracting notebooks; the expect_* helpers; releases without solutions."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lmcourse.instructor.release  # noqa: F401  (first: it makes importing nbformat fast)
from lmcourse.course import Course, load_release, load_source
from lmcourse.grading import notebook as nbmod
import nbformat  # noqa: E402
from nbgrader.utils import compute_checksum as nbgrader_checksum  # noqa: E402
from lmcourse.grading.checks import check, expect_close, expect_equal, expect_shape, info_of

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"


def courses():
    """(course root, assignment id) for the fixture and every real unit present."""
    out = [(FIXTURE, AID)]
    out += [(ROOT, aid) for aid in Course(ROOT).assignment_ids()]
    return out


@pytest.fixture(scope="module")
def release():
    return load_release(FIXTURE, AID)


def test_checksum_is_nbgraders(release):
    nb = nbformat.read(FIXTURE / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    graded = [c for c in nb.cells if "nbgrader" in c.metadata]
    assert graded
    for ours, theirs in zip([c for c in release.cells if "nbgrader" in c.metadata], graded):
        assert nbmod.compute_checksum(ours) == nbgrader_checksum(theirs) == theirs.metadata.nbgrader["checksum"]


@pytest.mark.parametrize("content, status", [
    (b"", "empty"),
    (b"   \n", "empty"),
    (b"{not json", "not-json"),
    (b"\xff\xfe\x00garbage", "not-json"),
    (b"[1, 2, 3]", "not-a-notebook"),
    (b'{"cells": []}', "not-a-notebook"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": 7}]}',
     "invalid-notebook"),
    (b'{"nbformat": 2, "worksheets": "nope"}', "old-nbformat"),
])
def test_bad_files_are_one_clear_status(tmp_path, content, status):
    path = tmp_path / "x.ipynb"
    path.write_bytes(content)
    with pytest.raises(nbmod.NotebookError) as err:
        nbmod.read_notebook(path)
    assert err.value.status == status
    assert "\n" not in err.value.message and "x.ipynb" in err.value.message


def test_v3_notebook_is_upgraded(tmp_path):
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""}, "worksheets": [{"cells": [
        {"cell_type": "code", "input": "x = 1", "language": "python", "outputs": [], "metadata": {}}]}]}
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(v3))
    nb = nbmod.read_notebook(path)
    assert nb.metadata["lmcourse_upgraded_from"] == 3 and nb.cells[0].source == "x = 1"


def _cell(nb, gid):
    return next(c for c in nb.cells if nbmod.grade_id(c) == gid)


def test_release_against_itself_is_clean(release):
    ext = nbmod.check_and_extract(release, release)
    assert ext.problems == [] and ext.blocked_cells == {}
    assert "raise NotImplementedError()" in ext.source
    assert "print(softmax(np.arange(5.0)))" not in ext.source  # the demo cell
    assert "assert count_words" not in ext.source  # test cells never reach the module


def test_structure_problems(release):
    nb = json.loads(json.dumps(release))
    nb = nbmod._node(nb)
    nb.cells = [c for c in nb.cells if nbmod.grade_id(c) != "count_words"]          # deleted answer
    _cell(nb, "test_softmax").metadata["nbgrader"]["grade_id"] = "test_mine"          # renamed test cell
    _cell(nb, "setup").source += "\nnp.allclose = lambda *a, **k: True"                # edited given code
    _cell(nb, "test_perplexity").source = "pass"                                       # edited test cell
    _cell(nb, "perplexity").source = "def perplexity(p):\n    return (\n"              # syntax error
    _cell(nb, "softmax").source = "%timeit 1\n!ls\ndef softmax(x):\n    return x"      # magics
    ext = nbmod.check_and_extract(nb, release)
    got = {(p.status, p.cell, p.warning) for p in ext.problems}
    assert got == {("missing-cell", "count_words", False), ("modified-cell", "setup", False),
                   ("syntax-error", "perplexity", False),
                   # the renamed test cell is found by its content; an edited test cell costs nothing (the
                   # grader never runs test cells): both are warnings, and no check is blocked
                   ("recovered-cells", None, True), ("modified-cell", "test_perplexity", True)}
    assert ext.blocked_cells == {}
    assert "np.allclose = lambda" not in ext.source  # the release's locked cell is used
    assert "# %timeit 1" in ext.source and "# !ls" in ext.source
    compile(ext.source, "student.py", "exec")
    for p in ext.problems:
        assert "\n" not in p.message and (p.cell is None or p.cell in p.message)


def test_normalise_ignores_what_does_not_change_code():
    code = "import numpy as np\n\ndef f(x):\n    return x\n"
    for variant in (code.replace("\n", "\r\n"), code.replace("\n", "  \n"), code.rstrip("\n"), code + "\n\n",
                    "\ufeff" + code, code.replace("\n\n", "\n\n\n\t\n")):
        assert nbmod.normalise(variant) == nbmod.normalise(code)
    assert nbmod.normalise(code.replace("    return", "  return")) != nbmod.normalise(code)  # indentation counts
    assert nbmod.defined_names("%time x = 1\ndef f():\n    pass\nclass C:\n    pass\nk = 3\nprint(k)") == \
        {"f", "C", "k"}  # (a magic line is commented out, as in the module)
    assert nbmod.defined_names("def f(:\n    pass\nclass C:\n  def g(self): pass") == {"f", "C"}  # no parse


def test_text_notebooks_are_read_like_the_notebook(tmp_path, release):
    import jupytext

    nb = nbformat.read(FIXTURE / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    for fmt, suffix in (("py:percent", ".py"), ("md", ".md")):
        path = tmp_path / f"{AID}{suffix}"
        path.write_text(jupytext.writes(nb, fmt=fmt))
        ext = nbmod.check_and_extract(nbmod.read_notebook(path), release)
        assert ext.problems == [] and ext.source == nbmod.check_and_extract(release, release).source


def test_reference_is_the_solution():
    src = nbmod.extract_reference(load_source(FIXTURE, AID))
    assert "BEGIN SOLUTION" not in src and "counts[word] = counts.get(word, 0) + 1" in src
    ns = {}
    exec(compile(src, "ref", "exec"), ns)
    assert ns["count_words"]("a b a") == {"a": 2, "b": 1}


def test_expect_helpers_say_expected_and_found():
    with pytest.raises(AssertionError, match=r"expected shape \(3,\), found shape \(2,\)"):
        expect_shape([1.0, 2.0], (3,), what="p")
    with pytest.raises(AssertionError, match=r"expected numbers.*found a str"):
        expect_close("nope", [1.0], what="p")
    with pytest.raises(AssertionError, match=r"1 of 3 entries differ.*index \(1,\): expected 2, found 5"):
        expect_close(np.array([1.0, 5.0, 3.0]), [1.0, 2.0, 3.0], what="p")
    with pytest.raises(AssertionError, match=r"NaN or infinite"):
        expect_close([np.nan], [1.0], what="p")
    with pytest.raises(AssertionError, match=r"1 key\(s\) missing"):
        expect_equal({"a": 1}, {"a": 1, "b": 2}, what="counts")
    with pytest.raises(AssertionError, match=r"counts\['a'\]: expected 1, found 2"):
        expect_equal({"a": 2}, {"a": 1}, what="counts")
    expect_close(np.ones((2, 2)), np.ones((2, 2)))
    expect_equal([1, "x", {"k": [2.0]}], [1, "x", {"k": [2.0]}])
    expect_shape(np.zeros((4, 7)), (4, None))


def test_check_decorator_validates():
    @check(points=2, cell="test_x", name="does x")
    def test_x():
        pass

    assert info_of(test_x).points == 2 and info_of(test_x).gradescope_visibility == "after_published"
    with pytest.raises(ValueError):
        check(points=1, cell="c", name="n", visibility="secret")


def release_leaks(root, aid, release: str) -> list[str]:
    """Solution and hidden-check lines of `aid` that appear as code lines in `release`."""
    source = load_source(root, aid)
    text = json.loads(release)
    # whole lines of code cells: prose that mentions a formula is not a leak, a copied line is
    release_code = {line.strip() for c in text["cells"] if c["cell_type"] == "code"
                    for line in "".join(c["source"]).splitlines()}
    secret, given = set(), set()
    for cell in source.cells:
        inside = False
        for line in nbmod.cell_source(cell).splitlines():
            if re.match(r"\s*#+\s*BEGIN (SOLUTION|HIDDEN TESTS)", line):
                inside = True
            elif re.match(r"\s*#+\s*END (SOLUTION|HIDDEN TESTS)", line):
                inside = False
            elif inside and len(line.strip()) > 12 and not line.strip().startswith("#"):
                secret.add(line.strip())
            elif cell.cell_type == "code":
                given.add(line.strip())
    # A solution line that the source also shows outside every solution region
    # (e.g. `rng = np.random.default_rng(seed)` in a given helper) is no secret.
    leaks = [f"solution line: {line!r}" for line in sorted(secret - given) if line in release_code]
    # the checks' files; not the known mistakes (mistakes.py), whose whole wrong definitions repeat the given code
    for check_file in sorted(p for p in (root / "autograder" / aid).glob("*.py") if p.name != "mistakes.py"):
        for line in check_file.read_text().splitlines():
            if len(line.strip()) > 25 and not line.strip().startswith(("#", "import", "from", '"""')):
                # a header (`def forward(self, x, h=None):`, `for tau in (1.0, 2.0):`) is the
                # interface or the inputs, never the answer (test_leaks.py has the same rule)
                if line.strip() in release_code and not HEADER.match(line.strip()):
                    leaks.append(f"check line: {line.strip()!r}")
    return leaks


HEADER = re.compile(r"^(def|class|for|if|elif|while|with)\b.*:$")


@pytest.mark.parametrize("root, aid", courses(), ids=lambda v: getattr(v, "name", v))
def test_release_holds_no_solution_and_no_hidden_check(root, aid):
    release = (root / "assignments" / aid / f"{aid}.ipynb").read_text()
    assert release_leaks(root, aid, release) == []


def test_release_leak_check_catches_a_planted_line():
    root, aid = courses()[0]
    release = json.loads((root / "assignments" / aid / f"{aid}.ipynb").read_text())
    source = load_source(root, aid)
    inside_region = [cell_text.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
                     for cell_text in map(nbmod.cell_source, source.cells) if "### BEGIN SOLUTION" in cell_text]
    solution_line = next(line for region in inside_region for line in region.splitlines()
                         if len(line.strip()) > 12 and not line.strip().startswith("#"))
    check_line = next(line for f in sorted((root / "autograder" / aid).glob("test_*.py"))
                      for line in f.read_text().splitlines()
                      if len(line.strip()) > 25 and not line.strip().startswith(("#", "import", "from", '"""', "@")))
    for planted, kind in [(solution_line, "solution line"), (check_line, "check line")]:
        leaky = json.loads(json.dumps(release))
        leaky["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                               "source": planted})
        assert any(leak.startswith(kind) for leak in release_leaks(root, aid, json.dumps(leaky))), planted


def test_assign_check_detects_stale_release_and_rewrites_it_identically(tmp_path):
    """--check exits 1 naming the stale id; `assign` regenerates byte-for-byte what is committed."""
    course = tmp_path / "course"
    course.mkdir()
    for part in ("solutions", "assignments", "autograder"):
        shutil.copytree(FIXTURE / part, course / part)
    committed = (FIXTURE / "assignments" / AID / f"{AID}.ipynb").read_bytes()
    release = course / "assignments" / AID / f"{AID}.ipynb"
    release.write_bytes(committed.replace(b"raise NotImplementedError()", b"return 42", 1))
    cli = [sys.executable, "-m", "lmcourse.cli", "assign", "--course", str(course)]
    out = subprocess.run(cli + ["--check"], capture_output=True, text=True)
    assert out.returncode == 1 and f"{AID}: STALE" in out.stdout, out.stdout + out.stderr
    assert subprocess.run(cli, capture_output=True).returncode == 0
    assert release.read_bytes() == committed, "tests/fixtures/course/assignments is out of date: run " \
        "`lmcourse assign --course tests/fixtures/course`"


@pytest.mark.skipif(not Course(ROOT).assignment_ids(), reason="no real units yet")
def test_course_assignments_are_in_sync():
    out = subprocess.run([sys.executable, "-m", "lmcourse.cli", "assign", "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, f"run `lmcourse assign`:\n{out.stdout}{out.stderr}"


def test_check_report_says_when_isolation_is_partial():
    from lmcourse.grading.report import check_text

    result = {"assignment": AID, "isolation": "partial: not root (uid 1000); rlimits, timeouts",
              "problems": [], "status": "ok", "score": 1, "max_score": 2, "not_run": 3, "hidden_points": 5,
              "parts": {"test_a": "Part 1 — A (1 point)", "test_b": "Part 2 — B (1 point)"}, "tests": [
                  {"name": "a", "status": "passed", "score": 1, "max_score": 1, "cell": "test_a", "function": "f",
                   "output": "", "visibility": "visible"},
                  {"name": "b", "status": "failed", "score": 0, "max_score": 1, "cell": "test_b", "function": "g",
                   "output": "g(2): expected 4, found 5", "visibility": "visible"}]}
    text = check_text(result, Path("nb.ipynb"))
    assert "isolation: partial (not root (uid 1000))" in text
    assert "✗ check: b  [0/1]  (function g)" in text and "expected 4, found 5" in text
    assert text.index("Part 1 — A") < text.index("✓ check: a") < text.index("Part 2 — B") < text.index("✗ check: b")
    assert "hidden checks worth 5 points" in text and "not ready to submit yet" in text


def test_the_isolation_line_tells_the_three_plans_apart():
    from lmcourse.grading.report import isolation_line
    from lmcourse.grading.sandbox.plan import make_plan

    assert "as a separate user" in isolation_line("full: uid 4242, private network, private PID namespace; rlimits")
    without_root = isolation_line("full, without root: a user namespace (your uid, 1000), private network; rlimits")
    assert without_root.startswith("isolation: full (") and "separate user" not in without_root
    assert "sandbox of its own" in without_root
    assert isolation_line("partial: not root (uid 1000) and bubblewrap (bwrap) is not installed; rlimits") \
        .startswith("isolation: partial (")
    # The plan this machine gives says which of them it is, in the words isolation_line reads.
    plan = make_plan(None, force_no_bwrap=False, allocate=False)
    assert plan.description.startswith("full" if plan.mode == "bwrap" else "partial")
