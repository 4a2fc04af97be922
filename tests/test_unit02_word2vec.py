"""Unit 2 (02-word2vec): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants.
"""

from __future__ import annotations

from lmcourse.grading.testing import Edit
from unit_contract import UnitContract


# The checks' names, as the student sees them.
PAIRS = "skipgram_pairs: every (centre, context) pair of the window, window 1..4"
PAIRS_EDGES = "skipgram_pairs: no pair crosses a sentence boundary; empty, one-word and short sentences"
PAIRS_NO_CENTRE = "skipgram_pairs: a position is never its own context"
NOISE = "noise_distribution: proportional to count ** 0.75, sums to 1"
NEGATIVES = "draw_negatives: shape (n, k), seeded, frequencies follow the noise distribution"
LOSS = "log_sigmoid and sgns_loss: values on random scores and vectors"
LOSS_STABLE = "log_sigmoid and sgns_loss: finite and exact for scores of +-1000"
GRADS = "sgns_gradients: values on random vectors"
GRADS_FD = "sgns_gradients: agree with finite differences of your sgns_loss"
COSINE = "cosine_similarity: normalised dot products, between -1 and 1"
NEIGHBOURS = "nearest_neighbours: the k most similar words by cosine, the word itself left out"
ANALOGY = "analogy: closest to unit(b) - unit(a) + unit(c), never a query word"
TRAINING = "train_sgns: planted word clusters are recovered (similar within, not across)"

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
}


class TestUnit02Word2vec(UnitContract):
    AID = "02-word2vec"
    MAX_SCORE = 25
    STUDENT_FUNCTIONS = 12
    RELEASE_MUST_NOT_CONTAIN = ("np.logaddexp", "index_add_(")
    VARIANTS = VARIANTS
