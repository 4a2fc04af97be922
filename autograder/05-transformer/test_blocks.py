"""Checks for Parts 1-3: sinusoidal positions against the formula, LayerNorm against nn.LayerNorm, the
feed-forward sublayer against the reference, and the two blocks against PyTorch's
nn.TransformerEncoderLayer / nn.TransformerDecoderLayer with the same weights.

The trusted side of the module comparisons is PyTorch's own code (`lmcourse.grading.layers.TRANSFORMER`:
the layer's forward run with the course's parameter names, `functional_call`), never a second hand-written
block. Outputs, the gradients of the inputs and of every parameter are compared (`compare_modules`), in
float32 and in float64 on both sides, post-norm and pre-norm, with the masks the assignment uses.
Weights: PyTorch's initialisation with the linear layers times 1.5 and every LayerNorm's gamma and beta
drawn at random (`conftest.block_weights`), so that a LayerNorm in the wrong place, or ln1 and ln2
swapped, changes the numbers.

LayerNorm is fed three kinds of rows: standard normal; shifted by +1000 (in float32 the one-pass variance
E[x^2] - E[x]^2 loses every digit there: 1e6 + 1 - 1e6 at a spacing of 0.06); and with a standard deviation
of 1e-3, where the variance (1e-6) is below eps = 1e-5, so eps inside or outside the square root differ by
a factor of about 3.
"""

from __future__ import annotations


import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape


def _x(rng, *shape, scale=1.0, shift=0.0):
    return (shift + scale * rng.normal(size=shape)).astype(np.float32)


def _positions(T: int, d: int) -> np.ndarray:
    """The formula, in float64: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(the same angle)."""
    p = np.arange(T, dtype=np.float64)[:, None]
    angles = p / 10000.0 ** (np.arange(0, d, 2) / d)  # (T, d/2)
    pe = np.empty((T, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


@check(points=2, cell="test_positions", name="sinusoidal_positions: the table matches the formula (sines and "
                                            "cosines interleaved, exponent 2i/d, positions from 0)")
def test_sinusoidal_positions(student):
    # atol 1e-4: a table computed in float32 (angles up to 100 rad, spacing 8e-6) passes; any wrong pairing,
    # exponent or start is off by more than 0.01 somewhere
    for T, d in ((50, 16), (100, 64), (1, 2), (7, 6)):
        what = f"sinusoidal_positions({T}, {d})"
        found = student.probe("call_with_tensors", fn="sinusoidal_positions", args=[T, d])
        found = expect_shape(found, (T, d), what=what)
        if found.dtype != np.float32:
            raise AssertionError(f"{what}: expected float32 values, found {found.dtype}")
        expect_close(found, _positions(T, d), rtol=0, atol=1e-4, what=what)


def _ln(d):
    return {"d": d}


@check(points=3, cell="test_layer_norm", name="LayerNorm: outputs and gradients match nn.LayerNorm with the same "
                                             "weights (standard rows, rows shifted by 1000, rows with std 1e-3; "
                                             "float32 and float64)")
def test_layer_norm(student, rng, compare, trusted):
    for d, shape, scale, shift, label in ((16, (3, 5), 1.0, 0.0, "standard normal rows"),
                                          (8, (2, 4), 1.0, 1000.0, "rows shifted by +1000"),
                                          (16, (4,), 1e-3, 0.0, "rows with a standard deviation of 1e-3")):
        w = {"weight": (1 + 0.5 * rng.normal(size=d)).astype(np.float32),
             "bias": (0.5 * rng.normal(size=d)).astype(np.float32)}
        x = _x(rng, *shape, d, scale=scale, shift=shift)
        for dtype in (None, "float64"):
            # rows near 1000 in float32: both sides lose about 1e-4 to rounding before any formula runs
            tol = dict(rtol=1e-3, atol=1e-3) if shift and dtype is None else {}
            compare(student, cls="LayerNorm", trusted=trusted, trusted_cls="TorchLayerNorm", init_kwargs=_ln(d),
                    weights=w, inputs=[x], dtype=dtype, **tol,
                    what=f"LayerNorm({d}) on x {tuple(x.shape)}, {label}{' in float64' if dtype else ''}")


@check(points=1, cell="test_feed_forward", name="FeedForward: outputs and gradients match the reference with the "
                                               "same weights (float32 and float64)")
def test_feed_forward(student, reference, rng, compare, block_weights):
    for d, d_ff, shape in ((8, 32, (2, 5)), (16, 4, (3,))):
        kw = {"d_model": d, "d_ff": d_ff}
        w = block_weights(reference.FeedForward, kw, rng)
        x = _x(rng, *shape, d)
        for dtype in (None, "float64"):
            compare(student, cls="FeedForward", trusted=reference, trusted_cls="FeedForward", init_kwargs=kw,
                    weights=w, inputs=[x], dtype=dtype,
                    what=f"FeedForward({d}, {d_ff}) on x {tuple(x.shape)}{' in float64' if dtype else ''}")


def _block(d, h, d_ff, norm_first):
    return {"d_model": d, "n_heads": h, "d_ff": d_ff, "norm_first": norm_first}


def _padding(lengths, S):
    return (np.arange(S) < np.asarray(lengths)[:, None])[:, None, None, :]  # (B, 1, 1, S), True = real


@check(points=3, cell="test_encoder_block", name="EncoderBlock: outputs and gradients match "
                                                "nn.TransformerEncoderLayer with the same weights (post-norm and "
                                                "pre-norm, source padding; float32 and float64)")
def test_encoder_block(student, rng, compare, trusted, block_weights):
    for norm_first in (False, True):
        for B, S, d, h, d_ff, lengths in ((3, 7, 16, 4, 32, [7, 4, 1]), (2, 5, 8, 2, 16, None)):
            kw = _block(d, h, d_ff, norm_first)
            w = block_weights(trusted.TorchEncoderBlock, kw, rng)
            inputs = [_x(rng, B, S, d)] + ([_padding(lengths, S)] if lengths else [])
            label = f"source padding (B, 1, 1, {S}) of lengths {lengths}" if lengths else "no mask"
            for dtype in (None, "float64"):
                compare(student, cls="EncoderBlock", trusted=trusted, trusted_cls="TorchEncoderBlock",
                        init_kwargs=kw, weights=w, inputs=inputs, dtype=dtype,
                        what=f"EncoderBlock({d}, {h}, {d_ff}, norm_first={norm_first}) on x ({B}, {S}, {d}), "
                             f"{label}{' in float64' if dtype else ''}")


@check(points=3, cell="test_decoder_block", name="DecoderBlock: outputs and gradients match "
                                                "nn.TransformerDecoderLayer with the same weights (post-norm and "
                                                "pre-norm, causal mask and source padding; float32 and float64)")
def test_decoder_block(student, rng, compare, trusted, block_weights):
    for norm_first in (False, True):
        for B, T, S, d, h, d_ff, lengths in ((3, 6, 7, 16, 4, 32, [7, 3, 1]), (2, 1, 4, 8, 2, 16, [4, 2])):
            kw = _block(d, h, d_ff, norm_first)
            w = block_weights(trusted.TorchDecoderBlock, kw, rng)
            causal = np.tril(np.ones((T, T), dtype=bool))
            inputs = [_x(rng, B, T, d), _x(rng, B, S, d), causal, _padding(lengths, S)]
            for dtype in (None, "float64"):
                compare(student, cls="DecoderBlock", trusted=trusted, trusted_cls="TorchDecoderBlock",
                        init_kwargs=kw, weights=w, inputs=inputs, dtype=dtype,
                        what=f"DecoderBlock({d}, {h}, {d_ff}, norm_first={norm_first}) on y ({B}, {T}, {d}) and "
                             f"memory ({B}, {S}, {d}), causal mask ({T}, {T}), source padding of lengths {lengths}"
                             f"{' in float64' if dtype else ''}")
