"""Checks for Parts 2-3: subsampling of frequent words, the noise distribution, negative samples.

The statistical checks are never flaky: the grader's inputs and seeds are
fixed, so an implementation always gets the same outcome, and a correct one
fails them with probability about 1e-6 over the choice of implementation
(each joint test below: 1e-6; `subsample` runs three, so at most 3e-6).

Counts include zeros: a course vocabulary's special tokens (<BOS>, <EOS>,
<UNK>) are words that never occur in the corpus.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2, norm

from lmcourse.grading.checks import check, expect_close, expect_shape

P_THRESHOLD = 1e-6


@check(points=1, cell="test_subsampling", name="keep_probabilities: min(1, sqrt(t/f) + t/f) with f = count / total",
       visibility="visible")
def test_keep_probabilities(student, reference, rng):
    for sample in (1e-3, 1e-2, 0.2):
        counts = rng.integers(1, 5000, size=15)
        counts[0] = 200_000  # one very frequent word, as "the"
        counts[[3, 11]] = 0  # words that never occur, as special tokens: keep probability 1
        expect_close(student.keep_probabilities(counts, sample=sample), reference.keep_probabilities(counts, sample=sample),
                     what=f"keep_probabilities of 15 random counts, two of them 0, with sample={sample:g} "
                          "(shape (15,), values in (0, 1]; a count of 0 gives 1)")


def _int_sentences(found, n: int, what: str) -> list[np.ndarray]:
    if not isinstance(found, (list, tuple)) or len(found) != n:
        raise AssertionError(f"{what}: expected a list of {n} sentences (one per input sentence, possibly empty), "
                             f"found {type(found).__name__}" + (f" of length {len(found)}" if isinstance(found, (list, tuple)) else ""))
    out = []
    for s in found:
        arr = np.asarray(s)
        if arr.size and (arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer)):
            raise AssertionError(f"{what}: every sentence must be a 1-D list or array of integer word ids, "
                                 f"found shape {arr.shape} of {arr.dtype}")
        out.append(arr.astype(np.int64).reshape(-1))
    return out


def _is_subsequence(short: np.ndarray, long: list[int]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short.tolist())


@check(points=2, cell="test_subsampling",
       name="subsample: each word kept with its keep probability, independently, in order, seeded")
def test_subsample(student, rng):
    keep = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    sentences = [rng.integers(0, 5, size=int(m)).tolist() for m in rng.integers(0, 60, size=300)]
    what = "subsample of 300 sentences of words 0..4 with keep_prob [0, 0.1, 0.5, 0.9, 1]"
    first = _int_sentences(student.subsample(sentences, keep, 11), len(sentences), what)
    for kept, original in zip(first, sentences):
        if not _is_subsequence(kept, original):
            raise AssertionError(f"{what}: a returned sentence is not the original with some words removed "
                                 "(the survivors must keep their order)")
    again = _int_sentences(student.subsample(sentences, keep, 11), len(sentences), what)
    if any(not np.array_equal(x, y) for x, y in zip(first, again)):
        raise AssertionError(f"{what}: two calls with the same seed gave different results; draw from "
                             "np.random.default_rng(seed), never the global random state")
    other = _int_sentences(student.subsample(sentences, keep, 12), len(sentences), what)
    if all(np.array_equal(x, y) for x, y in zip(first, other)):
        raise AssertionError(f"{what}: seeds 11 and 12 gave exactly the same result; the draws must depend on the seed")
    before = np.bincount(np.concatenate([np.asarray(s, dtype=np.int64) for s in sentences]), minlength=5)
    after = np.bincount(np.concatenate(first + [np.zeros(0, np.int64)]), minlength=5)[:5]
    for w in range(5):
        p, n, k = keep[w], before[w], after[w]
        sd = np.sqrt(max(p * (1 - p), 1e-12) / n)
        if abs(k / n - p) > 6 * sd:
            raise AssertionError(f"{what}: word {w} (keep probability {p:g}) kept {k} of {n} times "
                                 f"({k / n:.3f}); expected a fraction within {6 * sd:.3f} of {p:g}")
    _expect_independent_draws(student, rng)


def _agreement(a: np.ndarray, b: np.ndarray) -> tuple[int, int, float]:
    """How often two arrays of fair-coin outcomes agree: (agreements, comparisons, two-sided p-value of
    Binomial(comparisons, 1/2)). With keep probability 1/2 the agreements of independent draws are
    themselves independent fair coins, overlapping comparisons (a, b), (b, c) included."""
    m = a.size
    hits = int((a == b).sum())
    z = (hits - m / 2) / np.sqrt(m / 4)
    return hits, m, float(2 * norm.sf(abs(z)))


def _expect_independent_draws(student, rng):
    """Jointly, not only marginally: every occurrence gets its own draw. A generator created again for each
    sentence repeats one sequence of draws in every sentence, which leaves each word's frequency right."""
    S, L = 300, 20
    sentences = [rng.permutation(L).tolist() for _ in range(S)]  # every word once a sentence: positions known
    what = (f"subsample of {S} sentences that each hold words 0..{L - 1} once, in a random order, all with keep "
            "probability 0.5")
    kept = _int_sentences(student.subsample(sentences, np.full(L, 0.5), 5), S, what)
    survived = np.zeros((S, L), dtype=bool)  # survived[i, w]: word w of sentence i was kept
    for i, (k, s) in enumerate(zip(kept, sentences)):
        if not _is_subsequence(k, s) or len(set(k.tolist())) != len(k):
            raise AssertionError(f"{what}: a returned sentence is not the original with some words removed "
                                 "(the survivors must keep their order)")
        survived[i, k] = True
    by_position = np.take_along_axis(survived, np.array(sentences), axis=1)  # (S, L): the draw at each position
    for label, a, b in (("the same position of consecutive sentences", by_position[:-1], by_position[1:]),
                        ("neighbouring positions of one sentence", by_position[:, :-1], by_position[:, 1:]),
                        ("the same word in consecutive sentences", survived[:-1], survived[1:])):
        hits, m, p_joint = _agreement(a, b)
        if p_joint < P_THRESHOLD:
            raise AssertionError(f"{what}: the draws at {label} are not independent: {hits} of {m} pairs of them "
                                 f"agree (both kept or both dropped), expected about {m / 2:.0f} (p-value "
                                 f"{p_joint:.1e}). Draw once per occurrence, from one generator for the whole call")


@check(points=2, cell="test_negatives", name="noise_distribution: proportional to count ** 0.75, sums to 1")
def test_noise_distribution(student, reference, rng):
    counts = rng.integers(1, 2000, size=20)
    counts[[2, 13]] = 0  # words that never occur, as special tokens: probability 0
    what = "noise_distribution of 20 random counts, two of them 0"
    found = expect_shape(student.noise_distribution(counts), (20,), what=what)
    found = found.astype(np.float64)
    if not np.isclose(found.sum(), 1.0) or (found < 0).any():
        raise AssertionError(f"{what}: expected probabilities >= 0 summing to 1, found a sum of {found.sum():.6g}")
    if found[[2, 13]].any():
        raise AssertionError(f"{what}: a word of count 0 is never drawn as noise (probability 0); found "
                             f"{found[[2, 13]].max():.3g}")
    # The exponent, read off two words whose counts differ by a factor of 16.
    pair = student.noise_distribution(np.array([16, 1, 10]))
    ratio = float(np.asarray(pair, dtype=np.float64)[0] / np.asarray(pair, dtype=np.float64)[1])
    if not np.isclose(ratio, 8.0, rtol=1e-6):
        exponent = np.log(ratio) / np.log(16) if ratio > 0 else float("nan")
        raise AssertionError(f"noise_distribution of counts [16, 1, 10]: a count 16 times larger should be "
                             f"16 ** 0.75 = 8 times more probable; found {ratio:.4g} times (exponent {exponent:.3g})")
    expect_close(found, reference.noise_distribution(counts), what=what)
    expect_close(student.noise_distribution(counts, power=0.5), reference.noise_distribution(counts, power=0.5),
                 what=f"{what}, with power=0.5")


@check(points=1, cell="test_negatives", name="draw_negatives: shape (n, k), seeded, frequencies follow the noise distribution")
def test_draw_negatives(student, rng):
    noise = rng.dirichlet(np.ones(8))
    noise[3] = 0.0
    noise /= noise.sum()
    n, k = 2000, 5
    what = f"draw_negatives(noise over 8 words, n={n}, k={k})"
    found = expect_shape(student.draw_negatives(noise, n, k, 5), (n, k), what=what)
    if not np.issubdtype(found.dtype, np.integer):
        raise AssertionError(f"{what}: expected integer word ids, found dtype {found.dtype}")
    if found.min() < 0 or found.max() >= 8:
        raise AssertionError(f"{what}: word ids must be in 0..7, found {found.min()}..{found.max()}")
    if (found == 3).any():
        raise AssertionError(f"{what}: drew word 3 {(found == 3).sum()} times, but its probability is 0")
    again = np.asarray(student.draw_negatives(noise, n, k, 5))
    if not np.array_equal(found, again):
        raise AssertionError(f"{what}: two calls with the same seed gave different draws; use np.random.default_rng(seed)")
    observed = np.bincount(found.reshape(-1), minlength=8)
    expected = n * k * noise
    keep = expected > 0
    stat = float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    p_value = float(chi2.sf(stat, int(keep.sum()) - 1))
    if p_value < P_THRESHOLD:
        worst = int(np.argmax(np.abs(observed - expected)))
        raise AssertionError(f"{what}: the {n * k} draws do not follow the noise distribution (chi-square {stat:.1f}, "
                             f"p-value {p_value:.1e}); e.g. word {worst} came {observed[worst]} times, "
                             f"expected about {expected[worst]:.0f}")
    # Jointly, not only marginally: every draw is independent of the others, so two draws (next to each
    # other in a row, or in the same place of consecutive rows) are the same word with probability
    # sum(p_i^2). One draw repeated along a row, or one row repeated, keeps the frequencies above.
    same = float((noise ** 2).sum())
    for label, a, b in (("the k draws of one pair", found[:, :-1], found[:, 1:]),
                        ("the draws of consecutive pairs", found[:-1], found[1:])):
        m = a.size
        hits = int((a == b).sum())
        z = (hits - m * same) / np.sqrt(m * same * (1 - same))
        p_joint = float(2 * norm.sf(abs(z)))
        if p_joint < P_THRESHOLD:
            raise AssertionError(f"{what}: {label} are not independent: {hits} of {m} neighbouring draws are the "
                                 f"same word, expected about {m * same:.0f} for independent draws (p-value "
                                 f"{p_joint:.1e}). Draw all n x k ids independently, from one generator")
