"""Unit 3 (03-rnnlm): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
autograder/03-rnnlm/mistakes.py names the checks and holds the known-wrong variants. The CPU
training tier (about 15 s a grade) runs for the solution, and for the variants meant to fail it,
which shows that the training check itself catches them; the other variants' grades leave it out.
The correct alternates (other algorithms a student may choose) must earn full marks; the one that
rewrites the training loop runs the training check too."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names and the known mistakes live in the course: autograder/03-rnnlm/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "03-rnnlm")
TRAINING = _M.TRAINING
VARIANTS = _M.VARIANTS


# Correct implementations other than the solution's (other algorithms, not renamings): each gets full marks.
ALTERNATES: dict[str, dict[str, str | Edit | list[Edit]]] = {
    "LSTM gates from four per-gate products; Elman input terms for all steps in one product; zeros with "
    "torch.zeros(..., device=, dtype=); model.zero_grad()": {
        "LSTMCell": Edit(
            "        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # (B, 4d)\n"
            "        i, f, g, o = gates.chunk(4, dim=1)  # (B, d) each, in PyTorch's block order\n",
            "        d = h.shape[1]\n"
            "        i, f, g, o = (x @ self.weight_ih[k * d:(k + 1) * d].T + self.bias_ih[k * d:(k + 1) * d]\n"
            "                      + h @ self.weight_hh[k * d:(k + 1) * d].T + self.bias_hh[k * d:(k + 1) * d]\n"
            "                      for k in range(4))  # one product per gate, on its block of rows\n",
            why="four products on row blocks instead of one fused product and chunk"),
        "ElmanRNN": Edit(
            "        outputs = []\n"
            "        for t in range(T):  # sequential in T: step t needs the state of step t - 1\n"
            "            h = self.cell(x[:, t], h)\n"
            "            outputs.append(h)\n"
            "        return torch.stack(outputs, dim=1), h",
            "        cell = self.cell\n"
            "        inputs = x @ cell.weight_ih.T + cell.bias_ih  # (B, T, d): every step's input term at once\n"
            "        outputs = x.new_empty(B, T, self.d_hidden)\n"
            "        for t in range(T):\n"
            "            h = torch.tanh(inputs[:, t] + h @ cell.weight_hh.T + cell.bias_hh)\n"
            "            outputs[:, t] = h  # written into a preallocated tensor\n"
            "        return outputs, h",
            why="the input products hoisted out of the loop, the states written in place"),
        "LSTM": Edit(
            "zeros = x.new_zeros(B, self.d_hidden)",
            "zeros = torch.zeros(B, self.d_hidden, device=x.device, dtype=x.dtype)",
            why="the zero state made with the input's device and dtype spelt out"),
        "train_lm": Edit("optimizer.zero_grad()", "model.zero_grad()",
                         why="the model's zero_grad, not the optimiser's"),
    },
    "batchify by a loop over lanes; F.cross_entropy; stacked norms; training pass by pass": {
        "batchify": '''
def batchify(ids, batch_size, block_size):
    ids = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
    lane = (len(ids) - 1) // batch_size
    n_batches = lane // block_size
    if n_batches < 1:
        raise ValueError("too few tokens for one batch")
    xs, ys = [], []
    for k in range(n_batches):
        starts = [b * lane + k * block_size for b in range(batch_size)]
        xs.append(torch.stack([ids[s:s + block_size] for s in starts]))
        ys.append(torch.stack([ids[s + 1:s + block_size + 1] for s in starts]))
    return torch.stack(xs), torch.stack(ys)
''',
        "lm_loss": Edit(
            "    log_probs = F.log_softmax(logits, dim=-1)  # (B, T, V)\n"
            "    return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()  # the true token's log-prob, averaged over B*T",
            "    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))",
            why="the built-in loss on flattened positions"),
        "clip_grad_norm": '''
def clip_grad_norm(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    total = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
    scale = min(1.0, max_norm / total) if total > 0 else 1.0
    for g in grads:
        g.mul_(scale)
    return total
''',
        "train_lm": '''
def train_lm(train_ids, vocab_size, d_embed=32, d_hidden=128, batch_size=32, block_size=32, steps=300,
             lr=6e-3, clip=1.0, seed=0, device="cpu"):
    torch.manual_seed(seed)
    model = RNNLM(vocab_size, d_embed, d_hidden).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    inputs, targets = batchify(train_ids, batch_size, block_size)
    done = 0
    while done < steps:
        state = None  # each pass over the lanes starts from zeros
        for x, y in zip(inputs.to(device), targets.to(device)):
            if done == steps:
                break
            logits, (h, c) = model(x, state)
            loss = lm_loss(logits, y)
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm(model.parameters(), clip)
            optimizer.step()
            state = (h.detach(), c.detach())
            done += 1
    return model
''',
    },
    "Gumbel-max sampling; gradient norms by retain_grad() and backward(); gradients set to None by hand": {
        "sample_next": Edit(
            "    probs = F.softmax(logits / temperature, dim=-1)  # (B, V), rows sum to 1\n"
            "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)",
            "    uniform = torch.rand(logits.shape, generator=generator, device=logits.device)\n"
            "    gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-20)))  # Gumbel(0, 1) noise\n"
            "    return (logits / temperature + gumbel).argmax(dim=-1)  # the argmax is a draw from softmax(z / T)",
            why="the Gumbel-max trick instead of torch.multinomial"),
        "state_gradient_norms": Edit(
            "        states.append(state[0] if lstm else state)  # h_t itself, a node of the graph: not a copy of it\n"
            "    loss = F.cross_entropy(model.output(states[-1]), targets)\n"
            "    grads = torch.autograd.grad(loss, states)  # every path from h_t to the loss, through the later states\n"
            "    return torch.stack([g.norm() for g in grads])",
            "        h = state[0] if lstm else state\n"
            "        h.retain_grad()  # an intermediate tensor keeps its .grad after backward()\n"
            "        states.append(h)\n"
            "    F.cross_entropy(model.output(states[-1]), targets).backward()\n"
            "    return torch.stack([h.grad.norm() for h in states])",
            why="backward() and each state's .grad instead of torch.autograd.grad"),
        "train_lm": Edit(
            "        optimizer.zero_grad()\n",
            "        for p in model.parameters():\n"
            "            p.grad = None  # as zero_grad(set_to_none=True) does\n",
            why="the gradients dropped by hand"),
    },
}
ALTERNATES_THAT_TRAIN = ("batchify by a loop over lanes; F.cross_entropy; stacked norms; training pass by pass",)


class TestUnit03Rnnlm(UnitContract):
    AID = "03-rnnlm"
    MAX_SCORE = 40
    STUDENT_FUNCTIONS = 19
    RELEASE_MUST_NOT_CONTAIN = ("torch.multinomial(", "s.detach()", "gates.chunk(4", "torch.autograd.grad(loss")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # about 15 s a grade; run for the variants listed as caught by it
    ALTERNATES = ALTERNATES
    SYMPTOMS = {"train_lm makes a new Adam every step": "create the optimiser once",
                "train_lm ignores its lr argument": "the call asked for lr = 0.01",
                "gradients never zeroed between steps": "zero the gradients at every step"}
    ALTERNATES_THAT_TRAIN = ALTERNATES_THAT_TRAIN
