"""Unit 2 (02-word2vec): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py). The checks' names and the
known-wrong variants now live in autograder/02-word2vec/mistakes.py (course data, with a hint for each);
this file keeps the correct alternative implementations (ALTERNATES) and the test class."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from unit_contract import UnitContract

_M = mistakes.module(Path(__file__).resolve().parent.parent, "02-word2vec")
# the checks' names and the known mistakes: autograder/02-word2vec/mistakes.py
# Every check name is re-exported: test_training_contract's _names() reads them here to grade one check alone.
PAIRS, PAIRS_EDGES, PAIRS_NO_CENTRE = _M.PAIRS, _M.PAIRS_EDGES, _M.PAIRS_NO_CENTRE
SUBSAMPLE, NOISE, NEGATIVES = _M.SUBSAMPLE, _M.NOISE, _M.NEGATIVES
SOFTMAX_LOSS, SOFTMAX_GRADS = _M.SOFTMAX_LOSS, _M.SOFTMAX_GRADS
LOSS, LOSS_STABLE, GRADS, GRADS_FD = _M.LOSS, _M.LOSS_STABLE, _M.GRADS, _M.GRADS_FD
COSINE, NEIGHBOURS, ANALOGY = _M.COSINE, _M.NEIGHBOURS, _M.ANALOGY
TRAINING, TRAINING_SCHEDULE, TRAINING_TARGET = _M.TRAINING, _M.TRAINING_SCHEDULE, _M.TRAINING_TARGET
TRAINING_SUBSAMPLING, TRAINING_STEP = _M.TRAINING_SUBSAMPLING, _M.TRAINING_STEP
TRAINING_NOISE, TRAINING_DECAY = _M.TRAINING_NOISE, _M.TRAINING_DECAY
VARIANTS = _M.VARIANTS
# the chapter's autograd trainer: a correct alternate here, and edited by the SparseAdam mistake there
autograd_trainer = _M.autograd_trainer


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


ALTERNATES = {
    "inverse-CDF negatives, log1p log-sigmoid, looped pairs, one-pass subsampling, lexsort, scipy softmax":
        other_algorithms,
    # the autograd trainer uses the solution's Part 1-3 functions, the NumPy trainer the alternatives above
    "autograd trainer (sparse nn.Embedding, torch.optim.SGD, torch.multinomial, rate by batch index)":
        {"train_sgns": autograd_trainer},
    "NumPy trainer (sgns_gradients, np.add.at) on the other algorithms":
        dict(other_algorithms, train_sgns=numpy_trainer),
}


class TestUnit02Word2vec(UnitContract):
    AID = "02-word2vec"
    MAX_SCORE = 33
    STUDENT_FUNCTIONS = 14
    RELEASE_MUST_NOT_CONTAIN = ("np.logaddexp", "index_add_(")
    VARIANTS = VARIANTS
    ALTERNATES = ALTERNATES
    ALTERNATES_THAT_TRAIN = tuple(name for name in ALTERNATES if "trainer" in name)
