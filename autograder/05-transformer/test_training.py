"""Checks for Part 5: the training loop step by step, and the graded training run on the dates task
(`lmcourse.dates`).

The training run follows the contract of every graded training run (`lmcourse.grading.training`), scored by
exact match as 04-attention's is:

1. No secret relabelling (a date's characters cannot be relabelled without changing the task). What the
   student's code cannot know in advance is the held-out dates: 300 of them, in every format, drawn from
   `training.secret_rng()`, fresh for every grade (the training draws its own from the seed it is given;
   two centuries times seven formats make 511,343 sources, of which a run sees at most 38,400).
2. Causality by perturbation, in the same batch (`EvalBatch`, `check_causal`): the probe
   `train_and_evaluate` runs the trained model once, teacher-forced, on 48 held-out pairs plus 6 copies whose
   decoder inputs from a secret position k on are replaced (each copy with its pair's source), rows in a
   secret order; a prediction before k that moves fails. A decoder without its causal mask scores a
   near-zero teacher-forced loss and decodes nothing right: it must fail here, not be scored.
3. The score from what the grader controls (`TrustedModel`): the probe returns the model's state_dict, the
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
from lmcourse.seq2seq import BOS_ID, EOS_ID, PAD_ID, pad_batch, seq2seq_batch, trim

CPU = dict(steps=600, batch_size=64, lr=1e-3, warmup=100, d_model=64, n_heads=4, d_ff=256, n_layers=2, seed=0,
           device="cpu")
GPU = dict(steps=1000, batch_size=128, lr=1e-3, warmup=100, d_model=128, n_heads=4, d_ff=512, n_layers=2, seed=0,
           device="cuda")
CPU_THRESHOLD = 0.80
GPU_THRESHOLD = 0.90
HELD_OUT = 300
TEACHER_FORCED = 48  # held-out pairs also run teacher-forced, for the causality and match checks


def _shape(config):
    return dict(src_vocab=VOCAB_SIZE, tgt_vocab=VOCAB_SIZE, d_model=config["d_model"], n_heads=config["n_heads"],
                d_ff=config["d_ff"], n_enc=config["n_layers"], n_dec=config["n_layers"], norm_first=True)


def _name(shape):
    return "Transformer(" + ", ".join(f"{k}={v}" for k, v in shape.items() if k not in ("src_vocab", "tgt_vocab")) + ")"


# The step-by-step trace: a tiny model and a learning rate so large that the raw gradients' global norm goes
# well above 1 within a few steps, so clipping is visible; a warm-up of 3 steps, so the rates differ.
TRACE = dict(steps=6, batch_size=8, lr=1.0, warmup=3, d_model=8, n_heads=2, d_ff=16, n_layers=1, device="cpu")
MIN_COSINE = 0.999
CLIP = 1.0


def _reference_step(reference, trusted, weights, src, tgt_in, tgt_out, *, what):
    """{name: float64 gradient} of the mean cross-entropy over the real target tokens (the spec's loss) of the
    reference Transformer with `weights`, on one batch, computed here."""
    model = training.load_trusted(trusted, weights, what=what)
    model.train(True)
    model.zero_grad(set_to_none=True)
    with one_thread(), torch.enable_grad():
        logits = model(torch.from_numpy(src), torch.from_numpy(tgt_in))  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB_SIZE), torch.from_numpy(tgt_out).reshape(-1),
                                                 ignore_index=PAD_ID)
        loss.backward()
    return {name: (p.grad.double().numpy() if p.grad is not None else np.zeros(tuple(p.shape)))
            for name, p in model.named_parameters()}


def _expected_tgt(src: np.ndarray, T: int):
    """(tgt_in, tgt_out) the spec gives for the source rows `src` (each padded to T), or None where a row is
    not a date (then the model was not called on the task's data)."""
    targets = []
    for row in src.tolist():
        try:
            targets.append(encode(iso(parse_date(decode(row)))))
        except ValueError:
            return None
    tgt_in = np.full((len(src), T), PAD_ID, dtype=np.int64)
    tgt_out = np.full((len(src), T), PAD_ID, dtype=np.int64)
    for b, target in enumerate(targets):
        tgt_in[b, :len(target) + 1] = [BOS_ID] + target
        tgt_out[b, :len(target) + 1] = target + [EOS_ID]
    return tgt_in, tgt_out


@check(points=1, cell="test_training", name="train_transformer, step by step: each optimiser step receives the "
                                           "gradient of that step's loss (padding ignored), clipped to global norm "
                                           "1, at the warm-up's learning rate", visibility="visible")
def test_training_steps(student, reference, rng, rules):
    """What the exact-match score cannot see, followed step by step (`train_and_trace`: the student's
    train_transformer on a tiny model, every forward pass with its weights, every optimiser step with the
    gradients it received and its learning rate). For each step the grader requires: the model called as
    ``model(src, tgt_in)`` on a batch of dates with ``tgt_in`` = <BOS> + the ISO date, padded (targets shifted
    for teacher forcing); the learning rate ``lr * min(1, (step + 1) / warmup)``; a cosine of at least 0.999
    between the gradient the optimiser received and the gradient of the spec's loss, recomputed here with the
    reference model, that step's weights and batch; and, where that gradient's norm is above 1, a received
    norm of at most 1. Measured on the reference (seeds 0-19): cosine 1 - 1e-15 at every step, and the largest
    raw norm of a run 2.9-11; the loss taken over the padding too: cosines 0.3-0.9 at some step.
    """
    config = dict(TRACE, seed=int(rng.integers(1 << 20)))
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = f"train_transformer({settings})"
    out = student.probe("train_and_trace", fn="train_transformer", cls="Transformer", config=config,
                        gradients=True, timeout=120, **rules)
    if not (isinstance(out, dict) and all(isinstance(out.get(k), list) for k in ("calls", "gradients", "steps",
                                                                                  "rates"))):
        raise AssertionError(f"{what}: the grader could not read what your training loop did")
    calls, grads, norms, rates = out["calls"], out["gradients"], out["steps"], out["rates"]
    if len(grads) != config["steps"] or len(norms) != config["steps"] or len(rates) != config["steps"]:
        raise AssertionError(f"{what}: expected {config['steps']} steps of the optimiser (torch.optim.Adam), one per "
                             f"step; found {len(grads)}")
    shape = _shape(config)
    trusted = training.TrustedModel(build=lambda: reference.Transformer(**shape), name=_name(shape))
    clipped = 0
    for j, received in enumerate(grads):
        where = f"{what}: step {j}"
        expected_rate = config["lr"] * min(1.0, (j + 1) / config["warmup"])
        found = rates[j]
        if not (isinstance(found, list) and found and all(isinstance(r, float) and abs(r - expected_rate)
                                                           <= 1e-6 * expected_rate for r in found)):
            raise AssertionError(f"{where}: the optimiser's learning rate was {found}; expected "
                                 f"lr * min(1, (step + 1) / warmup) = {expected_rate:.6g} (a linear warm-up over "
                                 f"{config['warmup']} steps, then constant)")
        before = [c for c in calls if isinstance(c, dict) and c.get("step") == j]
        if not before:
            raise AssertionError(f"{where}: the optimiser stepped without a forward pass of the model since the "
                                 "step before; expected one forward pass (model(src, tgt_in)) per step")
        args = list(before[-1].get("args", {}).values())
        src, tgt_in = (args + [None, None])[:2]
        if not (isinstance(src, np.ndarray) and isinstance(tgt_in, np.ndarray) and src.ndim == 2 and tgt_in.ndim == 2
                and np.issubdtype(src.dtype, np.integer) and np.issubdtype(tgt_in.dtype, np.integer)
                and len(src) == len(tgt_in) == config["batch_size"]):
            raise AssertionError(f"{where}: the model was not called as model(src, tgt_in) on a batch of "
                                 f"{config['batch_size']} pairs (integer arrays (B, S) and (B, T))")
        expected = _expected_tgt(src, tgt_in.shape[1])
        if expected is None or not np.array_equal(tgt_in, expected[0]):
            raise AssertionError(f"{where}: the decoder's inputs are not <BOS> followed by each source's date in ISO "
                                 "form, padded (seq2seq_batch's tgt_in): the targets must be shifted one position "
                                 "right for teacher forcing")
        if not isinstance(received, dict):
            raise AssertionError(f"{where}: the grader could not read the gradients the optimiser received")
        expected = _reference_step(reference, trusted, before[-1].get("weights"), src.astype(np.int64),
                                   tgt_in.astype(np.int64), expected[1], what=f"{where}, the model's weights before it")
        cosine, norm, raw = training.gradient_cosine(received, expected, where=where)
        if not (cosine >= MIN_COSINE):
            hint = ("This is the first step: make the model right first (its checks), then back-propagate the mean "
                    "cross-entropy over the real target tokens, with the padding ignored (ignore_index=PAD_ID)"
                    if j == 0 else "Each update must come from its own step's loss only (zero the gradients every "
                    "step), the mean over the real target tokens with the padding ignored")
            raise AssertionError(
                f"{where}: the gradients the optimiser received are not the gradient of this step's loss (the "
                "reference model's, with the weights and the batch of this step, padding ignored): their cosine is "
                f"{cosine:.3f}, expected 1 (any positive factor passes, clipped or not). {hint}")
        if raw > CLIP * 1.01:
            clipped += 1
            if not (norm <= CLIP * (1 + 1e-4)):
                raise AssertionError(
                    f"{where}: this step's gradients have a global norm of {raw:.3g} before clipping, and the optimiser "
                    f"received a norm of {norm:.3g}; expected at most {CLIP:g}. Clip after backward(), which computes "
                    "the gradients, and before optimizer.step(), which uses them")
    if clipped == 0:
        raise AssertionError(f"{what}: no step's gradients had a global norm above {CLIP:g}, so the grader could not "
                             "see the clipping; with lr=1.0 a correct loop's norms grow above it within a few steps")


def _eval_rows(pairs, rng):
    """(EvalBatch over the decoder inputs of the first TEACHER_FORCED pairs, the source of every row, the
    lanes' decoder inputs, their sources)."""
    batch = seq2seq_batch(pairs[:TEACHER_FORCED])
    src, tgt_in = batch.src.numpy(), batch.tgt_in.numpy()
    evb = training.EvalBatch.build(tgt_in, VOCAB_SIZE, training.COPIES, rng)
    rows = np.empty((len(evb.inputs), src.shape[1]), dtype=np.int64)
    rows[evb.lane_rows] = src
    for row, source, _ in evb.copies:
        rows[row] = rows[source]
    return evb, rows, tgt_in, src


@check(points=4, cell="test_training", name="train_transformer: the trained model translates enough held-out dates "
                                           "exactly (greedy decoding)")
def test_training_run(student, reference, tier, rules):
    config, threshold = (GPU, GPU_THRESHOLD) if tier == "gpu" else (CPU, CPU_THRESHOLD)
    rng = training.secret_rng()
    pairs = date_pairs(HELD_OUT, rng)
    evb, rows, tgt_in, src = _eval_rows(pairs, rng)
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = f"train_transformer({settings})"
    out = student.probe("train_and_evaluate", fn="train_transformer", config=config, eval_inputs=rows,
                        eval_kwargs={"tgt_in": evb.inputs}, weights=True, timeout=600 if tier == "gpu" else 300,
                        **rules)
    if not isinstance(out, dict) or "logits" not in out:
        raise AssertionError(f"{what}: the grader could not read your model's outputs")
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
