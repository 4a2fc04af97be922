"""Root cause first (issue #39, items 4 and 5): a check or test cell that fails because the code it uses
fails says so and names what to fix first; the summary lists the written-but-failing functions in
dependency order; and no pytest assertion rewrite reaches a student.

The two examples of the issue run end to end through the sandboxed grader: 05's LayerNorm with the
unbiased variance (EncoderBlock, DecoderBlock and Transformer fail with it) and 07's causal mask that
hides the diagonal (the training-loop check said "clip before the step").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lmcourse.grading import causes, runner
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.report import check_text, feedback_html, readiness
from lmcourse.grading.result import CheckResult, Result
from lmcourse.grading.sandbox.inside import probes
from lmcourse.instructor.testing import Edit, submission_from_solution
from test_unit05_transformer import TRAINING as UNIT05_TRAINING
from test_unit05_transformer import VARIANTS as UNIT05_VARIANTS
from unit_contract import NOISE

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- the student's own code

def test_uses_is_read_from_the_students_code():
    source = '''
import torch.nn as nn

class LayerNorm(nn.Module):
    pass

class EncoderBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = LayerNorm(d)

class DecoderBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)   # PyTorch's: the student's LayerNorm is not what this uses

def helper():
    return EncoderBlock(4), DecoderBlock(4)

def EncoderBlock_again():  # not an answer name: not listed
    return LayerNorm
'''
    names = {"LayerNorm", "EncoderBlock", "DecoderBlock", "helper"}
    assert nbmod.uses(source, names) == {"LayerNorm": [], "EncoderBlock": ["LayerNorm"], "DecoderBlock": [],
                                         "helper": ["DecoderBlock", "EncoderBlock"]}
    assert nbmod.uses("def broken(:\n", names) == {}


def _check(name, function, passed, kind="assertion", output="differs"):
    return CheckResult(name=name, score=1.0 if passed else 0.0, max_score=1.0,
                       status="passed" if passed else "failed", output="" if passed else output,
                       function=function, kind=None if passed else kind, cell=f"test_{function}")


def _result(tests, unimplemented=(), test_cells=None):
    r = Result(score=0, max_score=len(tests), tests=tests, status="ok", message="graded", output="",
               assignment="05-transformer")
    r.readiness = {"missing": [], "unimplemented": [["c", n] for n in unimplemented]}
    r.test_cells = test_cells
    return r


USES = {"LayerNorm": [], "FeedForward": [], "EncoderBlock": ["FeedForward", "LayerNorm"],
        "DecoderBlock": ["LayerNorm"], "Transformer": ["DecoderBlock", "EncoderBlock", "LayerNorm"],
        "train": ["Transformer"]}
ORDER = ["LayerNorm", "FeedForward", "EncoderBlock", "DecoderBlock", "Transformer", "train"]


def test_the_deepest_failing_dependency_is_named_and_nothing_else():
    tests = [_check("ln", "LayerNorm", False), _check("ff", "FeedForward", True), _check("enc", "EncoderBlock", False),
             _check("dec", "DecoderBlock", False), _check("tf", "Transformer", False), _check("train", "train", False)]
    r = _result(tests)
    causes.name_root_causes(r, USES, {}, ORDER)
    out = {t.name: t.output for t in r.tests}
    assert out["ln"] == "differs" and out["ff"] == ""  # its own failure, and a pass: untouched
    for name, whose in (("enc", "EncoderBlock"), ("dec", "DecoderBlock"), ("tf", "Transformer"), ("train", "train")):
        assert out[name].startswith(f"`{whose}` uses `LayerNorm`, which fails its own check: fix `LayerNorm` first"), \
            out[name]
        assert out[name].endswith("What this check found: differs")
    # Transformer relies on EncoderBlock and DecoderBlock too, but they fail because of LayerNorm: only it is named
    assert "EncoderBlock" not in out["tf"]
    assert r.readiness["failing"] == ["LayerNorm", "EncoderBlock", "DecoderBlock", "Transformer", "train"]
    assert r.score == 0  # words only: no score changes


def test_a_dependency_that_passes_or_is_not_used_is_never_blamed():
    tests = [_check("ln", "LayerNorm", True), _check("enc", "EncoderBlock", False), _check("tf", "Transformer", False)]
    r = _result(tests)
    causes.name_root_causes(r, USES, {}, ORDER)
    out = {t.name: t.output for t in r.tests}
    assert out["enc"] == "differs"  # EncoderBlock's own bug: nothing it uses fails
    assert out["tf"].startswith("`Transformer` uses `EncoderBlock`, which fails its own check")
    assert r.readiness["failing"] == ["EncoderBlock", "Transformer"]
    # the same failures with DecoderBlock built on nn.LayerNorm (it does not use the student's LayerNorm)
    tests = [_check("ln", "LayerNorm", False), _check("dec", "DecoderBlock", False)]
    r = _result(tests)
    causes.name_root_causes(r, dict(USES, DecoderBlock=[]), {}, ORDER)
    assert [t.output for t in r.tests] == ["differs", "differs"]


def test_a_dependency_not_written_yet_is_named_as_such_and_the_grader_failures_are_left_alone():
    tests = [_check("enc", "EncoderBlock", False, kind="exception", output="NotImplementedError in LayerNorm"),
             _check("dec", "DecoderBlock", False, kind="grader-error", output="the grader failed"),
             _check("ln", "LayerNorm", False, kind="exception", output="NotImplementedError")]
    r = _result(tests, unimplemented=["LayerNorm"])
    causes.name_root_causes(r, USES, {}, ORDER)
    out = [t.output for t in r.tests]
    assert out[0].startswith("`EncoderBlock` uses `LayerNorm`, not written yet: fix `LayerNorm` first")
    assert out[1] == "the grader failed" and out[2] == "NotImplementedError"
    assert r.readiness["failing"] == ["EncoderBlock"]  # LayerNorm is in the to-do list, not here


def test_a_failing_test_cell_names_the_cause_and_the_summary_lists_the_order():
    cells = [{"cell": "test_ln", "passed": False, "error": {"type": "AssertionError", "message": "ln differs"}},
             {"cell": "test_enc", "passed": False, "error": {"type": "AssertionError", "message": "enc differs"}},
             {"cell": "test_tf", "passed": True, "error": None}]
    r = _result([], test_cells=cells)
    causes.name_root_causes(r, USES, {"LayerNorm": "test_ln", "EncoderBlock": "test_enc", "Transformer": "test_tf"},
                            ORDER)
    assert "cause" not in cells[0]["error"]
    assert cells[1]["error"]["cause"] == ("`EncoderBlock` uses `LayerNorm`, which fails its own check: fix "
                                          "`LayerNorm` first (this may then pass).")
    text = check_text(r, "nb.ipynb")
    assert "likely cause: `EncoderBlock` uses `LayerNorm`" in text
    assert "written but failing: LayerNorm, EncoderBlock (fix them in this order" in text
    assert readiness(r)["failing"] == ["LayerNorm", "EncoderBlock"]
    assert "<b>Written but failing</b>, each after the code it uses (fix them in this order): LayerNorm, " \
           "EncoderBlock" in feedback_html(r, "student")


def test_dependency_order_survives_a_cycle():
    assert causes.dependency_order({"a": ["b"], "b": ["a"], "c": []}, ["a", "b", "c"]) == ["c", "a", "b"]
    assert causes.dependency_order({"a": ["c"], "b": [], "c": ["b"]}, ["a", "b", "c"]) == ["b", "c", "a"]


# --------------------------------------------------------------------------- no pytest noise

def test_a_test_cells_failed_assertion_says_its_own_message_only():
    import types

    module = types.ModuleType("submission")
    module.__file__ = "submission.py"
    reply = probes.run_test_cell(module, source="import torch\nx = torch.ones(3)\n"
                                 "assert torch.allclose(x, torch.zeros(3)), f'differs by {x.max().item()}'\n",
                                 cell="c")
    assert reply["error"]["message"] == "differs by 1.0" and reply["error"]["line"] == 3


# --------------------------------------------------------------------------- the two examples

@pytest.mark.slow
def test_layer_norm_with_the_unbiased_variance_is_named_as_the_cause(tmp_path):
    function, wrong, _ = UNIT05_VARIANTS["LayerNorm with the unbiased variance (torch.var's default)"]
    nb = submission_from_solution(ROOT, "05-transformer", tmp_path, replace={function: wrong})
    r = runner.grade(ROOT, "05-transformer", nb, exclude={UNIT05_TRAINING}, test_cells=True)
    by_function = {}
    for t in r.tests:
        if not t.passed:
            by_function.setdefault(t.function, []).append(t.output)
    assert set(by_function) >= {"LayerNorm", "EncoderBlock", "DecoderBlock", "Transformer"}, set(by_function)
    assert not any("fix `" in o for o in by_function["LayerNorm"])
    for whose in ("EncoderBlock", "DecoderBlock", "Transformer"):
        for output in by_function[whose]:
            assert output.startswith(f"`{whose}` uses `LayerNorm`, which fails its own check: fix `LayerNorm` first"), \
                output
    assert r.readiness["failing"][0] == "LayerNorm"
    text = check_text(r, nb.name)
    assert "likely cause: `EncoderBlock` uses `LayerNorm`" in text and not NOISE.search(text)


@pytest.mark.slow
def test_a_causal_mask_that_hides_the_diagonal_is_named_before_the_training_loop(tmp_path):
    nb = submission_from_solution(ROOT, "07-gpt", tmp_path, replace={"CausalSelfAttention": Edit(
        ".tril(diagonal=T_all - T)", ".tril(diagonal=T_all - T - 1)")})
    r = runner.grade(ROOT, "07-gpt", nb, visible_only=True, test_cells=True, own_machine=True)
    steps = [t for t in r.tests if t.function == "train_gpt"]
    assert steps and not steps[0].passed
    assert steps[0].output.startswith("`train_gpt` uses `CausalSelfAttention`, which fails its own check: fix "
                                      "`CausalSelfAttention` first"), steps[0].output
    assert r.readiness["failing"][0] == "CausalSelfAttention"
    text = check_text(r, nb.name)
    assert re.search(r"written but failing: CausalSelfAttention, .*train_gpt", text), text
    assert not NOISE.search(text)


@pytest.mark.slow
def test_an_honest_notebook_is_told_of_no_cause(tmp_path):
    nb = submission_from_solution(ROOT, "05-transformer", tmp_path)
    r = runner.grade(ROOT, "05-transformer", nb, visible_only=True, test_cells=True)
    assert all(t.passed for t in r.tests) and all(c["passed"] for c in r.test_cells)
    assert r.readiness["failing"] == [] and "written but failing" not in check_text(r, nb.name)
