"""BERT's basic tokenization (lmcourse.wordpiece) against Hugging Face's `tokenizers` on the same vocabulary.

The student's WordPiece is graded on the ids of the real tokenizer, so the words it receives must be the
real tokenizer's words: same clean-up, same lower-casing and accent stripping, same punctuation rules.
Compared on hand-picked text (accents, CJK, controls, symbols, numbers, emoji) and on random strings drawn
from a pool of awkward characters.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from lmcourse import data, wordpiece
from lmcourse.wordpiece import basic_tokenize

TEXTS = [
    "", "   ", "Hello, world!", "Héllo, WORLD!  It's 3.5°C", "naïve café résumé ÅNGSTRÖM",
    "unaffable unbelievable tokenization", "e-mail: someone@example.com (not real)", "$1,000.00 ^_^ `code` ~x~",
    "他说：“你好”。", "日本語のテキストとカタカナ", "한국어 문장입니다", "Ελληνικά και русский текст",
    "tab\there\nnewline\r\nreturn", "zero\u200bwidth soft\u00adhyphen", "nul\x00byte\ufffdreplacement",
    "emoji 🙂👍🏽 family 👨‍👩‍👧", "İstanbul ǅemal ß ﬁne", "numbers 1st 2nd 3rd 10,000 3.14159 1e-9",
    "a" * 120 + " short", "Shall I compare thee to a summer's day? Thou art more lovely and more temperate:",
    "O Romeo, Romeo! wherefore art thou Romeo?", "ﾊﾝｶｸ full-width ＡＢＣ１２３", "x\u0301\u0327 combining",
]
POOL = list("aZé ñ,.!?'\"-()[]{}<>$%&*+/\\|~^`@#_:;0918 \t\n") + ["日", "語", "한", "ß", "İ", "\u200b", "\u00ad",
                                                                  "🙂", "\u0301", "ﬁ", "Ａ", "\x07", "°", "€"]


@pytest.fixture(scope="module")
def reference():
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(data.fetch("minilm-tokenizer")))

    def words(text: str) -> list[str]:
        return [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))]

    return words


@pytest.mark.parametrize("text", TEXTS)
def test_the_words_of_the_real_tokenizer(text, reference):
    assert basic_tokenize(text) == reference(text)


def test_random_strings_of_awkward_characters(reference):
    rng = np.random.default_rng(0)
    for _ in range(2000):
        text = "".join(rng.choice(POOL, size=int(rng.integers(0, 30))))
        assert basic_tokenize(text) == reference(text), repr(text)


def test_punctuation_covers_ascii_symbols_and_unicode_punctuation():
    assert all(wordpiece.is_punctuation(c) for c in "$^`~+<=>|")
    assert all(wordpiece.is_punctuation(c) for c in "“”。：¿«»—")
    assert not any(wordpiece.is_punctuation(c) for c in "aZ09 °€é")


def test_the_docstring_example():
    assert doctest.testmod(wordpiece).failed == 0
