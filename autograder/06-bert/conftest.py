"""What the checks of 06-bert share: this assignment's rule (PyTorch's ready-made transformer layers and
nn.MultiheadAttention are refused on the student's side, ``no_builtin_encoder``; nn.LayerNorm and the given
MultiHeadAttention stay allowed), the module comparisons (`lmcourse.grading.compare`), random weights that
make every LayerNorm visible (`lmcourse.grading.compare.block_weights`), and MiniLM's real weights and
WordPiece batches of real sentences.

The trusted side of every module comparison is the reference solution's class. The reference itself is
held to the real thing by the project's tests: loaded with MiniLM's weights it equals
`transformers.BertModel`, and its `wordpiece_tokenize` gives the ids of Hugging Face's tokenizer.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from lmcourse import minilm
from lmcourse.grading.compare import block_weights as compare_block_weights, comparison_fixtures

RULES = dict(no_builtin_encoder=True)

# Sentences for MiniLM: plain prose, a question, numbers, accents, a word split into several pieces, a word
# MiniLM never saw as a whole, Shakespeare, and a pair for the two segments.
SENTENCES = ("We sat on the bank of the river.", "She took the money to the bank!",
             "How many parameters does MiniLM-L6 have: 22,713,216?", "Crème brûlée at the café, naïvely priced.",
             "Wherefore art thou Romeo? Deny thy father and refuse thy name.",
             "Unaffable antidisestablishmentarianism", "Light", "")
PAIRS = (("The light was green.", "So we drove on."), ("Play the tape again.", "It is a play in five acts."))


@pytest.fixture
def block_weights():
    """`block_weights(cls, init_kwargs, rng, scale=1.5)`: `lmcourse.grading.compare.block_weights`, with
    BertForMLM's output bias (zeros at initialisation: a missing bias would not show) drawn too."""
    return functools.partial(compare_block_weights, drawn=("bias",))


@functools.lru_cache(maxsize=1)
def _minilm_weights() -> dict:
    return minilm.state_dict()


@pytest.fixture
def minilm_weights():
    """MiniLM's weights in the course's names ({name: float32 array}, 22.7 million numbers), verified."""
    return _minilm_weights()


def wordpiece_batch(reference, rng=None, with_pairs: bool = True):
    """(ids, token_type_ids, attention_mask), each (B, T) int64: [CLS] sentence [SEP] rows (and
    [CLS] a [SEP] b [SEP] pairs with segments 0 and 1), padded with [PAD], tokenized by the reference."""
    vocab, special = minilm.piece_ids(), minilm.special_ids()
    cls, sep, pad = special["[CLS]"], special["[SEP]"], special["[PAD]"]
    rows, types = [], []
    for s in SENTENCES:
        ids = [cls] + reference.wordpiece_tokenize(s, vocab) + [sep]
        rows.append(ids)
        types.append([0] * len(ids))
    for a, b in PAIRS if with_pairs else ():
        first = [cls] + reference.wordpiece_tokenize(a, vocab) + [sep]
        second = reference.wordpiece_tokenize(b, vocab) + [sep]
        rows.append(first + second)
        types.append([0] * len(first) + [1] * len(second))
    T = max(map(len, rows))
    ids = np.full((len(rows), T), pad, dtype=np.int64)
    tt = np.zeros((len(rows), T), dtype=np.int64)
    am = np.zeros((len(rows), T), dtype=np.int64)
    for i, (r, t) in enumerate(zip(rows, types)):
        ids[i, :len(r)], tt[i, :len(r)], am[i, :len(r)] = r, t, 1
    return ids, tt, am


rules, compare, both, weights = comparison_fixtures(RULES)
