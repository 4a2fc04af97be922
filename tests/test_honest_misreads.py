"""Honest code the grader used to misread (issue #37, class 6).

- A line that starts with ``%`` inside brackets (PEP 8's break before a binary
  operator, ``("%d tokens"\\n % n)``) is Python, not a magic: only what IPython
  itself would treat as a magic or a shell escape (a logical line's start) is
  neutralised, with IPython's own transformer.
- A scratch line that raises at the top level of one answer cell
  (``print(debug_tensor.shape)``) costs the checks of that cell, not the
  notebook: the module is loaded cell by cell, as a kernel's "run all" does,
  and the student reads the cause once, with the cell and the line.

Each grading test here failed on the grader before this change (a syntax error
for the ``%`` line; ``import-error`` with every check at 0 for the scratch
line). The 04-attention grades leave out its two training checks (the CPU
training run alone takes 40 s): a cell failure in Part 1 does not concern them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmcourse.course import Course, load_source
from lmcourse.grading import grade_notebook
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.report import check_text, feedback_html
from lmcourse.grading.sandbox import Limits, Worker, messages
from lmcourse.grading.sandbox.inside import cells as inside_cells
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"
FAST = {"call_timeout": 5.0, "import_timeout": 10.0, "total_timeout": 60.0}
ALL_FIXTURE = 6


def _answer(path: Path, gid: str, source: str) -> Path:
    """The notebook at `path` with answer cell `gid` holding `source`."""
    nb = json.loads(path.read_text())
    (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid]
    cell["source"] = source
    path.write_text(json.dumps(nb))
    return path


def _solution_of(root: Path, aid: str, gid: str) -> str:
    """The solution's code of answer cell `gid`."""
    (cell,) = [c for c in load_source(root, aid).cells if nbmod.grade_id(c) == gid]
    return nbmod.strip_markers(cell.source)


# ----------------------------------------------------------------------------- (a) magics

CONTINUED = ('label = ("%d tokens, %s"\n'
             '         % (n, "ok"))\n')


def test_a_percent_that_continues_a_line_is_python():
    code = CONTINUED + "x = (a\n     % b)\n"
    assert nbmod.comment_magics(code) == code.rstrip("\n")  # nothing to neutralise: valid Python as it is
    compile(nbmod.comment_magics(code), "cell", "exec")


def test_what_ipython_reads_as_its_syntax_is_neutralised_and_nothing_else():
    code = ("%timeit f()\n"
            "!ls -l\n"
            + CONTINUED +
            "files = !ls\n"
            "for i in range(3):\n"
            "    %time f(i)\n"
            "s = '''\n%not a magic: inside a string\n'''\n"
            "!echo one \\\n"
            "    two\n"
            "f?\n")
    out = nbmod.comment_magics(code)
    lines = out.splitlines()
    assert len(lines) == len(code.splitlines())  # line numbers kept (tracebacks, the line map)
    compile(out, "cell", "exec")                  # valid Python, the block under `for` included
    assert lines[0] == "pass  # %timeit f()" and lines[1] == "pass  # !ls -l"
    assert lines[2:4] == CONTINUED.splitlines()  # the `%` continuation is kept as the student wrote it
    assert lines[4] == "files = None  # !ls" and lines[6] == "    pass  # %time f(i)"
    assert "%not a magic: inside a string" in lines  # a string is never touched
    assert lines[10:12] == ["pass  # !echo one \\", "#     two"] and lines[12] == "pass  # f?"
    # none of IPython's calls reaches the module: the grader's worker has no IPython to run them
    assert "get_ipython" not in out


def test_a_cell_magic_keeps_its_body():
    out = nbmod.comment_magics("%%time\nx = 1\n%time y = 2\n")
    assert out.splitlines() == ["# %%time", "x = 1", "pass  # %time y = 2"]


def test_without_ipython_valid_python_is_left_alone_and_magics_commented(monkeypatch):
    monkeypatch.setattr(nbmod, "_ipy", None)
    nbmod.comment_magics.cache_clear()
    try:
        assert nbmod.comment_magics(CONTINUED) == CONTINUED.rstrip("\n")
        assert nbmod.comment_magics("%timeit f()\nx = 1").splitlines() == ["# %timeit f()", "x = 1"]
    finally:
        nbmod.comment_magics.cache_clear()


def test_a_percent_continuation_grades_as_the_solution_does(tmp_path):
    """The perplexity cell with a `%`-continued line, a `%timeit` and a `!ls`: full marks, status ok."""
    path = submission_from_solution(FIXTURE, AID, tmp_path)
    _answer(path, "perplexity", "%timeit perplexity([0.5, 0.5])\n"
                                "!ls\n"
                                "def perplexity(probs):\n"
                                '    note = ("mean log-probability of %d tokens"\n'
                                "            % len(probs))\n"
                                "    return float(math.exp(-sum(math.log(p) for p in probs) / len(probs)))\n")
    result = grade_notebook(FIXTURE, AID, path, limits=FAST)
    assert (result["status"], result["score"], result["max_score"]) == ("ok", ALL_FIXTURE, ALL_FIXTURE), \
        (result["message"], result["problems"])
    assert [p for p in result["problems"] if not p["warning"]] == []


# ----------------------------------------------------------------------------- (b) a cell that raises


def test_the_worker_loads_a_notebook_module_cell_by_cell():
    parts = [("setup", "locked", "import math"),
             ("a", "solution", "def f():\n    return 1\nprint(debug_tensor.shape)\ndef g():\n    return 2"),
             ("b", "solution", "def h():\n    return math.pi"),
             ("c", "solution", "return 1")]  # parses, but does not compile: nothing of it runs
    source, line_map = nbmod._join(parts)
    with Worker(source, limits=Limits(call_timeout=10, import_timeout=20, total_timeout=60)) as w:
        assert w.import_error is None, w.import_error
        assert w.call("f") == 1 and w.call("h") == pytest.approx(3.14159, abs=1e-5)  # before it, and after
        assert not w.has("g")  # after the line that raised: not defined, as in a kernel
        errors = w.cell_errors
    by_cell = {first: gid for first, _, gid in line_map}
    assert [(by_cell[e["first"]], e["type"]) for e in errors] == [("a", "NameError"), ("c", "SyntaxError")]
    assert errors[0]["line"] == line_map[1][0] + 2 and "debug_tensor" in errors[0]["message"]
    assert "print(debug_tensor.shape)" in errors[0]["traceback"]
    # a module with no cells line (any other source) is imported whole, as before
    with Worker("def f():\n    return 1\n1 / 0\n", limits=Limits(import_timeout=20, total_timeout=60)) as w:
        assert w.import_error is not None and w.cell_errors == []


def test_the_cells_line_is_read_strictly_and_the_report_checked():
    ok = ['"""doc"""', '# lmcourse-cells: [[5, 6, "a"], [9, 9, "b"]]'] + [""] * 7
    assert inside_cells.cell_ranges(ok) == [(5, 6), (9, 9)]
    for bad in ('# lmcourse-cells: [[5, 4, "a"]]', '# lmcourse-cells: [[1, 2, "a"]]', "# lmcourse-cells: {",
                '# lmcourse-cells: [[5, 99, "a"]]', '# lmcourse-cells: [[6, 6, "a"], [5, 5, "b"]]',
                "# lmcourse-cells: 7", "x = 1"):
        assert inside_cells.cell_ranges(ok[:1] + [bad] + ok[2:]) is None, bad
    good = {"first": 5, "line": 6, "type": "NameError", "message": "name 'x' is not defined", "traceback": ""}
    hello = {"cell_errors": [good, {"first": "5"}, dict(good, line=None), "junk", dict(good, type=3)]}
    assert messages.cell_errors(hello) == [good]
    assert messages.cell_errors({"cell_errors": "junk"}) == [] == messages.cell_errors(None)


SOFTMAX = "masked_softmax without a mask"
SOFTMAX_MASK = "masked_softmax with a mask"


def _unit04_training_checks() -> tuple[str, ...]:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from test_unit04_attention import STEPS, TRAINING

    return (TRAINING, STEPS)


needs_04 = pytest.mark.skipif("04-attention" not in Course(ROOT).assignment_ids(), reason="unit 04 not present")


@needs_04
def test_a_scratch_line_costs_only_the_checks_of_its_cell(tmp_path):
    aid = "04-attention"
    code = _solution_of(ROOT, aid, "masked_softmax") + "\n\nprint(debug_tensor.shape)\n"
    line = len(code.rstrip("\n").splitlines())
    path = _answer(submission_from_solution(ROOT, aid, tmp_path), "masked_softmax", code)
    result = grade_notebook(ROOT, aid, path, exclude=_unit04_training_checks())
    lost = {t["name"] for t in result["tests"] if t["score"] < t["max_score"]}
    assert {name.split(":")[0] for name in lost} == {SOFTMAX, SOFTMAX_MASK} and len(lost) == 2, \
        [(t["name"], t["output"]) for t in result["tests"] if t["name"] in lost]
    assert result["score"] == result["max_score"] - 2 and len(result["tests"]) > 10
    for t in result["tests"]:
        if t["name"] in lost:
            assert t["output"].startswith("not run: cell 'masked_softmax' raised NameError"), t["output"]
            assert "debug_tensor" not in t["output"]  # the cause is told once, in the notebook's problems
    assert result["status"] == "import-error"
    (problem,) = [p for p in result["problems"] if not p["warning"]]
    assert problem["cell"] == "masked_softmax"
    assert f"cell 'masked_softmax' raised NameError at line {line} when your notebook was loaded: name " \
           "'debug_tensor' is not defined. Remove or fix that line; the other cells were loaded" in problem["message"]
    # `lmcourse check`'s text, and feedback.html below its status line (which is the problem's first line)
    html = feedback_html(result, "student")
    assert "raised NameError at line" in html.split("<h2>Problems")[0]
    for text in (check_text(result, path), html.split("<h2>Problems")[1].replace("&#x27;", "'")):
        assert text.count("'debug_tensor' is not defined") == 1, text
        assert text.count("print(debug_tensor.shape)") == 1, text


@needs_04
def test_a_given_cell_that_a_student_cell_breaks_is_named_as_such(tmp_path):
    """`nn = None` at the end of an answer cell: the given cell after it (and every answer cell that
    subclasses nn.Module) raises when loaded. What those cells define earns nothing; the cells before
    them and those that do not need nn still earn their points."""
    aid = "04-attention"
    code = _solution_of(ROOT, aid, "masked_softmax") + "\n\nnn = None\n"
    path = _answer(submission_from_solution(ROOT, aid, tmp_path), "masked_softmax", code)
    result = grade_notebook(ROOT, aid, path, exclude=_unit04_training_checks()[:1])
    raised = {p["cell"]: p["message"] for p in result["problems"] if not p["warning"]}
    assert set(raised) == {"attention_function", "MultiHeadAttention", "AttentionSeq2Seq"}, raised
    assert raised["attention_function"].startswith("the given cell 'attention_function' raised AttributeError")
    assert "It is the released code: something one of your cells before it" in raised["attention_function"]
    scores = {t["name"].split(":")[0]: (t["score"], t["max_score"], t["output"]) for t in result["tests"]}
    for name, (score, max_score, output) in scores.items():
        if name.startswith(("masked_softmax", "causal_mask", "key_padding_mask")):
            assert score == max_score, (name, output)
        else:  # attention runs through the given AttentionFunction; the rest needs the nn.Module subclasses
            assert score == 0 and output.startswith("not run: ") and "raised AttributeError" in output, \
                (name, output)
    assert result["status"] == "import-error" and result["score"] == 4


def test_every_answer_cell_raising_ends_in_one_clear_grade(tmp_path):
    path = submission_from_solution(FIXTURE, AID, tmp_path)
    _answer(path, "count_words", "print(scratch)\ndef count_words(text):\n    return {}\n")  # before its def
    _answer(path, "softmax", "import sys\nsys.exit(0)\ndef softmax(x):\n    return x\n")
    _answer(path, "perplexity", "def perplexity(probs):\n    return 1.0\nraise ValueError('left over')\n")
    result = grade_notebook(FIXTURE, AID, path, limits=FAST)
    assert (result["status"], result["score"], result["max_score"]) == ("import-error", 0, ALL_FIXTURE)
    raised = [(p["cell"], p["message"].split(" when ")[0]) for p in result["problems"] if not p["warning"]]
    assert raised == [("count_words", "cell 'count_words' raised NameError at line 1"),
                      ("softmax", "cell 'softmax' raised SystemExit at line 2"),
                      ("perplexity", "cell 'perplexity' raised ValueError at line 3")]
    for t in result["tests"]:
        cell = {"test_count_words": "count_words", "test_softmax": "softmax", "test_perplexity": "perplexity"}
        assert t["output"].startswith(f"not run: cell '{cell[t['cell']]}' raised "), t["output"]
    assert "name 'scratch' is not defined" in result["message"] and "(and 2 more problems)" in result["message"]
    text = check_text(result, path)
    assert text.count("not run: cell 'softmax' raised SystemExit") == 2 and "your code called sys.exit(0)" in text


def test_a_cell_that_does_not_compile_is_a_syntax_error_like_one_that_does_not_parse(tmp_path):
    path = submission_from_solution(FIXTURE, AID, tmp_path)
    _answer(path, "perplexity", "def perplexity(probs):\n    return 1.0\nreturn 2\n")
    result = grade_notebook(FIXTURE, AID, path, limits=FAST)
    assert result["status"] == "syntax-error"
    assert result["message"].startswith("cell 'perplexity' has a syntax error at line 3: 'return' outside function")
    assert {t["name"] for t in result["tests"] if t["score"] == 0} == {"perplexity of random probabilities"}
    assert result["score"] == ALL_FIXTURE - 1
