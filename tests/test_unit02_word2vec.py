"""Unit 2 (02-word2vec): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants.
"""

from __future__ import annotations

from unit_contract import UnitContract


# The checks' names, as the student sees them.
PAIRS = "skipgram_pairs: every (centre, context) pair of the window, window 1..4"
PAIRS_EDGES = "skipgram_pairs: no pair crosses a sentence boundary; empty, one-word and short sentences"
PAIRS_NO_CENTRE = "skipgram_pairs: a position is never its own context"
NOISE = "noise_distribution: proportional to count ** 0.75, sums to 1"
LOSS = "log_sigmoid and sgns_loss: values on random scores and vectors"
LOSS_STABLE = "log_sigmoid and sgns_loss: finite and exact for scores of +-1000"
GRADS = "sgns_gradients: values on random vectors"
GRADS_FD = "sgns_gradients: agree with finite differences of your sgns_loss"
COSINE = "cosine_similarity: normalised dot products, between -1 and 1"
NEIGHBOURS = "nearest_neighbours: the k most similar words by cosine, the word itself left out"
ANALOGY = "analogy: closest to unit(b) - unit(a) + unit(c), never a query word"
TRAINING = "train_sgns: planted word clusters are recovered (similar within, not across)"

# name -> (function replaced, wrong definition, checks that must score 0)
VARIANTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "window includes the centre word (offset 0)": ("skipgram_pairs", '''
def skipgram_pairs(sentences, window):
    centres, contexts = [], []
    for s in sentences:
        s = list(s)
        for i in range(len(s)):
            for j in range(-window, window + 1):  # bug: j = 0 pairs a word with itself
                if 0 <= i + j < len(s):
                    centres.append(s[i])
                    contexts.append(s[i + j])
    return np.array(centres, dtype=np.int64), np.array(contexts, dtype=np.int64)
''', (PAIRS, PAIRS_EDGES, PAIRS_NO_CENTRE)),
    "pairs cross sentence boundaries (one stream, no sentence ids)": ("skipgram_pairs", '''
def skipgram_pairs(sentences, window):
    stream = np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1) for s in sentences] + [np.zeros(0, np.int64)])
    centres, contexts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for j in range(1, window + 1):
        left, right = stream[:-j], stream[j:]  # bug: the last words of a sentence see the next one
        centres += [left, right]
        contexts += [right, left]
    return np.concatenate(centres), np.concatenate(contexts)
''', (PAIRS, PAIRS_EDGES)),
    "noise distribution without the 0.75 power": ("noise_distribution", '''
def noise_distribution(counts, power=0.75):
    weights = np.asarray(counts, dtype=np.float64)  # bug: the unigram distribution itself
    return weights / weights.sum()
''', (NOISE,)),
    "loss with the sign of the negative term flipped": ("sgns_loss", '''
def sgns_loss(t, c_pos, c_neg):
    t, c_pos, c_neg = (np.asarray(a, dtype=np.float64) for a in (t, c_pos, c_neg))
    score_pos = np.einsum("bd,bd->b", t, c_pos)
    score_neg = np.einsum("bkd,bd->bk", c_neg, t)
    return -log_sigmoid(score_pos) - log_sigmoid(score_neg).sum(axis=1)  # bug: log s(+t.c_neg)
''', (LOSS,)),
    "sigmoid that overflows for large scores": ("log_sigmoid", '''
def log_sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        return np.log(1.0 / (1.0 + np.exp(-x)))  # exp(1000) = inf: log(0) = -inf
''', (LOSS_STABLE,)),
    "gradient missing the negative samples' contribution": ("sgns_gradients", '''
def sgns_gradients(t, c_pos, c_neg):
    t, c_pos, c_neg = (np.asarray(a, dtype=np.float64) for a in (t, c_pos, c_neg))
    score_pos = np.einsum("bd,bd->b", t, c_pos)
    score_neg = np.einsum("bkd,bd->bk", c_neg, t)
    weight_pos = np.exp(log_sigmoid(score_pos)) - 1.0
    weight_neg = np.exp(log_sigmoid(score_neg))
    grad_t = weight_pos[:, None] * c_pos  # bug: the K noise terms are missing
    grad_pos = weight_pos[:, None] * t
    grad_neg = weight_neg[:, :, None] * t[:, None, :]
    return grad_t, grad_pos, grad_neg
''', (GRADS, GRADS_FD)),
    "analogy may return a query word": ("analogy", '''
def analogy(embeddings, a, b, c):
    E = np.asarray(embeddings, dtype=np.float64)
    unit = E / np.linalg.norm(E, axis=1, keepdims=True)
    a, b, c = (np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (a, b, c))
    return np.argmax(cosine_similarity(unit[b] - unit[a] + unit[c], unit), axis=1)  # bug: a, b, c not excluded
''', (ANALOGY,)),
    "cosine without normalisation (plain dot products)": ("cosine_similarity", '''
def cosine_similarity(A, B):
    return np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64).T  # bug: no division by the lengths
''', (COSINE, NEIGHBOURS)),
}


class TestUnit02Word2vec(UnitContract):
    AID = "02-word2vec"
    MAX_SCORE = 25
    STUDENT_FUNCTIONS = 12
    RELEASE_MUST_NOT_CONTAIN = ("np.logaddexp", "index_add_(")
    VARIANTS = VARIANTS
