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
    stream = np.random.default_rng(3).permutation(n)  # distinct ids: each one's next token is unique
    after = np.empty(n, dtype=np.int64)
    after[stream[:-1]] = stream[1:]  # after[i]: the token that follows token i in the stream
    what = f"batchify of a stream of {n} distinct ids with batch_size={b}, block_size={t}"
    x, y = _batches(student.batchify(stream, b, t), what)
    lanes = (n - 1) // b
    shape = (lanes // t, b, t)
    if x.shape != shape or y.shape != shape:
        raise AssertionError(f"{what}: x and y must have the shape (n_batches, B, T) = {shape} ({b} lanes of "
                             f"{lanes} tokens, {shape[0]} full batches of {t}); found {x.shape} and {y.shape}")
    has_next = np.zeros(n, dtype=bool)
    has_next[stream[:-1]] = True  # every token but the last one of the stream
    if x.min() < 0 or x.max() >= n or not has_next[x].all():
        raise AssertionError(f"{what}: x holds ids that are not inputs of the stream (the stream's ids, "
                             "except its last token, which has no target)")
    wrong = np.argwhere(y != after[x])
    if len(wrong):
        k, row, col = (int(i) for i in wrong[0])
        raise AssertionError(f"{what}: the target at batch {k}, lane {row}, position {col} is not the token that "
                             f"follows its input in the stream ({len(wrong)} of {y.size} targets are not)")
    if not np.array_equal(x[1:, :, 0], after[x[:-1, :, -1]]):
        raise AssertionError(f"{what}: row b of batch k + 1 must continue row b of batch k (the lanes are "
                             "read in order, T tokens at a time)")


@check(points=1, cell="test_batchify", name="batchify: a ValueError when the stream is too short for one batch, "
                                           "one batch when it is just long enough")
def test_batchify_too_short(student):
    for n, b, t in ((8, 2, 4), (3, 1, 3), (1, 1, 1)):
        what = (f"batchify of {n} tokens with batch_size={b}, block_size={t} (lanes of ({n} - 1) // {b} = "
                f"{(n - 1) // b} tokens, fewer than block_size: not one full batch)")
        try:
            result = student.batchify(np.arange(n), b, t)
        except StudentError as err:
            if err.kind == "exception" and " raised ValueError" in err.message:
                continue
            raise AssertionError(f"{what}: expected a ValueError; {err.message}") from None
        raise AssertionError(f"{what}: expected a ValueError, but it returned {type(result).__name__}")
    for n, b, t in ((9, 2, 4), (4, 1, 3), (2, 1, 1), (13, 3, 4)):  # B * T + 1 tokens: exactly one batch
        what = (f"batchify of {n} tokens with batch_size={b}, block_size={t} (lanes of ({n} - 1) // {b} = {t} "
                "tokens: exactly one batch)")
        x, y = _batches(student.batchify(np.arange(n), b, t), what)
        expect_shape(x, (1, b, t), what=f"{what}: x")
        expect_shape(y, (1, b, t), what=f"{what}: y")
