"""Checks for Part 4's next-sentence prediction: the pairs, their packing into one input, and the head.

Pairs, by structure (exact): for every sentence a but the last, an IsNext pair (label 0) has b = a + 1 and a
NotNext pair (label 1) has a b in range(n) other than a and a + 1; the generator decides (the same seed draws
the same pairs, another seed others; torch's global generator is seeded alike before every call, so a function
that ignores the one it is given draws the same for every seed).

Pairs, by statistics: 100 calls on 200 sentences (19,900 pairs), each a z-test at |z| <= 6 (a false alarm below
1e-8 per test for a correct implementation): a pair's label independent of the pair before it (the NotNext rate
after a NotNext pair and after an IsNext one alike: one coin for the whole call, or labels alternating, fail);
half the pairs IsNext; as many in the first quarter of the sentences as in the rest; and for the NotNext pairs, b uniform over the n - 2 sentences allowed, by two chi-square
tests over 16 bins (false alarm below 1e-8 each): the sentence drawn, and its distance after a, (b - a) mod n,
which is uniform over 2 .. n - 1 for every a (a b drawn near a, or always after it, fails the second even where
the first cannot see it). Any method that draws b uniformly (a draw of one of n - 2 numbered past a and a + 1,
or redrawing until b is allowed) passes.

Packing: exact ids and segment ids on hidden pairs: short ones, ones that fit exactly, and ones that must lose
tokens from the end of the longer segment (a longer, b longer, the two as long).

The head: outputs and gradients against the reference with the same weights (pooler then tanh on [CLS], then
the classifier; float32 and float64).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from lmcourse.grading.checks import check, expect_shape

Z = 6.0  # |z| above this fails
P_FAIL = 1e-8  # a chi-square p-value below it fails
N, CALLS = 200, 100  # sentences per call, calls: 19,900 pairs
BINS = 16


def _pairs(student, n, seeds, repeat, what):
    """[(b, labels) per call] for each seed: `repeat` calls per seed, one generator carried through them."""
    out = student.probe("call_with_generators", fn="nsp_pairs", args=[n], seeds=list(seeds), repeat=repeat,
                        timeout=120)
    if not isinstance(out, list) or len(out) != len(seeds):
        raise AssertionError(f"{what}: the grader could not read your results")
    runs = []
    for per_seed in out:
        calls = per_seed if repeat > 1 else [per_seed]
        if not isinstance(calls, list) or len(calls) != repeat:
            raise AssertionError(f"{what}: the grader could not read your results")
        pairs = []
        for result in calls:
            if not (isinstance(result, (list, tuple)) and len(result) == 2):
                raise AssertionError(f"{what}: expected a pair (b, labels); found {type(result).__name__}")
            b = expect_shape(result[0], (n - 1,), what=f"{what}: b")
            labels = expect_shape(result[1], (n - 1,), what=f"{what}: labels")
            for name, x in (("b", b), ("labels", labels)):
                if x.dtype != np.int64:
                    raise AssertionError(f"{what}: expected {name} as int64; found {x.dtype}")
            pairs.append((b, labels))
        runs.append(pairs)
    return runs


def _two_groups(a_hits, a_n, b_hits, b_n):
    """z of the difference of two proportions (pooled); 0 where a group is empty or the rate is 0 or 1."""
    if not (a_n and b_n):
        return 0.0
    p = (a_hits + b_hits) / (a_n + b_n)
    se = np.sqrt(p * (1 - p) * (1 / a_n + 1 / b_n))
    return (a_hits / a_n - b_hits / b_n) / se if se > 0 else 0.0


def _structure(b, labels, n, what):
    a = np.arange(n - 1)
    if not np.isin(labels, (0, 1)).all():
        raise AssertionError(f"{what}: labels must be 0 (IsNext) or 1 (NotNext); found {sorted(set(labels.tolist()))}")
    nxt = labels == 0
    if (b[nxt] != a[nxt] + 1).any():
        i = int(np.argwhere(nxt & (b != a + 1))[0, 0])
        raise AssertionError(f"{what}: pair {i} is labelled 0 (IsNext) but its b is {b[i]}, not {i + 1}: an IsNext "
                             "pair's second sentence is the one that follows the first")
    bad = ~nxt & ((b == a) | (b == a + 1) | (b < 0) | (b >= n))
    if bad.any():
        i = int(np.argwhere(bad)[0, 0])
        raise AssertionError(f"{what}: pair {i} is labelled 1 (NotNext) but its b is {b[i]}: a NotNext sentence is "
                             f"drawn from range(n) without a itself ({i}) and its true successor ({i + 1})")


@check(points=1, cell="test_nsp", name="nsp_pairs: IsNext pairs consecutive, NotNext pairs never; half of each, "
                                      "independent of the sentence and of its neighbours; the NotNext sentence "
                                      "uniform over those allowed; the generator decides")
def test_nsp_pairs(student, rng):
    seed = int(rng.integers(1 << 30))
    n = 12
    what = f"nsp_pairs({n}, generator)"
    (first,), (again,), (other,) = _pairs(student, n, [seed, seed, seed + 1], 1, what)
    _structure(*first, n, what)
    if not (np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])):
        raise AssertionError(f"{what}: two calls with generators seeded alike gave different pairs; draw all "
                             "randomness from the generator you are given")
    if np.array_equal(first[0], other[0]) and np.array_equal(first[1], other[1]):
        raise AssertionError(f"{what}: generators seeded differently gave the same pairs; draw all randomness from "
                             "the generator you are given (torch.rand(..., generator=generator)), not from "
                             "torch's global generator")

    what = f"nsp_pairs({N}, generator), {CALLS} calls ({CALLS * (N - 1):,} pairs)"
    (runs,) = _pairs(student, N, [seed + 2], CALLS, what)
    for b, labels in runs:
        _structure(b, labels, N, what)
    b = np.stack([r[0] for r in runs])  # (CALLS, N - 1)
    notnext = np.stack([r[1] for r in runs]) == 1
    a = np.broadcast_to(np.arange(N - 1), b.shape)
    # neighbours first: a label that does not depend on the previous pair's (one coin per pair) is the symptom
    # of a call that tosses one coin for all its pairs, whatever the rate
    after_not, after_next = notnext[:, :-1], ~notnext[:, :-1]
    z = _two_groups(int((notnext[:, 1:] & after_not).sum()), int(after_not.sum()),
                    int((notnext[:, 1:] & after_next).sum()), int(after_next.sum()))
    if not abs(z) <= Z:
        raise AssertionError(f"{what}: a pair after a NotNext pair is NotNext at a rate of "
                             f"{(notnext[:, 1:] & after_not).sum() / max(after_not.sum(), 1):.4f}, one after an "
                             f"IsNext pair at {(notnext[:, 1:] & after_next).sum() / max(after_next.sum(), 1):.4f} "
                             f"(z = {z:+.1f}): toss every pair's coin on its own")
    total = notnext.size
    z = (notnext.mean() - 0.5) / np.sqrt(0.25 / total)
    if not abs(z) <= Z:
        raise AssertionError(f"{what}: {notnext.mean():.4f} of the pairs are NotNext (z = {z:+.1f}); each pair is "
                             "IsNext or NotNext with probability 1/2")
    early = a < (N - 1) // 4
    z = _two_groups(int(notnext[early].sum()), int(early.sum()), int(notnext[~early].sum()), int((~early).sum()))
    if not abs(z) <= Z:
        raise AssertionError(f"{what}: the first quarter of the sentences got NotNext at a rate of "
                             f"{notnext[early].mean():.4f} and the rest at {notnext[~early].mean():.4f} (z = {z:+.1f}): "
                             "whether a pair is IsNext must not depend on which sentence it starts from")
    drawn, starts = b[notnext], a[notnext]
    offset = (drawn - starts) % N  # uniform over 2 .. N - 1 for every a
    observed = np.bincount(np.minimum((offset - 2) * BINS // (N - 2), BINS - 1), minlength=BINS)
    expected = np.bincount(np.minimum(np.arange(N - 2) * BINS // (N - 2), BINS - 1), minlength=BINS) / (N - 2)
    p_value = stats.chisquare(observed, expected * len(offset)).pvalue
    if not p_value >= P_FAIL:
        raise AssertionError(f"{what}: the NotNext sentences are not spread evenly around their first sentence "
                             f"(chi-square over their distances after it, p = {p_value:.1e}); draw b uniformly "
                             "from all the sentences but a and a + 1")
    # the sentence drawn: for each a, each allowed sentence with probability 1 / (N - 2)
    allowed = np.ones((N - 1, N), dtype=bool)
    allowed[np.arange(N - 1), np.arange(N - 1)] = False
    allowed[np.arange(N - 1), np.arange(1, N)] = False
    per_start = np.bincount(starts, minlength=N - 1)
    want = (per_start[:, None] * allowed / (N - 2)).sum(axis=0)  # expected draws of each sentence
    bins = np.arange(N) * BINS // N
    observed = np.bincount(bins[drawn], minlength=BINS)
    p_value = stats.chisquare(observed, np.bincount(bins, weights=want, minlength=BINS)).pvalue
    if not p_value >= P_FAIL:
        raise AssertionError(f"{what}: the NotNext sentences are not drawn uniformly from range(n) (chi-square over "
                             f"16 bins of sentences, p = {p_value:.1e}); every sentence but a and a + 1 equally "
                             "likely")


CASES = (  # (len(a), len(b), max_len): room to spare, an exact fit, a longer, b longer, as long, one empty
    (3, 4, 16), (5, 5, 13), (9, 2, 10), (2, 9, 10), (7, 7, 11), (6, 6, 10), (0, 4, 8), (12, 0, 9), (20, 15, 24),
    (1, 1, 5),
)


@check(points=1, cell="test_nsp", name="pack_pair: [CLS] a [SEP] b [SEP] and its segment ids on hidden pairs; a pair "
                                      "too long loses tokens from the end of the longer segment")
def test_pack_pair(student, reference, rng):
    cls_id, sep_id = 101, 102
    for la, lb, max_len in CASES:
        a = rng.integers(1000, 2000, size=la).tolist()
        b = rng.integers(2000, 3000, size=lb).tolist()
        ids, types = reference.pack_pair(a, b, max_len, cls_id, sep_id)
        what = (f"pack_pair(a of {la} tokens, b of {lb}, max_len={max_len}, cls_id={cls_id}, sep_id={sep_id})"
                + (" (too long: the longer segment loses its last tokens)" if la + lb + 3 > max_len else ""))
        found = student.pack_pair(a, b, max_len, cls_id, sep_id)
        if not (isinstance(found, (list, tuple)) and len(found) == 2):
            raise AssertionError(f"{what}: expected a pair (ids, token_type_ids); found {type(found).__name__}")
        got = []
        for name, x in zip(("ids", "token_type_ids"), found):
            arr = np.asarray(x)
            if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
                raise AssertionError(f"{what}: expected {name} as a list of ints; found {type(x).__name__}")
            got.append(arr.astype(np.int64).tolist())
        if got[0] != ids:
            raise AssertionError(f"{what}: ids {got[0]}; expected {ids}")
        if got[1] != types:
            raise AssertionError(f"{what}: token_type_ids {got[1]}; expected {types} (segment 0 up to and including "
                                 "the first [SEP], segment 1 after it, the final [SEP] included)")


@check(points=1, cell="test_nsp", name="NSPHead: logits and gradients match the reference with the same weights "
                                      "(the pooler and tanh on [CLS], then the classifier; float32 and float64)")
def test_nsp_head(student, reference, rng, compare, block_weights):
    kw = dict(d_model=16)
    w = block_weights(reference.NSPHead, kw, rng)
    h = rng.normal(size=(4, 7, 16)).astype(np.float32)
    for dtype in (None, "float64"):
        compare(student, cls="NSPHead", trusted=reference, trusted_cls="NSPHead", init_kwargs=kw, weights=w,
                inputs=[h], dtype=dtype, **({} if dtype else dict(rtol=1e-3, atol=1e-4)),
                what=f"NSPHead(d_model=16) on hidden states (4, 7, 16){' in float64' if dtype else ''}")
