"""Inputs shared by the checks of 02-word2vec: random corpora of word ids and random vectors.

Every input is drawn from the check's own `rng` (seeded per check), so a
check sees the same inputs on every run; the reference module computes the
expected values from them.
"""

from __future__ import annotations

import numpy as np
import pytest


def random_corpus(rng: np.random.Generator, n_sentences: int = 30, n_types: int = 12, max_len: int = 9,
                  min_len: int = 0) -> list[list[int]]:
    """Sentences of word ids 0..n_types-1 (lists of ints), some empty or of one word."""
    lengths = rng.integers(min_len, max_len + 1, size=n_sentences)
    return [rng.integers(0, n_types, size=int(m)).tolist() for m in lengths]


def sgns_inputs(rng: np.random.Generator, batch: int = 6, negatives: int = 4, dim: int = 5,
                scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t (B, d), c_pos (B, d), c_neg (B, K, d)) standard normal vectors times `scale`."""
    return (scale * rng.normal(size=(batch, dim)), scale * rng.normal(size=(batch, dim)),
            scale * rng.normal(size=(batch, negatives, dim)))


def as_pairs(result, what: str) -> list[tuple[int, int]]:
    """(centres, contexts) from the worker as a sorted list of pairs; a clear failure for anything else."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{what}: expected a pair (centres, contexts) of two int arrays, "
                             f"found {type(result).__name__}"
                             + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""))
    centres, contexts = (np.asarray(x) for x in result)
    if centres.ndim != 1 or centres.shape != contexts.shape:
        raise AssertionError(f"{what}: centres and contexts must be 1-D arrays of the same length, "
                             f"found shapes {centres.shape} and {contexts.shape}")
    if centres.size and not (np.issubdtype(centres.dtype, np.integer) and np.issubdtype(contexts.dtype, np.integer)):
        raise AssertionError(f"{what}: expected integer word ids, found dtypes {centres.dtype} and {contexts.dtype}")
    return sorted(zip(centres.tolist(), contexts.tolist()))


@pytest.fixture
def pairs_of():
    """`pairs_of(result, what)`: a student's (centres, contexts) as a sorted list of pairs (see `as_pairs`)."""
    return as_pairs


@pytest.fixture
def corpus():
    """`corpus(rng, **kwargs)`: a random list of sentences of word ids (see `random_corpus`)."""
    return random_corpus


@pytest.fixture
def vectors():
    """`vectors(rng, batch, negatives, dim, scale)`: random (t, c_pos, c_neg) (see `sgns_inputs`)."""
    return sgns_inputs
