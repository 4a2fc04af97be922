"""Grader-side checks shared by the sequence-to-sequence units (04-attention, 05-transformer).

Both units grade an encoder-decoder the same three ways, whatever its architecture:

- **greedy decoding** (:func:`check_greedy_choices`): every token the student's ``greedy_decode`` emits must
  be the most likely one under the reference model, given the source, <BOS> and the tokens emitted before
  it. One teacher-forced pass of the reference over the student's own output scores all steps at once.
- **the training loop, step by step** (:func:`check_training_steps`): the probe ``train_and_trace`` records
  every forward pass (its inputs and the weights it ran with) and every optimiser step (the gradients it
  received, its learning rates). For each step the grader rebuilds the batch's targets from the source the
  model read, recomputes the spec's loss gradient with the reference model and that step's weights, and
  compares directions (:func:`lmcourse.grading.training.gradient_cosine`) and, where clipping must bite,
  norms. This sees what an accuracy cannot: a loss averaged over the padding, gradients never zeroed,
  clipping missing or misplaced, a wrong warm-up.
- **the evaluation batch of a graded run** (:func:`eval_rows`): held-out pairs teacher-forced beside
  perturbed copies of some of them, for :func:`lmcourse.grading.training.check_causal`.

A unit supplies what is specific to it: its reference model (a
:class:`~lmcourse.grading.training.TrustedModel`), how its targets follow from a source
(:class:`Seq2SeqTask`) and, for a schedule, the learning rate it expects at each step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from lmcourse.grading import training
from lmcourse.grading.checks import expect_shape
from lmcourse.grading.compare import one_thread
from lmcourse.seq2seq import BOS_ID, PAD_ID, seq2seq_batch

TEACHER_FORCED = 48  # held-out pairs also run teacher-forced, for the causality and match checks
GREEDY_TOL = 1e-4    # nats: how much less likely than the best a chosen token may be (float round-off)
MIN_COSINE = 0.999   # received vs recomputed gradient direction; any positive factor passes
CLIP = 1.0           # the global norm every seq2seq assignment clips to


def logits_of(model, src, tgt_in):
    """The logits of a seq2seq model's teacher-forced pass: ``model(src, tgt_in)``, or its first element when
    it returns ``(logits, attention weights)`` as 04's ``AttentionSeq2Seq`` does."""
    out = model(src, tgt_in)
    return out[0] if isinstance(out, (tuple, list)) else out


# --------------------------------------------------------------------------- greedy decoding

def check_greedy_choices(ys: Any, src: np.ndarray, max_len: int, model, *, vocab_size: int, what: str,
                         tol: float = GREEDY_TOL) -> None:
    """Fail unless `ys` (what the student's ``greedy_decode(src, max_len)`` returned) is ``(B, max_len)``
    token ids and each is the reference `model`'s most likely token given the source, <BOS> and the tokens
    before it. Ties pass: only the log-probability of the chosen token is compared with the best one's."""
    import torch

    n = len(src)
    ys = expect_shape(ys, (n, max_len), what=what)
    if not np.issubdtype(ys.dtype, np.integer) or ys.min() < 0 or ys.max() >= vocab_size:
        raise AssertionError(f"{what}: expected token ids 0..{vocab_size - 1} (int64), found {ys.dtype} from "
                             f"{ys.min()} to {ys.max()}")
    prefix = np.concatenate([np.full((n, 1), BOS_ID), ys[:, :-1]], axis=1).astype(np.int64)
    with one_thread(), torch.no_grad():
        logits = logits_of(model, torch.from_numpy(np.ascontiguousarray(src, dtype=np.int64)),
                           torch.from_numpy(prefix))
    logp = torch.log_softmax(logits.double(), dim=-1).numpy()  # (n, max_len, V)
    chosen = np.take_along_axis(logp, ys[..., None].astype(np.int64), axis=-1)[..., 0]
    gap = logp.max(axis=-1) - chosen  # 0 where the chosen token is the most likely
    if not np.all(gap <= tol):  # written so that a NaN fails too
        b, t = (int(i) for i in np.argwhere(~(gap <= tol))[0])
        raise AssertionError(f"{what}: row {b}, step {t}: the token chosen is {gap[b, t]:.3g} nats less likely "
                             "than the most likely one given <BOS> and the tokens generated before it (the "
                             "reference model's scores with the same weights)")


# --------------------------------------------------------------------------- the evaluation batch

def eval_rows(pairs: list, vocab_size: int, rng: np.random.Generator, teacher_forced: int = TEACHER_FORCED):
    """The teacher-forced half of a graded seq2seq run: ``(batch, rows, tgt_in, src)``.

    batch: an :class:`~lmcourse.grading.training.EvalBatch` over the decoder inputs of the first
    `teacher_forced` pairs (``batch.inputs`` is what the model gets as ``tgt_in``); rows: the source of every
    row of it (a perturbed copy gets its pair's source, so only the decoder's inputs differ); tgt_in and src:
    the held-out pairs' own, padded."""
    batch = seq2seq_batch(pairs[:teacher_forced])
    src, tgt_in = batch.src.numpy(), batch.tgt_in.numpy()
    evb = training.EvalBatch.build(tgt_in, vocab_size, training.COPIES, rng)
    rows = np.empty((len(evb.inputs), src.shape[1]), dtype=np.int64)
    rows[evb.lane_rows] = src
    for row, source, _ in evb.copies:
        rows[row] = rows[source]
    return evb, rows, tgt_in, src


# --------------------------------------------------------------------------- the training loop, step by step

@dataclass(frozen=True)
class Seq2SeqTask:
    """What the step check needs to know of a unit's task.

    targets: ``targets(src (B, S) int array, T) -> (tgt_in, tgt_out)``, both ``(B, T)`` int64, as the course's
    ``seq2seq_batch`` makes them for these sources (<BOS> + target, padded; target + <EOS>, padded), or None
    where a row is not a source of the task (then the model was not called on the task's data);
    described: the target in words, for the message ("each source reversed");
    vocab_size: the decoder's vocabulary.
    """

    targets: Callable[[np.ndarray, int], "tuple[np.ndarray, np.ndarray] | None"]
    described: str
    vocab_size: int


def reference_gradient(trusted: training.TrustedModel, weights: Any, src: np.ndarray, tgt_in: np.ndarray,
                       tgt_out: np.ndarray, *, vocab_size: int, what: str) -> dict[str, np.ndarray]:
    """{name: float64 gradient} of the spec's loss, the mean cross-entropy over the real target tokens (padding
    ignored), of the trusted model with `weights` on one batch, computed in this process."""
    import torch

    if trusted.gradient is not None:  # the student edition: see trusted_model
        grads = trusted.gradient(weights, src, tgt_in, tgt_out)
        if not (isinstance(grads, dict) and all(isinstance(v, np.ndarray) for v in grads.values())):
            raise AssertionError(f"{what}: the grader could not read the loss gradient of your model")
        return {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}
    model = training.load_trusted(trusted, weights, what=what)
    model.train(True)
    model.zero_grad(set_to_none=True)
    with one_thread(), torch.enable_grad():
        logits = logits_of(model, torch.from_numpy(src), torch.from_numpy(tgt_in))  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab_size),
                                                 torch.from_numpy(tgt_out).reshape(-1), ignore_index=PAD_ID)
        loss.backward()
    return {name: (p.grad.double().numpy() if p.grad is not None else np.zeros(tuple(p.shape)))
            for name, p in model.named_parameters()}


def trusted_model(student, reference, cls: str, init_kwargs: dict, *, name: str, rules: dict) -> training.TrustedModel:
    """The model a training trace's gradients are recomputed with: the solution's `cls` in the course's grader.

    The student edition has no solution to build it from, and the gradients are asked for at the student's own
    weights, which no record can hold. There, the spec's loss gradient is recomputed by the student's own `cls`
    in the worker (the probe ``seq2seq_loss_gradient``, under the unit's `rules`), at that step's weights and
    batch: what the trace check is for, the training loop (zeroed gradients, the loss without the padding,
    clipping, the rate), is held the same; whether the model itself is right is its own check's business."""
    from lmcourse.grading import replay

    if replay.is_replay(reference):
        def gradient(weights, src, tgt_in, tgt_out):
            return student.probe("seq2seq_loss_gradient", cls=cls, init_kwargs=init_kwargs, state_dict=weights,
                                 src=src, tgt_in=tgt_in, tgt_out=tgt_out, pad_id=PAD_ID, **rules)
        return training.TrustedModel(build=None, name=name, gradient=gradient)
    solution = replay.unwrapped(reference)
    return training.TrustedModel(build=lambda: getattr(solution, cls)(**init_kwargs), name=name)


def check_training_steps(out: Any, *, steps: int, batch_size: int, trusted: training.TrustedModel,
                         task: Seq2SeqTask, what: str, rate: Callable[[int], float] | None = None,
                         rate_rule: str = "", first_step_hint: str = "make the model right first (its checks)",
                         min_cosine: float = MIN_COSINE, clip: float = CLIP) -> int:
    """Check a ``train_and_trace`` record of the student's training loop, step by step; return how many steps
    the clipping had to bite (at least one, or the check fails: it could not have seen the clipping).

    First, a model with no randomness of its own in training mode (`training.check_not_random`). Then, for
    every optimiser step j the grader requires, in this order:
    - (when `rate` is given) every parameter group's learning rate equal to ``rate(j)`` (`rate_rule` says it
      in words);
    - a forward pass since the step before, called as ``model(src, tgt_in)`` on a batch of `batch_size`
      integer rows, with ``tgt_in`` what ``task.targets`` gives for that source (targets shifted for teacher
      forcing);
    - a cosine of at least `min_cosine` between the gradients the optimiser received and the spec's loss
      gradient, recomputed with `trusted` and that pass's weights (:func:`reference_gradient`);
    - where that gradient's global norm is above `clip`, a received norm of at most `clip`.
    """
    keys = ("calls", "gradients", "steps") + (("rates",) if rate is not None else ())
    if not (isinstance(out, dict) and all(isinstance(out.get(k), list) for k in keys)):
        raise AssertionError(f"{what}: the grader could not read what your training loop did")
    training.check_not_random(out, what=what)
    calls, grads, norms = out["calls"], out["gradients"], out["steps"]
    rates = out.get("rates")
    if len(grads) != steps or len(norms) != steps or (rate is not None and len(rates) != steps):
        raise AssertionError(f"{what}: expected {steps} steps of the optimiser (torch.optim.Adam), one per "
                             f"step; found {len(grads)}")
    clipped = 0
    for j, received in enumerate(grads):
        where = f"{what}: step {j}"
        if rate is not None:
            expected_rate, found = float(rate(j)), rates[j]
            if not (isinstance(found, list) and found and all(isinstance(r, float) and abs(r - expected_rate)
                                                               <= 1e-6 * expected_rate for r in found)):
                raise AssertionError(f"{where}: the optimiser's learning rate was {found}; expected "
                                     f"{rate_rule or 'the schedule'} = {expected_rate:.6g}")
        before = [c for c in calls if isinstance(c, dict) and c.get("step") == j]
        if not before:
            raise AssertionError(f"{where}: the optimiser stepped without a forward pass of the model since the "
                                 "step before; expected one forward pass (model(src, tgt_in)) per step")
        args = list(before[-1].get("args", {}).values()) if isinstance(before[-1].get("args"), dict) else []
        src, tgt_in = (args + [None, None])[:2]
        if not (isinstance(src, np.ndarray) and isinstance(tgt_in, np.ndarray) and src.ndim == 2 and tgt_in.ndim == 2
                and np.issubdtype(src.dtype, np.integer) and np.issubdtype(tgt_in.dtype, np.integer)
                and len(src) == len(tgt_in) == batch_size):
            raise AssertionError(f"{where}: the model was not called as model(src, tgt_in) on a batch of "
                                 f"{batch_size} pairs (integer arrays (B, S) and (B, T))")
        expected = task.targets(src, tgt_in.shape[1])
        if expected is None or not np.array_equal(tgt_in, expected[0]):
            raise AssertionError(f"{where}: the decoder's inputs are not <BOS> followed by {task.described}, "
                                 "padded (seq2seq_batch's tgt_in for the source the model read): the targets "
                                 "must be shifted one position right for teacher forcing")
        if not isinstance(received, dict):
            raise AssertionError(f"{where}: the grader could not read the gradients the optimiser received")
        reference = reference_gradient(trusted, before[-1].get("weights"), src.astype(np.int64),
                                       tgt_in.astype(np.int64), expected[1], vocab_size=task.vocab_size,
                                       what=f"{where}, the model's weights before it")
        cosine, norm, raw = training.gradient_cosine(received, reference, where=where)
        if not (cosine >= min_cosine):
            if j == 0:
                hint = (f"This is the first step: {first_step_hint}, then back-propagate the mean cross-entropy over "
                        "the real target tokens, with the padding ignored (ignore_index=PAD_ID)")
            elif training.piled_up(received, grads[j - 1], reference, where=where) >= min_cosine:
                hint = ("What it received is the step before's gradients with this step's added on: zero the "
                        "gradients at every step (optimizer.zero_grad()), or each step's pile onto the earlier ones")
            else:
                hint = ("The steps before received the right gradients, and this one neither that nor that plus the "
                        "step before's: check the loss of each batch (the mean cross-entropy over the real target "
                        "tokens, the padding ignored) and that the model is called once per step")
            raise AssertionError(
                f"{where}: the gradients the optimiser received are not the gradient of this step's loss (the "
                "reference model's, with the weights and the batch of this step, padding ignored): their cosine is "
                f"{cosine:.3f}, expected 1 (any positive factor passes, clipped or not). {hint}")
        if raw > clip * 1.01:
            clipped += 1
            if not (norm <= clip * (1 + 1e-4)):
                raise AssertionError(
                    f"{where}: this step's gradients have a global norm of {raw:.3g} before clipping, and the optimiser "
                    f"received a norm of {norm:.3g}; expected at most {clip:g}. Clip after backward(), which computes "
                    "the gradients, and before optimizer.step(), which uses them")
    if clipped == 0:
        raise AssertionError(f"{what}: no step's gradients had a global norm above {clip:g}, so the grader could not "
                             "see the clipping; with lr=1.0 a correct loop's norms grow above it within a few steps")
    return clipped
