"""Known mistakes of 02-word2vec: the wrong implementations students really write, each with the checks
proven to catch it and a hint for the student.

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one, and proves that its grade is
attributed to it), and HINTS holds the advice a student reads when their failures match it. It lives beside
the hidden checks, out of the student worker's sight and out of the student edition.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit


# The checks' names, as the student sees them.
PAIRS = "skipgram_pairs: every (centre, context) pair of the window, window 1..4"
PAIRS_EDGES = "skipgram_pairs: no pair crosses a sentence boundary; empty, one-word and short sentences"
PAIRS_NO_CENTRE = "skipgram_pairs: a position is never its own context"
SUBSAMPLE = "subsample: each word kept with its keep probability, independently, in order, seeded"
NOISE = "noise_distribution: proportional to count ** 0.75, sums to 1"
NEGATIVES = "draw_negatives: shape (n, k), seeded, frequencies follow the noise distribution"
SOFTMAX_LOSS = "softmax_loss: -log softmax of the scores at the true context; finite at +-1000"
SOFTMAX_GRADS = "softmax_gradients: grad_t and grad_C match autograd of the summed loss; repeated contexts add up"
LOSS = "log_sigmoid and sgns_loss: values on random scores and vectors"
LOSS_STABLE = "log_sigmoid and sgns_loss: finite and exact for scores of +-1000"
GRADS = "sgns_gradients: values on random vectors"
GRADS_FD = "sgns_gradients: agree with finite differences of your sgns_loss"
COSINE = "cosine_similarity: normalised dot products, between -1 and 1"
NEIGHBOURS = "nearest_neighbours: the k most similar words by cosine, the word itself left out, ties to the lower id"
ANALOGY = "analogy: closest to unit(b) - unit(a) + unit(c), never a query word"
TRAINING = "train_sgns: planted word clusters are recovered (similar within, not across)"
TRAINING_SCHEDULE = "train_sgns: pairs shuffled and a learning rate decaying to about 0 (a corpus sorted by cluster)"
TRAINING_TARGET = "train_sgns: returns the target vectors W_t (words that are each other's contexts are not made alike)"
TRAINING_SUBSAMPLING = "train_sgns: `sample` subsamples frequent words (a stop word between every two words, window 1)"
TRAINING_STEP = "train_sgns: a small learning rate with large batches (lr=0.001, 24,576 pairs a batch)"
TRAINING_NOISE = "train_sgns: the same clusters with and without subsampling a word that is never a context"
TRAINING_DECAY = "train_sgns: the learning rate over one long epoch and over 70 short ones"

# name -> (function replaced, the wrong version: Edit(s) of the solution's own definition, or a whole
# definition where the variant is another implementation; checks that must score 0)
VARIANTS: dict[str, tuple[str, str | Edit | list[Edit], tuple[str, ...]]] = {
    "window includes the centre word (offset 0)": ("skipgram_pairs", Edit(
        "centres, contexts = [], []", "centres, contexts = [stream], [stream]",
        why="offset j = 0 is kept: every word is paired with itself"),
        (PAIRS, PAIRS_EDGES, PAIRS_NO_CENTRE)),
    "pairs cross sentence boundaries (one stream, no sentence ids)": ("skipgram_pairs", Edit(
        "left, right = stream[:-j][inside], stream[j:][inside]", "left, right = stream[:-j], stream[j:]",
        why="the sentence ids are never used: the last words of a sentence see the next one"),
        (PAIRS, PAIRS_EDGES)),
    "noise distribution without the 0.75 power": ("noise_distribution", Edit(
        "np.asarray(counts, dtype=np.float64) ** power", "np.asarray(counts, dtype=np.float64)",
        why="the unigram distribution itself"),
        (NOISE,)),
    "one noise word drawn per pair and repeated k times": ("draw_negatives", Edit(
        "size=(n, k), p=noise / noise.sum()).astype(np.int64)",
        "size=(n, 1), p=noise / noise.sum()).repeat(k, axis=1).astype(np.int64)",
        why="the frequencies are right, but the k draws of a pair are one draw: only a joint test sees it"),
        (NEGATIVES,)),
    "loss with the sign of the negative term flipped": ("sgns_loss", Edit(
        "log_sigmoid(-score_neg)", "log_sigmoid(score_neg)",
        why="log s(+t.c_neg): the noise words are scored as true contexts"),
        (LOSS,)),
    "sigmoid that overflows for large scores": ("log_sigmoid", Edit(
        "return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))",
        "x = np.asarray(x, dtype=np.float64)\n"
        '    with np.errstate(over="ignore", divide="ignore"):\n'
        "        return np.log(1.0 / (1.0 + np.exp(-x)))",
        why="log of the sigmoid, computed as written: exp(1000) = inf, so log(0) = -inf"),
        (LOSS_STABLE,)),
    "gradient missing the negative samples' contribution": ("sgns_gradients", Edit(
        ' + np.einsum("bk,bkd->bd", weight_neg, c_neg)', "",
        why="grad_t leaves out the K noise terms"),
        (GRADS, GRADS_FD)),
    "analogy may return a query word": ("analogy", Edit(
        "    sims[rows, a] = sims[rows, b] = sims[rows, c] = -np.inf  # the query words are never an answer\n", "",
        why="a, b and c are not excluded from the answers"),
        (ANALOGY,)),
    "cosine without normalisation (plain dot products)": ("cosine_similarity", Edit(
        "    A = A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12)  # (n, d) unit rows\n"
        "    B = B / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), 1e-12)  # (m, d) unit rows\n", "",
        why="no division by the lengths"),
        (COSINE, NEIGHBOURS)),
    # Issue 16: each proves a check (or the part of one) added then.
    "subsample re-seeds its generator for every sentence": ("subsample", [
        Edit("    rng = np.random.default_rng(seed)\n", "", why="the generator moves into the loop"),
        Edit("        ids = np.asarray(sentence, dtype=np.int64).reshape(-1)\n",
             "        rng = np.random.default_rng(seed)\n        ids = np.asarray(sentence, dtype=np.int64).reshape(-1)\n",
             why="every sentence gets the same draws: each word's frequency is right (the marginal test passes "
                 "for 200 of 200 input seeds), the draws of two sentences are not independent")],
        (SUBSAMPLE,)),
    "nearest neighbours in reversed ascending order (ties: the higher id first)": ("nearest_neighbours", Edit(
        'return np.argsort(-sims, kind="stable")[:k]', 'return np.argsort(sims, kind="stable")[::-1][:k]',
        why="argsort(...)[::-1]: the most similar first, but words of equal cosine by decreasing id"),
        (NEIGHBOURS,)),
    "full-softmax gradient without the expected context vector": ("softmax_gradients", Edit(
        "error = probs.copy()", "error = np.zeros_like(probs)",
        why="the normaliser's gradient is left out: grad_t = -c_o, and only the true context's row of grad_C"),
        (SOFTMAX_GRADS,)),
    "full-softmax loss without the log-sum-exp shift": ("softmax_loss", Edit(
        "top[:, 0] + np.log(np.exp(scores - top).sum(axis=1))", "np.log(np.exp(scores).sum(axis=1))",
        why="exp(1000) overflows: the loss is inf (or NaN) at scores of +-1000"),
        (SOFTMAX_LOSS,)),
    "train_sgns: a word repeated in a batch gets one update (rows overwritten, not added)": ("train_sgns", Edit(
        "W_t.index_add_(0, centres, grad_t, alpha=-rate)", "W_t[centres] = W_t[centres] - rate * grad_t",
        why="fancy-index assignment keeps one of the updates of a repeated centre word"),
        (TRAINING,)),
    "train_sgns returns W_t + W_c": ("train_sgns", Edit(
        "return W_t.numpy()", "return (W_t + W_c).numpy()", why="the sum of the two vectors, not the target vectors"),
        (TRAINING_TARGET,)),
    "train_sgns: constant learning rate": ("train_sgns", Edit(
        "lr * max(1e-4, 1.0 - progress)", "lr", why="no decay: the rate is lr to the end of the run"),
        (TRAINING_SCHEDULE,)),
    "train_sgns ignores sample (no subsampling)": ("train_sgns", Edit(
        "keep = keep_probabilities(counts, sample) if sample else np.ones(V)", "keep = np.ones(V)",
        why="every word is always kept"),
        (TRAINING_SUBSAMPLING,)),
    # Issue 16, the trainers that passed every check until then (SparseAdam, a variant of the autograd
    # trainer, is added below it).
    "train_sgns: noise distribution from the counts after subsampling (each epoch's kept words)": ("train_sgns", Edit(
        "words[:, 1:] = table[rng.integers(0, len(table), size=(len(centres), K))]",
        "kept_table = np.repeat(np.arange(V, dtype=np.int32),\n"
        "                               np.round(noise_distribution(np.bincount(ids, minlength=V))\n"
        "                                        * (1 << 20)).astype(np.int64))\n"
        "        words[:, 1:] = kept_table[rng.integers(0, len(kept_table), size=(len(centres), K))]",
        why="the noise words are drawn from count ** 0.75 of the words this epoch's subsampling kept"),
        (TRAINING_NOISE,)),
    "train_sgns: noise distribution from the expected counts after subsampling (counts * keep)": ("train_sgns", Edit(
        "noise = noise_distribution(counts)", "noise = noise_distribution(counts * keep)",
        why="a frequent word's noise probability falls with its keep probability"),
        (TRAINING_NOISE,)),
    "train_sgns: learning rate restarts from lr at every epoch": ("train_sgns", Edit(
        "progress = (epoch + start / N) / epochs", "progress = start / N",
        why="progress within the epoch only: the rate falls from lr to about 0 in every epoch"),
        (TRAINING_DECAY,)),
    "train_sgns: learning rate falls per epoch only (constant within an epoch)": ("train_sgns", Edit(
        "progress = (epoch + start / N) / epochs", "progress = epoch / epochs",
        why="as a scheduler stepped once per epoch: lr in the first epoch, lr / epochs in the last"),
        (TRAINING_DECAY,)),
}

# Correct implementations other than the solution's (other algorithms), which must get full marks.
other_algorithms = {
    "draw_negatives": '''
def draw_negatives(noise, n, k, seed):
    """Inverse transform sampling: a uniform draw u falls in word w's slice of the cumulative distribution."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(np.asarray(noise, dtype=np.float64))
    return np.searchsorted(cdf / cdf[-1], rng.random((n, k)), side="right").astype(np.int64)
''',
    "log_sigmoid": '''
def log_sigmoid(x):
    """log s(x) = min(x, 0) - log(1 + exp(-|x|)): the exponent is never positive."""
    x = np.asarray(x, dtype=np.float64)
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))
''',
    "skipgram_pairs": '''
def skipgram_pairs(sentences, window):
    """Position by position, with a Python loop."""
    centres, contexts = [], []
    for sentence in sentences:
        words = [int(w) for w in sentence]
        for i, w in enumerate(words):
            for j in range(max(0, i - window), min(len(words), i + window + 1)):
                if j != i:
                    centres.append(w)
                    contexts.append(words[j])
    return np.array(centres, dtype=np.int64), np.array(contexts, dtype=np.int64)
''',
    "subsample": '''
def subsample(sentences, keep_prob, seed):
    """One draw per token of the whole corpus at once, then cut back into sentences."""
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(s, dtype=np.int64).reshape(-1) for s in sentences]
    flat = np.concatenate(arrays + [np.zeros(0, dtype=np.int64)])
    survives = rng.random(len(flat)) < np.asarray(keep_prob, dtype=np.float64)[flat]
    ends = np.cumsum([len(a) for a in arrays])
    return [a[survives[end - len(a):end]] for a, end in zip(arrays, ends)]
''',
    "nearest_neighbours": '''
def nearest_neighbours(embeddings, word_id, k=10):
    """Sorted by (-cosine, id) with lexsort."""
    E = np.asarray(embeddings, dtype=np.float64)
    unit = E / np.linalg.norm(E, axis=1, keepdims=True)
    sims = unit @ unit[word_id]
    order = np.lexsort((np.arange(len(E)), -sims))
    return order[order != word_id][:k]
''',
    "softmax_loss": '''
def softmax_loss(t, C, contexts):
    """log-sum-exp from scipy."""
    from scipy.special import logsumexp

    scores = np.asarray(t, dtype=np.float64) @ np.asarray(C, dtype=np.float64).T
    contexts = np.asarray(contexts)
    return logsumexp(scores, axis=1) - scores[np.arange(len(contexts)), contexts]
''',
    "softmax_gradients": '''
def softmax_gradients(t, C, contexts):
    """The probabilities' part as products, the true contexts' part scattered with np.add.at."""
    from scipy.special import softmax

    t, C = np.asarray(t, dtype=np.float64), np.asarray(C, dtype=np.float64)
    contexts = np.asarray(contexts)
    probs = softmax(t @ C.T, axis=1)  # (B, V)
    grad_t = probs @ C - C[contexts]
    grad_C = probs.T @ t
    np.add.at(grad_C, contexts, -t)
    return grad_t, grad_C
''',
}

autograd_trainer = '''
def train_sgns(sentences, vocab_size, dim=100, window=5, negatives=5, epochs=5, sample=1e-3,
               lr=0.025, batch_size=1024, seed=0):
    """The chapter's way: two sparse nn.Embedding tables, autograd and torch.optim.SGD; noise words
    by torch.multinomial; the rate set per batch from the batch's index."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    sentences = [np.asarray(s, dtype=np.int64).reshape(-1) for s in sentences]
    counts = np.bincount(np.concatenate(sentences + [np.zeros(0, dtype=np.int64)]), minlength=vocab_size)
    keep = keep_probabilities(counts, sample) if sample > 0 else np.ones(vocab_size)
    noise = torch.from_numpy(noise_distribution(counts))
    target = torch.nn.Embedding(vocab_size, dim, sparse=True)
    context = torch.nn.Embedding(vocab_size, dim, sparse=True)
    torch.nn.init.uniform_(target.weight, -0.5 / dim, 0.5 / dim)
    torch.nn.init.zeros_(context.weight)
    sgd = torch.optim.SGD([target.weight, context.weight], lr=lr)
    for epoch in range(epochs):
        centres, contexts = skipgram_pairs(subsample(sentences, keep, int(rng.integers(2 ** 31))), window)
        order = torch.from_numpy(rng.permutation(len(centres)))
        centres, contexts = torch.from_numpy(centres)[order], torch.from_numpy(contexts)[order]
        noise_words = torch.multinomial(noise, len(centres) * negatives, replacement=True).view(-1, negatives)
        candidates = torch.cat([contexts[:, None], noise_words], dim=1)  # (N, 1 + K): the true context first
        n_batches = -(-len(centres) // batch_size)
        for b in range(n_batches):
            sgd.param_groups[0]["lr"] = lr * max(1e-4, 1.0 - (epoch + b / n_batches) / epochs)
            rows = slice(b * batch_size, (b + 1) * batch_size)
            scores = torch.einsum("bd,bjd->bj", target(centres[rows]), context(candidates[rows]))
            sign = torch.ones_like(scores)
            sign[:, 1:] = -1.0
            loss = -torch.nn.functional.logsigmoid(sign * scores).sum()
            sgd.zero_grad()
            loss.backward()
            sgd.step()
    return target.weight.detach().numpy()
'''

numpy_trainer = '''
def train_sgns(sentences, vocab_size, dim=100, window=5, negatives=5, epochs=5, sample=1e-3,
               lr=0.025, batch_size=1024, seed=0):
    """No torch: Part 5's sgns_gradients on the gathered rows, scattered back with np.add.at; one
    NumPy generator for everything; float64."""
    rng = np.random.default_rng(seed)
    sentences = [np.asarray(s, dtype=np.int64).reshape(-1) for s in sentences]
    counts = np.bincount(np.concatenate(sentences + [np.zeros(0, dtype=np.int64)]), minlength=vocab_size)
    keep = keep_probabilities(counts, sample) if sample > 0 else np.ones(vocab_size)
    noise = noise_distribution(counts)
    W_t = (rng.random((vocab_size, dim)) - 0.5) / dim
    W_c = np.zeros((vocab_size, dim))
    for epoch in range(epochs):
        centres, contexts = skipgram_pairs(subsample(sentences, keep, int(rng.integers(2 ** 31))), window)
        order = rng.permutation(len(centres))
        centres, contexts = centres[order], contexts[order]
        noise_words = draw_negatives(noise, len(centres), negatives, int(rng.integers(2 ** 31)))
        n = len(centres)
        for start in range(0, n, batch_size):
            rate = lr * max(1e-4, 1.0 - (epoch + start / n) / epochs)
            rows = slice(start, start + batch_size)
            grad_t, grad_pos, grad_neg = sgns_gradients(W_t[centres[rows]], W_c[contexts[rows]],
                                                        W_c[noise_words[rows]])
            np.add.at(W_t, centres[rows], -rate * grad_t)
            np.add.at(W_c, contexts[rows], -rate * grad_pos)
            np.add.at(W_c, noise_words[rows], -rate * grad_neg)
    return W_t
'''


def _edited(source: str, old: str, new: str) -> str:
    """`source` with `old` (present exactly once) replaced by `new`: a variant of an alternate cannot drift."""
    if source.count(old) != 1:
        raise ValueError(f"expected {old!r} exactly once in the alternate trainer")
    return source.replace(old, new)


# the autograd trainer with torch's Adam for sparse gradients in place of plain SGD
VARIANTS["train_sgns: SparseAdam instead of plain SGD (the autograd trainer)"] = (
    "train_sgns", _edited(autograd_trainer, "sgd = torch.optim.SGD(", "sgd = torch.optim.SparseAdam("),
    (TRAINING_STEP,))

# Checks a mistake's grade leaves out unless the mistake is written to fail them: none (the training checks
# take about a second each, and every mistake runs them).
LEAVE_OUT: tuple[str, ...] = ()

# What a student whose failing checks match the mistake reads: advice, never code.
HINTS: dict[str, str] = {
    "window includes the centre word (offset 0)":
        "Check which offsets your window visits: a word is never its own context, so the offset zero is "
        "skipped.",
    "pairs cross sentence boundaries (one stream, no sentence ids)":
        "Check the last words of a sentence: their window must stop at the sentence's end, never reaching "
        "into the next sentence.",
    "noise distribution without the 0.75 power":
        "Check the shape of your noise distribution: word2vec raises each count to the power 0.75 before "
        "normalising, which gives rare words more weight than their frequency.",
    "one noise word drawn per pair and repeated k times":
        "Check that each of a pair's k negatives is its own draw: repeating one draw gets the frequencies "
        "right but makes the k samples identical.",
    "loss with the sign of the negative term flipped":
        "Check the sign inside the negative samples' log-sigmoid: a noise word should be pushed away, so its "
        "score enters negated.",
    "sigmoid that overflows for large scores":
        "Check `log_sigmoid` at scores of plus and minus 1000: computing the sigmoid and then its log "
        "overflows. Rewrite it so no exponential of a large positive number is taken.",
    "gradient missing the negative samples' contribution":
        "Check that the target's gradient includes the noise words: each of the k negatives pulls on the "
        "target vector too.",
    "analogy may return a query word":
        "Check which candidates your analogy may return: the three query words are excluded from the answer.",
    "cosine without normalisation (plain dot products)":
        "Check that your similarities lie between -1 and 1: cosine divides the dot product by both vectors' "
        "lengths.",
    "subsample re-seeds its generator for every sentence":
        "Check where the random generator is created: once per call, not once per sentence, or every "
        "sentence gets the same sequence of draws.",
    "nearest neighbours in reversed ascending order (ties: the higher id first)":
        "Check how ties in similarity are ordered: the lower word id comes first. Reversing an ascending sort "
        "puts the higher id first.",
    "full-softmax gradient without the expected context vector":
        "Check the softmax's normaliser in your gradient: the target's gradient is the expected context "
        "vector minus the true one, and every context row gets a share.",
    "full-softmax loss without the log-sum-exp shift":
        "Check your loss at scores of plus and minus 1000: subtract the largest score before exponentiating, "
        "as in a stable log-sum-exp.",
    "train_sgns: a word repeated in a batch gets one update (rows overwritten, not added)":
        "Check what happens when one word appears twice in a batch: both updates must be added to its row, "
        "not one written over the other.",
    "train_sgns returns W_t + W_c":
        "Check what your trainer returns: the target vectors alone, not combined with the context vectors.",
    "train_sgns: constant learning rate":
        "Check your learning rate over the run: it decays linearly toward zero across all the steps of "
        "training.",
    "train_sgns ignores sample (no subsampling)":
        "Check that your trainer uses its `sample` argument: frequent words are subsampled each epoch before "
        "the pairs are made.",
    "train_sgns: noise distribution from the counts after subsampling (each epoch's kept words)":
        "Check which counts your noise distribution uses: the full corpus counts, made once, not the words "
        "that one epoch's subsampling happened to keep.",
    "train_sgns: noise distribution from the expected counts after subsampling (counts * keep)":
        "Check which counts your noise distribution uses: the raw corpus counts, not counts reduced by the "
        "keep probabilities.",
    "train_sgns: learning rate restarts from lr at every epoch":
        "Check your schedule across epochs: the rate falls once over the whole run, measured in steps of all "
        "epochs, rather than starting again each epoch.",
    "train_sgns: learning rate falls per epoch only (constant within an epoch)":
        "Check how often your learning rate changes: it decays with every step, not only when an epoch ends.",
    "train_sgns: SparseAdam instead of plain SGD (the autograd trainer)":
        "Check your optimiser: word2vec is trained with plain stochastic gradient descent and a decaying "
        "rate. An adaptive optimiser changes the updates the checks expect.",
}
