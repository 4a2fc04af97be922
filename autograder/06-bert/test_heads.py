"""Checks for Part 4: the masked-LM head (tied to the token embeddings), its loss, and the [CLS]
classifier, against the reference with the same weights.

Tying is checked by the layout as well as by the numbers: the student's BertForMLM must hold exactly the
reference's parameters (no separate decoder matrix), and, loaded with the same weights, give the same
logits and the same gradient of ``bert.tok_emb.weight``, which then sums its use as the input embedding
and as the output projection. The loss is compared on logits with many unselected positions whose labels
are -100 (a mean over every position, or a sum, differs by a factor of about 7).
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape

# float32: a deep module's gradients in another (correct) order of operations differ by up to 3e-5 (einsum
# layers, measured); float64 holds every comparison to 1e-9
F32 = dict(rtol=1e-3, atol=1e-4)


def _tol(dtype):
    return {} if dtype else F32


SHAPE = dict(vocab_size=40, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=16)


def _batch(rng, B=3, T=8, lengths=(8, 5, 2)):
    ids = rng.integers(5, 40, size=(B, T)).astype(np.int64)
    am = (np.arange(T) < np.asarray(lengths)[:, None]).astype(np.int64)
    ids[am == 0] = 0
    types = np.zeros((B, T), dtype=np.int64)
    types[:, T // 2:] = 1
    return ids, types, am


@check(points=2, cell="test_heads", name="BertForMLM: logits and gradients match the reference with the same "
                                        "weights; the decoder is the token embedding matrix (tied)")
def test_mlm_head(student, reference, rng, compare, block_weights):
    w = block_weights(reference.BertForMLM, SHAPE, rng)
    shown = "BertForMLM(" + ", ".join(f"{k}={v}" for k, v in SHAPE.items()) + ")"
    shapes = student.probe("parameter_shapes", cls="BertForMLM", init_kwargs=SHAPE)
    if not isinstance(shapes, dict):
        raise AssertionError(f"{shown}: the grader could not read your parameters")
    found = {k for k in shapes if k != "__total__"}
    expected = set(w)
    if found != expected:
        extra, missing = sorted(found - expected), sorted(expected - found)
        raise AssertionError(f"{shown}: the parameters differ from the specified layout: unexpected {extra[:4]}, "
                             f"missing {missing[:4]}. The decoder reuses bert.tok_emb.weight (no matrix of its own); "
                             "the head is dense, ln and bias")
    ids, types, am = _batch(rng)
    for dtype in (None, "float64"):
        compare(student, cls="BertForMLM", trusted=reference, trusted_cls="BertForMLM", init_kwargs=SHAPE, weights=w,
                inputs=[ids, types, am], dtype=dtype, **_tol(dtype),
                what=f"{shown} on ids (3, 8) with token_type_ids and attention_mask{' in float64' if dtype else ''}")


@check(points=1, cell="test_heads", name="mlm_loss: the mean cross-entropy over the selected positions only")
def test_mlm_loss(student, reference, rng):
    import torch

    for shape, V, share in (((4, 30), 50, 0.15), ((7,), 11, 0.5), ((2, 3, 5), 9, 1.0)):
        logits = (3 * rng.normal(size=shape + (V,))).astype(np.float32)
        labels = rng.integers(0, V, size=shape)
        labels[rng.random(shape) >= share] = -100
        labels.flat[0] = int(rng.integers(0, V))  # at least one selected position
        labels = labels.astype(np.int64)
        what = f"mlm_loss(logits {logits.shape}, labels {labels.shape} with {(labels != -100).sum()} selected)"
        out = student.probe("call_with_tensors", fn="mlm_loss", args=[logits, labels], grad_args=[0])
        if not isinstance(out, dict) or "result" not in out:
            raise AssertionError(f"{what}: the grader could not read your loss")
        t = torch.from_numpy(logits).requires_grad_(True)
        loss = reference.mlm_loss(t, torch.from_numpy(labels))
        loss.backward()
        found = np.asarray(out["result"], dtype=np.float64)
        if found.shape != ():
            raise AssertionError(f"{what}: expected a scalar tensor; found shape {found.shape}")
        expect_close(found, loss.item(), rtol=1e-5, atol=1e-6,
                     what=f"{what}: the mean cross-entropy over the positions whose label is not -100")
        expect_close(out["grads"][0], t.grad.numpy(), rtol=1e-4, atol=1e-6, what=f"{what}: its gradient")


@check(points=2, cell="test_heads", name="BertClassifier: logits and gradients match the reference with the same "
                                        "weights (the head reads [CLS], position 0)")
def test_classifier(student, reference, rng, compare, block_weights):
    kw = dict(SHAPE, n_classes=3)
    w = block_weights(reference.BertClassifier, kw, rng)
    ids, types, am = _batch(rng, B=4, T=7, lengths=(7, 7, 4, 2))
    shown = "BertClassifier(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"
    for dtype in (None, "float64"):
        compare(student, cls="BertClassifier", trusted=reference, trusted_cls="BertClassifier", init_kwargs=kw,
                weights=w, inputs=[ids, types, am], dtype=dtype, **_tol(dtype),
                what=f"{shown} on ids (4, 7) with token_type_ids and attention_mask{' in float64' if dtype else ''}")
