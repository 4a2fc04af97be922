"""Checks for Part 6: training on synthetic corpora whose answer is known, one behaviour of the spec each.

Every corpus plants word clusters: the words of a cluster share all their
contexts and the words of different clusters share none, so a working
skip-gram trainer makes the first similar and the second not. Each check
then sets up a corpus in which one required behaviour of `train_sgns`
changes the result by far more than the seed-to-seed noise:

- TRAINING (planted clusters, batches of 1,024 pairs, 3 epochs): the loss is
  summed over the batch, the update descends, and a word that occurs several
  times in a batch gets the sum of its gradients (`index_add_`). A trainer
  that overwrites the rows instead of adding to them makes one update per
  word and batch, about 1/50 of the learning, and a mean loss 1/1,024.
- TRAINING_SCHEDULE (the same corpus sorted by cluster, lr = 0.05): the pairs
  are shuffled and the learning rate decays to about 0 by the end of the run.
  Unshuffled, whole batches hold one cluster and the run goes unstable; with
  a constant rate, the words of one cluster, which are interchangeable, never
  settle on the same vector. The check measures how far the vectors of one
  cluster stay apart, inside the span of the cluster means (the part of a
  vector no context ever reaches keeps its random initial value whatever the
  schedule, so it is left out).
- TRAINING_TARGET (each cluster in two halves A and B that alternate in every
  sentence, window 1): the returned vectors are the target vectors W_t. A
  word of A has only B words as contexts and shares all of them with the
  other A words; so in W_t the A words are alike and unlike their B partners,
  while W_t + W_c makes every A word almost the same vector as its B partners
  (a word's context vector sits next to its partners' target vectors).
- TRAINING_SUBSAMPLING (a stop word between every two cluster words,
  window 1, sample = 0.012): `sample` subsamples. Without subsampling every
  window-1 pair is a word and the stop word, the only context any word has,
  and the clusters cannot be told apart; subsampling removes about 80% of the
  stop words (keep probability 0.19; the cluster words, with f(w) about 2.4 s,
  are almost always kept), and the pairs of neighbours within a cluster appear.
- TRAINING_STEP (planted clusters, 4,000 sentences, lr = 0.001, batches of
  24,576 pairs, 6 epochs: 18 steps): each step is plain SGD on the summed
  loss. A batch holds every word about 1,200 times, so a step moves its vector
  by lr times the sum of ~1,200 gradients and the clusters form; an optimiser
  that scales each coordinate's step to about lr (Adam, SparseAdam, Adagrad,
  RMSprop) moves each coordinate by about 0.001 a step, 0.018 in all, no more
  than word2vec's initial values (uniform in +-0.031), and they do not.
- TRAINING_NOISE (the planted clusters plus 48,000 one-word sentences of one
  more word, 95% of the tokens; negatives = 2, batches of 256, 6 epochs):
  the noise distribution comes from the corpus's counts, before subsampling.
  The corpus is trained twice, with sample = 0 and with sample = 0.002, which
  keeps about 5% of the frequent word and every cluster word (keep
  probability 1). A one-word sentence has no pairs, so both runs have the same
  pairs and, from the raw counts, the same noise distribution (82% of the
  draws on the frequent word): for a correct trainer they are one training
  problem, and the mean cosine across clusters agrees within the seed noise.
  From the counts after subsampling, the second run gives the frequent word
  31% of the draws and the cluster words 3.7 times as many, and the clusters
  settle differently (the mean cosine across them is 0.09-0.13 higher). Six
  epochs bring both runs near their end state: after 3 epochs with one
  negative, the wrong trainer's change fell from 0.8 to about 0 as the scale
  of W_t's start grew from word2vec's to randn * 0.3.
- TRAINING_DECAY (clusters of exactly interchangeable words: a cluster's
  sentences are rotations of its de Bruijn sequence, so with window 1 every
  ordered pair of its words is a pair equally often, and its words have equal
  counts; lr = 0.035, batches of 500 pairs): the rate falls batch by batch
  over the whole run. Nothing but the training's noise keeps two words of a
  cluster apart, so `spread` measures the noise of the last steps. Trained in
  one epoch of 140 batches, a rate that falls per epoch only (a scheduler
  stepped once an epoch) stays at lr to the end; trained in 70 epochs of 2
  batches, a rate that restarts at every epoch alternates between lr and
  lr / 2. Both end noisy. (On the planted corpora a restarting rate gave
  0.019-0.038 against the solution's 0.014-0.025: their words have unequal
  counts, which leaves a spread of its own.)

The corpora reach the student's code under a secret relabelling of the word
ids (`lmcourse.grading.training.Relabelling`, fresh for every grade), so that
vectors written in advance for the fixed ids (one-hot clusters, say) line up
with nothing; the vectors that come back are put back in the original order
before they are scored. The vocabulary has three more ids that never occur,
as a course vocabulary's special tokens <BOS>, <EOS>, <UNK> (count 0): their
rows are not scored. This does not stop code that finds the clusters from
the corpus it is given without word2vec (the words that share sentences):
that is learning from the data, by another method.

Calibration: the statistics of each check for the solution's `train_sgns`
over 200 corpora and fresh secret relabellings (corpus seeds 0-199), for two
correct alternates of tests/test_unit02_word2vec.py (an autograd trainer and
a NumPy trainer, 50 each) and for known-wrong trainers (30 each); 2 shared
CPU cores (load 2-6), torch 2.13, 2026-11-23. "within": mean cosine of two
words of a cluster; "gap": within minus the mean cosine across clusters.

| check | passes when | solution (200) | alternates (2 x 50) | known-wrong (30 each) |
|---|---|---|---|---|
| TRAINING | within >= 0.7 and gap >= 0.3 | within 0.999, gap 0.691-0.704 | within 0.998-0.999, gap 0.688-0.704 | rows overwritten (200 runs): within 0.29-0.60, gap 0.06-0.27; loss averaged: within -0.08-0.07 |
| TRAINING_SCHEDULE | the same, and spread <= 0.045 | spread 0.014-0.025 | spread 0.015-0.024 | constant rate: spread 0.100-0.160; never shuffled: spread 0.084-1.44 (within 0.39-0.96) |
| TRAINING_TARGET | same half - partners >= 0.25 | 0.547-0.778 | 0.510-0.799 | W_t + W_c: -0.000-0.004 |
| TRAINING_SUBSAMPLING | within >= 0.7 and gap >= 0.3 | gap 0.707-0.720 | gap 0.709-0.721 | sample ignored: gap -0.000-0.000 |

Trainers that pass, as they should (the spec allows them): W_t started as
randn * 0.1 or at 10x word2vec's range, W_c started at random (spread
0.015-0.022, within >= 0.92); one subsampling draw for the whole run (the
stop-word gap 0.71-0.72). SGD with momentum 0.9 fails TRAINING_SCHEDULE
(spread 0.17-0.36). W_t started at randn * 1e-3 (20 times smaller than
word2vec's start) fails TRAINING (gap 0.21-0.25, 5 runs): from so small a
start the vectors of all words first grow along one common direction.
Each run takes the solution 0.01-0.15 s on one core (the autograd trainer
0.03-3 s, with one outlier of 20 s at load 6).

The three checks added for the trainers that passed all of the above (noise
from the counts after subsampling, a rate that restarts every epoch or falls
per epoch, Adam), calibrated the same way (2026-11-23, torch 2.13, one torch
thread, load 1-3): in-process, by a script outside the repository that builds
each check's corpora with this module's functions from corpus seeds (0-199
for the solution, others for the rest, none twice for one trainer), trains
through `_train` (a fresh secret relabelling every run) and applies the
check's criteria; the trainers are the solution's `train_sgns`, the variants
of tests/test_unit02_word2vec.py (Edits of it) and its two alternates. "init
...": the solution with W_t started otherwise; "progress after batch": the
rate of a batch computed from the share done after it; "one subsampling
draw": one draw for the whole run. TRAINING_NOISE's "change": mean cosine
across clusters with sample = 0.002 minus that with sample = 0.

| check | passes when | solution | correct alternates | known-wrong |
|---|---|---|---|---|
| TRAINING_STEP | within >= 0.7 and gap >= 0.3 | 200/200: within 0.999, gap 0.650-0.694; 0.14-0.46 s | autograd, NumPy (50 each): within 0.999, gap 0.663-0.695; init randn * 0.1, 10x range, randn * 0.3, randn * 0.01, W_c random, progress after batch, one subsampling draw (30 each): within 0.819-1.000, gap 0.524-0.696 | SparseAdam (the autograd trainer, 30): within 0.237-0.348, gap -0.001-0.201, 0/30 pass; Adam on dense embeddings (30): within 0.255-0.371, 0/30 |
| TRAINING_NOISE | with sample = 0 the clusters (within >= 0.7, gap >= 0.3), and abs(change) <= 0.04 | 200/200: change -0.013-0.013, gap without 0.821-0.839; 500 more runs: -0.013-0.018; 0.41-1.02 s | autograd, NumPy (50 each): change -0.012-0.011; the seven others (30 each): -0.014-0.014 | noise from each epoch's kept words (30): change 0.108-0.130, 0/30 pass; 100 more runs: 0.113-0.131; from counts * keep (30): 0.118-0.130, 0/30; the same with W_t started at randn * 0.01, randn * 0.1, 10x range, randn * 0.3 (10 each): 0.091-0.132, 0/40 |
| TRAINING_DECAY | both runs: the clusters, and spread <= 0.028 | 200/200: spread 0.010-0.016 (one epoch), 0.008-0.016 (70 epochs); 1,000 more runs: at most 0.0176 and 0.0161; 0.15-0.27 s | autograd, NumPy (50 each): 0.009-0.016; the seven others (30 each): 0.009-0.017 | restarting every epoch (30): 70 epochs 0.052-0.123, 0/30 pass (200 more runs: at least 0.047); falling per epoch (30): one epoch 0.101-0.216, 0/30 (200 more: at least 0.091); constant rate (30): 0.092-0.209, 0/30 |

A trainer that ignores `sample` passes TRAINING_NOISE (both runs are then
the same; TRAINING_SUBSAMPLING fails it), and so does one that takes its
noise distribution from the counts of the contexts in its pairs instead of
the corpus's counts (the frequent word has no pairs in either run).
"""

from __future__ import annotations

import numpy as np

from lmcourse.grading.checks import check, expect_shape
from lmcourse.grading.training import Relabelling

N_CLUSTERS, PER_CLUSTER = 4, 5
UNUSED = 3  # ids of the vocabulary that never occur, as <BOS>, <EOS>, <UNK> in a course vocabulary
CONFIG = dict(dim=16, window=2, negatives=3, epochs=3, sample=0, lr=0.025, batch_size=1024, seed=0)
SCHEDULE = dict(CONFIG, epochs=5, lr=0.05, batch_size=256)
TARGET = dict(CONFIG, window=1)
SUBSAMPLING = dict(CONFIG, window=1, epochs=5, sample=0.012, batch_size=256)
MIN_WITHIN = 0.7  # mean cosine of two different words of one cluster (the solution: about 0.99)
MIN_GAP = 0.3     # ... minus the mean cosine of words of different clusters (the solution: about 0.7)
MAX_SPREAD = 0.045  # how far the vectors of one cluster stay apart, relative to the cluster means' length
MIN_TARGET_GAP = 0.25  # cosine of words of the same half minus that of partners from the other half
# A small learning rate and large batches: plain SGD moves a word by lr times the sum of its ~1,200 gradients
# of a batch; a step scaled per coordinate (Adam) moves it by about lr, 0.018 in all over 18 steps.
STEP = dict(CONFIG, epochs=6, lr=0.001, batch_size=24576)
STEP_SENTENCES = 4000  # 72,000 pairs an epoch: 3 batches
# A frequent word, 48,000 times alone in a sentence (never anyone's context): 82% of the noise draws; sample=0.002
# keeps about 5% of it and every cluster word. With and without subsampling, the same training problem.
NOISE = dict(CONFIG, negatives=2, epochs=6, sample=0.002, batch_size=256)
NOISE_CONTROL = dict(NOISE, sample=0)
FREQUENT = 48000
MAX_NOISE_CHANGE = 0.04  # how much the mean cosine across clusters may differ between the two runs
# The learning rate over many short epochs (2 batches each) and over a single epoch (140 batches).
DECAY_EPOCHS = dict(CONFIG, window=1, epochs=70, lr=0.035, batch_size=500)
DECAY_ONE_EPOCH = dict(DECAY_EPOCHS, epochs=1)
DECAY_ROTATIONS = 5, 350  # sentences of a cluster in the corpus of DECAY_EPOCHS, of DECAY_ONE_EPOCH
MAX_DECAY_SPREAD = 0.028  # the solution: at most 0.018 in 1,000 runs; the wrong schedules: at least 0.047


def _settings(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _train(student, sentences, n_words: int, config: dict, what: str) -> np.ndarray:
    """The student's vectors for the corpus's words 0..n_words-1 (float64, rows in the corpus's own order).

    The corpus is relabelled by a secret permutation of n_words + UNUSED ids (the UNUSED ids never occur)."""
    V = n_words + UNUSED
    relabel = Relabelling.secret(V)  # from `secrets`, not from rng: cluster membership is unknowable
    E = expect_shape(student.train_sgns(relabel.sentences(sentences), V, **config, timeout=60), (V, config["dim"]),
                     what=f"{what}: the vectors (vocab_size, dim)")
    if E.dtype.kind != "f":
        raise AssertionError(f"{what}: expected floating-point vectors, found dtype {E.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        E = relabel.rows_by_old_id(E.astype(np.float64))[:n_words]  # row w: the vector of the corpus's word w
    if not np.all(np.isfinite(E)):
        raise AssertionError(f"{what}: the vectors hold NaN or infinite values")
    norms = np.linalg.norm(E, axis=1)
    if not np.all(norms > 0) or not np.all(np.isfinite(norms)):
        raise AssertionError(f"{what}: {int((~(norms > 0)).sum())} word vector(s) are all zeros (or too large to "
                             "measure); return the target vectors W_t, not the context vectors (initialised to 0)")
    return E


def _cosines(E: np.ndarray) -> np.ndarray:
    lengths = np.linalg.norm(E, axis=1)
    return (E @ E.T) / np.outer(lengths, lengths)


def _within_and_across(E: np.ndarray, cluster: np.ndarray) -> tuple[float, float]:
    cos = _cosines(E)
    same = (cluster[:, None] == cluster[None, :]) & ~np.eye(len(cluster), dtype=bool)
    return float(cos[same].mean()), float(cos[cluster[:, None] != cluster[None, :]].mean())


def _expect_clusters(E: np.ndarray, cluster: np.ndarray, what: str, hint: str) -> tuple[float, float]:
    within, across = _within_and_across(E, cluster)
    if not (within >= MIN_WITHIN and within - across >= MIN_GAP):  # written so that a NaN fails
        raise AssertionError(f"{what}: expected a mean cosine >= {MIN_WITHIN} between words of the same cluster and "
                             f"at least {MIN_GAP} more than between words of different clusters; found {within:.2f} "
                             f"within and {across:.2f} across. {hint}")
    return within, across


def spread(E: np.ndarray, cluster: np.ndarray) -> float:
    """How far the vectors of a cluster's words stay from their cluster's mean, relative to the means' length.

    Measured inside the span of the cluster means only: the part of a target vector that no context vector
    ever reaches keeps its random initial value whatever the training does. The root of the mean squared
    distance over the mean squared length of the means."""
    means = np.stack([E[cluster == k].mean(axis=0) for k in range(int(cluster.max()) + 1)])  # (C, d)
    basis, _ = np.linalg.qr(means.T)  # (d, C) orthonormal basis of the span of the means
    inside, centres = E @ basis, means @ basis
    distance = ((inside - centres[cluster]) ** 2).sum(axis=1).mean()
    return float(np.sqrt(distance / (centres ** 2).sum(axis=1).mean()))


def sorted_by_cluster(sentences, per_cluster: int) -> list:
    """The planted corpus with its sentences in cluster order (all of cluster 0 first, ...), as a real corpus
    is ordered by play and scene."""
    return sorted(sentences, key=lambda s: int(s[0]) // per_cluster)


def alternating_halves(rng: np.random.Generator, n_clusters: int, half: int, n_sentences: int,
                       length: int) -> list[np.ndarray]:
    """Sentences of one cluster each whose words alternate between its half A (ids k * 2 * half + 0..half-1)
    and its half B (the next `half` ids), starting with either."""
    cluster = rng.integers(0, n_clusters, size=n_sentences)
    offset = rng.integers(0, half, size=(n_sentences, length))
    side = (np.arange(length) + rng.integers(0, 2, size=(n_sentences, 1))) % 2  # 0: A, 1: B
    return [(cluster[i] * 2 * half + side[i] * half + offset[i]).astype(np.int64) for i in range(n_sentences)]


def with_stop_word(rng: np.random.Generator, n_clusters: int, per_cluster: int, n_sentences: int,
                   length: int) -> list[np.ndarray]:
    """Sentences of `length` words of one cluster with the stop word (id n_clusters * per_cluster) between
    every two of them: 2 * length - 1 tokens, the stop word about 3/7 of the corpus."""
    stop = n_clusters * per_cluster
    cluster = rng.integers(0, n_clusters, size=n_sentences)
    offset = rng.integers(0, per_cluster, size=(n_sentences, length))
    out = []
    for i in range(n_sentences):
        sentence = np.full(2 * length - 1, stop, dtype=np.int64)
        sentence[0::2] = cluster[i] * per_cluster + offset[i]
        out.append(sentence)
    return out


def _planted(reference, rng, n_sentences: int = 400):
    return reference.planted_clusters(N_CLUSTERS, PER_CLUSTER, n_sentences=n_sentences, sentence_length=6,
                                      seed=int(rng.integers(1000)))


CORPUS = (f"{N_CLUSTERS} clusters of {PER_CLUSTER} words, 400 sentences, word ids relabelled by a secret "
          f"permutation, {UNUSED} ids that never occur")


@check(points=2, cell="test_training", name="train_sgns: planted word clusters are recovered (similar within, not across)")
def test_planted_clusters(student, reference, rng):
    V = N_CLUSTERS * PER_CLUSTER
    what = f"train_sgns on a planted-cluster corpus ({CORPUS}; {_settings(CONFIG)})"
    E = _train(student, _planted(reference, rng), V, CONFIG, what)
    _expect_clusters(E, np.arange(V) // PER_CLUSTER, what,
                     "Check the update direction (gradient descent), that the loss is summed over the batch (not "
                     "averaged), and that a word used several times in a batch gets the sum of its gradients")


@check(points=1, cell="test_training",
       name="train_sgns: pairs shuffled and a learning rate decaying to about 0 (a corpus sorted by cluster)")
def test_schedule(student, reference, rng):
    V = N_CLUSTERS * PER_CLUSTER
    cluster = np.arange(V) // PER_CLUSTER
    what = (f"train_sgns on a planted-cluster corpus whose sentences are sorted by cluster ({CORPUS}; "
            f"{_settings(SCHEDULE)})")
    E = _train(student, sorted_by_cluster(_planted(reference, rng), PER_CLUSTER), V, SCHEDULE, what)
    hint = ("Shuffle the pairs of every epoch: unshuffled, a batch holds the pairs of one cluster only, and "
            "the steps pull the vectors one way and then another")
    _expect_clusters(E, cluster, what, hint)
    found = spread(E, cluster)
    if not (found <= MAX_SPREAD):
        raise AssertionError(f"{what}: the words of one cluster share all their contexts, so their vectors should "
                             f"settle on the same point; they still differ by {found:.1%} of the clusters' mean "
                             f"vectors (a correct run: at most {MAX_SPREAD:.1%}). Let the learning rate fall from "
                             "lr to lr * 1e-4 over the whole run (lr * max(1e-4, 1 - progress)), and shuffle the "
                             "pairs of every epoch")


@check(points=1, cell="test_training",
       name="train_sgns: returns the target vectors W_t (words that are each other's contexts are not made alike)")
def test_target_vectors(student, rng):
    n_clusters, half = 4, 3
    V = n_clusters * 2 * half
    sentences = alternating_halves(rng, n_clusters, half, n_sentences=800, length=6)
    what = (f"train_sgns on a corpus of {n_clusters} clusters split in two halves A and B of {half} words that "
            f"alternate in every sentence (800 sentences, ids relabelled by a secret permutation, {UNUSED} ids that "
            f"never occur; {_settings(TARGET)})")
    E = _train(student, sentences, V, TARGET, what)
    words = np.arange(V)
    cluster, side = words // (2 * half), (words // half) % 2
    cos = _cosines(E)
    same_side = (cluster[:, None] == cluster) & (side[:, None] == side) & ~np.eye(V, dtype=bool)
    partners = (cluster[:, None] == cluster) & (side[:, None] != side)
    alike, partnered = float(cos[same_side].mean()), float(cos[partners].mean())
    if not (alike >= MIN_WITHIN):
        raise AssertionError(f"{what}: the words of one half share all their contexts, so their vectors should be "
                             f"alike (a mean cosine >= {MIN_WITHIN}); found {alike:.2f}")
    if not (alike - partnered >= MIN_TARGET_GAP):
        raise AssertionError(f"{what}: a word and its partners from the other half are each other's contexts but "
                             f"share none, so their target vectors should be less alike than the words of one half "
                             f"(by at least {MIN_TARGET_GAP}); found a mean cosine of {alike:.2f} within a half and "
                             f"{partnered:.2f} between partners. Return the target vectors W_t alone, not W_t + W_c "
                             "or the context vectors")


@check(points=1, cell="test_training",
       name="train_sgns: `sample` subsamples frequent words (a stop word between every two words, window 1)")
def test_subsampling(student, rng):
    V = N_CLUSTERS * PER_CLUSTER + 1  # the cluster words and the stop word
    sentences = with_stop_word(rng, N_CLUSTERS, PER_CLUSTER, n_sentences=800, length=4)
    what = (f"train_sgns on a corpus of {N_CLUSTERS} clusters of {PER_CLUSTER} words with one stop word between "
            f"every two words (800 sentences, the stop word about 3/7 of the tokens; ids relabelled by a secret "
            f"permutation, {UNUSED} ids that never occur; {_settings(SUBSAMPLING)})")
    E = _train(student, sentences, V, SUBSAMPLING, what)[:-1]  # the cluster words only
    _expect_clusters(E, np.arange(V - 1) // PER_CLUSTER, what,
                     "With window 1, the only context of every word is the stop word unless subsampling "
                     "(keep_probabilities of the corpus's counts, with `sample`) drops most of it; compute the counts "
                     "from `sentences` and subsample every epoch when sample > 0")


def with_frequent_word(rng: np.random.Generator, sentences: list, word: int, n: int) -> list:
    """`sentences` and `n` sentences of the single word `word`, in a random order: the word counts, but it is
    nobody's context and has no context (a one-word sentence has no pairs)."""
    out = list(sentences) + [np.array([word], dtype=np.int64) for _ in range(n)]
    return [out[i] for i in rng.permutation(len(out))]


def de_bruijn(k: int) -> list[int]:
    """A cyclic sequence of k * k symbols 0..k-1 in which every ordered pair (a, b), a == b included, is two
    neighbours exactly once (a de Bruijn sequence of order 2: 0 0 1 0 2 ... 0 k-1 1 1 2 ... k-1 k-1)."""
    out = []
    for a in range(k):
        out.append(a)
        for b in range(a + 1, k):
            out += [a, b]
    return out


def balanced_clusters(rng: np.random.Generator, n_clusters: int, per_cluster: int, rotations: int) -> list:
    """Clusters whose words are interchangeable exactly, not only on average: `rotations` sentences per
    cluster (a multiple of per_cluster), each a rotation of the cluster's de Bruijn sequence with its first
    word repeated at the end. With window 1 every ordered pair of words of a cluster is a (centre, context)
    pair equally often, and every word of a cluster has the same count, so nothing but the training's noise
    keeps two words of a cluster apart."""
    cycle = np.array(de_bruijn(per_cluster))
    starts = [np.flatnonzero(cycle == w) for w in range(per_cluster)]  # the rotations that begin with w
    out = []
    for k in range(n_clusters):
        for i in range(rotations):
            rotated = np.roll(cycle, -int(rng.choice(starts[i % per_cluster])))
            out.append((k * per_cluster + np.concatenate([rotated, rotated[:1]])).astype(np.int64))
    return [out[i] for i in rng.permutation(len(out))]


@check(points=1, cell="test_training",
       name="train_sgns: a small learning rate with large batches (lr=0.001, 24,576 pairs a batch)")
def test_step_size(student, reference, rng):
    V = N_CLUSTERS * PER_CLUSTER
    what = (f"train_sgns on a planted-cluster corpus of {STEP_SENTENCES} sentences ({N_CLUSTERS} clusters of "
            f"{PER_CLUSTER} words, 72,000 pairs an epoch, word ids relabelled by a secret permutation, {UNUSED} ids "
            f"that never occur; {_settings(STEP)})")
    E = _train(student, _planted(reference, rng, n_sentences=STEP_SENTENCES), V, STEP, what)
    _expect_clusters(E, np.arange(V) // PER_CLUSTER, what,
                     "A batch holds each word about 1,200 times: a plain SGD step moves its vector by lr times the "
                     "sum of those gradients, large enough here to form the clusters in 18 steps. Take plain SGD "
                     "steps on the loss summed over the batch: an optimiser that scales each coordinate's step "
                     "to about lr (Adam, Adagrad, RMSprop) moves the vectors by about 0.001 per step here")


@check(points=1, cell="test_training",
       name="train_sgns: the same clusters with and without subsampling a word that is never a context")
def test_noise_counts(student, reference, rng):
    V = N_CLUSTERS * PER_CLUSTER
    cluster = np.arange(V) // PER_CLUSTER
    sentences = with_frequent_word(rng, _planted(reference, rng), V, FREQUENT)
    corpus = (f"train_sgns on a planted-cluster corpus ({CORPUS}) with {FREQUENT} one-word sentences of one more "
              "word (95% of the tokens)")
    control = f"{corpus}; {_settings(NOISE_CONTROL)}"
    E = _train(student, sentences, V + 1, NOISE_CONTROL, control)[:V]
    _, without = _expect_clusters(E, cluster, control, "Check the update and the noise words")
    what = f"{corpus}; {_settings(NOISE)}"
    _, across = _within_and_across(_train(student, sentences, V + 1, NOISE, what)[:V], cluster)
    if not (abs(across - without) <= MAX_NOISE_CHANGE):
        raise AssertionError(
            f"{what}: the frequent word is alone in its sentences, so subsampling it (sample=0.002 keeps about "
            "5% of it and every other word) changes no pair; the noise distribution comes from the corpus's counts "
            "(count ** 0.75: about 82% of the noise draws go to that word), so the training is the same as with "
            f"sample=0 and the clusters should come out the same. The mean cosine of words of different clusters "
            f"is {across:.2f} here and {without:.2f} with sample=0 (a correct trainer: within {MAX_NOISE_CHANGE}). "
            "Compute the noise distribution from the counts of the whole corpus, before subsampling")


def _settled(student, sentences, V: int, config: dict, what: str) -> float:
    """Train, require the clusters, and return how far the words of one cluster stay apart (`spread`)."""
    cluster = np.arange(V) // PER_CLUSTER
    E = _train(student, sentences, V, config, what)
    _expect_clusters(E, cluster, what, "Check the update and the learning rate")
    return spread(E, cluster)


@check(points=1, cell="test_training",
       name="train_sgns: the learning rate over one long epoch and over 70 short ones")
def test_decay_per_batch(student, rng):
    V = N_CLUSTERS * PER_CLUSTER
    corpus = (f"{N_CLUSTERS} clusters of {PER_CLUSTER} interchangeable words (every ordered pair of words of a "
              f"cluster equally often neighbours), ids relabelled by a secret permutation, {UNUSED} ids that never "
              "occur")
    for config, rotations, steps in ((DECAY_ONE_EPOCH, DECAY_ROTATIONS[1], "140 batches in one epoch"),
                                     (DECAY_EPOCHS, DECAY_ROTATIONS[0], "2 batches in each of 70 epochs")):
        what = (f"train_sgns on {N_CLUSTERS * rotations} sentences ({corpus}; {_settings(config)}: {steps})")
        found = _settled(student, balanced_clusters(rng, N_CLUSTERS, PER_CLUSTER, rotations), V, config, what)
        if not (found <= MAX_DECAY_SPREAD):
            raise AssertionError(
                f"{what}: the words of a cluster are exactly interchangeable, so their vectors should settle on "
                f"the same point as the rate falls to about 0; they still differ by {found:.1%} of the clusters' "
                f"mean vectors (a correct run: at most {MAX_DECAY_SPREAD:.1%}), as after steps at a large rate "
                "near the end. The rate of a batch is lr * max(1e-4, 1 - progress), progress the share of the "
                "whole run done before the batch, (epoch + i / N) / epochs: it falls batch by batch within an "
                "epoch, and starts each epoch where the last one ended")
