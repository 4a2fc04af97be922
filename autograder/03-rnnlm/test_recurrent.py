"""Checks for Parts 3 and 4: the Elman and LSTM cells and layers against PyTorch's, with the same weights.

The weights are PyTorch's initialisation times 2, so that the gates and the
tanh work away from their linear middle, where a missing non-linearity or a
swapped gate shows.

Each cell and layer also runs in float64, on both sides (`compare_modules`'
``dtype``, tolerances 1e-9): a zero state made with a fixed dtype or device
(``torch.zeros(B, d)`` is float32 on the CPU) passes every float32 check on a
CPU and fails where the grader trains on a GPU; in float64 it fails on any
machine, and so does a layer that computes in float32 inside.

Float64 does not show a state made with the input's dtype but no device
(``torch.zeros(B, d, dtype=x.dtype)``: on the CPU whatever the input's
device). The same checks therefore also run the student's cell and layer (from
a given state and from None) with parameters and inputs on a device other
than the CPU (`expect_on_other_device`: fake tensors on PyTorch's "meta"
device, no number computed), where such a tensor fails as on a GPU
("Expected all tensors to be on the same device, but found at least two
devices, cpu and meta!"); so does a tensor kept outside the parameters, and
an output sent back to the CPU fails too. The solution, the alternates
(``torch.zeros(..., device=x.device, dtype=x.dtype)``, states written into a
preallocated ``x.new_empty``) and PyTorch's own layers run there; the
known-wrong variants with the Elman or the LSTM state made without a device
fail. What fake tensors cannot run (``.item()`` on a value, say) makes the
probe inconclusive, and the check passes: a limit of the grader never costs
a point. Cost: the first fake run of a grade takes about 1.2 s in the worker
(PyTorch's fake-tensor machinery imports torch._dynamo once), each run after
it 0.01-0.05 s.
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape
from lmcourse.grading.compare import expect_on_other_device

SCALE = 2.0
SHAPES = [(4, 3, 5), (1, 6, 2), (3, 1, 7)]  # (B, d_in, d_hidden)


def _normal(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


def _kw(d_in, d):
    return {"d_in": d_in, "d_hidden": d}


# --------------------------------------------------------------------------- Elman

@check(points=2, cell="test_elman", name="ElmanCell: the next state and its gradients match nn.RNNCell with the same weights",
       visibility="visible")
def test_elman_cell(student, rng, compare, weights, torch_layers):
    _cells(student, rng, compare, weights, torch_layers, cls="ElmanCell", trusted_cls="TorchElmanCell",
           state=lambda B, d: _normal(rng, B, d), what="h")


@check(points=2, cell="test_elman", name="ElmanRNN: outputs, last state and gradients match nn.RNN (batch_first) with the same weights")
def test_elman_layer(student, rng, compare, weights, torch_layers):
    _layers(student, rng, compare, weights, torch_layers, cls="ElmanRNN", trusted_cls="TorchElmanRNN",
            state=lambda B, d: _normal(rng, B, d), what="h")


@check(points=1, cell="test_elman", name="ElmanRNN: the state carries from each time step to the next")
def test_elman_carries_state(student, rng, both, weights, torch_layers):
    _carry(student, rng, both, weights, torch_layers, cls="ElmanRNN", trusted_cls="TorchElmanRNN",
           state=lambda B, d: _normal(rng, B, d), what="the state h")


@check(points=1, cell="test_elman", name="ElmanCell and ElmanRNN follow the input's dtype and device: the same "
                                        "results in float64, and they run on a device other than the CPU, from "
                                        "a given state and from None")
def test_elman_float64(student, rng, compare, weights, torch_layers):
    _float64(student, rng, compare, weights, torch_layers, cell=("ElmanCell", "TorchElmanCell"),
             layer=("ElmanRNN", "TorchElmanRNN"), state=lambda B, d: _normal(rng, B, d), what="h")


# --------------------------------------------------------------------------- LSTM

@check(points=3, cell="test_lstm", name="LSTMCell: (h, c) and their gradients match nn.LSTMCell with the same weights",
       visibility="visible")
def test_lstm_cell(student, rng, compare, weights, torch_layers):
    _cells(student, rng, compare, weights, torch_layers, cls="LSTMCell", trusted_cls="TorchLSTMCell",
           state=lambda B, d: (_normal(rng, B, d), _normal(rng, B, d)), what="state (h, c)")


@check(points=2, cell="test_lstm", name="LSTM: outputs, (h_T, c_T) and gradients match nn.LSTM (batch_first) with the same weights")
def test_lstm_layer(student, rng, compare, weights, torch_layers):
    _layers(student, rng, compare, weights, torch_layers, cls="LSTM", trusted_cls="TorchLSTM",
            state=lambda B, d: (_normal(rng, B, d), _normal(rng, B, d)), what="state (h, c)")


@check(points=1, cell="test_lstm", name="LSTM: the state (h, c), cell state included, carries from each time step to the next")
def test_lstm_carries_state(student, rng, both, weights, torch_layers):
    _carry(student, rng, both, weights, torch_layers, cls="LSTM", trusted_cls="TorchLSTM",
           state=lambda B, d: (_normal(rng, B, d), _normal(rng, B, d)), what="the state (h, c)")


@check(points=1, cell="test_lstm", name="LSTMCell and LSTM follow the input's dtype and device: the same "
                                       "results in float64, and they run on a device other than the CPU, from "
                                       "a given state and from None")
def test_lstm_float64(student, rng, compare, weights, torch_layers):
    _float64(student, rng, compare, weights, torch_layers, cell=("LSTMCell", "TorchLSTMCell"),
             layer=("LSTM", "TorchLSTM"), state=lambda B, d: (_normal(rng, B, d), _normal(rng, B, d)),
             what="state (h, c)")


def _float64(student, rng, compare, weights, torch_layers, *, cell, layer, state, what):
    """The cell, then the layer from a given state and from None, with both sides in float64; then the
    student's cell and layer (the same starts) on another device (`expect_on_other_device`)."""
    B, d_in, d, T = 3, 4, 5, 6
    (cls, trusted_cls), kw = cell, _kw(d_in, d)
    w = weights(torch_layers, trusted_cls, kw, seed=int(rng.integers(1 << 30)), scale=SCALE)
    compare(student, cls=cls, trusted=torch_layers, trusted_cls=trusted_cls, init_kwargs=kw, weights=w,
            inputs=[_normal(rng, B, d_in), state(B, d)], dtype="float64",
            what=f"{cls}(d_in={d_in}, d_hidden={d}) in float64 (weights and inputs) on x ({B}, {d_in}) "
                 f"and {what} of ({B}, {d})")
    (cls, trusted_cls) = layer
    w = weights(torch_layers, trusted_cls, kw, seed=int(rng.integers(1 << 30)), scale=SCALE)
    for start in (state(B, d), None):
        compare(student, cls=cls, trusted=torch_layers, trusted_cls=trusted_cls, init_kwargs=kw, weights=w,
                inputs=[_normal(rng, B, T, d_in), start], dtype="float64",
                what=f"{cls}(d_in={d_in}, d_hidden={d}) in float64 (weights and inputs) on x ({B}, {T}, {d_in}) "
                     f"from " + (f"a given {what}" if start is not None else "None (zeros, made in float64)"))
    # the same module on a device other than the CPU (fake tensors: no number computed, about 0.1 s a run)
    (cls, _), (layer_cls, _) = cell, layer
    expect_on_other_device(student, cls=cls, init_kwargs=kw, inputs=[_normal(rng, B, d_in), state(B, d)],
                           what=f"{cls}(d_in={d_in}, d_hidden={d}) on x ({B}, {d_in}) and a given {what}",
                           no_builtin_rnn=True)
    for start in (state(B, d), None):
        expect_on_other_device(student, cls=layer_cls, init_kwargs=kw, inputs=[_normal(rng, B, 3, d_in), start],
                               what=f"{layer_cls}(d_in={d_in}, d_hidden={d}) on x ({B}, 3, {d_in}) from "
                                    + (f"a given {what}" if start is not None else "None (zeros)"),
                               no_builtin_rnn=True)


def _cells(student, rng, compare, weights, torch_layers, *, cls, trusted_cls, state, what):
    """One step on each of SHAPES: the next state and every gradient, against PyTorch's cell."""
    for B, d_in, d in SHAPES:
        w = weights(torch_layers, trusted_cls, _kw(d_in, d), seed=int(rng.integers(1 << 30)), scale=SCALE)
        compare(student, cls=cls, trusted=torch_layers, trusted_cls=trusted_cls, init_kwargs=_kw(d_in, d),
                weights=w, inputs=[_normal(rng, B, d_in), state(B, d)],
                what=f"{cls}(d_in={d_in}, d_hidden={d}) on x ({B}, {d_in}) and {what} of ({B}, {d})")


def _layers(student, rng, compare, weights, torch_layers, *, cls, trusted_cls, state, what):
    """Sequences of 7, 3 and 1 steps, from a given state and from None: against PyTorch's layer."""
    for (B, d_in, d), T in zip(SHAPES, (7, 3, 1)):
        w = weights(torch_layers, trusted_cls, _kw(d_in, d), seed=int(rng.integers(1 << 30)), scale=SCALE)
        for start in (state(B, d), None):
            compare(student, cls=cls, trusted=torch_layers, trusted_cls=trusted_cls, init_kwargs=_kw(d_in, d),
                    weights=w, inputs=[_normal(rng, B, T, d_in), start],
                    what=f"{cls}(d_in={d_in}, d_hidden={d}) on x ({B}, {T}, {d_in}) from "
                         + (f"a given {what}" if start is not None else "None (zeros)"))


def _carry(student, rng, both, weights, torch_layers, *, cls, trusted_cls, state, what):
    """12 steps, forward only. If the first step is right and a later one is not, the state is not carried."""
    B, d_in, d, T = 3, 4, 6, 12
    w = weights(torch_layers, trusted_cls, _kw(d_in, d), seed=int(rng.integers(1 << 30)), scale=SCALE)
    label = f"{cls}(d_in={d_in}, d_hidden={d}) on x ({B}, {T}, {d_in}) from a given state"
    found, expected = both(student, cls=cls, trusted=torch_layers, trusted_cls=trusted_cls, init_kwargs=_kw(d_in, d),
                           weights=w, inputs=[_normal(rng, B, T, d_in), state(B, d)], grad=False)
    ref = expected["outputs"]
    outs = expect_shape(found["outputs"][0] if found["outputs"] else None, ref[0].shape, what=f"{label}: outputs")
    step_ok = np.isclose(outs, ref[0], atol=1e-4, rtol=1e-4).all(axis=(0, 2))  # (T,)
    if not step_ok[0]:
        raise AssertionError(f"{label}: the output of the first step already differs from PyTorch's; "
                             "make the cell right first")
    if not step_ok.all():
        bad = int(np.argmin(step_ok))
        raise AssertionError(f"{label}: the output of step 0 is right but step {bad} differs from PyTorch's: "
                             f"{what} that step t - 1 produces must be what step t starts from")
    if len(found["outputs"]) != len(ref):
        raise AssertionError(f"{label}: expected {len(ref)} output tensors, found {len(found['outputs'])}")
    for i in range(1, len(ref)):
        expect_close(found["outputs"][i], ref[i], what=f"{label}: the last state, tensor {i} of {len(ref) - 1}",
                     rtol=1e-4, atol=1e-5)
