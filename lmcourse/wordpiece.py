"""BERT's text clean-up and word splitting: what happens before WordPiece (given in Unit 6).

BERT's tokenizer works in two stages (Devlin et al., 2019; the code is Google's ``tokenization.py``):

1. **Basic tokenization** (this module): clean the text, put spaces around CJK ideographs, lower-case
   and strip accents (the *uncased* models), then split on whitespace and around every punctuation
   character. ``"Héllo, world!"`` becomes ``["hello", ",", "world", "!"]``.
2. **WordPiece** (the student's ``wordpiece_tokenize``): each of those words is cut into vocabulary
   pieces, greedily, longest match first, the pieces after the first written with a ``##`` prefix:
   ``"unaffable"`` -> ``["un", "##aff", "##able"]``. A word with no cut, or longer than
   :data:`MAX_CHARS_PER_WORD` characters, becomes one ``[UNK]``.

The rules below are those of the uncased BERT vocabulary that all-MiniLM-L6-v2 uses, character for
character; ``tests/test_wordpiece.py`` compares them with Hugging Face's ``tokenizers`` on varied text.
"""

from __future__ import annotations

import unicodedata

__all__ = ["MAX_CHARS_PER_WORD", "basic_tokenize", "is_punctuation"]

MAX_CHARS_PER_WORD = 100  # a longer "word" is one [UNK] (BERT's max_input_chars_per_word)


def _is_whitespace(ch: str) -> bool:
    # \t, \n and \r are control characters in Unicode, but BERT counts them as whitespace
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch: str) -> bool:
    """Unicode punctuation, and every non-letter, non-digit ASCII symbol ("$", "^", "`" included)."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    # the CJK Unified Ideographs blocks (not Hangul, Hiragana or Katakana, which are written with spaces)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _clean(text: str) -> str:
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue  # NUL, the replacement character and invisible controls are dropped
        if _is_cjk(cp):
            out.append(f" {ch} ")  # each ideograph is a word of its own
        else:
            out.append(" " if _is_whitespace(ch) else ch)
    return "".join(out)


def _strip_accents(word: str) -> str:
    # NFD splits "é" into "e" + a combining accent (category Mn), which is then dropped
    return "".join(ch for ch in unicodedata.normalize("NFD", word) if unicodedata.category(ch) != "Mn")


def _split_punctuation(word: str) -> list[str]:
    pieces: list[str] = []
    start_new = True
    for ch in word:
        if is_punctuation(ch):
            pieces.append(ch)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += ch
    return pieces


def basic_tokenize(text: str, lower: bool = True) -> list[str]:
    """The words WordPiece then cuts: cleaned, lower-cased and accent-stripped (``lower``, the uncased
    vocabulary's rule), split on whitespace and around punctuation.

    >>> basic_tokenize("Héllo, WORLD!  It's 3.5°C")
    ['hello', ',', 'world', '!', 'it', "'", 's', '3', '.', '5°c']
    """
    words = []
    for word in _clean(text).split():
        if lower:
            word = _strip_accents(word.lower())
        words.extend(_split_punctuation(word))
    return [w for w in words if w]
