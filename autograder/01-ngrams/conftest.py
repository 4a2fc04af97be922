"""Inputs shared by the checks of 01-ngrams: random corpora and small models.

Every corpus is drawn from the check's own `rng` (seeded per check), so a
check sees the same inputs on every run; the reference module computes the
expected values from them.
"""

from __future__ import annotations

import numpy as np
import pytest

UNK = "<UNK>"


def random_sentences(rng: np.random.Generator, n_sentences: int = 40, n_types: int = 10,
                     max_len: int = 8, allow_empty: bool = True) -> list[list[str]]:
    """Sentences of words "w0".."w{n_types-1}" with Zipf-like frequencies (so some are rare)."""
    weights = 1.0 / np.arange(1, n_types + 1)
    weights /= weights.sum()
    lo = 0 if allow_empty else 1
    lengths = rng.integers(lo, max_len + 1, size=n_sentences)
    return [[f"w{i}" for i in rng.choice(n_types, size=int(m), p=weights)] for m in lengths]


def with_unk(rng: np.random.Generator, sentences: list[list[str]], rate: float = 0.15) -> list[list[str]]:
    """The same sentences with about `rate` of the words already replaced by the literal token <UNK>.

    A corpus can come with <UNK> in it (one mapped by replace_rare, or one
    distributed that way): <UNK> is then an ordinary token to count.
    """
    return [[UNK if rng.random() < rate else w for w in s] for s in sentences]


def large_vocabulary_sentences(rng: np.random.Generator, n_types: int = 12_000) -> list[list[str]]:
    """About 30,000 tokens over `n_types` word types: the size of TinyShakespeare's vocabulary (11,690 types).

    Every type occurs at least once, frequent types (Zipf) many times, some
    sentences twice; and 40 four-word beginnings of rare words are each
    continued by 25 different words, so that many 5-grams differ only in their
    last token. n-gram code that works for a few dozen types can break at this
    size (an integer code per window that no longer fits in 64 bits).
    """
    weights = 1.0 / np.arange(1, n_types + 1)
    stream = np.concatenate([rng.permutation(n_types), rng.choice(n_types, size=n_types, p=weights / weights.sum())])
    cuts = np.cumsum(rng.integers(0, 21, size=len(stream) // 5))
    pieces = np.split(stream, cuts[cuts < len(stream)])
    sentences = [[f"w{i}" for i in piece] for piece in pieces]
    sentences += [sentences[i] for i in rng.integers(0, len(sentences), size=300)]  # repeated lines
    for _ in range(40):
        prefix = [f"w{i}" for i in rng.integers(n_types // 2, n_types, size=4)]
        sentences += [prefix + [f"w{i}"] for i in rng.choice(n_types, size=25, replace=False)]
    return [sentences[i] for i in rng.permutation(len(sentences))]


def markov_sentences(rng: np.random.Generator, n_sentences: int, n_types: int = 12, branching: int = 2,
                     p_end: float = 0.2, max_len: int = 15) -> list[list[str]]:
    """Sentences from a random Markov chain in which each word has only `branching` successors.

    Text like this is far better predicted by bigrams than by unigrams, so the
    best interpolation weights are far from uniform.
    """
    successors = rng.integers(0, n_types, size=(n_types + 1, branching))  # row n_types: the sentence start
    sentences = []
    for _ in range(n_sentences):
        words, prev = [], n_types
        while len(words) < max_len and not (words and rng.random() < p_end):
            prev = int(successors[prev, rng.integers(0, branching)])
            words.append(f"w{prev}")
        sentences.append(words)
    return sentences


def make_model(reference, rng: np.random.Generator, n: int, *, min_count: int = 2, **kwargs) -> dict:
    """A reference-built n-gram model of a random corpus whose rare words became <UNK>.

    Two words that occur once are added, so <UNK> occurs in training (as a
    word and as a history) whatever the random draw.
    """
    raw = random_sentences(rng, **kwargs) + [["w0", "hapax-a"], ["hapax-b", "w1", "w0"]]
    vocab = reference.build_vocab(raw, min_count=min_count)
    return reference.build_model(reference.replace_rare(raw, vocab), vocab, n)


def random_histories(rng: np.random.Generator, model: dict, count: int = 12, max_len: int = 5) -> list[list[str]]:
    """Histories of vocabulary words (specials excluded), some empty, some long."""
    words = [w for w in model["vocab"][3:]] or ["<UNK>"]
    return [[words[i] for i in rng.integers(0, len(words), size=int(m))]
            for m in rng.integers(0, max_len + 1, size=count)]


@pytest.fixture
def corpus():
    """`corpus(rng, **kwargs)`: a random list of sentences (see `random_sentences`)."""
    return random_sentences


@pytest.fixture
def model_of(reference):
    """`model_of(rng, n, **kwargs)`: a reference-built model of a random corpus."""
    return lambda rng, n, **kwargs: make_model(reference, rng, n, **kwargs)


@pytest.fixture
def markov():
    """`markov(rng, n_sentences, ...)`: sentences from a random sparse Markov chain."""
    return markov_sentences


@pytest.fixture
def unk():
    """`unk(rng, sentences, rate=0.15)`: the sentences with some words already the literal <UNK>."""
    return with_unk


@pytest.fixture
def large_corpus():
    """`large_corpus(rng)`: ~30,000 tokens over 12,000 word types (see `large_vocabulary_sentences`)."""
    return large_vocabulary_sentences


@pytest.fixture
def histories():
    """`histories(rng, model, count=12, max_len=5)`: random histories over the model's words."""
    return random_histories
