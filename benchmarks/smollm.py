"""Capstone benchmark: SmolLM2-135M-Instruct in the course's reference decoder against transformers reading the
same GGUF file: logit agreement, and generation speed with and without the key-value cache.

    python benchmarks/smollm.py                # about 6 minutes on one thread (the runs without a cache are slow)
    python benchmarks/smollm.py --repeats 1    # quicker, noisier

The reference decoder is the 08-capstone solution's `Llama`, `load_gguf_weights` and `generate`, imported through
the grader's own extraction (the reference module), never copied: the code students are graded against. The
baseline is transformers' `LlamaForCausalLM` built by `AutoModelForCausalLM.from_pretrained(folder,
gguf_file=...)` from the same checksum-verified file (it dequantises with the same `gguf` package and permutes the
query and key rows for its half-pairing RoPE), float32, eager attention, greedy `generate` with its own cache
(`use_cache=True`) and without (`use_cache=False`). One thread (`torch.set_num_threads(1)`, as the grader's worker
runs the assignment), CPU.

Table 1, logits: both models on the same prompts (a chat prompt, code, French); the largest |difference| over every
logit of every position, and the largest logit for scale. Table 2, generation: one chat prompt, n = 32 and 96 new
tokens greedy (no stop at <|im_end|>, so that both produce exactly n), median wall time of `--repeats` interleaved
runs; tokens/s = n / time; "x transformers" is transformers' time over the row's (above 1: the row is faster);
"same tokens" compares the greedy tokens with transformers' (with the cache) up to the end of the answer
(<|im_end|>, which transformers' min_new_tokens keeps it from choosing).

Measured (`python benchmarks/smollm.py`, one thread, torch 2.13.0 CPU, transformers 5.23.0, gguf 0.19.0,
2026-11-24 04:22-04:28 UTC, 2 AMD EPYC cores, otherwise idle)
--------------------------------------------------------------------------------------------------------------------
Building: the reference 0.7 s once the file is read (the read and dequantisation: about 3.3 s, shared),
transformers 12.3 s (it reads and dequantises the file again).

| prompt tokens | largest |logit difference| | largest logit |
| 39 | 9.0e-05 | 37.6 |
| 18 | 4.0e-05 | 41.5 |
| 8  | 5.7e-05 | 30.6 |
The two models compute the same function: over every logit of every position the largest difference is 1e-4 of
the largest logit, float32 rounding between two orders of the same operations.

| new tokens | model | s | tokens/s | x transformers (with its cache) | same tokens |
| 32 | reference, with the cache    |  1.47 | 21.8 | 0.99x | yes |
| 32 | reference, without           |  6.66 |  4.8 | 0.22x | yes |
| 32 | transformers, with its cache |  1.45 | 22.1 | 1.00x | yes |
| 32 | transformers, without        |  5.35 |  6.0 | 0.27x | yes |
| 96 | reference, with the cache    |  4.06 | 23.6 | 1.00x | yes |
| 96 | reference, without           | 28.24 |  3.4 | 0.14x | yes |
| 96 | transformers, with its cache |  4.05 | 23.7 | 1.00x | yes |
| 96 | transformers, without        | 22.50 |  4.3 | 0.18x | yes |
With its cache the reference generates at transformers' speed (0.99-1.00x, about 22-24 tokens/s on one thread:
each token is 30 layers of matrix-vector products against 134.5 M float32 weights, memory-bound, the same on both
sides); without a cache both slow down as the sequence grows (the reference 4.8 then 3.4 tokens/s, 4.5x then 7x
slower than with it), the reference about 20% behind transformers there, where its hand-written attention
materialises the (heads, T, T) scores. The greedy tokens are the same as transformers' in every run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from lmcourse import data, smollm
from lmcourse.course import Course

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ([{"role": "user", "content": "Write a short story about a lighthouse keeper."}],)
TEXTS = ("def fibonacci(n):\n    if n < 2:\n        return n\n    return", "La tour Eiffel se trouve à")
LENGTHS = (32, 96)


def before_end(tokens: torch.Tensor) -> torch.Tensor:
    """The tokens up to the first <|im_end|> (id 2), included: transformers' min_new_tokens keeps it from choosing
    the end of the answer, the reference (told no eos_id) writes it and goes on; both do n tokens of work."""
    ends = (tokens == 2).nonzero()
    return tokens if len(ends) == 0 else tokens[: int(ends[0]) + 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each generation")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM
    import transformers

    ref = Course(ROOT).assignment("08-capstone").reference_module()
    model_file = smollm.smollm2()
    c = model_file.config
    began = time.perf_counter()
    ours = ref.load_gguf_weights(ref.Llama(c.vocab_size, c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.d_ff,
                                           c.rope_base, c.norm_eps), smollm.torch_tensors(model_file)).eval()
    built_ours = time.perf_counter() - began
    path = data.fetch(smollm.CORPUS)
    began = time.perf_counter()
    theirs = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
    built_theirs = time.perf_counter() - began
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, one thread; building: the reference "
          f"{built_ours:.1f} s (the file read before), transformers {built_theirs:.1f} s", flush=True)

    tokenizer = smollm.hf_tokenizer(model_file)
    prompts = [tokenizer.encode(smollm.chat_prompt(m, model=model_file)).ids for m in PROMPTS]
    prompts += [tokenizer.encode(t).ids for t in TEXTS]
    print("\n| prompt tokens | largest |logit difference| | largest logit |")
    print("|---|---|---|")
    for ids in prompts:
        x = torch.tensor([ids])
        with torch.no_grad():
            a, b = ours(x), theirs(x).logits
        print(f"| {len(ids)} | {(a - b).abs().max().item():.1e} | {b.abs().max().item():.1f} |", flush=True)

    x = torch.tensor([prompts[0]])
    runs = {
        "reference, with the cache": lambda n: ref.generate(ours, x, n, use_cache=True),
        "reference, without": lambda n: ref.generate(ours, x, n, use_cache=False),
        "transformers, with its cache": lambda n: theirs.generate(x, max_new_tokens=n, min_new_tokens=n,
                                                                  do_sample=False, use_cache=True),
        "transformers, without": lambda n: theirs.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                                           use_cache=False),
    }
    print(f"\nGreedy generation after a chat prompt of {x.shape[1]} tokens; median of {args.repeats} interleaved runs")
    print("| new tokens | model | s | tokens/s | x transformers (with its cache) | same tokens |")
    print("|---|---|---|---|---|---|")
    for n in LENGTHS:
        times = {name: [] for name in runs}
        out = {}
        for name, run in runs.items():  # warm-up
            run(2)
        for _ in range(args.repeats):
            for name, run in runs.items():
                began = time.perf_counter()
                with torch.no_grad():
                    out[name] = run(n)
                times[name].append(time.perf_counter() - began)
        base = statistics.median(times["transformers, with its cache"])
        for name in runs:
            t = statistics.median(times[name])
            same = torch.equal(before_end(out[name][0]), before_end(out["transformers, with its cache"][0]))
            print(f"| {n} | {name} | {t:.2f} | {n / t:.1f} | {base / t:.2f}x | {'yes' if same else 'NO'} |",
                  flush=True)
    print(f"\nthe reference's greedy answer: {tokenizer.decode(out['reference, with the cache'][0, x.shape[1]:].tolist())!r}")


if __name__ == "__main__":
    sys.exit(main())
