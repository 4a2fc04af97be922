"""Known mistakes of 05-transformer: the bugs students really write in a transformer (sines and cosines swapped
or not interleaved, the frequency exponent off by a factor of 2, LayerNorm over the wrong axis or with the
unbiased variance or eps outside the square root, a residual missing or taken from the normalised input, pre-norm
written as post-norm, cross-attention reading the decoder, no causal mask, the source's padding not masked, the
pre-norm stack's final LayerNorm missing, embeddings scaled against the spec, no positions, greedy decoding from
the wrong position, targets not shifted, no warm-up, no clipping).

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one), and HINTS holds the advice a
student sees when their failures match it.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit

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
PROPERTIES = ("Transformer: no position reads a later target token but later positions read earlier ones, the "
              "source's padding changes nothing, and the source matters")
GREEDY = ("Transformer.greedy_decode: each token is the most likely one given <BOS> and the tokens before it; it "
          "runs where its input is")
STEPS = ("train_transformer, step by step: each optimiser step receives the gradient of that step's loss (padding "
         "ignored), clipped to global norm 1, at the warm-up's learning rate, and one Adam (the paper's betas and "
         "eps) updates the weights from it; the model returned in eval mode")
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
    # the optimiser (issue #40, class 2): exact match cannot see it
    "train_transformer with Adam's default betas and eps": ("train_transformer", Edit(
        "torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)",
        "torch.optim.Adam(model.parameters(), lr=lr)", why="beta2 0.999 and eps 1e-8, not the paper's"),
        (STEPS,)),
    "train_transformer ignores its lr argument": ("train_transformer", Edit(
        "torch.optim.Adam(model.parameters(), lr=lr,", "torch.optim.Adam(model.parameters(), lr=1e-3,",
        why="the lr argument is ignored"),
        (STEPS,)),
    # a decoder that keeps causality by never looking back (issue #40, class 4)
    "DecoderBlock without its masked self-attention": ("DecoderBlock", [
        Edit("            y = y + self.self_attn(h, mask=self_mask)\n", ""),
        Edit("            h = self.ln1(y)\n", ""),
        Edit("            y = self.ln1(y + self.self_attn(y, mask=self_mask))\n", "            y = self.ln1(y)\n",
             why="no self-attention: causal by construction, each position blind to the tokens before it")],
        (DECODER, FORWARD, PROPERTIES, GREEDY)),
    # a transformer whose decoder stack does nothing is causal too (issue #40, class 4)
    "Transformer's decoder runs none of its blocks": ("Transformer", Edit(
        "        for block in self.decoder:\n            y = block(y, memory, self_mask, memory_mask)\n", "",
        why="embeddings straight to the output layer: causal, and blind to the source"),
        (FORWARD, PROPERTIES)),
    # train/eval mode (issue #40, class 3)
    "train_transformer returns the model in training mode": ("train_transformer", Edit(
        "    return model.cpu().eval()", "    return model.cpu()", why="the instructions ask for eval mode"),
        (STEPS,)),
    "the paper's dropout in the feed-forward (the instructions have none)": ("FeedForward", Edit(
        "        return self.ff2(torch.relu(self.ff1(x)))",
        "        return self.ff2(F.dropout(torch.relu(self.ff1(x)), 0.1, self.training))",
        why="the original Transformer's dropout: every training step's gradient is another network's"),
        (STEPS,)),
    "train_transformer: gradients never clipped": ("train_transformer", Edit(
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "", why="the spec clips the global norm to 1"),
        (STEPS,)),
    # the device (issue #40, class 1): right on a laptop, an error on a GPU
    "greedy_decode's <BOS> column made on the CPU": ("Transformer", Edit(
        "ys = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long, device=src.device)",
        "ys = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long)",
        why="the decoder meets a CPU prefix while the memory and the model are on the GPU"),
        (GREEDY,)),
    "greedy_decode returns its tokens through NumPy": ("Transformer", Edit(
        "return ys[:, 1:]", "return torch.from_numpy(ys[:, 1:].numpy())",
        why="a GPU tensor cannot become a NumPy array"),
        (GREEDY,)),
}

# Checks a mistake's signature leaves out unless the mistake is written to fail them: the training run (about
# 40 s a grade on one core, too slow to run for every mistake).
LEAVE_OUT: tuple[str, ...] = (TRAINING,)

# What a student reads when their failing checks match the mistake: advice, never code.
HINTS: dict[str, str] = {
    "sin and cos swapped":
        "Check which function fills the even features and which the odd ones: in each pair the first feature "
        "holds the sine and the second the cosine, so at position 0 every pair reads 0 then 1.",
    "sines and cosines concatenated, not interleaved":
        "Check how your position table lays out its features: the sine and the cosine of one frequency sit side "
        "by side as a pair, interleaved along the row, not in two halves. Write out row 0 for four features by "
        "hand and compare.",
    "frequency exponent i/d instead of 2i/d":
        "Check the exponent in each pair's frequency: it is the index of the pair's first feature, 2i, over d, "
        "not the pair's number, so the wavelengths spread geometrically up to the last pair. Counting pairs "
        "leaves every frequency too high.",
    "positions counted from 1":
        "Check where your positions start counting: the first token sits at position 0, whose code is the sine "
        "and cosine of 0 in every pair. Starting one later shifts every row of the table.",
    "LayerNorm over the time axis":
        "Check which axis your mean and variance are taken over: LayerNorm normalises each position's vector over "
        "its own features, never across the positions of a sequence, so every token is treated on its own.",
    "LayerNorm with the unbiased variance (torch.var's default)":
        "Check how you compute the variance: LayerNorm uses the biased one, dividing by the number of features, "
        "while `torch.var` by default divides by one less. Compare the two by hand on a short vector.",
    "LayerNorm with eps outside the square root":
        "Check where epsilon enters your denominator: it is added to the variance, inside the square root. "
        "Placed outside, it barely changes ordinary rows but changes rows with a tiny spread a lot, which is "
        "why those fail.",
    "FeedForward without the ReLU":
        "Check the middle of your feed-forward sublayer: the nonlinearity between the two linear layers is what "
        "lets it compute new features. Without it the two layers collapse into a single linear map.",
    "encoder: no residual connection around self-attention":
        "Check that your encoder block adds self-attention's output back onto its input, in both the pre-norm "
        "and the post-norm form: every sublayer sits inside a residual connection, which carries the input "
        "through and keeps a deep stack trainable.",
    "pre-norm block written as post-norm (norm after the residual)":
        "Check your block's pre-norm branch: when `norm_first` is set, each sublayer reads a normalised copy of "
        "the stream and its output is added to the stream itself, instead of normalising after the residual sum "
        "as the 2017 form does.",
    "pre-norm residual taken from the normalised x (LN(x) + f(LN(x)))":
        "Check which tensor your pre-norm residual adds the sublayer's output to: only the sublayer's input is "
        "normalised, while the residual stream stays untouched. With the sublayers outputting zero, a block "
        "should return its input unchanged.",
    "cross-attention takes its keys and values from the decoder":
        "Check where your decoder block's cross-attention takes its keys and values: the queries come from the "
        "decoder, the keys and values from the encoder's output. Otherwise the target never sees the source, "
        "and unmasked it can see later target tokens.",
    "decoder self-attention without the causal mask":
        "Check the mask on the decoder's self-attention: each target position may attend only to itself and "
        "earlier positions. Without a causal mask, teacher forcing lets a position copy the token it must "
        "predict, so the loss falls while translations fail.",
    "the source's padding not masked":
        "Check that the source's padding mask reaches every attention whose keys come from the source, in the "
        "encoder and in cross-attention: padding carries no information, so more or less of it must change "
        "nothing.",
    "pre-norm stack without its final LayerNorm":
        "Check the end of your pre-norm encoder stack: a pre-norm block never normalises its own output, so the "
        "stack closes with one last LayerNorm before the decoder reads it. The post-norm form needs no extra "
        "norm.",
    "embeddings multiplied by sqrt(d_model) (the spec says no)":
        "Check your embeddings against this assignment's specification: token embeddings and position codes are "
        "added with no scale factor. Scaling PyTorch's embeddings, which already start at unit size, would "
        "drown out the positions.",
    "no positions added":
        "Check that position information reaches the model's input: attention by itself ignores order, so "
        "without position codes added to the token embeddings the model cannot tell which of two digits comes "
        "first.",
    "greedy_decode reads the first position's logits":
        "Check which position's scores choose the next token in `greedy_decode`: the next token is predicted at "
        "the newest position, the end of the prefix so far. The earliest position only ever predicts the token "
        "after <BOS>.",
    "targets not shifted for teacher forcing (the decoder reads tgt_out)":
        "Check what your training step feeds the decoder: its input is the target shifted right, starting with "
        "<BOS>, while the loss compares with the unshifted target. Fed the expected output, it learns to copy "
        "its input.",
    "no warm-up":
        "Check the learning rate of your first optimiser steps: the schedule rises linearly over the warm-up "
        "before it reaches the full rate, since a large rate from the first step can move the layers too far "
        "before training settles.",
    "train_transformer with Adam's default betas and eps":
        "Check your optimiser's settings against the specification: the paper's Adam forgets old squared "
        "gradients faster than PyTorch's default and uses a smaller epsilon.",
    "train_transformer ignores its lr argument":
        "Check that your training function uses the learning rate it is called with, not a value of its own.",
    "DecoderBlock without its masked self-attention":
        "Check that each decoder block lets a position read the target tokens before it: the masked "
        "self-attention sublayer comes first, then cross-attention to the source, then the feed-forward.",
    "Transformer's decoder runs none of its blocks":
        "Check that decode passes the target through every decoder block: the embeddings alone go straight to "
        "the output layer, which keeps every position causal but reads neither the source nor the tokens before.",
    "train_transformer returns the model in training mode":
        "Check the mode of the model your training function hands back: a trained model is used in eval mode, "
        "and the specification asks you to switch it before returning it.",
    "the paper's dropout in the feed-forward (the instructions have none)":
        "Check your blocks against the specification's table rather than the original paper: this model has no "
        "dropout anywhere, so in training mode it must give the same output twice for the same input.",
    "train_transformer: gradients never clipped":
        "Check what happens between the backward pass and the optimiser step: the specification clips the "
        "gradients of all parameters together to a global norm of 1, which guards each update against a rare, "
        "very large gradient.",
    "greedy_decode's <BOS> column made on the CPU":
        "Check where the first column of your decoded sequence is made: a new tensor lands on the CPU unless you "
        "ask for the device of the source, and decoding on a GPU then fails at the first step.",
    "greedy_decode returns its tokens through NumPy":
        "Check how `greedy_decode` hands back its tokens: a tensor on a GPU cannot become a NumPy array, so keep "
        "them a torch tensor on the source's device.",
}
