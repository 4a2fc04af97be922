"""Known mistakes of 04-attention: the wrong implementations students really write, each with the checks
proven to catch it and a hint for the student.

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one, and proves that its grade is
attributed to it), and HINTS holds the advice a student reads when their failures match it. It lives beside
the hidden checks, out of the student worker's sight and out of the student edition.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit


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
CAUSAL = ("causal_mask: boolean (T, T), True on and below the diagonal, T = 1 to 9, made on the device it is "
          "given")
PADDING = ("key_padding_mask: boolean (B, 1, 1, T), True at each sequence's real positions, for random lengths; "
           "made on the device of the lengths")
MHA_SELF = ("MultiHeadAttention: self-attention without a mask, outputs, per-head weights and gradients match "
            "nn.MultiheadAttention with the same weights")
MHA_MASKS = ("MultiHeadAttention: causal self-attention and cross-attention with key padding match "
             "nn.MultiheadAttention (1 head, 4 heads, d_model heads; float32 and float64)")
MHA_LAYOUT = ("MultiHeadAttention: parameter names and shapes as specified (with and without bias), each in its role "
              "(keys through k_proj, values through v_proj), and it runs on a device other than the CPU")
MHA_PROPERTIES = ("MultiHeadAttention: without a mask, permuting the tokens permutes the outputs and each position "
                  "reads the others; under a causal mask, changing later tokens leaves earlier outputs unchanged and "
                  "later positions read earlier tokens")
MHA_HEADS = ("MultiHeadAttention: heads are independent: changing one head's query weights changes that head's "
             "weights only")
DECODER = ("AttentionSeq2Seq: logits, attention weights and gradients match the reference with the same weights "
           "(teacher forcing, padded sources; float32 and float64)")
GREEDY = ("AttentionSeq2Seq.greedy_decode: each token is the most likely one given <BOS> and the tokens before it; "
          "it runs where its input is")
STEPS = ("train_reverser, step by step: each optimiser step receives the gradient of that step's loss (padding "
         "ignored), clipped to global norm 1, and one Adam at lr updates the weights from it; the model returned in eval mode")
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
    "train_reverser makes a new Adam every step": ("train_reverser", [
        Edit("    optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n", ""),
        Edit("        optimizer.zero_grad()\n",
             "        optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n        optimizer.zero_grad()\n",
             why="Adam's moment estimates start from zero every step: each update is about lr times the sign of "
                 "the gradient")],
        (STEPS,)),
    "train_reverser ignores its lr argument": ("train_reverser", Edit(
        "torch.optim.Adam(model.parameters(), lr=lr)", "torch.optim.Adam(model.parameters(), lr=3e-3)",
        why="the lr argument is ignored: every call trains at 3e-3"),
        (STEPS,)),
    # stubs that keep the properties (issue #40, class 4)
    "MultiHeadAttention stub: out_proj(x) with uniform weights, no attention": ("MultiHeadAttention", Edit(
        "        return self.out_proj(out), weights",
        "        return self.out_proj(x), torch.full((B, h, T_q, T_k), 1.0 / T_k, device=x.device)",
        why="a stub: each position's output is its own input projected; permuting and causal properties hold"),
        (MHA_SELF, MHA_MASKS, MHA_LAYOUT, MHA_PROPERTIES, MHA_HEADS, DECODER)),
    "each position attends to itself alone": ("MultiHeadAttention", Edit(
        "        out, weights = scaled_dot_product_attention(q, k, v, mask)",
        "        weights = torch.eye(T_q, T_k, device=x.device).expand(B, h, T_q, T_k)\n"
        "        out = weights @ v",
        why="identity attention: no mixing, so permutation and causality hold"),
        (MHA_SELF, MHA_MASKS, MHA_LAYOUT, MHA_PROPERTIES, MHA_HEADS, DECODER)),
    # train/eval mode (issue #40, class 3)
    "train_reverser returns the model in training mode": ("train_reverser", Edit(
        "    return model.cpu().eval()", "    return model.cpu()", why="the instructions ask for eval mode"),
        (STEPS,)),
    "greedy_decode reads the first position's logits": ("AttentionSeq2Seq", Edit(
        "logits[:, -1].argmax(dim=-1, keepdim=True)", "logits[:, 0].argmax(dim=-1, keepdim=True)",
        why="the prediction after <BOS> repeated instead of the newest one"),
        (GREEDY,)),
    # the device (issue #40, class 1): right on a laptop, an error on a GPU
    "causal_mask ignores its device argument": ("causal_mask", Edit(
        "torch.ones(T, T, dtype=torch.bool, device=device)", "torch.ones(T, T, dtype=torch.bool)",
        why="the mask is always made on the CPU"),
        (CAUSAL,)),
    "key_padding_mask's positions made on the CPU": ("key_padding_mask", Edit(
        "torch.arange(T, device=lengths.device)", "torch.arange(T)",
        why="compared with lengths on a GPU: two devices in one operation"),
        (PADDING,)),
    "greedy_decode's <BOS> column made on the CPU": ("AttentionSeq2Seq", Edit(
        "BOS_ID, dtype=torch.long, device=src.device)  # (B, 1)", "BOS_ID, dtype=torch.long)  # (B, 1)",
        why="the decoder is run on a CPU prefix while the source and the model are on the GPU"),
        (GREEDY,)),
    "greedy_decode returns its tokens on the CPU": ("AttentionSeq2Seq", Edit(
        "        return ys[:, 1:]  # without the <BOS>", "        return ys[:, 1:].cpu()  # without the <BOS>",
        why="the caller's next step (comparing with targets on the GPU) mixes devices"),
        (GREEDY,)),
}

# Checks a mistake's grade leaves out unless the mistake is written to fail them: the training run.
LEAVE_OUT: tuple[str, ...] = (TRAINING,)

# What a student whose failing checks match the mistake reads: advice, never code.
HINTS: dict[str, str] = {
    "attention scores not scaled":
        "Check the scale of your attention scores: divide the dot products by the square root of d_k, or "
        "wide vectors saturate the softmax.",
    "attention scores divided by d_k, not sqrt(d_k)":
        "Check what you divide the scores by: the standard deviation of a dot product of d_k unit-variance "
        "terms is the square root of d_k, not d_k.",
    "heads scaled by sqrt(d_model), not sqrt(d_k)":
        "Check which width sets the scale inside a head: each head's scores use the head's own key width, "
        "not the model's.",
    "softmax over the query axis":
        "Check which axis your softmax normalises: each query's weights over the keys sum to 1, so it runs "
        "over the last axis.",
    "mask applied after the softmax, without renormalising":
        "Check when the mask is applied: blocked scores become minus infinity before the exponential, so the "
        "remaining weights still sum to 1.",
    "mask convention inverted (True = blocked, as nn.MultiheadAttention)":
        "Check what True means in this course's masks: a key the query may attend to. Ask which entries your "
        "fill overwrites.",
    "naive exp without subtracting the row's maximum":
        "Check your softmax at scores near 1000: subtract each row's largest score before exponentiating, or "
        "the exponentials overflow.",
    "fully masked rows give NaN":
        "Check a row in which every key is blocked: its weights should be all zeros. Its largest score is "
        "minus infinity, and subtracting it or dividing by a zero sum gives NaN.",
    "causal mask hides the diagonal (tril(-1))":
        "Check the diagonal of your causal mask: a token may attend to itself and to every earlier token.",
    "causal mask shows one future token (tril(1))":
        "Check the entry just above the diagonal: a token may not see the next one. Only positions on or "
        "below the diagonal are allowed.",
    "key_padding_mask of shape (B, T)":
        "Check the shape of your padding mask: it needs axes for the heads and the queries too, so that it "
        "broadcasts over the scores without lining the batch up with the queries.",
    "heads split with view but no transpose":
        "Check how you split the heads: reshape the features into heads, then move the head axis in front of "
        "the time axis. Viewing straight into the head layout mixes positions.",
    "heads merged back without the transpose":
        "Check how you merge the heads: move the time axis back next to the batch before flattening, or heads "
        "and positions get mixed.",
    "output projection missing":
        "Check the end of multi-head attention: after the heads are concatenated, an output projection mixes "
        "them.",
    "one projection shared by queries and keys":
        "Check that queries, keys and values each go through their own projection.",
    "decoder attends to its own states instead of the encoder's":
        "Check what the decoder's attention reads: its queries come from the decoder, and its keys and values "
        "from the encoder's states.",
    "decoder without attention (one vector carries the source)":
        "Check that each decoder step attends over the encoder's states: the point of attention is that the "
        "source is not squeezed into one vector.",
    "loss averaged over the padding too":
        "Check which target positions enter your loss: padding is not a target, so it must be ignored in the "
        "average.",
    "gradients never clipped":
        "Check your training step against the specification: the global gradient norm is clipped to 1 before "
        "every optimiser step.",
    "clipping before backward()":
        "Check the order of your training step: clip after the backward pass, when the gradients exist, and "
        "before the optimiser's step.",
    "gradients never zeroed":
        "Check that gradients are cleared at every step: otherwise each step adds onto all the earlier ones.",
    "train_reverser makes a new Adam every step":
        "Check where your optimiser is made: Adam keeps running averages of the gradients from step to step, "
        "and an optimiser made inside the loop starts them from zero at every step.",
    "train_reverser ignores its lr argument":
        "Check that your training function uses the learning rate it is called with, not a value of its own.",
    "MultiHeadAttention stub: out_proj(x) with uniform weights, no attention":
        "Check that your attention really mixes the positions: each output should be a weighted average of the "
        "values of all the positions it may see, with weights from the queries and keys.",
    "each position attends to itself alone":
        "Check where your attention weights come from: they are the softmax of the scaled scores between each "
        "query and every key, so a position normally attends to others as well as itself.",
    "train_reverser returns the model in training mode":
        "Check the mode of the model your training function hands back: a trained model is used in eval mode, "
        "and the specification asks you to switch it before returning it.",
    "greedy_decode reads the first position's logits":
        "Check which position's logits pick the next token: the newest one, at the end of the sequence so "
        "far.",
    "causal_mask ignores its device argument":
        "Check where your causal mask is made: `causal_mask` is given a device and must build the mask there, "
        "or a model on a GPU meets a mask on the CPU.",
    "key_padding_mask's positions made on the CPU":
        "Check where the positions you compare with the lengths are made: a new tensor lands on the CPU unless "
        "you ask for the device of the lengths, and on a GPU the comparison then fails.",
    "greedy_decode's <BOS> column made on the CPU":
        "Check where the first column of your decoded sequence is made: every new tensor must be made on the "
        "device of the source, or decoding on a GPU fails at the first step.",
    "greedy_decode returns its tokens on the CPU":
        "Check where the tokens `greedy_decode` returns live: they should stay on the device of the source, "
        "so that whoever called it can compare them with targets there.",
}
