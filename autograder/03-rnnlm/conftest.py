"""What the checks of 03-rnnlm share: PyTorch's recurrent layers behind the assignment's interfaces
(`lmcourse.grading.layers`) and the comparison of a student's module against a trusted one with the
same weights (`lmcourse.grading.compare`), with this assignment's conventions: a fused layer's
parameter names mapped to the assignment's (`as_ours`), and PyTorch's built-in recurrent layers
refused on the student's side (the assignment's rule).
"""

from __future__ import annotations

import pytest

from lmcourse.grading.compare import comparison_fixtures
from lmcourse.grading.layers import RECURRENT, as_ours

RULES = dict(rename=as_ours, no_builtin_rnn=True)


@pytest.fixture
def torch_layers():
    """PyTorch's recurrent layers behind the assignment's interfaces (a namespace for `compare`)."""
    return RECURRENT


rules, compare, both, weights = comparison_fixtures(RULES)
