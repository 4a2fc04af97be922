"""Unit 3 (03-rnnlm): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants. The CPU
training tier (about 15 s a grade) runs for the solution, and for the
variants meant to fail it, which shows that the training check itself
catches them; the other variants' grades leave it out.
"""

from __future__ import annotations

from lmcourse.grading.testing import Edit
from unit_contract import UnitContract

# The checks' names, as the student sees them.
BATCHIFY = "batchify: x and y on random streams, lane by lane, batch after batch"
BATCHIFY_SHIFT = "batchify: every target is the next token of the stream (shifted by one)"
FF_SHAPES = "FeedForwardLM: parameter names and shapes as specified"
FF_FORWARD = "FeedForwardLM: logits and gradients match the reference with the same weights"
ELMAN_CELL = "ElmanCell: the next state and its gradients match nn.RNNCell with the same weights"
ELMAN_LAYER = "ElmanRNN: outputs, last state and gradients match nn.RNN (batch_first) with the same weights"
ELMAN_CARRY = "ElmanRNN: the state carries from each time step to the next"
LSTM_CELL = "LSTMCell: (h, c) and their gradients match nn.LSTMCell with the same weights"
LSTM_LAYER = "LSTM: outputs, (h_T, c_T) and gradients match nn.LSTM (batch_first) with the same weights"
LSTM_CARRY = "LSTM: the state (h, c), cell state included, carries from each time step to the next"
RNNLM_FORWARD = "RNNLM: logits, state and gradients match the reference with the same weights (LSTM and Elman)"
SAMPLE = "sample_next: draws follow softmax(logits / temperature) at temperatures 0.5, 1 and 2"
GREEDY = "RNNLM.generate: at a tiny temperature, each new token is the most likely one given the text so far"
GENERATE = "RNNLM.generate: the first new token follows the model's distribution; the prompt is kept"
LOSS = "lm_loss: mean cross-entropy over all B x T positions, and its gradient"
CLIP = "clip_grad_norm: one global norm, every gradient scaled by the same factor, only above max_norm"
TRAINING = "train_lm: an LSTM LM trained on TinyShakespeare's characters reaches the validation loss threshold"

# name -> (function or class replaced, the wrong version: Edit(s) of the solution's own definition, or a
# whole definition where the variant is another implementation; checks that must score 0)
VARIANTS: dict[str, tuple[str, str | Edit | list[Edit], tuple[str, ...]]] = {
    "targets not shifted (y = x)": ("batchify", Edit(
        "return x, y", "return x, x.clone()",
        why="the model is asked for the token it is reading"),
        (BATCHIFY, BATCHIFY_SHIFT, TRAINING)),
    "context embeddings averaged, not concatenated": ("FeedForwardLM", [
        Edit("nn.Linear(context * d_embed, d_hidden)", "nn.Linear(d_embed, d_hidden)",
             why="the hidden layer reads one embedding's width"),
        Edit("joined = self.embedding(ids).flatten(1)  # (B, context, d_embed) -> (B, context * d_embed), order kept",
             "joined = self.embedding(ids).mean(dim=1)",
             why="the context's embeddings averaged: their order is lost"),
    ], (FF_SHAPES, FF_FORWARD)),
    "tanh missing in the Elman cell": ("ElmanCell", Edit(
        "return torch.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh)",
        "return x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh",
        why="a linear recurrence: no tanh"),
        (ELMAN_CELL, ELMAN_LAYER)),
    "hidden state reset at every step": ("ElmanRNN", Edit(
        "h = self.cell(x[:, t], h)", "h = self.cell(x[:, t], x.new_zeros(B, self.d_hidden))",
        why="every step starts from zeros"),
        (ELMAN_LAYER, ELMAN_CARRY)),
    "LSTM forget gate computed with the input gate's weights": ("LSTMCell", Edit(
        "torch.sigmoid(f) * c", "torch.sigmoid(i) * c",
        why="the input gate's block is used twice, the forget gate's never"),
        (LSTM_CELL, LSTM_LAYER)),
    "LSTM cell state not carried (each step starts from c_0)": ("LSTM", [
        Edit("        outputs = []\n", "        c_0 = state[1]\n        outputs = []\n", why="c_0 kept aside"),
        Edit("state = self.cell(x[:, t], state)  # both h and c go on to the next step",
             "state = self.cell(x[:, t], (state[0], c_0))",
             why="only h goes on to the next step; the cell state restarts from c_0 (the last c is returned)"),
    ], (LSTM_LAYER, LSTM_CARRY)),
    # A whole definition on purpose: another implementation (on PyTorch's cell), not a change of the solution's.
    "LSTM layer built on nn.LSTMCell (against the rules)": ("LSTM", '''
class LSTM(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.d_hidden = d_hidden
        self.cell = nn.LSTMCell(d_in, d_hidden)  # bug: PyTorch's cell, with the same parameter names

    def forward(self, x, state=None):
        B, T, _ = x.shape
        if state is None:
            state = (x.new_zeros(B, self.d_hidden), x.new_zeros(B, self.d_hidden))
        outputs = []
        for t in range(T):
            state = self.cell(x[:, t], state)
            outputs.append(state[0])
        return torch.stack(outputs, dim=1), state
''', (LSTM_LAYER, LSTM_CARRY, RNNLM_FORWARD, TRAINING)),
    # A whole definition on purpose: a cheat with top-level code (the guard switched off) beside its own class.
    "LSTM on nn.LSTMCell with the worker's guard switched off (the rule is verified outside too)": ("LSTM", '''
import contextlib
import sys

_guard = sys.modules.get("lmc_inside." + "probes")  # the grader's probes, inside the worker
if _guard is not None:
    _guard.without_builtin_rnn = lambda active=True: contextlib.nullcontext()  # cheat: guard off


class LSTM(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.d_hidden = d_hidden
        self.cell = getattr(nn, "LSTM" + "Cell")(d_in, d_hidden)

    def forward(self, x, state=None):
        B, T, _ = x.shape
        if state is None:
            state = (x.new_zeros(B, self.d_hidden), x.new_zeros(B, self.d_hidden))
        outputs = []
        for t in range(T):
            state = self.cell(x[:, t], state)
            outputs.append(state[0])
        return torch.stack(outputs, dim=1), state
''', (LSTM_LAYER, LSTM_CARRY, RNNLM_FORWARD, TRAINING)),
    "loss summed over the positions instead of averaged": ("lm_loss", Edit(
        ".mean()  # the true token's log-prob, averaged over B*T", ".sum()",
        why="summed over all B x T positions: the loss grows with the batch"),
        (LOSS,)),
    "loss summed over time, averaged over the batch only": ("lm_loss", Edit(
        ".mean()  # the true token's log-prob, averaged over B*T", ".squeeze(-1).sum(dim=1).mean()",
        why="a sequence's loss, not a token's: T times too large"),
        (LOSS,)),
    "clipping each parameter to max_norm on its own": ("clip_grad_norm", Edit(
        "    if total > max_norm:\n"
        "        for g in grads:\n"
        "            g.mul_(max_norm / total)  # the same factor for every parameter: directions kept",
        "    for g in grads:\n"
        "        norm = g.norm().item()\n"
        "        if norm > max_norm:\n"
        "            g.mul_(max_norm / norm)",
        why="a different factor for every parameter, each compared with max_norm alone"),
        (CLIP,)),
    "sampling from the logits without a softmax": ("sample_next", Edit(
        "probs = F.softmax(logits / temperature, dim=-1)  # (B, V), rows sum to 1",
        "probs = (logits - logits.min(dim=-1, keepdim=True).values) / temperature + 1e-6",
        why="the draws are linear in the scores, not exponential"),
        (SAMPLE, GREEDY, GENERATE)),
    "temperature multiplies the logits": ("sample_next", Edit(
        "F.softmax(logits / temperature", "F.softmax(logits * temperature",
        why="0.5 flattens, 2 sharpens"),
        (SAMPLE, GREEDY)),
    "generate restarts from a zero state for every new token": ("RNNLM", Edit(
        "logits, state = self(token, state)  # one step on from where we were", "logits, state = self(token)",
        why="the state is dropped: each new token is predicted from the last token alone"),
        (GREEDY,)),
    "gradients never zeroed between steps": ("train_lm", Edit(
        "        optimizer.zero_grad()\n", "",
        why="no zero_grad: the gradients of every step pile up"),
        (TRAINING,)),
}


class TestUnit03Rnnlm(UnitContract):
    AID = "03-rnnlm"
    MAX_SCORE = 32
    STUDENT_FUNCTIONS = 18
    RELEASE_MUST_NOT_CONTAIN = ("torch.multinomial(", "s.detach()", "gates.chunk(4")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # about 15 s a grade; run for the variants listed as caught by it
