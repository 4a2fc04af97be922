"""Checks for Part 1: batchify cuts a token stream into (n_batches, B, T) inputs and next-token targets."""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_equal, expect_shape
from lmcourse.grading.sandbox import StudentError

SIZES = [(1000, 4, 7), (101, 2, 5), (64, 3, 20), (21, 4, 5), (500, 1, 499)]  # (N, B, T): tails of every size


def _batches(result, what: str) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{what}: expected a pair (x, y) of int64 tensors, found {type(result).__name__}")
    x, y = (np.asarray(v) for v in result)
    for name, v in (("x", x), ("y", y)):
        if v.ndim != 3 or not np.issubdtype(v.dtype, np.integer):
            raise AssertionError(f"{what}: {name} must be an integer tensor of shape (n_batches, B, T), "
                                 f"found shape {v.shape} and dtype {v.dtype}")
    return x, y


@check(points=1, cell="test_batchify", name="batchify: x and y on random streams, lane by lane, batch after batch")
def test_batchify_values(student, reference, rng):
    for n, b, t in SIZES:
        ids = rng.integers(0, 50, size=n)
        what = f"batchify of a random stream of {n} ids with batch_size={b}, block_size={t}"
        x, y = _batches(student.batchify(ids, b, t), what)
        ex, ey = (v.numpy() for v in reference.batchify(ids, b, t))
        expect_shape(x, ex.shape, what=f"{what}: x")
        expect_equal(x, ex, what=f"{what}: x")
        expect_equal(y, ey, what=f"{what}: y")


@check(points=1, cell="test_batchify", name="batchify: every target is the next token of the stream (shifted by one)",
       visibility="visible")
def test_batchify_shift(student):
    n, b, t = 200, 3, 8
    stream = np.arange(n)  # token i is i, so the next token of i is i + 1
    what = f"batchify(0..{n - 1}, batch_size={b}, block_size={t})"
    x, y = _batches(student.batchify(stream, b, t), what)
    if x.shape != y.shape or x.size == 0:
        raise AssertionError(f"{what}: x and y must have the same non-empty shape, found {x.shape} and {y.shape}")
    if not np.array_equal(y, x + 1):
        k, row, col = (int(i) for i in np.argwhere(y != x + 1)[0])
        raise AssertionError(f"{what}: the target of input token {int(x[k, row, col])} (batch {k}, lane {row}, "
                             f"position {col}) should be the token after it, {int(x[k, row, col]) + 1}; "
                             f"found {int(y[k, row, col])}")
    if len(x) > 1 and not np.array_equal(x[1:, :, 0], x[:-1, :, -1] + 1):
        raise AssertionError(f"{what}: row b of batch k + 1 must continue row b of batch k (the lanes are "
                             "read in order, T tokens at a time)")


@check(points=1, cell="test_batchify", name="batchify: a ValueError when the stream is too short for one batch")
def test_batchify_too_short(student):
    for n, b, t in ((8, 2, 4), (3, 1, 3), (1, 1, 1)):
        what = f"batchify of {n} tokens with batch_size={b}, block_size={t} (each lane needs {t} + 1 tokens)"
        try:
            result = student.batchify(np.arange(n), b, t)
        except StudentError as err:
            if err.kind == "exception" and " raised ValueError" in err.message:
                continue
            raise AssertionError(f"{what}: expected a ValueError; {err.message}") from None
        raise AssertionError(f"{what}: expected a ValueError, but it returned {type(result).__name__}")
