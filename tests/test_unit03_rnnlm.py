"""Unit 3 (03-rnnlm): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants. The CPU
training tier (about 15 s a grade) runs for the solution, and for the
variants meant to fail it, which shows that the training check itself
catches them; the other variants' grades leave it out.
"""

from __future__ import annotations

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

# name -> (function or class replaced, wrong definition, checks that must score 0)
VARIANTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "targets not shifted (y = x)": ("batchify", '''
def batchify(ids, batch_size, block_size):
    ids = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
    lane_len = (len(ids) - 1) // batch_size
    n = lane_len // block_size
    if n == 0:
        raise ValueError("too short")
    x = ids[: lane_len * batch_size].view(batch_size, lane_len)[:, : n * block_size]
    x = x.reshape(batch_size, n, block_size).transpose(0, 1).contiguous()
    return x, x.clone()  # bug: the model is asked for the token it is reading
''', (BATCHIFY, BATCHIFY_SHIFT, TRAINING)),
    "context embeddings averaged, not concatenated": ("FeedForwardLM", '''
class FeedForwardLM(nn.Module):
    def __init__(self, vocab_size, context, d_embed, d_hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.hidden = nn.Linear(d_embed, d_hidden)
        self.output = nn.Linear(d_hidden, vocab_size)

    def forward(self, ids):
        return self.output(torch.tanh(self.hidden(self.embedding(ids).mean(dim=1))))  # bug: order lost
''', (FF_SHAPES, FF_FORWARD)),
    "tanh missing in the Elman cell": ("ElmanCell", '''
class ElmanCell(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        bound = 1 / math.sqrt(d_hidden)
        self.weight_ih = uniform_parameter(d_hidden, d_in, bound=bound)
        self.weight_hh = uniform_parameter(d_hidden, d_hidden, bound=bound)
        self.bias_ih = uniform_parameter(d_hidden, bound=bound)
        self.bias_hh = uniform_parameter(d_hidden, bound=bound)

    def forward(self, x, h):
        return x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # bug: no tanh
''', (ELMAN_CELL, ELMAN_LAYER)),
    "hidden state reset at every step": ("ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.d_hidden = d_hidden
        self.cell = ElmanCell(d_in, d_hidden)

    def forward(self, x, h=None):
        B, T, _ = x.shape
        outputs = []
        for t in range(T):
            h = self.cell(x[:, t], x.new_zeros(B, self.d_hidden))  # bug: every step starts from zeros
            outputs.append(h)
        return torch.stack(outputs, dim=1), h
''', (ELMAN_LAYER, ELMAN_CARRY)),
    "LSTM forget gate computed with the input gate's weights": ("LSTMCell", '''
class LSTMCell(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        bound = 1 / math.sqrt(d_hidden)
        self.weight_ih = uniform_parameter(4 * d_hidden, d_in, bound=bound)
        self.weight_hh = uniform_parameter(4 * d_hidden, d_hidden, bound=bound)
        self.bias_ih = uniform_parameter(4 * d_hidden, bound=bound)
        self.bias_hh = uniform_parameter(4 * d_hidden, bound=bound)

    def forward(self, x, state):
        h, c = state
        i, f, g, o = (x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh).chunk(4, dim=1)
        c = torch.sigmoid(i) * c + torch.sigmoid(i) * torch.tanh(g)  # bug: the input gate's block twice
        return torch.sigmoid(o) * torch.tanh(c), c
''', (LSTM_CELL, LSTM_LAYER)),
    "LSTM cell state not carried (each step starts from c_0)": ("LSTM", '''
class LSTM(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.d_hidden = d_hidden
        self.cell = LSTMCell(d_in, d_hidden)

    def forward(self, x, state=None):
        B, T, _ = x.shape
        if state is None:
            state = (x.new_zeros(B, self.d_hidden), x.new_zeros(B, self.d_hidden))
        h, c0 = state
        outputs = []
        for t in range(T):
            h, c = self.cell(x[:, t], (h, c0))  # bug: only h goes on, the cell state is dropped
            outputs.append(h)
        return torch.stack(outputs, dim=1), (h, c)
''', (LSTM_LAYER, LSTM_CARRY)),
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
    "LSTM on nn.LSTMCell with the worker's guard switched off (the rule is verified outside too)": ("LSTM", '''
import contextlib
import sys

_guard = sys.modules.get("lmc_" + "probes")  # the grader's probes, inside the worker
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
    "loss summed over the positions instead of averaged": ("lm_loss", '''
def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")  # bug
''', (LOSS,)),
    "loss summed over time, averaged over the batch only": ("lm_loss", '''
def lm_loss(logits, targets):
    log_probs = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return -log_probs.sum(dim=1).mean()  # bug: not per token
''', (LOSS,)),
    "clipping each parameter to max_norm on its own": ("clip_grad_norm", '''
def clip_grad_norm(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    for g in grads:
        norm = float(g.norm())
        if norm > max_norm:
            g.mul_(max_norm / norm)  # bug: a different factor for every parameter
    return total
''', (CLIP,)),
    "sampling from the logits without a softmax": ("sample_next", '''
def sample_next(logits, temperature=1.0, generator=None):
    weights = (logits - logits.min(dim=-1, keepdim=True).values) / temperature  # bug: linear in the scores
    return torch.multinomial(weights + 1e-6, num_samples=1, generator=generator).squeeze(-1)
''', (SAMPLE, GREEDY, GENERATE)),
    "temperature multiplies the logits": ("sample_next", '''
def sample_next(logits, temperature=1.0, generator=None):
    probs = F.softmax(logits * temperature, dim=-1)  # bug: 0.5 flattens, 2 sharpens
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
''', (SAMPLE, GREEDY)),
    "generate restarts from a zero state for every new token": ("RNNLM", '''
class RNNLM(nn.Module):
    def __init__(self, vocab_size, d_embed, d_hidden, cell="lstm"):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.rnn = LSTM(d_embed, d_hidden) if cell == "lstm" else ElmanRNN(d_embed, d_hidden)
        self.output = nn.Linear(d_hidden, vocab_size)

    def forward(self, ids, state=None):
        hidden, state = self.rnn(self.embedding(ids), state)
        return self.output(hidden), state

    @torch.no_grad()
    def generate(self, prompt, n_new, temperature=1.0, seed=0):
        ids = torch.as_tensor(prompt, dtype=torch.long)
        generator = torch.Generator().manual_seed(seed)
        logits, _ = self(ids)
        pieces = [ids]
        for _ in range(n_new):
            token = sample_next(logits[:, -1], temperature, generator).unsqueeze(1)
            pieces.append(token)
            logits, _ = self(token)  # bug: the state is dropped, the model sees one token only
        return torch.cat(pieces, dim=1)
''', (GREEDY,)),
    "gradients never zeroed between steps": ("train_lm", '''
def train_lm(train_ids, vocab_size, d_embed=32, d_hidden=128, batch_size=32, block_size=32, steps=300,
             lr=6e-3, clip=1.0, seed=0, device="cpu"):
    torch.manual_seed(seed)
    model = RNNLM(vocab_size, d_embed, d_hidden).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    inputs, targets = batchify(train_ids, batch_size, block_size)
    state = None
    for step in range(steps):
        k = step % len(inputs)
        if k == 0:
            state = None
        logits, state = model(inputs[k].to(device), state)
        lm_loss(logits, targets[k].to(device)).backward()  # bug: no zero_grad, gradients pile up
        clip_grad_norm(model.parameters(), clip)
        optimizer.step()
        state = tuple(s.detach() for s in state)
    return model
''', (TRAINING,)),
}


class TestUnit03Rnnlm(UnitContract):
    AID = "03-rnnlm"
    MAX_SCORE = 32
    STUDENT_FUNCTIONS = 18
    RELEASE_MUST_NOT_CONTAIN = ("torch.multinomial(", "s.detach()", "gates.chunk(4")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # about 15 s a grade; run for the variants listed as caught by it
