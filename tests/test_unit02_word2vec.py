"""Unit 2 (02-word2vec): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

Each variant is graded end to end, as a student's submission would be: the
released notebook with the solution typed in and one function swapped for a
wrong version (`submission_from_solution(..., replace=...)`), then the real
grader (structure check, sandboxed worker, hidden checks).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lmcourse.grading import grade_notebook
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
AID = "02-word2vec"
MAX_SCORE = 25

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


def _scores(result: dict) -> dict[str, float]:
    return {t["name"]: t["score"] for t in result["tests"]}


@pytest.fixture(scope="module")
def solution_result(tmp_path_factory):
    nb = submission_from_solution(ROOT, AID, tmp_path_factory.mktemp("solution"))
    return grade_notebook(ROOT, AID, nb, tier="cpu")


def test_release_is_in_sync_and_has_no_solution():
    release = nbmod.load_release(ROOT, AID)
    code = "\n".join(nbmod.cell_source(c) for c in release.cells if c.cell_type == "code")
    assert "BEGIN SOLUTION" not in code and "np.logaddexp" not in code and "index_add_(" not in code
    assert code.count("raise NotImplementedError()") == 12  # one per function the student writes


@pytest.mark.slow
def test_test_cells_points_match_checks(solution_result):
    cells = nbmod.test_cells(nbmod.load_release(ROOT, AID))
    assert sum(cells.values()) == solution_result["max_score"] == MAX_SCORE
    per_cell: dict[str, float] = {}
    for t in solution_result["tests"]:
        per_cell[t["cell"]] = per_cell.get(t["cell"], 0.0) + t["max_score"]
    assert per_cell == {k: float(v) for k, v in cells.items()}


@pytest.mark.slow
def test_solution_scores_full_marks(solution_result):
    r = solution_result
    failed = {t["name"]: t.get("output", "") for t in r["tests"] if t["score"] < t["max_score"]}
    assert not failed, failed
    assert r["score"] == r["max_score"] == MAX_SCORE
    assert r["status"] == "ok"


@pytest.mark.slow
def test_release_scores_zero(tmp_path):
    r = grade_notebook(ROOT, AID, released_notebook(ROOT, AID, tmp_path), tier="cpu")
    assert r["score"] == 0 and r["max_score"] == MAX_SCORE
    assert all("NotImplementedError" in t.get("output", "") for t in r["tests"])


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_known_wrong_variant_is_caught(variant, tmp_path, solution_result):
    function, source, catchers = VARIANTS[variant]
    nb = submission_from_solution(ROOT, AID, tmp_path, replace={function: source.strip("\n")})
    r = grade_notebook(ROOT, AID, nb, tier="cpu")
    scores = _scores(r)
    for name in catchers:
        assert name in scores, f"no check named {name!r}"
        assert scores[name] == 0, f"{variant}: check {name!r} should fail but scored {scores[name]}"
        output = next(t.get("output", "") for t in r["tests"] if t["name"] == name)
        assert output and "def " not in output  # a message, never code
    assert r["score"] < r["max_score"]
    assert math.isclose(r["max_score"], MAX_SCORE)
