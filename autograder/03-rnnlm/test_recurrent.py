"""Checks for Parts 3 and 4: the Elman and LSTM cells and layers against PyTorch's, with the same weights.

The weights are PyTorch's initialisation times 2, so that the gates and the
tanh work away from their linear middle, where a missing non-linearity or a
swapped gate shows.

Each cell and layer also runs in float64, on both sides (`compare_modules`'
``dtype``, tolerances 1e-9): a zero state made with a fixed dtype or device
(``torch.zeros(B, d)`` is float32 on the CPU) passes every float32 check on a
CPU and fails where the grader trains on a GPU; in float64 it fails on any
machine, and so does a layer that computes in float32 inside.
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape

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


@check(points=1, cell="test_elman", name="ElmanCell and ElmanRNN in float64: the same results, in float64, "
                                        "from a given state and from None")
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


@check(points=1, cell="test_lstm", name="LSTMCell and LSTM in float64: the same results, in float64, "
                                       "from a given state and from None")
def test_lstm_float64(student, rng, compare, weights, torch_layers):
    _float64(student, rng, compare, weights, torch_layers, cell=("LSTMCell", "TorchLSTMCell"),
             layer=("LSTM", "TorchLSTM"), state=lambda B, d: (_normal(rng, B, d), _normal(rng, B, d)),
             what="state (h, c)")


def _float64(student, rng, compare, weights, torch_layers, *, cell, layer, state, what):
    """The cell, then the layer from a given state and from None, with both sides in float64."""
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
