"""The data of Unit 6's tiny BERT: its vocabulary, its pretraining lines and a labelled task.

A BERT small enough to pretrain on a CPU in a minute reads TinyShakespeare one
*line* at a time (a line of verse is about ten words), in a word-level
vocabulary: the words and punctuation marks of :func:`lmcourse.data.word_tokenize`
that occur at least three times in the pretraining lines, after BERT's five
special tokens ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (ids 0..4, MiniLM's names)::

    "Before we proceed any further, hear me speak."
    -> [CLS] before we proceed any further , hear me speak . [SEP]

The lines are cut three ways by a hash of their words, so a line, and every
copy of it, always falls on the same side (:func:`split_of`):

- ``"train"`` (85%): masked-language-model pretraining and the labelled
  examples a model is fine-tuned on;
- ``"valid"`` (5%): the held-out MLM loss;
- ``"test"`` (10%): only the labelled test examples. No model is pretrained or
  fine-tuned on them, so a pretrained model cannot have memorised a test line.

The labelled task (:func:`labelled_task`) asks: *is this a real line, or the
same line with its words shuffled?*  The punctuation stays where it was and
only the words move, so the two versions have the same words, the same
length and the same punctuation: a bag of words, the line's length or its
last token cannot tell them apart, only word order can::

    label 1  before we proceed any further , hear me speak .
    label 0  proceed further any me hear , before we speak .

Word order is what masked-language-model pretraining learns for free (to fill
a blank a model must know what may come where), so it is the showcase of the
unit: the same tiny BERT, fine-tuned the same way on the same labels, is far
better when it starts from MLM-pretrained weights than from random ones.

Everything here is shared by the book, the assignment and its hidden checks,
so the three use the same ids, lines and labels. There is no model code here.

- :func:`compact_vocab`, :func:`encode_line`, :func:`decode`, :data:`PAD_ID`
  ... :data:`MASK_ID`;
- :func:`mlm_lines` (text) and :func:`mlm_ids` (encoded), per split;
- :func:`labelled_task`, :func:`shuffle_words`;
- :func:`pad_batch`: ``[CLS] ids [SEP]`` rows padded with ``[PAD]``.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from lmcourse.data import load_text, word_tokenize

if TYPE_CHECKING:  # torch is imported where batches are made
    import torch

__all__ = ["CLS_ID", "MASK_ID", "MIN_COUNT", "MIN_WORDS", "PAD_ID", "SEP_ID", "SPECIALS", "SPLITS", "UNK_ID",
           "compact_vocab", "decode", "encode_line", "is_word_id", "labelled_task", "mlm_ids", "mlm_lines",
           "pad_batch", "shakespeare_lines", "shuffle_words", "split_of"]

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""BERT's special tokens (MiniLM's names), ids 0..4 of :func:`compact_vocab`."""
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(SPECIALS))
SPLITS = ("train", "valid", "test")
MIN_COUNT = 3
"""A token is in the vocabulary if it occurs at least this often in the ``"train"`` lines."""
MIN_WORDS = 5
"""A line enters the labelled task if it has at least this many words (tokens with letters)."""
_TEST_SHARE, _VALID_SHARE = 2, 1  # out of 20 hash buckets: 10% test, 5% valid, the rest train


@functools.lru_cache(maxsize=1)
def shakespeare_lines() -> tuple[str, ...]:
    """TinyShakespeare's spoken lines, in order: every non-empty line except the speakers' names
    (the first line of each speech, ``"First Citizen:"``)."""
    lines = []
    for block in load_text("tinyshakespeare").split("\n\n"):
        block_lines = [line for line in block.split("\n") if line.strip()]
        if len(block_lines) > 1 and block_lines[0].endswith(":"):
            block_lines = block_lines[1:]
        lines.extend(block_lines)
    return tuple(lines)


def split_of(line: str) -> str:
    """``"train"``, ``"valid"`` or ``"test"``: a fixed function of the line's words (MD5 of the
    tokens, so two lines that tokenise alike, such as ``"My lord,"`` and ``"my lord,"``, share a split).

    >>> split_of("Before we proceed any further, hear me speak.")
    'test'
    """
    key = " ".join(word_tokenize(line)).encode("utf-8")
    bucket = int(hashlib.md5(key).hexdigest(), 16) % 20
    return "test" if bucket < _TEST_SHARE else "valid" if bucket < _TEST_SHARE + _VALID_SHARE else "train"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; the splits are {', '.join(map(repr, SPLITS))}")


@functools.lru_cache(maxsize=None)
def mlm_lines(split: str = "train") -> tuple[str, ...]:
    """The lines of one split, as text, in corpus order. Pretrain on ``"train"``, measure the held-out MLM
    loss on ``"valid"``; the ``"test"`` lines are kept for the labelled test (:func:`labelled_task`)."""
    _check_split(split)
    return tuple(line for line in shakespeare_lines() if split_of(line) == split)


@functools.lru_cache(maxsize=1)
def compact_vocab() -> tuple[str, ...]:
    """The tiny BERT's vocabulary: :data:`SPECIALS`, then every token of
    :func:`lmcourse.data.word_tokenize` seen at least :data:`MIN_COUNT` times in the ``"train"`` lines,
    by decreasing count (ties alphabetical): 4,473 tokens in all; the rest read as ``[UNK]``."""
    counts = Counter(tok for line in mlm_lines("train") for tok in word_tokenize(line))
    kept = sorted((tok for tok, c in counts.items() if c >= MIN_COUNT), key=lambda t: (-counts[t], t))
    return SPECIALS + tuple(kept)


@functools.lru_cache(maxsize=1)
def _stoi() -> dict[str, int]:
    return {tok: i for i, tok in enumerate(compact_vocab())}


def encode_line(line: str) -> list[int]:
    """A line -> its token ids in :func:`compact_vocab` (unknown tokens -> ``[UNK]``), without ``[CLS]``
    and ``[SEP]`` (:func:`pad_batch` adds them). The longest line has 23 tokens.

    >>> decode(encode_line("Before we proceed any further, hear me speak."))
    'before we proceed any further , hear me speak .'
    """
    stoi = _stoi()
    return [stoi.get(tok, UNK_ID) for tok in word_tokenize(line)]


def decode(ids: Iterable[int], skip_specials: bool = False) -> str:
    """Ids -> the tokens, joined by spaces (``skip_specials`` drops ``[PAD]``, ``[CLS]``, ``[SEP]``)."""
    vocab = compact_vocab()
    drop = {PAD_ID, CLS_ID, SEP_ID} if skip_specials else set()
    return " ".join(vocab[int(i)] for i in ids if int(i) not in drop)


@functools.lru_cache(maxsize=None)
def mlm_ids(split: str = "train") -> tuple[tuple[int, ...], ...]:
    """:func:`mlm_lines` encoded by :func:`encode_line` (cached: the first call takes about a second)."""
    return tuple(tuple(encode_line(line)) for line in mlm_lines(split))


@functools.lru_cache(maxsize=1)
def _word_mask() -> np.ndarray:
    return np.array([i >= len(SPECIALS) and any(c.isalpha() for c in tok) for i, tok in enumerate(compact_vocab())])


def is_word_id(i: int) -> bool:
    """Whether id `i` is a word (a token with letters): not punctuation, a number, ``[UNK]`` or a special."""
    return bool(_word_mask()[int(i)])


def _eligible(ids: Sequence[int]) -> bool:
    words = [i for i in ids if is_word_id(i)]
    return len(words) >= MIN_WORDS and len(set(words)) > 1


def shuffle_words(ids: Sequence[int], rng: np.random.Generator) -> list[int]:
    """The line with its words (:func:`is_word_id`) in a random new order; punctuation, numbers and
    ``[UNK]`` keep their positions. The result always differs from `ids` (the line needs two different
    words); the shuffle is redrawn until it does."""
    ids = list(ids)
    where = [k for k, i in enumerate(ids) if is_word_id(i)]
    if len({ids[k] for k in where}) < 2:
        raise ValueError("a line needs at least two different words to be shuffled")
    while True:
        words = [ids[k] for k in where]
        order = rng.permutation(len(words))
        out = list(ids)
        for k, j in zip(where, order):
            out[k] = words[j]
        if out != ids:
            return out


def labelled_task(split: str = "train", n: int | None = None, seed: int = 0) -> tuple[list[list[int]], np.ndarray]:
    """Real line (label 1) or the same line with its words shuffled (label 0)? Returns ``(ids, labels)``:
    a list of token-id lists (no ``[CLS]``/``[SEP]``) and an int64 array of 0/1.

    The examples come from the split's lines with at least :data:`MIN_WORDS` words, each line used once:
    in a random order (`seed`), every other line is shuffled (:func:`shuffle_words`), so the labels
    alternate 0, 1, 0, 1 and any first `n` are balanced to within one. `n` None: all of them
    (18,881 in ``"train"``, 2,177 in ``"test"``; `n` larger than that is an error).

    Fine-tune on ``"train"``. ``"test"`` is what the graded checks measure accuracy on: its lines are in
    no split a model trains on (:func:`split_of`), so use it only to evaluate. Different seeds give
    different lines and different shuffles; the same seed, the same examples.
    """
    _check_split(split)
    rng = np.random.default_rng([seed, SPLITS.index(split)])
    pool = [ids for ids in mlm_ids(split) if _eligible(ids)]
    if n is None:
        n = len(pool)
    if not 0 < n <= len(pool):
        raise ValueError(f"n must be between 1 and {len(pool)} (the {split!r} lines with at least "
                         f"{MIN_WORDS} words), not {n}")
    order = rng.permutation(len(pool))[:n]
    labels = np.arange(n, dtype=np.int64) % 2
    ids = [list(pool[k]) if y else shuffle_words(pool[k], rng) for k, y in zip(order, labels)]
    return ids, labels


def pad_batch(seqs: Sequence[Sequence[int]], max_len: int | None = None) -> "torch.Tensor":
    """``(B, T)`` int64 rows ``[CLS] ids [SEP] [PAD] ...``, T the longest row (or `max_len`; longer rows are
    cut, keeping ``[SEP]`` last). The attention mask is ``batch != PAD_ID``."""
    import torch

    rows = [[CLS_ID, *list(s)[: (max_len - 2) if max_len else None], SEP_ID] for s in seqs]
    T = max_len or max(len(r) for r in rows)
    out = torch.full((len(rows), T), PAD_ID, dtype=torch.int64)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.tensor(r, dtype=torch.int64)
    return out
