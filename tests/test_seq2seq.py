"""lmcourse.seq2seq: the reversal task, its batches and its score, shared by the book, the assignment and its checks.

The hidden checks of the attention units draw their test strings with these
functions and score students with `exact_match_by_length`, so the tests pin
down what a check relies on: the same seed gives the same strings, ids never
move, padding is where the docstrings say, and "exact" means exact.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse import data, seq2seq
from lmcourse.seq2seq import (BOS_ID, DIGIT_IDS, EOS_ID, PAD_ID, VOCAB, VOCAB_SIZE, RecurrentEncoder, decode,
                              exact_match, exact_match_by_length, pad_batch, reversal_pairs,
                              reversal_pairs_by_length, seq2seq_batch, trim)


def test_doctests():
    failures, tried = doctest.testmod(seq2seq)
    assert tried >= 10 and failures == 0


def test_vocabulary_ids_agree_with_the_course_vocab():
    assert (BOS_ID, EOS_ID) == (data.Vocab.bos_id, data.Vocab.eos_id) == (0, 1)
    assert PAD_ID not in (BOS_ID, EOS_ID, data.Vocab.unk_id)
    assert VOCAB_SIZE == len(VOCAB.itos) == 14
    assert [VOCAB.itos[i] for i in DIGIT_IDS] == list("0123456789")
    assert len({BOS_ID, EOS_ID, PAD_ID, *DIGIT_IDS}) == 13  # every id distinct
    assert max(DIGIT_IDS) < VOCAB_SIZE


def test_reversal_pairs_are_deterministic_given_a_seed_or_a_generator():
    a = reversal_pairs(50, 3, 9, rng=7)
    assert a == reversal_pairs(50, 3, 9, rng=7)
    assert a == reversal_pairs(50, 3, 9, rng=np.random.default_rng(7))  # an int seed is a fresh generator
    assert a == reversal_pairs(50, 3, 9, rng=np.int64(7))
    assert a != reversal_pairs(50, 3, 9, rng=8)
    gen = np.random.default_rng(7)
    first, second = reversal_pairs(20, 3, 9, gen), reversal_pairs(20, 3, 9, gen)  # a generator advances
    assert first != second and first == reversal_pairs(20, 3, 9, rng=7)


def test_reversal_pairs_snapshot():
    # Thresholds of trained checks are calibrated on these strings: a change here means recalibrating them.
    assert [(decode(s), decode(t)) for s, t in reversal_pairs(3, 4, 8, rng=2026)] == [
        ("63403638", "83630436"), ("7797", "7977"), ("1860", "0681")]
    assert [decode(s) for s, _ in reversal_pairs_by_length([6, 10], per_length=2, rng=2026)] == [
        "810634", "036387", "7971860219", "7926671568"]


def test_reversal_pairs_content_and_distribution():
    pairs = reversal_pairs(20_000, 2, 6, rng=0)
    assert all(t == s[::-1] for s, t in pairs)
    assert all(isinstance(i, int) for s, t in pairs[:50] for i in s + t)  # plain ints: they cross the grader's wire
    lengths = np.array([len(s) for s, _ in pairs])
    assert lengths.min() == 2 and lengths.max() == 6  # both ends included
    counts = np.bincount(lengths, minlength=7)[2:]
    assert np.all(np.abs(counts / len(pairs) - 0.2) < 0.01)  # uniform lengths: sd of each share is 0.003
    digits = np.array([i for s, _ in pairs for i in s])
    assert set(digits.tolist()) == set(DIGIT_IDS)  # only digits: no specials inside a source
    shares = np.bincount(digits, minlength=VOCAB_SIZE)[list(DIGIT_IDS)] / len(digits)
    assert np.all(np.abs(shares - 0.1) < 0.005)  # 80,000 digits: sd of each share is 0.001
    # digits independent of their neighbours: pairs of adjacent digits uniform over 100 pairs
    adjacent = np.array([10 * (s[i] - DIGIT_IDS[0]) + s[i + 1] - DIGIT_IDS[0] for s, _ in pairs for i in range(len(s) - 1)])
    pair_shares = np.bincount(adjacent, minlength=100) / len(adjacent)
    assert np.all(np.abs(pair_shares - 0.01) < 0.003)  # 60,000 pairs: sd of each share is 0.0004


def test_reversal_pairs_single_length_and_bad_arguments():
    assert {len(s) for s, _ in reversal_pairs(30, 7, 7, rng=0)} == {7}
    assert reversal_pairs(0, 1, 3, rng=0) == []
    with pytest.raises(ValueError, match="min_len <= max_len"):
        reversal_pairs(5, 9, 3, rng=0)
    with pytest.raises(ValueError, match="1 <= min_len"):
        reversal_pairs(5, 0, 3, rng=0)
    with pytest.raises(TypeError, match="seed or a numpy"):
        reversal_pairs(5, 1, 3, rng=torch.Generator())
    with pytest.raises(TypeError, match="ints"):
        reversal_pairs(5, 1.5, 3, rng=0)


def test_reversal_pairs_by_length_gives_each_length_the_same_count():
    pairs = reversal_pairs_by_length(range(5, 41), per_length=7, rng=1)
    lengths = [len(s) for s, _ in pairs]
    assert lengths == [n for n in range(5, 41) for _ in range(7)]
    assert all(t == s[::-1] for s, t in pairs)
    assert pairs == reversal_pairs_by_length(range(5, 41), per_length=7, rng=1)


def test_pad_batch_pads_on_the_right_and_counts_real_tokens():
    ids, lengths = pad_batch([[4, 5, 6], [7], [8, 9]])
    assert ids.dtype == torch.long and lengths.dtype == torch.long
    assert ids.tolist() == [[4, 5, 6], [7, PAD_ID, PAD_ID], [8, 9, PAD_ID]]
    assert lengths.tolist() == [3, 1, 2]
    ids, lengths = pad_batch([[4, 5], [6]], bos=True, eos=True)
    assert ids.tolist() == [[BOS_ID, 4, 5, EOS_ID], [BOS_ID, 6, EOS_ID, PAD_ID]]
    assert lengths.tolist() == [4, 3]
    ids, lengths = pad_batch([[4, 5]], pad_id=-1)
    assert ids.shape == (1, 2) and lengths.tolist() == [2]
    assert pad_batch([[]], eos=True)[0].tolist() == [[EOS_ID]]  # an empty target still gets its <EOS>
    with pytest.raises(ValueError, match="at least one"):
        pad_batch([])
    with pytest.raises(ValueError, match="empty"):
        pad_batch([[4], []])


def test_seq2seq_batch_shifts_the_target_by_one():
    pairs = reversal_pairs(64, 1, 12, rng=3)
    batch = seq2seq_batch(pairs)
    B = len(pairs)
    assert batch.src.shape == (B, max(len(s) for s, _ in pairs))
    assert batch.tgt_in.shape == batch.tgt_out.shape == (B, max(len(t) for _, t in pairs) + 1)
    assert batch.src_lengths.tolist() == [len(s) for s, _ in pairs]
    for b, (src, tgt) in enumerate(pairs):
        n = len(tgt)
        assert batch.src[b, : len(src)].tolist() == src and (batch.src[b, len(src) :] == PAD_ID).all()
        assert batch.tgt_in[b, : n + 1].tolist() == [BOS_ID] + tgt
        assert batch.tgt_out[b, : n + 1].tolist() == tgt + [EOS_ID]
        assert (batch.tgt_in[b, n + 1 :] == PAD_ID).all() and (batch.tgt_out[b, n + 1 :] == PAD_ID).all()
        assert torch.equal(batch.tgt_in[b, 1 : n + 1], batch.tgt_out[b, :n])  # what is read next was predicted now
    # ignore_index=PAD_ID leaves exactly the real target tokens and one <EOS> per row
    assert int((batch.tgt_out != PAD_ID).sum()) == sum(len(t) + 1 for _, t in pairs)


def test_seq2seq_batch_to_keeps_lengths_on_the_cpu():
    batch = seq2seq_batch(reversal_pairs(4, 2, 5, rng=0)).to("cpu")
    assert batch.src_lengths.device.type == "cpu"
    assert batch.src.device.type == batch.tgt_in.device.type == batch.tgt_out.device.type == "cpu"


def test_trim_and_decode():
    assert trim([BOS_ID, 9, 8, EOS_ID, 7, PAD_ID]) == [9, 8]
    assert trim([9, 8]) == [9, 8]  # no <EOS>: everything
    assert trim([EOS_ID, 9]) == []
    assert trim(torch.tensor([5, 6, EOS_ID])) == [5, 6]  # tensors of ids too
    assert decode([DIGIT_IDS[3], DIGIT_IDS[1], EOS_ID, DIGIT_IDS[4]]) == "31"


def test_exact_match_is_exact():
    target = [DIGIT_IDS[1], DIGIT_IDS[2], DIGIT_IDS[3]]
    right = target + [EOS_ID, DIGIT_IDS[5], PAD_ID]  # anything after the first <EOS> is ignored
    one_digit_wrong = [DIGIT_IDS[1], DIGIT_IDS[2], DIGIT_IDS[4], EOS_ID]
    too_long = target + [DIGIT_IDS[3], EOS_ID]  # every target digit right, but it does not stop
    too_short = target[:2] + [EOS_ID]
    never_stops = target + [DIGIT_IDS[0]] * 5
    no_eos_but_exact = list(target)  # a sequence that ends exactly where the target ends
    predictions = [right, one_digit_wrong, too_long, too_short, never_stops, no_eos_but_exact]
    assert [exact_match([p], [target]) for p in predictions] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert exact_match(predictions, [target] * 6) == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="one each"):
        exact_match([right], [target, target])
    with pytest.raises(ValueError, match="at least one"):
        exact_match([], [])


def test_exact_match_by_length_groups_by_length():
    pairs = reversal_pairs_by_length([3, 5, 8], per_length=4, rng=0)
    targets = [t for _, t in pairs]
    predictions = [t + [EOS_ID] for t in targets]
    for i in [0, 4, 5, 11]:  # break one string of length 3, two of length 5, one of length 8
        predictions[i] = predictions[i][:-2] + [EOS_ID]
    assert exact_match_by_length(predictions, targets) == {3: 0.75, 5: 0.5, 8: 0.75}
    by_given = exact_match_by_length(predictions, targets, lengths=[1] * 6 + [2] * 6)
    assert by_given == {1: pytest.approx(3 / 6), 2: pytest.approx(5 / 6)}
    assert list(exact_match_by_length(predictions[::-1], targets[::-1])) == [3, 5, 8]  # sorted by length
    as_tensor = exact_match_by_length(torch.tensor([t + [EOS_ID] for t in targets[:4]]).tolist(), targets[:4])
    assert as_tensor == {3: 1.0}
    with pytest.raises(ValueError, match="one length per sequence"):
        exact_match_by_length(predictions, targets, lengths=[1, 2])
    with pytest.raises(ValueError, match="one each"):
        exact_match_by_length(predictions[:3], targets)


def test_recurrent_encoder_ignores_padding():
    torch.manual_seed(0)
    encoder = RecurrentEncoder(VOCAB_SIZE, d_emb=8, d_hidden=16)
    pairs = reversal_pairs(5, 1, 9, rng=4)
    batch = seq2seq_batch(pairs)
    states, last = encoder(batch.src, batch.src_lengths)
    B, S = batch.src.shape
    assert states.shape == (B, S, 16) and last.shape == (B, 16)
    for b, (src, _) in enumerate(pairs):
        alone_states, alone_last = encoder(torch.tensor([src]), torch.tensor([len(src)]))  # no padding at all
        torch.testing.assert_close(states[b, : len(src)], alone_states[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(last[b], alone_last[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(last[b], states[b, len(src) - 1])  # the last real state, not a padded one
        assert (states[b, len(src) :] == 0).all()
    junk = batch.src.clone()
    junk[junk == PAD_ID] = DIGIT_IDS[9]  # rubbish where the padding was
    states_junk, last_junk = encoder(junk, batch.src_lengths)
    torch.testing.assert_close(last_junk, last)
    torch.testing.assert_close(states_junk, states)


def test_recurrent_encoder_is_an_embedding_and_a_gru():
    torch.manual_seed(0)
    encoder = RecurrentEncoder(VOCAB_SIZE, d_emb=8, d_hidden=16)
    assert isinstance(encoder.rnn, nn.GRU) and encoder.rnn.batch_first
    assert encoder.embed.padding_idx == PAD_ID
    src = torch.tensor([[DIGIT_IDS[1], DIGIT_IDS[2], DIGIT_IDS[3]]])
    states, last = encoder(src, torch.tensor([3]))
    expected, h_n = encoder.rnn(encoder.embed(src))
    torch.testing.assert_close(states, expected)
    torch.testing.assert_close(last, h_n[0])
    # gradients reach the embedding through the packed sequence
    last.sum().backward()
    assert encoder.embed.weight.grad[list(DIGIT_IDS[1:4])].abs().sum() > 0
