"""Checks for Part 5: the training loop followed step by step, and the graded training run on TinyShakespeare.

Step by step (`train_and_trace`, a tiny GPT on a random stream of 60 tokens, 12 steps, 4 of warm-up): the
learning rate every optimiser step used equals the schedule (linear warm-up, then cosine from lr to min_lr), the
gradient every step received has a global norm of at most `clip` (set below every step's unclipped norm, so
each step must clip), there are exactly `steps` steps, and every training batch is made of windows of the
stream, exactly those get_batch draws from the instructions' generator (torch.Generator().manual_seed(seed)). What the final loss cannot see: a schedule off by one step, or no clipping, reach the threshold.

The training run follows the contract of every graded training run (`lmcourse.grading.training`): the
character ids of the training and the validation text relabelled by a secret permutation, fresh for every
grade; the student's `train_gpt` trains in the worker; the probe returns the logits of the whole validation
text (cut into windows of `block_size` characters) plus copies of some windows whose characters from a random
position on are replaced (a prediction that moves before that position fails: a decoder without its causal
mask reaches a "validation loss" near 0.04); the trained weights are loaded into the reference GPT, whose
logits must equal the student's, and the loss is computed here from the reference's logits. That loss is
recorded in the result (``measured.validation_loss``, whether or not it is under the threshold): the number
`lmcourse leaderboard` ranks.

Tiers (measured with the reference solution):
- cpu: 4 layers, 4 heads, 128 wide, context 64, batch 32, 600 steps (0.80 M parameters). Measured through the
  real grader (2026-11-24, one thread, two grades at a time on 2 cores, each under a fresh secret
  relabelling, validation loss over the 1,742 windows of 64 characters): seed 0: 1.991, 1.999; seed 1: 1.982.
  Known-wrong trainers: gradients never zeroed 2.306; targets not shifted (the input as its own target)
  10.85; no position embeddings fails before the loss (its logits differ from the reference GPT's with the
  same weights by 7.6 nats). The threshold 2.08 sits 0.08 above the solution's worst and 0.23 below the
  closest known-wrong trainer. The graded run takes 85-150 s of a grade (108-152 s for the whole grade of
  this check alone, two at a time); the trusted recomputation of the 1,742 windows about 2 s.
- gpu: 6 layers, 6 heads, 384 wide, context 256, batch 64, 2,000 steps (10.8 M parameters), bfloat16 autocast;
  nanoGPT's Shakespeare configuration, shorter and without dropout. Not calibrated on a GPU yet (none was
  lent): the threshold is provisional (nanoGPT's 5,000 steps with dropout reach 1.47).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from conftest import GPT_RULES
from lmcourse.data import get_batch, shakespeare_characters
from lmcourse.grading import training
from lmcourse.grading.checks import check
from lmcourse.grading.optimizer import OptimizerSpec, check_optimizer

CPU = dict(block_size=64, d_model=128, n_heads=4, n_layers=4, batch_size=32, steps=600, lr=2e-3, warmup=100,
           min_lr=1e-4, weight_decay=0.1, clip=1.0, seed=0, device="cpu")
GPU = dict(block_size=256, d_model=384, n_heads=6, n_layers=6, batch_size=64, steps=2000, lr=1e-3, warmup=100,
           min_lr=1e-4, weight_decay=0.1, clip=1.0, seed=0, device="cuda")
CPU_THRESHOLD = 2.08
GPU_THRESHOLD = 1.65
TRACE = dict(vocab_size=7, block_size=8, d_model=8, n_heads=2, n_layers=1, batch_size=2, steps=12, lr=1e-2,
             warmup=4, min_lr=1e-3, weight_decay=0.1, clip=1e-3, seed=0, device="cpu")
TRACE_TOKENS = 60


def schedule(step: int, lr: float, warmup: int, min_lr: float, steps: int) -> float:
    """The learning rate the instructions give for step `step` (from 0)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))


ADAMW = OptimizerSpec(kind="AdamW", betas=(0.9, 0.99), weight_decay=TRACE["weight_decay"], check_rates=False,
                      rate=lambda j: schedule(j, TRACE["lr"], TRACE["warmup"], TRACE["min_lr"], TRACE["steps"]),
                      said="torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), "
                           "weight_decay=weight_decay)")


@check(points=2, cell="test_training", name="train_gpt, step by step: the warm-up + cosine learning rate of every "
                                            "step, every gradient clipped to clip, the batches of the seeded "
                                            "generator, "
                                            "one AdamW (betas, weight decay) updating the weights, the model "
                                            "returned in eval mode",
       visibility="visible")
def test_training_steps(student, rng):
    """The schedule, the clipping and the batches, then the optimiser (`lmcourse.grading.optimizer`):
    torch.optim.AdamW with betas=(0.9, 0.99) and the call's weight_decay, one state through the run, every
    update AdamW's from the gradients the step received. Measured on the reference (seeds 0-2): updates within
    2e-5 of the grader's AdamW; Adam's default betas: 0.15-1% off from the second step; plain Adam (the decay
    added to the gradient): 109-129% off."""
    stream = rng.integers(0, TRACE["vocab_size"], size=TRACE_TOKENS).astype(np.int64)
    out = student.probe("train_and_trace", fn="train_gpt", cls="GPT", config=dict(TRACE, train_ids=stream), seed=0,
                        gradients=True, timeout=120, **GPT_RULES)
    if not (isinstance(out, dict) and isinstance(out.get("steps"), list) and isinstance(out.get("rates"), list)):
        raise AssertionError("train_gpt: the grader could not read what your training loop did")
    what = (f"train_gpt on a stream of {TRACE_TOKENS} tokens (steps={TRACE['steps']}, warmup={TRACE['warmup']}, "
            f"lr={TRACE['lr']}, min_lr={TRACE['min_lr']}, clip={TRACE['clip']})")
    norms, rates = out["steps"], out["rates"]
    if len(norms) != TRACE["steps"]:
        raise AssertionError(f"{what}: expected {TRACE['steps']} optimiser steps; found {len(norms)}")
    for s, groups in enumerate(rates):
        want = schedule(s, TRACE["lr"], TRACE["warmup"], TRACE["min_lr"], TRACE["steps"])
        if not groups or any(not math.isclose(r, want, rel_tol=1e-6) for r in groups):
            raise AssertionError(f"{what}: step {s} used the learning rate {groups}; the schedule gives {want:.6g} "
                                 f"(linear warm-up to lr over {TRACE['warmup']} steps, then cosine down to min_lr)")
    for s, norm in enumerate(norms):
        if not (0 < norm <= TRACE["clip"] * (1 + 1e-4)):
            raise AssertionError(f"{what}: step {s} received gradients of global norm {norm:.3g}; expected at most "
                                 f"clip = {TRACE['clip']} (every step's gradient is larger: clip before the step)")
    windows = {tuple(stream[i:i + TRACE["block_size"]]) for i in range(TRACE_TOKENS - TRACE["block_size"] + 1)}
    calls = [c for c in out.get("calls", []) if isinstance(c, dict)]
    if len(calls) != TRACE["steps"]:
        raise AssertionError(f"{what}: expected one forward pass with gradients per step, {TRACE['steps']} in all; "
                             f"found {len(calls)}")
    for s, call in enumerate(calls):
        idx = np.asarray(call.get("args", {}).get("idx"))
        if idx.shape != (TRACE["batch_size"], TRACE["block_size"]) or \
                any(tuple(int(t) for t in row) not in windows for row in idx):
            raise AssertionError(f"{what}: step {s}'s batch is not {TRACE['batch_size']} windows of "
                                 f"{TRACE['block_size']} tokens of the stream (get_batch); found shape {idx.shape}")
    # The instructions fix the batches exactly: one get_batch per step, from a generator of its own seeded with
    # `seed` (windows drawn from torch's global generator are windows too, and reach the threshold, but a run
    # can no longer be repeated batch for batch when anything else draws from it).
    generator = torch.Generator().manual_seed(TRACE["seed"])
    for s, call in enumerate(calls):
        expected, _ = get_batch(torch.as_tensor(stream), TRACE["batch_size"], TRACE["block_size"], generator)
        if not np.array_equal(np.asarray(call.get("args", {}).get("idx")), expected.numpy()):
            raise AssertionError(f"{what}: step {s}'s batch is not the one get_batch draws with the instructions' "
                                 f"generator (torch.Generator().manual_seed(seed), made once, one get_batch per step, "
                                 "nothing else drawing from it): draw every batch from that generator")
    check_optimizer(out, ADAMW, steps=TRACE["steps"], what=what)
    training.check_returned_for_use(out, what=what, fn="train_gpt")


def validation_windows(val_ids, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): the validation text cut into consecutive windows of block_size tokens, and their next tokens."""
    v = np.asarray(val_ids, dtype=np.int64)
    n = (len(v) - 1) // block_size
    return v[:n * block_size].reshape(n, block_size), v[1:n * block_size + 1].reshape(n, block_size)


@check(points=4, cell="test_training", name="train_gpt: a GPT trained on TinyShakespeare's characters reaches the "
                                            "validation loss threshold (computed by the grader)")
def test_training_run(student, reference, tier, measure):
    config, threshold = (GPU, GPU_THRESHOLD) if tier == "gpu" else (CPU, CPU_THRESHOLD)
    characters, train_ids, val_ids = shakespeare_characters()
    V = len(characters)
    x, y = validation_windows(val_ids, config["block_size"])
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = (f"train_gpt(Shakespeare's {len(train_ids):,} training characters, their {V} ids relabelled by a secret "
            f"permutation, vocab_size={V}, {settings})")
    shape = dict(vocab_size=V, block_size=config["block_size"], d_model=config["d_model"],
                 n_heads=config["n_heads"], n_layers=config["n_layers"])
    trusted = training.TrustedModel(build=lambda: reference.GPT(**shape),
                                    name=f"GPT({', '.join(f'{k}={v}' for k, v in shape.items())})")
    hint = ("(A character bigram model counted on the training text scores about 2.48.) Check the targets (the next "
            "characters), the schedule, zeroing the gradients at every step, and the position embeddings")
    # The contract first, with no threshold: the loss it returns is the trusted one (the reference GPT's logits
    # from the student's weights, causal, finite), recorded for the leaderboard whether or not it passes.
    outcome = training.graded_lm_run(
        student, fn="train_gpt", config=dict(config, vocab_size=V), vocab_size=V, train_ids=train_ids,
        eval_x=x, eval_y=y, trusted=trusted, threshold=math.inf, what=what, unit="nats per character",
        loss_fn=lambda logits, targets: float(torch.nn.functional.cross_entropy(
            torch.from_numpy(logits).reshape(-1, V), torch.from_numpy(targets).reshape(-1))),
        hint=hint, seed=0, timeout=900 if tier == "gpu" else 400, **GPT_RULES)
    if outcome.trusted:
        measure("validation_loss", outcome.loss)
        measure("threshold", threshold)
        measure("protocol", training.PROTOCOL)  # weights read before the evaluation: the leaderboard asks
    training.check_loss(outcome.loss, threshold, what=what, hint=hint, unit="nats per character")
