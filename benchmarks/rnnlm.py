"""Unit 3 benchmark: the solution's LSTM (tensor operations, a Python loop over time) against nn.LSTM.

    python benchmarks/rnnlm.py                  # both parts
    python benchmarks/rnnlm.py --no-training    # the layer timings only (a few seconds)

The solution's classes (`LSTM`, `RNNLM`, `train_lm`, ...) are imported from the
03-rnnlm solution notebook through the grader's own extraction (the reference
module), so the numbers are those of the code students are graded against.

Part 1, one layer, the same batch and the same weights: forward + backward
time of the reference `LSTM` against `nn.LSTM(batch_first=True)` (PyTorch's
fused kernel), median of `--repeats` interleaved runs, one thread, and the
largest difference between their outputs (they compute the same function).

Part 2, time to the CPU tier's threshold: the graded run (`train_lm` with the
CPU tier's settings, from autograder/03-rnnlm/test_training.py) for 100, 150,
..., 300 steps, each from scratch, and the validation loss after each; then
the same with `nn.LSTM` swapped in for the reference `LSTM` (the baseline).
"Steps to threshold" is the fewest steps whose run ends at or below 2.10 nats
per character; "time" is that run's training time.

Measured (2 shared CPU cores, one thread, torch 2.13 CPU; 2026-11-22 06:35 UTC, load about 2)
-----------------------------------------------------------------------------------------
| B x T x d_in -> d_hidden | reference LSTM ms | nn.LSTM ms | x nn.LSTM | max |difference| |
| 32 x 32 x 32 -> 128      |              18.1 |       10.2 |      1.8x |          8.9e-08 |
| 64 x 64 x 64 -> 256      |             155.9 |      160.6 |      1.0x |          8.9e-08 |
| 16 x 128 x 64 -> 512     |             634.9 |      274.4 |      2.3x |          8.9e-08 |
On one CPU thread the Python loop over time costs at most 2.3x the fused kernel: at these sizes the
matrix products dominate. (On a GPU the gap is far larger: every step is several kernel launches.)

| steps | reference: train s, validation loss | nn.LSTM: train s, validation loss |
| 100   | 4.7, 2.229                          | 1.2, 2.229                        |
| 150   | 5.7, 2.103                          | 2.3, 2.103                        |
| 200   | 6.4, 2.034                          | 3.2, 2.034                        |
| 250   | 7.9, 1.997                          | 4.0, 1.997                        |
| 300   | 8.5, 1.957                          | 4.3, 1.957                        |
Both reach the 2.10 threshold at 200 steps (6.4 s against 3.2 s: 2.0x); the losses agree to the
third decimal at every length, since the two layers compute the same function.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from lmcourse.course import Course
from lmcourse.grading import layers

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [(32, 32, 32, 128), (64, 64, 64, 256), (16, 128, 64, 512)]  # (B, T, d_in, d_hidden)
STEPS = (100, 150, 200, 250, 300)


def checks_module():
    """autograder/03-rnnlm/test_training.py: CPU (settings), CPU_THRESHOLD, LANES."""
    return Course(ROOT).assignment("03-rnnlm").checks_module("test_training")


# nn.LSTM behind the assignment's `LSTM` interface (states (B, d) in and out), as the checks use it
FusedLSTM = layers.TorchLSTM


def fwd_bwd_seconds(layer, x, repeats) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        outputs, _ = layer(x)
        outputs.square().mean().backward()
        times.append(time.perf_counter() - start)
    return times


def layer_table(ref, repeats: int) -> None:
    print("| B x T x d_in -> d_hidden | reference LSTM ms | nn.LSTM ms | x nn.LSTM | max |difference| |")
    print("|---|---|---|---|---|")
    for B, T, d_in, d in SHAPES:
        torch.manual_seed(0)
        fused = FusedLSTM(d_in, d)
        ours = ref.LSTM(d_in, d)
        ours.load_state_dict({layers.as_ours(k): v for k, v in fused.state_dict().items()})
        x = torch.randn(B, T, d_in)
        with torch.no_grad():
            diff = (ours(x)[0] - fused(x)[0]).abs().max().item()
        fwd_bwd_seconds(ours, x, 1), fwd_bwd_seconds(fused, x, 1)  # warm-up
        a, b = [], []
        for _ in range(repeats):  # interleaved, so that a busy moment hits both
            a += fwd_bwd_seconds(ours, x, 1)
            b += fwd_bwd_seconds(fused, x, 1)
        ta, tb = statistics.median(a), statistics.median(b)
        print(f"| {B} x {T} x {d_in} -> {d} | {1e3 * ta:.1f} | {1e3 * tb:.1f} | {ta / tb:.1f}x | {diff:.1e} |")


def validation_loss(ref, model, val_ids, lanes: int) -> float:
    n = (len(val_ids) - 1) // lanes
    model.eval()
    with torch.no_grad():
        logits, _ = model(val_ids[: n * lanes].view(lanes, n))
    return ref.lm_loss(logits, val_ids[1: n * lanes + 1].view(lanes, n)).item()


def training_table(ref) -> None:
    checks = checks_module()
    chars, train_ids, val_ids = ref.shakespeare_characters()
    config = dict(checks.CPU)
    print(f"\nCPU tier: {', '.join(f'{k}={v}' for k, v in config.items() if k != 'steps')}; "
          f"threshold {checks.CPU_THRESHOLD} nats per character")
    print("| LSTM | steps | train s | validation loss |")
    print("|---|---|---|---|")
    reached = {}
    original = ref.LSTM
    for name, layer in (("reference", original), ("nn.LSTM", FusedLSTM)):
        ref.LSTM = layer  # RNNLM builds whatever `LSTM` names in the reference module
        try:
            for steps in STEPS:
                start = time.perf_counter()
                model = ref.train_lm(train_ids.numpy(), len(chars), **dict(config, steps=steps))
                seconds = time.perf_counter() - start
                loss = validation_loss(ref, model, val_ids, checks.LANES)
                print(f"| {name} | {steps} | {seconds:.1f} | {loss:.3f} |", flush=True)
                if loss <= checks.CPU_THRESHOLD and name not in reached:
                    reached[name] = (steps, seconds)
        finally:
            ref.LSTM = original
    for name in ("reference", "nn.LSTM"):
        steps, seconds = reached.get(name, (None, float("nan")))
        print(f"{name}: threshold reached after {steps} steps, {seconds:.1f} s" if steps else
              f"{name}: threshold not reached within {STEPS[-1]} steps")
    if len(reached) == 2:
        print(f"time to threshold, reference / nn.LSTM: {reached['reference'][1] / reached['nn.LSTM'][1]:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-training", action="store_true", help="only the layer timings")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the grader's worker runs this assignment (limits.json: threads 1)
    ref = Course(ROOT).assignment("03-rnnlm").reference_module()
    layer_table(ref, args.repeats)
    if not args.no_training:
        training_table(ref)


if __name__ == "__main__":
    main()
