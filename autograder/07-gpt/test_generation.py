"""Checks for Part 4: the filters, sampling, the key-value cache and generation.

Filters: exact sets on random logits without ties, and on fixed probability vectors where the token that
crosses p decides (p is never within 1e-4 of a cumulative sum, so float32 rounding cannot). Sampling: 10,000
draws from each of two distributions in one call (drawn so that the temperature changes the nucleus), interleaved row by row, each tested by chi-square against the
softmax of the reference's filtered logits (a p-value below 1e-6 fails: a false alarm once in a million
grades), no draw outside the kept set, and the pairs of neighbouring rows tested for independence (a sampler
that shares one random number across the batch draws correlated rows). The same generator seed must give the
same draws, another seed others. The cache: logits of a prompt, then single tokens, then chunks, through one
KVCache, against the reference's full forward; a ValueError past the context. Generation: the greedy chain of
the reference with the same weights, with the cache and without it (cropped to the context).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from lmcourse.grading.checks import check, expect_close
from lmcourse.grading.compare import block_weights, expect_runs_elsewhere, one_thread
from lmcourse.grading.sandbox.inside import probes

P_FAIL = 1e-6


def _no_ties(rng, *shape):
    return (rng.permuted(np.tile(np.linspace(-3, 3, shape[-1]), (int(np.prod(shape[:-1])), 1)), axis=1)
            .reshape(shape) + 0.01 * rng.normal(size=shape)).astype(np.float32)


def _kept(values) -> list:
    return [sorted(np.flatnonzero(np.isfinite(row)).tolist()) for row in np.asarray(values).reshape(-1, np.shape(values)[-1])]


def _filtered(student, reference, fn, logits, what, **kw):
    found = np.asarray(student.probe("call_with_tensors", fn=fn, args=[logits], kwargs=kw, timeout=30))
    expected = probes.to_array(getattr(reference, fn)(probes.to_tensor(logits), **kw))
    if found.shape != expected.shape:
        raise AssertionError(f"{what}: expected logits of shape {expected.shape}; found {found.shape}")
    if _kept(found) != _kept(expected):
        rows = [r for r, (a, b) in enumerate(zip(_kept(found), _kept(expected))) if a != b]
        raise AssertionError(f"{what}: row {rows[0]} keeps the tokens {_kept(found)[rows[0]]}; expected "
                             f"{_kept(expected)[rows[0]]} ({len(rows)} rows differ)")
    kept = np.isfinite(expected)
    if not (np.isneginf(found[~kept]).all() and np.allclose(found[kept], expected[kept], atol=1e-6)):
        raise AssertionError(f"{what}: the kept logits must be unchanged and the others -inf")


@check(points=1, cell="test_filters", name="top_k_filter: exactly the k largest logits of each row kept, unchanged, "
                                           "the rest -inf; it runs where the logits are")
def test_top_k(student, reference, rng):
    for shape, k in (((4, 10), 3), ((2, 3, 50), 1), ((1, 7), 7), ((5, 100), 40)):
        _filtered(student, reference, "top_k_filter", _no_ties(rng, *shape), f"top_k_filter(logits {shape}, k={k})", k=k)
    expect_runs_elsewhere(student, fn="top_k_filter", args=[_no_ties(rng, 4, 10), 3], what="top_k_filter(logits (4, 10), k=3)")


def _safe_p(rng, logits) -> float:
    """A p at least 1e-4 away from every cumulative sum of every row's sorted probabilities."""
    z = logits - logits.max(-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    sums = np.cumsum(-np.sort(-probs, axis=-1), axis=-1).ravel()
    while True:
        p = float(rng.uniform(0.2, 0.97))
        if np.abs(sums - p).min() > 1e-4:
            return p


@check(points=1, cell="test_filters", name="top_p_filter: the smallest set of most probable tokens holding at least p "
                                           "(the crossing token kept), unchanged, the rest -inf")
def test_top_p(student, reference, rng):
    fixed = np.log(np.array([[0.05, 0.5, 0.15, 0.3], [0.25, 0.25 + 1e-3, 0.25 - 2e-3, 0.25 + 1e-3],
                             [0.9, 0.04, 0.03, 0.03]], dtype=np.float32))
    for p in (0.3, 0.55, 0.62, 0.81, 0.93, 0.999):
        _filtered(student, reference, "top_p_filter", fixed, f"top_p_filter(log [[0.05, 0.5, 0.15, 0.3], ...], p={p})", p=p)
    for shape in ((6, 20), (2, 3, 65), (3, 1000)):
        logits = _no_ties(rng, *shape) * float(rng.uniform(0.5, 2.5))
        p = _safe_p(rng, logits)
        _filtered(student, reference, "top_p_filter", logits, f"top_p_filter(logits {shape}, p={p:.4f})", p=p)


SAMPLING = ({"temperature": 0.8, "top_k": 9, "top_p": 0.9}, {"temperature": 1.3}, {"top_p": 0.7},
            {"temperature": 0.5, "top_p": 0.8})
N = 10_000


def _expected_probs(reference, logits, settings) -> np.ndarray:
    """The reference's sampling distribution: softmax(top_p(top_k(logits / temperature))), rows (.., V)."""
    import torch

    x = torch.as_tensor(logits) / settings.get("temperature", 1.0)
    if settings.get("top_k") is not None:
        x = reference.top_k_filter(x, settings["top_k"])
    if settings.get("top_p") is not None:
        x = reference.top_p_filter(x, settings["top_p"])
    return x.softmax(-1).double().numpy()


@check(points=2, cell="test_sampling", name="sample_next: on 20,000 rows, each draw follows the filtered softmax "
                                            "(chi-square), rows independent, the generator decides; greedy at "
                                            "temperature 0")
def test_sample_next(student, reference, rng):
    V = 16
    for _ in range(100):  # rows whose nucleus at p = 0.8 is another set at temperature 0.5 than at 1
        rows = _no_ties(rng, 2, V) * 0.6
        sharp, flat = (_expected_probs(reference, rows, {"temperature": t, "top_p": 0.8}) > 0 for t in (0.5, 1.0))
        if (sharp != flat).any(axis=1).all():
            break
    batch = np.tile(rows, (N, 1))  # (2N, V): the two distributions interleaved
    greedy_in = _no_ties(rng, 50, V)
    found = student.probe("call_with_tensors", fn="sample_next", args=[greedy_in], kwargs={"temperature": 0}, timeout=30)
    if list(np.asarray(found).ravel()) != list(greedy_in.argmax(-1)):
        raise AssertionError("sample_next(logits (50, 16), temperature=0): expected the argmax of each row")
    for settings in SAMPLING:
        what = f"sample_next(logits ({2 * N}, {V}), {', '.join(f'{k}={v}' for k, v in settings.items())})"
        draws = student.probe("call_with_generators", fn="sample_next", args=[batch], kwargs=settings, seeds=[7, 7, 8])
        if not (isinstance(draws, list) and len(draws) == 3):
            raise AssertionError(f"{what}: the grader could not read your draws")
        first, again, other = (np.asarray(d) for d in draws)
        if first.shape != (2 * N,) or first.dtype.kind not in "iu":
            raise AssertionError(f"{what}: expected ({2 * N},) integer ids; found {first.dtype} of shape {first.shape}")
        if not np.array_equal(first, again):
            raise AssertionError(f"{what}: two calls with generators of the same seed drew differently; draw every "
                                 "random number from the generator given")
        if np.array_equal(first, other):
            raise AssertionError(f"{what}: generators of two different seeds gave the same draws; draw every random "
                                 "number from the generator given")
        if first.min() < 0 or first.max() >= V:
            raise AssertionError(f"{what}: ids must be in 0..{V - 1}; found {first.min()}..{first.max()}")
        expected = _expected_probs(reference, rows, settings)
        for r in range(2):
            counts = np.bincount(first[r::2], minlength=V)
            outside = counts[expected[r] == 0].sum()
            if outside:
                raise AssertionError(f"{what}: {outside} draws of row {r} fell on tokens the filters remove")
            keep = expected[r] > 0
            if keep.sum() > 1:
                p_value = stats.chisquare(counts[keep], N * expected[r][keep] / expected[r][keep].sum()).pvalue
                tv = 0.5 * np.abs(counts / N - expected[r]).sum()
                if p_value < P_FAIL:
                    raise AssertionError(f"{what}: row {r}'s {N} draws do not follow the filtered softmax "
                                         f"(chi-square p = {p_value:.1e}, total variation {tv:.3f}). Temperature "
                                         "first, then top-k, then top-p, then the softmax")
        table = np.zeros((V, V))
        np.add.at(table, (first[0::2], first[1::2]), 1)
        table = table[table.sum(1) > 0][:, table.sum(0) > 0]
        if min(table.shape) > 1 and stats.chi2_contingency(table).pvalue < P_FAIL:
            raise AssertionError(f"{what}: neighbouring rows' draws are not independent (chi-square p = "
                                 f"{stats.chi2_contingency(table).pvalue:.1e}); draw each row with its own random "
                                 "numbers")


KV_MODEL = dict(vocab_size=40, block_size=48, d_model=16, n_heads=4, n_layers=2)


@check(points=2, cell="test_kv_cache", name="GPT with a KVCache: a prompt, then single tokens, then chunks give the "
                                            "logits of the full forward; a ValueError past block_size")
def test_kv_cache(student, reference, rng, rules):
    import torch

    w = block_weights(reference.GPT, KV_MODEL, rng)
    ids = rng.integers(0, 40, size=(2, 48)).astype(np.int64)
    with one_thread():
        ref = reference.GPT(**KV_MODEL)
        ref.load_state_dict({k: torch.as_tensor(v) for k, v in w.items()})
        with torch.no_grad():
            expected = ref.eval()(torch.as_tensor(ids)).numpy()
    for chunks in ([10] + [1] * 30 + [5, 3], [1] * 48, [20, 28]):
        what = f"GPT(block_size=48) on ids (2, 48) through one KVCache in chunks of {chunks[:3]}...{chunks[-2:]}"
        found = student.probe("incremental_logits", cls="GPT", init_kwargs=KV_MODEL, state_dict=w, ids=ids,
                              chunks=chunks, n_layers=2, timeout=30, **rules)
        if not isinstance(found, dict):
            raise AssertionError(f"{what}: the grader could not read your logits")
        if found.get("raised"):
            raise AssertionError(f"{what}: chunk {found.get('at')} raised {found['raised']}: "
                                 f"{str(found.get('message'))[:200]}")
        expect_close(found.get("logits"), expected, rtol=1e-4, atol=1e-4,
                     what=f"{what}: the logits against the full forward's (positions continue from cache.length)")
    for chunks, at in (([40, 9], 1), ([49], 0), ([48, 1], 1)):
        found = student.probe("incremental_logits", cls="GPT", init_kwargs=KV_MODEL, state_dict=w,
                              ids=np.zeros((1, sum(chunks)), dtype=np.int64), chunks=chunks, n_layers=2, timeout=30,
                              **rules)
        if not (isinstance(found, dict) and found.get("raised") == "ValueError" and found.get("at") == at):
            raised = found.get("raised") if isinstance(found, dict) else None
            raise AssertionError(f"GPT(block_size=48) with a KVCache, chunks {chunks}: expected a ValueError at chunk {at} "
                                 f"(past the context); found {raised or 'no error'}")


GEN_MODEL = dict(vocab_size=30, block_size=16, d_model=16, n_heads=2, n_layers=2)


@check(points=1, cell="test_kv_cache", name="generate: greedy tokens equal the reference's with the same weights, with "
                                            "the cache and without it (cropped to the newest block_size tokens); it "
                                            "runs where the prompt is")
def test_generate(student, reference, rng, rules):
    w = block_weights(reference.GPT, GEN_MODEL, rng, scale=3.0)
    prompt = rng.integers(0, 30, size=(3, 4)).astype(np.int64)
    T = GEN_MODEL["block_size"]
    for n_new, use_cache in ((12, True), (12, False), (30, False)):
        kw = dict(fn="generate", cls="GPT", init_kwargs=GEN_MODEL, state_dict=w, args=[prompt],
                  kwargs={"n_new": n_new, "temperature": 0, "use_cache": use_cache})
        with one_thread():
            expected = probes.to_array(probes.run_local("call_with_module", reference, **kw))
        out = student.probe("call_with_module", **kw, record_inputs=True, timeout=60, **rules)
        found = np.asarray(out.get("result")) if isinstance(out, dict) else np.asarray(None)
        what = f"generate(model (block_size {T}), prompt (3, 4), {n_new}, temperature=0, use_cache={use_cache})"
        if found.shape != expected.shape:
            raise AssertionError(f"{what}: expected ({3}, {4 + n_new}) ids; found shape {found.shape}")
        if not np.array_equal(found, expected):
            row, col = np.argwhere(found != expected)[0]
            raise AssertionError(f"{what}: row {row} differs from the greedy chain at position {col}: expected "
                                 f"{expected[row, col:col + 4].tolist()}, found {found[row, col:col + 4].tolist()}")
        if not use_cache:
            # A random model's greedy chain soon repeats one token, so the tokens alone cannot show which part of
            # a sequence longer than the context was read: the model's calls do (the ids each was given).
            fed = out.get("inputs") if isinstance(out.get("inputs"), list) else []
            for k, ids in enumerate(fed[:n_new]):
                length = 4 + k  # the sequence so far when the k-th new token is chosen
                want = found[:, max(0, length - T):length]
                if not (isinstance(ids, np.ndarray) and np.array_equal(ids, want)):
                    shown = getattr(ids, "shape", type(ids).__name__)
                    raise AssertionError(
                        f"{what}: for new token {k + 1} (the sequence {length} tokens long) the model was given "
                        f"{'ids of shape ' + str(shown) if isinstance(ids, np.ndarray) else shown}"
                        f"{'' if not isinstance(ids, np.ndarray) or ids.shape != want.shape else ' other than the newest'}; "
                        f"expected the newest min(length, block_size) = {want.shape[1]} tokens of the sequence, "
                        f"positions {length - want.shape[1]}..{length - 1}")
            if len(fed) < n_new:
                raise AssertionError(f"{what}: the model was called {len(fed)} times; expected one call per new token")
    for use_cache in (True, False):
        expect_runs_elsewhere(student, fn="generate", cls="GPT", init_kwargs=GEN_MODEL, state_dict=w, args=[prompt],
                              kwargs={"n_new": 6, "temperature": 0, "use_cache": use_cache}, timeout=60,
                              what=f"generate(model, prompt (3, 4), 6, temperature=0, use_cache={use_cache})", **rules)
