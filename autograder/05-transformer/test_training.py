"""Checks for Part 5: the training loop step by step, and the graded training run on the dates task
(`lmcourse.dates`).

The training run follows the contract of every graded training run (`lmcourse.grading.training`), scored by
exact match as 04-attention's is:

1. No secret relabelling (a date's characters cannot be relabelled without changing the task). What the
   student's code cannot know in advance is the held-out dates: 300 of them, in every format, drawn from
   `training.secret_rng()`, fresh for every grade (the training draws its own from the seed it is given;
   two centuries times seven formats make 511,343 sources, of which a run sees at most 38,400).
2. Causality by perturbation, in the same batch (`EvalBatch`, `check_causal`): the trained
   model (`train_then_evaluate`: its weights already taken) runs once, teacher-forced, on 48 held-out pairs plus 6 copies whose
   decoder inputs from a secret position k on are replaced (each copy with its pair's source), rows in a
   secret order; a prediction before k that moves fails. A decoder without its causal mask scores a
   near-zero teacher-forced loss and decodes nothing right: it must fail here, not be scored.
3. The score from what the grader controls (`TrustedModel`): the model's state_dict, taken before the
   evaluation rows reach the worker; the
   grader loads it into the reference ``Transformer``, requires the student's teacher-forced logits to match
   the reference's with those weights (`check_match`), then decodes the 300 held-out sources greedily with
   the reference's code, in this process. The score is the share that come out entirely right.
4. Finite values: logits finite (`finite_logits`), weights finite (`load_trusted`); an accuracy is compared
   as ``not (accuracy >= threshold)``, so a NaN fails.

What it does not stop (as the contract says): weights trained elsewhere and carried in the notebook score
like honestly trained ones.

Tiers (the reference solution; torch 2.13.0 CPU, one thread, a shared and loaded 2-core machine,
2026-11-23; exact match on three sets of 300 fresh dates each):
- cpu: 600 steps, batch 64, Adam 1e-3 with 100 warm-up steps, width 64, 4 heads, d_ff 256, 2+2 layers
  (242,413 parameters). The solution's training seeds 0-4: 0.983/0.997/0.997, 0.987/0.997/0.977,
  0.990/1.000/0.987, 0.957/0.967/0.963, 0.990/0.990/0.997 (worst 0.957), 35-44 s of CPU a run. Known wrong,
  seed 0: the decoder without its causal mask 0.000 on all three sets; no positions 0.107/0.070/0.143; the
  embeddings times sqrt(d_model) 0.117/0.097/0.083 (also caught by the forward check). The threshold 0.80
  sits 0.16 below the solution's worst set and 0.66 above the best known-wrong one. The graded run (seed 0,
  through the real grader) passes in about 45 s.
- gpu: 1,000 steps, batch 128, width 128, d_ff 512, 2+2 layers, threshold 0.90. No GPU has been lent to a
  session that worked on this check, so the configuration was run on a CPU instead (one thread, 280-296 s of
  CPU a run): the solution, seed 0: 0.983/0.980/0.987; no positions, seed 0: 0.147/0.097/0.097. The
  threshold sits 0.08 below the solution and 0.75 above the known-wrong run; one seed of each only, so the
  first run on a real GPU should confirm the margins (tests/test_gpu_tiers.py prints the accuracy).
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.dates import TARGET_LEN, VOCAB_SIZE, date_pairs, decode, encode, iso, parse_date
from lmcourse.grading import training
from lmcourse.grading.checks import check
from lmcourse.grading.compare import one_thread
from lmcourse.grading.optimizer import OptimizerSpec, check_optimizer
from lmcourse.grading.seq2seq import Seq2SeqTask, check_training_steps, eval_rows, trusted_model
from lmcourse.seq2seq import BOS_ID, EOS_ID, PAD_ID, pad_batch, trim

CPU = dict(steps=600, batch_size=64, lr=1e-3, warmup=100, d_model=64, n_heads=4, d_ff=256, n_layers=2, seed=0,
           device="cpu")
GPU = dict(steps=1000, batch_size=128, lr=1e-3, warmup=100, d_model=128, n_heads=4, d_ff=512, n_layers=2, seed=0,
           device="cuda")
CPU_THRESHOLD = 0.80
GPU_THRESHOLD = 0.90
HELD_OUT = 300


def _shape(config):
    return dict(src_vocab=VOCAB_SIZE, tgt_vocab=VOCAB_SIZE, d_model=config["d_model"], n_heads=config["n_heads"],
                d_ff=config["d_ff"], n_enc=config["n_layers"], n_dec=config["n_layers"], norm_first=True)


def _name(shape):
    return "Transformer(" + ", ".join(f"{k}={v}" for k, v in shape.items() if k not in ("src_vocab", "tgt_vocab")) + ")"


# The step-by-step trace: a tiny model and a learning rate so large that the raw gradients' global norm goes
# well above 1 within a few steps, so clipping is visible; a warm-up of 3 steps, so the rates differ.
TRACE = dict(steps=6, batch_size=8, lr=1.0, warmup=3, d_model=8, n_heads=2, d_ff=16, n_layers=1, device="cpu")


def _targets(src: np.ndarray, T: int):
    """(tgt_in, tgt_out), each (B, T) int64, that seq2seq_batch makes for the source rows `src`: <BOS> + the
    date in ISO form, padded; the ISO date + <EOS>, padded. None where a row is not a date (then the model
    was not called on the task's data)."""
    targets = []
    for row in src.tolist():
        try:
            targets.append(encode(iso(parse_date(decode(row)))))
        except ValueError:
            return None
    tgt_in = np.full((len(src), T), PAD_ID, dtype=np.int64)
    tgt_out = np.full((len(src), T), PAD_ID, dtype=np.int64)
    for b, target in enumerate(targets):
        tgt_in[b, :len(target) + 1] = ([BOS_ID] + target)[:T]
        tgt_out[b, :len(target) + 1] = (target + [EOS_ID])[:T]
    return tgt_in, tgt_out


DATES = Seq2SeqTask(targets=_targets, described="each source's date in ISO form", vocab_size=VOCAB_SIZE)


@check(points=1, cell="test_training", name="train_transformer, step by step: each optimiser step receives the "
                                           "gradient of that step's loss (padding ignored), clipped to global norm "
                                           "1, at the warm-up's learning rate, and one Adam (the paper's betas "
                                           "and eps) updates the weights from it; the model "
                                           "returned in eval mode", visibility="visible")
def test_training_steps(student, reference, rng, rules):
    """What the exact-match score cannot see, followed step by step (`train_and_trace`: the student's
    train_transformer on a tiny model, every forward pass with its weights, every optimiser step with the
    gradients it received and its learning rate). For each step the grader requires: the model called as
    ``model(src, tgt_in)`` on a batch of dates with ``tgt_in`` = <BOS> + the ISO date, padded (targets shifted
    for teacher forcing); the learning rate ``lr * min(1, (step + 1) / warmup)``; a cosine of at least 0.999
    between the gradient the optimiser received and the gradient of the spec's loss, recomputed here with the
    reference model, that step's weights and batch; and, where that gradient's norm is above 1, a received
    norm of at most 1. Measured on the reference (seeds 0-19): cosine 1 - 1e-15 at every step, and the largest
    raw norm of a run 2.9-11; the loss taken over the padding too: cosines 0.3-0.9 at some step. Then the
    optimiser (`lmcourse.grading.optimizer`): torch.optim.Adam with betas=(0.9, 0.98), eps=1e-9, one state
    through the run, every update Adam's from the gradients the step received (Adam's defaults instead: 1.1-5.5%
    off from the first step, seeds 0-2; an Adam made anew every step fails too).
    """
    config = dict(TRACE, seed=int(rng.integers(1 << 20)))
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = f"train_transformer({settings})"
    out = student.probe("train_and_trace", fn="train_transformer", cls="Transformer", config=config,
                        gradients=True, timeout=120, **rules)
    shape = _shape(config)
    trusted = trusted_model(student, reference, "Transformer", shape, name=_name(shape), rules=rules)
    check_training_steps(out, steps=config["steps"], batch_size=config["batch_size"], trusted=trusted, task=DATES,
                         what=what, rate=lambda j: config["lr"] * min(1.0, (j + 1) / config["warmup"]),
                         rate_rule=f"lr * min(1, (step + 1) / warmup) (a linear warm-up over {config['warmup']} "
                                   "steps, then constant)")
    adam = OptimizerSpec(kind="Adam", rate=lambda j: config["lr"] * min(1.0, (j + 1) / config["warmup"]),
                         betas=(0.9, 0.98), eps=1e-9, check_rates=False,
                         said="torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)")
    check_optimizer(out, adam, steps=config["steps"], what=what)
    training.check_returned_for_use(out, what=what, fn="train_transformer")


@check(points=4, cell="test_training", name="train_transformer: the trained model translates enough held-out dates "
                                           "exactly (greedy decoding)")
def test_training_run(student, reference, tier, rules):
    config, threshold = (GPU, GPU_THRESHOLD) if tier == "gpu" else (CPU, CPU_THRESHOLD)
    rng = training.secret_rng()
    pairs = date_pairs(HELD_OUT, rng)
    evb, rows, tgt_in, src = eval_rows(pairs, VOCAB_SIZE, rng)
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = f"train_transformer({settings})"
    out = training.train_then_evaluate(student, fn="train_transformer", config=config, eval_inputs=rows,
                                       eval_kwargs={"tgt_in": evb.inputs}, timeout=600 if tier == "gpu" else 300,
                                       what=what, **rules)
    shown = (f"{what}, then model(src, tgt_in) on {len(rows)} rows: {evb.lanes} held-out dates and "
             f"{len(evb.copies)} copies whose tgt_in was replaced from some position on")
    logits = training.finite_logits(out["logits"], (len(rows), tgt_in.shape[1], VOCAB_SIZE),
                                    what=f"{shown}: the logits")
    training.check_causal(logits, evb, what=shown)
    shape = _shape(config)
    sources = torch.from_numpy(src)
    trusted = training.TrustedModel(build=lambda: reference.Transformer(**shape), name=_name(shape),
                                    forward=lambda model, x: model(sources, x))
    model = training.load_trusted(trusted, out.get("state_dict"), what=what)
    expected = training.finite_logits(training.trusted_logits(trusted, model, tgt_in), evb.held_out(logits).shape,
                                      what=f"{what}: the logits the grader computes from your model's weights")
    training.check_match(evb.held_out(logits), expected, what=shown, name=_name(shape))
    held_out, _ = pad_batch([s for s, _ in pairs])
    with one_thread():
        ys = model.greedy_decode(held_out, TARGET_LEN + 1).tolist()
    right = [trim(y) == t for y, (_, t) in zip(ys, pairs)]
    accuracy = float(np.mean(right))
    wrong = [f"{decode(s)!r} -> {decode(y)!r}" for y, (s, _), ok in zip(ys, pairs, right) if not ok][:3]
    training.check_at_least(
        accuracy, threshold, failure=(
            f"{what}: the grader loaded your model's weights into {_name(shape)} and decoded {len(pairs)} held-out "
            f"dates greedily; {accuracy:.3f} of them came out exactly right (wrong, for example: "
            f"{'; '.join(wrong)}); a correct implementation reaches at least {threshold:.2f} with these settings. "
            "Check the warm-up and the learning rate, that the loss ignores the padding, and that every step clips "
            "and updates"))
