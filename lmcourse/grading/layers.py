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

__all__ = ["ATTENTION", "RECURRENT", "TorchElmanCell", "TorchElmanRNN", "TorchLSTM", "TorchLSTMCell",
           "TorchMultiHeadAttention", "as_ours"]


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


class TorchMultiHeadAttention(nn.Module):
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

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        self.d_model, self.n_heads = d_model, n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

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
        weights = {
            "in_proj_weight": torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]),
            "in_proj_bias": torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            "out_proj.weight": self.out_proj.weight,
            "out_proj.bias": self.out_proj.bias,
        }
        return functional_call(layer, weights, (query, key, value),
                               {"attn_mask": blocked, "need_weights": True, "average_attn_weights": False})


# the namespace a check passes as `trusted=` (``trusted_cls="TorchMultiHeadAttention"``)
ATTENTION = types.SimpleNamespace(TorchMultiHeadAttention=TorchMultiHeadAttention)
