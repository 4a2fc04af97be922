"""Checks for Part 6: the loss, global-norm clipping, and the graded training run on TinyShakespeare.

The training run: the student's `train_lm` trains in the worker and returns a
model; the probe asks it for logits on the whole validation text (16 lanes,
from a zero state); the loss is computed here, by the reference `lm_loss`,
against targets the student never sees. A `train_lm` that learns the wrong
thing (targets not shifted, say) cannot make its own loss look good.

Tiers (measured with the reference solution, 2026-11-22):
- cpu: 300 steps of a 128-unit LSTM, 10-16 s on one laptop core. Seeds 0, 1, 2
  reach 1.957, 1.972, 1.967 nats per character; the threshold 2.10 leaves
  0.13 for other machines. Known-wrong trainers: gradients never zeroed 2.25,
  hidden state reset at every step 2.51 (the bigram model scores 2.48).
- gpu: 1,000 steps of a 256-unit LSTM on 64 lanes of 64 characters (4 passes over the text).
  Calibrated on a CPU (no GPU was available): seeds 0 and 1 reach 1.551 and 1.563 after
  229-256 s on one core; the threshold 1.68 leaves 0.12 for GPU numerics. On a GPU the
  Python loop over time is bound by kernel launches: an estimated 30-60 s. Not yet run on a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.grading.checks import check, expect_close, expect_shape

CPU = dict(d_embed=32, d_hidden=128, batch_size=32, block_size=32, steps=300, lr=6e-3, clip=1.0, seed=0, device="cpu")
GPU = dict(d_embed=64, d_hidden=256, batch_size=64, block_size=64, steps=1000, lr=4e-3, clip=1.0, seed=0, device="cuda")
CPU_THRESHOLD = 2.10
GPU_THRESHOLD = 1.68
LANES = 16


@check(points=2, cell="test_loss_and_clipping", name="lm_loss: mean cross-entropy over all B x T positions, and its gradient",
       visibility="visible")
def test_lm_loss(student, reference, rng):
    from lmcourse.grading import probes
    for B, T, V in ((3, 5, 7), (1, 1, 4), (8, 2, 30)):
        logits = (3 * rng.normal(size=(B, T, V))).astype(np.float32)
        targets = rng.integers(0, V, size=(B, T))
        what = f"lm_loss of random logits ({B}, {T}, {V}) and targets ({B}, {T})"
        kw = dict(fn="lm_loss", args=[logits, targets], grad_args=[0])
        found = student.probe("call_with_tensors", **kw)
        expected = probes.run_local("call_with_tensors", reference, **kw)
        expect_close(found["result"], expected["result"], what=f"{what}: the value", rtol=1e-5, atol=1e-6)
        expect_close(found["grads"][0], expected["grads"][0], what=f"{what}: its gradient with respect to the logits",
                     rtol=1e-4, atol=1e-7)


@check(points=2, cell="test_loss_and_clipping", name="clip_grad_norm: one global norm, every gradient scaled by the same factor, only above max_norm")
def test_clip_grad_norm(student, reference, rng):
    from lmcourse.grading import probes
    big = [rng.normal(size=(4, 3)) * 10, None, rng.normal(size=(5,)) * 0.1, rng.normal(size=(2, 2, 2))]
    cases = [(big, 1.0, "one large and two small gradients and a parameter without one, max_norm=1"),
             (big, 5.0, "the same gradients, max_norm=5"),
             ([rng.normal(size=(3,)) * 0.1, rng.normal(size=(2, 2)) * 0.1], 10.0, "small gradients, max_norm=10 "
              "(nothing to clip)")]
    for grads, max_norm, label in cases:
        grads = [g.astype(np.float32) if g is not None else None for g in grads]
        kw = dict(fn="clip_grad_norm", grads=grads, args=[max_norm], iterator=True)
        found = student.probe("call_with_parameters", **kw)
        expected = probes.run_local("call_with_parameters", reference, **kw)
        what = f"clip_grad_norm on {label} (parameters passed as a one-pass iterator, like model.parameters())"
        expect_close(found["result"], expected["result"], what=f"{what}: the returned norm (before clipping)",
                     rtol=1e-4, atol=1e-6)
        for i, (g, e) in enumerate(zip(found["grads"], expected["grads"])):
            if e is None:
                if g is not None:
                    raise AssertionError(f"{what}: parameter {i + 1} had no gradient and must keep none")
                continue
            expect_close(g, e, what=f"{what}: the gradient of parameter {i + 1} afterwards (shape {e.shape})",
                         rtol=1e-4, atol=1e-6)


@check(points=4, cell="test_training", name="train_lm: an LSTM LM trained on TinyShakespeare's characters reaches the validation loss threshold")
def test_training_run(student, reference, tier):
    config, threshold = (GPU, GPU_THRESHOLD) if tier == "gpu" else (CPU, CPU_THRESHOLD)
    chars, train_ids, val_ids = reference.shakespeare_characters()
    V = len(chars)
    n = (len(val_ids) - 1) // LANES
    x = val_ids[: n * LANES].view(LANES, n)  # (16, n): the validation text in 16 lanes
    y = val_ids[1: n * LANES + 1].view(LANES, n)  # the next character of each
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = f"train_lm(Shakespeare's {len(train_ids):,} training characters, vocab_size={V}, {settings})"
    logits = student.probe("train_and_logits", fn="train_lm",
                           config=dict(config, train_ids=train_ids.numpy(), vocab_size=V),
                           eval_inputs=x.numpy(), seed=0, no_builtin_rnn=True,
                           timeout=600 if tier == "gpu" else 300)
    logits = expect_shape(logits, (LANES, n, V), what=f"{what}, then model(validation ids (16, {n})): the logits")
    if not np.all(np.isfinite(logits)):
        raise AssertionError(f"{what}: the logits hold NaN or infinite values (did the training diverge?)")
    loss = float(reference.lm_loss(torch.from_numpy(logits.astype(np.float32)), y))
    if loss > threshold:
        raise AssertionError(f"{what}: the validation loss is {loss:.3f} nats per character; a correct "
                             f"implementation reaches at most {threshold:.2f} with these settings (the bigram model: "
                             "about 2.48). Check that the state carries across batches, the optimiser's gradients "
                             "are zeroed at every step, and the targets are the next characters")
