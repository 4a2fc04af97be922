"""The grader's shared sequence-to-sequence checks (lmcourse.grading.seq2seq), on their own, in this process.

04-attention and 05-transformer grade greedy decoding and the training loop with these helpers; their unit
contracts grade known-wrong notebooks through them end to end. Here each helper meets a small model written
for the test, an honest use, and the wrong uses it exists to catch, so that a change to a helper that stops
catching one fails here, whatever the units' variants happen to exercise.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading import training
from lmcourse.grading.seq2seq import Seq2SeqTask, check_greedy_choices, check_training_steps, eval_rows
from lmcourse.seq2seq import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, reversal_pairs, seq2seq_batch


class TinySeq2Seq(nn.Module):
    """A causal encoder-decoder small enough to trace by hand: the decoder's state at t is a running sum of its
    input embeddings plus the mean of the source's (padding left out)."""

    def __init__(self, d: int = 6, tuple_out: bool = False):
        super().__init__()
        self.src_emb = nn.Embedding(VOCAB_SIZE, d)
        self.tgt_emb = nn.Embedding(VOCAB_SIZE, d)
        self.out = nn.Linear(d, VOCAB_SIZE)
        self.tuple_out = tuple_out

    def forward(self, src, tgt_in):
        real = (src != PAD_ID).to(self.src_emb.weight.dtype)[..., None]  # (B, S, 1)
        context = (self.src_emb(src) * real).sum(1) / real.sum(1).clamp(min=1)  # (B, d)
        h = torch.tanh(self.tgt_emb(tgt_in).cumsum(1) + context[:, None])  # (B, T, d): reads tgt_in[:, :t+1]
        logits = self.out(h)  # (B, T, V)
        return (logits, None) if self.tuple_out else logits


def greedy(model, src, max_len):
    ys = torch.full((len(src), 1), BOS_ID)
    with torch.no_grad():
        for _ in range(max_len):
            out = model(src, ys)
            logits = out[0] if isinstance(out, tuple) else out
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ys[:, 1:].numpy()


def _model(seed=0, tuple_out=False, scale=3.0):
    torch.manual_seed(seed)
    model = TinySeq2Seq(tuple_out=tuple_out)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)  # sharp distributions: the second-best token is clearly worse
    return model.eval()


# =========================================================================== greedy decoding

@pytest.mark.parametrize("tuple_out", [False, True])
def test_greedy_choices_pass_the_argmax_and_catch_one_wrong_step(tuple_out):
    model = _model(tuple_out=tuple_out)
    src = seq2seq_batch(reversal_pairs(6, 2, 9, np.random.default_rng(0))).src
    ys = greedy(model, src, 8)
    check_greedy_choices(ys, src.numpy(), 8, model, vocab_size=VOCAB_SIZE, what="greedy_decode")
    wrong = ys.copy()
    b, t = 3, 4
    with torch.no_grad():  # the second most likely token at (b, t), the prefix before it unchanged
        prefix = torch.cat([torch.full((len(src), 1), BOS_ID), torch.from_numpy(ys[:, :t])], dim=1)
        out = model(src, prefix)
        logits = (out[0] if isinstance(out, tuple) else out)[b, -1]
    wrong[b, t] = int(logits.topk(2).indices[1])
    with pytest.raises(AssertionError, match=f"row {b}, step {t}: the token chosen is .* nats less likely"):
        check_greedy_choices(wrong, src.numpy(), 8, model, vocab_size=VOCAB_SIZE, what="greedy_decode")


def test_greedy_choices_catch_the_first_position_read_at_every_step():
    """The mistake 05's variant makes: each new token from logits[:, 0] instead of logits[:, -1]."""
    model = _model(seed=1)
    src = seq2seq_batch(reversal_pairs(8, 3, 9, np.random.default_rng(1))).src
    ys = torch.full((len(src), 1), BOS_ID)
    with torch.no_grad():
        for _ in range(7):
            ys = torch.cat([ys, model(src, ys)[:, 0].argmax(-1, keepdim=True)], dim=1)
    with pytest.raises(AssertionError, match="nats less likely"):
        check_greedy_choices(ys[:, 1:].numpy(), src.numpy(), 7, model, vocab_size=VOCAB_SIZE, what="greedy_decode")


@pytest.mark.parametrize("ys, message", [
    (np.zeros((4, 5), dtype=np.int64), "shape"),                      # max_len 6 asked
    (np.full((4, 6), VOCAB_SIZE, dtype=np.int64), "expected token ids"),
    (np.full((4, 6), 0.5), "expected token ids"),
    (np.full((4, 6), -1, dtype=np.int64), "expected token ids"),
])
def test_greedy_choices_refuse_outputs_that_are_not_token_ids(ys, message):
    src = seq2seq_batch(reversal_pairs(4, 2, 5, np.random.default_rng(2))).src.numpy()
    with pytest.raises(AssertionError, match=message):
        check_greedy_choices(ys, src, 6, _model(), vocab_size=VOCAB_SIZE, what="greedy_decode")


# =========================================================================== the evaluation batch

def test_eval_rows_give_each_copy_its_pairs_source():
    pairs = reversal_pairs(60, 4, 12, np.random.default_rng(3))
    evb, rows, tgt_in, src = eval_rows(pairs, VOCAB_SIZE, np.random.default_rng(4))
    batch = seq2seq_batch(pairs[:48])
    assert np.array_equal(src, batch.src.numpy()) and np.array_equal(tgt_in, batch.tgt_in.numpy())
    assert np.array_equal(evb.held_out(evb.inputs), tgt_in) and np.array_equal(rows[evb.lane_rows], src)
    assert len(rows) == 48 + training.COPIES
    for row, source, k in evb.copies:
        assert np.array_equal(rows[row], rows[source])  # only the decoder's inputs differ
        assert np.array_equal(evb.inputs[row, :k], evb.inputs[source, :k])
        assert not np.array_equal(evb.inputs[row, k:], evb.inputs[source, k:])


# =========================================================================== the training loop, step by step

def _reversal_targets(src: np.ndarray, T: int):
    pairs = [([t for t in row if t != PAD_ID], [t for t in row if t != PAD_ID][::-1]) for row in src.tolist()]
    batch = seq2seq_batch(pairs)
    if batch.tgt_in.shape[1] > T:
        return None
    pad = lambda a: np.pad(a.numpy(), ((0, 0), (0, T - a.shape[1])), constant_values=PAD_ID)  # noqa: E731
    return pad(batch.tgt_in), pad(batch.tgt_out)


REVERSAL = Seq2SeqTask(targets=_reversal_targets, described="each source reversed", vocab_size=VOCAB_SIZE)
STEPS, BATCH, LR, WARMUP = 6, 8, 1.0, 3
TRUSTED = training.TrustedModel(build=lambda: TinySeq2Seq(), name="TinySeq2Seq(d=6)")


def trace(seed: int = 0, *, loss_over_padding=False, zero_grad=True, clip=True, clip_before_backward=False,
          decoder_reads="tgt_in", warmup=WARMUP, skip_forward_at=None):
    """What `train_and_trace` records of a training loop on the reversal task, written out here: each forward
    pass with its arguments and the weights it ran with, the gradients each Adam step received and its rates."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = TinySeq2Seq()
    with torch.no_grad():  # large weights, large gradients: the clipping acts from the first steps
        model.out.weight.mul_(10.0)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    calls, grads, norms, rates = [], [], [], []
    for step in range(STEPS):
        batch = seq2seq_batch(reversal_pairs(BATCH, 2, 9, rng))
        tgt_in = batch.tgt_out if decoder_reads == "tgt_out" else batch.tgt_in
        if zero_grad:
            opt.zero_grad()
        if step != skip_forward_at:
            calls.append({"step": step, "args": {"src": batch.src.numpy(), "tgt_in": tgt_in.numpy()},
                          "weights": {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}})
        logits = model(batch.src, tgt_in)
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB_SIZE), batch.tgt_out.reshape(-1),
                                           ignore_index=-100 if loss_over_padding else PAD_ID)
        if clip and clip_before_backward:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        loss.backward()
        if clip and not clip_before_backward:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        grads.append({k: p.grad.numpy().copy() for k, p in model.named_parameters()})
        norms.append(float(torch.linalg.vector_norm(torch.cat([p.grad.ravel() for p in model.parameters()]))))
        rates.append([float(g["lr"]) for g in opt.param_groups])
        opt.step()
        sched.step()
    return {"calls": calls, "gradients": grads, "steps": norms, "rates": rates}


def steps_check(out, **kw):
    return check_training_steps(out, steps=STEPS, batch_size=BATCH, trusted=TRUSTED, task=REVERSAL, what="train",
                                rate=lambda j: LR * min(1.0, (j + 1) / WARMUP), rate_rule="the warm-up", **kw)


def test_an_honest_loop_passes_and_the_clipping_is_seen():
    for seed in range(4):
        assert steps_check(trace(seed)) >= 1


def test_a_loop_without_a_schedule_passes_when_none_is_asked():
    out = trace(0, warmup=1)
    check_training_steps(out, steps=STEPS, batch_size=BATCH, trusted=TRUSTED, task=REVERSAL, what="train")
    del out["rates"]  # a unit without a schedule does not need the rates at all
    check_training_steps(out, steps=STEPS, batch_size=BATCH, trusted=TRUSTED, task=REVERSAL, what="train")


@pytest.mark.parametrize("wrong, message", [
    (dict(loss_over_padding=True), "not the gradient of this step's loss"),
    (dict(zero_grad=False), r"step [1-5]: the gradients the optimiser received are not"),
    (dict(clip=False), "expected at most 1"),
    (dict(clip_before_backward=True), "expected at most 1"),
    (dict(decoder_reads="tgt_out"), "must be shifted one position right"),
    (dict(warmup=1), "learning rate was .* expected the warm-up"),
    (dict(skip_forward_at=2), "step 2: the optimiser stepped without a forward pass"),
])
def test_each_mistake_of_a_training_loop_is_caught(wrong, message):
    with pytest.raises(AssertionError, match=message):
        steps_check(trace(0, **wrong))


@pytest.mark.parametrize("damage, message", [
    (lambda out: out.pop("gradients"), "could not read what your training loop did"),
    (lambda out: out["gradients"].pop(), "expected 6 steps of the optimiser"),
    (lambda out: out["calls"][0]["args"].pop("tgt_in"), "was not called as model"),
    (lambda out: out["calls"][0]["weights"].pop("out.bias"), "missing: out.bias"),
    (lambda out: out["gradients"].__setitem__(0, "not a dict"), "could not read the gradients"),
])
def test_a_damaged_record_fails_with_a_message(damage, message):
    out = trace(0)
    damage(out)
    with pytest.raises(AssertionError, match=message):
        steps_check(out)


def test_a_loop_whose_gradients_never_reach_the_clip_cannot_pass():
    """The check must see the clipping act at least once; a record where no raw norm exceeds 1 fails."""
    out = trace(0)
    with pytest.raises(AssertionError, match="could not see the clipping"):
        steps_check(out, clip=1e6)


def test_padding_rows_of_the_targets_line_up_with_seq2seq_batch():
    """The task's targets as the helper sees them are what the course's batching makes (EOS, then padding)."""
    batch = seq2seq_batch(reversal_pairs(5, 1, 6, np.random.default_rng(5)))
    tgt_in, tgt_out = _reversal_targets(batch.src.numpy(), batch.tgt_in.shape[1])
    assert np.array_equal(tgt_in, batch.tgt_in.numpy()) and np.array_equal(tgt_out, batch.tgt_out.numpy())
    assert (tgt_out == EOS_ID).sum() == 5
