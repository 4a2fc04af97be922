"""Known mistakes of 03-rnnlm: the wrong implementations students really write, each with the checks
proven to catch it and a hint for the student.

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one, and proves that its grade is
attributed to it), and HINTS holds the advice a student reads when their failures match it. It lives beside
the hidden checks, out of the student worker's sight and out of the student edition.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit


# The checks' names, as the student sees them.
BATCHIFY = "batchify: x and y on random streams, lane by lane, batch after batch"
BATCHIFY_SHIFT = "batchify: every target is the next token of the stream (shifted by one)"
BATCHIFY_SHORT = ("batchify: a ValueError when the stream is too short for one batch, one batch when it is just "
                  "long enough")
FF_SHAPES = "FeedForwardLM: parameter names and shapes as specified"
FF_FORWARD = "FeedForwardLM: logits and gradients match the reference with the same weights"
ELMAN_CELL = "ElmanCell: the next state and its gradients match nn.RNNCell with the same weights"
ELMAN_LAYER = "ElmanRNN: outputs, last state and gradients match nn.RNN (batch_first) with the same weights"
ELMAN_CARRY = "ElmanRNN: the state carries from each time step to the next"
ELMAN_FLOAT64 = ("ElmanCell and ElmanRNN follow the input's dtype and device: the same results in float64, and they "
                 "run on a device other than the CPU, from a given state and from None")
LSTM_CELL = "LSTMCell: (h, c) and their gradients match nn.LSTMCell with the same weights"
LSTM_LAYER = "LSTM: outputs, (h_T, c_T) and gradients match nn.LSTM (batch_first) with the same weights"
LSTM_CARRY = "LSTM: the state (h, c), cell state included, carries from each time step to the next"
LSTM_FLOAT64 = ("LSTMCell and LSTM follow the input's dtype and device: the same results in float64, and they run "
                "on a device other than the CPU, from a given state and from None")
RNNLM_FORWARD = ("RNNLM: logits, state and gradients match the reference with the same weights (LSTM and Elman; in "
                 "float64 too), and it runs on a device other than the CPU")
RNNLM_CONTINUES = "RNNLM: passing the returned state back in continues the text"
SAMPLE = "sample_next: draws follow softmax(logits / temperature) at temperatures 0.5, 1 and 2"
GREEDY = "RNNLM.generate: at a tiny temperature, each new token is the most likely one given the text so far"
GENERATE = ("RNNLM.generate: the new tokens follow the model's distribution jointly (each given the ones before); "
            "the prompt is kept")
LOSS = "lm_loss: mean cross-entropy over all B x T positions, and its gradient"
CLIP = "clip_grad_norm: one global norm, every gradient scaled by the same factor, only above max_norm"
TRAINING = "train_lm: an LSTM LM trained on TinyShakespeare's characters reaches the validation loss threshold"
TRAIN_STEPS = ("train_lm, step by step: the batches in order, the state carried (detached) within a pass and reset "
               "at the start of each pass")
TRAIN_CLIP = "train_lm, step by step: every optimiser step receives gradients clipped to the global norm clip"
TRAIN_GRADIENTS = ("train_lm, step by step: each optimiser step receives the gradient of that step's loss alone, and "
                   "one Adam at lr updates the weights from it")
GRADIENTS_SMALL = ("state_gradient_norms: one norm per step, as the reference's, for a small Elman and a small LSTM "
                   "model")
GRADIENTS_DECAY = ("state_gradient_norms: the decay over 40 steps matches the reference's, Elman and LSTM (forget "
                   "gates half closed and open)")

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
        (TRAINING, TRAIN_GRADIENTS)),
    # issue 16: what the float32 checks on a CPU, and the final loss, could not see
    "batchify stub: the first block only, in one lane; B lanes of T + 1 tokens required": ("batchify", [
        Edit("if n_batches == 0:", "if len(ids) < B * (T + 1):",
             why="B separate lanes of T + 1 tokens asked for, where B * T + 1 make one batch"),
        Edit("    x = lanes_x.reshape(B, n_batches, T).transpose(0, 1).contiguous()\n"
             "    y = lanes_y.reshape(B, n_batches, T).transpose(0, 1).contiguous()\n",
             "    x, y = ids[:T].view(1, 1, T), ids[1:T + 1].view(1, 1, T)\n",
             why="a stub: one block, shifted targets"),
    ], (BATCHIFY, BATCHIFY_SHIFT, BATCHIFY_SHORT)),
    "Elman zero state made with torch.zeros (float32, on the CPU)": ("ElmanRNN", Edit(
        "h = x.new_zeros(B, self.d_hidden)", "h = torch.zeros(B, self.d_hidden)",
        why="a fixed dtype and device: right in float32 on a CPU, wrong on a GPU and in float64"),
        (ELMAN_FLOAT64, RNNLM_FORWARD)),
    "LSTM zero states made with torch.zeros (float32, on the CPU)": ("LSTM", Edit(
        "zeros = x.new_zeros(B, self.d_hidden)", "zeros = torch.zeros(B, self.d_hidden)",
        why="a fixed dtype and device: right in float32 on a CPU, wrong on a GPU and in float64"),
        (LSTM_FLOAT64, RNNLM_FORWARD)),
    # what a CPU cannot show without a second device: float64 keeps the dtype right, the state stays on the CPU
    "Elman zero state made with the input's dtype but no device (on the CPU)": ("ElmanRNN", Edit(
        "h = x.new_zeros(B, self.d_hidden)", "h = torch.zeros(B, self.d_hidden, dtype=x.dtype)",
        why="right in float32 and float64 on a CPU; on a GPU the state is on the CPU and the input is not"),
        (ELMAN_FLOAT64, RNNLM_FORWARD)),
    "LSTM zero states made with the input's dtype but no device (on the CPU)": ("LSTM", Edit(
        "zeros = x.new_zeros(B, self.d_hidden)", "zeros = torch.zeros(B, self.d_hidden, dtype=x.dtype)",
        why="right in float32 and float64 on a CPU; on a GPU the state is on the CPU and the input is not"),
        (LSTM_FLOAT64, RNNLM_FORWARD)),
    "RNNLM makes the zero state itself, with the weights' dtype but no device": ("RNNLM", Edit(
        "        hidden, state = self.rnn(self.embedding(ids), state)  # (B, T, d_hidden)\n",
        "        if state is None:\n"
        "            zeros = torch.zeros(ids.shape[0], self.output.in_features, dtype=self.output.weight.dtype)\n"
        "            state = (zeros, zeros) if isinstance(self.rnn, LSTM) else zeros\n"
        "        hidden, state = self.rnn(self.embedding(ids), state)  # (B, T, d_hidden)\n",
        why="the layers are right; the model's own zero state is on the CPU whatever the device"),
        (RNNLM_FORWARD,)),
    "generate seeds a new generator for every token": ("RNNLM", Edit(
        "token = sample_next(logits[:, -1], temperature, generator).unsqueeze(1)",
        "token = sample_next(logits[:, -1], temperature, torch.Generator(device=device).manual_seed(seed)).unsqueeze(1)",
        why="every token's draw reuses the first one's random numbers: each token's marginal is right, the pairs "
            "are not"),
        (GENERATE,)),
    "clipping before backward() (it clips nothing)": ("train_lm", Edit(
        "        loss.backward()\n        clip_grad_norm(model.parameters(), clip)\n",
        "        clip_grad_norm(model.parameters(), clip)\n        loss.backward()\n",
        why="the gradients are zero when clipped; backward() then fills them unclipped"),
        (TRAIN_CLIP,)),
    # the optimiser (issue #40, class 2): the loss threshold cannot see it
    "train_lm makes a new Adam every step": ("train_lm", [
        Edit("    optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n", ""),
        Edit("        optimizer.zero_grad()\n",
             "        optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n        optimizer.zero_grad()\n",
             why="Adam's moment estimates start from zero every step")],
        (TRAIN_GRADIENTS,)),
    "train_lm ignores its lr argument": ("train_lm", Edit(
        "torch.optim.Adam(model.parameters(), lr=lr)", "torch.optim.Adam(model.parameters(), lr=6e-3)",
        why="the lr argument is ignored"),
        (TRAIN_GRADIENTS,)),
    "state never reset between passes": ("train_lm", Edit(
        "state = None  # a new pass over the lanes starts from a zero state",
        "pass  # the last batch's state goes on into the next pass",
        why="the end of lane b's state is carried to the start of lane b"),
        (TRAIN_STEPS,)),
    # A whole definition on purpose: another (wrong) way to the gradients, through the layer's outputs.
    "gradient norms taken at the layer's stacked outputs": ("state_gradient_norms", '''
def state_gradient_norms(model, ids, targets):
    outputs, _ = model.rnn(model.embedding(ids))  # (B, T, d): the states, stacked into a new tensor
    outputs.retain_grad()
    F.cross_entropy(model.output(outputs[:, -1]), targets).backward()
    return outputs.grad.norm(dim=(0, 2))  # bug: only the copy of h_T that the loss reads gets a gradient
''', (GRADIENTS_SMALL, GRADIENTS_DECAY)),
}

# Checks a mistake's grade leaves out unless the mistake is written to fail them: the training run.
LEAVE_OUT: tuple[str, ...] = (TRAINING,)

# What a student whose failing checks match the mistake reads: advice, never code.
HINTS: dict[str, str] = {
    "targets not shifted (y = x)":
        "Check what each target is: a language model predicts the next token, so the targets are the inputs "
        "moved one position along the stream.",
    "context embeddings averaged, not concatenated":
        "Check how you combine the context's embeddings: they are placed side by side, so the hidden layer "
        "knows which word came where. Averaging loses their order.",
    "tanh missing in the Elman cell":
        "Check the nonlinearity of your Elman cell: the new state is the tanh of the two linear maps added "
        "together.",
    "hidden state reset at every step":
        "Check that each time step starts from the state the previous step produced, not from zeros.",
    "LSTM forget gate computed with the input gate's weights":
        "Check which block of the stacked gate weights each gate reads: every gate has its own slice, in the "
        "order the assignment specifies.",
    "LSTM cell state not carried (each step starts from c_0)":
        "Check that the cell state, not only the hidden state, passes from each step to the next: it is the "
        "LSTM's long-term memory.",
    "LSTM layer built on nn.LSTMCell (against the rules)":
        "Write the LSTM's step yourself from your own `LSTMCell`: PyTorch's recurrent cells and layers are not "
        "allowed in this assignment.",
    "LSTM on nn.LSTMCell with the worker's guard switched off (the rule is verified outside too)":
        "Write the LSTM's step yourself from your own `LSTMCell`: PyTorch's recurrent cells and layers are not "
        "allowed, however they are reached.",
    "loss summed over the positions instead of averaged":
        "Check the size of your loss as the batch grows: it should be the mean cross-entropy over all "
        "positions, so it stays comparable.",
    "loss summed over time, averaged over the batch only":
        "Check that your loss is per token: average over every position of every sequence, not over the "
        "sequences alone.",
    "clipping each parameter to max_norm on its own":
        "Check how you measure the gradient's size: one global norm over all parameters together, and every "
        "gradient scaled by the same factor.",
    "sampling from the logits without a softmax":
        "Check what your draws follow: logits are turned into probabilities by a softmax before sampling.",
    "temperature multiplies the logits":
        "Check which way the temperature works: the logits are divided by it, so a low temperature sharpens "
        "the distribution and a high one flattens it.",
    "generate restarts from a zero state for every new token":
        "Check that `generate` carries the state from token to token: each prediction should depend on the "
        "whole text so far.",
    "gradients never zeroed between steps":
        "Check that gradients are cleared before each backward pass: otherwise every step adds to the "
        "gradients of all the steps before it.",
    "batchify stub: the first block only, in one lane; B lanes of T + 1 tokens required":
        "Check how the stream is cut: B lanes side by side, and every block of T tokens in a lane, one batch "
        "after another, with the targets shifted by one.",
    "Elman zero state made with torch.zeros (float32, on the CPU)":
        "Check the dtype and device of your zero state: make it like the input, so the layer works in "
        "float64 and on a GPU.",
    "LSTM zero states made with torch.zeros (float32, on the CPU)":
        "Check the dtype and device of your zero states: make them like the input, so the LSTM works in "
        "float64 and on a GPU.",
    "Elman zero state made with the input's dtype but no device (on the CPU)":
        "Check the device of your zero state: it must be where the input is, or the layer fails on a GPU.",
    "LSTM zero states made with the input's dtype but no device (on the CPU)":
        "Check the device of your zero states: they must be where the input is, or the LSTM fails on a GPU.",
    "RNNLM makes the zero state itself, with the weights' dtype but no device":
        "Check where the model's own initial state is made: on the input's device, or the model fails on a "
        "GPU.",
    "generate seeds a new generator for every token":
        "Check where your random generator is created: once per call to `generate`, not once per token, or "
        "consecutive draws are tied together.",
    "clipping before backward() (it clips nothing)":
        "Check the order of your training step: gradients exist only after the backward pass, so clip them "
        "after it and before the optimiser's step.",
    "train_lm makes a new Adam every step":
        "Check where your optimiser is made: Adam keeps running averages of the gradients from step to step, "
        "and an optimiser made inside the loop starts them from zero at every step.",
    "train_lm ignores its lr argument":
        "Check that your training function uses the learning rate it is called with, not a value of its own.",
    "state never reset between passes":
        "Check what state a new pass over the data starts from: zeros. The end of the stream is not the "
        "context of its beginning.",
    "gradient norms taken at the layer's stacked outputs":
        "Check which tensor's gradient you measure: the state at each time step as the recurrence uses it, "
        "not a copy stacked into the layer's outputs.",
}
