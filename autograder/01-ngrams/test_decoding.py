"""Checks for Part 6: greedy decoding, temperature, seeded sampling.

The sampling checks are statistical but never flaky: they draw with the
fixed seeds 0..N_DRAWS-1, so for a given implementation the outcome is
always the same, and a correct sampler fails them with probability about
1e-6 (the chi-square threshold), once, over the choice of implementation.
They test single tokens (their marginal distribution) and pairs of
consecutive tokens (the joint one, which a sampler that reuses its random
number at every step gets wrong). Properties that a sampler ignoring the
model also has (seeded, stops at max_len) earn their point only if every
sampled word is possible under the model.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2

from lmcourse.grading.checks import check, expect_close, expect_equal

N_DRAWS = 1000  # per distribution; a wrong temperature moves chi-square far past the threshold
P_THRESHOLD = 1e-6
SPECIALS = ("<BOS>", "<EOS>", "<UNK>")

# After "a": b 6/12, c 3/12, d 2/12, <EOS> 1/12: far from uniform, so a wrong temperature shows.
DIE = [["a", "b"]] * 6 + [["a", "c"]] * 3 + [["a", "d"]] * 2 + [["a"]]
# A cycle a b a b ... whose most probable continuation never ends.
CYCLE = [["a", "b"] * 6 + ["a"]]
# A bigram model in which <BOS>, a, b and c are each followed by their own distribution: each of the 12
# possible outcomes of two steps (<EOS> at once, one word then <EOS>, two words) has probability 0.017 or
# more (17 or more of N_DRAWS expected), and no two rows are alike.
CHAIN = ([["a", "b", "c"]] * 3 + [["a", "c"]] * 2 + [["a", "a"]] + [["b", "a"]] * 2 + [["b"]] * 2
         + [["c", "b", "b"]] + [["c", "a", "b"]] + [["b", "c", "a"]] + [[]])


def _model(reference, sentences, n=2):
    vocab = reference.build_vocab(sentences)
    return reference.build_model(sentences, vocab, n)


def _chi_square(found_tokens: list[str], probs: np.ndarray, vocab: list[str], what: str,
                kind: str = "a vocabulary token") -> None:
    """Fail when the draws are implausible under `probs` (p-value below P_THRESHOLD)."""
    n = len(found_tokens)
    observed = np.zeros(len(vocab))
    index = {t: i for i, t in enumerate(vocab)}
    for t in found_tokens:
        if t not in index:
            raise AssertionError(f"{what}: sampled {t!r}, which is not {kind}")
        observed[index[t]] += 1
    expected = n * probs
    impossible = (expected == 0) & (observed > 0)
    if impossible.any():
        t = vocab[int(np.argmax(impossible))]
        raise AssertionError(f"{what}: sampled {t!r} {int(observed[index[t]])} times out of {n}, "
                             "but its probability is 0")
    keep = expected > 0
    stat = float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    dof = int(keep.sum()) - 1
    p_value = float(chi2.sf(stat, dof)) if dof > 0 else 1.0
    if p_value < P_THRESHOLD:
        worst = int(np.argmax(np.where(keep, np.abs(observed - expected), -1)))
        raise AssertionError(
            f"{what}: over {n} draws with seeds 0..{n - 1} the frequencies do not follow the expected distribution "
            f"(chi-square {stat:.1f} with {dof} degrees of freedom, p-value {p_value:.1e} < {P_THRESHOLD:g}); "
            f"e.g. {vocab[worst]!r} came {int(observed[worst])} times, expected about {expected[worst]:.0f}")


def _draws(student, model, max_len, temperature=1.0, prompt=None):
    """sample(model, seed, ...) for the seeds 0..N_DRAWS-1, in one round trip."""
    draws = student.probe("call_many", fn="sample",
                          common=dict(model=model, prompt=prompt, max_len=max_len, temperature=temperature),
                          each=[{"seed": seed} for seed in range(N_DRAWS)])
    for words in draws:
        if not isinstance(words, list) or len(words) > max_len or not all(isinstance(w, str) for w in words):
            raise AssertionError(f"sample(..., max_len={max_len}): expected a list of at most {max_len} words, "
                                 f"found {words!r:.80}")
    return draws


def _first_tokens(student, model, prompt, temperature):
    return [words[0] if words else "<EOS>" for words in _draws(student, model, 1, temperature, prompt)]


def _supports(reference, model) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The tokens the model can put after each history it knows, and after one it does not: the solution's
    next_token_probs > 0 (default settings), asked once per history of the model's own table, whatever the
    student sampled (so the student edition's record of the solution's answers holds every one)."""
    n = model["n"]
    supports = {}
    for context in model["contexts"][n - 1]:
        history = [t for t in context.split(" ") if t and t != "<BOS>"]  # the padding is not history
        supports[context] = reference.next_token_probs(model, history) > 0
    unseen = reference.next_token_probs(model, ["<EOS>"] * (n - 1)) > 0  # nothing follows <EOS>: never a history
    return supports, unseen


def _expect_possible(reference, model, words, what, prompt=None, max_len=None):
    """Fail unless every sampled word has probability > 0 after the words before it (and so has the stop).

    The correctness condition that properties such as "the same seed gives the same text" are gated
    on: a sampler that ignores the model satisfies those too.
    """
    supports, unseen = _supports(reference, model)
    n, index = model["n"], {t: i for i, t in enumerate(model["vocab"])}

    def possible(history):  # the order-n history as next_token_probs reads it: <BOS>-padded, <UNK> for unknowns
        padded = ["<BOS>"] * (n - 1) + [w if w in index else "<UNK>" for w in history]
        return supports.get(" ".join(padded[len(padded) - (n - 1):]), unseen)

    history = list(prompt or [])
    for t, word in enumerate(words):
        if not possible(history)[index.get(word, 2)]:
            raise AssertionError(f"{what}: word {t + 1} of the sample has probability 0 after the words before it: "
                                 "the sample does not come from the model")
        history.append(word)
    if max_len is not None and len(words) < max_len and not possible(history)[1]:
        raise AssertionError(f"{what}: the sample stops after {len(words)} words, where the model gives <EOS> "
                             "probability 0")


@check(points=1, cell="test_greedy", name="greedy_decode: the most probable token at every step")
def test_greedy_matches(student, reference, rng, model_of, histories):
    for n in (2, 3):
        model = model_of(rng, n, n_sentences=40, n_types=8, allow_empty=False)
        for prompt in [None] + histories(rng, model, count=3, max_len=3):
            for kwargs in (dict(), dict(k=0.5)):
                expect_equal(student.greedy_decode(model, prompt=prompt, max_len=15, **kwargs),
                             reference.greedy_decode(model, prompt=prompt, max_len=15, **kwargs),
                             what=f"greedy_decode of a {n}-gram model from a "
                                  f"{len(prompt or [])}-word prompt, max_len=15"
                                  + (", k=0.5" if kwargs else ""))


@check(points=1, cell="test_greedy", name="greedy_decode: stops at <EOS> or after max_len tokens",
       visibility="visible")
def test_greedy_stops(student, reference):
    cycle = _model(reference, CYCLE)
    for max_len in (1, 5, 8):
        found = student.greedy_decode(cycle, max_len=max_len)
        expect_equal(found, reference.greedy_decode(cycle, max_len=max_len),
                     what=f"greedy_decode of a model that never chooses <EOS>, max_len={max_len} "
                          f"(expected {max_len} words)")
    prompt = ["a", "b", "a"]  # max_len counts the added words only, not the prompt's
    expect_equal(student.greedy_decode(cycle, prompt=prompt, max_len=5),
                 reference.greedy_decode(cycle, prompt=prompt, max_len=5),
                 what="greedy_decode of a model that never chooses <EOS>, after a 3-word prompt, max_len=5 "
                      "(expected 5 added words)")
    die = _model(reference, DIE)
    expect_equal(student.greedy_decode(die, prompt=["a", "d"]), [],
                 what="greedy_decode after a prompt whose most probable next token is <EOS>")


@check(points=1, cell="test_sampling",
       name="apply_temperature: softmax(log p / temperature), for 7 tokens and for 6,407 at temperature 0.01")
def test_temperature(student, reference, rng):
    for temperature in (0.25, 0.5, 1.0, 2.0, 5.0):
        p = rng.dirichlet(np.ones(7))
        p[rng.integers(0, 7)] = 0.0
        p /= p.sum()
        expect_close(student.apply_temperature(p, temperature), reference.apply_temperature(p, temperature),
                     what=f"apply_temperature of a 7-token distribution (one probability 0), "
                          f"temperature={temperature:g}", rtol=1e-7, atol=1e-12)
    # A history seen too little to tell its 6,406 possible next tokens apart, at a low temperature:
    # log p / temperature is near -876 for every token, and exp of that is 0 in floating point.
    flat = np.r_[0.0, rng.uniform(1.0, 1.1, size=6406)]
    flat /= flat.sum()
    expect_close(student.apply_temperature(flat, 0.01), reference.apply_temperature(flat, 0.01),
                 what="apply_temperature of a nearly flat distribution over 6,407 tokens (the size of the "
                      "course's word vocabulary; P(<BOS>) = 0), temperature=0.01", rtol=1e-7, atol=1e-12)


@check(points=1, cell="test_sampling", name="sample: the same seed gives the same text, different seeds differ",
       visibility="visible")
def test_seeded(student, reference, rng, markov):
    sentences = markov(rng, 60)  # each word has at most 2 successors: a sampler that ignores them shows at once
    model = reference.build_model(sentences, reference.build_vocab(sentences), 2)
    samples = []
    for seed in range(5):
        first = student.sample(model, seed, max_len=20)
        again = student.sample(model, seed, max_len=20)
        expect_equal(again, first, what=f"sample(model, seed={seed}) called twice (the same seed must give the "
                                        "same sentence)")
        samples.append(tuple(first))
    for seed in range(5, 20):
        samples.append(tuple(student.sample(model, seed, max_len=20)))
    for seed, words in enumerate(samples):
        if not all(isinstance(w, str) for w in words):
            raise AssertionError(f"sample(model, seed={seed}): expected a list of words (str), found {list(words)!r:.80}")
        _expect_possible(reference, model, list(words), what=f"sample(model, seed={seed}, max_len=20)", max_len=20)
    if len(set(samples)) < 2:
        raise AssertionError("sample: seeds 0..19 all gave the same sentence from a model with many choices; "
                             "the draws must depend on the seed")


@check(points=1, cell="test_sampling", name="sample: tokens follow the model's next-token distribution")
def test_sampling_distribution(student, reference):
    die = _model(reference, DIE)
    probs = reference.next_token_probs(die, ["a"])
    _chi_square(_first_tokens(student, die, ["a"], 1.0), probs, die["vocab"],
                what="the token sampled after the prompt ['a'] (temperature 1)")


@check(points=1, cell="test_sampling", name="sample: temperature reshapes the distribution before sampling")
def test_sampling_temperature(student, reference):
    die = _model(reference, DIE)
    for temperature in (0.5, 2.0):
        probs = reference.apply_temperature(reference.next_token_probs(die, ["a"]), temperature)
        _chi_square(_first_tokens(student, die, ["a"], temperature), probs, die["vocab"],
                    what=f"the token sampled after the prompt ['a'] at temperature {temperature:g}")


@check(points=1, cell="test_sampling", name="sample: stops at <EOS> or after max_len words, no special tokens")
def test_sampling_stops(student, reference, rng, model_of):
    model = model_of(rng, 3, n_sentences=40, n_types=8, allow_empty=False)
    for seed in range(10):
        words = student.sample(model, seed, max_len=6, temperature=1.5)
        if not isinstance(words, list) or len(words) > 6:
            raise AssertionError(f"sample(..., max_len=6): expected a list of at most 6 words, found {words!r:.80}")
        bad = [w for w in words if w in ("<BOS>", "<EOS>")]
        if bad:
            raise AssertionError(f"sample: the returned words contain {bad[0]}; return only the generated words")
        _expect_possible(reference, model, words, what=f"sample(model, seed={seed}, max_len=6, temperature=1.5)",
                         max_len=6)
    cycle = _model(reference, CYCLE)  # at temperature 0.05, P(<EOS> | a) is about 1e-17: it goes on to max_len
    for seed in range(3):
        expect_equal(len(student.sample(cycle, seed, max_len=7, temperature=0.05)), 7,
                     what="number of words sampled at temperature 0.05 from a model whose next token is "
                          "almost surely not <EOS>, max_len=7")
        expect_equal(len(student.sample(cycle, seed, prompt=["a", "b", "a"], max_len=7, temperature=0.05)), 7,
                     what="number of words sampled after a 3-word prompt (max_len counts the added words only) "
                          "at temperature 0.05 from a model whose next token is almost surely not <EOS>, max_len=7")
    die = _model(reference, DIE)  # P(<EOS> | d) = 1: must stop at once
    expect_equal(student.sample(die, 0, prompt=["a", "d"], max_len=5), [],
                 what="sample after a prompt whose only continuation is <EOS>")


@check(points=1, cell="test_sampling",
       name="sample: every token drawn afresh from P(next | the words so far): pairs of consecutive tokens")
def test_sampling_pairs(student, reference):
    """The joint distribution of the first two tokens, not only each one's marginal.

    A sampler that draws the second token with the same random number as the
    first (a generator re-made from the seed at every step, one number for the
    whole sentence), or from P(next | the prompt) instead of P(next | the words
    so far), gets the first token right and this pair wrong. Chi-square over the
    12 possible outcomes of max_len=2, false-alarm rate P_THRESHOLD.
    """
    chain = _model(reference, CHAIN)
    outcomes, probs = [], []
    first = reference.next_token_probs(chain, [])
    for i, t1 in enumerate(chain["vocab"]):
        if first[i] == 0:
            continue
        if t1 == "<EOS>":
            outcomes.append("<EOS>")
            probs.append(first[i])
            continue
        second = reference.next_token_probs(chain, [t1])
        for j, t2 in enumerate(chain["vocab"]):
            if second[j] > 0:
                outcomes.append(f"{t1} <EOS>" if t2 == "<EOS>" else f"{t1} {t2}")
                probs.append(first[i] * second[j])
    found = [" ".join(words) + (" <EOS>" if len(words) < 2 else "") if words else "<EOS>"
             for words in _draws(student, chain, max_len=2)]
    _chi_square(found, np.array(probs), outcomes, kind="a possible outcome (at most 2 words)",
                what="the first two tokens sampled from a bigram model whose rows all differ (max_len=2, "
                     "temperature 1)")
