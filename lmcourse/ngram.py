"""Interpolated Kneser–Ney over integer ids, vectorised: the count-based baseline of later units.

Unit 1 builds Kneser–Ney from dictionaries, one n-gram at a time, so that
every count can be printed. Later units compare neural models with it on a
million characters or on every word of the corpus, where that takes
minutes; `KneserNey` computes the same probabilities with sorted NumPy
arrays in about a second. Unit 1's chapter checks that the two agree on
its word models, and tests/test_ngram.py checks the definition on texts
small enough to count by hand.

The model is Unit 1's, exactly:

- every sequence is padded with n-1 <BOS> on the left and, unless
  ``eos=False``, one <EOS> on the right; every real token (and <EOS>) is
  one prediction;
- order n uses the ordinary counts c(h, w); each lower order m uses
  continuation counts N1+(. h w), the number of distinct tokens seen
  before (h, w), except an m-gram that starts with <BOS>, which keeps its
  ordinary count (nothing but padding can stand before it);
- P_m(w | h) = max(c(h, w) - D, 0) / c(h) + D N1+(h .) / c(h) P_{m-1}(w | h'),
  with h' the history without its first token, P_{m-1} alone when h was
  never seen, and P_0 = 1 / vocab_size;
- a history that starts with two <BOS> is read one order down (dropping a
  <BOS> leaves the same context), as if each sequence had one <BOS>.

How the arrays work: an m-gram is named by an integer code built from the
right, one token at a time (code of the last token; then the code of the
last two; ...), and each level's codes are renumbered 0..K-1 by
`np.unique`, so that no code ever exceeds (number of n-grams) x V and
nothing overflows however large the vocabulary or the order. Histories
are windows too (ending one position earlier), so they share the codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOS_ID = 0  # lmcourse.data.Vocab puts <BOS>, <EOS>, <UNK> at ids 0, 1, 2
EOS_ID = 1
NONE = -1  # the code of a window never seen in training


def _padded_stream(sequences: Sequence, n: int, eos: bool) -> tuple[np.ndarray, np.ndarray]:
    """All sequences in one int64 stream, each after n-1 <BOS> (and before <EOS>), and where the targets are.

    Returns (stream (L,), targets (P,)): the positions of every real token and <EOS>.
    A window of at most n tokens ending at a target never reaches into the previous sequence.
    """
    parts, targets, start = [], [], 0
    for seq in sequences:
        seq = np.asarray(seq, dtype=np.int64)
        body = np.concatenate([np.full(n - 1, BOS_ID), seq, [EOS_ID] if eos else []]).astype(np.int64)
        parts.append(body)
        targets.append(start + np.arange(n - 1, len(body)))
        start += len(body)
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(parts), np.concatenate(targets)


class KneserNey:
    """Interpolated Kneser–Ney of order n, counted from `sequences` of token ids.

    vocab_size is the number of tokens the model can predict (Unit 1: every token but
    <BOS>); the uniform floor is 1 / vocab_size. <BOS> must be id 0 and <EOS> id 1.

    >>> lm = KneserNey([[3, 4, 3, 4, 5]], n=2, vocab_size=5)
    >>> round(float(lm.distribution([3])[4]), 3)   # "4" always followed "3"
    0.689
    """

    def __init__(self, sequences: Sequence, n: int, vocab_size: int, discount: float = 0.75, eos: bool = True):
        if n < 1:
            raise ValueError(f"the order n must be at least 1; got {n}")
        if not 0 < discount < 1:
            raise ValueError(f"the discount D must be in (0, 1); got {discount}")
        self.n, self.vocab_size, self.discount, self.eos = n, vocab_size, discount, eos
        stream, targets = _padded_stream(sequences, n, eos)
        if stream.size and (stream.min() < 0):
            raise ValueError("token ids must be non-negative")
        self._V = int(stream.max()) + 1 if stream.size else 1  # the radix of the codes
        # self._levels[k]: the sorted pair keys (code of the last k-1 tokens) * V + token k from the right
        self._levels: list[np.ndarray] = []
        ngram_codes = self._train_codes(stream, targets)       # [m] -> (P,) code of the m-gram at each target
        history_codes = self._codes(stream, targets - 1, n - 1)  # [k] -> (P,) code of the k tokens before
        self._tables = []
        for m in range(1, n + 1):
            self._tables.append(self._table(m, stream, targets, ngram_codes, history_codes))

    # -- codes -----------------------------------------------------------------------------
    def _train_codes(self, stream: np.ndarray, targets: np.ndarray) -> list[np.ndarray]:
        """Number every window of 1..n tokens that ends at a target or just before one (the levels)."""
        ends = np.concatenate([targets, targets - 1])  # n-grams end at targets, histories one before
        codes = [np.zeros(len(ends), np.int64)]  # level 0: the empty window, one code
        for k in range(1, self.n + 1):
            keys = codes[-1] * self._V + stream[np.maximum(ends - k + 1, 0)]
            level, inverse = np.unique(keys, return_inverse=True)
            self._levels.append(level)
            codes.append(inverse.astype(np.int64))
        return [c[: len(targets)] for c in codes]

    def _codes(self, stream: np.ndarray, ends: np.ndarray, longest: int) -> list[np.ndarray]:
        """The codes of the windows of 0..longest tokens ending at `ends` (NONE where never seen)."""
        codes = [np.zeros(len(ends), np.int64)]
        for k in range(1, longest + 1):
            level, previous = self._levels[k - 1], codes[-1]
            keys = previous * self._V + stream[np.maximum(ends - k + 1, 0)]
            found = np.searchsorted(level, keys).clip(max=len(level) - 1)
            seen = (previous != NONE) & (level[found] == keys) if len(level) else np.zeros(len(ends), bool)
            codes.append(np.where(seen, found, NONE))
        return codes

    # -- counts ----------------------------------------------------------------------------
    def _table(self, m, stream, targets, ngram_codes, history_codes) -> dict:
        """The counts of order m: per m-gram its count (ordinary or continuation), per history c(h), N1+(h .)."""
        gram = ngram_codes[m]
        grams, first, ordinary = np.unique(gram, return_index=True, return_counts=True)
        count = ordinary.astype(np.float64)
        if m < self.n:  # continuation counts: how many distinct (m+1)-grams end in this m-gram
            longer = ngram_codes[m + 1]
            pairs = np.unique(gram * (int(longer.max()) + 1) + longer)  # each distinct (m-gram, (m+1)-gram)
            continuation = np.bincount(np.searchsorted(grams, pairs // (int(longer.max()) + 1)),
                                       minlength=len(grams))
            starts_with_bos = (stream[targets[first] - m + 1] == BOS_ID) if m > 1 else np.zeros(len(grams), bool)
            count = np.where(starts_with_bos, ordinary, continuation).astype(np.float64)
        history = history_codes[m - 1][first]  # (K,) the history code of each distinct m-gram
        histories, owner = np.unique(history, return_inverse=True)
        return {"grams": grams, "count": count, "histories": histories,
                "total": np.bincount(owner, weights=count, minlength=len(histories)),    # c(h)
                "followers": np.bincount(owner, minlength=len(histories)).astype(np.float64)}  # N1+(h .)

    @staticmethod
    def _lookup(sorted_codes: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into sorted_codes, found) for each code; NONE is never found."""
        if len(sorted_codes) == 0:
            return np.zeros(len(codes), np.int64), np.zeros(len(codes), bool)
        at = np.searchsorted(sorted_codes, codes).clip(max=len(sorted_codes) - 1)
        return at, (codes != NONE) & (sorted_codes[at] == codes)

    # -- probabilities ---------------------------------------------------------------------
    def _probabilities(self, stream: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """P(stream[t] | the n-1 tokens before t) for every target t, by the recursion over orders."""
        grams = self._codes(stream, targets, self.n)
        histories = self._codes(stream, targets - 1, self.n - 1)
        p = np.full(len(targets), 1.0 / self.vocab_size)
        for m, table in enumerate(self._tables, start=1):
            at_h, seen_h = self._lookup(table["histories"], histories[m - 1])
            at_g, seen_g = self._lookup(table["grams"], grams[m])
            c_h = np.where(seen_h, table["total"][at_h], 1.0)
            c_hw = np.where(seen_g & seen_h, table["count"][at_g], 0.0)
            mixed = np.maximum(c_hw - self.discount, 0) / c_h + self.discount * table["followers"][at_h] / c_h * p
            p_m = np.where(seen_h, mixed, p)
            if m >= 3:  # a history that starts with two <BOS>: the same context as one order down
                two_bos = (stream[targets - m + 1] == BOS_ID) & (stream[targets - m + 2] == BOS_ID)
                p_m = np.where(two_bos, p, p_m)
            p = p_m
        return p

    def log_probs(self, sequences: Sequence) -> list[np.ndarray]:
        """log P of every predicted token of each sequence (its tokens, then <EOS> if eos): one array each."""
        stream, targets = _padded_stream(sequences, self.n, self.eos)
        logp = np.log(self._probabilities(stream, targets))
        lengths = [len(s) + int(self.eos) for s in sequences]
        return np.split(logp, np.cumsum(lengths)[:-1]) if lengths else []

    def cross_entropy(self, sequences: Sequence) -> float:
        """Mean -log P per predicted token, in nats (the exponential is the perplexity)."""
        return float(-np.concatenate(self.log_probs(sequences)).mean())

    def distribution(self, history: Sequence[int]) -> np.ndarray:
        """P(w | history) for every id w in 0..V-1 (V = the largest id counted + 1), shape (V,).

        The history is the tokens before the prediction, most recent last; a shorter one than
        n-1 is padded with <BOS> on the left, as at the start of a sequence. <BOS> itself gets 0.
        """
        context = np.concatenate([np.full(self.n - 1, BOS_ID), np.asarray(history, np.int64)])[-(self.n - 1):] \
            if self.n > 1 else np.zeros(0, np.int64)
        V = self._V
        stream = np.concatenate([np.tile(np.append(context, 0), V)]).astype(np.int64)  # V copies, token slot last
        targets = np.arange(V) * self.n + self.n - 1
        stream[targets] = np.arange(V)
        p = self._probabilities(stream, targets)
        p[BOS_ID] = 0.0
        return p
