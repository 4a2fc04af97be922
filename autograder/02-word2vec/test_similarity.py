"""Checks for Part 7: cosine similarity, nearest neighbours, analogies that exclude the query words.

Random vectors get row lengths spread over four orders of magnitude, so a
ranking by dot product (no normalisation) differs from the ranking by cosine.

Ties (the spec: the lower id first) need cosines that are exactly equal in
whatever order a student's code sums and divides: `_tied` draws rows from
24 directions whose unit vectors are exact in binary, all of length 2**40,
so every dot product and length is exact (and an epsilon added to a length,
up to 1e-4, is lost in rounding); rows that repeat a direction tie exactly.
An analogy's target vector is unit(b) - unit(a) + unit(c): with a and b of
the same vector it is unit(c), exactly, and its ties are words of c's own
vector, which every way of computing (normalising the target first, with an
epsilon, in float32) scores bit for bit alike, as they are the same row.
"""

from __future__ import annotations

import itertools

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_equal, expect_shape


def _spread_lengths(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """(n, d) random directions with lengths from 0.01 to 100."""
    return rng.normal(size=(n, d)) * 10.0 ** rng.uniform(-2, 2, size=(n, 1))


def _tied(rng: np.random.Generator, n: int, kinds: int = 24) -> np.ndarray:
    """(n, 4) rows drawn from `kinds` of 24 directions (entries in {0, +-1}, four or one of them non-zero),
    all of length 2**40."""
    directions = np.vstack([np.array(list(itertools.product((-1.0, 1.0), repeat=4))),  # length 2
                            2.0 * np.eye(4), -2.0 * np.eye(4)])  # length 2
    chosen = directions[rng.permutation(len(directions))[:kinds]]
    return chosen[rng.integers(0, kinds, size=n)] * 2.0 ** 39


@check(points=2, cell="test_similarity", name="cosine_similarity: normalised dot products, between -1 and 1")
def test_cosine(student, reference, rng):
    A, B = _spread_lengths(rng, 5, 4), _spread_lengths(rng, 7, 4)
    found = expect_shape(student.cosine_similarity(A, B), (5, 7), what="cosine_similarity of A (5, 4) and B (7, 4)")
    if np.nanmax(np.abs(found)) > 1 + 1e-9:
        raise AssertionError(f"cosine_similarity of rows of lengths 0.01..100: a cosine is between -1 and 1, found "
                             f"{float(np.nanmax(np.abs(found))):.4g}; divide by the lengths of both vectors")
    expect_close(found, reference.cosine_similarity(A, B),
                 what="cosine_similarity of A (5, 4) and B (7, 4) with row lengths from 0.01 to 100", rtol=1e-6, atol=1e-9)


@check(points=1, cell="test_similarity",
       name="nearest_neighbours: the k most similar words by cosine, the word itself left out, ties to the lower id")
def test_nearest_neighbours(student, reference, rng):
    E = _spread_lengths(rng, 30, 6)
    for word_id, k in ((0, 5), (7, 1), (29, 10)):
        found = student.nearest_neighbours(E, word_id, k)
        if word_id in np.asarray(found).reshape(-1).tolist():
            raise AssertionError(f"nearest_neighbours(E, {word_id}, k={k}) of 30 random vectors: the word itself "
                                 "is in the result; leave it out")
        expect_equal(np.asarray(found).reshape(-1).tolist(), reference.nearest_neighbours(E, word_id, k).tolist(),
                     what=f"nearest_neighbours(E, {word_id}, k={k}) of 30 random vectors of lengths 0.01..100 "
                          "(word ids, most similar first)")
    E = _tied(rng, 40)
    for word_id, k in ((3, 12), (20, 39), (39, 5)):
        expect_equal(np.asarray(student.nearest_neighbours(E, word_id, k)).reshape(-1).tolist(),
                     reference.nearest_neighbours(E, word_id, k).tolist(),
                     what=f"nearest_neighbours(E, {word_id}, k={k}) of 40 vectors among which many have exactly the "
                          "same cosine with the word (word ids, most similar first; equal cosines: the lower id first)")


@check(points=2, cell="test_analogy", name="analogy: closest to unit(b) - unit(a) + unit(c), never a query word")
def test_analogy(student, reference, rng):
    E = _spread_lengths(rng, 40, 5)
    Q = 30
    a, b, c = (rng.permutation(40)[:Q] for _ in range(3))
    ok = (a != b) & (a != c) & (b != c)
    a, b, c = a[ok], b[ok], c[ok]
    what = f"analogy(E, a, b, c) for {len(a)} questions on 40 random vectors"
    found = expect_shape(student.analogy(E, a, b, c), (len(a),), what=what)
    queried = [q for q in range(len(a)) if int(found[q]) in (a[q], b[q], c[q])]
    if queried:
        q = queried[0]
        raise AssertionError(f"{what}: {len(queried)} answer(s) are one of the question's own words, e.g. question "
                             f"{q} (a={a[q]}, b={b[q]}, c={c[q]}) answered {int(found[q])}; exclude a, b and c")
    expect_equal(found.astype(np.int64).tolist(), reference.analogy(E, a, b, c).tolist(), what=what + " (word ids)")
    # Ties: a and b have the same vector, so unit(b) - unit(a) + unit(c) = unit(c) exactly, and the words that
    # share c's vector (or the next best cosine) tie.
    E = _tied(rng, 40, kinds=6)  # about 7 words share each vector
    group = [np.flatnonzero((E == E[w]).all(axis=1)) for w in range(40)]  # the words with w's vector
    questions = []
    for c in rng.permutation(40)[:10]:
        pairs = [g for g in group if len(g) >= 2 and not np.array_equal(E[g[0]], E[c])]
        a, b = rng.permutation(pairs[int(rng.integers(len(pairs)))])[:2]
        questions.append((a, b, c))
    a, b, c = (np.array(x) for x in zip(*questions))
    what = (f"analogy(E, a, b, c) for {len(a)} questions on 40 vectors, several words sharing each vector, so that "
            "many words have exactly the same cosine with the target vector (equal cosines: the lowest id)")
    found = expect_shape(student.analogy(E, a, b, c), (len(a),), what=what)
    expect_equal(found.astype(np.int64).tolist(), reference.analogy(E, a, b, c).tolist(), what=what + " (word ids)")
