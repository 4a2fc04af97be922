"""Checks for Part 3: causal self-attention, the block and the GPT against the reference with the same random
weights; the parameter count.

Random weights: the reference's initialisation with the linear and embedding weights times 1.5 and every
LayerNorm's gain and bias drawn at random (`block_weights`), so that a LayerNorm in the wrong place shows.
Outputs, the gradients of the inputs and of every parameter are compared (`compare_modules`) in float32 and
float64 on both sides, on shapes that include one position, one head and one feature per head. A mask that
lets a position see the next one, no 1/sqrt(d_head), heads split without the transpose, no position embeddings
or an untied output layer (its gradient differs even with equal weights) all fail; the comparison of the
whole GPT compares tok_emb's gradient, which a tied lm_head adds to.
"""

from __future__ import annotations

import numpy as np

from conftest import GPT_RULES
from lmcourse.grading.checks import check
from lmcourse.grading.compare import block_weights, expect_on_other_device


def _x(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


@check(points=2, cell="test_attention", name="CausalSelfAttention: outputs and gradients match the reference with the "
                                             "same weights (causal mask, heads, scaling; float32 and float64)")
def test_attention(student, reference, rng, compare):
    for B, T, d, h in ((2, 7, 16, 4), (1, 1, 8, 2), (3, 5, 12, 1), (2, 6, 8, 8)):
        kw = {"d_model": d, "n_heads": h}
        w = block_weights(reference.CausalSelfAttention, kw, rng)
        x = _x(rng, B, T, d)
        for dtype in (None, "float64"):
            compare(student, cls="CausalSelfAttention", trusted=reference, trusted_cls="CausalSelfAttention",
                    init_kwargs=kw, weights=w, inputs=[x], dtype=dtype,
                    what=f"CausalSelfAttention({d}, {h}) on x ({B}, {T}, {d}){' in float64' if dtype else ''}")


@check(points=1, cell="test_attention", name="CausalSelfAttention runs where its input is (the mask made on the "
                                             "input's device)")
def test_attention_device(student, rng):
    expect_on_other_device(student, cls="CausalSelfAttention", init_kwargs={"d_model": 16, "n_heads": 4},
                           inputs=[_x(rng, 2, 5, 16)], what="CausalSelfAttention(16, 4) on x (2, 5, 16)", **GPT_RULES)


@check(points=1, cell="test_gpt", name="Block: outputs and gradients match the reference with the same weights "
                                       "(pre-norm, GELU feed-forward; float32 and float64)")
def test_block(student, reference, rng, compare):
    for B, T, d, h in ((2, 6, 16, 4), (1, 3, 8, 1)):
        kw = {"d_model": d, "n_heads": h}
        w = block_weights(reference.Block, kw, rng)
        x = _x(rng, B, T, d)
        for dtype in (None, "float64"):
            compare(student, cls="Block", trusted=reference, trusted_cls="Block", init_kwargs=kw, weights=w, inputs=[x],
                    dtype=dtype, what=f"Block({d}, {h}) on x ({B}, {T}, {d}){' in float64' if dtype else ''}")


MODEL = dict(vocab_size=40, block_size=12, d_model=16, n_heads=4, n_layers=2)


@check(points=2, cell="test_gpt", name="GPT: logits and gradients match the reference with the same weights (position "
                                       "embeddings, tied output layer; float32, float64, another device)")
def test_gpt(student, reference, rng, compare):
    w = block_weights(reference.GPT, MODEL, rng)
    shown = "GPT(" + ", ".join(f"{k}={v}" for k, v in MODEL.items()) + ")"
    for B, T in ((3, 12), (1, 1), (2, 5)):
        ids = rng.integers(0, MODEL["vocab_size"], size=(B, T)).astype(np.int64)
        for dtype in (None, "float64"):
            compare(student, cls="GPT", trusted=reference, trusted_cls="GPT", init_kwargs=MODEL, weights=w, inputs=[ids],
                    dtype=dtype, what=f"{shown} on ids ({B}, {T}){' in float64' if dtype else ''}")
    expect_on_other_device(student, cls="GPT", init_kwargs=MODEL, weights=w,
                           inputs=[rng.integers(0, 40, size=(2, 6)).astype(np.int64)], what=f"{shown} on ids (2, 6)",
                           **GPT_RULES)


# GPT-2's four sizes (Radford et al., 2019: d_model 768 / 1024 / 1280 / 1600, 12 / 24 / 36 / 48 layers) and small
# ones, odd ones included
SIZES = [(50257, 1024, 768, 12), (50257, 1024, 1024, 24), (50257, 1024, 1280, 36), (50257, 1024, 1600, 48),
         (65, 256, 384, 6), (40, 12, 16, 2), (7, 3, 4, 1), (1000, 1, 24, 5)]


@check(points=1, cell="test_gpt", name="count_parameters: GPT-2's four sizes and small models, equal to the number "
                                       "of parameters your GPT has (the tied matrix counted once)")
def test_count_parameters(student, reference):
    for V, P, d, L in SIZES:
        expected = reference.count_parameters(V, P, d, L)
        found = student.count_parameters(V, P, d, L, timeout=10)
        if found != expected:
            raise AssertionError(f"count_parameters({V}, {P}, {d}, {L}): expected {expected:,}; found {found!r}")
    for V, P, d, h, L in ((40, 12, 16, 4, 2), (9, 5, 8, 1, 3)):
        shapes = student.probe("parameter_shapes", cls="GPT",
                               init_kwargs=dict(vocab_size=V, block_size=P, d_model=d, n_heads=h, n_layers=L))
        expected = reference.count_parameters(V, P, d, L)
        total = shapes.get("__total__") if isinstance(shapes, dict) else None
        if total != expected:
            raise AssertionError(f"GPT({V}, {P}, {d}, {h}, {L}) has {total} parameters; expected {expected:,} (the "
                                 "layout in the instructions, lm_head tied to tok_emb)")
