"""What the checks of 03-rnnlm share: PyTorch's recurrent layers behind the assignment's interfaces
(`lmcourse.grading.layers`) and the comparison of a student's module against a trusted one with the
same weights (`lmcourse.grading.compare`), with this assignment's conventions: a fused layer's
parameter names mapped to the assignment's (`as_ours`), and PyTorch's built-in recurrent layers
refused on the student's side (the assignment's rule).
"""

from __future__ import annotations

import functools

import pytest

from lmcourse.grading.compare import compare_modules, random_weights, run_both
from lmcourse.grading.layers import RECURRENT, as_ours

RULES = dict(rename=as_ours, no_builtin_rnn=True)


@pytest.fixture
def torch_layers():
    """PyTorch's recurrent layers behind the assignment's interfaces (a namespace for `compare`)."""
    return RECURRENT


@pytest.fixture
def compare():
    """`compare(student, cls=..., trusted=..., trusted_cls=..., ...)`: `compare_modules` with this
    assignment's rules."""
    return functools.partial(compare_modules, **RULES)


@pytest.fixture
def both():
    """`both(student, cls=..., trusted=..., ...)`: the two raw results (`run_both`, this assignment's rules)."""
    return functools.partial(run_both, **RULES)


@pytest.fixture
def weights():
    """`weights(trusted, cls, init_kwargs, seed, scale)`: see `random_weights`."""
    return random_weights
