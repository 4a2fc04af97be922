"""Honest code the grader used to misread (issue #37, class 6).

- A line that starts with ``%`` inside brackets (PEP 8's break before a binary
  operator, ``("%d tokens"\\n % n)``) is Python, not a magic: only what IPython
  itself would treat as a magic or a shell escape (a logical line's start) is
  neutralised, with IPython's own transformer.

The grading test here failed on the grader before this change (a syntax error for the ``%`` line).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmcourse.grading import grade_notebook
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.testing import submission_from_solution

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
