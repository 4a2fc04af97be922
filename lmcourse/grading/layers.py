"""PyTorch's own layers behind the assignments' interfaces: the trusted side of module comparisons.

An assignment asks for, say, ``LSTM(d_in, d_hidden)`` whose states are
``(B, d)`` tensors; PyTorch's ``nn.LSTM`` wants ``(1, B, d)``. The adapters
here take the assignment's arguments and shapes, so the checks
(`lmcourse.grading.compare`) and the benchmarks use one definition. The
recurrent ones keep PyTorch's parameter names (``as_ours`` maps a fused
layer's names to the assignment's); the attention one has the course's
(``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), so weights load by name
into the student's module and the trusted one alike.
"""

from __future__ import annotations

import types

import torch
from torch import nn
from torch.func import functional_call

from lmcourse.transformer import AttentionProjections, as_nn_multihead

__all__ = ["ATTENTION", "RECURRENT", "TRANSFORMER", "TorchDecoderBlock", "TorchElmanCell", "TorchElmanRNN",
           "TorchEncoderBlock", "TorchLSTM", "TorchLayerNorm", "TorchLSTMCell", "TorchMultiHeadAttention", "as_ours"]


class TorchElmanCell(nn.RNNCell):
    """nn.RNNCell as `ElmanCell(d_in, d_hidden)`: the same parameter names."""

    def __init__(self, d_in, d_hidden):
        super().__init__(d_in, d_hidden)


class TorchLSTMCell(nn.LSTMCell):
    """nn.LSTMCell as `LSTMCell(d_in, d_hidden)`: the same parameter names."""

    def __init__(self, d_in, d_hidden):
        super().__init__(d_in, d_hidden)


class TorchElmanRNN(nn.Module):
    """nn.RNN(batch_first=True) as `ElmanRNN`: states (B, d) in and out, instead of (1, B, d)."""

    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.rnn = nn.RNN(d_in, d_hidden, batch_first=True)

    def forward(self, x, h=None):
        outputs, h_n = self.rnn(x, None if h is None else h.unsqueeze(0))
        return outputs, h_n[0]


class TorchLSTM(nn.Module):
    """nn.LSTM(batch_first=True) as `LSTM`: states ((B, d), (B, d)) in and out."""

    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.rnn = nn.LSTM(d_in, d_hidden, batch_first=True)

    def forward(self, x, state=None):
        if state is not None:
            state = (state[0].unsqueeze(0), state[1].unsqueeze(0))
        outputs, (h_n, c_n) = self.rnn(x, state)
        return outputs, (h_n[0], c_n[0])


# the namespace a check passes as `trusted=` (``trusted_cls="TorchLSTM"``)
RECURRENT = types.SimpleNamespace(TorchElmanCell=TorchElmanCell, TorchLSTMCell=TorchLSTMCell,
                                  TorchElmanRNN=TorchElmanRNN, TorchLSTM=TorchLSTM)


def as_ours(name: str) -> str:
    """A fused PyTorch layer's parameter name as the assignment's: rnn.weight_ih_l0 -> cell.weight_ih."""
    return "cell." + name[len("rnn."):-len("_l0")] if name.startswith("rnn.") else name


class TorchMultiHeadAttention(AttentionProjections):
    """nn.MultiheadAttention(batch_first=True) as `MultiHeadAttention(d_model, n_heads)`, in the course's terms.

    Parameters: ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, each an
    ``nn.Linear(d_model, d_model)`` (weight ``(d_model, d_model)``, bias
    ``(d_model,)``). nn.MultiheadAttention keeps the first three stacked in one
    ``in_proj_weight`` ``(3 d_model, d_model)`` and ``in_proj_bias``; the
    forward stacks them the same way and runs nn.MultiheadAttention's own
    forward with them (``torch.func.functional_call``), so gradients reach the
    four projections and the computation is PyTorch's.

    ``forward(query (B, T_q, d_model), key (B, T_k, d_model), value (B, T_k,
    d_model), mask=None) -> (outputs (B, T_q, d_model), weights (B, n_heads,
    T_q, T_k))``. The mask is the course's: boolean, True where a query may
    attend to a key, broadcast against ``(B, n_heads, T_q, T_k)`` as
    F.scaled_dot_product_attention broadcasts its ``attn_mask``: ``(T_q, T_k)``
    for a causal mask, ``(B, 1, 1, T_k)`` for key padding. nn.MultiheadAttention
    says the opposite (True in ``attn_mask`` or ``key_padding_mask`` means
    "may not attend"); the conversion happens here and nowhere else.

    A row with no key to attend to gives NaN weights and outputs, as
    nn.MultiheadAttention does (F.scaled_dot_product_attention gives zeros
    there instead): a check feeds one only where the assignment defines it.
    """

    def forward(self, query, key, value, mask=None):
        B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
        blocked = None
        if mask is not None:
            if mask.dtype != torch.bool:
                raise TypeError(f"the mask must be boolean (True = may attend), not {mask.dtype}")
            # PyTorch's 3-d attn_mask is one (T_q, T_k) matrix per (sequence, head), sequence-major,
            # and True there means "may not attend"
            mask = torch.broadcast_to(mask, (B, self.n_heads, T_q, T_k))
            blocked = ~mask.reshape(B * self.n_heads, T_q, T_k)
        # A layer on the "meta" device holds no numbers: only its forward is used, with our weights.
        layer = nn.MultiheadAttention(self.d_model, self.n_heads, batch_first=True, device="meta")
        layer.train(self.training)
        return functional_call(layer, self.nn_multihead_state(), (query, key, value),
                               {"attn_mask": blocked, "need_weights": True, "average_attn_weights": False})


# the namespace a check passes as `trusted=` (``trusted_cls="TorchMultiHeadAttention"``)
ATTENTION = types.SimpleNamespace(TorchMultiHeadAttention=TorchMultiHeadAttention)


def _blocked(mask, B: int, n_heads: int, T_q: int, T_k: int):
    """The course's mask (True = may attend, broadcast to (B, h, T_q, T_k)) as PyTorch's 3-d attn_mask:
    one (T_q, T_k) matrix per (sequence, head), sequence-major, True = may *not* attend."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise TypeError(f"the mask must be boolean (True = may attend), not {mask.dtype}")
    return ~torch.broadcast_to(mask, (B, n_heads, T_q, T_k)).reshape(B * n_heads, T_q, T_k)


class _Projections(nn.Module):
    """Parameters only: a course MultiHeadAttention's q_proj, k_proj, v_proj, out_proj."""

    def __init__(self, d_model: int):
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(d_model, d_model))


class _FeedForward(nn.Module):
    """Parameters only: the course's FeedForward, ff1 (d_model -> d_ff) and ff2 (d_ff -> d_model)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)


class TorchEncoderBlock(nn.Module):
    """nn.TransformerEncoderLayer as `EncoderBlock(d_model, n_heads, d_ff, norm_first=False)`, in the course's terms.

    Parameters with the course's names: ``attn.{q,k,v,out}_proj``, ``ln1``, ``ff.ff1``, ``ff.ff2``, ``ln2``
    (PyTorch's ``self_attn`` (q, k, v stacked in ``in_proj_weight``), ``norm1``, ``linear1``, ``linear2``,
    ``norm2``). The forward runs nn.TransformerEncoderLayer's own forward with these weights
    (``functional_call`` on a layer on the "meta" device: ReLU, no dropout, ``batch_first``, LayerNorm ε
    1e-5), so the computation, post-norm or pre-norm, is PyTorch's. ``forward(x (B, T, d_model), mask=None)``
    with the course's mask (True = may attend, broadcast to ``(B, n_heads, T, T)``, e.g. ``(B, 1, 1, T)`` for
    padding).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, norm_first: bool = False):
        super().__init__()
        self.d_model, self.n_heads, self.d_ff, self.norm_first = d_model, n_heads, d_ff, norm_first
        self.attn = _Projections(d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.ff = _FeedForward(d_model, d_ff)
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        B, T = x.shape[0], x.shape[1]
        layer = nn.TransformerEncoderLayer(self.d_model, self.n_heads, self.d_ff, dropout=0.0, batch_first=True,
                                           norm_first=self.norm_first, device="meta")
        layer.train(self.training)
        p = dict(self.named_parameters())
        weights = {**as_nn_multihead(p, "attn", "self_attn"),
                   "linear1.weight": p["ff.ff1.weight"], "linear1.bias": p["ff.ff1.bias"],
                   "linear2.weight": p["ff.ff2.weight"], "linear2.bias": p["ff.ff2.bias"],
                   "norm1.weight": p["ln1.weight"], "norm1.bias": p["ln1.bias"],
                   "norm2.weight": p["ln2.weight"], "norm2.bias": p["ln2.bias"]}
        return functional_call(layer, weights, (x,), {"src_mask": _blocked(mask, B, self.n_heads, T, T)})


class TorchDecoderBlock(nn.Module):
    """nn.TransformerDecoderLayer as `DecoderBlock(d_model, n_heads, d_ff, norm_first=False)`, in the course's terms.

    Parameters: ``self_attn``, ``ln1``, ``cross_attn``, ``ln2``, ``ff.ff1``, ``ff.ff2``, ``ln3`` (PyTorch's
    ``self_attn``, ``norm1``, ``multihead_attn``, ``norm2``, ``linear1``, ``linear2``, ``norm3``).
    ``forward(y (B, T, d_model), memory (B, S, d_model), self_mask=None, memory_mask=None)``: masked
    self-attention over ``y`` with ``self_mask`` (``(T, T)`` causal, say), then cross-attention from ``y`` to
    ``memory`` with ``memory_mask`` (``(B, 1, 1, S)`` for the source's padding), then the feed-forward
    sublayer; masks in the course's convention, converted here. PyTorch's own forward, as above.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, norm_first: bool = False):
        super().__init__()
        self.d_model, self.n_heads, self.d_ff, self.norm_first = d_model, n_heads, d_ff, norm_first
        self.self_attn = _Projections(d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.cross_attn = _Projections(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = _FeedForward(d_model, d_ff)
        self.ln3 = nn.LayerNorm(d_model)

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        B, T, S = y.shape[0], y.shape[1], memory.shape[1]
        layer = nn.TransformerDecoderLayer(self.d_model, self.n_heads, self.d_ff, dropout=0.0, batch_first=True,
                                           norm_first=self.norm_first, device="meta")
        layer.train(self.training)
        p = dict(self.named_parameters())
        weights = {**as_nn_multihead(p, "self_attn", "self_attn"),
                   **as_nn_multihead(p, "cross_attn", "multihead_attn"),
                   "linear1.weight": p["ff.ff1.weight"], "linear1.bias": p["ff.ff1.bias"],
                   "linear2.weight": p["ff.ff2.weight"], "linear2.bias": p["ff.ff2.bias"],
                   **{f"norm{i}.{w}": p[f"ln{i}.{w}"] for i in (1, 2, 3) for w in ("weight", "bias")}}
        return functional_call(layer, weights, (y, memory),
                               {"tgt_mask": _blocked(self_mask, B, self.n_heads, T, T),
                                "memory_mask": _blocked(memory_mask, B, self.n_heads, T, S)})


class TorchLayerNorm(nn.LayerNorm):
    """nn.LayerNorm as `LayerNorm(d, eps=1e-5)`: the same parameter names (weight, bias)."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__(d, eps=eps)


# the namespace a check passes as `trusted=` (``trusted_cls="TorchEncoderBlock"``)
TRANSFORMER = types.SimpleNamespace(TorchEncoderBlock=TorchEncoderBlock, TorchDecoderBlock=TorchDecoderBlock,
                                    TorchLayerNorm=TorchLayerNorm)
