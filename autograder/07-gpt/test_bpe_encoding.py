"""Checks for Part 2: encoding against tiktoken, special tokens, decoding, GPT-2's merges and GPT-2's ids.

Each check feeds the student's function the *reference's* merges, so that a wrong trainer costs the points of
Part 1 only. Encodings are compared with OpenAI's tiktoken built from the same merges and GPT-2's pattern
(`lmcourse.bpe.tiktoken_encoding`), which merges by the rank of the joined bytes: the textbook "apply the
merges in the order they were learned". An encoder that merges the most frequent pair of the text, or the
longest token that matches, gives other ids on these texts (the variants in `tests/test_unit07_gpt.py`). GPT-2's
ids come from GPT-2's own tokenizer built offline from its two files (`lmcourse.bpe.gpt2_encoding`).
"""

from __future__ import annotations

import functools

from conftest import EOT, FIXED, RULES, as_ids, as_merges, first_difference, random_texts, shakespeare, \
    shakespeare_lines
from lmcourse import bpe
from lmcourse.grading.checks import check

SPECIALS = [EOT, "<|pad|>", EOT + EOT]


@functools.lru_cache(maxsize=1)
def _shakespeare_merges(reference) -> tuple:
    """500 merges learned by the reference from the first 300,000 characters of Shakespeare."""
    return tuple(reference.train_bpe(shakespeare()[:300_000], 256 + 500))


@functools.lru_cache(maxsize=1)
def _gpt2_merges(reference) -> tuple:
    return tuple(reference.gpt2_merges(bpe.gpt2_vocab_bpe()))


def _texts(rng) -> list[str]:
    return list(FIXED) + shakespeare_lines(rng, 150) + random_texts(rng, 150)


def _encode_all(student, texts, merges, specials, what):
    found = student.probe("call_many", fn="encode", each=[{"text": t} for t in texts],
                          common={"merges": [list(m) for m in merges], "special_tokens": list(specials)},
                          timeout=60, **RULES)
    if not isinstance(found, list) or len(found) != len(texts):
        raise AssertionError(f"encode on {len(texts)} texts ({what}): the grader could not read your results")
    return [as_ids(ids, f"encode({t!r:.60})") for t, ids in zip(texts, found)]


def _mismatch(text, found, expected, what, shown=None) -> AssertionError:
    k = first_difference(found, expected)
    show = shown or (lambda ids: ids)
    return AssertionError(f"encode({text!r:.120}) {what}: expected {len(expected)} ids, found {len(found)}; they first "
                          f"differ at position {k}: expected {show(expected[k:k + 4])}, found {show(found[k:k + 4])}")


@check(points=2, cell="test_encode", name="encode: the ids equal tiktoken's with the same 500 merges learned from "
                                          "Shakespeare (lines of Shakespeare, code, numbers, whitespace, other "
                                          "scripts, emoji, random text)")
def test_encode_matches_tiktoken(student, reference, rng):
    merges = list(_shakespeare_merges(reference))
    texts = _texts(rng)
    encoding = bpe.tiktoken_encoding(merges)
    for text, ids in zip(texts, _encode_all(student, texts, merges, [], "500 merges from Shakespeare")):
        expected = encoding.encode(text, disallowed_special=())
        if ids != expected:
            raise _mismatch(text, ids, expected, "with 500 merges learned from Shakespeare; apply the merges in the "
                                                 "order they were learned, inside each pre-token")


@check(points=1, cell="test_encode", name="encode with special tokens: each is one id after the merges (the longer "
                                          "of two that match at one place), the text around it encoded as usual")
def test_encode_specials(student, reference, rng):
    merges = list(_shakespeare_merges(reference))
    pieces = ["To be, or not", " to be", "\n", "😀", "<|", "|>", EOT, "<|pad|>", "endoftext", " é"]
    texts = [EOT, EOT + EOT + EOT, "Hello" + EOT + "world", "<|pad|><|endoftext|>", "<|endoftext|"]
    texts += ["".join(rng.choice(pieces, size=int(rng.integers(1, 10)))) for _ in range(150)]
    for specials in (SPECIALS, [EOT]):
        found = _encode_all(student, texts, merges, specials, f"special tokens {specials}")
        for text, ids in zip(texts, found):
            expected = reference.encode(text, merges, specials)
            if ids != expected:
                raise _mismatch(text, ids, expected, f"with special_tokens={specials} (ids {256 + len(merges)} on)")


@check(points=1, cell="test_decode", name="decode: the bytes of all the tokens joined, then decoded; every text comes "
                                          "back exactly, and a cut character is U+FFFD")
def test_decode(student, reference, rng):
    merges = list(_shakespeare_merges(reference))
    texts = _texts(rng) + [EOT + "x" + "<|pad|>"]
    cases = [reference.encode(t, merges, SPECIALS) for t in texts]
    n_tokens = 256 + len(merges)
    cut = []  # id sequences that end or start inside a character: single bytes of multi-byte characters
    for _ in range(100):
        ids = [int(i) for i in rng.integers(0, n_tokens, size=int(rng.integers(1, 12)))]
        ids += [int(b) for b in rng.integers(128, 256, size=int(rng.integers(1, 4)))]
        cut.append([int(i) for i in rng.permutation(ids)])
    each = [{"ids": ids} for ids in cases + cut]
    found = student.probe("call_many", fn="decode", each=each,
                          common={"merges": [list(m) for m in merges], "special_tokens": SPECIALS}, timeout=60, **RULES)
    if not isinstance(found, list) or len(found) != len(each):
        raise AssertionError(f"decode on {len(each)} id sequences: the grader could not read your results")
    for text, ids, got in zip(texts, cases, found):
        if got != text:
            raise AssertionError(f"decode(encode({text!r:.80})): expected the text back; found {got!r:.120}. Join the "
                                 "bytes of every token first, then decode them once")
    for ids, got in zip(cut, found[len(cases):]):
        expected = reference.decode(ids, merges, SPECIALS)
        if got != expected:
            raise AssertionError(f"decode({ids}) (ids that cut characters): expected {expected!r:.80}; found {got!r:.80}. "
                                 "Decode the joined bytes as UTF-8 with errors='replace'")


@check(points=1, cell="test_gpt2", name="gpt2_merges: GPT-2's vocab.bpe read into 50,000 merges in the course's "
                                        "numbering")
def test_gpt2_merges(student, reference):
    expected = list(_gpt2_merges(reference))
    found = as_merges(student.probe("call_many", fn="gpt2_merges", each=[{"vocab_bpe": bpe.gpt2_vocab_bpe()}],
                                    timeout=60, **RULES)[0], "gpt2_merges(GPT-2's vocab.bpe)")
    if found != expected:
        k = first_difference(found, expected)
        lines = bpe.gpt2_vocab_bpe().split("\n")
        line = lines[k + 1] if k + 1 < len(lines) else ""
        raise AssertionError(f"gpt2_merges(GPT-2's vocab.bpe): expected {len(expected):,} merges, found {len(found):,}; "
                             f"they first differ at merge {k} (the file's line {k + 2}: {line!r}): expected "
                             f"{expected[k] if k < len(expected) else None}, found {found[k] if k < len(found) else None}. "
                             "Only the first line is a header")


@check(points=2, cell="test_gpt2", name="encode with GPT-2's merges: GPT-2's own ids on varied text (code, numbers, "
                                        "whitespace runs, other scripts, emoji, contractions, <|endoftext|>)")
def test_gpt2_ids(student, reference, rng):
    merges = list(_gpt2_merges(reference))
    texts = list(FIXED) + ["Hello<|endoftext|>world", EOT, "The end.<|endoftext|>\n\nA new document"]
    texts += shakespeare_lines(rng, 60) + random_texts(rng, 60)
    gpt2 = bpe.gpt2_encoding()
    found = _encode_all(student, texts, merges, [EOT], "GPT-2's merges")
    for text, ids in zip(texts, found):
        expected = gpt2.encode(text, allowed_special="all")
        mine = bpe.to_gpt2_ids([i for i in ids if type(i) is int and i >= 0])
        if mine != expected:
            raise _mismatch(text, mine, expected, "with GPT-2's merges and special_tokens=['<|endoftext|>'], renumbered "
                                                  "by to_gpt2_ids, against GPT-2's tokenizer",
                            shown=lambda ids: [gpt2.decode([i]) if 0 <= i < 50257 else i for i in ids])
