"""Checks for Part 5: the negative-sampling loss, its hand-derived gradients, stability at |score| = 1000.

The finite-difference check differentiates the student's own `sgns_loss`
numerically, here in the trusted process, from one batched call: every row of
the batch is the same pair with one coordinate moved by +-h. It first
requires that loss to be the right one at that pair: two stubs that return
zeros (a loss and gradients of the right shapes) agree with each other
perfectly, and would otherwise earn its point.
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_close, expect_shape

NAMES = ("grad_t", "grad_pos", "grad_neg")


def _grads(found, t, c_neg, what: str) -> list[np.ndarray]:
    B, d = t.shape
    K = c_neg.shape[1]
    if not isinstance(found, (tuple, list)) or len(found) != 3:
        raise AssertionError(f"{what}: expected a tuple (grad_t, grad_pos, grad_neg), found {type(found).__name__}"
                             + (f" of length {len(found)}" if isinstance(found, (tuple, list)) else ""))
    shapes = ((B, d), (B, d), (B, K, d))
    return [expect_shape(g, s, what=f"{what}: {name}").astype(np.float64) for g, s, name in zip(found, shapes, NAMES)]


def _large_scores():
    """Pairs whose scores are exactly +-1000 (and +-1000 mixed with 0)."""
    t = np.array([[10.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    c_pos = np.array([[-100.0, 0.0], [100.0, 0.0], [0.0, -100.0]])
    c_neg = np.array([[[100.0, 0.0], [-100.0, 0.0]],
                      [[-100.0, 0.0], [100.0, 0.0]],
                      [[0.0, 100.0], [1.0, 0.0]]])
    return t, c_pos, c_neg


@check(points=2, cell="test_loss", name="log_sigmoid and sgns_loss: values on random scores and vectors")
def test_loss_values(student, reference, rng, vectors):
    x = rng.normal(scale=4.0, size=50)
    expect_close(student.log_sigmoid(x), reference.log_sigmoid(x), what="log_sigmoid of 50 random scores",
                 rtol=1e-6, atol=1e-10)
    for batch, negatives, dim in ((6, 4, 5), (3, 1, 8), (10, 7, 3)):
        t, c_pos, c_neg = vectors(rng, batch, negatives, dim)
        expect_close(student.sgns_loss(t, c_pos, c_neg), reference.sgns_loss(t, c_pos, c_neg),
                     what=f"sgns_loss (shape ({batch},)) of random t ({batch}, {dim}), c_pos ({batch}, {dim}), "
                          f"c_neg ({batch}, {negatives}, {dim})", rtol=1e-6, atol=1e-10)


@check(points=1, cell="test_loss", name="log_sigmoid and sgns_loss: finite and exact for scores of +-1000")
def test_loss_stable(student, reference):
    x = np.array([-1000.0, -800.0, -40.0, 40.0, 800.0, 1000.0])
    expect_close(student.log_sigmoid(x), reference.log_sigmoid(x),
                 what="log_sigmoid of [-1000, -800, -40, 40, 800, 1000] (log s(-1000) = -1000 exactly, log s(1000) = 0)",
                 rtol=1e-9, atol=1e-12)
    t, c_pos, c_neg = _large_scores()
    expect_close(student.sgns_loss(t, c_pos, c_neg), reference.sgns_loss(t, c_pos, c_neg),
                 what="sgns_loss of pairs whose scores are +-1000 (finite: the loss of a score of -1000 is 1000)",
                 rtol=1e-9, atol=1e-9)


@check(points=2, cell="test_gradients", name="sgns_gradients: values on random vectors")
def test_gradient_values(student, reference, rng, vectors):
    for batch, negatives, dim in ((6, 4, 5), (2, 1, 3), (8, 6, 4)):
        t, c_pos, c_neg = vectors(rng, batch, negatives, dim, scale=1.5)
        what = f"sgns_gradients of random t ({batch}, {dim}), c_pos ({batch}, {dim}), c_neg ({batch}, {negatives}, {dim})"
        found = _grads(student.sgns_gradients(t, c_pos, c_neg), t, c_neg, what)
        for f, e, name in zip(found, reference.sgns_gradients(t, c_pos, c_neg), NAMES):
            expect_close(f, e, what=f"{what}: {name}", rtol=1e-6, atol=1e-9)


@check(points=1, cell="test_gradients", name="sgns_gradients: agree with finite differences of your sgns_loss")
def test_gradient_finite_differences(student, reference, rng, vectors):
    t, c_pos, c_neg = vectors(rng, 1, 3, 4)  # one pair: d = 4, K = 3, so 4 + 4 + 12 coordinates
    expect_close(student.sgns_loss(t, c_pos, c_neg), reference.sgns_loss(t, c_pos, c_neg),
                 what="sgns_loss of one random pair (d=4, K=3), the point the finite differences start from",
                 rtol=1e-6, atol=1e-10)
    blocks = (t, c_pos, c_neg)
    h = 1e-3  # central differences: error about h**2, and float32 round-off stays below the tolerance
    rows = []  # every coordinate moved by +h and by -h: one batched call of sgns_loss
    for which, block in enumerate(blocks):
        for index in np.ndindex(block.shape):
            for sign in (1.0, -1.0):
                moved = [b.copy() for b in blocks]
                moved[which][index] += sign * h
                rows.append(moved)
    batch = [np.concatenate([r[i] for r in rows]) for i in range(3)]
    losses = expect_shape(student.sgns_loss(*batch), (len(rows),), what=f"sgns_loss of a batch of {len(rows)} pairs")
    numeric = (losses[0::2] - losses[1::2]) / (2 * h)
    found = _grads(student.sgns_gradients(t, c_pos, c_neg), t, c_neg, "sgns_gradients of one random pair")
    analytic = np.concatenate([g.reshape(-1) for g in found])
    sizes = [b.size for b in blocks]
    start = 0
    for name, size in zip(NAMES, sizes):
        expect_close(analytic[start:start + size], numeric[start:start + size],
                     what=f"{name} of one random pair (d=4, K=3) against central finite differences (h={h:g}) "
                          "of your own sgns_loss", rtol=1e-2, atol=2e-3)
        start += size


@check(points=1, cell="test_gradients", name="sgns_gradients: finite and exact for scores of +-1000")
def test_gradients_stable(student, reference):
    t, c_pos, c_neg = _large_scores()
    what = "sgns_gradients of pairs whose scores are +-1000"
    found = _grads(student.sgns_gradients(t, c_pos, c_neg), t, c_neg, what)
    for f, e, name in zip(found, reference.sgns_gradients(t, c_pos, c_neg), NAMES):
        expect_close(f, e, what=f"{what}: {name} (sigmoid(1000) = 1 and sigmoid(-1000) = 0, no NaN)",
                     rtol=1e-9, atol=1e-9)
