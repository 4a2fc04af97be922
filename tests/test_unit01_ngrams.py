"""Unit 1 (01-ngrams): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
autograder/01-ngrams/mistakes.py names the checks and holds the known-wrong variants, and the
correct alternates (other algorithms a student may choose) that must get full marks."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names and the known mistakes live in the course: autograder/01-ngrams/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "01-ngrams")
VARIANTS = _M.VARIANTS


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
