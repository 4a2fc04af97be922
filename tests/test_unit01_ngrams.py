"""Unit 1 (01-ngrams): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants.
"""

from __future__ import annotations

from lmcourse.grading.testing import Edit
from unit_contract import UnitContract


# The checks' names, as the student sees them.
COUNTS = "ngram_counts: exact counts of every n-gram, n = 1..5"
MLE = "next_token_probs: maximum-likelihood estimates, n = 1..4"
NORMALISED = "next_token_probs: every distribution sums to 1 and never predicts <BOS>"
ADD_K = "next_token_probs: add-k smoothing"
TOKEN_AVERAGE = "cross_entropy: the average is over tokens, not sentences"
UNITS = "cross_entropy: nats, bits and perplexity in their units"
TEMPERATURE = "apply_temperature: softmax(log p / temperature)"
SAMPLING_TEMPERATURE = "sample: temperature reshapes the distribution before sampling"
SEEDED = "sample: the same seed gives the same text, different seeds differ"
SENTENCE_PROBS = "sentence_probs: the probability of every token, <EOS> included"
GREEDY_STOPS = "greedy_decode: stops at <EOS> or after max_len tokens"
VOCAB = "build_vocab: specials first, then words by frequency; rare words left out"
TOKENIZE = "tokenize_lines: one word list per non-empty line"
LAMBDAS_OPTIMAL = "tune_lambdas: held-out cross-entropy within 0.01 nats per token of the best weights"
UNSEEN = "next_token_probs: unseen histories (uniform) and unknown words (read as <UNK>)"

# name -> (function replaced, the wrong version: Edit(s) of the solution's own definition, or a whole
# definition where the variant is another implementation; checks that must score 0)
VARIANTS: dict[str, tuple[str, str | Edit | list[Edit], tuple[str, ...]]] = {
    "counting window off by one (last n-gram of each sentence lost)": ("ngram_counts", Edit(
        "starts = np.flatnonzero(ids[n - 1:] != 0)",
        "starts = np.flatnonzero((ids[n - 1:] != 0) & (ids[n - 1:] != index[EOS]))",
        why="the window stops one short in every sentence: the n-gram ending on its <EOS> is never counted"),
        (COUNTS,)),
    "no <BOS> padding for the first words": ("ngram_counts", Edit(
        "starts = np.flatnonzero(ids[n - 1:] != 0)",
        "starts = np.flatnonzero((ids[n - 1:] != 0) & (ids[: len(ids) - n + 1] != 0))",
        why="only windows free of <BOS> are counted, as if the sentences were never padded: "
            "the first words lose their n-grams"),
        (COUNTS,)),
    "history slice off by one (history[-(j-1):] reads everything when j = 1)": ("next_token_probs", Edit(
        "h = padded[len(padded) - (j - 1):]", "h = padded[-(j - 1):]",
        why="[-0:] is the whole list: the unigram order reads the whole history as its context"),
        (MLE,)),
    "add-k adds k to the numerator only": ("next_token_probs", Edit(
        "p = (c_hw + k) / (c_h + k * V)", "p = (c_hw + k) / c_h",
        why="no k * V in the denominator: the smoothed distribution sums to more than 1"),
        (NORMALISED, ADD_K)),
    "add-k denominator counts <BOS> among the possible next tokens": ("next_token_probs", Edit(
        "V = len(vocab) - 1  # tokens that can follow a history: all but <BOS>", "V = len(vocab)",
        why="V counts <BOS>, which never comes next: add-k and the uniform fallback sum to less than 1"),
        (NORMALISED, ADD_K, UNSEEN)),
    "unknown history words not mapped to <UNK>": ("next_token_probs", Edit(
        "history = [w if w in known else UNK for w in history]", "history = list(history)",
        why="an unknown word is looked up as itself, so its history is never seen"),
        (UNSEEN,)),
    "sentence_probs forgets the <EOS>": ("sentence_probs", Edit(
        "for w in sentence] + [EOS]", "for w in sentence]",
        why="the probability of ending the sentence is left out"),
        (SENTENCE_PROBS,)),
    "perplexity with the log base mixed up (2 ** nats)": ("cross_entropy", Edit(
        '"perplexity": math.exp(nats)', '"perplexity": 2 ** nats',
        why="2 ** H needs H in bits, e ** H in nats"),
        (UNITS,)),
    "bits computed with log base 10": ("cross_entropy", Edit(
        '"bits_per_token": nats / math.log(2)', '"bits_per_token": nats / math.log(10)',
        why="H / ln 10 is the mean -log10 p (digits), not bits"),
        (UNITS,)),
    "cross-entropy averaged over sentences instead of tokens": ("cross_entropy", Edit(
        "nats = float(-np.log(p).mean())",
        "nats = float(np.mean([-np.log(np.asarray(s, dtype=np.float64)).mean() for s in probs_per_sentence]))",
        why="the mean of each sentence's mean: a short sentence weighs as much as a long one"),
        (TOKEN_AVERAGE,)),
    "temperature applied after the softmax": ("apply_temperature", Edit(
        "np.log(np.asarray(probs, dtype=np.float64)) / temperature",
        "np.log(np.asarray(probs, dtype=np.float64) / temperature)",
        why="the probabilities are divided, not the log-probabilities: normalising undoes it"),
        (TEMPERATURE, SAMPLING_TEMPERATURE)),
    "sample applies the temperature to normalised probabilities": ("sample", Edit(
        "probs = apply_temperature(next_token_probs(model, history + out, k, lambdas), temperature)",
        "probs = next_token_probs(model, history + out, k, lambdas) / temperature\n"
        "        probs = probs / probs.sum()",
        why="dividing probabilities by the temperature, then normalising, leaves the distribution as it was"),
        (SAMPLING_TEMPERATURE,)),
    "sampling ignores the seed": ("sample", Edit(
        "rng = np.random.default_rng(seed)", "rng = np.random.default_rng()",
        why="fresh entropy on every call"),
        (SEEDED,)),
    "greedy decoding returns the <EOS> it stops at": ("greedy_decode", Edit(
        "        if token == EOS:\n            break\n        out.append(token)",
        "        out.append(token)\n        if token == EOS:\n            break",
        why="the token is appended before the <EOS> test"),
        (GREEDY_STOPS,)),
    "vocabulary ties not broken alphabetically": ("build_vocab", Edit(
        "kept.sort(key=lambda w: (-counts[w], w))", "kept.sort(key=lambda w: -counts[w])",
        why="ties stay in order of first appearance"),
        (VOCAB,)),
    "empty lines kept as empty sentences": ("tokenize_lines", Edit(
        "        if words:\n            sentences.append(words)", "        sentences.append(words)",
        why="a line without tokens becomes an empty sentence"),
        (TOKENIZE,)),
    "interpolation weights left uniform": ("tune_lambdas", Edit(
        "for _ in range(200):", "for _ in range(0):",
        why="EM never runs: the weights stay at their uniform start"),
        (LAMBDAS_OPTIMAL,)),
}


class TestUnit01Ngrams(UnitContract):
    AID = "01-ngrams"
    MAX_SCORE = 28
    STUDENT_FUNCTIONS = 13
    RELEASE_MUST_NOT_CONTAIN = ("np.unique(code",)
    VARIANTS = VARIANTS
