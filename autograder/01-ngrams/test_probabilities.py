"""Checks for Parts 3-5: next-token probabilities, held-out cross-entropy, interpolation weights."""

from __future__ import annotations

import math

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape

RTOL, ATOL = 1e-9, 1e-12  # counts are exact: probabilities agree to rounding
UNSEEN = "zzz-never-seen"  # a word no vocabulary holds


def _dirichlet(rng, n):
    return [float(x) for x in rng.dirichlet(np.ones(n))]


@check(points=2, cell="test_next_token_probs", name="next_token_probs: maximum-likelihood estimates, n = 1..4")
def test_mle(student, reference, rng, model_of, histories):
    for n in (1, 2, 3, 4):
        model = model_of(rng, n, n_sentences=40, n_types=8)
        for history in histories(rng, model, count=8):
            expect_close(student.next_token_probs(model, history), reference.next_token_probs(model, history),
                         what=f"P(next | a {len(history)}-word history) of a {n}-gram model, k=0",
                         rtol=RTOL, atol=ATOL)


def _follows_the_counts(p: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Fail unless `p` ranks every pair of tokens as `expected` does, where `expected` tells them apart.

    A condition on top of normalisation: a distribution that ignores the
    counts (uniform, say) sums to 1 and never predicts <BOS>, and must not earn
    the point for that alone.
    """
    apart = expected[:, None] - expected[None, :] > 1e-9  # (V, V): i is clearly more probable than j
    wrong = apart & ~(p[:, None] > p[None, :])
    if wrong.any():
        raise AssertionError(f"{what}: the probabilities do not follow the counts: in {int(wrong.sum())} of "
                             f"{int(apart.sum())} pairs of tokens, the one the model's counts make more probable "
                             "got a probability lower than or equal to the other's")


@check(points=1, cell="test_next_token_probs",
       name="next_token_probs: every distribution sums to 1, never predicts <BOS> and follows the counts",
       visibility="visible")
def test_normalised(student, reference, rng, model_of, histories):
    for n in (1, 2, 3):
        model = model_of(rng, n, n_sentences=30, n_types=8)
        V = len(model["vocab"])
        settings = [dict(k=0.0), dict(k=0.5), dict(k=2.0), dict(k=0.0, lambdas=_dirichlet(rng, n))]
        for kwargs in settings:
            for history in histories(rng, model, count=4) + [[UNSEEN]]:
                p = expect_shape(student.next_token_probs(model, history, **kwargs), (V,),
                                 what=f"next_token_probs of a {n}-gram model with {V} vocabulary tokens")
                label = ", ".join(f"{key}={val:g}" if key == "k" else "interpolated" for key, val in kwargs.items())
                if not np.all(np.isfinite(p)) or np.any(p < 0):
                    raise AssertionError(f"next_token_probs ({label}, n={n}): every probability must be finite "
                                         f"and >= 0; found min {np.nanmin(p):.3g}, {int(np.sum(~np.isfinite(p)))} "
                                         "NaN/inf entries")
                if abs(p.sum() - 1.0) > 1e-9:
                    raise AssertionError(f"next_token_probs ({label}, n={n}): the distribution over the next token "
                                         f"sums to {p.sum():.6f}, expected 1 (within 1e-9)")
                if p[0] != 0:
                    raise AssertionError(f"next_token_probs ({label}, n={n}): P(<BOS> | history) = {p[0]:.3g}; "
                                         "<BOS> is never a next token, its probability must be 0")
                _follows_the_counts(p, reference.next_token_probs(model, history, **kwargs),
                                    what=f"next_token_probs ({label}, n={n})")


@check(points=1, cell="test_next_token_probs", name="next_token_probs: add-k smoothing")
def test_add_k(student, reference, rng, model_of, histories):
    for n, k in ((1, 1.0), (2, 0.1), (3, 1.0), (3, 0.01)):
        model = model_of(rng, n, n_sentences=30, n_types=8)
        for history in histories(rng, model, count=6):
            expect_close(student.next_token_probs(model, history, k=k),
                         reference.next_token_probs(model, history, k=k),
                         what=f"add-{k:g} P(next | a {len(history)}-word history) of a {n}-gram model",
                         rtol=RTOL, atol=ATOL)


@check(points=1, cell="test_next_token_probs",
       name="next_token_probs: unseen histories (uniform) and unknown words (read as <UNK>)")
def test_unseen(student, reference, rng, model_of, histories):
    for n in (2, 3):
        model = model_of(rng, n, n_sentences=25, n_types=10)
        cases = [[UNSEEN], ["w0", UNSEEN], [UNSEEN, UNSEEN, UNSEEN]] + \
                [h + [UNSEEN] for h in histories(rng, model, count=3, max_len=2)]
        for history in cases:
            for k in (0.0, 0.5):
                expect_close(student.next_token_probs(model, history, k=k),
                             reference.next_token_probs(model, history, k=k),
                             what=f"{n}-gram P(next | a history ending in a word outside the vocabulary), k={k:g}",
                             rtol=RTOL, atol=ATOL)
            lambdas = _dirichlet(rng, n)
            expect_close(student.next_token_probs(model, history, lambdas=lambdas),
                         reference.next_token_probs(model, history, lambdas=lambdas),
                         what=f"interpolated {n}-gram P(next | a history ending in a word outside the vocabulary) "
                              "(random weights; each order whose history is unseen contributes its uniform 1/V, "
                              "and the weighted sum is not renormalised)", rtol=RTOL, atol=ATOL)
        history = ["<UNK>"] * (n - 1)  # the token itself, as a corpus mapped by replace_rare holds it
        expect_close(student.next_token_probs(model, history), reference.next_token_probs(model, history),
                     what=f"{n}-gram P(next | a history of <UNK> tokens)", rtol=RTOL, atol=ATOL)
        # a history of known words that never occurred together
        words = model["vocab"][3:]
        seen = set(model["contexts"][n - 1])
        for a in words:
            history = [a] * (n - 1)
            if " ".join(history) not in seen:
                expect_close(student.next_token_probs(model, history), reference.next_token_probs(model, history),
                             what=f"{n}-gram P(next | a history of known words never seen in training)",
                             rtol=RTOL, atol=ATOL)
                break


@check(points=1, cell="test_next_token_probs", name="next_token_probs: linear interpolation of orders 1..n")
def test_interpolation(student, reference, rng, model_of, histories):
    for n in (2, 3, 4):
        model = model_of(rng, n, n_sentences=40, n_types=8)
        for i, history in enumerate(histories(rng, model, count=6)):
            lambdas, k = _dirichlet(rng, n), (0.0 if i < 4 else 0.5)
            expect_close(student.next_token_probs(model, history, k=k, lambdas=lambdas),
                         reference.next_token_probs(model, history, k=k, lambdas=lambdas),
                         what=f"interpolated P(next | a {len(history)}-word history) of a {n}-gram model, k={k:g} "
                              "(random weights; the plain weighted sum of the n orders' add-k estimates, an order "
                              "whose history is unseen contributing its uniform 1/V)", rtol=RTOL, atol=ATOL)


@check(points=2, cell="test_perplexity", name="sentence_probs: the probability of every token, <EOS> included")
def test_sentence_probs(student, reference, rng, model_of, corpus):
    for n, kwargs in ((1, {}), (2, {}), (3, dict(k=0.5)), (3, dict(lambdas=_dirichlet(rng, 3)))):
        model = model_of(rng, n, n_sentences=40, n_types=8)
        heldout = corpus(rng, n_sentences=6, n_types=12, max_len=6)  # w8..w11: outside the vocabulary
        heldout += [["w0", UNSEEN, "w1"], ["<UNK>", "w0", "<UNK>"]]
        for sentence in heldout:
            label = "interpolated" if "lambdas" in kwargs else f"k={kwargs.get('k', 0):g}"
            expect_close(student.sentence_probs(model, sentence, **kwargs),
                         reference.sentence_probs(model, sentence, **kwargs),
                         what=f"sentence_probs of a held-out {len(sentence)}-word sentence, {n}-gram model, {label} "
                              f"(shape ({len(sentence) + 1},))", rtol=RTOL, atol=ATOL)


def _entropy_keys(found, what):
    if not isinstance(found, dict):
        raise AssertionError(f"{what}: expected a dict with keys 'nats_per_token', 'bits_per_token', 'perplexity'; "
                             f"found {type(found).__name__}")
    missing = [key for key in ("nats_per_token", "bits_per_token", "perplexity") if key not in found]
    if missing:
        raise AssertionError(f"{what}: the dict lacks key(s) {', '.join(missing)}")


@check(points=1, cell="test_perplexity", name="cross_entropy: the average is over tokens, not sentences")
def test_token_average(student, reference, rng):
    for _ in range(3):
        lengths = rng.integers(1, 12, size=6)
        probs = [[float(x) for x in rng.uniform(0.01, 1.0, size=m)] for m in lengths]
        found = student.cross_entropy(probs)
        _entropy_keys(found, "cross_entropy")
        expect_close(found["nats_per_token"], reference.cross_entropy(probs)["nats_per_token"],
                     what=f"nats_per_token for 6 sentences of {', '.join(map(str, lengths))} tokens", rtol=1e-9)


@check(points=1, cell="test_perplexity", name="cross_entropy: nats, bits and perplexity in their units",
       visibility="visible")
def test_units(student, reference, rng):
    probs = [[float(x) for x in rng.uniform(0.01, 1.0, size=5)] for _ in range(4)]  # equal lengths
    found, expected = student.cross_entropy(probs), reference.cross_entropy(probs)
    _entropy_keys(found, "cross_entropy")
    for key, unit in (("nats_per_token", "natural log"), ("bits_per_token", "log base 2"),
                      ("perplexity", "e ** nats_per_token, equal to 2 ** bits_per_token")):
        expect_close(found[key], expected[key], what=f"cross_entropy(...)['{key}'] ({unit}) of 4 sentences of "
                                                     "5 tokens each", rtol=1e-9)
    zero = student.cross_entropy([[0.5, 0.0], [0.25]])
    _entropy_keys(zero, "cross_entropy")
    for key in ("nats_per_token", "bits_per_token", "perplexity"):
        if not (isinstance(zero[key], float) and zero[key] == math.inf):
            raise AssertionError(f"cross_entropy(...)['{key}'] with a token of probability 0: expected inf, "
                                 f"found {zero[key]!r}")


@check(points=1, cell="test_perplexity",
       name="cross_entropy of a held-out text of 30,000 tokens, as long as TinyShakespeare's validation text")
def test_long_text(student, reference, rng):
    lengths = rng.integers(1, 21, size=3000)  # lines of 1..20 tokens, about 31,500 tokens in all
    # per-token probabilities of a real word model: 1e-4 to 1, about 4.6 nats per token (perplexity near 100)
    probs = [[float(x) for x in np.exp(rng.uniform(math.log(1e-4), 0.0, size=m))] for m in lengths]
    what = f"cross_entropy of {len(probs):,} sentences, {int(lengths.sum()):,} tokens of probability 1e-4 to 1"
    found, expected = student.cross_entropy(probs), reference.cross_entropy(probs)
    _entropy_keys(found, what)
    for key in ("nats_per_token", "bits_per_token", "perplexity"):
        value = found[key]
        if isinstance(value, float) and not math.isfinite(value):
            raise AssertionError(f"{what}: expected a finite '{key}', found {value!r}; no probability is 0, but "
                                 "the product of this many probabilities is far below the smallest float (1e-308)")
        expect_close(value, expected[key], what=f"{what}: '{key}'", rtol=1e-6)


def _heldout_nats(reference, model, sentences, lambdas):
    return reference.cross_entropy([reference.sentence_probs(model, s, lambdas=lambdas)
                                    for s in sentences])["nats_per_token"]


def _mixed_nats(reference, model, sentences, lambdas) -> float:
    """_heldout_nats for any weights, from the solution's answers for one order at a time (weight 1 on order
    j: its own estimate): the interpolated probability of each token is sum_j lambdas[j-1] * P_j, so the
    solution is asked the same questions whatever weights the student chose (the student edition records them)."""
    n = model["n"]
    orders = [np.concatenate([np.asarray(reference.sentence_probs(model, s, lambdas=[float(i == j) for i in range(n)]),
                                         dtype=np.float64) for s in sentences]) for j in range(n)]  # n x (tokens,)
    mixed = sum(float(w) * p for w, p in zip(lambdas, orders))
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(mixed)))


def _tuning_case(reference, rng, markov, n):
    """A model of 70 sentences of a sparse Markov chain, and 30 held-out sentences of the same chain."""
    sentences = markov(rng, 100)
    vocab = reference.build_vocab(sentences[:70], min_count=2)
    model = reference.build_model(reference.replace_rare(sentences[:70], vocab), vocab, n)
    return model, reference.replace_rare(sentences[70:], vocab)


LOOSE, TIGHT = 0.05, 0.01  # nats per token above the best weights' held-out cross-entropy



def _tuned_and_best(student, reference, rng, markov, n):
    """(held-out nats with the student's tuned weights, with the best weights) on a fresh tuning case;
    fails first unless the weights are n numbers >= 0 that sum to 1."""
    model, heldout = _tuning_case(reference, rng, markov, n)
    lam = expect_shape(student.tune_lambdas(model, heldout), (n,), what=f"tune_lambdas of a {n}-gram model")
    if np.any(lam < 0) or abs(lam.sum() - 1) > 1e-6:
        raise AssertionError(f"tune_lambdas of a {n}-gram model: weights must be >= 0 and sum to 1 "
                             f"(within 1e-6); found {np.array2string(lam, precision=4)}")
    found = _mixed_nats(reference, model, heldout, [float(x) for x in lam])
    return found, _heldout_nats(reference, model, heldout, reference.tune_lambdas(model, heldout))

@check(points=1, cell="test_tune_lambdas",
       name="tune_lambdas: n weights, non-negative, summing to 1, within 0.05 nats per token of the best",
       visibility="visible")
def test_lambdas_valid(student, reference, rng, markov):
    for n in (2, 3):
        # valid weights that were not tuned (uniform, a constant) must not earn the point
        found, best = _tuned_and_best(student, reference, rng, markov, n)
        if not found <= best + LOOSE:
            raise AssertionError(f"tune_lambdas of a {n}-gram model: the weights are valid, but not tuned: with them "
                                 f"the held-out cross-entropy is {found:.4f} nats per token; the best weights reach "
                                 f"{best:.4f} (this check allows {LOOSE}, the hidden one {TIGHT})")


@check(points=1, cell="test_tune_lambdas",
       name="tune_lambdas: held-out cross-entropy within 0.01 nats per token of the best weights")
def test_lambdas_optimal(student, reference, rng, markov):
    for n in (2, 3, 4):
        found, best = _tuned_and_best(student, reference, rng, markov, n)
        if not found <= best + TIGHT:
            raise AssertionError(f"tune_lambdas of a {n}-gram model: with your weights the held-out cross-entropy is "
                                 f"{found:.4f} nats per token; the best weights reach {best:.4f} "
                                 f"(expected within {TIGHT})")
