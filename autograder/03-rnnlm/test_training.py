"""Checks for Part 6: the loss, global-norm clipping, the training loop step by step, and the graded
training run on TinyShakespeare.

What the final loss cannot see is checked step by step (`train_and_trace`: the
student's `train_lm` on a tiny model and a stream of 3 batches, 8 steps, with
the model's forward and every optimiser step recorded): the batches (of the
student's own batchify) are read in order, and again from the first after the
last; the state is None (or zeros) at the first batch of every pass, else the
state the step before returned, detached; and every optimiser step receives
gradients of global norm at most `clip`. Each of these mistakes reaches the loss threshold: clipping
before backward() (it clips nothing) scored 1.972 and 1.971 in two grades
(fresh relabellings, 2026-11-23), inside the solution's range below, and a
state never reset between passes changes nothing at all in the CPU tier (300
steps never finish the first pass of about 980 batches). The step-by-step
checks take about 0.1 s each, plus 2-3 s once per grade where they are the
first to run an optimiser step in the worker (its warm-up; the training run
pays it otherwise).

One more step-by-step check sees what the final loss sees only by a thin margin
(below): gradients never zeroed between steps. The same trace, with clipping
off (clip = 1e6) and ``gradients=True``, records the model's weights at each
forward pass and every parameter's gradient at each optimiser step; the grader
loads each step's weights into the reference `RNNLM`, recomputes the gradient
of the reference `lm_loss` on that step's batch (the student's own batchify's,
as above) from that step's state, and requires the cosine between it and what
the optimiser received to be at least 0.999. Only the direction counts, so a
loss scaled by a constant (summed, not averaged: `lm_loss`'s checks grade
that) and any global clipping pass, and so does every way of dropping the
gradients (`optimizer.zero_grad()`, with or without `set_to_none`,
`model.zero_grad()`, ``p.grad = None`` for each parameter, zeroing after the
step). Measured on 20 random streams: the solution's cosines are 1 to within
2e-16 at every step (the same float32 operations); gradients never zeroed give
-0.15 to 0.95 at step 1 (0.69 in a grade) and at most 0.979 at any later step,
so each of the 7 steps after the first would catch it alone. Where the first
step already differs (nothing can have piled up yet), the message sends the
student to the model and the loss first. The check takes under 0.1 s.

The training run follows the contract of every graded training run
(`lmcourse.grading.training`, whose docstring says what each part proves and
what it does not):

1. the character ids of the training and the validation text are relabelled
   by a permutation drawn from `secrets`, fresh for every grade;
2. the student's `train_lm` trains in the worker and returns a model, whose
   weights are taken at once (`train_then_evaluate`); then it is asked for logits on one batch: the whole validation
   text in 16 lanes (from a zero state) plus 6 copies of random lanes whose
   tokens from a random position k on are replaced; the predictions before k
   must not move (causality);
3. those weights (the state_dict taken before the batch reached the worker); the assignment prescribes
   the layout (RNNLM's table: `embedding`, `rnn` = the student's LSTM with
   `cell.weight_ih` ..., `output`; "use exactly the parameter names and
   shapes ... the grader loads weights into your modules by those names"),
   so the grader loads it into the reference `RNNLM`, recomputes the logits
   of the 16 lanes here, requires the student's to match them, and computes
   the loss from its own logits with the reference `lm_loss`, against
   targets the student never sees;
4. logits must be finite as float32, the loss finite, and NaN never passes.

A `train_lm` that learns the wrong thing (targets not shifted, say) cannot make
its own loss look good, and neither can a model that reads ahead, a table kept
outside the weights or a lookup of the (public) validation text.

Tiers (measured with the reference solution):
- cpu: 300 steps of a 128-unit LSTM, 10-16 s on one laptop core. Under a fresh
  secret relabelling each time (2026-11-22, this check's contract): seed 0
  over six relabellings 1.940-1.975 (1.962, 1.975, 1.940, 1.954, 1.971,
  1.966), seed 1 1.991 and 1.981, seed 2 1.967 and 1.949 nats per character
  (without relabelling: 1.957, 1.972, 1.967). The threshold 2.10 leaves at
  least 0.11. Known-wrong trainers: gradients never zeroed 2.25 without
  relabelling, 2.17-2.26 under eight relabellings (2.257, 2.237, 2.244,
  2.228, 2.236, 2.214, 2.194, and 2.172 in the grader; mean 2.22, standard
  deviation 0.03: the closest of the known-wrong trainers to the threshold,
  about 4 standard deviations above it; the step-by-step gradient check
  above catches it with no margin to spare); targets not shifted 12.2 (relabelled);
  hidden state reset at every step 2.51 without relabelling (a character bigram
  model counted on the training text scores 2.48). The contract adds about 2 s to the check on one core (the
  solution, graded three times each way on a shared machine: 9.4-11.6 s
  before, 11.8-13.4 s after): 6 more lanes in the student's evaluation, the
  trusted recomputation of the 16 lanes by the reference RNNLM (about 1.5 s,
  one thread) and the comparisons (under 1 s).
- gpu: 1,000 steps of a 256-unit LSTM on 64 lanes of 64 characters (4 passes over the text).
  Calibrated on a CPU without relabelling: seeds 0 and 1 reach 1.551 and 1.563 after
  229-256 s on one core. Run on a GPU (an H100, PyTorch 2.11+cu130, 2026-11-23, through the
  real grader with the GPU exposed in the sandbox, each grade under a fresh secret
  relabelling; tests/test_gpu_tiers.py): the solution 1.573, 1.574, 1.565, 1.560 (mean 1.568);
  gradients never zeroed 1.837 and 1.805; targets not shifted 14.4. The threshold 1.68 sits
  0.11 above the solution's worst and 0.13 below the closest known-wrong trainer. The
  training check takes 60-70 s of a grade there (the Python loop over time is bound by
  kernel launches). The probe evaluates without TF32; the trusted recomputation of the
  256-unit model runs on the grader's CPU (a few seconds).
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.grading import training
from lmcourse.grading.checks import check, expect_close
from lmcourse.grading.compare import one_thread
from lmcourse.grading.optimizer import OptimizerSpec, check_optimizer
from lmcourse.grading.sandbox import StudentError

CPU = dict(d_embed=32, d_hidden=128, batch_size=32, block_size=32, steps=300, lr=6e-3, clip=1.0, seed=0, device="cpu")
GPU = dict(d_embed=64, d_hidden=256, batch_size=64, block_size=64, steps=1000, lr=4e-3, clip=1.0, seed=0, device="cuda")
CPU_THRESHOLD = 2.10
GPU_THRESHOLD = 1.68
LANES = 16
# the step-by-step checks: a tiny LSTM on 27 tokens, 3 batches of 2 lanes x 4 tokens, so 8 steps are 2 passes and 2 batches
TRACE = dict(vocab_size=7, d_embed=4, d_hidden=6, batch_size=2, block_size=4, steps=8, lr=1e-2, clip=1.0, seed=0,
             device="cpu")
TRACE_TOKENS = 27
TRACE_CLIP = 0.01  # below every step's gradient norm in that setting (0.19-0.50 for the solution): each step clips
GRADIENT_CLIP = 1e6  # far above them: nothing is clipped, whatever clip_grad_norm does below the threshold
MIN_COSINE = 0.999  # between the gradient a step received and the reference's gradient of that step's loss


@check(points=2, cell="test_loss_and_clipping", name="lm_loss: mean cross-entropy over all B x T positions, and its gradient",
       visibility="visible")
def test_lm_loss(student, reference, rng):
    from lmcourse.grading.sandbox.inside import probes
    for B, T, V in ((3, 5, 7), (1, 1, 4), (8, 2, 30)):
        logits = (3 * rng.normal(size=(B, T, V))).astype(np.float32)
        targets = rng.integers(0, V, size=(B, T))
        what = f"lm_loss of random logits ({B}, {T}, {V}) and targets ({B}, {T})"
        kw = dict(fn="lm_loss", args=[logits, targets], grad_args=[0])
        found = student.probe("call_with_tensors", **kw)
        expected = probes.run_local("call_with_tensors", reference, **kw)
        expect_close(found["result"], expected["result"], what=f"{what}: the value", rtol=1e-5, atol=1e-6)
        expect_close(found["grads"][0], expected["grads"][0], what=f"{what}: its gradient with respect to the logits",
                     rtol=1e-4, atol=1e-7)


@check(points=2, cell="test_loss_and_clipping", name="clip_grad_norm: one global norm, every gradient scaled by the same factor, only above max_norm")
def test_clip_grad_norm(student, reference, rng):
    from lmcourse.grading.sandbox.inside import probes
    big = [rng.normal(size=(4, 3)) * 10, None, rng.normal(size=(5,)) * 0.1, rng.normal(size=(2, 2, 2))]
    cases = [(big, 1.0, "one large and two small gradients and a parameter without one, max_norm=1"),
             (big, 5.0, "the same gradients, max_norm=5"),
             ([rng.normal(size=(3,)) * 0.1, rng.normal(size=(2, 2)) * 0.1], 10.0, "small gradients, max_norm=10 "
              "(nothing to clip)")]
    for grads, max_norm, label in cases:
        grads = [g.astype(np.float32) if g is not None else None for g in grads]
        kw = dict(fn="clip_grad_norm", grads=grads, args=[max_norm], iterator=True)
        found = student.probe("call_with_parameters", **kw)
        expected = probes.run_local("call_with_parameters", reference, **kw)
        what = f"clip_grad_norm on {label} (parameters passed as a one-pass iterator, like model.parameters())"
        expect_close(found["result"], expected["result"], what=f"{what}: the returned norm (before clipping)",
                     rtol=1e-4, atol=1e-6)
        for i, (g, e) in enumerate(zip(found["grads"], expected["grads"])):
            if e is None:
                if g is not None:
                    raise AssertionError(f"{what}: parameter {i + 1} had no gradient and must keep none")
                continue
            expect_close(g, e, what=f"{what}: the gradient of parameter {i + 1} afterwards (shape {e.shape})",
                         rtol=1e-4, atol=1e-6)


@check(points=4, cell="test_training", name="train_lm: an LSTM LM trained on TinyShakespeare's characters reaches the validation loss threshold")
def test_training_run(student, reference, tier):
    config, threshold = (GPU, GPU_THRESHOLD) if tier == "gpu" else (CPU, CPU_THRESHOLD)
    chars, train_ids, val_ids = reference.shakespeare_characters()
    V = len(chars)
    x, y = training.lanes_of(val_ids, LANES)  # (16, n): the validation text in 16 lanes, and the next characters
    settings = ", ".join(f"{k}={v!r}" for k, v in config.items())
    what = (f"train_lm(Shakespeare's {len(train_ids):,} training characters, their {V} ids relabelled by a secret "
            f"permutation, vocab_size={V}, {settings})")
    shape = dict(vocab_size=V, d_embed=config["d_embed"], d_hidden=config["d_hidden"])
    trusted = training.TrustedModel(build=lambda: reference.RNNLM(**shape, cell="lstm"),
                                    name=f"RNNLM({', '.join(f'{k}={v}' for k, v in shape.items())}) (an LSTM)")
    training.graded_lm_run(
        student, fn="train_lm", config=dict(config, vocab_size=V), vocab_size=V, train_ids=train_ids,
        eval_x=x, eval_y=y, trusted=trusted, threshold=threshold, what=what, unit="nats per character",
        loss_fn=lambda logits, targets: float(reference.lm_loss(torch.from_numpy(logits), torch.from_numpy(targets))),
        hint="(A character bigram model counted on the training text scores about 2.48.) Check that the state "
             "carries across batches, the optimiser's gradients are zeroed at every step, and the targets are "
             "the next characters",
        seed=0, no_builtin_rnn=True, timeout=600 if tier == "gpu" else 300)


def _trace(student, rng, gradients=False, **changes):
    """(config, what, the probe's record) of the student's train_lm on a random stream in the TRACE setting."""
    config = dict(TRACE, **changes)
    stream = rng.integers(0, config["vocab_size"], size=TRACE_TOKENS)
    out = student.probe("train_and_trace", fn="train_lm", cls="RNNLM", config=dict(config, train_ids=stream),
                        seed=0, no_builtin_rnn=True, gradients=gradients, timeout=120)
    if not (isinstance(out, dict) and isinstance(out.get("calls"), list) and isinstance(out.get("steps"), list)):
        raise AssertionError("train_lm: the grader could not read what your training loop did")
    settings = ", ".join(f"{k}={config[k]!r}" for k in ("batch_size", "block_size", "steps", "clip"))
    what = (f"train_lm on a stream of {TRACE_TOKENS} tokens ({settings}: "
            f"{(TRACE_TOKENS - 1) // config['batch_size'] // config['block_size']} batches)")
    return config, stream, what, out


def _arrays(value) -> list:
    """The arrays in a recorded argument (a tensor, a tuple of tensors), flattened; None gives none."""
    if isinstance(value, list):
        return [a for v in value for a in _arrays(v)]
    return [] if value is None else [value]


def _batches(student, reference, stream, config) -> tuple[np.ndarray, np.ndarray]:
    """(x, y), each (n_batches, B, T): the student's own batchify's where it gives integer arrays of that form
    (train_lm reads the student's own batches: a batchify mistake costs the points of Part 1, not these),
    else the reference's."""
    x, y = (t.numpy() for t in reference.batchify(stream, config["batch_size"], config["block_size"]))
    try:
        own = student.batchify(stream, config["batch_size"], config["block_size"])
        own = [np.asarray(a) for a in own] if isinstance(own, (list, tuple)) and len(own) == 2 else None
    except StudentError:
        own = None
    if own is not None and all(a.ndim == 3 and len(a) and np.issubdtype(a.dtype, np.integer) for a in own) \
            and own[0].shape == own[1].shape:
        x, y = own
    return x, y


@check(points=1, cell="test_training", name="train_lm, step by step: the batches in order, the state carried "
                                           "(detached) within a pass and reset at the start of each pass")
def test_training_steps(student, reference, rng):
    config, stream, what, out = _trace(student, rng)
    x, _ = _batches(student, reference, stream, config)
    calls, steps = out["calls"], config["steps"]
    if len(calls) != steps:
        raise AssertionError(f"{what}: expected one forward pass of the model (with gradients) per step, {steps} in "
                             f"all; found {len(calls)}")
    previous = None
    for i, call in enumerate(calls):
        k = i % len(x)
        where = f"{what}: step {i} (pass {i // len(x) + 1}, batch {k})"
        args = list(call.get("args", {}).values()) if isinstance(call, dict) else []
        ids = args[0] if args else None
        state = _arrays(args[1]) if len(args) > 1 else []
        if not (isinstance(ids, np.ndarray) and ids.shape == x[k].shape and np.array_equal(ids, x[k])):
            raise AssertionError(f"{where}: the model did not read batch {k} of batchify's x; take the batches in "
                                 "order, and start again from the first after the last")
        if not all(isinstance(a, np.ndarray) for a in state):
            raise AssertionError(f"{where}: the state passed to the model is not None or tensors")
        zero = not any(a.any() for a in state)
        if k == 0 and not zero:
            raise AssertionError(f"{where}: the first batch of a pass started from a carried state; expected a "
                                 "zero state (None): a pass starts the lanes again, and the state at the end of a "
                                 "lane does not lead to its beginning")
        if k > 0:
            if zero:
                raise AssertionError(f"{where}: the model started from a zero state; expected the state the step "
                                     "before returned (carried from batch to batch within a pass)")
            carried = previous.get("returned", [])[1:]  # the step before's output: logits, then the state
            if len(carried) != len(state) or not all(
                    a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(state, carried)):
                raise AssertionError(f"{where}: the state passed to the model is not the one the step before "
                                     "returned")
            if call.get("attached"):
                raise AssertionError(f"{where}: the state passed to the model is still attached to the step "
                                     "before's graph; carry it detached (its values only, without the graph)")
        previous = call


@check(points=1, cell="test_training", name="train_lm, step by step: every optimiser step receives gradients "
                                           "clipped to the global norm clip")
def test_training_clips(student, reference, rng):
    config, _, what, out = _trace(student, rng, clip=TRACE_CLIP)
    norms, steps = out["steps"], config["steps"]
    if len(norms) != steps:
        raise AssertionError(f"{what}: expected {steps} steps of the optimiser (torch.optim.Adam); "
                             f"found {len(norms)}")
    for i, norm in enumerate(norms):
        if not (isinstance(norm, float) and 0 < norm <= TRACE_CLIP * (1 + 1e-4)):
            raise AssertionError(f"{what}: at step {i} the optimiser received gradients of global norm "
                                 f"{norm if not isinstance(norm, float) else f'{norm:.3g}'}; expected more than 0 "
                                 f"and at most clip = {TRACE_CLIP}. Clip after backward(), which computes the "
                                 "gradients, and before optimizer.step(), which uses them")


ADAM = OptimizerSpec(kind="Adam", rate=lambda j: TRACE["lr"], said="torch.optim.Adam(model.parameters(), lr=lr)")


@check(points=1, cell="test_training", name="train_lm, step by step: each optimiser step receives the gradient of "
                                           "that step's loss alone, and one Adam at lr updates the weights from it")
def test_training_gradients(student, reference, rng):
    """First the optimiser (`lmcourse.grading.optimizer`): torch.optim.Adam with its default settings and the
    call's lr, one state through the run, every update Adam's from the gradients the step received (an Adam
    made anew every step, or an lr of the loop's own, fails here); then each step's gradient against the
    reference's gradient of that step's loss."""
    config, stream, what, out = _trace(student, rng, gradients=True, clip=GRADIENT_CLIP)
    check_optimizer(out, ADAM, steps=config["steps"], what=what)
    training.check_not_random(out, what=what)
    x, y = _batches(student, reference, stream, config)
    calls, grads = out["calls"], out.get("gradients")
    if not isinstance(grads, list) or len(grads) != config["steps"]:
        raise AssertionError(f"{what}: expected {config['steps']} steps of the optimiser (torch.optim.Adam); "
                             f"found {len(grads) if isinstance(grads, list) else 'none'}")
    d = config["d_hidden"]
    shape = dict(vocab_size=config["vocab_size"], d_embed=config["d_embed"], d_hidden=d)
    trusted = training.TrustedModel(build=lambda: reference.RNNLM(**shape, cell="lstm"),
                                    name=f"RNNLM({', '.join(f'{k}={v}' for k, v in shape.items())}) (an LSTM)")
    checked = []
    for j, received in enumerate(grads):
        before = [c for c in calls if isinstance(c, dict) and c.get("step") == j]
        if not before or not isinstance(received, dict):
            continue  # no forward pass since the last step: the order of the loop is test_training_steps' concern
        call = before[-1]
        args = list(call.get("args", {}).values())
        ids = args[0] if args else None
        state = _arrays(args[1]) if len(args) > 1 else []
        batch = [k for k in range(len(x)) if isinstance(ids, np.ndarray) and ids.shape == x[k].shape
                 and np.array_equal(ids, x[k])]
        if not batch or call.get("attached") or not (
                state == [] or len(state) == 2 and all(a.shape == (len(ids), d) for a in state)):
            continue  # a batch, or a state, the other checks grade
        where = f"{what}: step {j}"
        model = training.load_trusted(trusted, call.get("weights"), what=f"{where}, the model's weights before it")
        expected = _reference_gradient(reference, model, ids, state, y[batch[0]])
        cosine, _, _ = training.gradient_cosine(received, expected, where=where)
        checked.append(j)
        if cosine < MIN_COSINE:
            if len(checked) == 1:
                hint = ("This is the first step the grader follows: make RNNLM, the LSTM and lm_loss right first "
                        "(their checks), and back-propagate this batch's loss")
            elif training.piled_up(received, grads[j - 1], expected, where=where) >= MIN_COSINE:
                hint = (f"Step {checked[-2]} received the right one, and this one received it again with this "
                        "step's added on: zero the gradients at every step (optimizer.zero_grad())")
            else:
                hint = (f"Step {checked[-2]} received the right one; each update must come from its own step's "
                        "loss only")
            raise AssertionError(
                f"{where}: the gradients the optimiser received are not the gradient of this step's loss (the "
                "reference model's, with the weights, the batch and the state of this step): their cosine is "
                f"{cosine:.3f}, expected 1 (the gradient times any positive factor passes, clipped or not). {hint}")
    if not any(j > 0 for j in checked):
        raise AssertionError(f"{what}: the grader could not follow the steps (each step's batch, from batchify, "
                             "and its state, None or (h, c) of shape (B, d_hidden)); see the step-by-step check of "
                             "the batches and the state")


def _reference_gradient(reference, model, ids, state, targets) -> dict[str, np.ndarray]:
    """{name: float64 array}: the gradient of the reference lm_loss of `model` (the reference RNNLM with a
    step's weights) on one batch, from `state` ([] for None, else [h, c]), computed here."""
    model.zero_grad(set_to_none=True)
    start = tuple(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)) for a in state) or None
    with one_thread(), torch.enable_grad():
        logits, _ = model(torch.from_numpy(np.asarray(ids, dtype=np.int64)), start)
        loss = reference.lm_loss(logits, torch.from_numpy(np.asarray(targets, dtype=np.int64)))
        loss.backward()
    return {name: (p.grad.double().numpy() if p.grad is not None else np.zeros(tuple(p.shape)))
            for name, p in model.named_parameters()}
