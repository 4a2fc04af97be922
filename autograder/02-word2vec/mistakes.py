"""Known mistakes of 02-word2vec: the wrong implementations students really write, from the parts' functions
(windows that cross sentences or pair a word with itself, noise without the 0.75 power, overflowing
log-sigmoids and softmaxes, gradients missing a term) to the trainer (updates overwritten, the wrong vectors
returned, a learning rate that restarts or falls per epoch, noise counted after subsampling, an adaptive optimiser).

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

# The chapter's autograd trainer, a correct implementation: the SparseAdam mistake below edits it, and the
# test file grades it as an alternate.
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


def _edited(source: str, old: str, new: str) -> str:
    """`source` with `old` (present exactly once) replaced by `new`: a variant of an alternate cannot drift."""
    if source.count(old) != 1:
        raise ValueError(f"expected {old!r} exactly once in the alternate trainer")
    return source.replace(old, new)


# the autograd trainer with torch's Adam for sparse gradients in place of plain SGD
VARIANTS["train_sgns: SparseAdam instead of plain SGD (the autograd trainer)"] = (
    "train_sgns", _edited(autograd_trainer, "sgd = torch.optim.SGD(", "sgd = torch.optim.SparseAdam("),
    (TRAINING_STEP,))

# Checks a mistake's signature leaves out unless the mistake is written to fail them: the training runs,
# and the checks that load real weights (too slow to run for every mistake). None here: this unit's training
# checks take about a second, and every mistake runs them.
LEAVE_OUT: tuple[str, ...] = ()

# What a student reads when their failing checks match the mistake: advice, never code.
HINTS: dict[str, str] = {
    "window includes the centre word (offset 0)":
        "Check which offsets your window visits: a position is never its own context, so each word is paired "
        "only with the other words around it, never with itself.",
    "pairs cross sentence boundaries (one stream, no sentence ids)":
        "Check the pairs made by the last words of a sentence: a window stops at the end of its sentence. Once "
        "the sentences are joined into one stream, ask what still tells you where each one ends.",
    "noise distribution without the 0.75 power":
        "Check how your noise distribution weighs rare words against frequent ones: word2vec raises each count "
        "to the power 0.75 before normalising, which flattens the plain unigram distribution.",
    "one noise word drawn per pair and repeated k times":
        "Check that the k negatives of a pair are k separate draws: copying one draw k times keeps every word's "
        "frequency right, but the samples of a pair are no longer independent.",
    "loss with the sign of the negative term flipped":
        "Check the sign of the noise words' scores inside their log-sigmoid: the loss should reward a low "
        "score for a noise word, pushing it away from the target, not treat it as a true context.",
    "sigmoid that overflows for large scores":
        "Check `log_sigmoid` at scores far from zero: forming the sigmoid first and then taking its log "
        "overflows to log of zero. Look for a form of log sigmoid that never exponentiates a large positive "
        "number.",
    "gradient missing the negative samples' contribution":
        "Check that the gradient for the target vector has a term for every noise word: the target appears in "
        "all k negative terms of the loss as well as in the positive one.",
    "analogy may return a query word":
        "Check which words your `analogy` may answer with: the offset vector usually lies closest to a query "
        "word, so the standard protocol never lets a, b or c be the answer.",
    "cosine without normalisation (plain dot products)":
        "Check that your similarities lie between -1 and 1: a cosine divides each dot product by the lengths "
        "of both vectors, so long, frequent-word vectors do not win by size alone.",
    "subsample re-seeds its generator for every sentence":
        "Check where your random generator is created: seeded once per call, its draws run on from sentence to "
        "sentence. Seeding it again for each sentence gives every sentence the same draws.",
    "nearest neighbours in reversed ascending order (ties: the higher id first)":
        "Check how your `nearest_neighbours` orders words of equal cosine: the lower id comes first. Reversing "
        "an ascending stable sort also reverses the order of ties.",
    "full-softmax gradient without the expected context vector":
        "Check that your gradient includes the normaliser's part: the target's gradient is the expected "
        "context vector under the softmax minus the true one, and every context row gets its share.",
    "full-softmax loss without the log-sum-exp shift":
        "Check `softmax_loss` at very large scores: exponentials of the raw scores overflow. The log-sum-exp "
        "is unchanged when every score of a row is shifted by the same amount, so choose a shift that keeps "
        "the exponents small.",
    "train_sgns: a word repeated in a batch gets one update (rows overwritten, not added)":
        "Check what your update does to a word that appears several times in one batch: the loss is summed, "
        "so its row must receive the sum of all its gradients, not only one of them.",
    "train_sgns returns W_t + W_c":
        "Check which vectors `train_sgns` returns: the target vectors alone. Adding the context vectors makes "
        "words that are each other's contexts look alike.",
    "train_sgns: constant learning rate":
        "Check your learning rate near the end of training: following word2vec, it falls linearly from its "
        "starting value to about zero, so the last steps only fine-tune the vectors.",
    "train_sgns ignores sample (no subsampling)":
        "Check that `train_sgns` uses its `sample` argument: frequent words are subsampled before each "
        "epoch's pairs are made, so stop words do not crowd out the informative contexts.",
    "train_sgns: noise distribution from the counts after subsampling (each epoch's kept words)":
        "Check which counts your noise words come from: the whole corpus's raw counts, computed once, not the "
        "words that one epoch's subsampling happened to keep.",
    "train_sgns: noise distribution from the expected counts after subsampling (counts * keep)":
        "Check which counts your noise distribution is built from: subsampling decides which pairs are made, "
        "but the noise distribution uses the raw counts, not counts scaled down by the keep probabilities.",
    "train_sgns: learning rate restarts from lr at every epoch":
        "Check your learning rate at the start of each epoch: progress is the share of the whole run done, so "
        "the rate carries on from where the last epoch ended instead of jumping back up.",
    "train_sgns: learning rate falls per epoch only (constant within an epoch)":
        "Check how often your learning rate changes: it falls batch by batch over the run, not in steps once "
        "per epoch, so within an epoch every batch gets a slightly smaller rate.",
    "train_sgns: SparseAdam instead of plain SGD (the autograd trainer)":
        "Check which optimiser updates your vectors: word2vec takes plain SGD steps on the summed loss. An "
        "adaptive optimiser scales each coordinate's step to about the learning rate, so with a small rate "
        "the vectors barely move.",
}
