"""Unit 1 (01-ngrams): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants, and the correct
alternates (other algorithms a student may choose) that must get full marks.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract


# The checks' names, as the student sees them.
COUNTS = "ngram_counts: exact counts of every n-gram, n = 1..5"
COUNTS_LARGE = ("ngram_counts at full scale: 5-grams over a 12,000-word vocabulary "
                "(TinyShakespeare has 11,690 word types)")
MLE = "next_token_probs: maximum-likelihood estimates, n = 1..4"
NORMALISED = "next_token_probs: every distribution sums to 1, never predicts <BOS> and follows the counts"
INTERPOLATION = "next_token_probs: linear interpolation of orders 1..n"
ADD_K = "next_token_probs: add-k smoothing"
TOKEN_AVERAGE = "cross_entropy: the average is over tokens, not sentences"
UNITS = "cross_entropy: nats, bits and perplexity in their units"
LONG_TEXT = "cross_entropy of a held-out text of 30,000 tokens, as long as TinyShakespeare's validation text"
TEMPERATURE = "apply_temperature: softmax(log p / temperature), for 7 tokens and for 6,407 at temperature 0.01"
SAMPLING_TEMPERATURE = "sample: temperature reshapes the distribution before sampling"
SEEDED = "sample: the same seed gives the same text, different seeds differ"
SAMPLING_STOPS = "sample: stops at <EOS> or after max_len words, no special tokens"
PAIRS = "sample: every token drawn afresh from P(next | the words so far): pairs of consecutive tokens"
SENTENCE_PROBS = "sentence_probs: the probability of every token, <EOS> included"
GREEDY_STOPS = "greedy_decode: stops at <EOS> or after max_len tokens"
VOCAB = ("build_vocab: specials first (once, even in a corpus that holds <UNK>), then words by frequency; "
         "rare words left out")
TOKENIZE = "tokenize_lines: one word list per non-empty line"
LAMBDAS_VALID = "tune_lambdas: n weights, non-negative, summing to 1, within 0.05 nats per token of the best"
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
        (LAMBDAS_VALID, LAMBDAS_OPTIMAL)),
    # issue 16: scale, joint statistics, stubs, special tokens, the chapter's conventions
    "window codes overflow int64 at n = 5 (keys read back digit by digit)": ("ngram_counts", [
        Edit("        if (int(code.max()) + 1) * U >= 2**62:\n"
             "            _, code = np.unique(code, return_inverse=True)\n", "",
             why="no re-numbering: with 12,000 distinct tokens a code of 5 ids exceeds 2**63 and wraps around"),
        Edit("    _, first, counts = np.unique(code, return_index=True, return_counts=True)  # (K,) each\n"
             "    return {\" \".join(tokens[p:p + n]): c for p, c in zip(starts[first].tolist(), counts.tolist())}",
             "    codes, counts = np.unique(code, return_counts=True)  # (K,) each\n"
             "    names = list(index)  # id -> token\n"
             "    digits = [codes // U ** (n - 1 - j) % U for j in range(n)]  # (n, K): the ids, read back\n"
             "    return {\" \".join(names[d[i]] for d in digits): c for i, c in enumerate(counts.tolist())}",
             why="the n-grams are decoded from their codes, which are garbage once they have wrapped"),
    ], (COUNTS_LARGE,)),
    "perplexity from the product of all the probabilities": ("cross_entropy", Edit(
        "nats = float(-np.log(p).mean())", "nats = float(-np.log(np.prod(p)) / len(p))",
        why="the product of 30,000 probabilities underflows to 0: infinite cross-entropy on a long text"),
        (LONG_TEXT,)),
    "the generator re-made from the seed at every step": ("sample", Edit(
        "token = vocab[int(rng.choice(len(vocab), p=probs))]",
        "token = vocab[int(np.random.default_rng(seed).choice(len(vocab), p=probs))]",
        why="every token is drawn with the same random number: each one alone has the right distribution, "
            "consecutive ones are tied together"),
        (PAIRS,)),
    "next_token_probs ignores the counts (uniform over every next token)": ("next_token_probs", Edit(
        "    return probs", "    return np.r_[0.0, np.full(V, 1.0 / V)]",
        why="a stub: normalised, never predicts <BOS>, and samples from it are seeded; none of that may "
            "earn points on its own"),
        (MLE, NORMALISED, SEEDED, SAMPLING_STOPS)),
    "build_vocab lists <UNK> again when the corpus holds it": ("build_vocab", Edit(
        "if c >= min_count and w not in (BOS, EOS, UNK)]", "if c >= min_count]",
        why="a corpus already mapped to <UNK> puts a second <UNK> among the words"),
        (VOCAB,)),
    "interpolation renormalised over the orders with a seen history (the chapter's convention)": (
        "next_token_probs", [
            Edit("p = np.full(len(vocab), 1.0 / V)  # unseen history: uniform",
                 "continue  # the chapter: an unseen history has no estimate",
                 why="an unseen order is skipped instead of contributing its uniform row"),
            Edit("    return probs",
                 "    return probs / probs.sum() if probs.sum() > 0 else np.r_[0.0, np.full(V, 1.0 / V)]",
                 why="its weight is shared out among the other orders, as in the chapter's interpolated_model"),
        ], (INTERPOLATION, UNSEEN)),
    "temperature without subtracting the largest log-probability": ("apply_temperature", Edit(
        "    logits = logits - logits.max()  # the largest becomes exp(0) = 1: no overflow\n", "",
        why="at temperature 0.01 over 6,406 tokens exp(log p / T) is 0 for every token: 0 / 0"),
        (TEMPERATURE,)),
}

# Correct implementations that differ from the solution's algorithms, as students write them: each
# must get full marks (the contract grades each one). Together they cover every method the text endorses.
ALTERNATES: dict[str, dict[str, str | Edit | list[Edit]]] = {
    "pure Python: a dict of tuples, a sum of logs, a 0.02 grid search, the chapter's weighted die": {
        "ngram_counts": '''def ngram_counts(sentences, n):
    counts = {}  # tuple of n tokens -> count, one Python step per predicted token
    for sentence in sentences:
        padded = tuple(pad_sentence(sentence, n))
        for end in range(n - 1, len(padded)):
            gram = padded[end - n + 1:end + 1]
            counts[gram] = counts.get(gram, 0) + 1
    return {" ".join(gram): c for gram, c in counts.items()}''',
        "sentence_probs": '''def sentence_probs(model, sentence, k=0.0, lambdas=None):
    index = {w: i for i, w in enumerate(model["vocab"])}
    words = list(sentence) + [EOS]
    return np.array([next_token_probs(model, words[:t], k, lambdas)[index.get(w, index[UNK])]
                     for t, w in enumerate(words)])''',
        "cross_entropy": '''def cross_entropy(probs_per_sentence):
    total, count = 0.0, 0  # the sum of -ln p over every token, then one division
    for probs in probs_per_sentence:
        for p in probs:
            count += 1
            total = math.inf if p == 0 else total - math.log(p)
    nats = total / count
    return {"nats_per_token": nats, "bits_per_token": nats / math.log(2), "perplexity": math.exp(nats)}''',
        "tune_lambdas": '''def tune_lambdas(model, sentences):
    import itertools
    n, steps = model["n"], 50  # a grid over the simplex with step 1/50 = 0.02
    P = np.stack([np.concatenate([sentence_probs(model, s, lambdas=[float(i == j) for i in range(n)])
                                  for s in sentences]) for j in range(n)], axis=1)  # (T, n)
    best, best_nats = None, math.inf
    for head in itertools.product(range(steps + 1), repeat=n - 1):
        if sum(head) > steps:
            continue
        lam = np.array(list(head) + [steps - sum(head)]) / steps
        with np.errstate(divide="ignore"):
            nats = -np.log(P @ lam).mean()
        if nats < best_nats:
            best, best_nats = lam, nats
    return best''',
        "apply_temperature": '''def apply_temperature(probs, temperature):
    p = np.asarray(probs, dtype=np.float64)
    p = (p / p.max()) ** (1.0 / temperature)  # P^(1/T), scaled so that the largest is 1
    return p / p.sum()''',
        "sample": '''def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    vocab = model["vocab"]
    rng = np.random.default_rng(seed)
    history, out = list(prompt or []), []
    while len(out) < max_len:
        ends = np.cumsum(apply_temperature(next_token_probs(model, history + out, k, lambdas), temperature))
        u = rng.random() * ends[-1]  # the weighted die: the face whose segment of [0, total) holds u
        token = vocab[min(int(np.searchsorted(ends, u, side="right")), len(vocab) - 1)]
        if token == EOS:
            break
        out.append(token)
    return out''',
    },
    "Counter over zip, a running mean, scipy's SLSQP on the simplex, torch.multinomial": {
        "ngram_counts": '''def ngram_counts(sentences, n):
    from collections import Counter
    counts = Counter()
    for sentence in sentences:
        padded = pad_sentence(sentence, n)
        counts.update(zip(*(padded[i:] for i in range(n))))  # the windows of n consecutive tokens
    return {" ".join(gram): c for gram, c in counts.items()}''',
        "context_counts": '''def context_counts(counts):
    from collections import Counter
    contexts = Counter()
    for ngram, c in counts.items():
        contexts[" ".join(ngram.split(" ")[:-1])] += c
    return dict(contexts)''',
        "cross_entropy": '''def cross_entropy(probs_per_sentence):
    mean, t = 0.0, 0  # a running mean of -ln p, token after token
    for probs in probs_per_sentence:
        for p in np.asarray(probs, dtype=np.float64).ravel():
            t += 1
            x = math.inf if p == 0 else -math.log(p)
            mean = math.inf if math.inf in (x, mean) else mean + (x - mean) / t
    return {"nats_per_token": mean, "bits_per_token": mean / math.log(2), "perplexity": math.exp(mean)}''',
        "tune_lambdas": '''def tune_lambdas(model, sentences):
    from scipy.optimize import minimize
    n = model["n"]
    P = np.stack([np.concatenate([sentence_probs(model, s, lambdas=[float(i == j) for i in range(n)])
                                  for s in sentences]) for j in range(n)], axis=1)  # (T, n)
    P = P[P.sum(axis=1) > 0]
    result = minimize(lambda lam: -np.log(P @ lam).mean(), np.full(n, 1.0 / n), method="SLSQP",
                      jac=lambda lam: -(P / (P @ lam)[:, None]).mean(axis=0),
                      bounds=[(1e-9, 1.0)] * n, constraints=[{"type": "eq", "fun": lambda lam: lam.sum() - 1}],
                      options={"ftol": 1e-12, "maxiter": 500})
    lam = np.clip(result.x, 0, None)
    return lam / lam.sum()''',
        "sample": '''def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    import torch
    generator = torch.Generator().manual_seed(int(seed))
    vocab = model["vocab"]
    history, out = list(prompt or []), []
    for _ in range(max_len):
        probs = torch.as_tensor(apply_temperature(next_token_probs(model, history + out, k, lambdas), temperature))
        token = vocab[int(torch.multinomial(probs, 1, generator=generator))]
        if token == EOS:
            break
        out.append(token)
    return out''',
    },
    "NumPy rows: np.unique(axis=0), bits first, rng.choice over the words themselves": {
        "ngram_counts": '''def ngram_counts(sentences, n):
    padded = [pad_sentence(s, n) for s in sentences]
    if not padded:
        return {}
    names = sorted({t for p in padded for t in p})
    index = {t: i for i, t in enumerate(names)}
    windows = np.concatenate([np.lib.stride_tricks.sliding_window_view(np.array([index[t] for t in p]), n)
                              for p in padded])  # (N, n): one row of ids per predicted token
    rows, counts = np.unique(windows, axis=0, return_counts=True)
    return {" ".join(names[i] for i in row): c for row, c in zip(rows.tolist(), counts.tolist())}''',
        "cross_entropy": '''def cross_entropy(probs_per_sentence):
    p = np.concatenate([np.ravel(s) for s in probs_per_sentence]).astype(np.float64)
    with np.errstate(divide="ignore"):
        bits = float(-np.log2(p).sum() / p.size)  # bits first
    return {"nats_per_token": bits * math.log(2), "bits_per_token": bits, "perplexity": 2.0 ** bits}''',
        "sample": '''def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    rng = np.random.default_rng(seed)
    history, out = list(prompt or []), []
    for _ in range(max_len):
        probs = apply_temperature(next_token_probs(model, history + out, k, lambdas), temperature)
        token = rng.choice(model["vocab"], p=probs)  # a numpy.str_
        if token == EOS:
            break
        out.append(token)
    return out''',
    },
}


class TestUnit01Ngrams(UnitContract):
    AID = "01-ngrams"
    MAX_SCORE = 31
    STUDENT_FUNCTIONS = 13
    RELEASE_MUST_NOT_CONTAIN = ("np.unique(code",)
    VARIANTS = VARIANTS
    ALTERNATES = ALTERNATES
