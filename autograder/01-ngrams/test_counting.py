"""Checks for Parts 1-2: sentences, vocabulary, padding and n-gram counts."""

from __future__ import annotations

from lmcourse.grading.checks import check, expect_equal

LINES = [
    "First Citizen:",
    "Before we proceed any further, hear me speak.",
    "",
    "   ",
    "\t",
    "What's this? 'Tis nothing!",
    "O Romeo, Romeo! wherefore art thou Romeo?",
    "KING RICHARD III: 1485",
    "  a line with leading spaces  ",
]


@check(points=1, cell="test_vocabulary", name="tokenize_lines: one word list per non-empty line",
       visibility="visible")
def test_tokenize_lines(student, reference, rng):
    for trial in range(3):
        lines = [LINES[i] for i in rng.integers(0, len(LINES), size=12)]
        text = ("\r\n" if trial == 2 else "\n").join(lines)
        expect_equal(student.tokenize_lines(text), reference.tokenize_lines(text),
                     what="tokenize_lines on a text of 12 lines, some of them empty or only spaces")
    expect_equal(student.tokenize_lines(""), [], what="tokenize_lines of an empty text")


@check(points=1, cell="test_vocabulary",
       name="build_vocab: specials first (once, even in a corpus that holds <UNK>), then words by frequency; "
            "rare words left out")
def test_build_vocab(student, reference, rng, corpus, unk):
    for min_count in (1, 2, 3):
        for holds_unk in (False, True):
            sentences = corpus(rng, n_sentences=30, n_types=15)
            if holds_unk:
                sentences = unk(rng, sentences)
            expect_equal(student.build_vocab(sentences, min_count=min_count),
                         reference.build_vocab(sentences, min_count=min_count),
                         what=f"build_vocab(min_count={min_count}) of a random corpus"
                              + (" in which some words are already <UNK>" if holds_unk else "")
                              + " (ids 0-2 are <BOS>, <EOS>, <UNK>, each listed once; then decreasing count, "
                                "ties alphabetical)")


@check(points=1, cell="test_vocabulary", name="replace_rare: words outside the vocabulary become <UNK>")
def test_replace_rare(student, reference, rng, corpus, unk):
    for holds_unk in (False, True):
        sentences = corpus(rng, n_sentences=30, n_types=15)
        if holds_unk:
            sentences = unk(rng, sentences)
        vocab = reference.build_vocab(sentences, min_count=2)
        expect_equal(student.replace_rare(sentences, vocab), reference.replace_rare(sentences, vocab),
                     what="replace_rare on a random corpus with a min_count=2 vocabulary"
                          + (" (some words already <UNK>)" if holds_unk else ""))


@check(points=1, cell="test_ngram_counts", name="pad_sentence: n-1 <BOS> in front, one <EOS> at the end",
       visibility="visible")
def test_pad_sentence(student, reference, rng, corpus):
    for n in (1, 2, 3, 5):
        for sentence in corpus(rng, n_sentences=3, max_len=3):
            expect_equal(student.pad_sentence(sentence, n), reference.pad_sentence(sentence, n),
                         what=f"pad_sentence of a {len(sentence)}-word sentence with n={n}")


@check(points=3, cell="test_ngram_counts", name="ngram_counts: exact counts of every n-gram, n = 1..5")
def test_ngram_counts_random(student, reference, rng, corpus, unk):
    for n in (1, 2, 3, 4, 5):
        sentences = corpus(rng, n_sentences=50, n_types=8, max_len=7)
        if n in (2, 4):
            sentences = unk(rng, sentences)
        expect_equal(student.ngram_counts(sentences, n), reference.ngram_counts(sentences, n),
                     what=f"{n}-gram counts of a random corpus of 50 sentences (keys: tokens joined by spaces)"
                          + (", some words already <UNK>" if n in (2, 4) else ""))


def _compare_counts(found, expected: dict, what: str) -> None:
    """Exact equality of two n-gram count dicts, reported by numbers only (no n-gram of the input)."""
    if not isinstance(found, dict):
        raise AssertionError(f"{what}: expected a dict of counts, found a {type(found).__name__}")
    missing = sum(1 for key in expected if key not in found)
    extra = sum(1 for key in found if key not in expected)
    wrong = sum(1 for key, c in expected.items() if key in found and found[key] != c)
    if missing or extra or wrong:
        total = sum(v for v in found.values() if isinstance(v, (int, float)) and not isinstance(v, bool))
        raise AssertionError(
            f"{what}: expected {len(expected):,} distinct 5-grams, {sum(expected.values()):,} in all; found "
            f"{len(found):,} keys, {total:,} in all: {missing:,} expected 5-grams missing, {extra:,} keys that are "
            f"no 5-gram of the text, {wrong:,} with a wrong count. At this size, watch for a code per window "
            "that no longer fits in 64 bits (int64 wraps around silently; float64 is exact only up to 2**53)")


@check(points=1, cell="test_ngram_counts",
       name="ngram_counts at full scale: 5-grams over a 12,000-word vocabulary (TinyShakespeare has 11,690 word types)")
def test_ngram_counts_large_vocabulary(student, reference, rng, large_corpus):
    sentences = large_corpus(rng)
    n_tokens = sum(map(len, sentences)) + len(sentences)
    _compare_counts(student.ngram_counts(sentences, 5), reference.ngram_counts(sentences, 5),
                    what=f"ngram_counts(..., 5) of {len(sentences):,} sentences, {n_tokens:,} predicted tokens "
                         "over 12,000 word types")


@check(points=1, cell="test_ngram_counts",
       name="ngram_counts edge cases: no sentences, empty sentences, n longer than every sentence")
def test_ngram_counts_edges(student, reference, rng, corpus):
    expect_equal(student.ngram_counts([], 2), {}, what="ngram_counts of no sentences")
    cases = [
        ([[]], 1, "one empty sentence, n=1"),
        ([[], [], ["w1"]], 3, "empty sentences and a one-word sentence, n=3"),
        (corpus(rng, n_sentences=10, max_len=2), 6, "sentences of at most 2 words, n=6"),
        ([["w0"] * 12], 4, "one sentence of 12 equal words, n=4"),
    ]
    for sentences, n, what in cases:
        expect_equal(student.ngram_counts(sentences, n), reference.ngram_counts(sentences, n),
                     what=f"ngram_counts for {what}")


@check(points=1, cell="test_ngram_counts", name="context_counts: c(h) = sum over w of c(h w)")
def test_context_counts(student, reference, rng, corpus):
    for n in (1, 2, 3, 4):
        counts = reference.ngram_counts(corpus(rng, n_sentences=30), n)
        expect_equal(student.context_counts(counts), reference.context_counts(counts),
                     what=f"context_counts of the {n}-gram counts of a random corpus (history keys; \"\" for unigrams)")
