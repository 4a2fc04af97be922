"""Unit 1 benchmark: the solution's n-gram counting against a plain Counter loop,
and validation perplexity per n on TinyShakespeare (word and character level).

    python benchmarks/ngrams.py            # full corpus, n = 1..5, both levels

The solution's functions are imported from the 01-ngrams solution notebook
through the grader's own extraction (the reference module), so the numbers
are those of the code students are graded against, never a copy of it.

Columns
-------
count s       ngram_counts (vectorised: integer ids, sliding windows, np.unique)
Counter s     the plain loop: for each padded sentence, for each position,
              counter[" ".join(window)] += 1 (the same output, checked equal)
speed-up      Counter s / count s
train MLE     perplexity of the order-n maximum-likelihood model on the training text
val add-k     validation perplexity with add-k smoothing (k = 0.01)
val interp    validation perplexity of the interpolation of orders 1..n, weights
              tuned on the validation text (EM, `tune_lambdas`)
Perplexities are e ** (nats per token), averaged over every word or character and
every <EOS>; the validation text's rare words map to <UNK> (word level, min_count 2).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from lmcourse.data import BOS, EOS, load_text, train_val_split
from lmcourse.course import Course

ROOT = Path(__file__).resolve().parent.parent


def counter_ngrams(sentences: list[list[str]], n: int) -> dict[str, int]:
    """The baseline: a Python loop over every token of every padded sentence."""
    counts: Counter = Counter()
    for s in sentences:
        padded = [BOS] * (n - 1) + s + [EOS]
        for i in range(len(padded) - n + 1):
            counts[" ".join(padded[i:i + n])] += 1
    return dict(counts)


def best_time(fn, *args, repeat: int = 3):
    """The fastest of `repeat` runs (the least disturbed by other processes), and the result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def level_data(ref, level: str, text: str):
    train_text, val_text = train_val_split(text)
    if level == "word":
        train, val = ref.tokenize_lines(train_text), ref.tokenize_lines(val_text)
        vocab = ref.build_vocab(train, min_count=2)
    else:  # characters of each non-empty line
        train = [list(line) for line in train_text.splitlines() if line]
        val = [list(line) for line in val_text.splitlines() if line]
        vocab = ref.build_vocab(train, min_count=1)
    return ref.replace_rare(train, vocab), ref.replace_rare(val, vocab), vocab


def ppl(ref, model, sentences, **kwargs) -> float:
    return ref.cross_entropy([ref.sentence_probs(model, s, **kwargs) for s in sentences])["perplexity"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=5)
    parser.add_argument("--levels", nargs="+", default=["word", "char"], choices=["word", "char"])
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per measurement (best is kept)")
    parser.add_argument("--k", type=float, default=0.01, help="add-k smoothing constant")
    args = parser.parse_args()

    ref = Course(ROOT).assignment("01-ngrams").reference_module()
    text = load_text("tinyshakespeare")
    print(f"TinyShakespeare: {len(text):,} characters; 90% train / 10% validation (nanoGPT split)\n")
    header = (f"{'level':5} {'n':>2} {'n-grams':>9} {'count s':>8} {'Counter s':>9} {'speed-up':>8} "
              f"{'train MLE':>10} {'val add-k':>10} {'val interp':>10}  lambdas")
    for level in args.levels:
        train, val, vocab = level_data(ref, level, text)
        tokens = sum(len(s) + 1 for s in train)
        print(f"{level} level: {len(train):,} training lines, {tokens:,} predicted tokens, |vocab| = {len(vocab):,}")
        print(header)
        print("-" * len(header))
        full = ref.build_model(train, vocab, args.max_n)
        for n in range(1, args.max_n + 1):
            t_ours, ours = best_time(ref.ngram_counts, train, n, repeat=args.repeat)
            t_loop, loop = best_time(counter_ngrams, train, n, repeat=args.repeat)
            assert ours == loop, f"{level} n={n}: ngram_counts and the Counter loop disagree"
            model = {**full, "n": n, "counts": full["counts"][:n], "contexts": full["contexts"][:n]}
            lambdas = ref.tune_lambdas(model, val)
            row = (f"{level:5} {n:2d} {len(ours):9,d} {t_ours:8.3f} {t_loop:9.3f} {t_loop / t_ours:7.2f}x "
                   f"{ppl(ref, model, train):10.2f} {ppl(ref, model, val, k=args.k):10.2f} "
                   f"{ppl(ref, model, val, lambdas=lambdas):10.2f}  {' '.join(f'{x:.2f}' for x in lambdas)}")
            print(row, flush=True)
        print()


if __name__ == "__main__":
    main()
