"""Checks for Part 4: the Transformer against the reference with the same weights, its properties, and
greedy decoding.

The architecture is prescribed (the table of Part 4), so the student's model is compared with the reference
solution's ``Transformer`` loaded with the same weights (`compare_modules`): logits and the gradient of every
parameter, on padded batches of dates, for a pre-norm model with sinusoidal positions and a post-norm model
with learned ones, in float32 and float64, and once on a device other than the CPU (a mask made without
``device=`` fails there, as it would on a GPU). The property check runs the student's model alone, with the
reference's weights: no logit before position k moves when the decoder's inputs from k on change (causal);
three more padding positions in the source change nothing (the source's padding is masked); and a changed
source character changes the logits (the decoder reads the encoder). Causality is paired with what only a
decoder that looks back does: a changed target token moves the logits after it (wherever the reference's, with
the same weights, move by more than 1e-3), so a decoder without self-attention does not keep the point.
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.dates import VOCAB_SIZE, date_pairs
from lmcourse.grading.checks import check, expect_shape
from lmcourse.grading.compare import expect_on_other_device, expect_runs_elsewhere
from lmcourse.grading.seq2seq import check_greedy_choices
from lmcourse.seq2seq import PAD_ID, seq2seq_batch

MODELS = (dict(src_vocab=VOCAB_SIZE, tgt_vocab=VOCAB_SIZE, d_model=16, n_heads=2, d_ff=32, n_enc=2, n_dec=1,
               max_len=24, norm_first=True, pos="sinusoidal"),
          dict(src_vocab=VOCAB_SIZE, tgt_vocab=VOCAB_SIZE, d_model=8, n_heads=2, d_ff=16, n_enc=1, n_dec=2,
               max_len=24, norm_first=False, pos="learned"))


def _shown(kw):
    return "Transformer(" + ", ".join(f"{k}={v!r}" for k, v in kw.items() if k not in ("src_vocab", "tgt_vocab")) + ")"


def _batch(rng, n):
    batch = seq2seq_batch(date_pairs(n, rng))
    return batch.src.numpy(), batch.tgt_in.numpy()


@check(points=3, cell="test_transformer", name="Transformer: logits and gradients match the reference with the "
                                              "same weights (pre-norm with sinusoidal positions, post-norm with "
                                              "learned ones; padded sources; float32, float64, another device)")
def test_transformer_forward(student, reference, rng, compare, rules, block_weights):
    for kw in MODELS:
        w = block_weights(reference.Transformer, kw, rng)
        for n in (5, 1):
            src, tgt_in = _batch(rng, n)
            for dtype in (None, "float64"):
                # The sinusoidal table is float32 data by the spec (sinusoidal_positions' own check accepts one
                # computed in float32: angles up to 23 rad, off by up to 3e-6), so the float64 pass of the model
                # that adds it holds float32's tolerance; the learned-position model keeps float64's, and with it
                # every part the two share.
                loose = dict(rtol=1e-4, atol=1e-5) if dtype and kw["pos"] == "sinusoidal" else {}
                compare(student, cls="Transformer", trusted=reference, trusted_cls="Transformer", init_kwargs=kw,
                        weights=w, inputs=[src, tgt_in], dtype=dtype, **loose,
                        what=f"{_shown(kw)} on src {src.shape} and tgt_in {tgt_in.shape} (padded batches of dates)"
                             f"{' in float64' if dtype else ''}")
        expect_on_other_device(student, cls="Transformer", inputs=[src, tgt_in], init_kwargs=kw, weights=w,
                               what=f"{_shown(kw)} on src {src.shape} and tgt_in {tgt_in.shape}", **rules)


def _logits(student, kw, w, src, tgt_in, rules, what):
    out = student.probe("module_forward", cls="Transformer", init_kwargs=kw, state_dict=w, inputs=[src, tgt_in],
                        grad=False, **rules)
    if not (isinstance(out, dict) and isinstance(out.get("outputs"), list) and out["outputs"]):
        raise AssertionError(f"{what}: the grader could not read your model's logits")
    return expect_shape(out["outputs"][0], (len(src), tgt_in.shape[1], VOCAB_SIZE), what=what).astype(np.float64)


def _reference_logits(reference, kw, w, src, tgt_in) -> np.ndarray:
    model = reference.Transformer(**kw)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(src), torch.from_numpy(tgt_in)).double().numpy()


@check(points=1, cell="test_transformer", name="Transformer: no position reads a later target token but later "
                                              "positions read earlier ones, the source's padding changes nothing, "
                                              "and the source matters")
def test_transformer_properties(student, reference, rng, rules, block_weights):
    kw = MODELS[0]
    w = block_weights(reference.Transformer, kw, rng)
    src, tgt_in = _batch(rng, 6)
    base = _logits(student, kw, w, src, tgt_in, rules, what=f"{_shown(kw)} on src {src.shape}")
    k = int(rng.integers(1, tgt_in.shape[1]))
    later = tgt_in.copy()
    later[:, k:] = rng.integers(4, VOCAB_SIZE, size=later[:, k:].shape)
    moved = np.abs(_logits(student, kw, w, src, later, rules, what="the same model") - base)[:, :k].max()
    if not moved <= 1e-4:
        raise AssertionError(f"{_shown(kw)}: changing tgt_in from position {k} on moved the logits at positions "
                             f"0-{k - 1} by up to {moved:.3g}; position t may read tgt_in[:, :t+1] only (a causal "
                             "mask in every decoder block's self-attention)")
    # Causality alone is kept by a decoder that never looks back (no self-attention): the positions after a
    # changed token must move wherever the reference's move by more than 1e-3.
    j = int(rng.integers(1, tgt_in.shape[1] - 1))
    earlier = tgt_in.copy()
    earlier[:, j] = np.where(earlier[:, j] == 4, 5, 4)
    expected = np.abs(_reference_logits(reference, kw, w, src, earlier)
                      - _reference_logits(reference, kw, w, src, tgt_in))[:, j + 1:].max(axis=(0, 2)) > 1e-3
    found = np.abs(_logits(student, kw, w, src, earlier, rules, what="the same model") - base)[:, j + 1:]
    still = [j + 1 + t for t in np.flatnonzero(expected) if not found[:, t].max() > 1e-5]
    if still:
        raise AssertionError(f"{_shown(kw)}: changing tgt_in at position {j} left the logits at positions {still} "
                             "unchanged; each position reads the target tokens before it (the decoder's masked "
                             "self-attention), so they must move")
    longer = np.concatenate([src, np.full((len(src), 3), PAD_ID)], axis=1)
    moved = np.abs(_logits(student, kw, w, longer, tgt_in, rules, what="the same model") - base).max()
    if not moved <= 1e-4:
        raise AssertionError(f"{_shown(kw)}: three more padding positions (PAD_ID) at the end of every source moved "
                             f"the logits by up to {moved:.3g}; no query, in the encoder or in the decoder's "
                             "cross-attention, may attend to the source's padding")
    changed = src.copy()
    changed[:, 0] = np.where(changed[:, 0] == 4, 5, 4)
    moved = np.abs(_logits(student, kw, w, changed, tgt_in, rules, what="the same model") - base).max()
    if not moved > 1e-3:
        raise AssertionError(f"{_shown(kw)}: changing the first character of every source moved the logits by "
                             f"only {moved:.3g}; the decoder must read the encoder's output (cross-attention)")


@check(points=2, cell="test_transformer", name="Transformer.greedy_decode: each token is the most likely one given "
                                              "<BOS> and the tokens before it; it runs where its input is")
def test_greedy_decode(student, reference, rng, rules, block_weights):
    for kw in MODELS:
        w = block_weights(reference.Transformer, kw, rng, scale=2.0)
        model = reference.Transformer(**kw)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
        model.train(False)
        for n, max_len in ((5, 11), (1, 1), (3, 7)):
            src, _ = _batch(rng, n)
            what = f"greedy_decode(src {src.shape}, max_len={max_len}) of {_shown(kw)}"
            ys = student.probe("call_method", cls="Transformer", method="greedy_decode", init_kwargs=kw,
                               state_dict=w, args=[src, max_len], tensors=True, **rules)
            check_greedy_choices(ys, src, max_len, model, vocab_size=VOCAB_SIZE, what=what)
        src, _ = _batch(rng, 3)
        expect_runs_elsewhere(student, cls="Transformer", method="greedy_decode", init_kwargs=kw, state_dict=w,
                              args=[src, 9], what=f"greedy_decode(src {src.shape}, max_len=9) of {_shown(kw)}", **rules)
