"""Checks for Parts 1 and 2: the masked softmax, scaled dot-product attention, and the two masks.

The trusted side of every comparison is PyTorch's: ``torch.softmax`` for the softmax, and
``F.scaled_dot_product_attention`` for attention (see the conftest: its weights come from the same
function applied to identity values). The student's attention runs as the given module
``AttentionFunction`` under the probe ``module_forward``, so that the gradients of q, k and v are compared
too, and PyTorch's built-in attention is refused while it runs (the assignment's rule).

Inputs are random, with shapes like the real ones and edge cases among them: no leading batch dimension,
one and two of them, T_q = 1, T_k = 1, T_q != T_k, d_k != d_v, scores near ±1000 (q and k scaled), masks
of each convention's shape: (T_q, T_k) causal, (B, 1, 1, T_k) key padding, (B, 1, T_q, T_k) one per
sequence. Only the softmax check and one attention case hold a fully masked row, where the assignment
defines the result (zeros, as F.scaled_dot_product_attention gives); every other mask lets each query see
at least one key.
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.grading.checks import check, expect_close, expect_shape
from lmcourse.grading.compare import expect_runs_elsewhere, one_thread
from lmcourse.grading.sandbox.inside.probes import DEVICE_ARG


def _softmax(z, mask=None):
    """torch.softmax over the last axis in float64, masked entries -inf; a fully masked row zeros."""
    z = torch.from_numpy(np.asarray(z, dtype=np.float64))
    if mask is not None:
        z = z.masked_fill(~torch.from_numpy(np.asarray(mask)), float("-inf"))
    with one_thread():
        p = torch.softmax(z, dim=-1)
    return torch.nan_to_num(p, nan=0.0).numpy()


def _tolerance(scores: np.ndarray, mask=None) -> dict:
    """rtol and atol for a softmax of `scores`, from what their dtype allows: a correct program subtracts
    numbers of the scores' magnitude M, whose rounding (M times the dtype's epsilon) becomes a relative error
    of the weights after exp; 8 of those on top of 1e-5 (1e-6 absolute) passes every stable form (the max
    subtracted, exp(s - logsumexp(s)): 1.4e-5 off near 1 at M = 3,000 in float32) and leaves an unstable one
    (NaN, inf) failing. Masked scores do not count towards M."""
    kept = scores if mask is None else np.where(np.broadcast_to(mask, scores.shape), scores, 0)
    slack = 8 * float(np.finfo(scores.dtype).eps) * float(np.abs(kept).max(initial=0.0))
    return {"rtol": 1e-5 + slack, "atol": 1e-6 + slack}


def _student_softmax(student, scores, mask=None, what=""):
    args = [scores] if mask is None else [scores, mask]
    found = student.probe("call_with_tensors", fn="masked_softmax", args=args)
    arr = expect_shape(found, scores.shape, what=what)
    if arr.dtype != scores.dtype:
        raise AssertionError(f"{what}: expected the scores' dtype {scores.dtype}, found {arr.dtype}")
    return arr


@check(points=1, cell="test_softmax", name="masked_softmax without a mask: matches torch.softmax over the last axis, "
                                          "rows sum to 1, finite and shift-invariant at scores near ±1000",
       visibility="visible")
def test_softmax(student, rng):
    for shape, scale, dtype in (((5, 7), 1.0, "float32"), ((2, 3, 4, 9), 3.0, "float64"), ((1,), 1.0, "float32"),
                                ((4, 6), 1000.0, "float32"), ((3, 5), 1000.0, "float64")):
        scores = (scale * rng.normal(size=shape)).astype(dtype)
        what = f"masked_softmax of {dtype} scores {shape} (standard deviation {scale:g}), no mask"
        found = _student_softmax(student, scores, what=what)
        expect_close(found, _softmax(scores), what=what, **_tolerance(scores))
        expect_close(found.sum(-1), np.ones(shape[:-1]), what=f"{what}: the sum of each row", rtol=0,
                     atol=1e-5 + _tolerance(scores)["rtol"] - 1e-5)  # the weights' relative error, summed
    scores = rng.normal(size=(4, 6)).astype(np.float32)
    shift = (1000 * rng.choice([-1, 1], size=(4, 1))).astype(np.float32)
    what = "masked_softmax of scores (4, 6), each row shifted by +1000 or -1000"
    expect_close(_student_softmax(student, scores + shift, what=what), _softmax(scores), what=f"{what} (the same "
                 "weights as without the shift)", rtol=1e-4, atol=1e-4)


@check(points=1, cell="test_softmax", name="masked_softmax with a mask: masked entries exactly 0, the others "
                                          "renormalised, a fully masked row all zeros (not NaN)")
def test_softmax_mask(student, rng):
    cases = []
    scores = rng.normal(size=(3, 5, 8)).astype(np.float32)
    mask = rng.random(size=(3, 5, 8)) < 0.5
    mask[..., 0] = True
    cases.append((scores, mask, "scores (3, 5, 8) and a random mask of the same shape"))
    scores = (50 * rng.normal(size=(2, 4, 6))).astype(np.float32)
    mask = rng.random(size=(4, 6)) < 0.5
    mask[:, 3] = True
    cases.append((scores, mask, "large scores (2, 4, 6) (standard deviation 50) and a mask (4, 6) broadcast"))
    scores = rng.normal(size=(2, 3, 5)).astype(np.float64)
    mask = np.tril(np.ones((3, 5), dtype=bool), k=1)[None].repeat(2, 0)
    mask[1, 1] = False  # one row with no True
    cases.append((scores, mask, "float64 scores (2, 3, 5) and a mask whose row [1, 1] is entirely False"))
    scores = np.full((2, 4), 2000.0, dtype=np.float32)
    mask = np.array([[False, True, True, False], [False] * 4])
    cases.append((scores, mask, "scores of 2000 everywhere (2, 4), one row fully masked"))
    for scores, mask, label in cases:
        what = f"masked_softmax of {label}"
        found = _student_softmax(student, scores, mask, what=what)
        full = np.broadcast_to(mask, scores.shape)
        if not np.all(np.isfinite(found)):
            raise AssertionError(f"{what}: {int((~np.isfinite(found)).sum())} weights are NaN or infinite; every "
                                 "weight must be finite, and a fully masked row all zeros")
        if np.any(found[~full] != 0):
            raise AssertionError(f"{what}: {int((found[~full] != 0).sum())} weights where the mask is False are "
                                 f"not exactly 0 (largest {np.abs(found[~full]).max():.3g})")
        expect_close(found, _softmax(scores, full), what=what, **_tolerance(scores, full))


def _attention_cases(rng):
    """[(inputs, label)]: q, k, v (float32) and optionally a boolean mask."""
    cases = []

    def qkv(batch, T_q, T_k, d_k, d_v, scale=1.0):
        return [(scale * rng.normal(size=(*batch, T_q, d_k))).astype(np.float32),
                (scale * rng.normal(size=(*batch, T_k, d_k))).astype(np.float32),
                rng.normal(size=(*batch, T_k, d_v)).astype(np.float32)]

    cases.append((qkv((), 4, 6, 8, 3), "q (4, 8), k (6, 8), v (6, 3), no mask"))
    cases.append((qkv((3,), 5, 5, 16, 16), "q, k, v (3, 5, 16), no mask"))
    cases.append((qkv((2, 3), 1, 7, 4, 5), "q (2, 3, 1, 4), k (2, 3, 7, 4), v (2, 3, 7, 5), no mask"))
    cases.append((qkv((2,), 3, 1, 6, 2), "q (2, 3, 6), k (2, 1, 6), v (2, 1, 2): one key, no mask"))
    causal = np.tril(np.ones((6, 6), dtype=bool))
    cases.append((qkv((2, 2), 6, 6, 8, 8) + [causal], "q, k, v (2, 2, 6, 8), a causal mask (6, 6)"))
    lengths = np.array([7, 3, 1])
    padding = (np.arange(7) < lengths[:, None])[:, None, None, :]
    cases.append((qkv((3, 2), 4, 7, 8, 6) + [padding], "q (3, 2, 4, 8), k (3, 2, 7, 8), v (3, 2, 7, 6), a key-padding "
                                                      "mask (3, 1, 1, 7) of lengths 7, 3, 1"))
    per_sequence = rng.random(size=(2, 1, 5, 9)) < 0.4
    per_sequence[..., 4] = True
    cases.append((qkv((2, 3), 5, 9, 4, 4) + [per_sequence], "q (2, 3, 5, 4), k, v (2, 3, 9, 4), a random mask "
                                                            "(2, 1, 5, 9)"))
    cases.append((qkv((2,), 5, 5, 8, 8, scale=12.0) + [causal[:5, :5]],
                  "q, k (2, 5, 8) times 12 (scores near ±1000) and v (2, 5, 8), a causal mask (5, 5)"))
    return cases


@check(points=2, cell="test_attention", name="scaled_dot_product_attention: outputs, weights and gradients match "
                                            "F.scaled_dot_product_attention (2-d to 4-d, T_q != T_k, d_k != d_v, "
                                            "with and without masks; float32 and float64)")
def test_attention(student, rng, compare, trusted):
    for inputs, label in _attention_cases(rng):
        for dtype in (None, "float64"):
            compare(student, cls="AttentionFunction", trusted=trusted, trusted_cls="AttentionFunction",
                    init_kwargs={}, weights={}, inputs=inputs, dtype=dtype, rtol=None if dtype else 1e-4,
                    atol=None if dtype else 2e-5, what=f"scaled_dot_product_attention({label}){' in float64' if dtype else ''}")


@check(points=1, cell="test_attention", name="scaled_dot_product_attention: a fully masked row gives zero weights "
                                            "and a zero output; permuting the keys and values together permutes "
                                            "the weights' columns and leaves the outputs unchanged")
def test_attention_properties(student, rng, both, trusted, rules):
    q, k, v = (rng.normal(size=(2, 4, 6)).astype(np.float32) for _ in range(3))
    mask = np.ones((2, 4, 4), dtype=bool)[:, None]
    mask[1, 0, 2] = False  # query 2 of sequence 1 may attend to nothing
    what = "scaled_dot_product_attention(q, k, v (2, 4, 6), a mask (2, 1, 4, 4) whose row [1, 0, 2] is all False)"
    found, expected = both(student, cls="AttentionFunction", trusted=trusted, trusted_cls="AttentionFunction",
                           init_kwargs={}, weights={}, inputs=[q[:, None], k[:, None], v[:, None], mask], grad=False)
    outs = found["outputs"]
    if len(outs) != 2:
        raise AssertionError(f"{what}: expected two tensors (outputs, weights), found {len(outs)}")
    for name, o, e in zip(("outputs", "weights"), outs, expected["outputs"]):
        o = expect_shape(o, e.shape, what=f"{what}: the {name}")
        if not np.all(np.isfinite(o[1, 0, 2])) or np.any(o[1, 0, 2] != 0):
            raise AssertionError(f"{what}: the {name} of the fully masked query are {np.round(o[1, 0, 2], 4)}; "
                                 "the assignment defines them as zeros")
        expect_close(o, e, what=f"{what}: the {name}", rtol=1e-4, atol=1e-5)
    perm = rng.permutation(6)
    while np.array_equal(perm, np.arange(6)):
        perm = rng.permutation(6)
    q, k, v = rng.normal(size=(3, 5, 8)).astype(np.float32), *(rng.normal(size=(3, 6, 8)).astype(np.float32)
                                                               for _ in range(2))
    runs = [student.probe("module_forward", cls="AttentionFunction", inputs=[q, kk, vv], grad=False,
                          **rules)["outputs"] for kk, vv in ((k, v), (k[:, perm], v[:, perm]))]
    what = "scaled_dot_product_attention(q (3, 5, 8), k, v (3, 6, 8)) with the keys and values permuted together"
    if any(len(r) != 2 for r in runs):
        raise AssertionError(f"{what}: expected two tensors (outputs, weights)")
    expect_close(runs[1][0], runs[0][0], what=f"{what}: the outputs (a weighted average does not depend on the order "
                 "of the keys)", rtol=1e-4, atol=1e-5)
    expect_close(runs[1][1], np.asarray(runs[0][1])[..., perm], what=f"{what}: the weights (their columns permuted "
                 "the same way)", rtol=1e-4, atol=1e-6)


@check(points=1, cell="test_masks", name="causal_mask: boolean (T, T), True on and below the diagonal, T = 1 to 9, "
                                        "made on the device it is given", visibility="visible")
def test_causal_mask(student):
    for T in range(1, 10):
        found = student.probe("call_with_tensors", fn="causal_mask", args=[T])
        arr = expect_shape(found, (T, T), what=f"causal_mask({T})")
        if arr.dtype != np.bool_:
            raise AssertionError(f"causal_mask({T}): expected a boolean tensor (True = may attend), found {arr.dtype}")
        expected = np.tril(np.ones((T, T), dtype=bool))
        if not np.array_equal(arr, expected):
            i, j = (int(a) for a in np.argwhere(arr != expected)[0])
            raise AssertionError(f"causal_mask({T}): at query {i}, key {j} expected {bool(expected[i, j])}, found "
                                 f"{bool(arr[i, j])}; position i may attend to positions 0..i, itself included")
    expect_runs_elsewhere(student, fn="causal_mask", args=[6], kwargs={"device": DEVICE_ARG},
                          what="causal_mask(6, device=...): the mask is made on the device it is given")


@check(points=1, cell="test_masks", name="key_padding_mask: boolean (B, 1, 1, T), True at each sequence's real "
                                        "positions, for random lengths; made on the device of the lengths")
def test_key_padding_mask(student, rng):
    for B, T in ((5, 9), (1, 1), (3, 4), (8, 20)):
        lengths = rng.integers(1, T + 1, size=B)
        lengths[0] = T
        what = f"key_padding_mask(lengths {lengths.tolist()}, T={T})"
        found = student.probe("call_with_tensors", fn="key_padding_mask", args=[lengths.astype(np.int64), T])
        arr = expect_shape(found, (B, 1, 1, T), what=what)
        if arr.dtype != np.bool_:
            raise AssertionError(f"{what}: expected a boolean tensor (True = may attend), found {arr.dtype}")
        expected = (np.arange(T) < lengths[:, None])[:, None, None, :]
        if not np.array_equal(arr, expected):
            b, _, _, t = (int(a) for a in np.argwhere(arr != expected)[0])
            raise AssertionError(f"{what}: sequence {b} (length {lengths[b]}), position {t}: expected "
                                 f"{bool(expected[b, 0, 0, t])}, found {bool(arr[b, 0, 0, t])}")
    expect_runs_elsewhere(student, fn="key_padding_mask", args=[np.array([3, 5, 1], dtype=np.int64), 5],
                          what="key_padding_mask(lengths [3, 5, 1], T=5): the mask is made where the lengths are")
