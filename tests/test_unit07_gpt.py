"""Unit 7 (07-gpt): the solution earns every point, the release none, and each known-wrong implementation
loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py); this file names the checks and
holds the known-wrong variants: the bugs students really write in a byte-level BPE tokenizer. Training:
pairs counted without overlaps ("aaa" holding (a, a) once; minbpe#51), no pre-tokenization (merges across
words), ties broken by first occurrence (minbpe, tiktoken's teaching trainer), by the smallest pair of byte
strings or by the smallest pair of ids, the last merge missing, special tokens counted as
text or left out of vocab_size, special tokens matched shorter first. Encoding: the most frequent pair of the
word merged first instead of the earliest-learned, merges across pre-tokens, special tokens encoded as text.
Decoding token by token (a character cut between tokens breaks), or without errors="replace". GPT-2's merge
file read with every line that starts with '#' dropped (8 real merges lost). The correct alternate (the
straightforward trainer that recounts every pair after each merge, an encoder driven by a priority queue, a
special-token scan written by hand) must earn full marks, the trainer within the speed check's budget.
"""

from __future__ import annotations

from lmcourse.grading import training
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

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
TOP_K = "top_k_filter: exactly the k largest logits of each row kept, unchanged, the rest -inf"
TOP_P = ("top_p_filter: the smallest set of most probable tokens holding at least p (the crossing token kept), "
         "unchanged, the rest -inf")
SAMPLE = ("sample_next: on 20,000 rows, each draw follows the filtered softmax (chi-square), rows independent, the "
          "generator decides; greedy at temperature 0")
KV = ("GPT with a KVCache: a prompt, then single tokens, then chunks give the logits of the full forward; a ValueError "
      "past block_size")
TRAINING_STEPS = ("train_gpt, step by step: the warm-up + cosine learning rate of every step, every gradient clipped "
                  "to clip, batches of windows of the stream")
TRAINING = ("train_gpt: a GPT trained on TinyShakespeare's characters reaches the validation loss threshold (computed "
            "by the grader)")
GENERATE = ("generate: greedy tokens equal the reference's with the same weights, with the cache and without it "
            "(cropped to the context)")

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
    "train_gpt's schedule one step late": ("train_gpt", Edit(
        "            rate = lr * (step + 1) / warmup", "            rate = lr * step / warmup", why="starts at 0"),
        (TRAINING_STEPS,)),
}

# name -> {function: definition or Edit(s)}: correct implementations that must earn full marks
ALTERNATES: dict[str, dict[str, str | Edit | list[Edit]]] = {
    "the straightforward trainer, a priority-queue encoder, a hand-written special-token scan": {
        "train_bpe": STRAIGHTFORWARD_TRAINER, "encode": HEAP_ENCODER, "split_special_tokens": SCANNING_SPLIT},
    "attention in einsum, inverse-CDF sampling with a uniform per row, top-p by searchsorted": {
        "CausalSelfAttention": Edit(
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, n_heads, T, T_all)\n",
            "        scores = torch.einsum('bhtd,bhsd->bhts', q, k) * self.d_head ** -0.5  # (B, n_heads, T, T_all)\n",
            why="einsum"),
        "sample_next": Edit(
            "    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)",
            "    u = torch.rand(probs.shape[0], 1, generator=generator)  # one uniform per row\n"
            "    return (probs.cumsum(dim=-1) < u).sum(dim=-1).clamp(max=probs.shape[-1] - 1)",
            why="inverse CDF"),
        "top_p_filter": Edit(
            "    drop = above >= p  # p was reached before this token: not needed\n",
            "    n_keep = torch.searchsorted(probs.cumsum(dim=-1), torch.full_like(probs[..., :1], p)) + 1\n"
            "    drop = torch.arange(probs.shape[-1]) >= n_keep  # the first n_keep sorted tokens stay\n",
            why="searchsorted"),
    },
    "attention head by head in a loop": {
        "CausalSelfAttention": Edit(
            "        weights = scores.masked_fill(~mask, float(\"-inf\")).softmax(dim=-1)\n"
            "        out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)  # heads joined back: (B, T, d_model)\n",
            "        outs = []\n"
            "        for head in range(self.n_heads):\n"
            "            w = scores[:, head].masked_fill(~mask, float('-inf')).softmax(dim=-1)  # (B, T, T_all)\n"
            "            outs.append(w @ v[:, head])  # (B, T, d_head)\n"
            "        out = torch.cat(outs, dim=-1)  # (B, T, d_model)\n",
            why="a loop over heads"),
    },
}


class TestUnit07Gpt(UnitContract):
    AID = "07-gpt"
    MAX_SCORE = 32
    STUDENT_FUNCTIONS = 17
    RELEASE_MUST_NOT_CONTAIN = ("where[pair].add(i)", 'errors="replace")', "rank.get(p, len(rank))",
                                "id_of[left + right]", "tril(diagonal=T_all - T)", "cache.length  # positions",
                                "above >= p", "self.lm_head.weight = self.tok_emb.weight")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # the CPU tier: about 100-150 s of a grade on one core
    # ... whose known-wrong trainers run with LMCOURSE_ALL_TRAINING=1 only (each proof trains for as long); the
    # solution's grade in every make test still runs the training check
    EXPENSIVE_OPT_IN = (TRAINING,)
    ALTERNATES = ALTERNATES
    RUN_DEMOS = False  # the last demo is the CPU tier (about two minutes on one core)

    def test_the_training_run_records_its_verified_loss(self, solution_result):
        """The number `lmcourse leaderboard` ranks: the solution's grade holds the loss the grader computed from
        the reference GPT with the trained weights, in the CPU tier's calibrated range, and nothing else does."""
        measured = {t["name"]: t.get("measured") for t in solution_result["tests"] if t.get("measured")}
        assert list(measured) == [TRAINING]
        assert 1.9 < measured[TRAINING]["validation_loss"] <= 2.08
        assert measured[TRAINING].get("threshold") == 2.08  # shown on the leaderboard
        assert measured[TRAINING].get("protocol") == training.PROTOCOL  # weights read first: rankable


def test_an_encoder_built_on_tiktoken_earns_nothing(tmp_path):
    """Right ids by the wrong means: an `encode` that hands the merges to the course's tiktoken builder is refused
    (the rule no_tokenizer_library: the source scan, before anything runs), and says why."""
    from pathlib import Path

    from lmcourse.grading import grade_notebook
    from lmcourse.instructor.testing import submission_from_solution

    root = Path(__file__).resolve().parent.parent
    cheat = ("def encode(text, merges, special_tokens=()):\n"
             "    from lmcourse.bpe import tiktoken_encoding\n"
             "    return tiktoken_encoding(merges, special_tokens).encode(text, allowed_special='all')\n")
    nb = submission_from_solution(root, "07-gpt", tmp_path, replace={"encode": cheat})
    others = {SPLIT, MERGES, MERGES_SPECIALS, SPEED, DECODE, GPT2_MERGES, ATTENTION, ATTENTION_DEVICE, BLOCK, GPT_MODEL,
              PARAMS, TOP_K, TOP_P, SAMPLE, KV, GENERATE, TRAINING_STEPS, TRAINING}
    r = grade_notebook(root, "07-gpt", nb, tier="cpu", exclude=others)
    scores = {t["name"]: (t["score"], t.get("output", "")) for t in r["tests"]}
    assert r["status"] == "ok" and set(scores) == {ENCODE, ENCODE_SPECIALS, GPT2_IDS}
    for name, (score, output) in scores.items():
        assert score == 0 and "byte-pair encoding written by hand" in output, (name, output)
