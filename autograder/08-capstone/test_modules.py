"""Checks for Part 1 and the decoder of Part 2: RMSNorm, RoPE, SwiGLU, grouped-query attention, the block and the
whole Llama against the reference with the same random weights.

Modules are compared with `compare_modules` (outputs, gradients of the inputs and of every parameter) in float32
and float64 on both sides, with every RMSNorm gain drawn at random (`llama_weights`). The inputs are chosen for
the bugs students write: RMSNorm on vectors with a mean far from zero (a subtracted mean shows) and on vectors
of 1e-3 (an epsilon outside the square root shows, as its 1e-5 is then comparable to the mean square); RoPE at
large and scattered positions, d_head = 2 and base 10 (halves for adjacent pairs, a wrong exponent, angles
computed in the input's low precision); attention with one key/value head, with as many as query heads and with
groups of 3 and 2 (heads repeated in the wrong order), T = 1; the cache fed in uneven chunks (positions not
advanced, keys appended twice, rotation after caching).
"""

from __future__ import annotations

import numpy as np

from conftest import MODULE_RULES, llama_weights
from lmcourse.grading.checks import check, expect_close
from lmcourse.grading.compare import expect_on_other_device, expect_runs_elsewhere
from lmcourse.grading.sandbox.inside import probes


def _x(rng, *shape, scale=1.0, shift=0.0):
    return (shift + scale * rng.normal(size=shape)).astype(np.float32)


@check(points=2, cell="test_rmsnorm", name="RMSNorm: outputs and gradients match the reference (epsilon inside the "
                                           "square root, no mean subtracted; float32 and float64, another device), "
                                           "its gain starting at ones", visibility="visible")
def test_rmsnorm(student, reference, rng, compare):
    for shape, scale, shift, eps in (((2, 5, 16), 1.0, 3.0, 1e-5), ((3, 8), 1e-3, 0.0, 1e-5), ((4, 1, 2, 6), 1.0, 0.0, 0.1),
                                     ((1, 1), 0.5, 0.0, 1e-5)):
        kw = {"d_model": shape[-1], "eps": eps}
        w = llama_weights("RMSNorm", kw, rng, reference)
        x = _x(rng, *shape, scale=scale, shift=shift)
        for dtype in (None, "float64"):
            compare(student, cls="RMSNorm", trusted=reference, trusted_cls="RMSNorm", init_kwargs=kw, weights=w,
                    inputs=[x], dtype=dtype, rtol=1e-4 if dtype is None else None,
                    what=f"RMSNorm({shape[-1]}, eps={eps}) on x {shape} of scale {scale}"
                         f"{f' around {shift}' if shift else ''}{' in float64' if dtype else ''}")
    expect_on_other_device(student, cls="RMSNorm", init_kwargs={"d_model": 8}, inputs=[_x(rng, 2, 3, 8)],
                           what="RMSNorm(8) on x (2, 3, 8)", **MODULE_RULES)
    # every comparison above loads the gain; a freshly built norm must start as the identity's scale
    start = student.probe("initial_weights", cls="RMSNorm", init_kwargs={"d_model": 6}, seed=0)
    if not (isinstance(start, dict) and set(start) == {"weight"}):
        raise AssertionError(f"RMSNorm(6): expected one parameter, weight (the gain); found "
                             f"{sorted(start) if isinstance(start, dict) else type(start).__name__}")
    expect_close(start["weight"], np.ones(6, dtype=np.float32), rtol=0, atol=0,
                 what="RMSNorm(6)'s gain as built, before any training: ones (the norm then only rescales)")


def _rope_cases(rng):
    yield (2, 3, 5, 8), np.arange(5), 100_000.0
    yield (1, 4, 6, 8), np.array([0, 7, 8, 100, 2047, 8191]), 100_000.0  # scattered, large positions
    yield (3, 2), np.array([1, 2, 3]), 10.0  # d_head = 2: one pair
    yield (2, 9, 4, 64), np.arange(40, 44), 100_000.0  # SmolLM2's head size, positions after a prompt
    yield (5, 16), rng.permutation(5), 10_000.0


@check(points=2, cell="test_rope", name="apply_rope: the same rotation as the reference (adjacent pairs, the angles "
                                        "positions x base^(-2i/d_head); float32 and float64; where x is)")
def test_rope(student, reference, rng):
    import torch

    for shape, positions, base in _rope_cases(rng):
        x = _x(rng, *shape)
        for dtype in (np.float32, np.float64):
            xd = x.astype(dtype)
            expected = reference.apply_rope(torch.from_numpy(xd), torch.from_numpy(positions.astype(np.int64)),
                                            base=base).numpy()
            found = student.probe("call_with_tensors", fn="apply_rope",
                                  args=[xd, positions.astype(np.int64)], kwargs={"base": base})
            what = (f"apply_rope(x {shape} {np.dtype(dtype).name}, positions {positions.tolist()[:6]}, "
                    f"base={base:g})")
            if getattr(found, "dtype", None) != np.dtype(dtype):
                raise AssertionError(f"{what}: expected a {np.dtype(dtype).name} tensor like x; found "
                                     f"{getattr(found, 'dtype', type(found).__name__)}")
            expect_close(found, expected, what=what, rtol=1e-4, atol=1e-5 if dtype == np.float32 else 1e-9)
    expect_runs_elsewhere(student, fn="apply_rope", args=[_x(rng, 2, 5, 8), np.arange(3, 8)],
                          what="apply_rope(x (2, 5, 8), positions 3..7)")


@check(points=1, cell="test_swiglu", name="SwiGLU: outputs and gradients match the reference with the same weights "
                                          "(SiLU on gate, times up, then down; float32 and float64)",
       visibility="visible")
def test_swiglu(student, reference, rng, compare):
    for shape, d_ff in (((2, 5, 8), 12), ((3, 4), 1), ((1, 1, 6), 16)):
        kw = {"d_model": shape[-1], "d_ff": d_ff}
        w = llama_weights("SwiGLU", kw, rng, reference)
        x = _x(rng, *shape)
        for dtype in (None, "float64"):
            compare(student, cls="SwiGLU", trusted=reference, trusted_cls="SwiGLU", init_kwargs=kw, weights=w,
                    inputs=[x], dtype=dtype, what=f"SwiGLU({shape[-1]}, {d_ff}) on x {shape}"
                                                  f"{' in float64' if dtype else ''}")


# (B, T, d_model, n_heads, n_kv_heads): groups of 3, 2, 4, 1 (MHA) and MQA; heads of 2 features (one RoPE pair,
# whose angle does not depend on the base) and of 8 and 16 (where a wrong base shows); one position
ATTENTION_SHAPES = ((2, 7, 12, 6, 2), (1, 5, 12, 6, 3), (2, 6, 32, 4, 2), (1, 6, 8, 4, 4), (2, 1, 16, 2, 1),
                    (1, 9, 18, 9, 3), (1, 5, 64, 4, 1))
# float64 comparisons of anything that rotates by RoPE: its angles are computed in float32 whatever the input's
# dtype (as SmolLM2's were), so two correct ways of rotating (cos and sin, or a complex exponential) differ by
# float32's rounding of a cosine, about 1e-8, which two layers of drawn weights grow to 6e-7; float32 comparisons
# of the whole decoder: the gradients of a two-layer model with drawn gains differ by up to 3e-5 between
# sqrt-then-divide and rsqrt
ROTATED_FLOAT64 = dict(rtol=1e-5, atol=1e-5)
DECODER_FLOAT32 = dict(rtol=1e-3, atol=1e-4)


@check(points=2, cell="test_attention", name="GroupedQueryAttention: outputs and gradients match the reference with "
                                             "the same weights (RoPE, heads shared in groups, causal, scaled; float32 "
                                             "and float64)")
def test_attention(student, reference, rng, compare):
    for B, T, d, h, kv in ATTENTION_SHAPES:
        kw = {"d_model": d, "n_heads": h, "n_kv_heads": kv, "rope_base": 50.0}
        w = llama_weights("GroupedQueryAttention", kw, rng, reference)
        x = _x(rng, B, T, d)
        for dtype in (None, "float64"):
            compare(student, cls="GroupedQueryAttention", trusted=reference, trusted_cls="GroupedQueryAttention",
                    init_kwargs=kw, weights=w, inputs=[x], dtype=dtype, **(ROTATED_FLOAT64 if dtype else {}),
                    what=f"GroupedQueryAttention({d}, n_heads={h}, n_kv_heads={kv}) on x ({B}, {T}, {d})"
                         f"{' in float64' if dtype else ''}")


def _reference_forward(reference, cls, kw, w, x):
    """The reference's `cls` with weights `w` on `x`, in eval mode, without gradients."""
    out = probes.run_local("module_forward", reference, cls=cls, init_kwargs=kw, state_dict=w, inputs=[x], grad=False)
    return out["outputs"][0]


def _expect_incremental(student, reference, *, cls, kw, w, x, chunks, n_layers, what, rules):
    found = student.probe("incremental_logits", cls=cls, init_kwargs=kw, state_dict=w, ids=x, chunks=chunks,
                          n_layers=n_layers, **rules)
    if not isinstance(found, dict) or found.get("raised"):
        raise AssertionError(f"{what}: it raised {found.get('raised')}: {found.get('message')}" if isinstance(found, dict)
                             else f"{what}: the grader could not read the result")
    expected = _reference_forward(reference, cls, kw, w, x)
    expect_close(found["logits"], expected, what=f"{what}, fed in chunks of {list(chunks)} through one KVCache, "
                                                 "against the whole sequence at once", rtol=1e-4, atol=1e-5)


@check(points=1, cell="test_attention", name="GroupedQueryAttention with a KVCache: a prompt, single positions and "
                                             "chunks give the full forward's outputs; runs where its input is",
       visibility="visible")
def test_attention_cache(student, reference, rng, rules):
    for B, T, d, h, kv, chunks in ((2, 9, 12, 6, 2, (4, 1, 1, 3)), (1, 6, 8, 4, 1, (1, 1, 1, 1, 2)),
                                   (1, 5, 18, 9, 3, (5,))):
        kw = {"d_model": d, "n_heads": h, "n_kv_heads": kv, "rope_base": 50.0}
        w = llama_weights("GroupedQueryAttention", kw, rng, reference)
        _expect_incremental(student, reference, cls="GroupedQueryAttention", kw=kw, w=w, x=_x(rng, B, T, d),
                            chunks=chunks, n_layers=1, rules=rules,
                            what=f"GroupedQueryAttention({d}, n_heads={h}, n_kv_heads={kv}) on x ({B}, {T}, {d})")
    expect_on_other_device(student, cls="GroupedQueryAttention", init_kwargs={"d_model": 12, "n_heads": 6,
                                                                              "n_kv_heads": 2},
                           inputs=[_x(rng, 2, 5, 12)], what="GroupedQueryAttention(12, 6, 2) on x (2, 5, 12)",
                           **MODULE_RULES)


TINY = dict(vocab_size=40, d_model=12, n_layers=2, n_heads=6, n_kv_heads=2, d_ff=20, rope_base=50.0, eps=1e-5)


@check(points=2, cell="test_llama", name="Llama: logits and gradients match the reference with the same weights "
                                         "(pre-norm blocks, final RMSNorm, tied output layer, the model's eps in every "
                                         "norm; float32, float64, with a KVCache)")
def test_llama(student, reference, rng, compare, rules):
    shown = "Llama(" + ", ".join(f"{k}={v}" for k, v in TINY.items()) + ")"
    for kw in (TINY, dict(TINY, n_layers=1, n_kv_heads=6, eps=0.1)):  # an eps every norm must be given
        w = llama_weights("Llama", kw, rng, reference)
        for B, T in ((2, 9), (1, 1)):
            ids = rng.integers(0, kw["vocab_size"], size=(B, T)).astype(np.int64)
            for dtype in (None, "float64"):
                compare(student, cls="Llama", trusted=reference, trusted_cls="Llama", init_kwargs=kw, weights=w,
                        inputs=[ids], dtype=dtype, **(ROTATED_FLOAT64 if dtype else DECODER_FLOAT32),
                        what=f"{shown if kw is TINY else 'Llama with 1 layer, 6 key/value heads and eps=0.1'} on ids "
                             f"({B}, {T})"
                             f"{' in float64' if dtype else ''}")
    w = llama_weights("Llama", TINY, rng, reference)
    ids = rng.integers(0, 40, size=(2, 10)).astype(np.int64)
    _expect_incremental(student, reference, cls="Llama", kw=TINY, w=w, x=ids, chunks=(6, 1, 1, 2), n_layers=2,
                        rules=rules, what=f"{shown} on ids (2, 10)")
