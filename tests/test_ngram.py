"""lmcourse.ngram.KneserNey: Unit 1's interpolated Kneser–Ney, vectorised.

Unit 1's chapter checks at build time that it reproduces the chapter's own
dictionary-based perplexities; these tests check the definition itself on
texts small enough to count by hand, and the properties every smoothed
model must have.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lmcourse.ngram import BOS_ID, EOS_ID, KneserNey

D = 0.75


def test_a_bigram_by_hand():
    # <BOS> 3 4 3 4 5 <EOS>: continuation counts N1+(. w) are 2 for 3 (after <BOS> and 4), 1 for 4, 5, <EOS>
    lm = KneserNey([[3, 4, 3, 4, 5]], n=2, vocab_size=5)
    unigram_4 = (1 - D) / 5 + D * 4 / 5 * (1 / 5)  # 4 types of continuation, total 5
    expected = (2 - D) / 2 + D * 1 / 2 * unigram_4  # "3" was followed twice, always by "4"
    assert lm.distribution([3])[4] == pytest.approx(expected, rel=1e-12)
    assert np.exp(lm.log_probs([[3, 4]])[0]) == pytest.approx(
        [(1 - D) / 1 + D * 1 / 1 * ((2 - D) / 5 + D * 4 / 5 / 5),  # P(3 | <BOS>): <BOS> was followed once, by 3
         expected,
         D * 2 / 2 * ((1 - D) / 5 + D * 4 / 5 / 5)])  # P(<EOS> | 4): "4" was followed by 3 and 5, never by <EOS>


def test_ngrams_after_bos_keep_their_ordinary_counts_and_two_bos_read_one_order_down():
    # A trigram model of three lines, each "7 x". Its order-2 counts are continuation counts, except for
    # (<BOS>, 7): only padding can stand before it, so it keeps its ordinary count, 3. The history of a line's
    # first token is <BOS> <BOS>, read one order down as <BOS>.
    lm = KneserNey([[7, 8], [7, 9], [7, 8]], n=3, vocab_size=5)
    # order 1: N1+(. w) over the bigrams (<BOS>,7) (7,8) (7,9) (8,<EOS>) (9,<EOS>): 1 for 7, 8, 9; 2 for <EOS>
    unigram_7 = (1 - D) / 5 + D * 4 / 5 * (1 / 5)
    bigram_7 = (3 - D) / 3 + D * 1 / 3 * unigram_7  # c(<BOS>, 7) = 3 (ordinary), c(<BOS>) = 3, one follower
    assert lm.distribution([])[7] == pytest.approx(bigram_7, rel=1e-12)
    # a continuation count would be 1 (one distinct token, <BOS>, before it): a different, wrong, number
    assert lm.distribution([])[7] != pytest.approx((1 - D) / 1 + D * 1 / 1 * unigram_7)
    # order 3 after <BOS> 7: ordinary counts, "8" twice and "9" once
    after_7 = lm.distribution([7])
    assert after_7[8] > after_7[9] > after_7[7]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("eos", [True, False])
def test_every_history_gives_a_distribution(n, eos):
    rng = np.random.default_rng(n)
    V = 12  # ids 0..11: <BOS>, <EOS>, then ten tokens
    sequences = [rng.integers(2, V, size=rng.integers(0, 30)) for _ in range(40)]
    lm = KneserNey(sequences, n, vocab_size=V - 1 if eos else V - 2, eos=eos)
    for history in [[], [2], [5, 5, 5], rng.integers(2, V, size=6).tolist(), [11, 10, 11, 10]]:
        p = lm.distribution(history)
        assert p[BOS_ID] == 0
        predictable = np.arange(V) != BOS_ID if eos else np.arange(V) > EOS_ID
        assert p[predictable].sum() == pytest.approx(1.0, abs=1e-12), (history, p)
        assert np.all(p[predictable] > 0)


def test_log_probs_line_up_with_the_sequences():
    lm = KneserNey([[2, 3, 4], [3, 4]], n=3, vocab_size=4)
    out = lm.log_probs([[2, 3], [], [4, 4, 4]])
    assert [len(a) for a in out] == [3, 1, 4]  # every token and <EOS>
    assert all(np.all(np.isfinite(a)) and np.all(a < 0) for a in out)
    assert lm.cross_entropy([[2, 3], [], [4, 4, 4]]) == pytest.approx(-np.concatenate(out).mean())
    p = lm.distribution([2, 3])
    assert math.exp(out[0][0]) == pytest.approx(lm.distribution([])[2])
    assert math.exp(out[0][2]) == pytest.approx(p[EOS_ID])


def test_codes_do_not_overflow_with_a_large_vocabulary_and_order():
    """Token ids up to 10^6 at n = 6: (10^6)^6 overflows int64; relabelling the tokens must change nothing."""
    rng = np.random.default_rng(0)
    small = [rng.integers(2, 30, size=50) for _ in range(30)]
    relabel = np.arange(30)
    relabel[2:] = 1_000_000 - 7919 * np.arange(28)  # large, scattered ids; <BOS> and <EOS> stay 0 and 1
    large = [relabel[s] for s in small]
    held_out = [rng.integers(2, 30, size=40) for _ in range(5)]
    a = KneserNey(small, 6, vocab_size=29).log_probs(held_out)
    b = KneserNey(large, 6, vocab_size=29).log_probs([relabel[s] for s in held_out])
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12)


def test_bad_arguments_say_what_is_expected():
    with pytest.raises(ValueError, match="order n must be at least 1"):
        KneserNey([[2]], 0, vocab_size=3)
    with pytest.raises(ValueError, match="discount D must be in"):
        KneserNey([[2]], 2, vocab_size=3, discount=1.5)
    with pytest.raises(ValueError, match="non-negative"):
        KneserNey([[2, -4]], 2, vocab_size=3)


def test_doctests():
    import doctest

    from lmcourse import ngram
    failures, tried = doctest.testmod(ngram)
    assert tried > 0 and failures == 0
