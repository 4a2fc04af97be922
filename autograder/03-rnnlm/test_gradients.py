"""Checks for Part 7: the norm of the gradient of the last prediction's loss with respect to every hidden state.

The student's `state_gradient_norms` runs on the student's own `RNNLM` (built
in the worker with the grader's weights: `call_with_module`), the reference's
on the reference `RNNLM` with the same weights, here; the norms must agree
entry by entry within 1% (float32 through up to 40 steps: the implementations
differ by about 1e-5). The weights are chosen so that the curves differ: an
Elman network whose gradient vanishes geometrically (to about 1e-10 of the last
state's over 40 steps), one that keeps more of it (its recurrent weights x2),
and LSTMs whose forget gates start half closed (bias 0) and open (bias +2).
A gradient taken with respect to the layer's stacked outputs instead of the
states is zero at every step but the last, and fails.
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape
from lmcourse.grading.compare import one_thread
from lmcourse.grading.sandbox.inside import probes

RTOL = 1e-2


def _weights(reference, rng, kw, *, recurrent_scale=1.0, forget_bias=0.0):
    """The reference RNNLM's starting weights (through the probe, so that the student edition can record them),
    its recurrent weights scaled and its forget-gate bias shifted."""
    w = probes.run_local("initial_weights", reference, cls="RNNLM", init_kwargs=kw, seed=int(rng.integers(1 << 30)))
    w = {k: np.asarray(v, dtype=np.float32) for k, v in w.items()}
    w["rnn.cell.weight_hh"] = w["rnn.cell.weight_hh"] * np.float32(recurrent_scale)
    if kw.get("cell", "lstm") == "lstm":
        d = kw["d_hidden"]
        w["rnn.cell.bias_ih"][d:2 * d] += np.float32(forget_bias)  # PyTorch's gate order: i, f, g, o
    return w


def _compare(student, reference, rng, kw, *, B, T, label, **weight_changes):
    w = _weights(reference, rng, kw, **weight_changes)
    ids = rng.integers(0, kw["vocab_size"], size=(B, T))
    targets = rng.integers(0, kw["vocab_size"], size=(B,))
    call = dict(fn="state_gradient_norms", cls="RNNLM", init_kwargs=kw, state_dict=w, args=[ids, targets])
    what = (f"state_gradient_norms of RNNLM({', '.join(f'{k}={v!r}' for k, v in kw.items())}) ({label}) on ids "
            f"({B}, {T}) and targets ({B},)")
    found = expect_shape(student.probe("call_with_module", no_builtin_rnn=True, **call), (T,), what=what)
    with one_thread():
        expected = np.asarray(probes.run_local("call_with_module", reference, **call).detach().numpy(), np.float64)
    if found[:-1].size and not np.any(found[:-1]) and np.all(expected[:-1] > 0):
        raise AssertionError(f"{what}: every norm but the last one is 0; the gradient reaches every earlier state "
                             "through the states after it (a stacked copy of the states that the loss reads only "
                             "at the last step gets no gradient at the others)")
    expect_close(found, expected, what=f"{what}: norms[t] for t = 0..{T - 1} (norms[{T - 1}] at the last state)",
                 rtol=RTOL, atol=1e-30)


@check(points=1, cell="test_gradient_norms", name="state_gradient_norms: one norm per step, as the reference's, "
                                                 "for a small Elman and a small LSTM model", visibility="visible")
def test_gradient_norms_small(student, reference, rng):
    for cell in ("elman", "lstm"):
        kw = dict(vocab_size=7, d_embed=3, d_hidden=5, cell=cell)
        _compare(student, reference, rng, kw, B=3, T=6, label="PyTorch's initialisation")


@check(points=2, cell="test_gradient_norms", name="state_gradient_norms: the decay over 40 steps matches the "
                                                 "reference's, Elman and LSTM (forget gates half closed and open)")
def test_gradient_norms_decay(student, reference, rng):
    elman = dict(vocab_size=11, d_embed=8, d_hidden=24, cell="elman")
    lstm = dict(elman, cell="lstm")
    _compare(student, reference, rng, elman, B=4, T=40, label="recurrent weights as initialised")
    _compare(student, reference, rng, elman, B=4, T=40, label="recurrent weights x2", recurrent_scale=2.0)
    _compare(student, reference, rng, lstm, B=4, T=40, label="forget-gate bias 0")
    _compare(student, reference, rng, lstm, B=4, T=40, label="forget-gate bias +2", forget_bias=2.0)
