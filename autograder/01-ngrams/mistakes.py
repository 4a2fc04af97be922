"""Known mistakes of 01-ngrams: the wrong implementations students really write, each with the checks
proven to catch it and a hint for the student.

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one, and proves that its grade is
attributed to it), and HINTS holds the advice a student reads when their failures match it. It lives beside
the hidden checks, out of the student worker's sight and out of the student edition.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit


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

# Checks a mistake's grade leaves out unless the mistake is written to fail them (none is slow here).
LEAVE_OUT: tuple[str, ...] = ()

# What a student whose failing checks match the mistake reads: advice, never code.
HINTS: dict[str, str] = {
    "counting window off by one (last n-gram of each sentence lost)":
        "Count the windows of one padded sentence by hand: the last one should end on <EOS>. Check where "
        "your sliding window stops.",
    "no <BOS> padding for the first words":
        "Check that the first words of a sentence get their n-grams too: a sentence is padded with n - 1 "
        "<BOS> tokens, and windows that contain <BOS> must be counted.",
    "history slice off by one (history[-(j-1):] reads everything when j = 1)":
        "Check the context your unigram order reads: it should be empty. Slicing the last j - 1 tokens "
        "goes wrong in Python when j - 1 is zero.",
    "add-k adds k to the numerator only":
        "Sum your add-k distribution over the vocabulary: it must be 1. Adding k to every count also adds "
        "k times the vocabulary size to the total.",
    "add-k denominator counts <BOS> among the possible next tokens":
        "Ask which tokens can come next: <BOS> never does. Count the vocabulary size used for smoothing and "
        "for the uniform fallback over those tokens only.",
    "unknown history words not mapped to <UNK>":
        "Check how a word outside the vocabulary in the history is looked up: the counts only know it as "
        "<UNK>.",
    "sentence_probs forgets the <EOS>":
        "Check that your per-token probabilities include the end of the sentence: predicting <EOS> is part "
        "of the sentence's probability.",
    "perplexity with the log base mixed up (2 ** nats)":
        "Check that the base of your perplexity matches the unit of the cross-entropy: 2 raised to bits, or "
        "e raised to nats.",
    "bits computed with log base 10":
        "Check how you convert nats to bits: a bit is a base-2 logarithm, so divide by the natural log of 2.",
    "cross-entropy averaged over sentences instead of tokens":
        "Check what you average over: cross-entropy is the mean over every predicted token of the text, so "
        "a long sentence counts more than a short one.",
    "temperature applied after the softmax":
        "Check where `apply_temperature` divides by the temperature: it divides the log-probabilities before "
        "the softmax. Dividing the probabilities and normalising again changes nothing.",
    "sample applies the temperature to normalised probabilities":
        "Check how `sample` reshapes each next-token distribution: dividing probabilities by the temperature "
        "and renormalising gives back the same distribution. Let `apply_temperature` do it, since it divides "
        "the log-probabilities.",
    "sampling ignores the seed":
        "Check that every random draw comes from a generator made from the seed: the same seed must give the "
        "same text.",
    "greedy decoding returns the <EOS> it stops at":
        "Check what your decoded output holds when it stops at <EOS>: the end marker ends the sentence but is "
        "not one of its words, so it never belongs in the returned list.",
    "vocabulary ties not broken alphabetically":
        "Check how words with the same count are ordered: the vocabulary breaks ties alphabetically, not by "
        "first appearance.",
    "empty lines kept as empty sentences":
        "Check what a blank line becomes: it holds no tokens, so it is not a sentence.",
    "interpolation weights left uniform":
        "Check that your weights move from their uniform start: each round of EM should shift weight toward "
        "the orders that predict the held-out text better.",
    "window codes overflow int64 at n = 5 (keys read back digit by digit)":
        "Check the size of the numbers that encode a window at full scale: five ids from a 12,000-word "
        "vocabulary do not fit in 64 bits. Re-number the ids, or use a key that cannot overflow.",
    "perplexity from the product of all the probabilities":
        "Check whether you multiply many probabilities: the product of thousands underflows to zero. Add "
        "their logarithms instead.",
    "the generator re-made from the seed at every step":
        "Check where your random generator is created: once per call to `sample`, not once per token, or "
        "every token is drawn with the same random number.",
    "next_token_probs ignores the counts (uniform over every next token)":
        "Check that your distributions come from the n-gram counts: a uniform distribution is normalised, "
        "but it is not the model.",
    "build_vocab lists <UNK> again when the corpus holds it":
        "Check what happens when the corpus already contains <UNK>: each special token appears once, at the "
        "front, and never again among the words.",
    "interpolation renormalised over the orders with a seen history (the chapter's convention)":
        "Check how an order with an unseen history contributes: it keeps its weight and contributes its "
        "uniform distribution, rather than handing its weight to the other orders.",
    "temperature without subtracting the largest log-probability":
        "Check for overflow and underflow at a tiny temperature: subtract the largest scaled log-probability "
        "before exponentiating, as a stable softmax does.",
}
