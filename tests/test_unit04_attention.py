"""Unit 4 (04-attention): the solution earns every point, the release none, and each known-wrong
implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
autograder/04-attention/mistakes.py names the checks and holds the known-wrong variants: the attention
bugs students really write (a wrong scale, the softmax over the wrong axis, masks after the softmax or
upside down, heads split without the transpose, ...) and the decoder's (attending to its own states, or
to nothing). The CPU training tier (about 40 s a grade on one core) runs for the solution and for the
variants meant to fail it; the other variants' grades leave it out. The correct alternates (einsum with
a -1e9 fill; a loop over heads) must earn full marks."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names and the known mistakes live in the course: autograder/04-attention/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "04-attention")
STEPS = _M.STEPS
TRAINING = _M.TRAINING
_SCORES = _M._SCORES
_FILL = _M._FILL
_SPLIT = _M._SPLIT
VARIANTS = _M.VARIANTS


# name -> {function or class: Edit(s) of the solution}: correct implementations that must earn full marks
ALTERNATES: dict[str, dict[str, Edit | list[Edit]]] = {
    "einsum scores and outputs; masked scores filled with -1e9, then the mask multiplied in": {
        "masked_softmax": [
            Edit(_FILL + "  # a blocked score: exp(-inf) = 0 exactly",
                 "        scores = scores.masked_fill(~mask, -1e9)  # finite: exp underflows to 0", why="-1e9"),
            Edit("    return e / total.clamp_min(torch.finfo(e.dtype).tiny)",
                 "    weights = e / total  # a fully masked row is uniform here ...\n"
                 "    return weights if mask is None else weights * mask  # ... and zeros after this",
                 why="exact zeros from the mask itself")],
        "scaled_dot_product_attention": [
            Edit(_SCORES, '    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)', why="einsum"),
            Edit("    return weights @ v, weights", '    return torch.einsum("...qk,...kd->...qd", weights, v), weights',
                 why="einsum")],
    },
    "a loss masked by hand (reduction='none'), gradients zeroed with set_to_none=False, clipping by hand": {
        "train_reverser": [
            Edit("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1),\n"
                 "                               ignore_index=PAD_ID)  # the mean over real target tokens only\n",
                 "        per_token = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, reduction='none')  # (B, T)\n"
                 "        real = (batch.tgt_out != PAD_ID).float()\n"
                 "        loss = (per_token * real).sum() / real.sum()\n", why="the same mean, by hand"),
            Edit("        optimizer.zero_grad()\n", "        optimizer.zero_grad(set_to_none=False)\n", why="zeros"),
            Edit("        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
                 "        total = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters() if p.grad is not None))\n"
                 "        for p in model.parameters():\n"
                 "            if p.grad is not None:\n"
                 "                p.grad.mul_(min(1.0, 1.0 / (float(total) + 1e-6)))\n", why="clipping written out")],
    },
    "a loop over heads, each attending on its slice of the features": {
        "MultiHeadAttention": Edit(
            "        # (B, T, d_model) -> (B, T, h, d_k) -> (B, h, T, d_k): head i holds features i*d_k .. (i+1)*d_k - 1\n"
            f"        q = {_SPLIT['q']}\n        k = {_SPLIT['k']}\n        v = {_SPLIT['v']}\n"
            "        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_k), (B, h, T_q, T_k)\n"
            "        out = out.transpose(1, 2).reshape(B, T_q, self.d_model)  # (B, T_q, h, d_k) -> (B, T_q, d_model)\n",
            "        q, k, v = self.q_proj(x), self.k_proj(kv), self.v_proj(kv)  # (B, T, d_model)\n"
            "        outs, weights = [], []\n"
            "        for i in range(h):\n"
            "            f = slice(i * d_k, (i + 1) * d_k)  # head i's features\n"
            "            m = mask\n"
            "            if m is not None and m.dim() == 4:  # (B, 1 or h, T_q or 1, T_k): this head's\n"
            "                m = m[:, i if m.shape[1] > 1 else 0]\n"
            "            o, w = scaled_dot_product_attention(q[..., f], k[..., f], v[..., f], m)\n"
            "            outs.append(o)  # (B, T_q, d_k)\n"
            "            weights.append(w)  # (B, T_q, T_k)\n"
            "        out = torch.cat(outs, dim=-1)  # (B, T_q, d_model)\n"
            "        weights = torch.stack(weights, dim=1)  # (B, h, T_q, T_k)\n",
            why="one head at a time instead of a head axis"),
    },
    # issue #40: fused QKV, a logsumexp softmax, the projections made in a setattr loop (once a false rule finding)
    "projections made by setattr in a loop, fused QKV (one matmul of the three weights); softmax as "
    "exp(s - logsumexp(s))": {
        "masked_softmax": Edit(
            "    top = scores.amax(dim=-1, keepdim=True)  # (..., 1): each row's largest score\n"
            "    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a fully masked row's largest is -inf\n"
            "    e = torch.exp(scores - top)  # every exponent <= 0: nothing overflows\n"
            "    total = e.sum(dim=-1, keepdim=True)  # (..., 1): at least 1, or 0 for a fully masked row\n"
            "    return e / total.clamp_min(torch.finfo(e.dtype).tiny)  # a fully masked row: 0 / tiny = 0, not 0 / 0",
            "    lse = torch.logsumexp(scores, dim=-1, keepdim=True)  # (..., 1); -inf for a fully masked row\n"
            "    lse = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))\n"
            "    return torch.exp(scores - lse)",
            why="the log-sum-exp form"),
        "MultiHeadAttention": [Edit(
            "        self.q_proj = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.k_proj = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.v_proj = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n",
            "        for name in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):\n"
            "            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))\n",
            why="a loop over the four names"), Edit(
            f"        q = {_SPLIT['q']}\n        k = {_SPLIT['k']}\n        v = {_SPLIT['v']}\n",
            "        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])  # (3 d_model, d_model)\n"
            "        b = None if self.q_proj.bias is None else torch.cat([self.q_proj.bias, self.k_proj.bias, "
            "self.v_proj.bias])\n"
            "        if kv is x:  # self-attention: one matmul for all three\n"
            "            q, k, v = F.linear(x, w, b).split(self.d_model, dim=-1)\n"
            "        else:  # cross-attention: queries from x, keys and values from kv\n"
            "            q = F.linear(x, w[:self.d_model], None if b is None else b[:self.d_model])\n"
            "            k, v = F.linear(kv, w[self.d_model:], None if b is None else b[self.d_model:]).split(self.d_model, dim=-1)\n"
            "        q = q.reshape(B, T_q, h, d_k).transpose(1, 2)\n"
            "        k = k.reshape(B, T_k, h, d_k).transpose(1, 2)\n"
            "        v = v.reshape(B, T_k, h, d_k).transpose(1, 2)\n",
            why="fused QKV, as many implementations write it")],
    },
}


class TestUnit04Attention(UnitContract):
    AID = "04-attention"
    MAX_SCORE = 22
    STUDENT_FUNCTIONS = 10
    RELEASE_MUST_NOT_CONTAIN = ("clamp_min(torch.finfo", "positions < lengths[:, None]",
                                "view(B, T_q, h, d_k).transpose(1, 2)", "torch.cat([h, context]")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # about 40 s a grade on one core; run for the variants listed as caught by it
    ALTERNATES = ALTERNATES
    SYMPTOMS = {"train_reverser makes a new Adam every step": "create the optimiser once",
                "train_reverser ignores its lr argument": "the call asked for lr = 1",
                "gradients never zeroed": "zero the gradients at every step",
                "train_reverser returns the model in training mode": "returned the model in training mode",
                "MultiHeadAttention stub: out_proj(x) with uniform weights, no attention": "did not change",
                "each position attends to itself alone": "the attention weights must be uniform"}
