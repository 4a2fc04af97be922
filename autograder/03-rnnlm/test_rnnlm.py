"""Checks for Part 5: the RNN language model against the reference with the same weights, and sampling.

Sampling is checked by its statistics: many draws from fixed scores must
follow softmax(scores / temperature) within a total-variation distance far
above the sampling noise of the draws (about 0.01 here) and far below what a
wrong distribution gives.
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.grading.checks import check, expect_close, expect_equal, expect_shape

LM = dict(vocab_size=9, d_embed=5, d_hidden=7)
MAX_TV = 0.03  # total variation between the draws' frequencies and the expected distribution


def _lm_weights(reference, rng, cell="lstm", scale=2.0):
    torch.manual_seed(int(rng.integers(1 << 30)))
    model = reference.RNNLM(**LM, cell=cell)
    return {k: (scale * v).numpy().astype(np.float32) for k, v in model.state_dict().items()}


def _softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _tv(draws, probs, what):
    draws = np.asarray(draws)
    if draws.size and draws.min() < 0 or draws.size and draws.max() >= len(probs):
        raise AssertionError(f"{what}: expected token ids 0..{len(probs) - 1}, found values from "
                             f"{int(draws.min())} to {int(draws.max())}")
    freq = np.bincount(draws.astype(np.int64), minlength=len(probs)) / max(1, draws.size)
    return 0.5 * float(np.abs(freq - probs).sum()), freq


def _ids(result, shape, what):
    arr = expect_shape(result, shape, what=what)
    if not np.issubdtype(arr.dtype, np.integer):
        raise AssertionError(f"{what}: expected integer token ids, found dtype {arr.dtype}")
    return arr.astype(np.int64)


@check(points=2, cell="test_rnnlm", name="RNNLM: logits, state and gradients match the reference with the same weights (LSTM and Elman)")
def test_rnnlm_forward(student, reference, rng, compare):
    for cell in ("lstm", "elman"):
        w = _lm_weights(reference, rng, cell)
        kw = dict(LM, cell=cell)
        ids = rng.integers(0, LM["vocab_size"], size=(3, 6))
        compare(student, cls="RNNLM", trusted=reference, trusted_cls="RNNLM", init_kwargs=kw, weights=w,
                inputs=[ids], rename=lambda name: name,
                what=f"RNNLM({', '.join(f'{k}={v!r}' for k, v in kw.items())}) on ids (3, 6) from state=None")
    d = LM["d_hidden"]
    state = (rng.normal(size=(3, d)).astype(np.float32), rng.normal(size=(3, d)).astype(np.float32))
    compare(student, cls="RNNLM", trusted=reference, trusted_cls="RNNLM", init_kwargs=dict(LM, cell="lstm"),
            weights=_lm_weights(reference, rng), inputs=[rng.integers(0, LM["vocab_size"], size=(3, 4)), state],
            rename=lambda name: name, what="RNNLM(cell='lstm') on ids (3, 4) from a given state (h, c)")


@check(points=1, cell="test_rnnlm", name="RNNLM: passing the returned state back in continues the text")
def test_rnnlm_continues(student, reference, rng):
    w = _lm_weights(reference, rng)
    ids = rng.integers(0, LM["vocab_size"], size=(2, 9))
    common = dict(cls="RNNLM", init_kwargs=dict(LM, cell="lstm"), state_dict=w, grad=False, no_builtin_rnn=True)
    first = student.probe("module_forward", inputs=[ids[:, :5]], **common)
    outs = first.get("outputs") if isinstance(first, dict) else None
    if not isinstance(outs, list) or len(outs) != 3:
        raise AssertionError("RNNLM(cell='lstm').forward must return (logits, (h, c)): three tensors in all; "
                             f"found {len(outs) if isinstance(outs, list) else 'something else'}")
    second = student.probe("module_forward", inputs=[ids[:, 5:], (outs[1], outs[2])], **common)
    expected = reference.RNNLM(**LM, cell="lstm")
    expected.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
    with torch.no_grad():
        whole = expected(torch.from_numpy(ids))[0].numpy()
    expect_close(second["outputs"][0] if second["outputs"] else None, whole[:, 5:],
                 what="the logits of tokens 5..8 read after tokens 0..4, with the state the first call returned "
                      "(they must equal those of reading all 9 tokens at once)", rtol=1e-4, atol=1e-5)


@check(points=2, cell="test_sampling", name="sample_next: draws follow softmax(logits / temperature) at temperatures 0.5, 1 and 2",
       visibility="visible")
def test_sample_next(student, rng):
    rows = np.array([[2.0, 1.0, 0.0, -1.0, -3.0, 0.5], [-2.0, 3.0, -1.0, 0.0, 1.0, 2.5], [0.0, 0.0, 0.0, 0.0, 4.0, -4.0]],
                    dtype=np.float32)
    n = 20000
    logits = np.repeat(rows, n, axis=0)  # (3n, 6): n draws from each row
    for tau in (1.0, 0.5, 2.0):
        what = f"sample_next on {3 * n} rows of 3 different logit vectors, temperature={tau}"
        draws = _ids(student.probe("call_with_tensors", fn="sample_next", args=[logits], kwargs={"temperature": tau},
                                   seed=int(rng.integers(1 << 30))), (3 * n,), what)
        for r, row in enumerate(rows):
            probs = _softmax(row / tau)
            tv, freq = _tv(draws[r * n:(r + 1) * n], probs, what)
            if tv > MAX_TV:
                raise AssertionError(f"{what}: for logits {row.tolist()} the draws' frequencies are "
                                     f"{np.round(freq, 3).tolist()}, expected close to {np.round(probs, 3).tolist()} "
                                     f"(total variation {tv:.3f} > {MAX_TV})")


@check(points=1, cell="test_sampling", name="RNNLM.generate: at a tiny temperature, each new token is the most likely one given the text so far")
def test_generate_greedy(student, reference, rng):
    B, T0, n_new, d = 6, 4, 12, LM["d_hidden"]
    what = f"RNNLM.generate(prompt ({B}, {T0}), n_new={n_new}, temperature=1e-4)"
    for _ in range(3):
        w = _lm_weights(reference, rng, scale=3.0)
        w["rnn.cell.bias_ih"][d:2 * d] += 3.0  # forget gates mostly open: the model remembers, history matters
        prompt = rng.integers(0, LM["vocab_size"], size=(B, T0))
        out = _ids(student.probe("call_method", cls="RNNLM", init_kwargs=dict(LM, cell="lstm"), state_dict=w,
                                 method="generate", args=[prompt, n_new], kwargs={"temperature": 1e-4, "seed": 0},
                                 tensors=True, no_builtin_rnn=True), (B, T0 + n_new), what)
        expect_equal(out[:, :T0], prompt, what=f"{what}: the first {T0} columns (the prompt)")
        model = reference.RNNLM(**LM, cell="lstm")
        model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
        with torch.no_grad():
            logits = model(torch.from_numpy(out[:, :-1]))[0].numpy()[:, T0 - 1:]  # (B, n_new, V): for each new token
        chosen = np.take_along_axis(logits, out[:, T0:, None], axis=2)[..., 0]
        bad = np.argwhere(chosen < logits.max(axis=2) - 1e-3)  # near-ties count as ties
        if len(bad):
            b, t = (int(i) for i in bad[0])
            raise AssertionError(f"{what}: new token {t} of row {b} is not the most likely one given the prompt "
                                 f"and the tokens generated before it ({len(bad)} of {B * n_new} are not); feed "
                                 "each sampled token back in and carry the state")


@check(points=1, cell="test_sampling", name="RNNLM.generate: the first new token follows the model's distribution; the prompt is kept")
def test_generate_distribution(student, reference, rng):
    w = _lm_weights(reference, rng)
    n = 4000
    prompt = np.repeat(rng.integers(0, LM["vocab_size"], size=(1, 3)), n, axis=0)  # (n, 3): one prompt, n times
    for tau in (1.0, 2.0):
        what = f"RNNLM.generate on {n} copies of one prompt of 3 tokens, n_new=2, temperature={tau}"
        out = _ids(student.probe("call_method", cls="RNNLM", init_kwargs=dict(LM, cell="lstm"), state_dict=w,
                                 method="generate", args=[prompt, 2], kwargs={"temperature": tau, "seed": 1},
                                 tensors=True, no_builtin_rnn=True), (n, 5), what)
        expect_equal(out[:, :3], prompt, what=f"{what}: the first 3 columns (the prompt)")
        model = reference.RNNLM(**LM, cell="lstm")
        model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
        with torch.no_grad():
            probs = _softmax(model(torch.from_numpy(prompt[:1]))[0].numpy()[0, -1] / tau)
        tv, freq = _tv(out[:, 3], probs, what)
        if tv > MAX_TV + 0.02:  # 4,000 draws: noise about 0.02
            raise AssertionError(f"{what}: the first new tokens' frequencies are {np.round(freq, 3).tolist()}, "
                                 f"expected close to {np.round(probs, 3).tolist()} (total variation {tv:.3f})")
