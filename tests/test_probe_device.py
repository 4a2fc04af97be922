"""The probe that runs a student's module on a device other than the CPU, on a machine without a GPU
(`forward_on_other_device` in lmcourse.grading.sandbox.inside.probes), and the check helper that reads it
(`lmcourse.grading.compare.expect_on_other_device`), run in this process: a tensor made without a device is
caught, a correct module runs (indexing, writing into a preallocated tensor, embeddings, PyTorch's own
recurrent layers), an error on the CPU stays the student's, and what fake tensors cannot run is reported as
inconclusive, never as the student's mistake.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading.compare import expect_on_other_device
from lmcourse.grading.sandbox.inside import probes


class Layer(nn.Module):
    """A recurrent layer written as students write it; `zeros` says how the zero state is made."""

    def __init__(self, d_in=4, d_hidden=5, zeros="new_zeros"):
        super().__init__()
        self.d_hidden, self.zeros = d_hidden, zeros
        self.weight_ih = nn.Parameter(torch.randn(d_hidden, d_in))
        self.weight_hh = nn.Parameter(torch.randn(d_hidden, d_hidden))
        self.bias = nn.Parameter(torch.zeros(d_hidden))

    def start(self, x):
        B = x.shape[0]
        if self.zeros == "new_zeros":
            return x.new_zeros(B, self.d_hidden)
        if self.zeros == "device":
            return torch.zeros(B, self.d_hidden, device=x.device, dtype=x.dtype)
        if self.zeros == "dtype only":  # the bug: on the CPU whatever the input's device
            return torch.zeros(B, self.d_hidden, dtype=x.dtype)
        raise ValueError(self.zeros)

    def forward(self, x, h=None):
        B, T, _ = x.shape
        if h is None:
            h = self.start(x)
        outputs = x.new_empty(B, T, self.d_hidden)  # written into in place, step by step
        for t in range(T):
            h = torch.tanh(x[:, t] @ self.weight_ih.T + h @ self.weight_hh.T + self.bias)
            outputs[:, t] = h
        return outputs, h


class KeepsATensor(Layer):
    """A tensor kept as a plain attribute: .to(device) does not move it."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.scale = torch.ones(self.d_hidden)

    def forward(self, x, h=None):
        outputs, h = super().forward(x, h)
        return outputs * self.scale, h


class BackToTheCPU(Layer):
    def forward(self, x, h=None):
        outputs, h = super().forward(x, h)
        return outputs.cpu(), h


class ReadsAValue(Layer):
    """.item() needs a value: fake tensors have none."""

    def forward(self, x, h=None):
        if float(x.abs().max()) > 1e6:
            raise ValueError("inputs too large")
        return super().forward(x, h)


class Fails(Layer):
    def forward(self, x, h=None):
        raise ValueError("the student's own mistake")


class WantsGradients(Layer):
    """Turns gradients back on and makes a tensor that requires them (a fake CUDA tensor would abort here)."""

    def forward(self, x, h=None):
        with torch.enable_grad():
            w = self.weight_hh.detach().clone().requires_grad_(True)
            outputs, h = super().forward(x, h)
            return outputs @ w, h


class LanguageModel(nn.Module):
    def __init__(self, vocab=7, d=5, rnn="torch lstm"):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, batch_first=True) if rnn == "torch lstm" else Layer(d, d)
        self.output = nn.Linear(d, vocab)

    def forward(self, ids, state=None):
        hidden, state = self.rnn(self.embedding(ids), state)
        return self.output(hidden), state


MODULE = types.SimpleNamespace(Layer=Layer, KeepsATensor=KeepsATensor, BackToTheCPU=BackToTheCPU,
                               ReadsAValue=ReadsAValue, Fails=Fails, WantsGradients=WantsGradients,
                               LanguageModel=LanguageModel)
X = np.random.default_rng(0).normal(size=(3, 6, 4)).astype(np.float32)
H = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)


def run(cls, inputs=(X, None), **kw):
    return probes.run_local("forward_on_other_device", MODULE, cls=cls, inputs=list(inputs), **kw)


class Student:
    """The `student` fixture's probe, run here."""

    def probe(self, name, **kwargs):
        return probes.run_local(name, MODULE, **kwargs)


@pytest.mark.parametrize("zeros", ["new_zeros", "device"])
def test_a_module_that_makes_its_tensors_on_the_inputs_device_runs_there(zeros):
    for start in (None, H):
        out = run("Layer", (X, start), init_kwargs={"zeros": zeros})
        assert out["ran"] and out["mismatch"] is None and out["inconclusive"] is None
        assert out["outputs"] == [{"device": "meta", "dtype": "float32", "shape": [3, 6, 5]},
                                  {"device": "meta", "dtype": "float32", "shape": [3, 5]}]
        assert out["cpu"] == [dict(o, device="cpu") for o in out["outputs"]]
    expect_on_other_device(Student(), cls="Layer", init_kwargs={"zeros": zeros}, inputs=[X, None], what="Layer")
    assert not isinstance(torch.zeros(2), torch._subclasses.fake_tensor.FakeTensor)  # the fake mode is over


def test_a_zero_state_made_without_a_device_is_caught():
    out = run("Layer", init_kwargs={"zeros": "dtype only"})
    assert not out["ran"] and "same device" in out["mismatch"] and "cpu" in out["mismatch"]
    assert run("Layer", (X, H), init_kwargs={"zeros": "dtype only"})["ran"]  # a given state: nothing made
    with pytest.raises(AssertionError, match=r"x\.new_zeros\(\.\.\.\), or torch\.zeros\(\.\.\., device=x\.device"):
        expect_on_other_device(Student(), cls="Layer", init_kwargs={"zeros": "dtype only"}, inputs=[X, None],
                               what="Layer")


def test_a_tensor_kept_outside_the_parameters_and_an_output_sent_back_to_the_cpu_are_caught():
    assert "same device" in run("KeepsATensor")["mismatch"]
    out = run("BackToTheCPU")
    assert out["ran"] and out["outputs"][0]["device"] == "cpu"
    with pytest.raises(AssertionError, match="output tensor 1 of 2 came back on cpu"):
        expect_on_other_device(Student(), cls="BackToTheCPU", inputs=[X, None], what="BackToTheCPU")


def test_what_fake_tensors_cannot_run_is_inconclusive_and_costs_nothing():
    out = run("ReadsAValue")
    assert not out["ran"] and out["mismatch"] is None and "DataDependent" in out["inconclusive"]
    expect_on_other_device(Student(), cls="ReadsAValue", inputs=[X, None], what="ReadsAValue")  # passes


def test_an_error_on_the_cpu_is_the_students():
    with pytest.raises(ValueError, match="the student's own mistake"):
        run("Fails")


def test_gradients_turned_back_on_do_not_abort_the_process():
    assert run("WantsGradients")["ran"]
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("rnn", ["torch lstm", "own"])
def test_a_language_model_with_embeddings_and_a_recurrent_layer_runs(rnn):
    """nn.LSTM's parameters cannot be swapped by Module._apply; the probe replaces them in place."""
    ids = np.random.default_rng(2).integers(0, 7, size=(3, 4))
    out = run("LanguageModel", (ids, None), init_kwargs={"rnn": rnn})
    assert out["ran"], out
    assert out["outputs"][0] == {"device": "meta", "dtype": "float32", "shape": [3, 4, 7]}


def test_the_refusal_of_builtin_recurrent_layers_still_applies():
    ids = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(probes.BuiltinRNNUsed):
        run("LanguageModel", (ids, None), no_builtin_rnn=True)
