"""Checks for Part 3: MultiHeadAttention against nn.MultiheadAttention with the same weights, and its
properties.

The trusted side is `lmcourse.grading.layers.TorchMultiHeadAttention` (nn.MultiheadAttention's own forward
with the course's parameter names and mask convention) behind the assignment's ``forward(x, kv=None,
mask=None)`` (the conftest's ``TRUSTED.MultiHeadAttention``). Weights are PyTorch's initialisation times 2,
so that the softmax is far from uniform and a wrong scale or head layout shows. Outputs, per-head weights,
the gradients of the inputs and of all eight parameters are compared (`compare_modules`), in float32 and
in float64 on both sides.

The property checks run the student's module alone: without a mask, permuting the tokens permutes the
outputs (self-attention has no notion of order); under a causal mask, changing tokens from position k on
leaves the outputs before k unchanged. A module that never mixes positions (``out_proj(x)``, or each
position attending to itself alone) has both properties, so each is paired with what only attention does:
a replaced token moves the outputs of the positions that attend to it (wherever the reference's move by
more than 1e-3), and the layout check loads zero keys (the weights must come out uniform) and zero values
(the outputs must be out_proj's bias). Heads are independent: changing the query weights of one head
changes that head's attention weights and no other head's (a `view` to (B, h, T, d_k) without the transpose
mixes positions into heads and fails it).
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_equal, expect_shape
from lmcourse.grading.compare import expect_on_other_device


def _init(d_model, n_heads):
    return {"d_model": d_model, "n_heads": n_heads}


def _x(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


@check(points=2, cell="test_multi_head_attention", name="MultiHeadAttention: self-attention without a mask, outputs, "
                                                       "per-head weights and gradients match nn.MultiheadAttention "
                                                       "with the same weights", visibility="visible")
def test_mha_self(student, rng, compare, trusted, weights):
    for B, T, d, h in ((2, 5, 16, 4), (1, 1, 8, 2), (3, 7, 12, 3)):
        w = weights(trusted, "MultiHeadAttention", _init(d, h), seed=int(rng.integers(1 << 30)), scale=2.0)
        compare(student, cls="MultiHeadAttention", trusted=trusted, trusted_cls="MultiHeadAttention",
                init_kwargs=_init(d, h), weights=w, inputs=[_x(rng, B, T, d)],
                what=f"MultiHeadAttention(d_model={d}, n_heads={h}), self-attention on x ({B}, {T}, {d}), no mask")


@check(points=2, cell="test_multi_head_attention", name="MultiHeadAttention: causal self-attention and "
                                                       "cross-attention with key padding match nn.MultiheadAttention "
                                                       "(1 head, 4 heads, d_model heads; float32 and float64)")
def test_mha_masks(student, rng, compare, trusted, weights):
    for d, h in ((16, 1), (16, 4), (8, 8)):
        w = weights(trusted, "MultiHeadAttention", _init(d, h), seed=int(rng.integers(1 << 30)), scale=2.0)
        T = 6
        causal = np.tril(np.ones((T, T), dtype=bool))
        lengths = np.array([9, 4, 1])
        padding = (np.arange(9) < lengths[:, None])[:, None, None, :]
        cases = [([_x(rng, 3, T, d), None, causal], f"causal self-attention on x (3, {T}, {d}), mask ({T}, {T})"),
                 ([_x(rng, 3, 5, d), _x(rng, 3, 9, d), padding], f"cross-attention from x (3, 5, {d}) to kv "
                  f"(3, 9, {d}), key padding (3, 1, 1, 9) of lengths 9, 4, 1"),
                 ([_x(rng, 3, 4, d), _x(rng, 3, 2, d)], f"cross-attention from x (3, 4, {d}) to kv (3, 2, {d}), no mask")]
        for inputs, label in cases:
            for dtype in (None, "float64"):
                compare(student, cls="MultiHeadAttention", trusted=trusted, trusted_cls="MultiHeadAttention",
                        init_kwargs=_init(d, h), weights=w, inputs=inputs, dtype=dtype,
                        what=f"MultiHeadAttention(d_model={d}, n_heads={h}), {label}"
                             f"{' in float64' if dtype else ''}")


@check(points=1, cell="test_multi_head_attention", name="MultiHeadAttention: parameter names and shapes as specified "
                                                       "(with and without bias), each in its role (keys through "
                                                       "k_proj, values through v_proj), and it runs on a device other "
                                                       "than the CPU")
def test_mha_layout_and_device(student, rng, rules, trusted, weights):
    for bias in (True, False):
        shapes = student.probe("parameter_shapes", cls="MultiHeadAttention",
                               init_kwargs={"d_model": 12, "n_heads": 3, "bias": bias})
        expected = {f"{p}.{w}": (12, 12) if w == "weight" else (12,)
                    for p in ("q_proj", "k_proj", "v_proj", "out_proj") for w in (("weight", "bias") if bias else
                                                                                 ("weight",))}
        expected["__total__"] = 4 * (144 + (12 if bias else 0))
        expect_equal(shapes, expected, what=f"the parameters of MultiHeadAttention(d_model=12, n_heads=3, "
                                            f"bias={bias}) (name: shape)")
    # The names are roles, which a module holding the four projections and never attending would not meet:
    # with no keys (k_proj all zeros) every score of a row is equal, so the weights are uniform; with no values
    # (v_proj all zeros) every output is out_proj's bias.
    w = weights(trusted, "MultiHeadAttention", _init(16, 4), seed=int(rng.integers(1 << 30)), scale=2.0)
    x = _x(rng, 2, 5, 16)
    no_keys = dict(w, **{"k_proj.weight": np.zeros_like(w["k_proj.weight"]),
                         "k_proj.bias": np.zeros_like(w["k_proj.bias"])})
    _, found = _run(student, no_keys, [x])
    expect_close(expect_shape(found, (2, 4, 5, 5), what="the weights of MultiHeadAttention(16, 4) on x (2, 5, 16)"),
                 np.full((2, 4, 5, 5), 1 / 5), rtol=1e-5, atol=1e-6,
                 what="MultiHeadAttention(16, 4) on x (2, 5, 16) with k_proj's weight and bias all zeros (every key "
                      "zero, so every score of a row equal): the attention weights must be uniform, 1/5 each")
    no_values = dict(w, **{"v_proj.weight": np.zeros_like(w["v_proj.weight"]),
                           "v_proj.bias": np.zeros_like(w["v_proj.bias"])})
    out, _ = _run(student, no_values, [x])
    expect_close(out, np.broadcast_to(w["out_proj.bias"], (2, 5, 16)), rtol=1e-5, atol=1e-6,
                 what="MultiHeadAttention(16, 4) on x (2, 5, 16) with v_proj's weight and bias all zeros (every value "
                      "zero, so every head's output zero): the outputs must be out_proj's bias at every position")
    T = 5
    expect_on_other_device(student, cls="MultiHeadAttention", init_kwargs=_init(8, 2),
                           inputs=[_x(rng, 2, T, 8), None, np.tril(np.ones((T, T), dtype=bool))],
                           what="MultiHeadAttention(d_model=8, n_heads=2), causal self-attention", **rules)
    expect_on_other_device(student, cls="MultiHeadAttention", init_kwargs=_init(8, 2),
                           inputs=[_x(rng, 2, 3, 8), _x(rng, 2, 4, 8)],
                           what="MultiHeadAttention(d_model=8, n_heads=2), cross-attention", **rules)


def _run(student, w, inputs, d=16, h=4):
    """(outputs, weights) of the student's MultiHeadAttention(d, h) with weights `w`, without gradients."""
    out = student.probe("module_forward", cls="MultiHeadAttention", init_kwargs=_init(d, h), state_dict=w,
                        inputs=inputs, grad=False, no_builtin_attention=True)["outputs"]
    if len(out) != 2:
        raise AssertionError(f"MultiHeadAttention(d_model={d}, n_heads={h}): expected two tensors (outputs, weights), "
                             f"found {len(out)}")
    return out


def _moved(a, b, positions) -> list[int]:
    """The positions (axis 1) at which outputs `a` and `b` (B, T, d) differ beyond float32 noise."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return [i for i in positions if not np.allclose(a[:, i], b[:, i], rtol=1e-5, atol=1e-6)]


def _must_move(student, trusted, w, inputs, changed_inputs, positions, *, what: str) -> None:
    """Where the reference's outputs move by more than 1e-3 when `inputs` become `changed_inputs`, the
    student's must move too: a property check a module that never mixes positions could pass otherwise."""
    from lmcourse.grading.sandbox.inside import probes

    def ref(xs):
        return probes.run_local("module_forward", trusted, cls="MultiHeadAttention", init_kwargs=_init(16, 4),
                                state_dict=w, inputs=xs, grad=False)["outputs"][0]

    before, after = np.asarray(ref(inputs), np.float64), np.asarray(ref(changed_inputs), np.float64)
    expected = [i for i in positions if np.abs(after[:, i] - before[:, i]).max() > 1e-3]
    found = set(_moved(_run(student, w, changed_inputs)[0], _run(student, w, inputs)[0], expected))
    still = [i for i in expected if i not in found]
    if still:
        raise AssertionError(f"{what}: the outputs at positions {still} did not change; each of them attends to "
                             "the replaced token, so its weighted average of the values must move")


@check(points=1, cell="test_multi_head_attention", name="MultiHeadAttention: without a mask, permuting the tokens "
                                                       "permutes the outputs and each position reads the others; "
                                                       "under a causal mask, changing later tokens leaves earlier "
                                                       "outputs unchanged and later positions read earlier tokens")
def test_mha_properties(student, rng, trusted, weights):
    w = weights(trusted, "MultiHeadAttention", _init(16, 4), seed=int(rng.integers(1 << 30)), scale=2.0)
    x = _x(rng, 2, 7, 16)
    perm = rng.permutation(7)
    while np.array_equal(perm, np.arange(7)):
        perm = rng.permutation(7)
    out, _ = _run(student, w, [x])
    out_perm, _ = _run(student, w, [x[:, perm]])
    expect_close(out_perm, np.asarray(out)[:, perm], what="MultiHeadAttention(16, 4), self-attention without a mask "
                 "on x (2, 7, 16) with its tokens permuted: the outputs must be the same outputs, permuted the same way",
                 rtol=1e-4, atol=1e-5)
    j = int(rng.integers(7))
    changed = x.copy()
    changed[:, j] = _x(rng, 2, 16)
    _must_move(student, trusted, w, [x], [changed], [i for i in range(7) if i != j],
               what=f"MultiHeadAttention(16, 4), self-attention without a mask on x (2, 7, 16) with token {j} replaced")
    causal = np.tril(np.ones((7, 7), dtype=bool))
    first = x.copy()
    first[:, 0] = _x(rng, 2, 16)
    _must_move(student, trusted, w, [x, None, causal], [first, None, causal], range(1, 7),
               what="MultiHeadAttention(16, 4), causal self-attention on x (2, 7, 16) with token 0 replaced")
    out, _ = _run(student, w, [x, None, causal])
    for k in (1, 4, 6):
        changed = x.copy()
        changed[:, k:] = _x(rng, 2, 7 - k, 16)
        out_changed, _ = _run(student, w, [changed, None, causal])
        expect_close(np.asarray(out_changed)[:, :k], np.asarray(out)[:, :k], rtol=1e-5, atol=1e-6,
                     what=f"MultiHeadAttention(16, 4), causal self-attention on x (2, 7, 16) with the tokens from "
                          f"position {k} on replaced: the outputs at positions 0..{k - 1} must not change")
        if np.allclose(np.asarray(out_changed)[:, k], np.asarray(out)[:, k], rtol=1e-5, atol=1e-6):
            raise AssertionError(f"MultiHeadAttention(16, 4), causal self-attention on x (2, 7, 16) with the tokens "
                                 f"from position {k} on replaced: the output at position {k} did not change; a "
                                 "position must attend to itself")


@check(points=1, cell="test_multi_head_attention", name="MultiHeadAttention: heads are independent: changing one "
                                                       "head's query weights changes that head's weights only")
def test_mha_heads(student, rng, trusted, weights):
    d, h = 16, 4
    d_k = d // h
    w = weights(trusted, "MultiHeadAttention", _init(d, h), seed=int(rng.integers(1 << 30)), scale=2.0)
    x = _x(rng, 2, 6, d)
    _, base = _run(student, w, [x])
    base = expect_shape(base, (2, h, 6, 6), what=f"the weights of MultiHeadAttention({d}, {h}) on x (2, 6, {d})")
    for head in (0, 2):
        changed = dict(w)
        q = w["q_proj.weight"].copy()
        q[head * d_k:(head + 1) * d_k] = rng.normal(size=(d_k, d)).astype(np.float32)
        changed["q_proj.weight"] = q
        _, found = _run(student, changed, [x])
        found = np.asarray(found)
        what = (f"MultiHeadAttention({d}, {h}) on x (2, 6, {d}) with new query weights for head {head} only (rows "
                f"{head * d_k}..{(head + 1) * d_k - 1} of q_proj.weight: head i uses features i*d_k..(i+1)*d_k-1)")
        others = [i for i in range(h) if i != head]
        expect_close(found[:, others], base[:, others], rtol=1e-5, atol=1e-6,
                     what=f"{what}: the attention weights of the other heads must not change")
        if np.allclose(found[:, head], base[:, head], rtol=1e-5, atol=1e-6):
            raise AssertionError(f"{what}: the attention weights of head {head} did not change")
