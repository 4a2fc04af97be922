"""lmcourse.grading.layers.TorchMultiHeadAttention: nn.MultiheadAttention behind the course's interface.

It is the trusted side of the attention units' module comparisons, so it is
held here to attention as the definition gives it, written out in this file
(`ByHand`): per head, softmax(Q Kᵀ / √d_k) V, the heads concatenated, then
projected. Both run through `compare_modules` with the same weights, as a
check would run a student's module against the adapter: outputs, attention
weights and every gradient, for self- and cross-attention, causal and
key-padding masks, float32 and float64, several (d_model, n_heads).
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading.compare import compare_modules, random_weights
from lmcourse.grading.layers import ATTENTION, TorchMultiHeadAttention
from lmcourse.grading.sandbox.inside import probes


class ByHand(nn.Module):
    """Multi-head attention from its definition, one head at a time."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, T, d_model)
        d_k = q.shape[-1] // self.n_heads
        outputs, weights = [], []
        for head in range(self.n_heads):  # head i owns columns i*d_k .. (i+1)*d_k of each projection
            cols = slice(head * d_k, (head + 1) * d_k)
            scores = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(d_k)  # (B, T_q, T_k)
            if mask is not None:  # True = may attend; broadcast against (B, n_heads, T_q, T_k)
                allowed = torch.broadcast_to(mask, (q.shape[0], self.n_heads) + scores.shape[1:])[:, head]
                scores = scores.masked_fill(~allowed, float("-inf"))
            w = torch.softmax(scores, dim=-1)
            weights.append(w)
            outputs.append(w @ v[..., cols])  # (B, T_q, d_k)
        return self.out_proj(torch.cat(outputs, dim=-1)), torch.stack(weights, dim=1)


class _Local:
    """The by-hand module as the "student" of a comparison, run in this process."""

    def __init__(self, module):
        self.module = module

    def probe(self, name, *, timeout=None, **kwargs):
        return probes.run_local(name, self.module, **kwargs)


HAND = _Local(types.SimpleNamespace(MultiHeadAttention=ByHand))
SHAPES = [(8, 1), (8, 2), (12, 3), (16, 4), (6, 6)]  # (d_model, n_heads); the last has d_k = 1
B, T, T_Q, T_K = 3, 6, 4, 7
LENGTHS = np.array([T_K, 3, 1])  # keys per sequence: one full, one short, one with a single key


def inputs(case: str, d_model: int, seed: int) -> list:
    """[query, key, value(, mask)] for one case; no row of any mask is fully masked."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, d_model)).astype(np.float32)
    queries = rng.standard_normal((B, T_Q, d_model)).astype(np.float32)
    memory = rng.standard_normal((B, T_K, d_model)).astype(np.float32)
    causal = np.tril(np.ones((T, T), dtype=bool))  # (T_q, T_k): position t sees 0..t
    padding = (np.arange(T_K) < LENGTHS[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    return {
        "self": [x, x, x],
        "cross": [queries, memory, memory],
        "causal": [x, x, x, causal],
        "key padding": [queries, memory, memory, padding],
        "causal and padding": [x, x, x, causal & (np.arange(T) < np.array([T, 3, 1])[:, None])[:, None, None, :]],
    }[case]


def compare(case, d_model, n_heads, dtype=None, grad=True, seed=0):
    kw = {"d_model": d_model, "n_heads": n_heads}
    weights = random_weights(ATTENTION, "TorchMultiHeadAttention", kw, seed=seed, scale=2.0)
    return compare_modules(HAND, cls="MultiHeadAttention", trusted=ATTENTION, trusted_cls="TorchMultiHeadAttention",
                           init_kwargs=kw, weights=weights, inputs=inputs(case, d_model, seed), grad=grad,
                           dtype=dtype, what=f"{case} attention, d_model={d_model}, n_heads={n_heads}",
                           no_builtin_attention=True)  # the by-hand side passes the rule's guard too


def test_the_parameters_have_the_courses_names_and_shapes():
    shapes = {k: tuple(v.shape) for k, v in TorchMultiHeadAttention(12, 3).state_dict().items()}
    assert shapes == {f"{p}.{w}": (12, 12) if w == "weight" else (12,)
                      for p in ("q_proj", "k_proj", "v_proj", "out_proj") for w in ("weight", "bias")}
    assert set(ByHand(12, 3).state_dict()) == set(shapes)  # so weights load by name into either
    with pytest.raises(ValueError, match="multiple of n_heads"):
        TorchMultiHeadAttention(10, 3)


@pytest.mark.parametrize("dtype", [None, "float64"], ids=["float32", "float64"])
@pytest.mark.parametrize("d_model,n_heads", SHAPES)
@pytest.mark.parametrize("case", ["self", "cross", "causal", "key padding", "causal and padding"])
def test_outputs_weights_and_gradients_match_attention_by_hand(case, d_model, n_heads, dtype):
    found = compare(case, d_model, n_heads, dtype=dtype, seed=d_model + n_heads)
    outputs, weights = found["outputs"]
    T_q, T_k = (T, T) if case in ("self", "causal", "causal and padding") else (T_Q, T_K)
    assert outputs.shape == (B, T_q, d_model) and weights.shape == (B, n_heads, T_q, T_k)
    assert set(found["param_grads"]) == {f"{p}.{w}" for p in ("q_proj", "k_proj", "v_proj", "out_proj")
                                         for w in ("weight", "bias")}


@pytest.mark.parametrize("case", ["self", "cross", "causal", "key padding"])
def test_inference_matches_too(case):
    """Without gradients, in eval mode, nn.MultiheadAttention takes its fused path
    (torch._native_multi_head_attention): the same numbers."""
    compare(case, 16, 4, grad=False)


def test_the_mask_means_may_attend():
    """Masked weights are exactly 0, the others sum to 1; and the adapter equals nn.MultiheadAttention called
    with PyTorch's own masks, whose True means the opposite (attn_mask and key_padding_mask: may NOT attend)."""
    torch.manual_seed(0)
    ours = TorchMultiHeadAttention(8, 2)
    torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)
    torch_mha.load_state_dict(ours.nn_multihead_state())
    q, kv = torch.randn(3, T_Q, 8), torch.randn(3, T_K, 8)
    valid = torch.arange(T_K) < torch.from_numpy(LENGTHS)[:, None]  # (B, T_k), True = a real key

    out, w = ours(q, kv, kv, valid[:, None, None, :])
    assert torch.all(w.masked_select(~valid[:, None, None, :]) == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, T_Q))
    expected, expected_w = torch_mha(q, kv, kv, key_padding_mask=~valid, average_attn_weights=False)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, expected_w)

    causal = torch.ones(T, T, dtype=torch.bool).tril()
    x = torch.randn(3, T, 8)
    out, w = ours(x, x, x, causal)
    assert torch.all(w.masked_select(~causal) == 0)
    expected, expected_w = torch_mha(x, x, x, attn_mask=~causal, average_attn_weights=False)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, expected_w)


def test_a_mask_that_is_not_boolean_is_refused():
    """A float mask means "added to the scores" in PyTorch, not "may attend": never guessed."""
    x = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match="boolean"):
        TorchMultiHeadAttention(8, 2)(x, x, x, torch.ones(3, 3))


def test_a_fully_masked_row_gives_nan_as_nn_multiheadattention_does():
    """The documented edge: a query with no key to attend to. Checks feed one only where the spec defines it."""
    x = torch.randn(1, 3, 8)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, w = TorchMultiHeadAttention(8, 2)(x, x, x, mask)
    assert torch.isnan(w[0, :, 1]).all() and torch.isnan(out[0, 1]).all()
    assert torch.isfinite(w[0, :, [0, 2]]).all()
