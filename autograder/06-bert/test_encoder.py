"""Checks for Part 3: the encoder layer, the embeddings and the model against the reference with the same
random weights, then MiniLM's real weights in the student's BertModel.

Random weights: the reference's initialisation with the linear and embedding weights times 1.5 and every
LayerNorm's gamma and beta drawn at random (`conftest.block_weights`). Outputs, the gradients of the
inputs and of every parameter are compared (`compare_modules`), in float32 and in float64 on both sides.

Real weights: all-MiniLM-L6-v2 (`lmcourse.minilm`, checksummed) loaded into the student's
``BertModel(30522)`` and the reference's, on a padded batch of WordPiece rows (single sentences and pairs
with two segments). Only real tokens' states are compared (what a padded position holds is not specified).
Measured on the reference against variants at atol 1e-4: tanh-approximate GELU is off by 4.4e-3,
LayerNorm eps 1e-5 instead of 1e-12 by 1.0e-3, no padding mask by 0.77, pre-norm by 223, no segment
embeddings by 7.0, so atol 1e-4 (rtol 1e-4) separates them from float32 rounding (the reference against
transformers.BertModel: 1.4e-6).
"""

from __future__ import annotations

import numpy as np

from conftest import wordpiece_batch
from lmcourse import minilm
from lmcourse.grading.checks import check, expect_close, expect_shape
from lmcourse.grading.compare import expect_on_other_device, run_both


def _x(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


def _padding(lengths, T):
    return (np.arange(T) < np.asarray(lengths)[:, None])[:, None, None, :]  # (B, 1, 1, T), True = real


@check(points=2, cell="test_bert_model", name="BertLayer: outputs and gradients match the reference with the same "
                                             "weights (post-norm, exact GELU, padding mask; float32 and float64)")
def test_bert_layer(student, reference, rng, compare, block_weights):
    for B, T, d, h, d_ff, lengths in ((3, 7, 16, 4, 32, [7, 4, 2]), (2, 5, 8, 2, 24, None)):
        kw = {"d_model": d, "n_heads": h, "d_ff": d_ff}
        w = block_weights(reference.BertLayer, kw, rng)
        inputs = [_x(rng, B, T, d)] + ([_padding(lengths, T)] if lengths else [])
        label = f"padding mask (B, 1, 1, {T}) of lengths {lengths}" if lengths else "no mask"
        for dtype in (None, "float64"):
            compare(student, cls="BertLayer", trusted=reference, trusted_cls="BertLayer", init_kwargs=kw, weights=w,
                    inputs=inputs, dtype=dtype,
                    what=f"BertLayer({d}, {h}, {d_ff}) on x ({B}, {T}, {d}), {label}{' in float64' if dtype else ''}")


MODEL = dict(vocab_size=60, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=24)


def _shown(kw):
    return "BertModel(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"


def _ids(rng, B, T, lengths, vocab=60):
    ids = rng.integers(5, vocab, size=(B, T))
    types = np.zeros((B, T), dtype=np.int64)
    am = (np.arange(T) < np.asarray(lengths)[:, None]).astype(np.int64)
    for b, L in enumerate(lengths):
        types[b, L // 2:L] = 1  # a second segment in every row
        ids[b, L:] = 0
    return ids.astype(np.int64), types, am


@check(points=1, cell="test_bert_model", name="BertModel.embed: token + position + segment embeddings and their "
                                             "LayerNorm match the reference with the same weights")
def test_embed(student, reference, rng, rules, block_weights):
    from lmcourse.grading.sandbox.inside import probes

    w = block_weights(reference.BertModel, MODEL, rng)
    ids, types, _ = _ids(rng, 3, 9, [9, 6, 3])
    for args, label in (([ids, types], "with token_type_ids"), ([ids], "token_type_ids omitted (all zeros)")):
        what = f"{_shown(MODEL)}.embed(ids (3, 9), {label})"
        kw = dict(cls="BertModel", method="embed", init_kwargs=MODEL, state_dict=w, args=args, tensors=True)
        found = expect_shape(student.probe("call_method", **kw, **rules), (3, 9, MODEL["d_model"]), what=what)
        expected = probes.to_array(probes.run_local("call_method", reference, **kw))
        expect_close(found, expected, rtol=1e-4, atol=1e-5, what=what)


@check(points=2, cell="test_bert_model", name="BertModel: hidden states and gradients match the reference with the "
                                             "same weights (padded batches, two segments; float32, float64, "
                                             "another device)")
def test_bert_model(student, reference, rng, compare, rules, block_weights):
    w = block_weights(reference.BertModel, MODEL, rng)
    for B, T, lengths in ((4, 10, [10, 7, 3, 1]), (1, 24, [24])):
        ids, types, am = _ids(rng, B, T, lengths)
        for dtype in (None, "float64"):
            compare(student, cls="BertModel", trusted=reference, trusted_cls="BertModel", init_kwargs=MODEL, weights=w,
                    inputs=[ids, types, am], dtype=dtype, **({} if dtype else dict(rtol=1e-3, atol=1e-4)),
                    what=f"{_shown(MODEL)} on ids ({B}, {T}) with token_type_ids and attention_mask (lengths "
                         f"{lengths}){' in float64' if dtype else ''}")
    expect_on_other_device(student, cls="BertModel", inputs=[ids, types, am], init_kwargs=MODEL, weights=w,
                           what=f"{_shown(MODEL)} on ids {ids.shape}", **rules)


MINILM = dict(vocab_size=30522)
ATOL = 1e-4


def _minilm_states(student, reference, both, weights, inputs, what):
    found, expected = both(student, cls="BertModel", trusted=reference, trusted_cls="BertModel", init_kwargs=MINILM,
                           weights=weights, inputs=inputs, grad=False, timeout=120)
    shape = expected["outputs"][0].shape
    return expect_shape(found["outputs"][0], shape, what=what), expected["outputs"][0]


@check(points=2, cell="test_bert_model", name="BertModel with MiniLM's real weights: hidden states equal the "
                                             "reference's on padded WordPiece batches (atol 1e-4), and padding "
                                             "changes no real token's state")
def test_minilm_hidden_states(student, reference, both, minilm_weights):
    ids, types, am = wordpiece_batch(reference)
    what = (f"BertModel(30522) with all-MiniLM-L6-v2's weights on {len(ids)} padded WordPiece rows (sentences and "
            "pairs with two segments), token_type_ids and attention_mask")
    found, expected = _minilm_states(student, reference, both, minilm_weights, [ids, types, am], what)
    real = am.astype(bool)
    expect_close(found[real], expected[real], rtol=1e-4, atol=ATOL,
                 what=f"{what}: the hidden states of the real tokens (a BERT layer is post-norm with exact GELU and "
                      "LayerNorm eps 1e-12; the embeddings add token, position and segment)")
    # more padding, holding other ids, must change nothing at the real tokens
    longer = np.concatenate([ids, np.full((len(ids), 5), 1000, dtype=np.int64)], axis=1)
    longer[:, :ids.shape[1]][am == 0] = 2000
    more = np.concatenate([am, np.zeros((len(ids), 5), dtype=np.int64)], axis=1)
    tt = np.concatenate([types, np.zeros((len(ids), 5), dtype=np.int64)], axis=1)
    padded, _ = _minilm_states(student, reference, both, minilm_weights, [longer, tt, more],
                               what=f"{what}, with 5 more padding positions")
    expect_close(padded[:, :ids.shape[1]][real], found[real], rtol=0, atol=ATOL,
                 what=f"{what}: 5 more padding positions (attention_mask 0, holding other ids) changed the real tokens' "
                      "states; no query may attend to padding")


@check(points=1, cell="test_bert_model", name="mean_pool: MiniLM's sentence embeddings from your BertModel and "
                                             "mean_pool equal the reference's")
def test_sentence_embeddings(student, reference, rng, minilm_weights):
    import torch

    ids, types, am = wordpiece_batch(reference, with_pairs=False)
    what = f"mean_pool(h, attention_mask) of MiniLM's hidden states for {len(ids)} padded sentences"
    with torch.no_grad():
        model = reference.BertModel(**MINILM)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in minilm_weights.items()})
        h = model.eval()(torch.from_numpy(ids), None, torch.from_numpy(am)).numpy()
    found = student.probe("call_with_tensors", fn="mean_pool", args=[h, am])
    found = expect_shape(found, (len(ids), h.shape[-1]), what=what)
    with torch.no_grad():
        expected = reference.mean_pool(torch.from_numpy(h), torch.from_numpy(am)).numpy()
    expect_close(found, expected, rtol=1e-4, atol=1e-5, what=f"{what}: each row's mean over its real tokens only")
    # a float mask and a boolean mask say the same
    found = expect_shape(student.probe("call_with_tensors", fn="mean_pool", args=[h, am.astype(bool)]),
                         expected.shape, what=f"{what}, attention_mask given as booleans")
    expect_close(found, expected, rtol=1e-4, atol=1e-5, what=f"{what}, attention_mask given as booleans")
