"""Checks for Part 5: the RNN language model against the reference with the same weights, and sampling.

Sampling is checked by its statistics: many draws from fixed scores must
follow softmax(scores / temperature) within a total-variation distance far
above the sampling noise of the draws (about 0.01 here) and far below what a
wrong distribution gives. `generate` is checked jointly: the pairs (first,
second new token) of 20,000 rows must follow p(a) p(b | a) by a chi-square
test that a correct sampler fails with probability 1e-6 (the seeds are fixed,
so a given implementation always gets the same outcome); the marginals alone
miss a generator seeded again for every token (the second draw then repeats
the first one's random number).

The model's forward is also compared in float64, on both sides, and run on a
device other than the CPU (`expect_on_other_device`): a zero state made
without a device inside RNNLM itself, or in the student's layers it uses.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.stats import chi2

from lmcourse.grading.checks import check, expect_close, expect_equal, expect_shape
from lmcourse.grading.compare import expect_on_other_device, one_thread

LM = dict(vocab_size=9, d_embed=5, d_hidden=7)
MAX_TV = 0.03  # total variation between the draws' frequencies and the expected distribution
P_THRESHOLD = 1e-6  # a chi-square test's p-value below this fails


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


@check(points=2, cell="test_rnnlm", name="RNNLM: logits, state and gradients match the reference with the same weights "
                                        "(LSTM and Elman; in float64 too), and it runs on a device other than the CPU")
def test_rnnlm_forward(student, reference, rng, compare):
    for cell in ("lstm", "elman"):
        w = _lm_weights(reference, rng, cell)
        kw = dict(LM, cell=cell)
        ids = rng.integers(0, LM["vocab_size"], size=(3, 6))
        compare(student, cls="RNNLM", trusted=reference, trusted_cls="RNNLM", init_kwargs=kw, weights=w,
                inputs=[ids], rename=lambda name: name,
                what=f"RNNLM({', '.join(f'{k}={v!r}' for k, v in kw.items())}) on ids (3, 6) from state=None")
        compare(student, cls="RNNLM", trusted=reference, trusted_cls="RNNLM", init_kwargs=kw, weights=w,
                inputs=[ids], rename=lambda name: name, dtype="float64",
                what=f"RNNLM({', '.join(f'{k}={v!r}' for k, v in kw.items())}) in float64 on ids (3, 6) from "
                     "state=None")
    d = LM["d_hidden"]
    state = (rng.normal(size=(3, d)).astype(np.float32), rng.normal(size=(3, d)).astype(np.float32))
    compare(student, cls="RNNLM", trusted=reference, trusted_cls="RNNLM", init_kwargs=dict(LM, cell="lstm"),
            weights=_lm_weights(reference, rng), inputs=[rng.integers(0, LM["vocab_size"], size=(3, 4)), state],
            rename=lambda name: name, what="RNNLM(cell='lstm') on ids (3, 4) from a given state (h, c)")
    # on a device other than the CPU (fake tensors: no number computed, about 0.1-0.3 s a run)
    ids = rng.integers(0, LM["vocab_size"], size=(3, 3))
    for cell, start in (("lstm", None), ("elman", None), ("lstm", state)):
        kw = dict(LM, cell=cell)
        expect_on_other_device(student, cls="RNNLM", init_kwargs=kw, inputs=[ids, start], no_builtin_rnn=True,
                               what=f"RNNLM({', '.join(f'{k}={v!r}' for k, v in kw.items())}) on ids (3, 3) from "
                                    + ("state=None" if start is None else "a given state (h, c)"))


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
    with torch.no_grad(), one_thread():
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
        with torch.no_grad(), one_thread():
            logits = model(torch.from_numpy(out[:, :-1]))[0].numpy()[:, T0 - 1:]  # (B, n_new, V): for each new token
        chosen = np.take_along_axis(logits, out[:, T0:, None], axis=2)[..., 0]
        bad = np.argwhere(chosen < logits.max(axis=2) - 1e-3)  # near-ties count as ties
        if len(bad):
            b, t = (int(i) for i in bad[0])
            raise AssertionError(f"{what}: new token {t} of row {b} is not the most likely one given the prompt "
                                 f"and the tokens generated before it ({len(bad)} of {B * n_new} are not); feed "
                                 "each sampled token back in and carry the state")


def _chi_square(pairs: np.ndarray, probs: np.ndarray, what: str) -> None:
    """Fail when the pairs (a, b) are implausible under the joint distribution `probs` (V, V): p-value below
    P_THRESHOLD. Cells expected fewer than 5 times are pooled into one."""
    V = probs.shape[0]
    observed = np.bincount(pairs[:, 0] * V + pairs[:, 1], minlength=V * V).astype(np.float64)
    expected = len(pairs) * probs.reshape(-1)
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    stat = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    dof = int(keep.sum()) - 1
    p_value = float(chi2.sf(stat, dof))
    if p_value < P_THRESHOLD:
        worst = int(np.argmax(np.abs(observed - expected)))
        a, b = divmod(worst, V)
        raise AssertionError(
            f"{what}: the pairs (first new token, second new token) do not follow the model's distribution "
            f"p(first) p(second | first) (chi-square {stat:.0f} with {dof} degrees of freedom, p-value "
            f"{p_value:.1e} < {P_THRESHOLD:g}); e.g. the pair ({a}, {b}) came {int(observed[worst])} times, "
            f"expected about {expected[worst]:.0f}. Draw every token given all the tokens before it, each with a "
            "fresh random number from one generator")


@check(points=1, cell="test_sampling", name="RNNLM.generate: the new tokens follow the model's distribution "
                                           "jointly (each given the ones before); the prompt is kept")
def test_generate_distribution(student, reference, rng):
    w = _lm_weights(reference, rng)
    n, V = 20000, LM["vocab_size"]
    prompt = np.repeat(rng.integers(0, V, size=(1, 3)), n, axis=0)  # (n, 3): one prompt, n times
    model = reference.RNNLM(**LM, cell="lstm")
    model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
    longer = np.concatenate([prompt[:V], np.arange(V)[:, None]], axis=1)  # (V, 4): the prompt and each first token
    with torch.no_grad(), one_thread():
        first = model(torch.from_numpy(prompt[:1]))[0].numpy()[0, -1]  # (V,)
        second = model(torch.from_numpy(longer))[0].numpy()[:, -1]  # (V, V): row a, given first token a
    for tau in (1.0, 2.0):
        what = f"RNNLM.generate on {n} copies of one prompt of 3 tokens, n_new=2, temperature={tau}"
        out = _ids(student.probe("call_method", cls="RNNLM", init_kwargs=dict(LM, cell="lstm"), state_dict=w,
                                 method="generate", args=[prompt, 2], kwargs={"temperature": tau, "seed": 1},
                                 tensors=True, no_builtin_rnn=True), (n, 5), what)
        expect_equal(out[:, :3], prompt, what=f"{what}: the first 3 columns (the prompt)")
        if out[:, 3:].min() < 0 or out[:, 3:].max() >= V:
            raise AssertionError(f"{what}: expected token ids 0..{V - 1}, found values from "
                                 f"{int(out[:, 3:].min())} to {int(out[:, 3:].max())}")
        joint = _softmax(first / tau)[:, None] * _softmax(second / tau)  # (V, V): p(a) p(b | a)
        _chi_square(out[:, 3:], joint, what)
