"""What the checks of 05-transformer share: PyTorch's transformer layers behind the assignment's
interfaces (`lmcourse.grading.layers.TRANSFORMER`: nn.LayerNorm, nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer with the course's parameter names and mask convention), weights for them, and
this assignment's rule: PyTorch's normalisation and transformer layers are refused on the student's side
(``no_builtin_transformer``). Attention itself stays allowed: the given MultiHeadAttention
(`lmcourse.transformer`) runs F.scaled_dot_product_attention.
"""

from __future__ import annotations

import pytest

from lmcourse.grading.compare import block_weights as compare_block_weights, comparison_fixtures
from lmcourse.grading.layers import TRANSFORMER

RULES = dict(no_builtin_transformer=True)


@pytest.fixture
def block_weights():
    """`block_weights(cls, init_kwargs, rng, scale=1.5)`: `lmcourse.grading.compare.block_weights`."""
    return compare_block_weights


@pytest.fixture
def trusted():
    return TRANSFORMER


rules, compare, both, weights = comparison_fixtures(RULES)
