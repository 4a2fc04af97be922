"""Checks for Part 1: WordPiece ids against the reference tokenizer's, on MiniLM's vocabulary.

The reference's ids equal Hugging Face's tokenizer's (the project's tests hold it to `tokenizers` on the
texts below and thousands of lines of Shakespeare). The texts exercise what a tokenizer gets wrong: the
`##` continuation, longest match first, a word with a character no piece holds (the whole word is
[UNK], not its tail), words of exactly 100 and 101 characters, punctuation runs, numbers, accents, CJK,
emoji, whitespace of every kind, the empty text; then real lines and random strings.
"""

from __future__ import annotations

import numpy as np

from lmcourse import data, minilm
from lmcourse.grading.checks import check

FIXED = ("unaffable", "Tokenization is unavoidable, isn't it?", "", "   \t\n ", "Hello, World!!! ...?!",
         "3.14159 and 2,718 and 1e-9 and 007", "Crème brûlée, naïve café, Ångström, Øresund",
         "北京欢迎你 and 東京", "I ❤ emoji 😀👍 and hi☃there and ☃", "a" * 100, "a" * 101 + " next", "b" * 99 + "ing",
         "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
         "CORIOLANUS: Wherefore art thou Romeo? O, be some other name!", "don't can't won't y'all o'er",
         "e-mail, self-esteem, state-of-the-art; well-known", "#hashtag @user http://example.com/a?b=c&d=e",
         "x" * 30 + "zq" * 20, "Ünïcödé ŁÓDŹ Ελληνικά Русский עברית العربية हिन्दी", "the\u200bzero\u00a0width",
         "[brackets] {braces} <angles>", "##ing ## #")
# Not here: the text "[CLS]" or "[MASK]" written out. Hugging Face's tokenizer matches special tokens' names
# in raw text before WordPiece runs (its added-tokens pass); the assignment's WordPiece does not, and need not.
POOL = list("abcdefghijklmnopqrstuvwxyzABCXYZ    .,;:!?'\"-()0123456789éèçñüßøå") + \
    ["☃", "😀", "北", "ω", "\t", "\n", "##", "ing", "tion", "un", "\u0301"]


def _texts(rng) -> list[str]:
    lines = [line for line in data.load_text("tinyshakespeare").split("\n") if line.strip()]
    chosen = [lines[i] for i in rng.choice(len(lines), size=300, replace=False)]
    randoms = ["".join(rng.choice(POOL, size=int(rng.integers(1, 40)))) for _ in range(300)]
    return list(FIXED) + chosen + randoms


@check(points=3, cell="test_wordpiece", name="wordpiece_tokenize: the ids equal the reference tokenizer's on "
                                            "MiniLM's vocabulary (punctuation, accents, numbers, unknown and "
                                            "over-long words, empty text, lines of Shakespeare, random strings)")
def test_wordpiece_ids(student, reference, rng):
    vocab = minilm.piece_ids()
    pieces = minilm.vocab()
    texts = _texts(rng)
    found = student.probe("call_many", fn="wordpiece_tokenize", each=[{"text": t} for t in texts],
                          common={"vocab": vocab}, timeout=60)
    if not isinstance(found, list) or len(found) != len(texts):
        raise AssertionError(f"wordpiece_tokenize on {len(texts)} texts: the grader could not read your results")
    for text, ids in zip(texts, found):
        expected = reference.wordpiece_tokenize(text, vocab)
        if isinstance(ids, np.ndarray):
            ids = ids.tolist()
        if not isinstance(ids, list) or not all(isinstance(i, (int, np.integer)) for i in ids):
            raise AssertionError(f"wordpiece_tokenize({text!r:.80}): expected a list of ints; found "
                                 f"{type(ids).__name__}")
        ids = [int(i) for i in ids]
        if ids != expected:
            def shown(xs):
                return [pieces[i] if 0 <= i < len(pieces) else i for i in xs]
            at = next((k for k, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected)))
            raise AssertionError(
                f"wordpiece_tokenize({text!r:.120}): expected {len(expected)} pieces, found {len(ids)}; they first "
                f"differ at piece {at}: expected {shown(expected[at:at + 4])}, found {shown(ids[at:at + 4])}. "
                "Cut each word greedily, longest match first, continuations with '##'; a word that cannot be cut "
                f"or is longer than {100} characters is one [UNK]")
