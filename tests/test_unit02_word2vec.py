"""Unit 2 (02-word2vec): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py); autograder/02-word2vec/mistakes.py
names the checks and holds the known-wrong variants."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from unit_contract import UnitContract

# The checks' names and the known mistakes live in the course: autograder/02-word2vec/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "02-word2vec")
TRAINING = _M.TRAINING
VARIANTS = _M.VARIANTS
other_algorithms = _M.other_algorithms
autograd_trainer = _M.autograd_trainer
numpy_trainer = _M.numpy_trainer


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
