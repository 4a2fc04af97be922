"""Check for Part 5: training on a synthetic corpus with planted word clusters recovers them.

Words of one cluster share all their contexts and words of different
clusters share none, so a working skip-gram trainer must make the first
similar and the second not. The run is small (20 words, about 10,000 pairs
per epoch): the reference trains it in about a second on one CPU core.

`planted_clusters` puts word w in cluster w // 5, a rule anyone can read, so
the corpus reaches the student's code under a secret relabelling of its word
ids (`lmcourse.grading.training.Relabelling`, fresh for every grade): vectors
written in advance for the fixed ids (one-hot clusters, say) line up with
nothing. The vectors that come back are put back in the original order before
the clusters are scored. This does not stop code that finds the clusters from
the corpus it is given without word2vec (the words that share sentences):
that is learning from the data, by another method.
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_shape
from lmcourse.grading.training import Relabelling

N_CLUSTERS, PER_CLUSTER = 4, 5
CONFIG = dict(dim=16, window=2, negatives=3, epochs=5, sample=0, lr=0.025, batch_size=256, seed=0)
MIN_WITHIN = 0.7  # mean cosine of two different words of one cluster (the reference: about 0.99)
MIN_GAP = 0.3     # ... minus the mean cosine of words of different clusters (the reference: about 0.7)


@check(points=3, cell="test_training", name="train_sgns: planted word clusters are recovered (similar within, not across)")
def test_planted_clusters(student, reference, rng):
    V = N_CLUSTERS * PER_CLUSTER
    sentences = reference.planted_clusters(N_CLUSTERS, PER_CLUSTER, n_sentences=400, sentence_length=6,
                                           seed=int(rng.integers(1000)))
    relabel = Relabelling.secret(V)  # from `secrets`, not from rng: cluster membership is unknowable
    settings = ", ".join(f"{k}={v}" for k, v in CONFIG.items())
    what = (f"train_sgns on a planted-cluster corpus ({N_CLUSTERS} clusters of {PER_CLUSTER} words, 400 sentences, "
            f"word ids relabelled by a secret permutation; {settings})")
    E = expect_shape(student.train_sgns(relabel.sentences(sentences), V, **CONFIG, timeout=60), (V, CONFIG["dim"]),
                     what=what)
    if E.dtype.kind != "f":
        raise AssertionError(f"{what}: expected floating-point vectors, found dtype {E.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        E = E.astype(np.float64)
    if not np.all(np.isfinite(E)):
        raise AssertionError(f"{what}: the vectors hold NaN or infinite values")
    E = relabel.rows_by_old_id(E)  # row w: the vector of the corpus's word w again
    norms = np.linalg.norm(E, axis=1)
    if not np.all(norms > 0) or not np.all(np.isfinite(norms)):
        raise AssertionError(f"{what}: {int((~(norms > 0)).sum())} word vector(s) are all zeros (or too large to "
                             "measure); return the target vectors W_t, not the context vectors (initialised to 0)")
    unit = E / norms[:, None]
    cos = unit @ unit.T
    cluster = np.arange(V) // PER_CLUSTER
    same = (cluster[:, None] == cluster[None, :]) & ~np.eye(V, dtype=bool)
    across = cluster[:, None] != cluster[None, :]
    within, between = float(cos[same].mean()), float(cos[across].mean())
    if not (within >= MIN_WITHIN and within - between >= MIN_GAP):  # written so that a NaN fails
        raise AssertionError(f"{what}: expected a mean cosine >= {MIN_WITHIN} between words of the same cluster and "
                             f"at least {MIN_GAP} more than between words of different clusters; found {within:.2f} "
                             f"within and {between:.2f} across. Check the update direction (gradient descent), "
                             "the learning rate schedule and that every batch updates the rows it used")
