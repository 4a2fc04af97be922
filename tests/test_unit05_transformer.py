"""Unit 5 (05-transformer): the solution earns every point, the release none, and each known-wrong
implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py); this file names the checks and
holds the known-wrong variants: the bugs students really write in a transformer (sines and cosines
swapped or not interleaved, the frequency exponent off by a factor of 2, LayerNorm over the wrong axis or
with the unbiased variance or eps outside the square root, a residual missing or taken from the
normalised input, pre-norm written as post-norm, cross-attention reading the decoder, no causal mask, the
source's padding not masked, the pre-norm stack's final LayerNorm missing, embeddings scaled against the
spec, targets not shifted, no warm-up, no clipping). Not here: "padding counted in the loss", 04's variant.
Every target of this task is an ISO date, 10 characters and <EOS>, so a batch's targets hold no padding and
that loss is the spec's loss exactly; the padding that matters here is the source's, and it is masked. The CPU training tier (about 40 s a grade on
one core) runs for the solution and for the variants meant to fail it; the other variants' grades leave it
out. The correct alternates (einsum and one-pass moments; blocks written as functions over a state dict)
must earn full marks.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names, as the student sees them.
POSITIONS = ("sinusoidal_positions: the table matches the formula (sines and cosines interleaved, exponent 2i/d, "
             "positions from 0)")
LAYER_NORM = ("LayerNorm: outputs and gradients match nn.LayerNorm with the same weights (standard rows, rows "
              "shifted by 1000, rows with std 1e-3; float32 and float64)")
FEED_FORWARD = "FeedForward: outputs and gradients match the reference with the same weights (float32 and float64)"
ENCODER = ("EncoderBlock: outputs and gradients match nn.TransformerEncoderLayer with the same weights (post-norm "
           "and pre-norm, source padding; float32 and float64)")
DECODER = ("DecoderBlock: outputs and gradients match nn.TransformerDecoderLayer with the same weights (post-norm "
           "and pre-norm, causal mask and source padding; float32 and float64)")
FORWARD = ("Transformer: logits and gradients match the reference with the same weights (pre-norm with sinusoidal "
           "positions, post-norm with learned ones; padded sources; float32, float64, another device)")
PROPERTIES = ("Transformer: no position reads a later target token, the source's padding changes nothing, and the "
              "source matters")
GREEDY = "Transformer.greedy_decode: each token is the most likely one given <BOS> and the tokens before it"
STEPS = ("train_transformer, step by step: each optimiser step receives the gradient of that step's loss (padding "
         "ignored), clipped to global norm 1, at the warm-up's learning rate")
TRAINING = "train_transformer: the trained model translates enough held-out dates exactly (greedy decoding)"

_SIN = "    pe[:, 0::2] = torch.sin(angles)  # even features\n"
_COS = "    pe[:, 1::2] = torch.cos(angles)  # odd features\n"
_VAR = "        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (..., 1): the biased variance (divide by d)\n"
_NORMALISE = "        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias"  # the class's last line
_ENC_PRE = ("            h = self.ln1(x)\n            x = x + self.attn(h, mask=mask)\n"
            "            x = x + self.ff(self.ln2(x))\n")
_ENC_POST = "            x = self.ln1(x + self.attn(x, mask=mask))\n"
_CROSS_PRE = ("            y = y + self.cross_attn(self.ln2(y), memory, mask=memory_mask)  # queries from y, "
              "keys/values from memory\n")
_CROSS_POST = "            y = self.ln2(y + self.cross_attn(y, memory, mask=memory_mask))\n"
_CAUSAL = "        self_mask = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()  # (T, T): j <= i\n"
_EMBED = "        return emb(ids) + positions.to(emb.weight.dtype)  # no sqrt(d_model) factor: see the chapter\n"
_LOSS = ("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1),\n"
         "                               ignore_index=PAD_ID)  # the mean over real target tokens only\n")

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

# name -> (function or class replaced, the wrong version: Edit(s) of the solution's own definition;
# checks that must score 0)
VARIANTS: dict[str, tuple[str, Edit | list[Edit], tuple[str, ...]]] = {
    "sin and cos swapped": ("sinusoidal_positions", [
        Edit(_SIN, "    pe[:, 0::2] = torch.cos(angles)\n", why="cosines on the even features"),
        Edit(_COS, "    pe[:, 1::2] = torch.sin(angles)\n", why="sines on the odd ones")],
        (POSITIONS,)),
    "sines and cosines concatenated, not interleaved": ("sinusoidal_positions", [
        Edit(_SIN, "    pe[:, : d // 2] = torch.sin(angles)\n", why="[sin ... | cos ...] halves"),
        Edit(_COS, "    pe[:, d // 2:] = torch.cos(angles)\n", why="as some blog posts write it")],
        (POSITIONS,)),
    "frequency exponent i/d instead of 2i/d": ("sinusoidal_positions", Edit(
        "    two_i = torch.arange(0, d, 2, dtype=torch.float64)",
        "    two_i = torch.arange(0, d // 2, dtype=torch.float64)", why="pair i's exponent i/d: frequencies too high"),
        (POSITIONS,)),
    "positions counted from 1": ("sinusoidal_positions", Edit(
        "torch.arange(T, dtype=torch.float64)[:, None]", "torch.arange(1, T + 1, dtype=torch.float64)[:, None]",
        why="the first token at position 1"),
        (POSITIONS,)),
    "LayerNorm over the time axis": ("LayerNorm", [
        Edit("        mu = x.mean(dim=-1, keepdim=True)", "        mu = x.mean(dim=-2, keepdim=True)", why="over T"),
        Edit(_VAR, "        var = ((x - mu) ** 2).mean(dim=-2, keepdim=True)\n", why="over T")],
        (LAYER_NORM,)),
    "LayerNorm with the unbiased variance (torch.var's default)": ("LayerNorm", Edit(
        _VAR, "        var = x.var(dim=-1, keepdim=True)\n", why="divides by d - 1"),
        (LAYER_NORM,)),
    "LayerNorm with eps outside the square root": ("LayerNorm", Edit(
        _NORMALISE, "        return (x - mu) / (torch.sqrt(var) + self.eps) * self.weight + self.bias",
        why="the Annotated Transformer's std + eps"),
        (LAYER_NORM,)),
    "FeedForward without the ReLU": ("FeedForward", Edit(
        "        return self.ff2(torch.relu(self.ff1(x)))", "        return self.ff2(self.ff1(x))",
        why="two linear layers collapse into one"),
        (FEED_FORWARD,)),
    "encoder: no residual connection around self-attention": ("EncoderBlock", [
        Edit("            x = x + self.attn(h, mask=mask)", "            x = self.attn(h, mask=mask)", why="pre-norm"),
        Edit(_ENC_POST, "            x = self.ln1(self.attn(x, mask=mask))\n", why="post-norm")],
        (ENCODER, FORWARD)),
    "pre-norm block written as post-norm (norm after the residual)": ("EncoderBlock", Edit(
        _ENC_PRE, "            x = self.ln1(x + self.attn(x, mask=mask))\n            x = self.ln2(x + self.ff(x))\n",
        why="norm_first=True ignored"),
        (ENCODER, FORWARD)),
    "pre-norm residual taken from the normalised x (LN(x) + f(LN(x)))": ("EncoderBlock", Edit(
        "            x = x + self.attn(h, mask=mask)", "            x = h + self.attn(h, mask=mask)",
        why="the residual stream is normalised at every block"),
        (ENCODER, FORWARD)),
    "cross-attention takes its keys and values from the decoder": ("DecoderBlock", [
        Edit(_CROSS_PRE, "            h = self.ln2(y)\n            y = y + self.cross_attn(h, h)\n", why="pre-norm"),
        Edit(_CROSS_POST, "            y = self.ln2(y + self.cross_attn(y, y))\n", why="post-norm")],
        # the training run scores it too (the calibration in test_training.py); two training proofs, for the
        # causality check (no causal mask) and the threshold (no positions), are enough for CI's time
        (DECODER, FORWARD, PROPERTIES)),
    "decoder self-attention without the causal mask": ("Transformer", Edit(
        _CAUSAL, "        self_mask = None  # every position sees the whole target\n",
        why="teacher forcing then shows the answer"),
        (FORWARD, PROPERTIES, TRAINING)),
    "the source's padding not masked": ("Transformer", Edit(
        "        mask = (src != PAD_ID)[:, None, None, :]  # (B, 1, 1, S): no query attends to padding\n",
        "        mask = None\n", why="the encoder's queries attend to the padding"),
        (FORWARD, PROPERTIES)),
    "pre-norm stack without its final LayerNorm": ("Transformer", Edit(
        "        return self.enc_ln(x) if self.norm_first else x", "        return x",
        why="the encoder's output never normalised"),
        (FORWARD,)),
    "embeddings multiplied by sqrt(d_model) (the spec says no)": ("Transformer", Edit(
        _EMBED, "        return emb(ids) * math.sqrt(self.d_model) + positions.to(emb.weight.dtype)\n",
        why="the 2017 paper's factor, without its initialisation"),
        (FORWARD,)),
    "no positions added": ("Transformer", Edit(
        _EMBED, "        return emb(ids)\n", why="attention alone cannot tell 03/04 from 04/03"),
        (FORWARD, TRAINING)),
    "greedy_decode reads the first position's logits": ("Transformer", Edit(
        "logits[:, -1].argmax(dim=-1, keepdim=True)", "logits[:, 0].argmax(dim=-1, keepdim=True)",
        why="the prediction after <BOS> repeated"),
        (GREEDY,)),
    "targets not shifted for teacher forcing (the decoder reads tgt_out)": ("train_transformer", Edit(
        "        logits = model(batch.src, batch.tgt_in)  # (B, T, V)",
        "        logits = model(batch.src, batch.tgt_out)  # (B, T, V)", why="it learns to copy its input"),
        (STEPS,)),  # visible: lmcourse check shows it; the training run scores it 0 as well (about 45 s a grade)
    "no warm-up": ("train_transformer", Edit(
        "lambda step: min(1.0, (step + 1) / warmup)", "lambda step: 1.0", why="the full rate from the first step"),
        (STEPS,)),
    "train_transformer: gradients never clipped": ("train_transformer", Edit(
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "", why="the spec clips the global norm to 1"),
        (STEPS,)),
}

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
    ALTERNATES_THAT_TRAIN = ("blocks as plain functions over their parameters; masks built with arange; a warm-up "
                             "set by hand",)
