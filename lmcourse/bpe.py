"""Byte-level BPE: what Unit 7 gives the student around their own tokenizer, and GPT-2's real one.

GPT-2's tokenizer (Radford et al., 2019) works on the UTF-8 *bytes* of a text, so no text is ever out of
vocabulary. It runs in two stages:

1. **Pre-tokenization** (:func:`pretokenize`, given): a regular expression cuts the text into
   words, numbers, runs of punctuation and whitespace, each word keeping the space before it
   (``" world"``). Merges never cross these boundaries, so ``"dog."`` and ``"dog!"`` share ``"dog"``.
2. **Byte-pair merges** (the student's ``train_bpe`` / ``encode``): start from the 256 bytes and
   repeatedly replace the most frequent adjacent pair by a new token (Sennrich et al., 2016).

The course's integer convention (minbpe's): byte ``b`` is token id ``b``, and merge ``i`` (counting from 0)
creates id ``256 + i``; a merge is the pair of ids it joins. Special tokens come after the merges:
``256 + len(merges) + j``. GPT-2 numbers its 256 byte tokens in another order (printable bytes first),
so :func:`to_gpt2_ids` renumbers the bytes and nothing else: with GPT-2's 50,000 merges, GPT-2's
``<|endoftext|>`` is ``256 + 50000 = 50256`` in both numberings.

Trusted references built from the same merges: :func:`tiktoken_encoding` (OpenAI's ``tiktoken``, which
ranks merged byte strings rather than pairs) and :func:`gpt2_encoding` (GPT-2's real tokenizer, from the
two files tiktoken itself would download, read offline and verified by checksum: `lmcourse.data`).
"""

from __future__ import annotations

import functools
from typing import Iterable, Sequence

__all__ = ["GPT2_PATTERN", "ENDOFTEXT", "pretokenize", "bytes_to_unicode", "gpt2_vocab_bpe", "to_gpt2_ids",
           "from_gpt2_ids", "tiktoken_encoding", "gpt2_encoding"]

# GPT-2's pre-tokenizer (openai/gpt-2, src/encoder.py): English contractions; an optional space then
# letters; an optional space then digits; an optional space then anything else but whitespace; whitespace
# not followed by a non-space (so "  word" leaves " word" for the word); any other whitespace.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ENDOFTEXT = "<|endoftext|>"


@functools.lru_cache(maxsize=1)
def _compiled():
    import regex  # the standard library's `re` has no \p{L} (letters in any script)

    return regex.compile(GPT2_PATTERN)


def pretokenize(text: str) -> list[str]:
    r"""GPT-2's pre-tokens: ``pretokenize("Hello, world!")`` -> ``["Hello", ",", " world", "!"]``.

    Joined, they give back the text exactly.

    ``\p{L}`` and ``\p{N}`` are those of the Unicode version the ``regex`` package knows (17 for the pinned
    one), tiktoken's and Hugging Face's Rust engines those of theirs (16): on the 17,480 code points that became
    letters or digits in Unicode 17 the two split differently, so texts compared with tiktoken avoid them
    (`tests/test_bpe_reference.py` measures the gap over every code point)."""
    return _compiled().findall(text)


@functools.lru_cache(maxsize=1)
def _gpt2_byte_order() -> tuple[int, ...]:
    # GPT-2's id of byte b is its position here: printable bytes in order, then the rest in order
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    return tuple(printable + [b for b in range(256) if b not in printable])


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from each byte to a printable character, used to write its merges as text.

    A printable byte stands for itself ('A' for 65); the others (space, newline, control bytes, most of
    Latin-1's top half) are shifted to unused characters from U+0100 on: the space byte 32 is 'Ġ', the
    newline 10 is 'Ċ'. In GPT-2's ``vocab.bpe`` the merge ``Ġ t`` therefore joins the bytes `` `` and ``t``.
    """
    order = _gpt2_byte_order()
    n_printable = sum(1 for b in range(256) if chr(b).isprintable() and chr(b) != " ")
    table = {b: chr(b) for b in order[:n_printable]}
    table.update({b: chr(256 + n) for n, b in enumerate(order[n_printable:])})
    return table


def gpt2_vocab_bpe() -> str:
    """The text of GPT-2's ``vocab.bpe``: a ``#version: 0.2`` header line, then 50,000 merges, one per line,
    in the order they were learned, e.g. ``Ġ t`` (verified by checksum; `lmcourse.data.fetch`)."""
    from lmcourse import data

    return data.fetch("gpt2-merges").read_text(encoding="utf-8")


def to_gpt2_ids(ids: Iterable[int]) -> list[int]:
    """The course's ids (byte b is id b) in GPT-2's numbering: only the 256 byte ids move."""
    order = _gpt2_byte_order()
    rank = {b: i for i, b in enumerate(order)}
    return [rank[i] if i < 256 else i for i in ids]


def from_gpt2_ids(ids: Iterable[int]) -> list[int]:
    """GPT-2's ids in the course's numbering (the inverse of :func:`to_gpt2_ids`)."""
    order = _gpt2_byte_order()
    return [order[i] if i < 256 else i for i in ids]


def _token_bytes(merges: Sequence[Sequence[int]]) -> list[bytes]:
    vocab = [bytes([b]) for b in range(256)]
    for k, (a, b) in enumerate(merges):
        if not (0 <= a < len(vocab) and 0 <= b < len(vocab)):
            raise ValueError(f"merge {k} joins ids ({a}, {b}), but only ids below {len(vocab)} exist before it")
        vocab.append(vocab[a] + vocab[b])
    return vocab


def tiktoken_encoding(merges: Sequence[Sequence[int]], special_tokens: Sequence[str] = (), name: str = "course-bpe"):
    """A ``tiktoken.Encoding`` for these merges with GPT-2's pre-tokenizer, in the course's numbering.

    tiktoken ranks each merged *byte string* (a merge's rank is its new id) and, in every pre-token,
    repeatedly joins the adjacent pair whose joined bytes rank lowest: the textbook "apply merges in the
    order they were learned". Its ids are the course's: byte b is b, merge i is 256 + i, special token j is
    256 + len(merges) + j. Encode special tokens with ``allowed_special="all"``.
    """
    import tiktoken

    vocab = _token_bytes(merges)
    ranks: dict[bytes, int] = {}
    for i, token in enumerate(vocab):
        if token in ranks:
            raise ValueError(f"merge {i - 256} makes {token!r} again (it is id {ranks[token]} already)")
        ranks[token] = i
    specials = {s: len(vocab) + j for j, s in enumerate(special_tokens)}
    return tiktoken.Encoding(name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


@functools.lru_cache(maxsize=1)
def gpt2_encoding():
    """GPT-2's own tokenizer, in GPT-2's numbering, built offline from its two verified files (never
    ``tiktoken.get_encoding("gpt2")``, which downloads them).

    The byte-string ranks are built as ``tiktoken.load.data_gym_to_mergeable_bpe_ranks`` builds them (the
    byte tokens in GPT-2's order, then one rank per merge line) and, as it does, checked against
    ``encoder.json``: the merges file and the id table must agree on every token's id. (tiktoken's own
    loader would also copy the files into a cache of its own under /tmp.)
    """
    import json

    import tiktoken

    from lmcourse import data

    char_to_byte = {c: b for b, c in bytes_to_unicode().items()}

    def as_bytes(word: str) -> bytes:
        return bytes(char_to_byte[c] for c in word)

    lines = gpt2_vocab_bpe().split("\n")
    ranks = {bytes([b]): i for i, b in enumerate(_gpt2_byte_order())}
    for line in lines[1:]:  # lines[0] is "#version: 0.2"; "# #" further down is a merge
        if line:
            first, second = line.split(" ")
            ranks[as_bytes(first) + as_bytes(second)] = len(ranks)
    encoder = json.loads(data.fetch("gpt2-encoder").read_text(encoding="utf-8"))
    table = {as_bytes(token): i for token, i in encoder.items() if token != ENDOFTEXT}
    if ranks != table or encoder.get(ENDOFTEXT) != 50256:
        raise data.DataError("GPT-2's vocab.bpe and encoder.json disagree on the ids of their tokens")
    return tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={ENDOFTEXT: 50256}, explicit_n_vocab=50257)
