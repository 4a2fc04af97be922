"""Unit 1 (01-ngrams): the solution earns every point, the release none, and each
known-wrong implementation loses the points of the check written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py);
this file names the checks and holds the known-wrong variants.
"""

from __future__ import annotations

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

# name -> (function replaced, wrong definition, checks that must score 0)
VARIANTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "counting window off by one (last n-gram of each sentence lost)": ("ngram_counts", '''
def ngram_counts(sentences, n):
    counts = {}
    for s in sentences:
        p = pad_sentence(s, n)
        for i in range(len(p) - n):  # off by one: should be len(p) - n + 1
            key = " ".join(p[i:i + n])
            counts[key] = counts.get(key, 0) + 1
    return counts
''', (COUNTS,)),
    "no <BOS> padding for the first words": ("ngram_counts", '''
def ngram_counts(sentences, n):
    counts = {}
    for s in sentences:
        p = list(s) + [EOS]  # the first words never get their <BOS> history
        for i in range(len(p) - n + 1):
            key = " ".join(p[i:i + n])
            counts[key] = counts.get(key, 0) + 1
    return counts
''', (COUNTS,)),
    "history slice off by one (history[-(j-1):] reads everything when j = 1)": ("next_token_probs", '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    vocab, n = model["vocab"], model["n"]
    V = len(vocab) - 1
    known = set(vocab)
    history = [w if w in known else UNK for w in history]
    weights = [0.0] * (n - 1) + [1.0] if lambdas is None else list(lambdas)
    probs = np.zeros(len(vocab))
    for j, weight in enumerate(weights, start=1):
        if weight == 0:
            continue
        counts, contexts = model["counts"][j - 1], model["contexts"][j - 1]
        h = ([BOS] * (j - 1) + history)[-(j - 1):]  # bug: [-0:] is the whole list
        c_h = contexts.get(" ".join(h), 0)
        if c_h == 0:
            p = np.full(len(vocab), 1.0 / V)
        else:
            c_hw = np.array([counts.get(" ".join(h + [w]), 0) for w in vocab], dtype=np.float64)
            p = (c_hw + k) / (c_h + k * V)
        p[0] = 0.0
        probs += weight * p
    return probs
''', (MLE,)),
    "add-k adds k to the numerator only": ("next_token_probs", '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    vocab, n = model["vocab"], model["n"]
    V = len(vocab) - 1
    known = set(vocab)
    history = [w if w in known else UNK for w in history]
    weights = [0.0] * (n - 1) + [1.0] if lambdas is None else list(lambdas)
    probs = np.zeros(len(vocab))
    for j, weight in enumerate(weights, start=1):
        if weight == 0:
            continue
        counts, contexts = model["counts"][j - 1], model["contexts"][j - 1]
        padded = [BOS] * (j - 1) + history
        h = padded[len(padded) - (j - 1):]
        c_h = contexts.get(" ".join(h), 0)
        if c_h == 0:
            p = np.full(len(vocab), 1.0 / V)
        else:
            c_hw = np.array([counts.get(" ".join(h + [w]), 0) for w in vocab], dtype=np.float64)
            p = (c_hw + k) / c_h  # bug: no k * V in the denominator
        p[0] = 0.0
        probs += weight * p
    return probs
''', (NORMALISED, ADD_K)),
    "add-k denominator counts <BOS> among the possible next tokens": ("next_token_probs", '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    vocab, n = model["vocab"], model["n"]
    V = len(vocab)  # bug: <BOS> can never come next
    known = set(vocab)
    history = [w if w in known else UNK for w in history]
    weights = [0.0] * (n - 1) + [1.0] if lambdas is None else list(lambdas)
    probs = np.zeros(len(vocab))
    for j, weight in enumerate(weights, start=1):
        if weight == 0:
            continue
        counts, contexts = model["counts"][j - 1], model["contexts"][j - 1]
        padded = [BOS] * (j - 1) + history
        h = padded[len(padded) - (j - 1):]
        c_h = contexts.get(" ".join(h), 0)
        if c_h == 0:
            p = np.full(len(vocab), 1.0 / V)
        else:
            c_hw = np.array([counts.get(" ".join(h + [w]), 0) for w in vocab], dtype=np.float64)
            p = (c_hw + k) / (c_h + k * V)
        p[0] = 0.0
        probs += weight * p
    return probs
''', (NORMALISED, ADD_K, UNSEEN)),
    "unknown history words not mapped to <UNK>": ("next_token_probs", '''
def next_token_probs(model, history, k=0.0, lambdas=None):
    vocab, n = model["vocab"], model["n"]
    V = len(vocab) - 1
    weights = [0.0] * (n - 1) + [1.0] if lambdas is None else list(lambdas)
    probs = np.zeros(len(vocab))
    for j, weight in enumerate(weights, start=1):
        if weight == 0:
            continue
        counts, contexts = model["counts"][j - 1], model["contexts"][j - 1]
        padded = [BOS] * (j - 1) + list(history)
        h = padded[len(padded) - (j - 1):]
        c_h = contexts.get(" ".join(h), 0)
        if c_h == 0:
            p = np.full(len(vocab), 1.0 / V)
        else:
            c_hw = np.array([counts.get(" ".join(h + [w]), 0) for w in vocab], dtype=np.float64)
            p = (c_hw + k) / (c_h + k * V)
        p[0] = 0.0
        probs += weight * p
    return probs
''', (UNSEEN,)),
    "sentence_probs forgets the <EOS>": ("sentence_probs", '''
def sentence_probs(model, sentence, k=0.0, lambdas=None):
    vocab = model["vocab"]
    known = set(vocab)
    words = [w if w in known else UNK for w in sentence]
    return np.array([next_token_probs(model, words[:t], k, lambdas)[vocab.index(words[t])]
                     for t in range(len(words))])
''', (SENTENCE_PROBS,)),
    "perplexity with the log base mixed up (2 ** nats)": ("cross_entropy", '''
def cross_entropy(probs_per_sentence):
    p = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in probs_per_sentence])
    with np.errstate(divide="ignore"):
        nats = float(-np.log(p).mean())
    return {"nats_per_token": nats, "bits_per_token": nats / math.log(2), "perplexity": 2 ** nats}
''', (UNITS,)),
    "bits computed with log base 10": ("cross_entropy", '''
def cross_entropy(probs_per_sentence):
    p = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in probs_per_sentence])
    with np.errstate(divide="ignore"):
        nats = float(-np.log(p).mean())
        bits = float(-np.log10(p).mean())
    return {"nats_per_token": nats, "bits_per_token": bits, "perplexity": math.exp(nats)}
''', (UNITS,)),
    "cross-entropy averaged over sentences instead of tokens": ("cross_entropy", '''
def cross_entropy(probs_per_sentence):
    with np.errstate(divide="ignore"):
        per_sentence = [float(-np.log(np.asarray(s, dtype=np.float64)).mean()) for s in probs_per_sentence]
    nats = float(np.mean(per_sentence))
    return {"nats_per_token": nats, "bits_per_token": nats / math.log(2), "perplexity": math.exp(nats)}
''', (TOKEN_AVERAGE,)),
    "temperature applied after the softmax": ("apply_temperature", '''
def apply_temperature(probs, temperature):
    p = np.asarray(probs, dtype=np.float64) / temperature  # bug: scales probabilities, not log-probabilities
    return p / p.sum()
''', (TEMPERATURE, SAMPLING_TEMPERATURE)),
    "sample applies the temperature to normalised probabilities": ("sample", '''
def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    vocab = model["vocab"]
    rng = np.random.default_rng(seed)
    history = list(prompt or [])
    out = []
    for _ in range(max_len):
        probs = next_token_probs(model, history + out, k, lambdas) / temperature
        probs = probs / probs.sum()
        token = vocab[int(rng.choice(len(vocab), p=probs))]
        if token == EOS:
            break
        out.append(token)
    return out
''', (SAMPLING_TEMPERATURE,)),
    "sampling ignores the seed": ("sample", '''
def sample(model, seed, prompt=None, max_len=20, temperature=1.0, k=0.0, lambdas=None):
    vocab = model["vocab"]
    rng = np.random.default_rng()  # bug: fresh entropy on every call
    history = list(prompt or [])
    out = []
    for _ in range(max_len):
        probs = apply_temperature(next_token_probs(model, history + out, k, lambdas), temperature)
        token = vocab[int(rng.choice(len(vocab), p=probs))]
        if token == EOS:
            break
        out.append(token)
    return out
''', (SEEDED,)),
    "greedy decoding returns the <EOS> it stops at": ("greedy_decode", '''
def greedy_decode(model, prompt=None, max_len=20, k=0.0, lambdas=None):
    vocab = model["vocab"]
    history = list(prompt or [])
    out = []
    for _ in range(max_len):
        token = vocab[int(np.argmax(next_token_probs(model, history + out, k, lambdas)))]
        out.append(token)
        if token == EOS:
            break
    return out
''', (GREEDY_STOPS,)),
    "vocabulary ties not broken alphabetically": ("build_vocab", '''
def build_vocab(sentences, min_count=1):
    counts = {}
    for sentence in sentences:
        for word in sentence:
            counts[word] = counts.get(word, 0) + 1
    kept = [w for w, c in counts.items() if c >= min_count]
    kept.sort(key=lambda w: -counts[w])  # ties stay in order of first appearance
    return [BOS, EOS, UNK] + kept
''', (VOCAB,)),
    "empty lines kept as empty sentences": ("tokenize_lines", '''
def tokenize_lines(text):
    return [word_tokenize(line) for line in text.splitlines()]
''', (TOKENIZE,)),
    "interpolation weights left uniform": ("tune_lambdas", '''
def tune_lambdas(model, sentences):
    return np.full(model["n"], 1.0 / model["n"])
''', (LAMBDAS_OPTIMAL,)),
}


class TestUnit01Ngrams(UnitContract):
    AID = "01-ngrams"
    MAX_SCORE = 28
    STUDENT_FUNCTIONS = 13
    RELEASE_MUST_NOT_CONTAIN = ("np.unique(code",)
    VARIANTS = VARIANTS
