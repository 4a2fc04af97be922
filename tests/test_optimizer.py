"""The optimiser followed step by step (`lmcourse.grading.optimizer`): the reference solutions' updates pass
with a wide margin, and each way of getting the optimiser wrong fails with a message that names it.

The traces are the real ones: each unit's reference training function run by the probe ``train_and_trace``
in this process, in the setting of its step-by-step check. The known mistakes, graded through the whole
grader, are in each unit's catalogue (tests/test_unit0*.py)."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from lmcourse.grading import runner
from lmcourse.grading.optimizer import UPDATE_TOL, OptimizerSpec, _fresh, _relative, _rounding, _run_spec, \
    check_optimizer, check_settings, check_trains_every_parameter
from lmcourse.grading.sandbox.inside import probes
from lmcourse.instructor import testing
from booksite import ROOT


def _checks(aid: str, name: str):
    """A unit's check module, imported as the grader does (its folder on the path for its conftest)."""
    return testing.check_module(ROOT, aid, name)


def _trace(aid: str, seed: int):
    """(record, spec, steps): the reference's train_and_trace record in its unit's step-by-step setting, and
    the unit's OptimizerSpec (rates checked too)."""
    reference = runner.reference_module(ROOT, aid)
    if aid == "03-rnnlm":
        m = _checks(aid, "test_training")
        config = dict(m.TRACE, train_ids=np.random.default_rng(seed).integers(0, m.TRACE["vocab_size"],
                                                                             size=m.TRACE_TOKENS))
        out = probes.run_local("train_and_trace", reference, fn="train_lm", cls="RNNLM", config=config, seed=0,
                               gradients=True)
        return out, m.ADAM, m.TRACE["steps"]
    if aid == "04-attention":
        m = _checks(aid, "test_seq2seq")
        out = probes.run_local("train_and_trace", reference, fn="train_reverser", cls="AttentionSeq2Seq",
                               config=dict(m.TRACE, seed=seed), gradients=True)
        return out, m.ADAM, m.TRACE["steps"]
    if aid == "05-transformer":
        m = _checks(aid, "test_training")
        t = m.TRACE
        out = probes.run_local("train_and_trace", reference, fn="train_transformer", cls="Transformer",
                               config=dict(t, seed=seed), gradients=True)
        spec = OptimizerSpec(kind="Adam", rate=lambda j: t["lr"] * min(1.0, (j + 1) / t["warmup"]),
                             betas=(0.9, 0.98), eps=1e-9, said="Adam(betas=(0.9, 0.98), eps=1e-9)")
        return out, spec, t["steps"]
    if aid == "06-bert":  # fine-tuning: two parameter groups with rates of their own
        m = _checks(aid, "test_training")
        config, _ = m.fine_tune_trace(reference, np.random.default_rng(seed))
        out = probes.run_local("train_and_trace", reference, fn="fine_tune", cls="BertClassifier", config=config,
                               seed=0, gradients=True)
        return out, m.FT_SPEC, m.FT_TRACE["steps"]
    m = _checks(aid, "test_training")
    stream = np.random.default_rng(seed).integers(0, m.TRACE["vocab_size"], size=m.TRACE_TOKENS).astype(np.int64)
    out = probes.run_local("train_and_trace", reference, fn="train_gpt", cls="GPT",
                           config=dict(m.TRACE, train_ids=stream), seed=0, gradients=True)
    return out, dataclasses.replace(m.ADAMW, check_rates=True), m.TRACE["steps"]


UNITS = ("03-rnnlm", "04-attention", "05-transformer", "06-bert", "07-gpt")


def _errors(out, spec, steps) -> list[float]:
    """Each step's error as check_updates measures it (the stored weights' rounding forgiven)."""
    return [_relative(recorded, expected, _rounding(out["moves"][j]))[0]
            for j, expected, recorded in _run_spec(spec, out["moves"], out["gradients"], steps)]


@pytest.fixture(scope="module")
def traces():
    return {(aid, seed): _trace(aid, seed) for aid in UNITS for seed in (0, 1)}


@pytest.mark.parametrize("aid", UNITS)
def test_the_reference_passes_far_inside_the_tolerance(traces, aid):
    for seed in (0, 1):
        out, spec, steps = traces[aid, seed]
        check_optimizer(out, spec, steps=steps, what=aid)
        assert len(out["moves"]) == steps and max(_errors(out, spec, steps)) < UPDATE_TOL / 20


@pytest.mark.parametrize("aid", UNITS)
def test_an_update_off_by_a_percent_fails_and_says_how_far(traces, aid):
    out, spec, steps = copy.deepcopy(traces[aid, 0])
    j = steps // 2
    for name, (before, after) in out["moves"][j].items():
        out["moves"][j][name][1] = (before + 1.01 * (after.astype(np.float64) - before)).astype(after.dtype)
    with pytest.raises(AssertionError, match=rf"step {j}: the optimiser changed the weights .* 1\.01 times as far"):
        check_optimizer(out, spec, steps=steps, what=aid)


def _restarted(out, spec, steps):
    """The record of the same run had its optimiser been made anew at every step (each step's update from
    a fresh optimiser's state, the weights and gradients as recorded) and its state counted again."""
    out = copy.deepcopy(out)
    for j in range(steps):
        move = out["moves"][j]
        change = _fresh(spec, move, out["gradients"][j], spec.rate(j), j)
        for n, (before, _) in move.items():
            move[n][1] = (before.astype(np.float64) + change[n]).astype(before.dtype)
    return out


@pytest.mark.parametrize("aid", UNITS)
def test_an_optimiser_made_every_step_fails_on_its_state_and_on_its_updates(traces, aid):
    out, spec, steps = traces[aid, 0]
    fresh = _restarted(out, spec, steps)
    assert min(_errors(fresh, spec, steps)[1:]) > 10 * UPDATE_TOL  # the updates alone show it from step 1 on
    for record in fresh["optimizers"]:
        record["state_step"] = None if record is fresh["optimizers"][0] else 0
    with pytest.raises(AssertionError, match="state had counted 0 steps before it; expected 1.*create the "
                                             "optimiser once"):
        check_optimizer(fresh, spec, steps=steps, what=aid)
    # an optimiser that hides its restart (its state's counter carried on) is caught by its updates, and named
    for j, record in enumerate(fresh["optimizers"]):
        record["state_step"] = j if j else None
    with pytest.raises(AssertionError, match=f"step 1: .*the update of a {spec.kind} made anew for this step"):
        check_optimizer(fresh, spec, steps=steps, what=aid)


def test_the_wrong_settings_are_named(traces):
    out, spec, steps = traces["05-transformer", 0]
    # Adam's defaults in place of the paper's: the settings say it, and the updates alone show it too
    assert min(_errors(out, dataclasses.replace(spec, betas=(0.9, 0.999), eps=1e-8), steps)) > 10 * UPDATE_TOL
    wrong = copy.deepcopy(out)
    for record in wrong["optimizers"]:
        record["groups"][0]["betas"] = [0.9, 0.999]
    with pytest.raises(AssertionError, match=r"betas are \(0.9, 0.999\) \(Adam's defaults\); the instructions give "
                                             r"betas=\(0.9, 0.98\)"):
        check_settings(wrong, spec, steps=steps, what="05")
    wrong = copy.deepcopy(out)
    for record in wrong["optimizers"]:
        record["groups"][0]["lr"] = 1e-3
    with pytest.raises(AssertionError, match="learning rate was 0.001; the call asked for"):
        check_settings(wrong, spec, steps=steps, what="05")
    wrong = copy.deepcopy(out)
    wrong["optimizers"][2]["type"] = "SGD"
    with pytest.raises(AssertionError, match="step 2: the optimiser is torch.optim.SGD"):
        check_settings(wrong, spec, steps=steps, what="05")


def test_adamw_is_what_the_update_does_not_the_class_name(traces):
    out, spec, steps = traces["07-gpt", 0]
    assert spec.kind == "AdamW" and spec.weight_decay > 0
    # Adam with decoupled_weight_decay=True is AdamW: it passes
    same = copy.deepcopy(out)
    for record in same["optimizers"]:
        record["type"] = "Adam"
        record["groups"][0]["decoupled_weight_decay"] = True
    check_optimizer(same, spec, steps=steps, what="07")
    # plain Adam with weight_decay (L2, added to the gradient) is not, and the message says the difference
    l2 = copy.deepcopy(same)
    for record in l2["optimizers"]:
        record["groups"][0]["decoupled_weight_decay"] = False
    with pytest.raises(AssertionError, match="Adam's weight_decay adds the decay to the gradient"):
        check_optimizer(l2, spec, steps=steps, what="07")
    # and its updates differ by more than the whole update
    assert min(_errors(out, dataclasses.replace(spec, kind="Adam"), steps)) > 0.5
    # where nothing decays, Adam and AdamW are one optimiser: 04's Adam may be an AdamW(weight_decay=0)
    out4, spec4, steps4 = traces["04-attention", 0]
    as_adamw = copy.deepcopy(out4)
    for record in as_adamw["optimizers"]:
        record["type"] = "AdamW"
        record["groups"][0]["decoupled_weight_decay"] = True
    check_optimizer(as_adamw, spec4, steps=steps4, what="04")


def test_a_record_the_grader_cannot_read_is_a_failure_not_a_crash(traces):
    out, spec, steps = traces["04-attention", 0]
    for broken in ({}, {"optimizers": "x"}, {"optimizers": out["optimizers"][:-1]},
                   dict(out, moves=[{"w": ["a", "b"]}] * steps),
                   dict(out, moves=[{n: [p[0], p[0][..., :1]] for n, p in m.items()} for m in out["moves"]]),
                   dict(out, optimizers=[dict(r, groups=[]) for r in out["optimizers"]])):
        with pytest.raises(AssertionError):
            check_optimizer(broken, spec, steps=steps, what="04")
    nan = copy.deepcopy(out)
    name = next(iter(nan["moves"][1]))
    nan["moves"][1][name][1] = nan["moves"][1][name][1] * np.nan
    with pytest.raises(AssertionError, match="NaN or infinite"):
        check_optimizer(nan, spec, steps=steps, what="04")


def test_groups_with_rates_of_their_own(traces):
    """06's fine-tuning: the encoder at lr, the head at head_lr. The reference passes (above); one group for
    everything, or the two rates swapped, is named; and the grader's own updates use each group's rate."""
    out, spec, steps = traces["06-bert", 0]
    assert len(out["optimizers"][0]["groups"]) == 2
    merged = copy.deepcopy(out)
    for record in merged["optimizers"]:
        first, second = record["groups"]
        first["params"] = first["params"] + second["params"]
        record["groups"] = [first]
    with pytest.raises(AssertionError, match="parameters mix head_lr .* and lr .*: the instructions give each its own"):
        check_settings(merged, spec, steps=steps, what="06")
    swapped = copy.deepcopy(out)
    for record in swapped["optimizers"]:
        a, b = record["groups"]
        a["lr"], b["lr"] = b["lr"], a["lr"]
    with pytest.raises(AssertionError, match=r"group 0 learning rate was .*; the call asked for lr \(warmed up"):
        check_settings(swapped, spec, steps=steps, what="06")
    # the update from the gradients received, with one rate (the encoder's) for the head too, is off
    assert min(_errors(out, dataclasses.replace(spec, groups=()), steps)) > 10 * UPDATE_TOL


def test_a_frozen_parameter_is_named(traces):
    out, spec, steps = traces["06-bert", 0]
    names = [n for n in out["moves"][0]]
    check_trains_every_parameter(out, names, steps=steps, what="06")
    frozen = copy.deepcopy(out)  # the encoder frozen: its parameters in the optimiser, without a gradient
    for grads in frozen["gradients"]:
        for n in grads:
            if n.startswith("bert."):
                grads[n] = None
    with pytest.raises(AssertionError, match=r"step 0: \d+ of the model's \d+ parameters received no gradient "
                                             r"\(bert\."):
        check_trains_every_parameter(frozen, names, steps=steps, what="06")
    head_only = copy.deepcopy(out)  # only the head given to the optimiser
    for record in head_only["optimizers"]:
        record["groups"] = record["groups"][1:]
    with pytest.raises(AssertionError, match="the optimiser does not hold .* every parameter trains, none is frozen"):
        check_trains_every_parameter(head_only, names, steps=steps, what="06")
