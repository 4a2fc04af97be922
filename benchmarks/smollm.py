"""Capstone benchmark: SmolLM2-135M-Instruct in the course's reference decoder against transformers reading the
same GGUF file: logit agreement, and generation speed with and without the key-value cache.

    python benchmarks/smollm.py                # about 2 minutes on one thread
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
2026-11-24 04:40 UTC, 2 AMD EPYC cores shared with a CI run: load average about 2):
--------------------------------------------------------------------------------------------------------------------
(filled in below the code by the run: see the closing note of issue 21 for the figures)
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
