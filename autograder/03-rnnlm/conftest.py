"""What the checks of 03-rnnlm share: PyTorch's own layers behind the assignment's interfaces,
and one comparison of a student's module against a trusted one with the same weights.

The trusted side runs `lmcourse.grading.probes.module_forward` locally on a
trusted module (PyTorch's `nn.RNNCell`, `nn.LSTMCell`, `nn.RNN`, `nn.LSTM`,
or the reference solution's classes); the student's side runs the same probe
in the worker on the student's class, with the same weights, inputs and
output gradients. Outputs, input gradients and parameter gradients must agree.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading import probes
from lmcourse.grading.checks import expect_close


# --------------------------------------------------------------------------- PyTorch behind our interfaces

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


TORCH = types.SimpleNamespace(TorchElmanCell=TorchElmanCell, TorchLSTMCell=TorchLSTMCell,
                              TorchElmanRNN=TorchElmanRNN, TorchLSTM=TorchLSTM)


def as_ours(name: str) -> str:
    """A PyTorch layer's parameter name as the assignment's: rnn.weight_ih_l0 -> cell.weight_ih."""
    return "cell." + name[len("rnn."):-len("_l0")] if name.startswith("rnn.") else name


# --------------------------------------------------------------------------- comparison

def flat(value) -> list:
    """Arrays (or None) of a nested tuple/list structure, in order (the wire turns tuples into lists)."""
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(flat(v))
        return out
    return [value]


def random_weights(trusted, cls: str, init_kwargs: dict, seed: int, scale: float = 1.0) -> dict:
    """{name: float32 array}: a freshly initialised `trusted.<cls>`'s weights, times `scale`."""
    torch.manual_seed(seed)
    module = getattr(trusted, cls)(**init_kwargs)
    return {k: (scale * v).numpy().astype(np.float32) for k, v in module.state_dict().items()}


def run_both(student, *, cls: str, trusted, trusted_cls: str, init_kwargs: dict, weights: dict, inputs: list,
             rename=as_ours, grad: bool = True, seed: int = 0) -> tuple[dict, dict]:
    """(student's, trusted) `module_forward` results with the same weights, inputs and output gradients.

    The student's side runs with PyTorch's built-in recurrent layers refused (the assignment's rule).
    """
    expected = probes.run_local("module_forward", trusted, cls=trusted_cls, init_kwargs=init_kwargs,
                                state_dict=weights, inputs=inputs, grad=grad, seed=seed)
    found = student.probe("module_forward", cls=cls, init_kwargs=init_kwargs,
                          state_dict={rename(k): v for k, v in weights.items()}, inputs=inputs, grad=grad, seed=seed,
                          no_builtin_rnn=True)
    if not isinstance(found, dict) or not isinstance(found.get("outputs"), list):
        raise AssertionError(f"{cls}: the grader could not read your module's outputs")
    return found, expected


def compare_modules(student, *, cls: str, trusted, trusted_cls: str, init_kwargs: dict, weights: dict,
                    inputs: list, what: str, rename=as_ours, grad: bool = True, seed: int = 0,
                    rtol: float = 1e-4, atol: float = 1e-5) -> dict:
    """Run the student's `cls` and `trusted.<trusted_cls>` with the same weights on the same inputs.

    `weights` are in the trusted module's names; the student's module gets them
    under `rename(name)`. Fails with a message naming the first output or
    gradient that differs. Returns the student's probe result.
    """
    found, expected = run_both(student, cls=cls, trusted=trusted, trusted_cls=trusted_cls, init_kwargs=init_kwargs,
                               weights=weights, inputs=inputs, rename=rename, grad=grad, seed=seed)
    outs, ref_outs = found["outputs"], expected["outputs"]
    if len(outs) != len(ref_outs):
        raise AssertionError(f"{what}: expected {len(ref_outs)} output tensor(s) "
                             f"(shapes {[tuple(o.shape) for o in ref_outs]}), found {len(outs)}")
    for i, (o, r) in enumerate(zip(outs, ref_outs)):
        expect_close(o, r, what=f"{what}: output tensor {i + 1} of {len(ref_outs)} (shape {tuple(r.shape)})",
                     rtol=rtol, atol=atol)
    if not grad:
        return found
    ins, ref_ins = flat(found["input_grads"]), flat(expected["input_grads"])
    for i, r in enumerate(ref_ins):
        if r is None:
            continue
        g = ins[i] if i < len(ins) else None
        if g is None:
            raise AssertionError(f"{what}: no gradient reached input {i + 1} (shape {tuple(r.shape)}); the "
                                 "outputs must depend on it through torch operations")
        expect_close(g, r, what=f"{what}: gradient with respect to input {i + 1} (shape {tuple(r.shape)})",
                     rtol=rtol, atol=atol)
    params = found["param_grads"]
    for name, r in expected["param_grads"].items():
        ours = rename(name)
        g = params.get(ours)
        if r is not None and g is None:
            raise AssertionError(f"{what}: no gradient reached the parameter {ours}")
        if r is not None:
            expect_close(g, r, what=f"{what}: gradient of {ours} (shape {tuple(r.shape)})", rtol=rtol, atol=atol)
    return found


@pytest.fixture
def torch_layers():
    """PyTorch's recurrent layers behind the assignment's interfaces (a namespace for `compare`)."""
    return TORCH


@pytest.fixture
def compare():
    """`compare(student, cls=..., trusted=..., trusted_cls=..., ...)`: see `compare_modules`."""
    return compare_modules


@pytest.fixture
def both():
    """`both(student, cls=..., trusted=..., ...)`: the two raw results (see `run_both`)."""
    return run_both


@pytest.fixture
def weights():
    """`weights(trusted, cls, init_kwargs, seed, scale)`: see `random_weights`."""
    return random_weights
