"""Unit 4 (04-attention): the solution earns every point, the release none, and each known-wrong
implementation loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py); this file names the checks and
holds the known-wrong variants: the attention bugs students really write (a wrong scale, the softmax over
the wrong axis, masks after the softmax or upside down, heads split without the transpose, ...) and the
decoder's (attending to its own states, or to nothing). The CPU training tier (about 40 s a grade on one
core) runs for the solution and for the variants meant to fail it; the other variants' grades leave it
out. The correct alternates (einsum with a -1e9 fill; a loop over heads) must earn full marks.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names, as the student sees them.
SOFTMAX = ("masked_softmax without a mask: matches torch.softmax over the last axis, rows sum to 1, finite and "
           "shift-invariant at scores near ±1000")
SOFTMAX_MASK = ("masked_softmax with a mask: masked entries exactly 0, the others renormalised, a fully masked row "
                "all zeros (not NaN)")
ATTENTION = ("scaled_dot_product_attention: outputs, weights and gradients match F.scaled_dot_product_attention "
             "(2-d to 4-d, T_q != T_k, d_k != d_v, with and without masks; float32 and float64)")
ATTENTION_PROPERTIES = ("scaled_dot_product_attention: a fully masked row gives zero weights and a zero output; "
                        "permuting the keys and values together permutes the weights' columns and leaves the "
                        "outputs unchanged")
CAUSAL = "causal_mask: boolean (T, T), True on and below the diagonal, T = 1 to 9"
PADDING = "key_padding_mask: boolean (B, 1, 1, T), True at each sequence's real positions, for random lengths"
MHA_SELF = ("MultiHeadAttention: self-attention without a mask, outputs, per-head weights and gradients match "
            "nn.MultiheadAttention with the same weights")
MHA_MASKS = ("MultiHeadAttention: causal self-attention and cross-attention with key padding match "
             "nn.MultiheadAttention (1 head, 4 heads, d_model heads; float32 and float64)")
MHA_LAYOUT = ("MultiHeadAttention: parameter names and shapes as specified (with and without bias), and it runs on "
              "a device other than the CPU")
MHA_PROPERTIES = ("MultiHeadAttention: without a mask, permuting the tokens permutes the outputs; under a causal "
                  "mask, changing later tokens leaves earlier outputs unchanged")
MHA_HEADS = ("MultiHeadAttention: heads are independent: changing one head's query weights changes that head's "
             "weights only")
DECODER = ("AttentionSeq2Seq: logits, attention weights and gradients match the reference with the same weights "
           "(teacher forcing, padded sources; float32 and float64)")
GREEDY = "AttentionSeq2Seq.greedy_decode: each token is the most likely one given <BOS> and the tokens before it"
STEPS = ("train_reverser, step by step: each optimiser step receives the gradient of that step's loss (padding "
         "ignored), clipped to global norm 1")
TRAINING = "train_reverser: the trained model reverses enough long held-out strings exactly (greedy decoding)"

_SCORES = "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)"
_FILL = '        scores = scores.masked_fill(~mask, float("-inf"))'
_SPLIT = {"q": "self.q_proj(x).view(B, T_q, h, d_k).transpose(1, 2)",
          "k": "self.k_proj(kv).view(B, T_k, h, d_k).transpose(1, 2)",
          "v": "self.v_proj(kv).view(B, T_k, h, d_k).transpose(1, 2)"}
_ATTEND = "        context, weights = self.attn(h, memory, mask)"

# name -> (function or class replaced, the wrong version: Edit(s) of the solution's own definition;
# checks that must score 0)
VARIANTS: dict[str, tuple[str, Edit | list[Edit], tuple[str, ...]]] = {
    "attention scores not scaled": ("scaled_dot_product_attention", Edit(
        _SCORES, "    scores = q @ k.transpose(-2, -1)",
        why="no 1/sqrt(d_k): wide vectors saturate the softmax"),
        (ATTENTION, MHA_SELF, MHA_MASKS, DECODER)),
    "attention scores divided by d_k, not sqrt(d_k)": ("scaled_dot_product_attention", Edit(
        _SCORES, "    scores = q @ k.transpose(-2, -1) / d_k",
        why="the variance argument misread: the standard deviation of q.k is sqrt(d_k)"),
        (ATTENTION, MHA_SELF, MHA_MASKS, DECODER)),
    "heads scaled by sqrt(d_model), not sqrt(d_k)": ("MultiHeadAttention", Edit(
        "        out, weights = scaled_dot_product_attention(q, k, v, mask)",
        "        q = q * math.sqrt(d_k / self.d_model)  # scores over sqrt(d_model) in the end\n"
        "        out, weights = scaled_dot_product_attention(q, k, v, mask)",
        why="the scale of the whole model's width instead of one head's"),
        (MHA_SELF, MHA_MASKS)),
    "softmax over the query axis": ("masked_softmax", [
        Edit("top = scores.amax(dim=-1, keepdim=True)", "top = scores.amax(dim=-2, keepdim=True)", why="dim=-2"),
        Edit("total = e.sum(dim=-1, keepdim=True)", "total = e.sum(dim=-2, keepdim=True)", why="dim=-2")],
        (SOFTMAX, SOFTMAX_MASK, ATTENTION, MHA_SELF, MHA_MASKS, DECODER)),
    "mask applied after the softmax, without renormalising": ("masked_softmax", [
        Edit("    if mask is not None:\n" + _FILL + "  # a blocked score: exp(-inf) = 0 exactly\n", "",
             why="no -inf before the exponential"),
        Edit("    return e / total.clamp_min(torch.finfo(e.dtype).tiny)",
             "    weights = e / total.clamp_min(torch.finfo(e.dtype).tiny)\n"
             "    return weights if mask is None else weights * mask",
             why="the blocked weights zeroed afterwards: the rows no longer sum to 1")],
        (SOFTMAX_MASK, ATTENTION, MHA_MASKS, DECODER)),
    "mask convention inverted (True = blocked, as nn.MultiheadAttention)": ("masked_softmax", Edit(
        _FILL, '        scores = scores.masked_fill(mask, float("-inf"))',
        why="PyTorch's nn.MultiheadAttention convention in a course that uses the opposite"),
        (SOFTMAX_MASK, ATTENTION, MHA_MASKS, DECODER)),
    "naive exp without subtracting the row's maximum": ("masked_softmax", Edit(
        "    e = torch.exp(scores - top)", "    e = torch.exp(scores)",
        why="exp overflows to inf above about 89 in float32"),
        (SOFTMAX, ATTENTION)),
    "fully masked rows give NaN": ("masked_softmax", [
        Edit("    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))", "",
             why="a fully masked row's largest score is -inf, and -inf - (-inf) is NaN"),
        Edit("    return e / total.clamp_min(torch.finfo(e.dtype).tiny)", "    return e / total", why="0 / 0")],
        (SOFTMAX_MASK, ATTENTION_PROPERTIES)),
    "causal mask hides the diagonal (tril(-1))": ("causal_mask", Edit(
        ".tril()", ".tril(-1)", why="a token cannot see itself; the first row is fully masked"),
        (CAUSAL,)),
    "causal mask shows one future token (tril(1))": ("causal_mask", Edit(
        ".tril()", ".tril(1)", why="off by one the other way: the next token is visible"),
        (CAUSAL,)),
    "key_padding_mask of shape (B, T)": ("key_padding_mask", Edit(
        "return (positions < lengths[:, None])[:, None, None, :]", "return positions < lengths[:, None]",
        why="without the head and query axes, the batch axis lines up with the queries"),
        (PADDING, DECODER)),
    "heads split with view but no transpose": ("MultiHeadAttention", [
        Edit(_SPLIT[n], _SPLIT[n].replace(f"view(B, T_{'q' if n == 'q' else 'k'}, h, d_k).transpose(1, 2)",
                                          f"view(B, h, T_{'q' if n == 'q' else 'k'}, d_k)"),
             why="(B, T, d) viewed as (B, h, T, d_k) mixes positions into heads") for n in "qkv"],
        (MHA_SELF, MHA_MASKS, MHA_HEADS)),
    "heads merged back without the transpose": ("MultiHeadAttention", Edit(
        "out = out.transpose(1, 2).reshape(B, T_q, self.d_model)", "out = out.reshape(B, T_q, self.d_model)",
        why="(B, h, T, d_k) reshaped straight to (B, T, d) mixes heads into positions"),
        (MHA_SELF, MHA_MASKS)),
    "output projection missing": ("MultiHeadAttention", Edit(
        "        return self.out_proj(out), weights", "        return out, weights",
        why="the heads concatenated but never mixed"),
        (MHA_SELF, MHA_MASKS)),
    "one projection shared by queries and keys": ("MultiHeadAttention", Edit(
        "k = self.k_proj(kv)", "k = self.q_proj(kv)", why="k_proj never used"),
        (MHA_SELF, MHA_MASKS)),
    "decoder attends to its own states instead of the encoder's": ("AttentionSeq2Seq", Edit(
        _ATTEND, "        context, weights = self.attn(h, mask=causal_mask(h.shape[1], h.device))",
        why="self-attention over the decoder's past: the source reaches it only through one vector"),
        (DECODER, TRAINING)),
    "decoder without attention (one vector carries the source)": ("AttentionSeq2Seq", Edit(
        _ATTEND, "        _, weights = self.attn(h, memory, mask)\n        context = torch.zeros_like(h)",
        why="the bottleneck model of the chapter"),
        (DECODER, TRAINING)),
    "loss averaged over the padding too": ("train_reverser", Edit(
        ",\n                               ignore_index=PAD_ID)", ")",
        why="the padding after <EOS> counts as targets: a different loss, invisible in the exact match"),
        (STEPS,)),
    "gradients never clipped": ("train_reverser", Edit(
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "",
        why="the spec clips the global norm to 1"),
        (STEPS,)),
    "clipping before backward()": ("train_reverser", Edit(
        "        loss.backward()\n        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        loss.backward()\n",
        why="clips the previous step's (zeroed) gradients: nothing"),
        (STEPS,)),
    "gradients never zeroed": ("train_reverser", Edit(
        "        optimizer.zero_grad()\n", "", why="each step's gradient piles onto all the earlier ones"),
        (STEPS,)),
    "greedy_decode reads the first position's logits": ("AttentionSeq2Seq", Edit(
        "logits[:, -1].argmax(dim=-1, keepdim=True)", "logits[:, 0].argmax(dim=-1, keepdim=True)",
        why="the prediction after <BOS> repeated instead of the newest one"),
        (GREEDY,)),
}

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
