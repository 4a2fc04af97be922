"""The toy transduction task of the attention units: reverse a string of digits.

A sequence-to-sequence model reads a *source* sequence and writes a
*target* sequence of another length or order. Translation is the real
task; reversal is the toy one. The source is a random string of the digits
0-9, the target is the same string backwards::

    source  3 1 4 1 5 9        target  9 5 1 4 1 3

It suits a course for three reasons. Its difficulty is set by one number,
the length. A model that compresses the source into one vector must hold
every digit at once, so its accuracy falls as the strings grow (Unit 4).
And the right alignment is known in advance: output step t copies source
position S-1-t (counting from 0, S the source length), so an attention
map can be checked by eye: it should be an anti-diagonal.

Everything here is shared by the book (Units 4 and 5), the assignments and
their hidden checks, so that all three use the same ids, the same padding
and the same definition of "correct":

- the vocabulary :data:`VOCAB` (the course's :class:`lmcourse.data.Vocab`,
  so ``<BOS>`` is id 0 and ``<EOS>`` id 1 as everywhere else, plus
  ``<PAD>`` and the ten digits), and :func:`decode`;
- the data: :func:`reversal_pairs` (random lengths) and
  :func:`reversal_pairs_by_length` (a fixed number at each length, for
  accuracy by length), both deterministic given a seed or a NumPy
  generator;
- batching: :func:`pad_batch` pads id lists into a ``(B, T)`` tensor, and
  :func:`seq2seq_batch` builds the source, the decoder's inputs
  (``<BOS>`` + target) and its targets (target + ``<EOS>``);
- scoring: :func:`trim` cuts a generated sequence at its first ``<EOS>``,
  and :func:`exact_match_by_length` gives the share of sequences that are
  entirely right, per source length;
- :class:`RecurrentEncoder`, the GRU encoder every model of Unit 4 reads
  the source with (padding handled by packing).

Shapes: ``B`` sequences in a batch, ``S`` source positions and ``T``
target positions (both including padding), ``d`` the encoder's width.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from lmcourse.data import Vocab

__all__ = [
    "BOS_ID", "DIGIT_IDS", "EOS_ID", "PAD", "PAD_ID", "VOCAB", "VOCAB_SIZE",
    "RecurrentEncoder", "Seq2SeqBatch", "decode", "exact_match", "exact_match_by_length",
    "pad_batch", "reversal_pairs", "reversal_pairs_by_length", "seq2seq_batch", "trim",
]

PAD = "<PAD>"
VOCAB = Vocab([PAD, *"0123456789"])
"""<BOS> 0, <EOS> 1, <UNK> 2 (never used here), <PAD> 3, then the digits '0'..'9' as ids 4..13."""
BOS_ID, EOS_ID = VOCAB.bos_id, VOCAB.eos_id
PAD_ID = VOCAB.stoi[PAD]
DIGIT_IDS = tuple(VOCAB.stoi[c] for c in "0123456789")
VOCAB_SIZE = len(VOCAB)


def _generator(rng) -> np.random.Generator:
    """A NumPy generator from a seed (int) or a generator (used as is, so its state advances)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be an int seed or a numpy.random.Generator, got {type(rng).__name__}")


def _check_lengths(min_len: int, max_len: int) -> None:
    if not (isinstance(min_len, (int, np.integer)) and isinstance(max_len, (int, np.integer))):
        raise TypeError(f"min_len and max_len must be ints, got {min_len!r} and {max_len!r}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")


def reversal_pairs(n: int, min_len: int, max_len: int, rng) -> list[tuple[list[int], list[int]]]:
    """`n` (source, target) pairs: a random digit string and the same string reversed, as ids.

    Lengths are uniform on ``min_len..max_len`` (both included), digits uniform and
    independent. No ``<BOS>``, ``<EOS>`` or ``<PAD>``: :func:`seq2seq_batch` adds them.
    ``rng`` is a seed or a ``numpy.random.Generator``; the same seed gives the same
    pairs on every machine.

    >>> [(decode(s), decode(t)) for s, t in reversal_pairs(2, 3, 5, rng=0)]
    [('52300', '00325'), ('0186', '6810')]
    """
    _check_lengths(min_len, max_len)
    rng = _generator(rng)
    lengths = rng.integers(min_len, max_len + 1, size=n)  # (n,)
    digits = np.asarray(DIGIT_IDS)
    pairs = []
    for length in lengths:
        source = digits[rng.integers(0, 10, size=length)].tolist()
        pairs.append((source, source[::-1]))
    return pairs


def reversal_pairs_by_length(lengths: Iterable[int], per_length: int, rng) -> list[tuple[list[int], list[int]]]:
    """Exactly `per_length` reversal pairs at each length in `lengths`, grouped by length.

    The test set behind an accuracy-by-length curve: every length gets the same
    number of strings, so every point of the curve has the same sampling error.

    >>> [len(s) for s, _ in reversal_pairs_by_length([2, 4], per_length=2, rng=0)]
    [2, 2, 4, 4]
    """
    rng = _generator(rng)
    pairs = []
    for length in lengths:
        pairs += reversal_pairs(per_length, int(length), int(length), rng)
    return pairs


def pad_batch(
    seqs: Sequence[Sequence[int]], *, bos: bool = False, eos: bool = False, pad_id: int = PAD_ID
) -> tuple[torch.Tensor, torch.Tensor]:
    """Id lists of different lengths -> ``ids`` (B, T) int64, padded on the right, and ``lengths`` (B,).

    With ``bos`` / ``eos`` each sequence gets ``<BOS>`` in front / ``<EOS>`` at the end
    first; ``lengths`` counts them. ``T`` is the longest length in the batch.

    >>> ids, lengths = pad_batch([[4, 5, 6], [7]], eos=True)
    >>> ids.tolist(), lengths.tolist()
    ([[4, 5, 6, 1], [7, 1, 3, 3]], [4, 2])
    """
    if len(seqs) == 0:
        raise ValueError("pad_batch needs at least one sequence, got none")
    rows = [([BOS_ID] if bos else []) + [int(i) for i in s] + ([EOS_ID] if eos else []) for s in seqs]
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)  # (B,)
    if int(lengths.min()) == 0:
        raise ValueError("pad_batch: a sequence is empty (and has no <BOS>/<EOS> added); every row needs a token")
    ids = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return ids, lengths


@dataclass
class Seq2SeqBatch:
    """One padded batch for teacher-forced training of an encoder–decoder.

    ``tgt_in`` is what the decoder reads and ``tgt_out`` what it must predict at the
    same positions: ``tgt_out[:, t]`` is the token after ``tgt_in[:, t]``. Padding is
    ``PAD_ID`` everywhere, so ``F.cross_entropy(..., ignore_index=PAD_ID)`` skips it.
    """

    src: torch.Tensor  # (B, S) source ids, PAD_ID after each source's end
    src_lengths: torch.Tensor  # (B,) real source lengths
    tgt_in: torch.Tensor  # (B, T): <BOS> y_1 ... y_n, then PAD_ID
    tgt_out: torch.Tensor  # (B, T): y_1 ... y_n <EOS>, then PAD_ID

    def to(self, device) -> "Seq2SeqBatch":
        """The same batch on `device` (``src_lengths`` stays on the CPU, where packing needs it)."""
        return Seq2SeqBatch(self.src.to(device), self.src_lengths, self.tgt_in.to(device), self.tgt_out.to(device))


def seq2seq_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> Seq2SeqBatch:
    """(source, target) id pairs -> a :class:`Seq2SeqBatch` (sources as they are, targets shifted).

    >>> batch = seq2seq_batch([([4, 5], [5, 4]), ([6], [6])])
    >>> batch.src.tolist(), batch.tgt_in.tolist(), batch.tgt_out.tolist()
    ([[4, 5], [6, 3]], [[0, 5, 4], [0, 6, 3]], [[5, 4, 1], [6, 1, 3]])
    """
    src, src_lengths = pad_batch([s for s, _ in pairs])
    tgt_in, _ = pad_batch([t for _, t in pairs], bos=True)
    tgt_out, _ = pad_batch([t for _, t in pairs], eos=True)
    return Seq2SeqBatch(src, src_lengths, tgt_in, tgt_out)


def trim(ids: Iterable[int]) -> list[int]:
    """A generated sequence up to (not including) its first ``<EOS>``, without ``<BOS>`` and ``<PAD>``.

    >>> trim([0, 9, 8, 1, 7, 3])
    [9, 8]
    """
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (BOS_ID, PAD_ID):
            out.append(i)
    return out


def decode(ids: Iterable[int]) -> str:
    """Ids as a digit string, cut at the first ``<EOS>`` (see :func:`trim`).

    >>> decode([4, 5, 13, 1, 6])
    '019'
    """
    return VOCAB.decode(trim(ids))


def exact_match(predicted: Sequence[Sequence[int]], expected: Sequence[Sequence[int]]) -> float:
    """The share of sequences whose trimmed prediction equals the trimmed expected sequence.

    >>> exact_match([[5, 4, 1], [6, 6, 1]], [[5, 4], [6]])
    0.5
    """
    if len(predicted) != len(expected):
        raise ValueError(f"{len(predicted)} predictions for {len(expected)} expected sequences; give one each")
    if not expected:
        raise ValueError("exact_match of no sequences is undefined; pass at least one")
    return sum(trim(p) == trim(e) for p, e in zip(predicted, expected)) / len(expected)


def exact_match_by_length(
    predicted: Sequence[Sequence[int]], expected: Sequence[Sequence[int]], lengths: Sequence[int] | None = None
) -> dict[int, float]:
    """Exact-match accuracy per length: ``{length: share of sequences entirely right}``, sorted by length.

    A sequence counts as right only if every token is right and it stops at the right
    place (predictions are cut at their first ``<EOS>``, see :func:`trim`). ``lengths``
    groups the sequences (the source lengths, say); by default, the length of each
    trimmed expected sequence, which for reversal is the source length.

    >>> exact_match_by_length([[5, 4, 1], [6, 6, 1], [7, 1]], [[5, 4], [6], [7]])
    {1: 0.5, 2: 1.0}
    """
    if len(predicted) != len(expected):
        raise ValueError(f"{len(predicted)} predictions for {len(expected)} expected sequences; give one each")
    if lengths is None:
        lengths = [len(trim(e)) for e in expected]
    elif len(lengths) != len(expected):
        raise ValueError(f"{len(lengths)} lengths for {len(expected)} sequences; give one length per sequence")
    right: dict[int, list[bool]] = defaultdict(list)
    for p, e, length in zip(predicted, expected, lengths):
        right[int(length)].append(trim(p) == trim(e))
    return {length: sum(r) / len(r) for length, r in sorted(right.items())}


class RecurrentEncoder(nn.Module):
    """Reads a padded batch of sources with a GRU; returns every state and each source's last one.

    The encoder of Unit 4's models: an embedding table, then one GRU layer run left to
    right. Padding never reaches the GRU (the batch is packed by length), so the last
    state of a short source is the state after its own last token, not after the
    padding that follows it, and the states at padded positions are zeros.
    """

    def __init__(self, vocab_size: int = VOCAB_SIZE, d_emb: int = 32, d_hidden: int = 128):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD_ID)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids, src_lengths (B,) -> states (B, S, d) (zeros after each end), last (B, d)."""
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(src), src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, last = self.rnn(packed)  # last: (1, B, d), in the batch's own order
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        return states, last[0]  # (B, S, d), (B, d)
