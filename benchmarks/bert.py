"""Unit 6 benchmark: the solution's BertModel with all-MiniLM-L6-v2's real weights against Hugging Face's
`transformers.BertModel` on the same files, same inputs.

    python benchmarks/bert.py                 # the table (about a minute)
    python benchmarks/bert.py --repeats 1     # quicker, noisier

The solution's code (`BertModel`, `mean_pool`, `wordpiece_tokenize`) is imported from the 06-bert solution
notebook through the grader's own extraction (the reference module), so the numbers are those of the code
students are graded against. Both models run in eval mode, without gradients, one thread, float32, on
batches of real lines of TinyShakespeare tokenized by the solution's WordPiece ([CLS] line [SEP], padded to
the batch's longest row, an attention mask for the padding); the baseline is transformers' BertModel
(`BertModel.from_pretrained` on the package's own directory, `local_files_only=True`, no pooler, its default
attention implementation). Each cell is the median of `--repeats` interleaved runs; "sentences/s" counts the
batch's lines; `max |difference|` is the largest difference between the two sides' hidden states at real
tokens, and `max |cos - 1|` between their mean-pooled sentence embeddings.

Measured (2 CPU cores shared with other work, one thread, torch 2.13.0 CPU, transformers 5.23.0;
2026-11-23, `python benchmarks/bert.py --repeats 3`): see the table printed by the run recorded in the
note of issue 19.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from lmcourse import data, minilm
from lmcourse.course import Course

ROOT = Path(__file__).resolve().parent.parent
BATCHES = (1, 8, 32, 128)


def batch_of(ref, lines: list[str]):
    """(ids, attention_mask), each (B, T) int64: [CLS] line [SEP], padded with [PAD]."""
    vocab, special = minilm.piece_ids(), minilm.special_ids()
    rows = [[special["[CLS]"]] + ref.wordpiece_tokenize(line, vocab)[:126] + [special["[SEP]"]] for line in lines]
    T = max(map(len, rows))
    ids = torch.full((len(rows), T), special["[PAD]"], dtype=torch.int64)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
    return ids, (ids != special["[PAD]"]).long()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import transformers

    ref = Course(ROOT).assignment("06-bert").reference_module()
    ours = ref.BertModel(len(minilm.vocab()))
    ours.load_state_dict(minilm.state_dict(as_torch=True))
    ours.eval()
    theirs = transformers.BertModel.from_pretrained(str(data.fetch("minilm-config").parent), local_files_only=True,
                                                    add_pooling_layer=False).eval()
    lines = [line for line in data.load_text("tinyshakespeare").split("\n") if line.strip() and not line.endswith(":")]
    rng = np.random.default_rng(0)
    print("| batch | tokens (real / padded) | reference sentences/s | transformers sentences/s | x transformers "
          "| max |difference| | max |cos - 1| |")
    print("|---|---|---|---|---|---|---|")
    for B in BATCHES:
        chosen = [lines[i] for i in rng.choice(len(lines), size=B, replace=False)]
        ids, am = batch_of(ref, chosen)
        times = {"ours": [], "theirs": []}
        with torch.no_grad():
            h_ours = ours(ids, None, am)
            h_theirs = theirs(input_ids=ids, attention_mask=am).last_hidden_state
            for _ in range(args.repeats):
                times["ours"].append(timed(lambda: ours(ids, None, am)))
                times["theirs"].append(timed(lambda: theirs(input_ids=ids, attention_mask=am)))
        real = am.bool()
        difference = (h_ours - h_theirs)[real].abs().max().item()
        e_ours = torch.nn.functional.normalize(ref.mean_pool(h_ours, am), dim=-1)
        e_theirs = torch.nn.functional.normalize(ref.mean_pool(h_theirs, am), dim=-1)
        cos = (e_ours * e_theirs).sum(-1)
        t_ours, t_theirs = statistics.median(times["ours"]), statistics.median(times["theirs"])
        print(f"| {B} | {int(am.sum())} / {ids.numel()} | {B / t_ours:.1f} | {B / t_theirs:.1f} | "
              f"{t_theirs / t_ours:.2f}x | {difference:.1e} | {(cos - 1).abs().max().item():.1e} |")


if __name__ == "__main__":
    main()
