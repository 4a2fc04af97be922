"""lmcourse.bert_tasks: the tiny BERT's vocabulary, its pretraining splits and the word-order task."""

from __future__ import annotations

import numpy as np
import pytest

from lmcourse import bert_tasks as bt
from lmcourse.data import word_tokenize


def _key(ids):
    """What a shuffle keeps: the non-word tokens in place and the bag of words."""
    return (tuple(i if not bt.is_word_id(i) else -1 for i in ids), tuple(sorted(i for i in ids if bt.is_word_id(i))))


def test_vocabulary():
    vocab = bt.compact_vocab()
    assert vocab[:5] == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert (bt.PAD_ID, bt.UNK_ID, bt.CLS_ID, bt.SEP_ID, bt.MASK_ID) == (0, 1, 2, 3, 4)
    assert len(set(vocab)) == len(vocab) and 3_500 < len(vocab) < 5_000
    assert vocab[5:8] == (",", ".", "the")  # by decreasing count
    line = "Before we proceed any further, hear me speak."
    assert bt.decode(bt.encode_line(line)) == " ".join(word_tokenize(line))
    assert bt.encode_line("zzzqx the") == [bt.UNK_ID, vocab.index("the")]
    assert max(len(ids) for split in bt.SPLITS for ids in bt.mlm_ids(split)) <= 30


def test_splits_are_disjoint_and_cover_the_corpus():
    lines = bt.shakespeare_lines()
    assert len(lines) > 25_000 and not any(line.strip() == "First Citizen:" for line in lines)
    sizes = {s: len(bt.mlm_lines(s)) for s in bt.SPLITS}
    assert sum(sizes.values()) == len(lines)
    assert 0.08 < sizes["test"] / len(lines) < 0.12 and 0.035 < sizes["valid"] / len(lines) < 0.065
    tokenised = {s: {tuple(word_tokenize(line)) for line in bt.mlm_lines(s)} for s in bt.SPLITS}
    assert not tokenised["train"] & tokenised["test"]
    assert not tokenised["train"] & tokenised["valid"]
    assert not tokenised["valid"] & tokenised["test"]
    with pytest.raises(ValueError, match="unknown split"):
        bt.mlm_lines("dev")


def test_labelled_task_is_balanced_deterministic_and_seeded():
    ids, labels = bt.labelled_task("train", n=2000, seed=3)
    assert len(ids) == 2000 and labels.dtype == np.int64 and set(labels) == {0, 1} and labels.sum() == 1000
    again, labels_again = bt.labelled_task("train", n=2000, seed=3)
    assert again == ids and (labels_again == labels).all()
    other, _ = bt.labelled_task("train", n=2000, seed=4)
    assert other != ids
    small, small_labels = bt.labelled_task("train", n=51, seed=0)
    assert abs(small_labels.mean() - 0.5) < 0.02
    test_ids, test_labels = bt.labelled_task("test")
    assert len(test_ids) >= 2_000 and abs(test_labels.mean() - 0.5) <= 1 / len(test_ids)
    with pytest.raises(ValueError, match="n must be"):
        bt.labelled_task("test", n=10**6)


def test_examples_are_real_lines_or_their_words_shuffled():
    for split in ("train", "test"):
        ids, labels = bt.labelled_task(split, n=3000 if split == "train" else None, seed=1)
        lines = {tuple(x) for x in bt.mlm_ids(split)}
        keys = {_key(x) for x in lines}
        real = [tuple(x) for x, y in zip(ids, labels) if y == 1]
        fake = [tuple(x) for x, y in zip(ids, labels) if y == 0]
        assert all(x in lines for x in real)
        assert all(sum(bt.is_word_id(i) for i in x) >= bt.MIN_WORDS for x in real + fake)
        assert all(_key(x) in keys for x in fake)  # same words, punctuation in place: only the order differs
        assert sum(x in lines for x in fake) / len(fake) < 0.01  # a shuffle is (almost) never a real line
        assert len({tuple(x) for x in ids}) > 0.98 * len(ids)  # each line is used once


def test_test_examples_come_from_lines_no_model_trains_on():
    test_ids, _ = bt.labelled_task("test")
    train_keys = {_key(x) for x in bt.mlm_ids("train")} | {_key(x) for x in bt.mlm_ids("valid")}
    pool_ids, _ = bt.labelled_task("train", seed=0)
    assert len(pool_ids) > 15_000
    shared = sum(_key(x) in train_keys for x in test_ids)
    assert shared / len(test_ids) < 0.01  # bag-of-words twins only (different lines, same words), never the line
    assert not {tuple(x) for x in test_ids} & {tuple(x) for x in bt.mlm_ids("train")}


def test_shuffle_words_changes_the_line_and_keeps_punctuation():
    rng = np.random.default_rng(0)
    line = bt.encode_line("The gods forbid! I have no such mind.")
    for _ in range(200):
        out = bt.shuffle_words(line, rng)
        assert out != line and _key(out) == _key(line)
    two = bt.encode_line("to be , be to")
    assert all(bt.shuffle_words(two, rng) != two for _ in range(50))
    with pytest.raises(ValueError):
        bt.shuffle_words(bt.encode_line("the the , the"), rng)


def test_pad_batch():
    batch = bt.pad_batch([[10, 11, 12], [13]])
    assert batch.tolist() == [[2, 10, 11, 12, 3], [2, 13, 3, 0, 0]]
    assert bt.pad_batch([[10, 11, 12]], max_len=4).tolist() == [[2, 10, 11, 3]]
    assert bt.pad_batch([[10]], max_len=6).shape == (1, 6)


def test_doctests():
    import doctest

    failures, tried = doctest.testmod(bt)
    assert tried >= 2 and failures == 0
