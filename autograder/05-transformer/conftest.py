"""What the checks of 05-transformer share: PyTorch's transformer layers behind the assignment's
interfaces (`lmcourse.grading.layers.TRANSFORMER`: nn.LayerNorm, nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer with the course's parameter names and mask convention), weights for them, and
this assignment's rule: PyTorch's normalisation and transformer layers are refused on the student's side
(``no_builtin_transformer``). Attention itself stays allowed: the given MultiHeadAttention
(`lmcourse.transformer`) runs F.scaled_dot_product_attention.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmcourse.grading.compare import comparison_fixtures
from lmcourse.grading.layers import TRANSFORMER

RULES = dict(no_builtin_transformer=True)


def _block_weights(cls, init_kwargs: dict, rng, scale: float = 1.5) -> dict:
    """{name: float32 array}: a freshly initialised `cls` (a trusted block, or the reference's Transformer)
    with its linear weights times `scale` and every LayerNorm's gamma and beta drawn at random (ones and
    zeros at initialisation would hide a LayerNorm applied in the wrong place or a swapped pair)."""
    torch.manual_seed(int(rng.integers(1 << 30)))
    module = cls(**init_kwargs)
    out = {}
    for name, value in module.state_dict().items():
        value = value.double().numpy()
        owner = name.split(".")[-2] if "." in name else ""  # the submodule holding it: ln1, enc_ln, ...
        if owner.startswith("ln") or owner in ("enc_ln", "dec_ln"):
            value = (1.0 if name.endswith("weight") else 0.0) + 0.5 * rng.normal(size=value.shape)
        else:
            value = scale * value
        out[name] = value.astype(np.float32)
    return out


@pytest.fixture
def block_weights():
    """`block_weights(cls, init_kwargs, rng, scale=1.5)`: see `_block_weights`."""
    return _block_weights


@pytest.fixture
def trusted():
    return TRANSFORMER


rules, compare, both, weights = comparison_fixtures(RULES)
