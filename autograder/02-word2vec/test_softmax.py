"""Checks for Part 4: the full-softmax skip-gram loss and its gradient, against autograd.

The expected values come from PyTorch in this (trusted) process, in float64:
the loss as `cross_entropy` of the scores t @ C.T, the gradients by autograd
of the loss summed over the batch. The batches repeat context words (more
pairs than words), so a gradient for C that keeps one pair's term per word
instead of their sum is caught, and scores of +-1000 try the normaliser's
stability.
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.grading.checks import check, expect_close, expect_shape


def _autograd(t: np.ndarray, C: np.ndarray, contexts: np.ndarray):
    """(loss (B,), d loss.sum() / d t (B, d), d loss.sum() / d C (V, d)) by torch, in float64."""
    t_ = torch.tensor(t, dtype=torch.float64, requires_grad=True)
    C_ = torch.tensor(C, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(t_ @ C_.T, torch.as_tensor(contexts, dtype=torch.int64),
                                             reduction="none")
    loss.sum().backward()
    return loss.detach().numpy(), t_.grad.numpy(), C_.grad.numpy()


def _cases(rng: np.random.Generator):
    """(what, t, C, contexts): random toy vocabularies (contexts repeating), then scores of +-1000."""
    for B, V, d in ((12, 5, 3), (1, 7, 4), (30, 50, 8)):
        yield (f"t ({B}, {d}), C ({V}, {d}) random, {B} random context ids",
               rng.normal(size=(B, d)), rng.normal(size=(V, d)), rng.integers(0, V, size=B))
    t = np.array([[10.0, 0.0], [0.0, 10.0], [10.0, 0.0]])
    C = np.array([[100.0, 0.0], [-100.0, 0.0], [0.0, 100.0], [0.0, -100.0]])
    yield "scores of +-1000 and 0 (t (3, 2), C (4, 2), contexts [1, 0, 0])", t, C, np.array([1, 0, 0])


@check(points=1, cell="test_softmax", name="softmax_loss: -log softmax of the scores at the true context; finite at +-1000")
def test_softmax_loss(student, rng):
    for what, t, C, contexts in _cases(rng):
        expected, _, _ = _autograd(t, C, contexts)
        found = expect_shape(student.softmax_loss(t, C, contexts), (len(t),), what=f"softmax_loss of {what}")
        expect_close(found, expected, what=f"softmax_loss of {what} (one loss per pair, nats)", rtol=1e-6, atol=1e-9)


@check(points=2, cell="test_softmax",
       name="softmax_gradients: grad_t and grad_C match autograd of the summed loss; repeated contexts add up")
def test_softmax_gradients(student, rng):
    for what, t, C, contexts in _cases(rng):
        _, grad_t, grad_C = _autograd(t, C, contexts)
        what = f"softmax_gradients of {what}"
        found = student.softmax_gradients(t, C, contexts)
        if not isinstance(found, (tuple, list)) or len(found) != 2:
            raise AssertionError(f"{what}: expected a pair (grad_t, grad_C), found {type(found).__name__}"
                                 + (f" of length {len(found)}" if isinstance(found, (tuple, list)) else ""))
        mine_t = expect_shape(found[0], t.shape, what=f"{what}: grad_t").astype(np.float64)
        mine_C = expect_shape(found[1], C.shape, what=f"{what}: grad_C").astype(np.float64)
        expect_close(mine_t, grad_t, what=f"{what}: grad_t, against autograd", rtol=1e-6, atol=1e-9)
        expect_close(mine_C, grad_C, what=f"{what}: grad_C (the gradient of the loss summed over the batch), "
                                          "against autograd", rtol=1e-6, atol=1e-9)
