"""What the checks of 07-gpt share: this assignment's rule (no tokenizer library and none of the course's
reference tokenizers on the student's side, ``no_tokenizer_library``), the texts the tokenizer checks use, and
the reading of a student's merges and ids.

The trusted side of every module comparison is the reference solution's class, with random weights whose
LayerNorms are drawn too (`lmcourse.grading.compare.block_weights`); the reference's GPT is held to Hugging Face's
GPT2LMHeadModel with the same weights (`tests/test_gpt_reference.py`).

The trusted side of every tokenizer check is the reference solution's functions and, for encoding, OpenAI's
``tiktoken`` built from the same merges (`lmcourse.bpe.tiktoken_encoding`) and GPT-2's own tokenizer
(`lmcourse.bpe.gpt2_encoding`). The project's tests hold the reference to both and to Hugging Face's
``tokenizers`` (`tests/test_bpe_reference.py`).
"""

from __future__ import annotations

import functools

from lmcourse import bpe, data
from lmcourse.grading.compare import comparison_fixtures

RULES = dict(no_tokenizer_library=True)  # Parts 1-2: the tokenizer
GPT_RULES = dict(no_builtin_attention=True)  # Parts 3-4: attention by hand
EOT = bpe.ENDOFTEXT

# Characters for random text: ASCII letters and punctuation, whitespace of several kinds, digits, and
# characters of 2, 3 and 4 UTF-8 bytes (accents, CJK, a snowman, emoji, a combining accent).
POOL = list("abcdefghijklmnopqrstuvwxyzABCXYZ      .,;:!?'\"-()0123456789") + \
    ["é", "è", "ß", "ñ", "ω", "Ж", "\t", "\n", "\r\n", "  ", "日", "本", "語", "☃", "€", "😀", "👍🏽", "\u0301", "\u00a0",
     "'s", "'ll", "<|", "|>"]

# Texts that tokenizers get wrong: contractions (GPT-2's pattern is case-sensitive), whitespace runs and
# trailing whitespace, numbers, code, non-Latin scripts, emoji built from several code points, and text
# that merely looks like a special token.
FIXED = ("Hello, world. Is this-- a test?", "", " ", "    ", "\n\n\n", " \t \n ", "trailing spaces   ",
         "I'll be there, you'll see; DON'T shout, it's John's", "12345678901234567890 and 3.14159 and 1,000,000",
         "def f(x):\n    return x ** 2  # square\n\n\tif x != 0: pass", "naïve café, crème brûlée, Ångström",
         "Ελληνικά Русский עברית العربية हिन्दी 日本語のテキスト 한국어", "emoji 😀👍🏽 👨‍👩‍👧 and a snowman ☃",
         "<|endoftext|> written out is only text here", "<|endoftext", "a\u0301 e\u0301", "\u00a0non\u00a0breaking",
         "CORIOLANUS:\nWherefore art thou Romeo? O, be some other name!\n", "e-mail self-esteem state-of-the-art",
         "https://example.com/a?b=c&d=e #hashtag @user", "AAAAAAAAAAAAAAAAAAAA aaaaaaaaaaaaaaaaaaaa", "   leading")


@functools.lru_cache(maxsize=1)
def shakespeare() -> str:
    return data.load_text("tinyshakespeare")


def random_texts(rng, n: int, longest: int = 60) -> list[str]:
    return ["".join(rng.choice(POOL, size=int(rng.integers(1, longest)))) for _ in range(n)]


def shakespeare_lines(rng, n: int) -> list[str]:
    lines = shakespeare().split("\n")
    starts = rng.choice(len(lines) - 3, size=n, replace=False)
    return ["\n".join(lines[s:s + int(rng.integers(1, 4))]) for s in starts]


def as_merges(found, what: str) -> list[tuple[int, int]]:
    """A student's merges as a list of (int, int), or an AssertionError that says what came back."""
    if not isinstance(found, (list, tuple)):
        raise AssertionError(f"{what}: expected a list of (a, b) pairs of ints; found {type(found).__name__}")
    out = []
    for k, m in enumerate(found):
        if not (isinstance(m, (list, tuple)) and len(m) == 2 and all(type(i) is int for i in m)):
            raise AssertionError(f"{what}: expected a list of (a, b) pairs of ints; item {k} is {m!r:.60}")
        out.append((m[0], m[1]))
    return out


def as_ids(found, what: str) -> list[int]:
    if not (isinstance(found, (list, tuple)) and all(type(i) is int for i in found)):
        raise AssertionError(f"{what}: expected a list of ints; found {found!r:.80}")
    return list(found)


def first_difference(found: list, expected: list) -> int:
    return next((k for k, (a, b) in enumerate(zip(found, expected)) if a != b), min(len(found), len(expected)))


def shown_merges(merges, start: int, count: int = 3) -> list[str]:
    """Merges start .. start+count as the byte strings they join (b'e' + b'st'), for a message."""
    known = [bytes((b,)) for b in range(256)]
    out = []
    for k, (a, b) in enumerate(merges[:start + count]):
        ok = 0 <= a < len(known) and 0 <= b < len(known)
        if k >= start:
            out.append(f"{known[a]!r} + {known[b]!r}" if ok else f"({a}, {b})")
        known.append(known[a] + known[b] if ok else b"?")
    return out


rules, compare, both, weights = comparison_fixtures(GPT_RULES)
