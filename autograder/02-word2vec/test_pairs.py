"""Checks for Part 1: skip-gram (centre, context) pairs, exact at sentence edges."""

from __future__ import annotations

from lmcourse.grading.checks import check, expect_equal


def _multiset_message(found: list, expected: list, what: str) -> str | None:
    """Why two sorted pair lists differ (a missing and an extra pair, as examples), or None."""
    if found == expected:
        return None
    from collections import Counter
    missing = Counter(expected) - Counter(found)
    extra = Counter(found) - Counter(expected)
    parts = [f"{what}: expected {len(expected)} pairs, found {len(found)}"]
    if missing:
        parts.append(f"{sum(missing.values())} expected pair(s) missing, e.g. (centre, context) = {next(iter(missing))}")
    if extra:
        parts.append(f"{sum(extra.values())} unexpected pair(s), e.g. {next(iter(extra))}")
    return "; ".join(parts)


@check(points=2, cell="test_skipgram_pairs", name="skipgram_pairs: every (centre, context) pair of the window, window 1..4")
def test_pairs_random(student, reference, rng, corpus, pairs_of):
    for window in (1, 2, 3, 4):
        sentences = corpus(rng, n_sentences=25, n_types=10, max_len=9)
        found = pairs_of(student.skipgram_pairs(sentences, window), f"skipgram_pairs(window={window})")
        expected = pairs_of(reference.skipgram_pairs(sentences, window), "reference")
        problem = _multiset_message(found, expected, f"skipgram_pairs of 25 random sentences, window={window} "
                                                     "(pairs compared in any order)")
        if problem:
            raise AssertionError(problem)


@check(points=1, cell="test_skipgram_pairs",
       name="skipgram_pairs: no pair crosses a sentence boundary; empty, one-word and short sentences")
def test_pairs_sentence_edges(student, reference, rng, pairs_of):
    # Every sentence uses its own word ids, so a pair that crosses a boundary is easy to name.
    cases = [
        ([[0, 1, 2], [3, 4, 5]], 2, "two 3-word sentences, window 2"),
        ([[0], [1], [2, 3]], 3, "one-word sentences and a 2-word sentence, window 3"),
        ([[], [0, 1], [], [2, 3, 4, 5, 6]], 4, "empty sentences and a window wider than a sentence"),
        ([[0, 1, 2, 3, 4, 5, 6, 7], [8, 9]], 1, "a long sentence then a short one, window 1"),
        ([[]], 2, "one empty sentence"),
        ([], 2, "no sentences"),
    ]
    for sentences, window, what in cases:
        found = pairs_of(student.skipgram_pairs(sentences, window), f"skipgram_pairs for {what}")
        sentence_of = {w: i for i, s in enumerate(sentences) for w in s}
        crossing = [(c, o) for c, o in found if sentence_of.get(c, -1) != sentence_of.get(o, -2)]
        if crossing:
            raise AssertionError(f"skipgram_pairs for {what}: {len(crossing)} pair(s) join words of different "
                                 f"sentences, e.g. {crossing[0]}; a window stops at the end of its sentence")
        problem = _multiset_message(found, pairs_of(reference.skipgram_pairs(sentences, window), "reference"),
                                    f"skipgram_pairs for {what}")
        if problem:
            raise AssertionError(problem)


@check(points=1, cell="test_skipgram_pairs", name="skipgram_pairs: a position is never its own context",
       visibility="visible")
def test_pairs_no_centre(student, rng, pairs_of):
    # Distinct word ids: a pair (w, w) can only come from pairing a position with itself.
    for window in (1, 3):
        sentence = rng.permutation(12).tolist()
        found = pairs_of(student.skipgram_pairs([sentence], window), f"skipgram_pairs(window={window})")
        selfs = [p for p in found if p[0] == p[1]]
        if selfs:
            raise AssertionError(f"skipgram_pairs of one sentence of 12 different words, window={window}: found "
                                 f"{len(selfs)} pair(s) of a word with itself, e.g. {selfs[0]}; the offset j = 0 "
                                 "(the centre) is not part of the window")
        expected_count = 2 * sum(12 - j for j in range(1, window + 1))
        expect_equal(len(found), expected_count,
                     what=f"number of pairs of one 12-word sentence with window={window} (2 per offset j and position)")
