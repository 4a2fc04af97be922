"""What the checks of 04-attention share: PyTorch's attention behind the assignment's interfaces, and
the comparison of a student's module against a trusted one with the same weights
(`lmcourse.grading.compare`), with this assignment's rule: PyTorch's built-in attention is refused on the
student's side (``no_builtin_attention``; ``nn.GRU`` stays allowed for Part 4's decoder).

The trusted side is PyTorch's own code, never a second hand-written attention:

- ``TRUSTED.AttentionFunction`` is ``F.scaled_dot_product_attention``. It returns no weights, so the
  weights come from the same function applied to identity values: with ``v = I`` (``T_k x T_k``) the
  output *is* the weight matrix. A fully masked row gives zeros there, the course's definition.
- ``TRUSTED.MultiHeadAttention`` is `lmcourse.grading.layers.TorchMultiHeadAttention`
  (``nn.MultiheadAttention``'s own forward with the course's parameter names and mask) behind the
  assignment's ``forward(x, kv=None, mask=None)``.
"""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lmcourse.grading.compare import comparison_fixtures
from lmcourse.grading.layers import TorchMultiHeadAttention

RULES = dict(no_builtin_attention=True)


class TorchAttentionFunction(nn.Module):
    """F.scaled_dot_product_attention as the assignment's ``AttentionFunction``: (outputs, weights)."""

    def forward(self, q, k, v, mask=None):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (..., T_q, d_v)
        T_k = k.shape[-2]
        eye = torch.eye(T_k, dtype=q.dtype).expand(*k.shape[:-1], T_k)  # (..., T_k, T_k): identity values
        weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)  # (..., T_q, T_k)
        return out, weights


class TorchAssignmentMHA(TorchMultiHeadAttention):
    """nn.MultiheadAttention as the assignment's ``MultiHeadAttention(d_model, n_heads)``:
    ``forward(x, kv=None, mask=None)``, self-attention when kv is None."""

    def forward(self, x, kv=None, mask=None):
        memory = x if kv is None else kv  # (B, T_k, d_model)
        return super().forward(x, memory, memory, mask)


# the namespace a check passes as `trusted=`
TRUSTED = types.SimpleNamespace(AttentionFunction=TorchAttentionFunction, MultiHeadAttention=TorchAssignmentMHA)


@pytest.fixture
def trusted():
    return TRUSTED


rules, compare, both, weights = comparison_fixtures(RULES)
