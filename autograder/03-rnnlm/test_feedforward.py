"""Checks for Part 2: the feed-forward (Bengio-style) language model, against the reference with the same weights
(in float32, and once in float64 on both sides)."""

from __future__ import annotations

from lmcourse.grading.checks import check, expect_equal

CONFIGS = [dict(vocab_size=11, context=3, d_embed=4, d_hidden=6), dict(vocab_size=7, context=1, d_embed=5, d_hidden=3),
           dict(vocab_size=20, context=5, d_embed=2, d_hidden=9)]


@check(points=1, cell="test_feedforward", name="FeedForwardLM: parameter names and shapes as specified",
       visibility="visible")
def test_feedforward_shapes(student):
    for kw in CONFIGS:
        V, n, e, h = kw["vocab_size"], kw["context"], kw["d_embed"], kw["d_hidden"]
        expected = {"embedding.weight": (V, e), "hidden.weight": (h, n * e), "hidden.bias": (h,),
                    "output.weight": (V, h), "output.bias": (V,), "__total__": V * e + h * n * e + h + V * h + V}
        found = student.probe("parameter_shapes", cls="FeedForwardLM", init_kwargs=kw)
        if isinstance(found, dict):
            found = {k: tuple(v) if isinstance(v, list) else v for k, v in found.items()}
        expect_equal(found, expected, what=f"FeedForwardLM({', '.join(f'{k}={v}' for k, v in kw.items())}) "
                                           "parameters {name: shape} (__total__: the parameter count)")


@check(points=2, cell="test_feedforward", name="FeedForwardLM: logits and gradients match the reference with the same weights")
def test_feedforward_forward(student, reference, rng, compare, weights):
    for kw in CONFIGS:
        w = weights(reference, "FeedForwardLM", kw, seed=int(rng.integers(1 << 30)), scale=2.0)
        ids = rng.integers(0, kw["vocab_size"], size=(6, kw["context"]))
        compare(student, cls="FeedForwardLM", trusted=reference, trusted_cls="FeedForwardLM", init_kwargs=kw,
                weights=w, inputs=[ids], rename=lambda name: name,
                what=f"FeedForwardLM({', '.join(f'{k}={v}' for k, v in kw.items())}) on ids of shape (6, {kw['context']})")
    compare(student, cls="FeedForwardLM", trusted=reference, trusted_cls="FeedForwardLM", init_kwargs=kw,
            weights=w, inputs=[ids], rename=lambda name: name, dtype="float64",
            what=f"FeedForwardLM({', '.join(f'{k}={v}' for k, v in kw.items())}) in float64 on ids of shape "
                 f"(6, {kw['context']})")
