"""lmcourse.grading.compare and .layers: the module comparison every model unit's checks use.

Run in this process (the probe on both sides, no sandbox): a module that
computes the same function passes, and each way of being wrong is named.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading.sandbox.inside import probes
from lmcourse.grading.compare import compare_modules, flat, random_weights
from lmcourse.grading.layers import RECURRENT, as_ours


class _Local:
    def __init__(self, module):
        self.module = module

    def probe(self, name, *, timeout=None, **kwargs):
        kwargs.pop("no_builtin_rnn", None)
        return probes.run_local(name, self.module, **kwargs)


class Linear(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class Scaled(Linear):  # one output off by a factor
    def forward(self, x):
        return 1.01 * torch.tanh(self.proj(x))


class Detached(Linear):  # right values, no gradient reaches the input
    def forward(self, x):
        return torch.tanh(self.proj(x.detach()))


class FrozenBias(Linear):  # right values, no gradient reaches a parameter
    def forward(self, x):
        return torch.tanh(x @ self.proj.weight.T + self.proj.bias.detach())


class FixedState(Linear):  # adds a state made with torch.zeros: float32 on the CPU, whatever the input is
    def forward(self, x, h=None):
        h = torch.zeros(x.shape[0], self.proj.out_features) if h is None else h
        return torch.tanh(self.proj(x) + h @ self.proj.weight.T)


class FollowsInput(Linear):  # the same function, its state made in the input's dtype and device
    def forward(self, x, h=None):
        h = x.new_zeros(x.shape[0], self.proj.out_features) if h is None else h
        return torch.tanh(self.proj(x) + h @ self.proj.weight.T)


class ComputesInFloat32(Linear):  # right to float32 precision, whatever the dtype: cast back at the end
    def forward(self, x):
        return torch.tanh(nn.functional.linear(x.float(), self.proj.weight.float(), self.proj.bias.float())).to(x.dtype)


class ReturnsFloat32(Linear):
    def forward(self, x):
        return torch.tanh(self.proj(x)).float()


def _compare(cls, trusted_cls=Linear, **options):
    trusted = types.SimpleNamespace(Linear=trusted_cls)
    student = _Local(types.SimpleNamespace(Linear=cls))
    w = random_weights(trusted, "Linear", {"d": 4}, seed=0, scale=2.0)
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    return compare_modules(student, cls="Linear", trusted=trusted, trusted_cls="Linear", init_kwargs={"d": 4},
                           weights=w, inputs=[x], what="Linear(4) on x (3, 4)", **options)


def test_the_same_function_passes():
    found = _compare(Linear)
    assert found["outputs"][0].shape == (3, 4)


@pytest.mark.parametrize("cls,message", [
    (Scaled, "output tensor 1 of 1"),
    (Detached, "no gradient reached input 1"),
    (FrozenBias, "no gradient reached the parameter proj.bias"),
])
def test_each_way_of_being_wrong_is_named(cls, message):
    with pytest.raises(AssertionError, match=message):
        _compare(cls)


def test_float64_runs_both_sides_in_float64():
    """`dtype` reaches the trusted side too: both modules and the inputs are float64, and so are the results."""
    seen = []

    class Spy(Linear):
        def forward(self, x):
            seen.append((x.dtype, self.proj.weight.dtype))
            return super().forward(x)

    found = _compare(Linear, trusted_cls=Spy, dtype="float64")
    assert seen == [(torch.float64, torch.float64)]  # the trusted side ran in float64
    assert found["outputs"][0].dtype == np.float64 and found["param_grads"]["proj.weight"].dtype == np.float64
    _compare(FollowsInput, trusted_cls=FollowsInput, dtype="float64")
    assert _compare(Linear)["outputs"][0].dtype == np.float32  # without it: float32, as before


@pytest.mark.parametrize("cls,message", [
    (FixedState, "same dtype"),  # torch's own error, raised by the student's side
    (ReturnsFloat32, "output tensor 1 of 1 is float32; the module's weights and inputs are float64"),
    (ComputesInFloat32, "output tensor 1 of 1"),  # float32 precision against float64's tolerance
])
def test_float64_exposes_a_hard_coded_dtype(cls, message):
    _compare(cls, trusted_cls=FollowsInput if cls is FixedState else Linear)  # float32: every one passes
    with pytest.raises((AssertionError, RuntimeError), match=message):
        _compare(cls, trusted_cls=FollowsInput if cls is FixedState else Linear, dtype="float64")


def test_an_unknown_dtype_is_a_usage_error():
    with pytest.raises(ValueError, match="no tolerances"):
        _compare(Linear, dtype="float16")


def test_the_recurrent_adapters_match_the_assignments_shapes_and_names():
    lstm = RECURRENT.TorchLSTM(3, 5)
    out, (h, c) = lstm(torch.randn(2, 7, 3), (torch.zeros(2, 5), torch.zeros(2, 5)))
    assert out.shape == (2, 7, 5) and h.shape == c.shape == (2, 5)
    assert {as_ours(k) for k in lstm.state_dict()} == {"cell.weight_ih", "cell.weight_hh", "cell.bias_ih",
                                                      "cell.bias_hh"}
    assert flat([1, (2, [3, None])]) == [1, 2, 3, None]
