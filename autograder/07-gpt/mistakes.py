"""Known mistakes of 07-gpt: the wrong implementations students really write, each with the checks
proven to catch it and a hint for the student.

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one, and proves that its grade is
attributed to it), and HINTS holds the advice a student reads when their failures match it. It lives beside
the hidden checks, out of the student worker's sight and out of the student edition.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit


# The checks' names, as the student sees them.
SPLIT = ("split_special_tokens: texts cut at their special tokens (the longer of two that match at one place), "
         "nothing lost or empty")
MERGES = ("train_bpe: merges equal the reference's on hidden texts (ties, overlapping pairs, several scripts, "
          "Shakespeare, too few pairs, empty)")
MERGES_SPECIALS = ("train_bpe with special tokens: none is counted or merged across, and each takes one place in "
                   "vocab_size")
SPEED = ("train_bpe: all of Shakespeare to a 1,000-token vocabulary within the time budget, merges equal to the "
         "reference's")
ENCODE = ("encode: the ids equal tiktoken's with the same 500 merges learned from Shakespeare (lines of "
          "Shakespeare, code, numbers, whitespace, other scripts, emoji, random text)")
ENCODE_SPECIALS = ("encode with special tokens: each is one id after the merges (the longer of two that match at one "
                   "place), the text around it encoded as usual")
DECODE = ("decode: the bytes of all the tokens joined, then decoded; every text comes back exactly, and a cut "
          "character is U+FFFD")
GPT2_MERGES = "gpt2_merges: GPT-2's vocab.bpe read into 50,000 merges in the course's numbering"
GPT2_IDS = ("encode with GPT-2's merges: GPT-2's own ids on varied text (code, numbers, whitespace runs, other "
            "scripts, emoji, contractions, <|endoftext|>)")

ATTENTION = ("CausalSelfAttention: outputs and gradients match the reference with the same weights (causal mask, "
             "heads, scaling; float32 and float64)")
ATTENTION_DEVICE = "CausalSelfAttention runs where its input is (the mask made on the input's device)"
BLOCK = "Block: outputs and gradients match the reference with the same weights (pre-norm, GELU feed-forward; float32 and float64)"
GPT_MODEL = ("GPT: logits and gradients match the reference with the same weights (position embeddings, tied output "
             "layer; float32, float64, another device)")
PARAMS = ("count_parameters: GPT-2's four sizes and small models, equal to the number of parameters your GPT has (the "
          "tied matrix counted once)")
TOP_K = ("top_k_filter: exactly the k largest logits of each row kept, unchanged, the rest -inf; it runs where the "
         "logits are")
TOP_P = ("top_p_filter: the smallest set of most probable tokens holding at least p (the crossing token kept), "
         "unchanged, the rest -inf")
SAMPLE = ("sample_next: on 20,000 rows, each draw follows the filtered softmax (chi-square), rows independent, the "
          "generator decides; greedy at temperature 0")
KV = ("GPT with a KVCache: a prompt, then single tokens, then chunks give the logits of the full forward; a ValueError "
      "past block_size")
TRAINING_STEPS = ("train_gpt, step by step: the warm-up + cosine learning rate of every step, every gradient clipped "
                  "to clip, the batches of the seeded generator, one AdamW (betas, weight decay) updating the weights, "
                  "the model returned in eval mode")
TRAINING = ("train_gpt: a GPT trained on TinyShakespeare's characters reaches the validation loss threshold (computed "
            "by the grader)")
GENERATE = ("generate: greedy tokens equal the reference's with the same weights, with the cache and without it "
            "(cropped to the newest block_size tokens); it runs where the prompt is")

# The straightforward trainer the instructions endorse: recount every pair of the distinct pre-tokens after
# each merge. A correct alternate (it must pass the speed check), and the base of the tie and counting variants.
STRAIGHTFORWARD_TRAINER = '''
def train_bpe(text, vocab_size, special_tokens=()):
    specials = set(special_tokens)
    counts = Counter()
    for piece in split_special_tokens(text, special_tokens):
        if piece not in specials:
            counts.update(pretokenize(piece))
    words = {tuple(word.encode("utf-8")): n for word, n in counts.items()}
    bytes_of = [bytes([b]) for b in range(256)]
    merges = []
    for _ in range(vocab_size - 256 - len(special_tokens)):
        pairs = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        a, b = max(pairs, key=lambda p: (pairs[p], bytes_of[p[0]], bytes_of[p[1]]))
        new = len(bytes_of)
        merges.append((a, b))
        bytes_of.append(bytes_of[a] + bytes_of[b])
        merged_words = {}
        for word, n in words.items():
            out, j = [], 0
            while j < len(word):
                if j + 1 < len(word) and word[j] == a and word[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(word[j])
                    j += 1
            merged_words[tuple(out)] = merged_words.get(tuple(out), 0) + n
        words = merged_words
    return merges
'''.lstrip("\n")

# An encoder driven by a priority queue of pair ranks over a linked list of tokens (the fast way).
HEAP_ENCODER = '''
def encode(text, merges, special_tokens=()):
    import heapq

    rank = {(int(a), int(b)): i for i, (a, b) in enumerate(merges)}
    special_id = {s: 256 + len(merges) + j for j, s in enumerate(special_tokens)}
    ids = []
    for piece in split_special_tokens(text, special_tokens):
        if piece in special_id:
            ids.append(special_id[piece])
            continue
        for word in pretokenize(piece):
            tokens = list(word.encode("utf-8"))
            n = len(tokens)
            nxt, prv, alive = list(range(1, n)) + [-1], [-1] + list(range(n - 1)), [True] * n
            heap = [(rank[(tokens[i], tokens[i + 1])], i) for i in range(n - 1) if (tokens[i], tokens[i + 1]) in rank]
            heapq.heapify(heap)
            while heap:
                r, i = heapq.heappop(heap)
                j = nxt[i] if alive[i] else -1
                if j == -1 or rank.get((tokens[i], tokens[j])) != r:
                    continue  # stale: this pair changed since it was queued
                tokens[i], alive[j], nxt[i] = 256 + r, False, nxt[j]
                if nxt[j] != -1:
                    prv[nxt[j]] = i
                for p in (prv[i], i):
                    if p != -1 and nxt[p] != -1 and (tokens[p], tokens[nxt[p]]) in rank:
                        heapq.heappush(heap, (rank[(tokens[p], tokens[nxt[p]])], p))
            ids.extend(t for t, keep in zip(tokens, alive) if keep)
    return ids
'''.lstrip("\n")

# Special tokens found by scanning the text, the longest first at each position.
SCANNING_SPLIT = '''
def split_special_tokens(text, special_tokens):
    longest_first = sorted(special_tokens, key=len, reverse=True)
    pieces, start, i = [], 0, 0
    while i < len(text):
        match = next((s for s in longest_first if s and text.startswith(s, i)), None)
        if match is None:
            i += 1
            continue
        if i > start:
            pieces.append(text[start:i])
        pieces.append(match)
        i = start = i + len(match)
    if start < len(text):
        pieces.append(text[start:])
    return pieces
'''.lstrip("\n")


def _trainer(old: str, new: str) -> str:
    """The straightforward trainer with one fragment changed (which must occur exactly once)."""
    assert STRAIGHTFORWARD_TRAINER.count(old) == 1, old
    return STRAIGHTFORWARD_TRAINER.replace(old, new)


_CHOICE = "        a, b = max(pairs, key=lambda p: (pairs[p], bytes_of[p[0]], bytes_of[p[1]]))\n"
_COUNT = ("            for pair in zip(word, word[1:]):\n"
          "                pairs[pair] += n\n")
_RANKED = "                pair = min(zip(tokens, tokens[1:]), key=lambda p: rank.get(p, len(rank)))\n"

# name -> (function replaced, the wrong version: Edit(s) of the solution's own definition, or a whole
# definition; checks that must score 0)
VARIANTS: dict[str, tuple[str, str | Edit | list[Edit], tuple[str, ...]]] = {
    "BPE pairs counted without overlaps ('aaa' holds (a, a) once)": ("train_bpe", _trainer(
        _COUNT,
        "            j = 0\n"
        "            while j + 1 < len(word):\n"
        "                pairs[(word[j], word[j + 1])] += n\n"
        "                j += 2 if word[j] == word[j + 1] else 1  # a repeated pair is not counted again\n"),
        (MERGES,)),
    "BPE without pre-tokenization (merges across words)": ("train_bpe", _trainer(
        "            counts.update(pretokenize(piece))\n", "            counts[piece] += 1\n"),
        (MERGES,)),
    "BPE ties to the pair seen first": ("train_bpe", _trainer(
        _CHOICE, "        a, b = max(pairs, key=lambda p: pairs[p])  # the first of the most frequent\n"),
        (MERGES,)),
    "BPE ties to the smallest pair of byte strings": ("train_bpe", _trainer(
        _CHOICE, "        a, b = min(pairs, key=lambda p: (-pairs[p], bytes_of[p[0]], bytes_of[p[1]]))\n"),
        (MERGES,)),
    "BPE ties to the smallest pair of ids": ("train_bpe", _trainer(
        _CHOICE, "        a, b = min(pairs, key=lambda p: (-pairs[p], p))\n"),
        (MERGES,)),
    "BPE learns one merge too few": ("train_bpe", _trainer(
        "    for _ in range(vocab_size - 256 - len(special_tokens)):\n",
        "    for _ in range(vocab_size - 257 - len(special_tokens)):\n"),
        (MERGES,)),
    "BPE counts the special tokens as text": ("train_bpe", Edit(
        "        if piece not in specials:\n            counts.update(pretokenize(piece))\n",
        "        counts.update(pretokenize(piece))\n", why="special tokens pre-tokenized like text"),
        (MERGES_SPECIALS,)),
    "BPE leaves the special tokens out of vocab_size": ("train_bpe", Edit(
        "    n_merges = vocab_size - 256 - len(special_tokens)\n", "    n_merges = vocab_size - 256\n",
        why="one merge more per special token"),
        (MERGES_SPECIALS,)),
    "special tokens matched in the order given, not longest first": ("split_special_tokens", Edit(
        "sorted(special_tokens, key=len, reverse=True)", "special_tokens", why="'<|endoftext|>' wins over its double"),
        (SPLIT, ENCODE_SPECIALS)),
    "encode merges the most frequent pair of the word first": ("encode", Edit(
        _RANKED,
        "                present = list(zip(tokens, tokens[1:]))\n"
        "                pair = max(present, key=lambda p: (p in rank, present.count(p)))  # the most frequent merge\n",
        why="frequency in the word instead of the order learned"),
        (ENCODE, GPT2_IDS)),
    "encode merges across pre-tokens": ("encode", Edit(
        "        for word in pretokenize(piece):\n", "        for word in [piece]:\n", why="the whole piece at once"),
        (ENCODE, GPT2_IDS)),
    "encode treats special tokens as text": ("encode", Edit(
        "        if piece in special_id:\n", "        if False:\n", why="the special token's bytes merged"),
        (ENCODE_SPECIALS, GPT2_IDS)),
    "decode token by token": ("decode", Edit(
        '    return b"".join(bytes_of[i] for i in ids).decode("utf-8", errors="replace")',
        '    return "".join(bytes_of[i].decode("utf-8", errors="replace") for i in ids)',
        why="a character cut between tokens breaks"),
        (DECODE,)),
    "decode without errors='replace'": ("decode", Edit(
        '.decode("utf-8", errors="replace")', '.decode("utf-8")', why="a cut character raises"),
        (DECODE,)),
    "GPT-2's merge lines that start with '#' dropped": ("gpt2_merges", [
        Edit('    for line in vocab_bpe.split("\\n")[1:]:', '    for line in vocab_bpe.split("\\n"):',
             why="the header too"),
        Edit("        if not line:\n", "        if not line or line.startswith(\"#\"):  # comments\n",
             why="every '#' line taken for a comment")],
        (GPT2_MERGES,)),
    # Part 3: the GPT
    "causal mask one position too far (a position sees the next)": ("CausalSelfAttention", Edit(
        ".tril(diagonal=T_all - T)", ".tril(diagonal=T_all - T + 1)", why="the diagonal shifted"),
        (ATTENTION, GPT_MODEL, KV)),
    "causal mask without the cache's offset": ("CausalSelfAttention", Edit(
        ".tril(diagonal=T_all - T)", ".tril()", why="right without a cache, wrong with one"),
        (KV,)),
    "causal mask made on the CPU": ("CausalSelfAttention", Edit(
        "torch.ones(T, T_all, dtype=torch.bool, device=x.device)", "torch.ones(T, T_all, dtype=torch.bool)",
        why="no device"),
        (ATTENTION_DEVICE,)),
    "attention scores not scaled by sqrt(d_head)": ("CausalSelfAttention", Edit(
        " / math.sqrt(self.d_head)  # (B, n_heads, T, T_all)", "  # (B, n_heads, T, T_all)", why="unscaled"),
        (ATTENTION,)),
    "heads split by view without the transpose": ("CausalSelfAttention", Edit(
        "return t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)", "return t.view(B, self.n_heads, T, self.d_head)",
        why="features of several positions in one head"),
        (ATTENTION,)),
    "GPT block post-norm": ("Block", Edit(
        "        x = x + self.attn(self.ln1(x), cache, layer)\n        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))",
        "        x = self.ln1(x + self.attn(x, cache, layer))\n        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))",
        why="the 2017 arrangement"),
        (BLOCK, GPT_MODEL)),
    "GPT without position embeddings": ("GPT", Edit(
        "        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, d_model)",
        "        x = self.tok_emb(idx)  # (B, T, d_model)", why="a bag of tokens"),
        (GPT_MODEL, KV)),
    "GPT's output layer not tied to the token embeddings": ("GPT", Edit(
        "        self.lm_head.weight = self.tok_emb.weight  # tied: one (vocab_size, d_model) matrix reads and writes tokens\n",
        "", why="a second (vocab_size, d_model) matrix"),
        (GPT_MODEL, PARAMS)),
    "GPT positions restart at 0 under the cache": ("GPT", Edit(
        "        start = 0 if cache is None else cache.length  # positions already in the cache\n",
        "        start = 0\n", why="every step at position 0"),
        (KV,)),
    "count_parameters counts the tied matrix twice": ("count_parameters", Edit(
        "    embeddings = vocab_size * d_model + block_size * d_model\n",
        "    embeddings = 2 * vocab_size * d_model + block_size * d_model\n", why="lm_head counted"),
        (PARAMS,)),
    # Part 4: decoding
    "top-p drops the token that crosses p": ("top_p_filter", Edit(
        "    drop = above >= p  # p was reached before this token: not needed\n",
        "    drop = probs.cumsum(dim=-1) > p  # past p with this token\n", why="cumsum > p (a widespread bug)"),
        (TOP_P, SAMPLE)),
    "top-p keeps one token too many": ("top_p_filter", Edit(
        "    drop = above >= p  # p was reached before this token: not needed\n",
        "    drop = (above - probs.roll(1, dims=-1)) >= p  # shifted twice\n", why="the next token kept as well"),
        (TOP_P,)),
    "top-p without sorting": ("top_p_filter", Edit(
        "    sorted_logits, order = logits.sort(dim=-1, descending=True)\n",
        "    sorted_logits, order = logits, torch.arange(logits.shape[-1]).expand_as(logits)\n",
        why="cumulative sums in vocabulary order"),
        (TOP_P, SAMPLE)),
    "top-k keeps k + 1": ("top_k_filter", Edit(
        "torch.topk(logits, k, dim=-1).values[..., -1:]", "torch.topk(logits, min(k + 1, logits.shape[-1]), dim=-1).values[..., -1:]",
        why="off by one"),
        (TOP_K,)),
    "temperature applied after the filters": ("sample_next", [
        Edit("    logits = logits / temperature\n", "", why="not before"),
        Edit("    probs = logits.softmax(dim=-1)  # (B, V)\n", "    probs = (logits / temperature).softmax(dim=-1)  # (B, V)\n",
             why="after")],
        (SAMPLE,)),
    "sample_next shares one random number across the batch": ("sample_next", Edit(
        "    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)",
        "    u = torch.rand(1, generator=generator)  # one draw for every row\n"
        "    return (probs.cumsum(dim=-1) < u).sum(dim=-1).clamp(max=probs.shape[-1] - 1)",
        why="inverse CDF with a shared uniform"),
        (SAMPLE,)),
    "sample_next ignores its generator": ("sample_next", Edit(
        "torch.multinomial(probs, 1, generator=generator)", "torch.multinomial(probs, 1)", why="the global generator"),
        (SAMPLE,)),
    "generate feeds the whole sequence to the cache at every step": ("generate", Edit(
        "        step_input = next_id[:, None]\n", "        step_input = idx\n", why="every position cached again"),
        (GENERATE,)),
    "generate without the cache does not crop to block_size": ("generate", Edit(
        "            logits = model(idx[:, -model.block_size:])", "            logits = model(idx)", why="no crop"),
        (GENERATE,)),
    # the device (issue #40, class 1): right on a laptop, an error on a GPU
    "top_k_filter fills with a tensor of -inf made on the CPU": ("top_k_filter", Edit(
        'return logits.masked_fill(logits < kth, float("-inf"))',
        'return torch.where(logits < kth, torch.full(logits.shape, float("-inf")), logits)',
        why="torch.full without a device"),
        (TOP_K,)),
    "generate appends each new token on the CPU": ("generate", Edit(
        "        idx = torch.cat([idx, next_id[:, None]], dim=1)",
        "        idx = torch.cat([idx.cpu(), next_id[:, None].cpu()], dim=1)  # (to print as it goes)",
        why="the sequence leaves the model's device"),
        (GENERATE,)),
    # Part 5: training
    "train_gpt learns to repeat its input (targets not shifted)": ("train_gpt", Edit(
        "            loss = F.cross_entropy(logits.reshape(-1, vocab_size).float(), y.reshape(-1))",
        "            loss = F.cross_entropy(logits.reshape(-1, vocab_size).float(), x.reshape(-1))",
        why="the input as its own target"),
        (TRAINING,)),
    "train_gpt never zeroes the gradients": ("train_gpt", Edit(
        "        optimizer.zero_grad(set_to_none=True)\n", "", why="gradients pile up"),
        (TRAINING,)),
    "train_gpt without the warm-up (cosine from the first step)": ("train_gpt", Edit(
        "        if step < warmup:\n", "        if step < 0:\n", why="no warm-up"),
        (TRAINING_STEPS,)),
    "train_gpt never clips the gradients": ("train_gpt", Edit(
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n", "", why="no clipping"),
        (TRAINING_STEPS,)),
    # the optimiser (issue #40, class 2): the loss threshold cannot see it
    "train_gpt with Adam's L2 weight decay, not AdamW's": ("train_gpt", Edit(
        "torch.optim.AdamW(model.parameters(),", "torch.optim.Adam(model.parameters(),",
        why="the decay is added to the gradient and rescaled by Adam, not applied to the weights"),
        (TRAINING_STEPS,)),
    "train_gpt with AdamW's default betas": ("train_gpt", Edit(
        "lr=lr, betas=(0.9, 0.99), weight_decay", "lr=lr, weight_decay", why="beta2 0.999, not 0.99"),
        (TRAINING_STEPS,)),
    "train_gpt ignores its weight_decay argument": ("train_gpt", Edit(
        ", weight_decay=weight_decay)", ")", why="AdamW's default decay, 0.01"),
        (TRAINING_STEPS,)),
    # the configuration a threshold cannot see (issue #40, class 9)
    "train_gpt draws its batches from torch's global generator": ("train_gpt", Edit(
        "get_batch(train_ids, batch_size, block_size, generator)", "get_batch(train_ids, batch_size, block_size)",
        why="windows all the same, but not the run the seed fixes"),
        (TRAINING_STEPS,)),
    # cropping past the context, on a greedy chain that keeps moving (issue #40, class 8)
    "generate crops to the oldest block_size tokens": ("generate", Edit(
        "            logits = model(idx[:, -model.block_size:])", "            logits = model(idx[:, :model.block_size])",
        why="past the context the model keeps reading the prompt's start, never the newest tokens"),
        (GENERATE,)),
    # train/eval mode (issue #40, class 3)
    "train_gpt returns the model in training mode": ("train_gpt", Edit(
        "    return model.eval()", "    return model", why="the instructions ask for eval mode"),
        (TRAINING_STEPS,)),
    "train_gpt's schedule one step late": ("train_gpt", Edit(
        "            rate = lr * (step + 1) / warmup", "            rate = lr * step / warmup", why="starts at 0"),
        (TRAINING_STEPS,)),
}

# Checks a mistake's grade leaves out unless the mistake is written to fail them: the training run, the
# checks that run at full scale (all of Shakespeare; GPT-2's 50,000 merges, read and used) and the device
# check (a second module on another device): 1-2 s each on one core, for each of 39 mistakes.
LEAVE_OUT: tuple[str, ...] = (TRAINING, SPEED, GPT2_MERGES, GPT2_IDS, ATTENTION_DEVICE)

# What a student whose failing checks match the mistake reads: advice, never code.
HINTS: dict[str, str] = {
    "BPE pairs counted without overlaps ('aaa' holds (a, a) once)":
        "Check how you count pairs in a run of one symbol: three a's in a row hold the pair a, a twice, "
        "once at each adjacent position.",
    "BPE without pre-tokenization (merges across words)":
        "Check that the text is split into pre-tokens before counting: BPE never merges across the boundary "
        "between two pre-tokens.",
    "BPE ties to the pair seen first":
        "Check how you choose between pairs with the same count: the assignment breaks ties by the pair's "
        "bytes, not by which pair appeared first.",
    "BPE ties to the smallest pair of byte strings":
        "Check the direction of your tie-break: among equally frequent pairs, the assignment takes the "
        "greatest pair of byte strings.",
    "BPE ties to the smallest pair of ids":
        "Check what your tie-break compares: the byte strings the two tokens stand for, not their ids.",
    "BPE learns one merge too few":
        "Count your merges: the vocabulary size includes the 256 bytes and the special tokens, and every "
        "other place is one merge.",
    "BPE counts the special tokens as text":
        "Check what happens to special tokens during training: the text is cut at them first, and they are "
        "never counted or merged.",
    "BPE leaves the special tokens out of vocab_size":
        "Check how many merges you learn: each special token takes one place in the vocabulary size too.",
    "special tokens matched in the order given, not longest first":
        "Check which special token wins when two match at one place: the longer one.",
    "encode merges the most frequent pair of the word first":
        "Check the order in which encode applies merges: always the pair learned earliest, by its rank, not "
        "the most frequent pair in the word.",
    "encode merges across pre-tokens":
        "Check that encode merges inside each pre-token separately, as training did.",
    "encode treats special tokens as text":
        "Check that a special token in the text becomes its one id, untouched by the merges.",
    "decode token by token":
        "Check how decode joins tokens: concatenate the bytes of all the tokens first, then decode once, since "
        "one character may be split across tokens.",
    "decode without errors='replace'":
        "Check what decode does with bytes that are not valid UTF-8: it must not raise. Replace what cannot "
        "be decoded.",
    "GPT-2's merge lines that start with '#' dropped":
        "Check which lines of vocab.bpe you skip: only the version header. Some real merges start with the "
        "hash character.",
    "causal mask one position too far (a position sees the next)":
        "Check the entry just above the diagonal of your causal mask: a position may see itself and earlier "
        "positions, never the next one.",
    "causal mask without the cache's offset":
        "Check your mask when a cache holds earlier positions: the new queries sit after them, so the mask must "
        "be shifted by the cache's length.",
    "causal mask made on the CPU":
        "Check the device of your mask: make it where the input is, or attention fails on a GPU.",
    "attention scores not scaled by sqrt(d_head)":
        "Check the scale of your attention scores: divide by the square root of the head's width.",
    "heads split by view without the transpose":
        "Check how you split the heads: reshape the features into heads, then move the head axis in front of "
        "the time axis.",
    "GPT block post-norm":
        "Check where the LayerNorms sit: GPT-2's block normalises the input of each sublayer, pre-norm, and "
        "adds to the unnormalised stream.",
    "GPT without position embeddings":
        "Check that positions reach the model: add a learned position embedding to each token's embedding.",
    "GPT's output layer not tied to the token embeddings":
        "Check the output layer: GPT-2 reuses the token embedding matrix to produce the logits, tied, rather "
        "than a matrix of its own.",
    "GPT positions restart at 0 under the cache":
        "Check the positions of new tokens when a cache is in use: they continue after the cached ones.",
    "count_parameters counts the tied matrix twice":
        "Check how you count a matrix that is shared: tied weights are one set of parameters, counted once.",
    "top-p drops the token that crosses p":
        "Check the token at which the cumulative probability first reaches p: it is kept, so that the kept "
        "set holds at least p.",
    "top-p keeps one token too many":
        "Check where your top-p set stops: at the first token whose cumulative probability reaches p, and no "
        "further.",
    "top-p without sorting":
        "Check the order of your cumulative sum: from the most probable token down, not in vocabulary order.",
    "top-k keeps k + 1":
        "Count the logits your top-k filter keeps: exactly k in each row.",
    "temperature applied after the filters":
        "Check the order in `sample_next`: apply the temperature to the logits first, then the filters.",
    "sample_next shares one random number across the batch":
        "Check that each row of the batch gets its own random draw: the rows must be independent.",
    "sample_next ignores its generator":
        "Check that your draws use the generator passed in, not PyTorch's global one, so a seed reproduces "
        "them.",
    "generate feeds the whole sequence to the cache at every step":
        "Check what you feed the model at each step with a cache: only the new token, since the cache already "
        "holds the earlier ones.",
    "generate without the cache does not crop to block_size":
        "Check the length of the context you feed without a cache: keep only the last block size tokens.",
    "top_k_filter fills with a tensor of -inf made on the CPU":
        "Check where the tensor of minus infinities you fill with is made: a new tensor lands on the CPU unless "
        "you ask for the device of the logits, and on a GPU the two cannot meet. Filling in place with a number "
        "avoids the question.",
    "generate appends each new token on the CPU":
        "Check where the sequence you grow lives: keep every new token on the device of the prompt, since the "
        "model on a GPU cannot read a sequence moved to the CPU.",
    "train_gpt learns to repeat its input (targets not shifted)":
        "Check your targets: each position predicts the next character, so the targets are the inputs moved "
        "one place along.",
    "train_gpt never zeroes the gradients":
        "Check that gradients are cleared at every step: otherwise each step adds onto all the earlier ones.",
    "train_gpt without the warm-up (cosine from the first step)":
        "Check the first steps of your schedule: the learning rate warms up linearly before the cosine decay "
        "begins.",
    "train_gpt never clips the gradients":
        "Check your training step against the specification: the global gradient norm is clipped before "
        "every optimiser step.",
    "train_gpt with Adam's L2 weight decay, not AdamW's":
        "Check which optimiser the specification names: with Adam, weight decay is added to the gradient and "
        "then rescaled with it, while AdamW shrinks the weights directly, as the training recipe expects.",
    "train_gpt with AdamW's default betas":
        "Check your optimiser's settings against the specification: its second beta is smaller than "
        "PyTorch's default, so old squared gradients are forgotten sooner.",
    "train_gpt ignores its weight_decay argument":
        "Check that your training function passes on every setting it is called with: the weight decay, too, "
        "is an argument, and the optimiser's own default is another value.",
    "train_gpt draws its batches from torch's global generator":
        "Check where your batches' random windows come from: the specification makes a generator of their own, "
        "seeded once, so that a run can be repeated batch for batch.",
    "generate crops to the oldest block_size tokens":
        "Check which tokens your model reads once the sequence is longer than its context: the newest ones, "
        "since the next token depends on what came just before it.",
    "train_gpt returns the model in training mode":
        "Check the mode of the model your training function hands back: a trained model is used in eval mode, "
        "and the specification asks you to switch it before returning it.",
    "train_gpt's schedule one step late":
        "Check the learning rate of the very first step: steps count from zero, yet the warm-up already gives "
        "that step a small positive rate and reaches the peak on its last step. A first rate of zero shifts the "
        "whole schedule one step late.",
}
