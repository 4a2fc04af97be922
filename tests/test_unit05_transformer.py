"""Unit 5 (05-transformer): the solution earns every point, the release none, and each known-wrong
implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
autograder/05-transformer/mistakes.py names the checks and holds the known-wrong variants: the bugs students
really write in a transformer (sines and cosines swapped or not interleaved, the frequency exponent off by a
factor of 2, LayerNorm over the wrong axis or with the unbiased variance or eps outside the square root, a
residual missing or taken from the normalised input, pre-norm written as post-norm, cross-attention reading the
decoder, no causal mask, the source's padding not masked, the pre-norm stack's final LayerNorm missing,
embeddings scaled against the spec, targets not shifted, no warm-up, no clipping). Not here: "padding counted in
the loss", 04's variant. Every target of this task is an ISO date, 10 characters and <EOS>, so a batch's targets
hold no padding and that loss is the spec's loss exactly; the padding that matters here is the source's, and it
is masked. The CPU training tier (about 40 s a grade on one core) runs for the solution and for the variants
meant to fail it; the other variants' grades leave it out. The correct alternates (einsum and one-pass moments;
blocks written as functions over a state dict) must earn full marks."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# the checks' names and the known mistakes: autograder/05-transformer/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "05-transformer")
LAYER_NORM = _M.LAYER_NORM
TRAINING = _M.TRAINING
_SIN = _M._SIN
_COS = _M._COS
_VAR = _M._VAR
_NORMALISE = _M._NORMALISE
_ENC_PRE = _M._ENC_PRE
_ENC_POST = _M._ENC_POST
_CAUSAL = _M._CAUSAL
VARIANTS = _M.VARIANTS

_DEC_BODY = """        if self.norm_first:
            h = self.ln1(y)
            y = y + self.self_attn(h, mask=self_mask)
            y = y + self.cross_attn(self.ln2(y), memory, mask=memory_mask)  # queries from y, keys/values from memory
            y = y + self.ff(self.ln3(y))
        else:
            y = self.ln1(y + self.self_attn(y, mask=self_mask))
            y = self.ln2(y + self.cross_attn(y, memory, mask=memory_mask))
            y = self.ln3(y + self.ff(y))
        return y"""  # the class's last line
# module-level helpers an alternate puts in front of EncoderBlock: a block's sublayers as functions of its
# parameters (by the names the assignment prescribes), attention through F.scaled_dot_product_attention
_HELPERS = """def _norm(p, name, x, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * p[name + '.weight'] + p[name + '.bias']


def _linear(p, name, x):
    return F.linear(x, p[name + '.weight'], p[name + '.bias'])


def _attend(p, name, x, kv, mask, h):
    B, T, d = x.shape
    def split(t):  # (B, T, d) -> (B, h, T, d / h)
        return t.reshape(B, t.shape[1], h, d // h).transpose(1, 2)
    q, k, v = (split(_linear(p, f'{name}.{w}_proj', z)) for w, z in (('q', x), ('k', kv), ('v', kv)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return _linear(p, name + '.out_proj', out.transpose(1, 2).reshape(B, T, d))


def _ff(p, x):
    return _linear(p, 'ff.ff2', torch.relu(_linear(p, 'ff.ff1', x)))


def _residual(p, norm, x, f, norm_first):
    return x + f(_norm(p, norm, x)) if norm_first else _norm(p, norm, x + f(x))


"""


# name -> {function or class: Edit(s) of the solution}: correct implementations that must earn full marks
ALTERNATES: dict[str, dict[str, Edit | list[Edit]]] = {
    "positions by outer product and stack; LayerNorm by one-pass moments in float64; einsum feed-forward": {
        "sinusoidal_positions": Edit(
            "    pe = torch.empty(T, d, dtype=torch.float64)\n" + _SIN + _COS,
            "    pe = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(T, d)  # (T, d/2, 2)\n",
            why="interleaved by a stack"),
        "LayerNorm": [
            Edit(_VAR, "        xd = x.double()  # one pass is exact enough in float64, not in float32\n"
                       "        var = ((xd ** 2).mean(dim=-1, keepdim=True) - xd.mean(dim=-1, keepdim=True) ** 2).to(x.dtype)\n",
                 why="E[x^2] - E[x]^2, computed in float64"),
            Edit(_NORMALISE, "        return (x - mu) * torch.rsqrt(var + self.eps) * self.weight + self.bias",
                 why="rsqrt")],
        "FeedForward": Edit(
            "        return self.ff2(torch.relu(self.ff1(x)))",
            "        h = torch.einsum('...i,hi->...h', x, self.ff1.weight) + self.ff1.bias\n"
            "        return torch.einsum('...h,oh->...o', h.clamp(min=0), self.ff2.weight) + self.ff2.bias",
            why="einsum and clamp"),
    },
    "blocks as plain functions over their parameters; masks built with arange; a warm-up set by hand": {
        "EncoderBlock": [
            Edit("class EncoderBlock(nn.Module):", _HELPERS + "class EncoderBlock(nn.Module):", why="helpers"),
            Edit(_ENC_PRE + "        else:  # LN(x + f(x)): the 2017 paper's order\n" + _ENC_POST
                 + "            x = self.ln2(x + self.ff(x))\n",
                 "            pass\n"
                 "        p, h = dict(self.named_parameters()), self.attn.n_heads\n"
                 "        x = _residual(p, 'ln1', x, lambda z: _attend(p, 'attn', z, z, mask, h), self.norm_first)\n"
                 "        x = _residual(p, 'ln2', x, lambda z: _ff(p, z), self.norm_first)\n",
                 why="the block as functions of its state dict")],
        "DecoderBlock": Edit(
            _DEC_BODY,
            "        p, h = dict(self.named_parameters()), self.self_attn.n_heads\n"
            "        y = _residual(p, 'ln1', y, lambda z: _attend(p, 'self_attn', z, z, self_mask, h), self.norm_first)\n"
            "        y = _residual(p, 'ln2', y, lambda z: _attend(p, 'cross_attn', z, memory, memory_mask, h),\n"
            "                      self.norm_first)\n"
            "        return _residual(p, 'ln3', y, lambda z: _ff(p, z), self.norm_first)",
            why="the block as functions of its state dict"),
        "Transformer": Edit(
            _CAUSAL, "        i = torch.arange(T, device=tgt_in.device)\n"
                     "        self_mask = i[None, :] <= i[:, None]  # (T, T)\n", why="arange comparison"),
        "train_transformer": [
            Edit("    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))\n",
                 "", why="no scheduler object"),
            Edit("    for _ in range(steps):\n",
                 "    for step in range(steps):\n"
                 "        for group in optimizer.param_groups:\n"
                 "            group['lr'] = lr * min(1.0, (step + 1) / warmup)\n", why="the rate set by hand"),
            Edit("        schedule.step()\n", "", why="no scheduler")],
    },
    # issue #40: var_mean, LinearLR, a position table computed in float32 (once 9e-8 off in the float64 pass)
    "positions computed in float32; LayerNorm by torch.var_mean; the warm-up by LinearLR": {
        "sinusoidal_positions": [
            Edit("    p = torch.arange(T, dtype=torch.float64)[:, None]", "    p = torch.arange(T, dtype=torch.float32)[:, None]"),
            Edit("    two_i = torch.arange(0, d, 2, dtype=torch.float64)", "    two_i = torch.arange(0, d, 2, dtype=torch.float32)"),
            Edit("    pe = torch.empty(T, d, dtype=torch.float64)", "    pe = torch.empty(T, d, dtype=torch.float32)",
                 why="float32 throughout, as most code writes it")],
        "LayerNorm": Edit(
            "        mu = x.mean(dim=-1, keepdim=True)  # (..., 1)\n" + _VAR,
            "        var, mu = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # (..., 1) each: biased\n",
            why="var_mean"),
        "train_transformer": Edit(
            "    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))\n",
            "    schedule = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / warmup, end_factor=1.0,\n"
            "                                                 total_iters=max(warmup - 1, 1))\n",
            why="LinearLR: (s + 1) / warmup up to warmup - 1, then 1"),
    },
}


class TestUnit05Transformer(UnitContract):
    AID = "05-transformer"
    MAX_SCORE = 23
    STUDENT_FUNCTIONS = 16
    RELEASE_MUST_NOT_CONTAIN = ("10000 ** (two_i / d)", "torch.sqrt(var + self.eps)", "self.ln1(x + self.attn(x",
                                "self.cross_attn(self.ln2(y), memory", ".tril()  # (T, T): j <= i")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # about 40 s a grade on one core; run for the variants listed as caught by it
    ALTERNATES = ALTERNATES
    SYMPTOMS = {"train_transformer with Adam's default betas and eps": "betas are (0.9, 0.999) (Adam's defaults)",
                "train_transformer ignores its lr argument": "learning rate was",
                "the paper's dropout in the feed-forward (the instructions have none)": "two different outputs",
                "train_transformer returns the model in training mode": "returned the model in training mode",
                "DecoderBlock without its masked self-attention": "reads the target tokens before it"}
    ALTERNATES_THAT_TRAIN = ("blocks as plain functions over their parameters; masks built with arange; a warm-up "
                             "set by hand",)
