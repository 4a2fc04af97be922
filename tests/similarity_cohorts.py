"""Planted cohorts for the similarity check (tests/test_similarity.py): honest answers written independently.

Three students per unit wrote each answer their own way (loops or vectorised, einsum or views, other names and
other orders), as honest students of one class do: they share the release's names and the idioms of the task,
and nothing else. The tests add the copies (renamed, reformatted, reordered; or one function lifted into an
otherwise honest notebook) and the untouched release. The code is parsed and fingerprinted, never run.
"""

from __future__ import annotations

import ast
import builtins
import copy
from pathlib import Path

import nbformat

from lmcourse.course import Course
from lmcourse.grading import notebook as nbmod

ROOT = Path(__file__).resolve().parent.parent


def release_of(unit: str):
    return Course(ROOT).assignment(unit).load_release()


def replace_definitions(cell_source: str, code: dict[str, str], reverse: bool = False) -> str:
    """The release's answer cell with the definitions named in `code` replaced (the others kept as stubs)."""
    tree = ast.parse(cell_source)
    lines = cell_source.splitlines()
    pieces, last = [], 0
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for node in defs:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        pieces.append(("keep", "\n".join(lines[last:first])))
        pieces.append(("def", code.get(node.name, "\n".join(lines[first:node.end_lineno])).strip("\n")))
        last = node.end_lineno
    pieces.append(("keep", "\n".join(lines[last:])))
    if reverse:
        order = [p for p in pieces if p[0] == "def"][::-1]
        pieces = [order.pop(0) if kind == "def" else (kind, text) for kind, text in pieces]
    return "\n\n".join(text for _, text in pieces if text.strip()) + "\n"


def notebook(unit: str, answers: dict[str, str], path: Path, reverse: bool = False) -> Path:
    nb = copy.deepcopy(release_of(unit))
    for cell in nb.cells:
        if nbmod.role(cell) == "solution" and nbmod.stub_names(cell) & set(answers):
            cell["source"] = replace_definitions(nbmod.cell_source(cell), answers, reverse)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.from_dict(nb), path)
    return path


class Rename(ast.NodeTransformer):
    """Renames every local name and argument (not the graded names, the release's globals or builtins)."""

    def __init__(self, keep: set[str]):
        self.keep, self.names = keep, {}

    def _new(self, name: str) -> str:
        if name in self.keep:
            return name
        return self.names.setdefault(name, f"x{len(self.names)}")

    def visit_Name(self, node):
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._new(node.arg)
        return node

    def visit_ClassDef(self, node):  # methods in another order
        self.generic_visit(node)
        node.body = node.body[::-1]
        return node


def disguised(code: str, keep: set[str]) -> str:
    """Renamed, comments and docstrings gone, reformatted by ast.unparse, methods reordered."""
    tree = Rename(keep).visit(ast.parse(code))
    return ast.unparse(tree)


def keep_names(unit: str) -> set[str]:
    release = release_of(unit)
    given = set()
    for cell in release.cells:
        if cell.get("cell_type") == "code" and nbmod.role(cell) != "solution":
            given |= nbmod.defined_names(nbmod.cell_source(cell))
            try:
                for node in ast.walk(ast.parse(nbmod.comment_magics(nbmod.cell_source(cell)))):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        given |= {(a.asname or a.name).split(".")[0] for a in node.names}
            except SyntaxError:
                pass
    return given | nbmod.answer_names(release) | set(dir(builtins)) | {"self", "super"}



HONEST = {
    "04-attention": {
        "ana": {
            "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -float("inf"))
    m = scores.max(dim=-1, keepdim=True).values
    m = torch.nan_to_num(m, neginf=0.0)
    ex = (scores - m).exp()
    if mask is not None:
        ex = ex * mask
    s = ex.sum(-1, keepdim=True)
    return torch.where(s > 0, ex / s.clamp(min=1e-30), torch.zeros_like(ex))
''',
            "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.size(-1)))
    att = masked_softmax(att, mask)
    return torch.matmul(att, v), att
''',
            "causal_mask": '''
def causal_mask(T, device=None):
    i = torch.arange(T, device=device)
    return i[:, None] >= i[None, :]
''',
            "key_padding_mask": '''
def key_padding_mask(lengths, T):
    idx = torch.arange(T, device=lengths.device).unsqueeze(0)
    keep = idx < lengths.unsqueeze(1)
    return keep.unsqueeze(1).unsqueeze(1)
''',
            "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0, "heads must divide d_model"
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.d_model = d_model
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.n_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, kv=None, mask=None):
        src = x if kv is None else kv
        q = self.split(self.q_proj(x))
        k = self.split(self.k_proj(src))
        v = self.split(self.v_proj(src))
        att, w = scaled_dot_product_attention(q, k, v, mask)
        b, h, n, d = att.shape
        merged = att.permute(0, 2, 1, 3).reshape(b, n, h * d)
        return self.out_proj(merged), w
''',
            "AttentionSeq2Seq": '''
class AttentionSeq2Seq(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, d_emb=32, d_hidden=128):
        super().__init__()
        self.encoder = RecurrentEncoder(vocab_size, d_emb, d_hidden)
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD_ID)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.attn = MultiHeadAttention(d_hidden, 1)
        self.combine = nn.Linear(d_hidden * 2, d_hidden)
        self.output = nn.Linear(d_hidden, vocab_size)

    def forward(self, src, tgt_in):
        lengths = src.ne(PAD_ID).sum(1)
        enc_states, enc_final = self.encoder(src, lengths)
        dec_states, _ = self.rnn(self.embed(tgt_in), enc_final[None])
        pad = key_padding_mask(lengths, src.size(1))
        ctx, attn_w = self.attn(dec_states, enc_states, pad)
        mixed = torch.tanh(self.combine(torch.cat((dec_states, ctx), -1)))
        return self.output(mixed), attn_w

    @torch.no_grad()
    def greedy_decode(self, src, max_len):
        B = src.size(0)
        seq = torch.full((B, 1), BOS_ID, dtype=torch.long, device=src.device)
        for step in range(max_len):
            scores, _ = self.forward(src, seq)
            nxt = scores[:, -1, :].argmax(-1)
            seq = torch.cat((seq, nxt.unsqueeze(1)), 1)
        return seq[:, 1:]
''',
            "train_reverser": '''
def train_reverser(steps=1000, batch_size=64, lr=3e-3, min_len=4, max_len=20, d_emb=32, d_hidden=128, seed=0,
                   device="cpu"):
    torch.manual_seed(seed)
    gen = np.random.default_rng(seed)
    net = AttentionSeq2Seq(VOCAB_SIZE, d_emb=d_emb, d_hidden=d_hidden)
    net.to(device)
    opt = torch.optim.Adam(net.parameters(), lr)
    lossf = nn.CrossEntropyLoss(ignore_index=PAD_ID)
    net.train()
    for it in range(steps):
        b = seq2seq_batch(reversal_pairs(batch_size, min_len, max_len, gen)).to(device)
        out, _ = net(b.src, b.tgt_in)
        loss = lossf(out.flatten(0, 1), b.tgt_out.flatten())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
        opt.step()
    net.eval()
    return net.to("cpu")
''',
        },
        "ben": {
            "masked_softmax": '''
def masked_softmax(scores, mask=None):
    neg = torch.finfo(scores.dtype).min
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    mask = mask.expand_as(scores)
    safe = torch.where(mask, scores, torch.full_like(scores, neg))
    safe = safe - safe.max(-1, keepdim=True)[0]
    w = torch.exp(safe) * mask.to(scores.dtype)
    denom = w.sum(-1, keepdim=True)
    denom[denom == 0] = 1.0
    return w / denom
''',
            "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    dk = q.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", q, k) / dk ** 0.5
    p = masked_softmax(s, mask)
    return torch.einsum("...qk,...kd->...qd", p, v), p
''',
            "causal_mask": '''
def causal_mask(T, device=None):
    return torch.tril(torch.ones((T, T), device=device)).bool()
''',
            "key_padding_mask": '''
def key_padding_mask(lengths, T):
    B = lengths.shape[0]
    out = torch.zeros(B, 1, 1, T, dtype=torch.bool, device=lengths.device)
    for b in range(B):
        out[b, 0, 0, : int(lengths[b])] = True
    return out
''',
            "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("n_heads must divide d_model")
        self.h = n_heads
        self.dk = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, kv=None, mask=None):
        if kv is None:
            kv = x
        Q, K, V = self.q_proj(x), self.k_proj(kv), self.v_proj(kv)
        outs, ws = [], []
        for i in range(self.h):
            cols = slice(i * self.dk, (i + 1) * self.dk)
            m = mask
            if m is not None and m.dim() == 4:
                m = m[:, i] if m.shape[1] > 1 else m[:, 0]
            o, w = scaled_dot_product_attention(Q[..., cols], K[..., cols], V[..., cols], m)
            outs.append(o)
            ws.append(w)
        return self.out_proj(torch.cat(outs, dim=-1)), torch.stack(ws, dim=1)
''',
            "AttentionSeq2Seq": '''
class AttentionSeq2Seq(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, d_emb=32, d_hidden=128):
        super().__init__()
        self.output = nn.Linear(d_hidden, vocab_size)
        self.combine = nn.Linear(2 * d_hidden, d_hidden)
        self.attn = MultiHeadAttention(d_model=d_hidden, n_heads=1)
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD_ID)
        self.rnn = nn.GRU(input_size=d_emb, hidden_size=d_hidden, num_layers=1, batch_first=True)
        self.encoder = RecurrentEncoder(vocab_size, d_emb, d_hidden)

    def forward(self, src, tgt_in):
        n_real = torch.count_nonzero(src != PAD_ID, dim=1)
        memory, h0 = self.encoder(src, n_real)
        emb = self.embed(tgt_in)
        states, _ = self.rnn(emb, h0.reshape(1, *h0.shape))
        blocked = key_padding_mask(n_real, src.shape[-1])
        context, w = self.attn(states, kv=memory, mask=blocked)
        hidden = self.combine(torch.concat([states, context], dim=2)).tanh()
        logits = self.output(hidden)
        return logits, w

    def greedy_decode(self, src, max_len):
        self.eval()
        tokens = [torch.full((len(src),), BOS_ID, dtype=torch.long, device=src.device)]
        with torch.no_grad():
            while len(tokens) <= max_len:
                logits, _ = self(src, torch.stack(tokens, dim=1))
                tokens.append(logits[:, -1].argmax(dim=1))
        return torch.stack(tokens[1:], dim=1)
''',
            "train_reverser": '''
def train_reverser(steps=1000, batch_size=64, lr=3e-3, min_len=4, max_len=20, d_emb=32, d_hidden=128, seed=0,
                   device="cpu"):
    torch.manual_seed(seed)
    pairs_rng = np.random.default_rng(seed)
    m = AttentionSeq2Seq(d_emb=d_emb, d_hidden=d_hidden).to(device)
    adam = torch.optim.Adam(m.parameters(), lr=lr)
    history = []
    step = 0
    while step < steps:
        pairs = reversal_pairs(batch_size, min_len, max_len, pairs_rng)
        batch = seq2seq_batch(pairs).to(device)
        logits, _ = m(batch.src, batch.tgt_in)
        V = logits.size(-1)
        loss = F.cross_entropy(logits.view(-1, V), batch.tgt_out.view(-1), ignore_index=PAD_ID)
        adam.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        adam.step()
        history.append(loss.item())
        step += 1
    return m.eval().cpu()
''',
        },
        "chen": {
            "masked_softmax": '''
def masked_softmax(scores, mask=None):
    x = scores.clone()
    keep = torch.ones_like(x, dtype=torch.bool) if mask is None else torch.broadcast_to(mask, x.shape)
    x[~keep] = float("-inf")
    row_max = torch.amax(x, -1, keepdim=True)
    row_max[torch.isinf(row_max)] = 0
    numer = torch.exp(x - row_max)
    result = numer / numer.sum(-1, keepdim=True).clamp_min(1e-38)
    return result
''',
            "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scale = q.size(-1) ** -0.5
    weights = masked_softmax((q * scale) @ k.mT, mask)
    out = weights @ v
    return out, weights
''',
            "causal_mask": '''
def causal_mask(T, device=None):
    m = torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)
    return ~m
''',
            "key_padding_mask": '''
def key_padding_mask(lengths, T):
    ar = torch.arange(T, device=lengths.device).expand(len(lengths), T)
    return (ar < lengths.view(-1, 1)).view(len(lengths), 1, 1, T)
''',
            "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"{d_model} is not divisible by {n_heads}")
        self.heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, kv=None, mask=None):
        ctx = x if kv is None else kv
        B, Tq, D = x.shape
        Tk = ctx.size(1)
        H = self.heads
        q = self.q_proj(x).view(B, Tq, H, D // H)
        k = self.k_proj(ctx).view(B, Tk, H, D // H)
        v = self.v_proj(ctx).view(B, Tk, H, D // H)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / (D // H) ** 0.5
        w = masked_softmax(scores, mask)
        out = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, Tq, D)
        return self.out_proj(out), w
''',
            "AttentionSeq2Seq": '''
class AttentionSeq2Seq(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, d_emb=32, d_hidden=128):
        super().__init__()
        self.encoder = RecurrentEncoder(vocab_size, d_emb, d_hidden)
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD_ID)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.attn = MultiHeadAttention(d_hidden, n_heads=1)
        self.combine = nn.Linear(2 * d_hidden, d_hidden)
        self.output = nn.Linear(d_hidden, vocab_size)

    def step_logits(self, memory, mask, tgt, h0):
        dec, _ = self.rnn(self.embed(tgt), h0)
        c, a = self.attn(dec, memory, mask)
        return self.output(torch.tanh(self.combine(torch.cat([dec, c], dim=-1)))), a

    def forward(self, src, tgt_in):
        L = (src != PAD_ID).long().sum(-1)
        memory, final = self.encoder(src, L)
        return self.step_logits(memory, key_padding_mask(L, src.shape[1]), tgt_in, final.unsqueeze(0))

    def greedy_decode(self, src, max_len):
        with torch.no_grad():
            L = (src != PAD_ID).long().sum(-1)
            memory, final = self.encoder(src, L)
            mask = key_padding_mask(L, src.shape[1])
            ys = torch.full((src.shape[0], 1), BOS_ID, device=src.device, dtype=torch.long)
            for _ in range(max_len):
                logits, _ = self.step_logits(memory, mask, ys, final.unsqueeze(0))
                ys = torch.cat([ys, logits[:, -1:].argmax(-1)], dim=1)
        return ys[:, 1:]
''',
            "train_reverser": '''
def train_reverser(steps=1000, batch_size=64, lr=3e-3, min_len=4, max_len=20, d_emb=32, d_hidden=128, seed=0,
                   device="cpu"):
    torch.manual_seed(seed)
    model = AttentionSeq2Seq(VOCAB_SIZE, d_emb, d_hidden).to(device)
    optim = torch.optim.Adam(params=model.parameters(), lr=lr)
    data = np.random.default_rng(seed)
    for _ in range(steps):
        bt = seq2seq_batch(reversal_pairs(batch_size, min_len, max_len, data))
        src, tin, tout = bt.src.to(device), bt.tgt_in.to(device), bt.tgt_out.to(device)
        logits = model(src, tin)[0]
        real = tout != PAD_ID
        loss = F.cross_entropy(logits[real], tout[real])
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
    model.eval()
    return model.cpu()
''',
        },
    },
    "01-ngrams": {
        "ana": {
            "tokenize_lines": '''
def tokenize_lines(text):
    return [toks for toks in (word_tokenize(line) for line in text.split("\\n")) if toks]
''',
            "build_vocab": '''
def build_vocab(sentences, min_count=1):
    from collections import Counter
    freq = Counter(w for s in sentences for w in s)
    for special in (BOS, EOS, UNK):
        freq.pop(special, None)
    words = sorted((w for w in freq if freq[w] >= min_count), key=lambda w: (-freq[w], w))
    return [BOS, EOS, UNK] + words
''',
            "ngram_counts": '''
def ngram_counts(sentences, n):
    from collections import Counter
    counter = Counter()
    for sent in sentences:
        padded = pad_sentence(sent, n)
        for end in range(n - 1, len(padded)):
            counter[" ".join(padded[end - n + 1:end + 1])] += 1
    return dict(counter)
''',
            "next_token_probs": '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    vocab = model["vocab"]
    n = model["n"]
    V = len(vocab) - 1
    in_vocab = set(vocab)
    hist = [t if t in in_vocab else UNK for t in history]
    if lambdas is None:
        lambdas = [0.0] * (n - 1) + [1.0]
    total = np.zeros(len(vocab))
    for order in range(1, n + 1):
        lam = lambdas[order - 1]
        if lam == 0:
            continue
        ctx = ([BOS] * (order - 1) + hist)[-(order - 1):] if order > 1 else []
        key = " ".join(ctx)
        denom = model["contexts"][order - 1].get(key, 0)
        if denom == 0:
            est = np.ones(len(vocab)) / V
        else:
            table = model["counts"][order - 1]
            est = np.array([table.get((key + " " + w) if key else w, 0) + k for w in vocab]) / (denom + k * V)
        est[vocab.index(BOS)] = 0.0
        total = total + lam * est
    return total
''',
            "sentence_probs": '''
def sentence_probs(model, sentence, k=0.0, lambdas=None):
    vocab_set = set(model["vocab"])
    V = len(model["vocab"]) - 1
    toks = [w if w in vocab_set else UNK for w in sentence]
    toks.append(EOS)
    n = model["n"]
    lambdas = lambdas if lambdas is not None else [0] * (n - 1) + [1]
    result = []
    for t, w in enumerate(toks):
        p = 0.0
        for j in range(1, n + 1):
            if not lambdas[j - 1]:
                continue
            before = ([BOS] * (j - 1) + toks[:t])[len(toks[:t]):] if j > 1 else []
            h = " ".join(before)
            ch = model["contexts"][j - 1].get(h, 0)
            if ch:
                chw = model["counts"][j - 1].get(" ".join(before + [w]), 0)
                p += lambdas[j - 1] * (chw + k) / (ch + k * V)
            else:
                p += lambdas[j - 1] / V
        result.append(p)
    return np.array(result)
''',
            "sample": '''
def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    gen = np.random.default_rng(seed)
    words = [] if prompt is None else list(prompt)
    start = len(words)
    while len(words) - start < max_len:
        p = apply_temperature(next_token_probs(model, words, k, lambdas), temperature)
        nxt = model["vocab"][gen.choice(len(p), p=p)]
        if nxt == EOS:
            break
        words.append(nxt)
    return words[start:]
''',
        },
        "ben": {
            "tokenize_lines": '''
def tokenize_lines(text):
    out = []
    for raw in text.splitlines():
        if raw.strip() == "":
            continue
        tokens = word_tokenize(raw)
        if len(tokens) > 0:
            out.append(tokens)
    return out
''',
            "build_vocab": '''
def build_vocab(sentences, min_count=1):
    seen = {}
    for sentence in sentences:
        for token in sentence:
            if token in (BOS, EOS, UNK):
                continue
            seen[token] = seen.get(token, 0) + 1
    frequent = [(count, token) for token, count in seen.items() if count >= min_count]
    frequent.sort(key=lambda pair: (-pair[0], pair[1]))
    vocab = [BOS, EOS, UNK]
    vocab.extend(token for _, token in frequent)
    return vocab
''',
            "ngram_counts": '''
def ngram_counts(sentences, n):
    table = {}
    for s in sentences:
        toks = [BOS] * (n - 1) + list(s) + [EOS]
        grams = zip(*(toks[i:] for i in range(n)))
        for g in grams:
            key = " ".join(g)
            if key in table:
                table[key] += 1
            else:
                table[key] = 1
    return table
''',
            "next_token_probs": '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    words = model["vocab"]
    size = len(words) - 1
    order = model["n"]
    mix = np.zeros(order)
    if lambdas is None:
        mix[-1] = 1.0
    else:
        mix[:] = lambdas
    cleaned = [h if h in words else UNK for h in history]
    result = np.zeros(len(words), dtype=float)
    for j in range(order):
        if mix[j] == 0.0:
            continue
        full = [BOS] * j + cleaned
        prefix = full[len(full) - j:] if j else []
        c_prefix = model["contexts"][j].get(" ".join(prefix), 0)
        if not c_prefix:
            dist = np.full(len(words), 1.0 / size)
        else:
            dist = np.empty(len(words))
            for idx, w in enumerate(words):
                dist[idx] = (model["counts"][j].get(" ".join(prefix + [w]), 0) + k) / (c_prefix + k * size)
        dist[0] = 0.0
        result += mix[j] * dist
    return result
''',
            "sentence_probs": '''
def sentence_probs(model, sentence, k=0.0, lambdas=None):
    lookup = set(model["vocab"])
    seq = [tok if tok in lookup else UNK for tok in sentence] + [EOS]
    order = model["n"]
    vsize = len(model["vocab"]) - 1
    weights = np.zeros(order)
    if lambdas is None:
        weights[order - 1] = 1
    else:
        weights = np.asarray(lambdas, dtype=float)
    out = np.zeros(len(seq))
    for j in range(order):
        if weights[j] == 0:
            continue
        stream = [BOS] * j + seq
        for pos in range(len(seq)):
            gram = stream[pos:pos + j + 1]
            denom = model["contexts"][j].get(" ".join(gram[:j]), 0)
            if denom > 0:
                out[pos] += weights[j] * (model["counts"][j].get(" ".join(gram), 0) + k) / (denom + k * vsize)
            else:
                out[pos] += weights[j] / vsize
    return out
''',
            "sample": '''
def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    rng = np.random.default_rng(seed)
    context = list(prompt) if prompt else []
    generated = []
    for _ in range(max_len):
        dist = next_token_probs(model, context + generated, k=k, lambdas=lambdas)
        dist = apply_temperature(dist, temperature)
        r = rng.random()
        idx = int(np.searchsorted(np.cumsum(dist), r, side="right"))
        idx = min(idx, len(dist) - 1)
        word = model["vocab"][idx]
        if word == EOS:
            break
        generated.append(word)
    return generated
''',
        },
        "chen": {
            "tokenize_lines": '''
def tokenize_lines(text):
    result = list(map(word_tokenize, text.splitlines()))
    return [r for r in result if r]
''',
            "build_vocab": '''
def build_vocab(sentences, min_count=1):
    import collections
    c = collections.Counter()
    for s in sentences:
        c.update(s)
    specials = [BOS, EOS, UNK]
    rest = [w for w, cnt in c.most_common() if cnt >= min_count and w not in specials]
    rest = sorted(rest, key=lambda w: (-c[w], w))
    return specials + rest
''',
            "ngram_counts": '''
def ngram_counts(sentences, n):
    import collections
    grams = collections.defaultdict(int)
    for s in sentences:
        p = pad_sentence(s, n)
        i = 0
        while i + n <= len(p):
            grams[" ".join(p[i:i + n])] += 1
            i += 1
    return dict(grams)
''',
            "next_token_probs": '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    V = len(model["vocab"]) - 1
    n = model["n"]
    lam = [0.0] * (n - 1) + [1.0] if lambdas is None else lambdas
    h = [w if w in model["vocab"] else UNK for w in history]
    out = np.zeros(len(model["vocab"]))
    for j, weight in zip(range(1, n + 1), lam):
        if weight <= 0:
            continue
        ctx = tuple(([BOS] * (j - 1) + h)[len(h):])
        counts_j, contexts_j = model["counts"][j - 1], model["contexts"][j - 1]
        total = contexts_j.get(" ".join(ctx), 0)
        probs = []
        for w in model["vocab"]:
            if w == BOS:
                probs.append(0.0)
            elif total == 0:
                probs.append(1 / V)
            else:
                probs.append((counts_j.get(" ".join(ctx + (w,)), 0) + k) / (total + V * k))
        out += weight * np.asarray(probs)
    return out
''',
            "sentence_probs": '''
def sentence_probs(model, sentence, k=0.0, lambdas=None):
    voc = model["vocab"]
    targets = [w if w in voc else UNK for w in sentence] + [EOS]
    lam = lambdas or ([0.0] * (model["n"] - 1) + [1.0])
    per_order = []
    for j, weight in enumerate(lam, 1):
        padded = [BOS] * (j - 1) + targets
        probs = []
        for t in range(len(targets)):
            hist = " ".join(padded[t:t + j - 1])
            c_h = model["contexts"][j - 1].get(hist, 0)
            if c_h == 0:
                probs.append(1.0 / (len(voc) - 1))
            else:
                c_hw = model["counts"][j - 1].get(" ".join(padded[t:t + j]), 0)
                probs.append((c_hw + k) / (c_h + k * (len(voc) - 1)))
        per_order.append(weight * np.array(probs))
    return np.sum(per_order, axis=0)
''',
            "sample": '''
def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    g = torch.Generator().manual_seed(seed)
    so_far = list(prompt or [])
    added = []
    while len(added) < max_len:
        weights = apply_temperature(next_token_probs(model, so_far + added, k, lambdas), temperature)
        choice = torch.multinomial(torch.tensor(weights), 1, generator=g).item()
        if choice == model["vocab"].index(EOS):
            break
        added.append(model["vocab"][choice])
    return added
''',
        },
    },
}
