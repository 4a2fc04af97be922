"""Known mistakes of 06-bert: the bugs students really write in BERT, in WordPiece (no `##` continuation,
shortest match first, a partial [UNK], no length limit), in MLM masking (specials selected, the wrong positions
corrupted or labelled, wrong 80/10/10 shares, the generator ignored), in the encoder (GELU, LayerNorm eps, norm
order, padding, embeddings), in pooling and the heads, and one per training run (pretraining, fine-tuning).

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one), and HINTS holds the advice a
student sees when their failures match it.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit

# The checks' names, as the student sees them.
WORDPIECE = ("wordpiece_tokenize: the ids equal the reference tokenizer's on MiniLM's vocabulary (punctuation, "
             "accents, numbers, unknown and over-long words, empty text, lines of Shakespeare, random strings)")
MASK_STRUCTURE = ("mask_tokens: labels, unselected positions, special positions and random replacements as "
                  "specified; the generator decides; ids left unmodified; it runs where ids are")
MASK_STATS = ("mask_tokens: on 200,000 positions, 15% selected and of those 80% [MASK], 10% random, 10% unchanged, "
              "independent of token, position and row; random ids uniform over the non-special vocabulary")
LAYER = ("BertLayer: outputs and gradients match the reference with the same weights (post-norm, exact GELU, "
         "padding mask; float32 and float64)")
EMBED = ("BertModel.embed: token + position + segment embeddings and their LayerNorm match the reference with the "
         "same weights")
MODEL = ("BertModel: hidden states and gradients match the reference with the same weights (padded batches, two "
         "segments; float32, float64, another device)")
MINILM = ("BertModel with MiniLM's real weights: hidden states equal the reference's on padded WordPiece batches "
          "(atol 1e-4), and padding changes no real token's state")
SENTENCES = "mean_pool: MiniLM's sentence embeddings from your BertModel and mean_pool equal the reference's"
MLM_HEAD = ("BertForMLM: logits and gradients match the reference with the same weights; the decoder is the token "
            "embedding matrix (tied)")
MLM_LOSS = "mlm_loss: the mean cross-entropy over the selected positions only"
PRETRAIN = ("pretrain_mlm: the pretrained model's masked-LM loss on held-out lines (masked by the grader) is low "
            "enough")
FINE_TUNE = ("fine_tune: the pretrained encoder, fine-tuned, tells real lines from shuffled ones more accurately than "
             "the same recipe from scratch can")
NSP_PAIRS = ("nsp_pairs: IsNext pairs consecutive, NotNext pairs never; half of each, independent of the sentence and "
             "of its neighbours; the NotNext sentence uniform over those allowed; the generator decides")
PACK_PAIR = ("pack_pair: [CLS] a [SEP] b [SEP] and its segment ids on hidden pairs; a pair too long loses tokens from "
             "the end of the longer segment")
NSP_HEAD = ("NSPHead: logits and gradients match the reference with the same weights (the pooler and tanh on [CLS], "
            "then the classifier; float32 and float64)")
PRE_STEPS = ("pretrain_mlm, step by step: the padding masked in every forward, AdamW (weight decay 0.01) with the "
             "warm-up and decay of every step updating the weights, gradients clipped to 1, the model returned in "
             "eval mode")
FT_STEPS = ("fine_tune, step by step: the encoder starts from bert_state, the padding masked, AdamW (weight decay "
            "0.01) with the encoder at lr and the head at head_lr, every parameter trained, gradients clipped to 1, "
            "the model returned in eval mode")
CLASSIFIER = ("BertClassifier: logits and gradients match the reference with the same weights (the head reads [CLS], "
              "position 0)")

_LONGEST = ("            while end > start:  # the longest piece that starts at `start`\n"
            "                piece = word[start:end] if start == 0 else \"##\" + word[start:end]\n"
            "                if piece in vocab:\n"
            "                    break\n"
            "                end -= 1\n")
_RAND = "    outcome = torch.rand(ids.shape, generator=generator).to(ids.device)  # one draw decides mask / random / keep\n"
_POST = "        x = self.ln1(x + self.attn(x, mask=mask))  # post-norm: the sum is normalised\n"
_FF = "        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))  # F.gelu's default is the exact (erf) GELU"
_EMBED = "        return self.emb_ln(self.tok_emb(ids) + self.pos_emb(positions) + self.seg_emb(token_type_ids))"
_MASK = "        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)"

# name -> (function or class replaced, the wrong version: Edit(s) of the solution's own definition;
# checks that must score 0)
VARIANTS: dict[str, tuple[str, Edit | list[Edit], tuple[str, ...]]] = {
    "WordPiece continuations looked up without '##'": ("wordpiece_tokenize", Edit(
        "piece = word[start:end] if start == 0 else \"##\" + word[start:end]", "piece = word[start:end]",
        why="every piece looked up as a word start"),
        (WORDPIECE,)),
    "WordPiece shortest match first": ("wordpiece_tokenize", Edit(
        _LONGEST,
        "            end = start + 1\n"
        "            while end <= len(word):  # the shortest piece that starts at `start`\n"
        "                piece = word[start:end] if start == 0 else \"##\" + word[start:end]\n"
        "                if piece in vocab:\n"
        "                    break\n"
        "                end += 1\n"
        "            if end > len(word):\n"
        "                end = start\n", why="grows the piece from one character"),
        (WORDPIECE,)),
    "WordPiece: only the part that cannot be cut becomes [UNK]": ("wordpiece_tokenize", Edit(
        "            if end == start:  # nothing fits here: the whole word is unknown\n"
        "                pieces = [unk]\n                break\n",
        "            if end == start:  # nothing fits here: this part is unknown\n"
        "                pieces.append(unk)\n                break\n", why="keeps the pieces found before"),
        (WORDPIECE,)),
    "WordPiece without the 100-character limit": ("wordpiece_tokenize", Edit(
        "        if len(word) > MAX_CHARS_PER_WORD:\n            ids.append(unk)\n            continue\n", "",
        why="a 101-character word is cut into pieces"),
        (WORDPIECE,)),
    "mask_tokens selects special positions": ("mask_tokens", Edit(
        "    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device) & selectable\n",
        "    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device)\n", why="[CLS], [SEP], [PAD] too"),
        (MASK_STRUCTURE, MASK_STATS)),
    "mask_tokens applies 80/10/10 to every position, not only the selected": ("mask_tokens", [
        Edit("    inputs[selected & (outcome < 0.8)] = mask_id\n", "    inputs[selectable & (outcome < 0.8)] = mask_id\n",
             why="every position corrupted"),
        Edit("    swap = selected & (outcome >= 0.8) & (outcome < 0.9)\n",
             "    swap = selectable & (outcome >= 0.8) & (outcome < 0.9)\n", why="every position corrupted")],
        (MASK_STRUCTURE,)),  # the statistics look at the selected positions only
    "mask_tokens labels every position": ("mask_tokens", Edit(
        "    labels = torch.where(selected, ids, torch.full_like(ids, -100))\n", "    labels = ids.clone()\n",
        why="the loss then covers every position"),
        (MASK_STRUCTURE, MASK_STATS)),
    "mask_tokens draws random replacements from the whole vocabulary, specials included": ("mask_tokens", Edit(
        "    allowed[list(special_ids)] = False\n", "", why="[PAD] or [CLS] as a random token"),
        (MASK_STRUCTURE,)),
    "mask_tokens: 2% random replacements (TensorFlow's collator)": ("mask_tokens", Edit(
        "    swap = selected & (outcome >= 0.8) & (outcome < 0.9)\n",
        "    swap = selected & (outcome >= 0.8) & (outcome < 0.82)\n", why="0.1 of the remaining 20%"),
        (MASK_STATS,)),
    "mask_tokens: 80% [MASK], 20% random, none unchanged": ("mask_tokens", Edit(
        "    swap = selected & (outcome >= 0.8) & (outcome < 0.9)\n", "    swap = selected & (outcome >= 0.8)\n",
        why="no position left as it was"),
        (MASK_STATS,)),
    # the joint statistics across rows (issue #40, class 10)
    "mask_tokens draws one selection pattern for the whole batch": ("mask_tokens", Edit(
        "    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device) & selectable\n",
        "    selected = (torch.rand(ids.shape[-1], generator=generator) < p).to(ids.device) & selectable  # (T,) "
        "broadcast\n",
        why="every row masked at the same positions: each position's rate is right, the rows are not independent"),
        (MASK_STATS,)),
    # in-place mutation of what the caller passed (issue #40, class 10)
    "mask_tokens corrupts ids in place (no copy)": ("mask_tokens", Edit(
        "    inputs = ids.clone()\n", "    inputs = ids  # the caller's batch, corrupted in place\n",
        why="no copy"),
        (MASK_STRUCTURE,)),
    "mask_tokens ignores the generator it is given": ("mask_tokens", [
        Edit("    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device) & selectable\n",
             "    selected = (torch.rand(ids.shape) < p).to(ids.device) & selectable\n", why="torch's global generator"),
        Edit(_RAND, "    outcome = torch.rand(ids.shape).to(ids.device)\n", why="torch's global generator"),
        Edit("torch.randint(len(choices), ids.shape, generator=generator)", "torch.randint(len(choices), ids.shape)",
             why="torch's global generator")],
        (MASK_STRUCTURE,)),
    "tanh-approximate GELU": ("BertLayer", Edit(
        _FF, "        return self.ln2(x + self.ff2(F.gelu(self.ff1(x), approximate='tanh')))",
        why="GPT-2's GELU, not BERT's"),
        (LAYER, MODEL, MINILM)),
    # measured on MiniLM: eps 1e-5 in emb_ln moves the states by 1.6e-3; in the layers' LayerNorms only, by 9.7e-5
    "LayerNorm with PyTorch's default eps (1e-5)": ("BertModel", Edit(
        "        self.emb_ln = nn.LayerNorm(d_model, eps=eps)\n", "        self.emb_ln = nn.LayerNorm(d_model)\n",
        why="eps 1e-5"),
        (MINILM,)),
    "pre-norm layer instead of BERT's post-norm": ("BertLayer", [
        Edit(_POST, "        x = x + self.attn(self.ln1(x), mask=mask)\n", why="GPT-2's order"),
        Edit(_FF, "        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))", why="GPT-2's order")],
        (LAYER, MODEL, MINILM)),
    "padding not masked in attention": ("BertModel", Edit(_MASK, "        mask = None", why="attends to [PAD]"),
        (MODEL, MINILM)),
    "no segment embeddings": ("BertModel", Edit(
        _EMBED, "        return self.emb_ln(self.tok_emb(ids) + self.pos_emb(positions))", why="token types ignored"),
        (EMBED, MODEL, MINILM)),
    "no position embeddings": ("BertModel", Edit(
        _EMBED, "        return self.emb_ln(self.tok_emb(ids) + self.seg_emb(token_type_ids))", why="a bag of tokens"),
        (EMBED, MODEL, MINILM)),
    "mean_pool averages the padding too": ("mean_pool", Edit(
        "    return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)", "    return h.mean(dim=1)",
        why="every position, padding included"),
        (SENTENCES,)),
    "MLM decoder with a matrix of its own (not tied)": ("BertForMLM", [
        Edit("        self.bias = nn.Parameter(torch.zeros(vocab_size))\n",
             "        self.bias = nn.Parameter(torch.zeros(vocab_size))\n"
             "        self.decoder = nn.Linear(d_model, vocab_size, bias=False)\n", why="a second V x d matrix"),
        Edit("        return self.ln(F.gelu(self.dense(h))) @ self.bert.tok_emb.weight.T + self.bias",
             "        return self.decoder(self.ln(F.gelu(self.dense(h)))) + self.bias", why="untied")],
        (MLM_HEAD,)),
    "mlm_loss averaged over every position": ("mlm_loss", Edit(
        "    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)",
        "    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100,\n"
        "                             reduction='none')\n"
        "    return losses.mean()  # unselected positions count as 0", why="divides by every position"),
        (MLM_LOSS,)),
    "classifier on the mean of the tokens, not [CLS]": ("BertClassifier", Edit(
        "        return self.head(h[:, 0])  # [CLS] is at position 0", "        return self.head(h.mean(dim=1))",
        why="mean pooling where [CLS] is documented"),
        (CLASSIFIER,)),
    # next-sentence prediction (issue #40, class 11)
    "nsp_pairs may draw a or its true successor as NotNext": ("nsp_pairs", Edit(
        "    other = torch.randint(n - 2, (n - 1,), generator=generator)  # one of the n - 2 sentences allowed ...\n"
        "    other = other + 2 * (other >= a).long()  # ... numbered past a and a + 1\n",
        "    other = torch.randint(n, (n - 1,), generator=generator)  # any sentence at all\n",
        why="b == a + 1 labelled NotNext"),
        (NSP_PAIRS,)),
    "nsp_pairs tosses one coin for every pair of the call": ("nsp_pairs", Edit(
        "    labels = (torch.rand(n - 1, generator=generator) >= 0.5).long()  # (n-1,): one fair coin per pair\n",
        "    labels = (torch.rand(1, generator=generator) >= 0.5).long().expand(n - 1)  # one coin for all\n",
        why="all IsNext or all NotNext"),
        (NSP_PAIRS,)),
    "nsp_pairs labels IsNext 1, not 0": ("nsp_pairs", Edit(
        "    b = torch.where(labels == IS_NEXT, a + 1, other)\n", "    b = torch.where(labels == 1, a + 1, other)\n",
        why="the labels' meaning swapped"),
        (NSP_PAIRS,)),
    "pack_pair puts the final [SEP] in segment 0": ("pack_pair", Edit(
        "    return ids, [0] * (len(a) + 2) + [1] * (len(b) + 1)",
        "    return ids, [0] * (len(a) + 2) + [1] * len(b) + [0]", why="the last [SEP] in A's segment"),
        (PACK_PAIR,)),
    "pack_pair truncates b alone": ("pack_pair", Edit(
        "        if len(a) > len(b):\n", "        if not b:\n", why="b emptied before a loses a token"),
        (PACK_PAIR,)),
    "pack_pair truncates a when the two are as long": ("pack_pair", Edit(
        "        if len(a) > len(b):\n", "        if len(a) >= len(b):\n", why="ties cut from a"),
        (PACK_PAIR,)),
    "NSPHead without the pooler's tanh": ("NSPHead", Edit(
        "        return self.classifier(torch.tanh(self.pooler(h[:, 0])))  # [CLS] is at position 0",
        "        return self.classifier(self.pooler(h[:, 0]))  # two linear maps in a row", why="no tanh"),
        (NSP_HEAD,)),
    # the two training runs, each with the bug that defeats it (about a minute each on one core)
    "pretrain_mlm predicts the corrupted inputs, not the original ids": ("pretrain_mlm", Edit(
        "        loss = mlm_loss(model.head(h[selected]), labels[selected])",
        "        loss = mlm_loss(model.head(h[selected]), inputs[selected])", why="learns to copy [MASK]"),
        (PRETRAIN,)),
    "fine_tune ignores bert_state (always from scratch)": ("fine_tune", Edit(
        "    if bert_state is not None:\n"
        "        model.bert.load_state_dict({name: torch.as_tensor(value) for name, value in bert_state.items()})\n",
        "", why="the pretrained encoder never used"),
        (FT_STEPS,)),  # and FINE_TUNE's threshold (LMCOURSE_ALL_TRAINING=1 runs it)
    # training configuration a threshold cannot see (issue #40, class 9)
    "pretrain_mlm runs the encoder without the padding mask": ("pretrain_mlm", Edit(
        "        h = model.bert(inputs, attention_mask=(ids != PAD_ID).to(device))  # (B, T, d_model)\n",
        "        h = model.bert(inputs)  # (B, T, d_model): padding attended to\n", why="padding is data"),
        (PRE_STEPS,)),
    "pretrain_mlm with Adam's L2 weight decay, not AdamW": ("pretrain_mlm", Edit(
        "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)\n",
        "    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=0.01)\n",
        why="decay through the gradient"),
        (PRE_STEPS,)),
    "fine_tune trains the encoder and the head at one rate": ("fine_tune", Edit(
        "    optimizer = torch.optim.AdamW([{\"params\": model.bert.parameters(), \"lr\": lr},\n"
        "                                   {\"params\": model.head.parameters(), \"lr\": head_lr}], weight_decay=0.01)\n",
        "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)\n", why="head_lr ignored"),
        (FT_STEPS,)),
    "fine_tune freezes the pretrained encoder": ("fine_tune", Edit(
        "    model.to(device)\n", "    model.bert.requires_grad_(False)  # only the head learns\n    model.to(device)\n",
        why="a linear probe, not fine-tuning"),
        (FT_STEPS,)),
    "pretrain_mlm without gradient clipping": ("pretrain_mlm", Edit(
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "", why="unclipped"),
        (PRE_STEPS,)),
    "fine_tune without gradient clipping": ("fine_tune", Edit(
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "", why="unclipped"),
        (FT_STEPS,)),
    "fine_tune without the warm-up": ("fine_tune", Edit(
        "lambda s: min(1.0, (s + 1) / warmup) * (1 - s / steps))\n    y = ",
        "lambda s: 1 - s / steps)\n    y = ", why="decay only"),
        (FT_STEPS,)),
    # train/eval mode (issue #40, class 3)
    "pretrain_mlm returns the model in training mode": ("pretrain_mlm", Edit(
        "    return model.cpu().eval()", "    return model.cpu()", why="the instructions ask for eval mode"),
        (PRE_STEPS,)),
    "fine_tune returns the model in training mode": ("fine_tune", Edit(
        "    return model.cpu().eval()", "    return model.cpu()", why="the instructions ask for eval mode"),
        (FT_STEPS,)),
    # the device (issue #40, class 1): right on a laptop, an error on a GPU
    "mask_tokens makes its special ids on the CPU": ("mask_tokens", Edit(
        "torch.as_tensor(list(special_ids), dtype=ids.dtype, device=ids.device)",
        "torch.as_tensor(list(special_ids), dtype=ids.dtype)", why="isin(ids on the GPU, specials on the CPU)"),
        (MASK_STRUCTURE,)),
    "mask_tokens draws with a CPU generator on the ids' device": ("mask_tokens", Edit(
        "    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device) & selectable\n",
        "    selected = torch.rand(ids.shape, generator=generator, device=ids.device) < p\n"
        "    selected = selected & selectable\n", why="a CPU generator cannot draw on a GPU"),
        (MASK_STRUCTURE,)),
    "mask_tokens leaves its draws on the CPU": ("mask_tokens", Edit(
        _RAND, "    outcome = torch.rand(ids.shape, generator=generator)  # one draw decides mask / random / keep\n",
        why="compared with the selection on the GPU"),
        (MASK_STRUCTURE,)),
}

# Checks a mistake's signature leaves out unless the mistake is written to fail them: the training runs,
# and the check that loads MiniLM's real weights (too slow to run for every mistake).
LEAVE_OUT: tuple[str, ...] = (PRETRAIN, FINE_TUNE, MINILM)

# What a student reads when their failing checks match the mistake: advice, never code.
HINTS: dict[str, str] = {
    "WordPiece continuations looked up without '##'":
        "Check how you look up a piece that does not start the word: the vocabulary stores continuations with "
        "the ## prefix, so the same letters are a different piece inside a word than at its start.",
    "WordPiece shortest match first":
        "Check which piece you take at each position: WordPiece is greedy, longest match first, so from each "
        "starting point it keeps the longest piece in the vocabulary, not the first one that fits.",
    "WordPiece: only the part that cannot be cut becomes [UNK]":
        "Check what happens when no piece fits partway through a word: WordPiece then gives up on the whole "
        "word, which becomes a single unknown token, and the pieces already found are discarded.",
    "WordPiece without the 100-character limit":
        "Check how you treat very long words: past the tokenizer's maximum number of characters per word, a word "
        "is not cut into pieces at all but becomes a single unknown token.",
    "mask_tokens selects special positions":
        "Check which positions can be selected: the CLS, SEP and padding positions are never masked, predicted "
        "or labelled, so the selection must leave them out.",
    "mask_tokens applies 80/10/10 to every position, not only the selected":
        "Check which positions your corruption touches: the mask token and the random replacements go only to "
        "the positions selected for prediction, and every other position must reach the model as it was.",
    "mask_tokens labels every position":
        "Check your labels: only the selected positions carry their original id as a target, and every other "
        "position is marked to be ignored by the loss, since the model sees those tokens in its input.",
    "mask_tokens draws random replacements from the whole vocabulary, specials included":
        "Check where your random replacements come from: they are drawn uniformly from the ordinary vocabulary "
        "only, so a special token such as the padding or CLS token never appears as a random replacement.",
    "mask_tokens: 2% random replacements (TensorFlow's collator)":
        "Check the shares among the selected positions: 80 percent become the mask token, 10 percent a random "
        "token and 10 percent stay unchanged, each share a fraction of all selected positions, not of those left "
        "over.",
    "mask_tokens: 80% [MASK], 20% random, none unchanged":
        "Check whether any selected positions keep their own token: BERT leaves one in ten as it was, so the "
        "model cannot assume that every visible token is right and must learn a useful representation for each.",
    "mask_tokens draws one selection pattern for the whole batch":
        "Check the shape of your random draw for the selection: every position of every row needs a number of "
        "its own, or all the rows of a batch are masked at the same places.",
    "mask_tokens corrupts ids in place (no copy)":
        "Check whether the tensor you return is a copy: writing the masks into the ids you were given corrupts the "
        "caller's batch, and a batch masked twice loses its labels.",
    "mask_tokens ignores the generator it is given":
        "Check that every random draw in your masking uses the generator passed in, not PyTorch's global one: "
        "the same generator state must give the same masking, which is what makes an experiment reproducible.",
    "tanh-approximate GELU":
        "Check which GELU your feed-forward uses: BERT's is the exact one, defined with the error function, and "
        "the tanh approximation, GPT-2's choice, differs enough to fail a comparison with the same weights.",
    "LayerNorm with PyTorch's default eps (1e-5)":
        "Check the epsilon of every LayerNorm, the one after the embeddings included: BERT's configuration sets "
        "a far smaller value than PyTorch's default, and with real weights the difference shows in the hidden "
        "states.",
    "pre-norm layer instead of BERT's post-norm":
        "Check where each LayerNorm sits in your layer: BERT is post-norm, normalising the sum of a sublayer's "
        "input and output, whereas pre-norm, GPT-2's order, normalises only the sublayer's input.",
    "padding not masked in attention":
        "Check that the attention mask reaches every layer: without it the real tokens attend to the padding "
        "positions too, and their states change with how much a batch happens to be padded.",
    "no segment embeddings":
        "Check what your embedding adds up: BERT sums token, position and segment embeddings before its "
        "LayerNorm, and without the segment term the model cannot tell the first sentence of a pair from the "
        "second.",
    "no position embeddings":
        "Check that word order reaches the model: attention by itself ignores order, so without the learned "
        "position embeddings in the sum BERT sees each sentence as a bag of tokens.",
    "mean_pool averages the padding too":
        "Check what your average covers: a sentence embedding is the mean over its real tokens only, weighted by "
        "the attention mask, so padding counts neither in the sum nor in the number you divide by.",
    "MLM decoder with a matrix of its own (not tied)":
        "Check the output layer of your MLM head: BERT ties it to the token embedding matrix and keeps only a "
        "bias of its own, so the head reuses those weights rather than adding a second vocabulary-sized matrix.",
    "mlm_loss averaged over every position":
        "Check what your loss divides by: the mean cross-entropy is over the selected positions only, and "
        "counting the ignored positions too shrinks the loss by the ratio of all positions to selected ones.",
    "classifier on the mean of the tokens, not [CLS]":
        "Check which hidden state your classifier reads: BERT's head takes the final state of the CLS token at "
        "position 0, which fine-tuning shapes to stand for the whole input, not an average over the tokens.",
    "nsp_pairs may draw a or its true successor as NotNext":
        "Check which sentences a NotNext pair may take: never the one that really follows, or the pair is labelled "
        "NotNext while it is IsNext, and never the first sentence itself. Draw from the other n minus 2.",
    "nsp_pairs tosses one coin for every pair of the call":
        "Check how many coins you toss: each pair decides IsNext or NotNext on its own, so that a batch mixes the "
        "two in every proportion, not all of one kind.",
    "nsp_pairs labels IsNext 1, not 0":
        "Check the meaning of the labels: as in Hugging Face's BertForPreTraining, 0 means the second sentence "
        "continues the first, and 1 means it was drawn from elsewhere.",
    "pack_pair puts the final [SEP] in segment 0":
        "Check the segment id of the last [SEP]: it closes B, so it belongs to segment 1, as everything after the "
        "first [SEP] does.",
    "pack_pair truncates b alone":
        "Check which segment loses tokens when a pair is too long: the longer one, one token at a time, so the two "
        "halves stay balanced. Cutting only B can leave a question without its context.",
    "pack_pair truncates a when the two are as long":
        "Check what happens when A and B are equally long and one token must go: BERT's truncation takes it from "
        "B in that case.",
    "NSPHead without the pooler's tanh":
        "Check the pooler: a dense layer followed by tanh. Without the non-linearity the pooler and the classifier "
        "collapse into one linear map.",
    "pretrain_mlm predicts the corrupted inputs, not the original ids":
        "Check the targets of your pretraining loss: the model must predict the original ids at the selected "
        "positions, not the corrupted inputs it reads, or it merely learns to copy the mask token.",
    "fine_tune ignores bert_state (always from scratch)":
        "Check that fine-tuning starts from the pretrained encoder it is given: if those weights never reach the "
        "classifier's encoder, the run trains from scratch and loses all that pretraining learned.",
    "pretrain_mlm runs the encoder without the padding mask":
        "Check what the encoder is given during pretraining: without the attention mask every token attends to the "
        "padding, so a line's states depend on how long the longest line in its batch was.",
    "pretrain_mlm with Adam's L2 weight decay, not AdamW":
        "Check which optimiser applies the weight decay: Adam adds it to the gradient, where its scaling shrinks "
        "it, while AdamW shrinks the weights directly, as BERT's recipe does.",
    "fine_tune trains the encoder and the head at one rate":
        "Check the learning rates of fine-tuning: the new head starts from random weights and needs the larger "
        "head_lr, while the pretrained encoder under it moves gently at lr. Two parameter groups.",
    "fine_tune freezes the pretrained encoder":
        "Check which parameters fine-tuning trains: every one, the pretrained encoder included. Training only the "
        "head is a linear probe, a different experiment.",
    "pretrain_mlm without gradient clipping":
        "Check what happens between backward and the optimiser step: the instructions clip the global gradient "
        "norm to 1, which keeps one unlucky batch from throwing the weights far.",
    "fine_tune without gradient clipping":
        "Check what happens between backward and the optimiser step in fine-tuning too: the global gradient norm "
        "is clipped to 1, so a large early gradient from the new head cannot wreck the pretrained encoder.",
    "fine_tune without the warm-up":
        "Check the learning rate of the first steps: the schedule warms up linearly over warmup steps before it "
        "decays, so the new head's first large gradients do not wreck the pretrained encoder.",
    "pretrain_mlm returns the model in training mode":
        "Check the mode of the model pretrain_mlm hands back: a trained model is used in eval mode, and the "
        "specification asks you to switch it before returning it.",
    "fine_tune returns the model in training mode":
        "Check the mode of the classifier fine_tune hands back: it is evaluated next, and the specification asks "
        "for eval mode, switched before returning it.",
    "mask_tokens makes its special ids on the CPU":
        "Check where the tensor of special ids you compare with is made: a new tensor lands on the CPU unless you "
        "ask for the device of the ids, and on a GPU the comparison then fails.",
    "mask_tokens draws with a CPU generator on the ids' device":
        "Check where your random draws happen: the generator you are given lives on the CPU and can only draw "
        "there, so draw on the CPU and then move the draws to the device of the ids.",
    "mask_tokens leaves its draws on the CPU":
        "Check that every random draw is moved to the device of the ids before it meets them: draws made on the "
        "CPU cannot be combined with ids on a GPU.",
}
