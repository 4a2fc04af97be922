"""The contract of a graded training run: what every check that grades a student's training code uses.

A training check calls the student's training function in the worker, gets
the trained model's scores on held-out data, and compares a loss with a
threshold. Left at that, it rewards models that never trained: a model whose
logits at position t read the *input* at t + 1 (the grader feeds the whole
held-out text), logits of 1e300 that make the loss NaN (and NaN > threshold
is False), a notebook that carries the public held-out text and looks it up,
or vectors that encode the fixed ids of a synthetic corpus. The contract, in
the order a check applies it:

1. **Secret relabelling** (:class:`Relabelling`). Every grade draws a fresh
   permutation of the vocabulary ids from :mod:`secrets` (never from the
   check's ``rng`` fixture, whose seed is a hash a student could work out)
   and applies it to the training ids *and* the held-out ids. The student's
   code only ever sees relabelled ids, so nothing written in advance about
   particular ids (a planted cluster at ids 0-4, a lookup table of the
   validation text in the course's vocabulary) lines up with the data. The
   loss of an honest model does not change in distribution: relabelling
   only shuffles which embedding and output rows belong to which token.

2. **Causality by perturbation, in the same batch** (:class:`EvalBatch`,
   :func:`check_causal`). The model is run once on one batch: the held-out
   lanes plus a few copies of some of them in which every token from a
   random position k on is replaced by a different, random one, all rows in
   a secret random order. A causal model's predictions at positions < k are
   the same for a lane and its copy; a change larger than ``CAUSAL_TOL``
   nats in any log-probability fails the check ("the prediction at position
   t depends on later tokens"). This proves that the function the model
   computed *on this batch* did not use the replaced tokens for those
   positions. It does not prove causality against a model that inspects its
   batch: such a model can find the rows that share a prefix and stop
   reading ahead only where they part (one position per copy). And for a
   model that reads ahead by a tiny amount (below ``CAUSAL_TOL`` per
   position), the check proves that the amount is tiny, which bounds what it
   can gain on the loss. For an assignment with a free architecture the
   check stops the honest mistake and the plain leak; the trustworthy score
   needs point 3.

3. **The score from what the grader controls** (:class:`TrustedModel`,
   optional). Where the assignment prescribes the model's parameter layout,
   the trained model's ``state_dict`` is taken as soon as the training
   function returns, before any evaluation input enters the worker
   (:func:`train_then_evaluate`); the grader
   loads it into the *reference* solution's model class, in its own process,
   recomputes the held-out logits, requires the student's logits to match
   them (``MATCH_TOL``: "the model's forward does not compute what its
   weights say" otherwise), and computes the loss from the trusted logits
   against targets the student never sees. The score is then the score of a
   model of the prescribed architecture, run by the reference's code, on
   data relabelled by a secret: no lookup table, no reading ahead, no
   special-casing of the grader's batch can reach it except through the
   weights. Layouts that differ from the reference's fail with the expected
   names and shapes.

4. **Finite values** (:func:`finite_logits`, :func:`check_loss`). Logits are
   converted to float32 and must then be finite (1e300 in float64 is inf in
   float32); the loss must be finite; every threshold is written
   ``not (loss <= threshold)``, so a NaN fails.

:func:`graded_lm_run` applies all four to a language model's training run
(a training function, a token stream, held-out lanes and a reference loss);
a unit whose model is free-form leaves out ``trusted`` and gets 1, 2 and 4.
Other kinds of training checks (word vectors) use :class:`Relabelling` and
:func:`check_loss` directly.

What this does not stop
-----------------------
- The relabelling is a substitution cipher over a public text. A notebook
  that carries the text (compressed, it is a few hundred kilobytes) can
  recover the permutation by aligning the training ids with the training
  text it knows, and then use anything it carries, relabelled. Without point
  3 (a free architecture), a carried lookup of the held-out text that reads
  only the past is therefore not stopped by points 1, 2 and 4.
- With point 3, what is scored is a set of weights of the prescribed
  architecture. Weights trained elsewhere and carried in the notebook
  (relabelled as above), or a model the student's code trained on the
  held-out text it carries, score like honestly trained ones: the contract
  proves that the weights reach the loss, not that the student's function
  produced them from the training ids it was given.
- The held-out text of a public corpus is public; only a private held-out
  set would close the last two gaps.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from lmcourse.grading.checks import expect_shape

COPIES = 6          # perturbed copies of held-out lanes in the evaluation batch
CAUSAL_TOL = 1e-2   # nats: the largest change of a log-probability at a position before the perturbation
MATCH_TOL = 5e-2    # nats: student's vs trusted log-probabilities, for 32- and 64-bit logits
MATCH_TOL_HALF = 0.5  # ... for 16-bit logits (float16 / bfloat16 models)
# The version of this contract a recorded loss was measured under (a check records it beside the loss with
# ``measure("protocol", PROTOCOL)``; `lmcourse.instructor.leaderboard` ranks only losses measured under it).
# 2: the weights leave the worker before any evaluation input enters it (`train_then_evaluate`). Under 1 a
# model could fit itself to the evaluation batch before its weights were read.
PROTOCOL = 2


# --------------------------------------------------------------------------- 1. secret relabelling

def secret_rng() -> np.random.Generator:
    """A NumPy generator seeded with 128 bits from :mod:`secrets`: unknowable to the student's code."""
    return np.random.default_rng(secrets.randbits(128))


@dataclass(frozen=True)
class Relabelling:
    """A bijection of the ids 0..n-1: ``new = perm[old]``."""

    perm: np.ndarray

    @classmethod
    def secret(cls, n: int) -> "Relabelling":
        """A uniformly random permutation of n ids, fresh for every call (drawn from :mod:`secrets`)."""
        if int(n) < 1:
            raise ValueError("a relabelling needs at least one id")
        return cls(secret_rng().permutation(int(n)).astype(np.int64))

    @property
    def size(self) -> int:
        return len(self.perm)

    @property
    def inverse(self) -> np.ndarray:
        """``old = inverse[new]``."""
        inv = np.empty_like(self.perm)
        inv[self.perm] = np.arange(len(self.perm), dtype=self.perm.dtype)
        return inv

    def __call__(self, ids) -> np.ndarray:
        """The relabelled ids (an int64 array of the same shape); accepts arrays, lists and torch tensors."""
        ids = np.asarray(ids.numpy() if hasattr(ids, "numpy") else ids, dtype=np.int64)
        return self.perm[ids]

    def sentences(self, sentences) -> list[list[int]]:
        """Each sentence relabelled, as a list of ints."""
        return [self(s).tolist() for s in sentences]

    def rows_by_old_id(self, table: np.ndarray) -> np.ndarray:
        """A table indexed by new ids (row ``perm[w]`` belongs to word ``w``) re-indexed by the old ids."""
        return np.asarray(table)[self.perm]


# --------------------------------------------------------------------------- 2. causality by perturbation

@dataclass(frozen=True)
class EvalBatch:
    """One evaluation batch: the held-out lanes and perturbed copies of some of them, rows shuffled.

    ``inputs[lane_rows[i]]`` is held-out lane i; for each ``(row, source, k)``
    in ``copies``, ``inputs[row]`` equals ``inputs[source]`` before position k
    and differs from it at every position from k on.
    """

    inputs: np.ndarray
    lane_rows: np.ndarray
    copies: tuple[tuple[int, int, int], ...]

    @classmethod
    def build(cls, lanes: np.ndarray, vocab_size: int, copies: int = COPIES,
              rng: np.random.Generator | None = None) -> "EvalBatch":
        """Held-out lanes ``(L, T)`` plus `copies` perturbed copies (k uniform in 1..T-1), in a random order."""
        lanes = np.asarray(lanes, dtype=np.int64)
        if lanes.ndim != 2 or lanes.shape[1] < 2:
            raise ValueError("lanes must be (L, T) with T >= 2")
        if vocab_size < 2 and copies:
            raise ValueError("perturbing tokens needs a vocabulary of at least 2")
        rng = rng if rng is not None else secret_rng()
        L, T = lanes.shape
        sources = rng.choice(L, size=copies, replace=copies > L)
        made = []
        for b in sources:
            k = int(rng.integers(1, T))
            row = lanes[b].copy()
            row[k:] = (row[k:] + rng.integers(1, vocab_size, size=T - k)) % vocab_size  # every token differs
            made.append((int(b), k, row))
        order = rng.permutation(L + copies)  # order[i]: the row of item i (lanes first, then copies)
        inputs = np.empty((L + copies, T), dtype=np.int64)
        inputs[order[:L]] = lanes
        for j, (b, k, row) in enumerate(made):
            inputs[order[L + j]] = row
        return cls(inputs, order[:L].copy(),
                   tuple((int(order[L + j]), int(order[b]), k) for j, (b, k, _) in enumerate(made)))

    @property
    def lanes(self) -> int:
        return len(self.lane_rows)

    def held_out(self, logits: np.ndarray) -> np.ndarray:
        """The rows of `logits` that belong to the held-out lanes, in lane order."""
        return logits[self.lane_rows]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def check_causal(logits: np.ndarray, batch: EvalBatch, *, what: str, tol: float = CAUSAL_TOL) -> None:
    """Fail unless, for every copy, the log-probabilities before its first replaced token equal its lane's.

    `logits` are finite ``(rows, T, V)`` (see :func:`finite_logits`).
    """
    for row, source, k in batch.copies:
        change = np.abs(log_softmax(logits[row, :k]) - log_softmax(logits[source, :k])).max(axis=-1)  # (k,)
        bad = np.flatnonzero(~(change <= tol))
        if bad.size:
            t = int(bad[0])
            why = ("the position just before the first replaced token: the model reads the input it should "
                   "predict" if t == k - 1 else "the model reads tokens after the one it predicts")
            raise AssertionError(
                f"{what}: the model's prediction at position {t} depends on later tokens. In a copy of one "
                f"lane whose tokens from position {k} on were replaced by random ones, the log-probabilities "
                f"at position {t} changed by up to {float(change[t]):.3g} nats ({bad.size} of the {k} positions "
                f"before {k} changed; allowed: {tol:g}); position {t} is {why}. A language model's scores at "
                "position t may depend on the tokens at positions 0..t only")


# --------------------------------------------------------------------------- 3. the trusted model

@dataclass(frozen=True)
class TrustedModel:
    """The prescribed architecture, as the reference solution builds it, for recomputing the logits.

    build: a fresh, trusted model (e.g. ``lambda: reference.RNNLM(V, 32, 128)``);
    name: how the message names it (the call the assignment prescribes);
    forward: ``forward(model, inputs LongTensor) -> logits`` (default: ``model(inputs)``,
    or its first element when it returns a tuple);
    gradient: where the loss gradient comes from instead of `build` (the student edition, which has no
    solution: `lmcourse.grading.seq2seq.trusted_model`).
    """

    build: Callable[[], Any] | None
    name: str
    forward: Callable[[Any, Any], Any] | None = None
    gradient: Callable[..., Any] | None = None


def _layout(shapes: dict[str, tuple]) -> str:
    return ", ".join(f"{k} {tuple(v)}" for k, v in shapes.items())


def load_trusted(trusted: TrustedModel, state_dict: Any, *, what: str):
    """The trusted model with the student's weights loaded; fails with the expected layout if they differ."""
    import torch

    model = trusted.build()
    expected = model.state_dict()
    shapes = {k: tuple(v.shape) for k, v in expected.items()}
    if not (isinstance(state_dict, dict) and all(isinstance(k, str) and isinstance(v, np.ndarray)
                                                 for k, v in state_dict.items())):
        raise AssertionError(f"{what}: the grader could not read your model's weights (its state_dict); "
                             f"expected {trusted.name} with the parameters {_layout(shapes)}")
    missing = [k for k in expected if k not in state_dict]
    extra = [k for k in state_dict if k not in expected]
    wrong = [k for k in expected if k in state_dict and tuple(state_dict[k].shape) != shapes[k]]
    if missing or extra or wrong:
        parts = []
        if missing:
            parts.append("missing: " + ", ".join(missing[:8]))
        if extra:
            parts.append("not expected: " + ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else ""))
        for k in wrong[:4]:
            parts.append(f"{k} has shape {tuple(state_dict[k].shape)}, expected {shapes[k]}")
        raise AssertionError(
            f"{what}: the grader rebuilds your trained model from its weights (state_dict) as {trusted.name}, "
            f"and they do not fit ({'; '.join(parts)}). Expected exactly the parameters {_layout(shapes)}: "
            "build the model with the submodules and parameter names the assignment gives, and keep every "
            "number the model uses in them")
    for k, v in expected.items():
        found = state_dict[k]
        if v.is_floating_point() and found.dtype.kind != "f":
            raise AssertionError(f"{what}: the weight {k} of your trained model has dtype {found.dtype}, "
                                 "expected floating point")
        if found.dtype.kind == "f" and not np.all(np.isfinite(found)):
            raise AssertionError(f"{what}: the weight {k} of your trained model holds NaN or infinite values "
                                 "(did the training diverge?)")
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(state_dict[k])).to(expected[k].dtype)
                           for k in expected})
    return model.eval()


def trusted_logits(trusted: TrustedModel, model, inputs: np.ndarray) -> np.ndarray:
    """The trusted model's logits on `inputs`, computed in this (trusted) process: float32 ``(L, T, V)``."""
    import torch

    x = torch.from_numpy(np.ascontiguousarray(inputs, dtype=np.int64))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a recurrent step's products are small: one thread is fastest, and shares the cores
    try:
        with torch.no_grad():
            out = trusted.forward(model, x) if trusted.forward is not None else model(x)
    finally:
        torch.set_num_threads(threads)
    if isinstance(out, (tuple, list)):
        out = out[0]
    return out.detach().cpu().float().numpy()


def check_match(found: np.ndarray, expected: np.ndarray, *, what: str, name: str, tol: float = MATCH_TOL) -> None:
    """Fail unless the student's log-probabilities equal the trusted ones within `tol` nats at every position."""
    if np.array_equal(found, expected):  # the usual case on a CPU: the same operations, the same bits
        return
    change = np.abs(log_softmax(found) - log_softmax(expected)).max(axis=-1)  # (L, T)
    bad = ~(change <= tol)
    if bad.any():
        lane, t = (int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: your model's logits are not what its weights compute. The grader loaded the model's "
            f"state_dict into {name} and ran it on the same validation lanes: the log-probabilities differ "
            f"at {int(bad.sum()):,} of {bad.size:,} positions (by up to {float(change.max()):.3g} nats, allowed "
            f"{tol:g}; first in lane {lane}, position {t}). The model's forward must compute its scores from its "
            "parameters alone, as the assignment specifies (no tables or other numbers kept outside them)")


# --------------------------------------------------------------------------- 4. finite values

def finite_logits(found: Any, shape: tuple, *, what: str) -> np.ndarray:
    """The logits as float32 ``shape``; fails unless they are floating point and finite *as float32*."""
    arr = expect_shape(found, shape, what=what)
    if arr.dtype.kind != "f":
        raise AssertionError(f"{what}: expected floating-point logits, found dtype {arr.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        arr = arr.astype(np.float32)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise AssertionError(f"{what}: {int(bad.sum()):,} of {arr.size:,} logits are NaN or infinite as float32 "
                             "numbers (the grader computes the loss in float32; did the training diverge?)")
    return arr


def check_loss(loss: float, threshold: float, *, what: str, hint: str = "", unit: str = "nats per token") -> float:
    """Fail unless `loss` is finite and at most `threshold` (a NaN never passes). Returns the loss."""
    loss = float(loss)
    if not math.isfinite(loss):
        wanted = f"at most {threshold:.2f} {unit}" if math.isfinite(threshold) else "a finite loss"
        raise AssertionError(f"{what}: the validation loss is {loss}, not a finite number; the check asks for "
                             f"{wanted} (did the training diverge? look for a learning rate or an initialisation "
                             "that makes the loss grow)")
    if not (loss <= threshold):
        raise AssertionError(f"{what}: the validation loss is {loss:.3f} {unit}; a correct implementation reaches "
                             f"at most {threshold:.2f} with these settings" + (f". {hint}" if hint else ""))
    return loss


def gradient_cosine(received: dict, expected: dict[str, np.ndarray], *, where: str) -> tuple[float, float, float]:
    """(cosine, |received|, |expected|) between the gradients an optimiser step received (untrusted:
    ``{parameter name: array or None}``, from the probe ``train_and_trace``) and the ones the grader computed
    (``{name: float64 array}``), each flattened over every parameter in `expected`'s order. A parameter with
    no gradient counts as zeros; a gradient of the wrong shape fails with a message naming the layout. The
    cosine is 0 when either side is zero or not finite, so it never passes by accident."""
    found = [received.get(name) for name in expected]
    if any(g is not None and (not isinstance(g, np.ndarray) or g.shape != e.shape)
           for g, e in zip(found, expected.values())):
        layout = ", ".join(f"{k} {v.shape}" for k, v in expected.items())
        raise AssertionError(f"{where}: the gradients the optimiser received do not have the shapes of the "
                             f"model's parameters ({layout})")
    g = np.concatenate([(f if f is not None else np.zeros_like(e)).astype(np.float64).ravel()
                        for f, e in zip(found, expected.values())])
    e = np.concatenate([v.ravel() for v in expected.values()])
    norm, raw = float(np.linalg.norm(g)), float(np.linalg.norm(e))
    ok = norm > 0 and raw > 0 and math.isfinite(norm) and math.isfinite(raw)
    return (float(g @ e) / (norm * raw) if ok else 0.0), norm, raw


def check_not_random(out: Any, *, what: str) -> None:
    """Fail where the ``train_and_trace`` record says the trained model gives two different outputs for one
    input in training mode (dropout, or noise of its own), where the assignment's model has none: its training
    steps then follow the gradient of another loss than the one the instructions define, which a gradient
    check's cosine can miss (a dropout of 0.1 in 05's small feed-forward keeps it above 0.999)."""
    if isinstance(out, dict) and out.get("random_in_training") is True:
        raise AssertionError(f"{what}: your model gives two different outputs for the same input in training mode "
                             "(dropout, or noise of its own); the model the instructions describe has none, so "
                             "its training steps must not either")


def check_returned_for_use(out: Any, *, what: str, fn: str) -> None:
    """Fail where the ``train_and_trace`` record says `fn` returned its model in training mode, where the
    instructions ask for eval mode (what a trained model is used in: no dropout, no batch statistics)."""
    if isinstance(out, dict) and out.get("returned_training") is True:
        raise AssertionError(f"{what}: {fn} returned the model in training mode; the instructions ask for it in "
                             "eval mode (model.eval()), the mode a trained model is used in")


def piled_up(received: dict, before: Any, expected: dict[str, np.ndarray], *, where: str) -> float:
    """The cosine between what an optimiser step received and what it would have received had the gradients
    not been zeroed since the step before: that step's received gradients (``before``, clipped as they were)
    plus this step's own (`expected`). Near 1: the loop never zeroes its gradients; a gradient check names that
    symptom instead of a wrong loss. 0 where ``before`` cannot be read."""
    if not isinstance(before, dict):
        return 0.0
    summed = {}
    for name, e in expected.items():
        b = before.get(name)
        if b is not None and (not isinstance(b, np.ndarray) or b.shape != e.shape):
            return 0.0
        summed[name] = e + (0.0 if b is None else b.astype(np.float64))
    return gradient_cosine(received, summed, where=where)[0]


def check_at_least(score: float, threshold: float, *, failure: str) -> float:
    """Fail with `failure` unless `score` (an accuracy, a similarity) is at least `threshold`; a NaN never
    passes. Returns the score. The twin of `check_loss` for scores where higher is better."""
    score = float(score)
    if not (score >= threshold):
        raise AssertionError(failure)
    return score


# --------------------------------------------------------------------------- the two halves of a run

def train_then_evaluate(student, *, fn: str, config: dict, eval_inputs: np.ndarray, eval_kwargs: dict | None = None,
                        timeout: float | None = None, what: str, **probe_kwargs) -> dict:
    """Train in the worker, take the weights, and only then send the evaluation batch.

    Two probes, in this order: ``train_and_keep`` runs ``fn(**config)`` and
    returns the trained model's ``state_dict`` (the model stays in the
    worker); ``evaluate_kept`` then runs that model on `eval_inputs`. The
    weights crossed the boundary before any evaluation input did, so a model
    that fits itself to the batch it is asked about (training on held-out
    text inside its forward, guessing labels from the order of the rows)
    changes its own logits, never the weights the grader scores: the trusted
    model computes the score from the weights of the first half, and
    :func:`check_match` fails the run whose second-half logits are not what
    those weights give. One probe doing both would hand the model the
    evaluation batch before its weights were read.

    Returns ``{"logits", "dtype", "state_dict"}`` (untrusted plain data).
    probe_kwargs (``no_builtin_rnn=True``, ``seed``) go to the training half;
    the rule keywords also to the evaluation half.
    """
    kept = student.probe("train_and_keep", fn=fn, config=config, timeout=timeout, **probe_kwargs)
    if not isinstance(kept, dict) or not isinstance(kept.get("state_dict"), dict):
        raise AssertionError(f"{what}: the grader could not read your trained model's weights")
    rules = {k: v for k, v in probe_kwargs.items() if k != "seed"}
    out = student.probe("evaluate_kept", eval_inputs=eval_inputs, eval_kwargs=dict(eval_kwargs or {}), fn=fn,
                        timeout=timeout, **rules)
    if not isinstance(out, dict) or "logits" not in out:
        raise AssertionError(f"{what}: the grader could not read your model's outputs")
    return {"logits": out["logits"], "dtype": out.get("dtype"), "state_dict": kept["state_dict"]}


# --------------------------------------------------------------------------- all four: a language model's run

@dataclass
class Outcome:
    """What a graded run measured (for calibration and tests)."""

    loss: float
    relabelling: Relabelling = field(repr=False)
    batch: EvalBatch = field(repr=False)
    trusted: bool = False


def lanes_of(stream, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): a 1-D token stream cut into `lanes` lanes ``(lanes, n)`` and their next tokens."""
    stream = np.asarray(stream.numpy() if hasattr(stream, "numpy") else stream, dtype=np.int64).reshape(-1)
    n = (len(stream) - 1) // lanes
    if n < 2:
        raise ValueError("the held-out stream is too short for that many lanes")
    return stream[: n * lanes].reshape(lanes, n), stream[1: n * lanes + 1].reshape(lanes, n)


def graded_lm_run(student, *, fn: str, config: dict, vocab_size: int, train_ids, eval_x, eval_y,
                  loss_fn: Callable[[np.ndarray, np.ndarray], float], threshold: float, what: str, hint: str = "",
                  trusted: TrustedModel | None = None, train_arg: str = "train_ids", copies: int = COPIES,
                  unit: str = "nats per token", timeout: float | None = None, **probe_kwargs) -> Outcome:
    """Grade one training run of a language model under the contract (see the module docstring).

    The student's ``fn(**config, <train_arg>=relabelled train_ids)`` returns a
    model; the probe runs it on the evaluation batch (the relabelled
    held-out lanes `eval_x` ``(L, T)`` plus `copies` perturbed copies). The
    logits must be finite as float32 and causal on the copies; with
    `trusted`, the model's weights are loaded into the trusted model, whose
    logits must match the student's and give the loss; without, the
    student's logits of the held-out lanes give it. ``loss_fn(logits (L, T,
    V) float32, targets (L, T) int64)`` is the reference loss; the targets
    `eval_y` are relabelled here and never sent; `unit` names the loss's unit
    in messages. Fails (AssertionError) with a message for the student;
    returns the :class:`Outcome`.

    probe_kwargs go to the probe (e.g. ``no_builtin_rnn=True``, ``seed``).
    """
    relabel = Relabelling.secret(vocab_size)
    x, y = relabel(eval_x), relabel(eval_y)
    if x.ndim != 2 or x.shape != y.shape:
        raise ValueError("eval_x and eval_y must be (L, T) arrays of the same shape")
    batch = EvalBatch.build(x, vocab_size, copies)
    rows, T = batch.inputs.shape
    out = train_then_evaluate(student, fn=fn, config={**config, train_arg: relabel(train_ids)},
                              eval_inputs=batch.inputs, timeout=timeout, what=what, **probe_kwargs)
    shown = (f"{what}, then model(evaluation ids ({rows}, {T}): {batch.lanes} validation lanes and "
             f"{len(batch.copies)} copies with their ends replaced)")
    logits = finite_logits(out["logits"], (rows, T, vocab_size), what=f"{shown}: the logits")
    check_causal(logits, batch, what=shown)
    found = batch.held_out(logits)
    if trusted is not None:
        model = load_trusted(trusted, out.get("state_dict"), what=what)
        expected = finite_logits(trusted_logits(trusted, model, x), (batch.lanes, T, vocab_size),
                                 what=f"{what}: the logits the grader computes from your model's weights")
        half = str(out.get("dtype", "")) in ("float16", "bfloat16", "half")
        check_match(found, expected, what=shown, name=trusted.name, tol=MATCH_TOL_HALF if half else MATCH_TOL)
        found = expected
    loss = check_loss(loss_fn(found, y), threshold, what=what, hint=hint, unit=unit)
    return Outcome(loss=loss, relabelling=relabel, batch=batch, trusted=trusted is not None)
