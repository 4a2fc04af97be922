"""Checks for Part 1: special tokens split off, and BPE merges equal to the reference trainer's.

The merges are compared exactly, merge by merge, on texts chosen so that each common mistake changes them:
random strings over a few characters (ties decide most merges there, so a tie rule other than "the greatest
pair of byte strings" shows at once), runs of one letter (overlapping pairs: "aaaa" holds (a, a) three times),
text in several scripts (multi-byte characters), slices of Shakespeare (pre-token boundaries: a trainer that
merges across them learns " t" + "he" pairs that span words), vocabularies larger than the text allows
(training stops when no pair is left) and the empty text. The reference equals Hugging Face's trainer up to
the tie rule (`tests/test_bpe_reference.py`).

The speed check trains on all of Shakespeare to 1,000 tokens, with "<|endoftext|>" between its scenes, and
times the student's call against the reference's on the same text in the same check: the budget is
max(30 s, 60 x the reference's time). Both are times the machine's load does not change: the reference's
CPU time (it runs in the grader's process) and the call's own time (`student.last_call.own`: wall-clock time
less the time the worker waited for a CPU). Measured on one core (2 cores, idle): the reference 0.63 s; the
endorsed straightforward trainer (recount the pairs of the distinct pre-tokens after every merge) 14.6 s;
counting over the whole text for every merge about 0.5 s a merge, over 6 minutes.
"""

from __future__ import annotations

import time

from conftest import EOT, RULES, as_merges, first_difference, random_texts, shakespeare, shown_merges
from lmcourse.grading.checks import check

SPECIALS = [EOT, "<|pad|>", EOT + EOT]


def _compare_merges(found, expected, what: str) -> None:
    merges = as_merges(found, what)
    if merges == expected:
        return
    if len(merges) != len(expected) and merges == expected[:len(merges)]:
        raise AssertionError(f"{what}: expected {len(expected)} merges; found {len(merges)}, the first {len(merges)} "
                             "right. Learn vocab_size - 256 - len(special_tokens) merges, fewer only when no pair "
                             "is left")
    k = first_difference(merges, expected)
    raise AssertionError(
        f"{what}: merge {k} differs: expected {shown_merges(expected, k, 1)}, found {shown_merges(merges, k, 1)} "
        f"(the {k} before it agree; {len(expected)} merges expected, {len(merges)} found). Count adjacent pairs "
        "inside pre-tokens, overlapping ones included, weighted by the pre-token's count; never across a special "
        "token; ties go to the greatest pair of byte strings")


@check(points=1, cell="test_split_special", name="split_special_tokens: texts cut at their special tokens (the "
                                                 "longer of two that match at one place), nothing lost or empty")
def test_split_special(student, reference, rng):
    texts = [EOT, EOT + EOT, EOT * 3, "a" + EOT, EOT + "b", "<|pad|><|pad|>x", "<|endoftext|", "|>" + EOT + "<|",
             "x" + EOT + EOT + EOT + "y", "no special", ""]
    pieces = ["ab", " ", "\n", "😀", "<|", "|>", EOT, "<|pad|>", "endoftext", "é"]
    texts += ["".join(rng.choice(pieces, size=int(rng.integers(1, 12)))) for _ in range(200)]
    cases = [(t, s) for t in texts for s in (SPECIALS, [EOT], [])]
    found = student.probe("call_many", fn="split_special_tokens",
                          each=[{"text": t, "special_tokens": s} for t, s in cases], timeout=30, **RULES)
    if not isinstance(found, list) or len(found) != len(cases):
        raise AssertionError(f"split_special_tokens on {len(cases)} texts: the grader could not read your results")
    for (text, specials), pieces_found in zip(cases, found):
        expected = reference.split_special_tokens(text, specials)
        if not (isinstance(pieces_found, list) and all(isinstance(p, str) for p in pieces_found)):
            raise AssertionError(f"split_special_tokens({text!r:.60}, {specials}): expected a list of str; found "
                                 f"{pieces_found!r:.80}")
        if pieces_found != expected:
            raise AssertionError(f"split_special_tokens({text!r:.80}, {specials}): expected {expected!r:.200}; found "
                                 f"{pieces_found!r:.200}")


def _corpora(rng) -> list[tuple[str, str, int]]:
    """(what, text, vocab_size): the hidden corpora."""
    corpus = shakespeare()
    at = int(rng.integers(0, len(corpus) - 200_000))
    few = list("ab c") + ["ab", " a", "ba"]
    return [
        ("random strings over 'a', 'b', ' ', 'c' (ties everywhere)",
         "".join(rng.choice(few, size=3000)), 256 + 60),
        ("random strings over 'a', 'b', ' ', 'c', second draw", "".join(rng.choice(few, size=800)), 256 + 40),
        ("runs of one letter", " ".join("a" * int(n) for n in rng.integers(1, 12, size=300)), 256 + 12),
        ("random text in several scripts", "".join(random_texts(rng, 300, 40)), 256 + 150),
        ("200,000 characters of Shakespeare", corpus[at:at + 200_000], 256 + 300),
        ("a short text with fewer pairs than merges asked for", "the cat sat on the mat", 256 + 50),
        ("one character", "x", 300),
        ("the empty text", "", 300),
        ("digits and punctuation", " ".join(str(int(n)) for n in rng.integers(0, 10 ** 6, size=400)) + " ...!!??", 256 + 40),
    ]


@check(points=2, cell="test_train_bpe", name="train_bpe: merges equal the reference's on hidden texts (ties, "
                                             "overlapping pairs, several scripts, Shakespeare, too few pairs, empty)")
def test_train_bpe_merges(student, reference, rng):
    corpora = _corpora(rng)
    found = student.probe("call_many", fn="train_bpe",
                          each=[{"text": text, "vocab_size": v} for _, text, v in corpora], timeout=60, **RULES)
    if not isinstance(found, list) or len(found) != len(corpora):
        raise AssertionError(f"train_bpe on {len(corpora)} texts: the grader could not read your results")
    for (what, text, v), merges in zip(corpora, found):
        _compare_merges(merges, reference.train_bpe(text, v), f"train_bpe on {what}, vocab_size {v}")


@check(points=1, cell="test_train_bpe", name="train_bpe with special tokens: none is counted or merged across, "
                                             "and each takes one place in vocab_size")
def test_train_bpe_specials(student, reference, rng):
    docs = ["".join(rng.choice(["ab", "ba", "b", "a", " ", "<", "|", "x"], size=int(rng.integers(2, 9))))
            for _ in range(400)]
    corpus = shakespeare()
    start = int(rng.integers(0, len(corpus) - 50_000))
    scenes = corpus[start:start + 50_000].split("\n\n")
    cases = [
        ("short documents between '<|endoftext|>'", EOT.join(docs), 256 + 40, [EOT]),
        ("short documents between three special tokens",
         "".join(d + SPECIALS[int(rng.integers(0, 3))] for d in docs), 256 + 40, SPECIALS),
        ("50,000 characters of Shakespeare, scenes between '<|endoftext|>'", EOT.join(scenes), 256 + 101, [EOT]),
        ("text made of special tokens only", EOT * 20 + "<|pad|>" * 5, 300, SPECIALS),
    ]
    found = student.probe("call_many", fn="train_bpe",
                          each=[{"text": t, "vocab_size": v, "special_tokens": s} for _, t, v, s in cases],
                          timeout=60, **RULES)
    if not isinstance(found, list) or len(found) != len(cases):
        raise AssertionError(f"train_bpe on {len(cases)} texts: the grader could not read your results")
    for (what, text, v, specials), merges in zip(cases, found):
        _compare_merges(merges, reference.train_bpe(text, v, specials),
                        f"train_bpe on {what}, vocab_size {v}, special_tokens {specials}")


BUDGET_FLOOR, BUDGET_RATIO = 30.0, 60.0


@check(points=1, cell="test_bpe_speed", name="train_bpe: all of Shakespeare to a 1,000-token vocabulary within the "
                                             "time budget, merges equal to the reference's")
def test_bpe_speed(student, reference):
    scenes = shakespeare().split("\n\n")
    text = EOT.join(scenes)
    began = time.process_time()
    expected = reference.train_bpe(text, 1000, [EOT])
    budget = max(BUDGET_FLOOR, BUDGET_RATIO * (time.process_time() - began))
    found = student.probe("call_many", fn="train_bpe", each=[{"text": text, "vocab_size": 1000, "special_tokens": [EOT]}],
                          timeout=budget + 10, **RULES)
    took = student.last_call.own
    if took > budget:
        raise AssertionError(f"train_bpe on all of Shakespeare ({len(text):,} characters) to 1,000 tokens took "
                             f"{took:.0f} s; the budget was {budget:.0f} s ({BUDGET_RATIO:.0f} times the reference's "
                             f"time, at least {BUDGET_FLOOR:.0f} s). Count pairs over the distinct pre-tokens, weighted "
                             "by their counts, not over the whole text")
    if not isinstance(found, list) or len(found) != 1:
        raise AssertionError("train_bpe on all of Shakespeare: the grader could not read your result")
    _compare_merges(found[0], expected, "train_bpe on all of Shakespeare, vocab_size 1000, special_tokens "
                                        "['<|endoftext|>']")
