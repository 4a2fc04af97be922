"""The optimiser a training loop uses, followed step by step: what a final loss cannot see.

A training run that clears its threshold says little about the optimiser
that got it there. An Adam made anew inside the loop (its moment estimates
start from zero at every step, so every update is about ``lr`` times the
sign of the gradient), Adam's default ``betas`` where the instructions give
the paper's, an ``lr`` argument the loop ignores, plain Adam where AdamW's
decoupled weight decay was asked for: each of these trains, and several
reach the threshold. The probe ``train_and_trace`` records, for every
``optimizer.step()``, the optimiser's class and settings, how many steps its
state had counted, the gradients it received and (with ``gradients=True``)
every parameter just before and just after the step. :func:`check_optimizer`
then requires, in this order:

1. the class the instructions name (``torch.optim.Adam``, ``AdamW``);
2. each group's settings equal to the instructions' (``betas``, ``eps``,
   ``weight_decay``; ``amsgrad`` and ``maximize`` off) and, where the check
   asks, its learning rate equal to the schedule's value at that step;
3. one optimiser state carried through the run: before step j its state has
   counted j steps (a new optimiser, or a cleared state, starts again at 0);
4. the update itself: the grader runs the instructions' optimiser, in float64
   and in its own process, over the gradients the student's optimiser
   received (the gradient check of each unit says whether those were the
   right ones), and requires every step's change of the weights to equal
   its own within ``UPDATE_TOL`` (relative, over all parameters together).
   Point 4 sees what the recorded settings could hide: an optimiser that
   reports one learning rate and applies another, or steps some
   parameters twice.

Each failure names the symptom in the course's words and, for a wrong
update, which known pattern the update matches instead (a fresh optimiser
every step, plain SGD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# Relative error, over all parameters together, between the update a step made and the instructions'
# optimiser's update from the same gradients, each weight's float32 rounding forgiven first (`_rounding`).
# Measured on the reference solutions' traces in their units' step-by-step settings (seeds 0-2; float32 weights
# against the grader's float64 optimiser): at most 2.3e-8 (03, 04, 05, 06) and 1.2e-6 (07, whose lr is 1e-2);
# without the rounding forgiven, 06's fine-tuning (an N(0, 1) embedding stepped by 5e-4) reached 9.2e-4. The
# mistakes' updates: a new Adam every step, over 1e-2 from its second step; Adam for AdamW, 109-119% (07) and
# 99.6% (06); 06's encoder and head at one rate, 13-24%; 05's Adam defaults for the paper's betas and eps,
# 1.1-5.5% from the first step; the defaults' betas in 07 (0.999 for 0.99), 0.15-1% from the second step, and
# in 04 (0.999 for 0.98, were it asked) 0.4%. tests/test_optimizer.py keeps the references 20 times inside it.
UPDATE_TOL = 1e-3


@dataclass(frozen=True)
class OptimizerSpec:
    """What an assignment's instructions fix about the optimiser.

    kind: the ``torch.optim`` class, "Adam" or "AdamW". rate: the learning rate at step j (0-based), a
    schedule's value or a constant. said: the instructions' own words for it, quoted in messages
    (``torch.optim.Adam(model.parameters(), lr=lr)``). check_rates: whether this check also compares the
    recorded learning rates with `rate` (False where the unit's own check already does, with its
    schedule's words)."""

    kind: str
    rate: Callable[[int], float]
    said: str
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    check_rates: bool = True
    rate_rule: str = "lr"
    settings: dict = field(default_factory=dict)  # any further setting the instructions fix
    # Parameter groups with rates of their own (BERT's fine-tuning: the encoder at lr, the new head at head_lr):
    # (prefix of the parameters' names, their rate at step j, the instructions' name for it). Empty: one rate,
    # `rate`, for every parameter. A parameter matching no prefix is outside the model the instructions train.
    groups: tuple[tuple[str, Callable[[int], float], str], ...] = ()

    def rule_of(self, name: str) -> "tuple[Callable[[int], float], str] | None":
        """(rate, its name) for the parameter `name`: its group's, or the one rate where there are no groups."""
        if not self.groups:
            return self.rate, self.rate_rule
        for prefix, rate, rule in self.groups:
            if name.startswith(prefix):
                return rate, rule
        return None

    def fixed(self) -> dict[str, Any]:
        """The group settings the instructions fix, by torch's names."""
        return {"betas": tuple(self.betas), "eps": self.eps, "weight_decay": self.weight_decay, "amsgrad": False,
                "maximize": False, **self.settings}


def _same(found: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or expected is None:
        return found is expected or found == expected
    if isinstance(expected, (tuple, list)):
        return isinstance(found, (tuple, list)) and len(found) == len(expected) and \
            all(_same(f, e) for f, e in zip(found, expected))
    if isinstance(expected, (int, float)):
        return isinstance(found, (int, float)) and not isinstance(found, bool) and \
            math.isclose(float(found), float(expected), rel_tol=1e-9, abs_tol=0.0)
    return found == expected


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_shown(v) for v in value) + ")"
    return f"{value:g}" if isinstance(value, float) else repr(value)


def check_settings(out: Any, spec: OptimizerSpec, *, steps: int, what: str) -> None:
    """Points 1-3 of the module's docstring, from a ``train_and_trace`` record."""
    records = out.get("optimizers") if isinstance(out, dict) else None
    if not isinstance(records, list) or len(records) != steps:
        found = len(records) if isinstance(records, list) else "no"
        raise AssertionError(f"{what}: expected {steps} steps of the optimiser ({spec.said}), one per step; "
                             f"found {found}")
    fixed = spec.fixed()
    for j, record in enumerate(records):
        where = f"{what}: step {j}"
        if not isinstance(record, dict) or not isinstance(record.get("groups"), list) or not record["groups"]:
            raise AssertionError(f"{where}: the grader could not read the optimiser's settings")
        kind = record.get("type")
        if kind not in ("Adam", "AdamW"):
            raise AssertionError(f"{where}: the optimiser is torch.optim.{kind}; the instructions ask for "
                                 f"{spec.said}")
        for g, group in enumerate(record["groups"]):
            if not isinstance(group, dict):
                raise AssertionError(f"{where}: the grader could not read the optimiser's settings")
            # What the update does, not the class's name: Adam(decoupled_weight_decay=True) is AdamW, and
            # the two are one optimiser where there is no weight decay.
            decoupled = kind == "AdamW" or group.get("decoupled_weight_decay") is True
            if (decoupled != (spec.kind == "AdamW")) and (spec.weight_decay or group.get("weight_decay")):
                raise AssertionError(
                    f"{where}: the optimiser is torch.optim.{kind}"
                    f"{' with decoupled_weight_decay=True' if kind == 'Adam' and decoupled else ''}; the "
                    f"instructions ask for {spec.said}." + (
                        " Adam's weight_decay adds the decay to the gradient, where Adam's scaling shrinks it "
                        "(L2 regularisation); AdamW shrinks the weights directly, by lr * weight_decay of "
                        "themselves" if spec.kind == "AdamW" else ""))
            name = f"{where}: the optimiser's" + (f" group {g}" if len(record["groups"]) > 1 else "")
            for key, expected in fixed.items():
                found = group.get(key)
                if not _same(found, expected):
                    default = " (Adam's defaults)" if key in ("betas", "eps") and \
                        _same(found, {"betas": (0.9, 0.999), "eps": 1e-8}[key]) else ""
                    verb = "are" if key == "betas" else "is"
                    raise AssertionError(f"{name} {key} {verb} {_shown(found)}{default}; the instructions give "
                                         f"{key}={_shown(expected)} ({spec.said})")
            if spec.check_rates:
                rate, rule = spec.rate, spec.rate_rule
                if spec.groups:
                    rules = {spec.rule_of(str(p)) for p in group.get("params") or ()}
                    if None in rules:
                        raise AssertionError(f"{name} parameters include one that is not the model's "
                                             f"({spec.said})")
                    if len(rules) != 1:
                        raise AssertionError(f"{name} parameters mix {' and '.join(sorted(r[1] for r in rules))}: "
                                             f"the instructions give each its own learning rate ({spec.said})")
                    rate, rule = next(iter(rules))
                expected, found = float(rate(j)), group.get("lr")
                if not (isinstance(found, (int, float)) and math.isclose(float(found), expected, rel_tol=1e-6)):
                    raise AssertionError(f"{name} learning rate was {_shown(found)}; the call asked for "
                                         f"{rule} = {expected:g} at this step (the function's arguments and the "
                                         "instructions' schedule decide every step's rate, no value of your own)")
        counted = record.get("state_step")
        if j > 0 and counted != j:
            raise AssertionError(
                f"{where}: the optimiser's state had counted {counted if counted is not None else 'no'} steps "
                f"before it; expected {j}. {spec.kind}'s running averages of the gradients (and their squares) must "
                "carry from step to step: create the optimiser once, before the loop, and never reset its state")


def _make(spec: OptimizerSpec, params: list, rate: float):
    """The instructions' optimiser over `params` (the grader's own, from torch.optim)."""
    import torch

    return getattr(torch.optim, spec.kind)(params, lr=rate, betas=spec.betas, eps=spec.eps,
                                           weight_decay=spec.weight_decay)


def _rate(spec: OptimizerSpec, name: str, j: int) -> float:
    """The instructions' learning rate of parameter `name` at step j (NaN for one outside the model's groups)."""
    rule = spec.rule_of(name)
    return float(rule[0](j)) if rule is not None else math.nan


def _set_rates(spec: OptimizerSpec, opt, names: list, j: int) -> None:
    """The grader's optimiser holds one group per parameter (`names` in order): each gets its rate at step j."""
    for group, name in zip(opt.param_groups, names):
        group["lr"] = _rate(spec, name, j)


def _run_spec(spec: OptimizerSpec, moves: list, gradients: list, steps: int):
    """The instructions' optimiser in float64 over the gradients received: yields (j, expected change,
    recorded change) per step, each ``{name: array}``, with the parameter values the student's optimiser
    started each step from (its state carries over; the values are the recorded ones, so one step's
    rounding never reaches the next)."""
    import torch

    params: dict[str, torch.Tensor] = {}
    opt = None
    for j in range(steps):
        move, grads = moves[j], gradients[j]
        for name, pair in move.items():
            if name not in params:
                params[name] = torch.zeros(np.shape(pair[0]), dtype=torch.float64, requires_grad=True)
        if opt is None:  # one group per parameter, so that each can have its group's rate
            opt = _make(spec, [{"params": [p]} for p in params.values()], float(spec.rate(0)))
        _set_rates(spec, opt, list(params), j)
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(torch.from_numpy(np.asarray(move[name][0], dtype=np.float64)))
                g = grads.get(name)
                p.grad = None if g is None else torch.from_numpy(np.asarray(g, dtype=np.float64)).clone()
        opt.step()
        expected = {n: p.detach().numpy() - np.asarray(move[n][0], dtype=np.float64) for n, p in params.items()}
        recorded = {n: np.asarray(move[n][1], dtype=np.float64) - np.asarray(move[n][0], dtype=np.float64)
                    for n in params}
        yield j, expected, recorded


def _relative(found: dict, expected: dict, slack: "dict | None" = None) -> tuple[float, float, float]:
    """(|found - expected| / |expected|, |found|, |expected|), each over all parameters together; `slack`
    (``{name: array}``, optional) is forgiven element by element first: the rounding of the stored weights."""
    f = np.concatenate([found[n].ravel() for n in expected]) if expected else np.zeros(0)
    e = np.concatenate([v.ravel() for v in expected.values()]) if expected else np.zeros(0)
    size, moved = float(np.linalg.norm(e)), float(np.linalg.norm(f))
    off = np.abs(f - e)
    if slack is not None and expected:
        off = np.maximum(0.0, off - np.concatenate([np.broadcast_to(slack[n], np.shape(expected[n])).ravel()
                                                    for n in expected]))
    error = float(np.linalg.norm(off)) / size if size > 0 else (0.0 if moved == 0 else math.inf)
    return error, moved, size


def _rounding(move: dict) -> dict:
    """What storing a parameter after its update may change it by: one rounding to its dtype, bounded here by
    the dtype's machine epsilon (twice its unit roundoff) times the larger of the values before and after. A
    small update of a large weight (an embedding drawn from N(0, 1), stepped by 5e-4) is known
    only to that precision in float32, however exactly the optimiser computed it."""
    out = {}
    for name, (before, after) in move.items():
        unit = float(np.finfo(after.dtype).eps) if after.dtype.kind == "f" else 0.0
        out[name] = unit * np.maximum(np.abs(before.astype(np.float64)), np.abs(after.astype(np.float64)))
    return out


def _descent(move: dict, grads: dict, rate: "float | Callable[[str], float]") -> dict:
    """Plain gradient descent's change: -rate times each gradient (nothing where there is none); `rate` may be a
    function of the parameter's name."""
    lr = rate if callable(rate) else (lambda _name: rate)
    return {n: (-lr(n) * np.asarray(grads[n], dtype=np.float64) if grads.get(n) is not None
                else np.zeros(np.shape(pair[0]))) for n, pair in move.items()}


def _fresh(spec: OptimizerSpec, move: dict, grads: dict, rate: float, j: int = 0) -> dict:
    """The change a newly made optimiser of the instructions' kind would make from these gradients at step j
    (`rate` for every parameter, or where the spec has groups, each group's rate at step j)."""
    import torch

    params = {n: torch.tensor(np.asarray(pair[0], dtype=np.float64), requires_grad=True) for n, pair in move.items()}
    opt = _make(spec, [{"params": [p]} for p in params.values()], rate)
    if spec.groups:
        _set_rates(spec, opt, list(params), j)
    for n, p in params.items():
        g = grads.get(n)
        p.grad = None if g is None else torch.from_numpy(np.asarray(g, dtype=np.float64)).clone()
    opt.step()
    return {n: p.detach().numpy() - np.asarray(move[n][0], dtype=np.float64) for n, p in params.items()}


def check_updates(out: Any, spec: OptimizerSpec, *, steps: int, what: str, tol: float = UPDATE_TOL) -> None:
    """Point 4 of the module's docstring: every step's change of the weights is the instructions'
    optimiser's, from the gradients that step received. Needs a record made with ``gradients=True``."""
    moves, gradients = out.get("moves"), out.get("gradients")
    if not (isinstance(moves, list) and isinstance(gradients, list) and len(moves) == len(gradients) == steps):
        raise AssertionError(f"{what}: the grader could not read how each optimiser step changed the weights "
                             f"(expected {steps} steps)")
    for move, grads in zip(moves, gradients):
        if not (isinstance(move, dict) and isinstance(grads, dict) and move and all(
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(a, np.ndarray) for a in pair)
                and pair[0].shape == pair[1].shape and pair[0].dtype.kind == "f" for pair in move.values())
                and all(g is None or (isinstance(g, np.ndarray) and g.shape == move[n][0].shape)
                        for n, g in grads.items() if n in move)):
            raise AssertionError(f"{what}: the grader could not read how each optimiser step changed the weights")
        if any(not np.isfinite(pair[1]).all() for pair in move.values()):
            raise AssertionError(f"{what}: an optimiser step made weights NaN or infinite")
    for j, expected, recorded in _run_spec(spec, moves, gradients, steps):
        error, moved, size = _relative(recorded, expected, _rounding(moves[j]))
        if error <= tol:
            continue
        where = f"{what}: step {j}"
        cause = ""
        if j > 0 and _relative(recorded, _fresh(spec, moves[j], gradients[j], float(spec.rate(j)), j))[0] <= tol:
            cause = (f" It is the update of a {spec.kind} made anew for this step (moment estimates from zero): "
                     "create the optimiser once, before the loop")
        elif _relative(recorded, _descent(moves[j], gradients[j], lambda n: _rate(spec, n, j)))[0] <= tol:
            cause = " It is plain gradient descent's update (lr times the gradient), not Adam's"
        elif moved > 0 and size > 0:
            cause = (f" The weights moved {moved / size:.3g} times as far as they should: is the learning rate "
                     "the one the call passed, and the step taken once?")
        raise AssertionError(
            f"{where}: the optimiser changed the weights by a global norm of {moved:.4g}; {spec.said} with the "
            f"instructions' settings, from the gradients this step received, changes them by {size:.4g} (the two "
            f"differ by {error:.1%} of it).{cause}")


def check_trains_every_parameter(out: Any, names: "list[str]", *, steps: int, what: str) -> None:
    """Every parameter of the model (`names`, the instructions' layout) is in the optimiser at every step and
    receives a gradient there: a frozen encoder (``requires_grad_(False)``, or only the head given to the
    optimiser) trains, and may still clear a threshold, but it is not fine-tuning. Needs a record made with
    ``gradients=True``."""
    records, gradients = out.get("optimizers"), out.get("gradients")
    if not (isinstance(records, list) and isinstance(gradients, list) and len(records) == len(gradients) == steps):
        raise AssertionError(f"{what}: the grader could not read the optimiser's parameters (expected {steps} "
                             "steps)")
    for j, (record, grads) in enumerate(zip(records, gradients)):
        held = {str(p) for group in (record.get("groups") or []) if isinstance(group, dict)
                for p in (group.get("params") or [])} if isinstance(record, dict) else set()
        missing = [n for n in names if n not in held]
        if missing:
            raise AssertionError(f"{what}: step {j}: the optimiser does not hold {len(missing)} of the model's "
                                 f"{len(names)} parameters ({_some(missing)}); every parameter trains, none is frozen")
        idle = [n for n in names if not isinstance(grads, dict) or grads.get(n) is None]
        if idle:
            raise AssertionError(f"{what}: step {j}: {len(idle)} of the model's {len(names)} parameters received no "
                                 f"gradient ({_some(idle)}); every parameter trains (none frozen with "
                                 "requires_grad_(False), none cut off by detach())")


def _some(names: "list[str]", n: int = 3) -> str:
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def check_optimizer(out: Any, spec: OptimizerSpec, *, steps: int, what: str) -> None:
    """All four points: the class, its settings, one state through the run, and (where the record has the
    weights: ``gradients=True``) every update."""
    check_settings(out, spec, steps=steps, what=what)
    if isinstance(out, dict) and out.get("moves"):
        check_updates(out, spec, steps=steps, what=what)
