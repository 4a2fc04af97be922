"""Probes: trusted helpers that run *inside* the worker, next to the student module.

A check cannot hand a torch module across the boundary, so it asks the
worker to run a probe instead::

    out = student.probe("module_forward", cls="Attention", init_kwargs={"d": 8},
                        state_dict=weights, inputs=[x], grad=True, seed=0)

and computes the reference with the very same function on the trusted side::

    from lmcourse.grading import probes
    ref = probes.run_local("module_forward", reference_module, cls="Attention", ...)

Every probe takes the student module as its first argument, then keyword
arguments of plain data, and returns plain data (tensors are converted to
NumPy arrays by the wire format).  The probe code is the grader's, but it runs
in the student's process, so its result is exactly as trustworthy as the
student's own return value: checks compare it against a reference computed on
the trusted side, never against anything else the worker says.

This file is self-contained (standard library, NumPy, torch imported lazily):
the sandbox copies it into the worker's private boot folder.

Errors: `Missing` when the module lacks the named class or function (the
student sees "not defined"), `ProbeUsageError` when the check passed bad
arguments (a grader bug: the student sees a generic message).  Any other
exception comes from the student's code.

Adding a probe: decorate a function with ``@probe``; its name is the probe
name.  Keep it deterministic (take a ``seed``) so that ``run_local`` on the
reference module gives comparable numbers.
"""

from __future__ import annotations

import random
from typing import Callable

import numpy as np

PROBES: dict[str, Callable] = {}


class Missing(LookupError):
    """The student module does not define what the probe needs."""


class ProbeUsageError(ValueError):
    """The check called the probe with arguments it cannot use (grader bug)."""


def probe(fn: Callable) -> Callable:
    PROBES[fn.__name__] = fn
    return fn


def run_local(name: str, module, *args, **kwargs):
    """Run probe `name` on a trusted module in this process (reference values)."""
    if name not in PROBES:
        raise ProbeUsageError(f"unknown probe {name!r}")
    return PROBES[name](module, *args, **kwargs)


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #

def _torch():
    import torch
    return torch


def _get(module, name: str, what: str = "class"):
    if type(name) is not str or not name:
        raise ProbeUsageError(f"{what} name must be a non-empty string")
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise Missing(f"not defined: {name}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise Missing(f"not callable: {name}")
    return obj


def seed_everything(seed) -> None:
    if seed is None:
        return
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    _torch().manual_seed(seed)


def to_tensor(x):
    """Plain data -> torch: arrays and numbers become tensors (dtype kept), containers recursively."""
    torch = _torch()
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, list):
        return [to_tensor(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_tensor(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tensor(v) for k, v in x.items()}
    return x


def to_array(x):
    """torch -> plain data: tensors become arrays, containers recursively."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return np.array(t.numpy(), copy=True)
    if isinstance(x, (list, tuple)):
        return type(x)(to_array(v) for v in x) if type(x) in (list, tuple) else [to_array(v) for v in x]
    if isinstance(x, dict):
        return {k: to_array(v) for k, v in x.items()}
    return x


def _flat_tensors(out) -> list:
    torch = _torch()
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        flat = []
        for o in out:
            flat.extend(_flat_tensors(o))
        return flat
    if isinstance(out, dict):
        flat = []
        for k in sorted(out):
            flat.extend(_flat_tensors(out[k]))
        return flat
    return []


def instantiate(module, cls: str, init_kwargs=None, state_dict=None, seed=None, strict=True):
    """Build ``module.<cls>(**init_kwargs)``, optionally loading given weights."""
    torch = _torch()
    seed_everything(seed)
    klass = _get(module, cls)
    if init_kwargs is not None and not isinstance(init_kwargs, dict):
        raise ProbeUsageError("init_kwargs must be a dict")
    obj = klass(**(init_kwargs or {}))
    if state_dict is not None:
        if not isinstance(obj, torch.nn.Module):
            raise Missing(f"{cls} is not a torch.nn.Module, so weights cannot be loaded into it")
        sd = {k: to_tensor(v) for k, v in state_dict.items()}
        obj.load_state_dict(sd, strict=strict)
    return obj


# --------------------------------------------------------------------------- #
# generic probes
# --------------------------------------------------------------------------- #

@probe
def call_method(module, *, cls: str, method: str, init_kwargs=None, args=(), kwargs=None,
                state_dict=None, seed=None, tensors: bool = False):
    """Instantiate `cls` (weights optional) and return ``obj.<method>(*args, **kwargs)``.

    tensors=True turns array arguments into torch tensors first.
    """
    obj = instantiate(module, cls, init_kwargs, state_dict, seed)
    if type(method) is not str or method.startswith("__"):
        raise ProbeUsageError("method must be a public method name")
    if not hasattr(obj, method):
        raise Missing(f"not defined: {cls}.{method}")
    fn = getattr(obj, method)
    if not callable(fn):
        raise Missing(f"not callable: {cls}.{method}")
    args = list(args or ())
    kwargs = dict(kwargs or {})
    if tensors:
        args, kwargs = to_tensor(args), to_tensor(kwargs)
    return fn(*args, **kwargs)


@probe
def call_many(module, *, fn: str, each, common=None):
    """``[fn(**common, **kw) for kw in each]``: many calls for the price of one round trip.

    Statistical checks draw hundreds of samples (one seed each) from the same
    model; sending the model once and looping here keeps them fast. Every
    result still crosses the wire as untrusted plain data.

    >>> call_many(math_module, fn="pow", each=[{"exp": 2}, {"exp": 3}], common={"base": 2})  # doctest: +SKIP
    [4, 8]
    """
    f = _get(module, fn, "function")
    if not isinstance(each, list) or not all(isinstance(kw, dict) for kw in each):
        raise ProbeUsageError("each must be a list of keyword-argument dicts")
    common = dict(common or {})
    return [f(**common, **kw) for kw in each]


@probe
def parameter_shapes(module, *, cls: str, init_kwargs=None, seed=None):
    """``{name: shape}`` of the instance's named parameters, plus ``"__total__"``: the parameter count."""
    torch = _torch()
    obj = instantiate(module, cls, init_kwargs, None, seed)
    if not isinstance(obj, torch.nn.Module):
        raise Missing(f"{cls} is not a torch.nn.Module")
    shapes = {name: tuple(int(d) for d in p.shape) for name, p in obj.named_parameters()}
    shapes["__total__"] = int(sum(p.numel() for p in obj.parameters()))
    return shapes


@probe
def module_forward(module, *, cls: str, init_kwargs=None, state_dict=None, inputs=(), kwargs=None,
                   grad: bool = True, grad_outputs=None, seed: int | None = 0, train: bool = False,
                   dtype: str | None = None):
    """Forward (and backward) of ``module.<cls>(**init_kwargs)`` with given weights.

    inputs: positional arguments (arrays become tensors, dtype kept).  With
    grad=True, floating inputs require grad and the backward pass runs on
    ``sum(out_i * g_i)``, where ``g_i`` are `grad_outputs` (arrays shaped like
    each output tensor) or, if not given, standard normal weights drawn with
    `seed` (so a trusted `run_local` with the same seed uses the same ones).

    Returns ``{"outputs": [arrays], "input_grads": [array or None],
    "param_grads": {name: array or None}}``.
    """
    torch = _torch()
    obj = instantiate(module, cls, init_kwargs, state_dict, seed)
    if not isinstance(obj, torch.nn.Module):
        raise Missing(f"{cls} is not a torch.nn.Module")
    if dtype is not None:
        obj = obj.to(getattr(torch, dtype))
    obj.train(bool(train))
    xs = [to_tensor(x) for x in (inputs or ())]
    kw = to_tensor(dict(kwargs or {}))
    if grad:
        xs = [x.clone().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
              for x in xs]
    with torch.set_grad_enabled(bool(grad)):
        out = obj(*xs, **kw)
    outs = _flat_tensors(out)
    result = {"outputs": [to_array(o) for o in outs], "input_grads": [], "param_grads": {}}
    if grad:
        diff = [o for o in outs if o.requires_grad]
        if diff:
            if grad_outputs is None:
                gen = torch.Generator().manual_seed(int(seed or 0))
                gs = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in diff]
            else:
                if len(grad_outputs) != len(diff):
                    raise ProbeUsageError("grad_outputs must match the differentiable outputs")
                gs = [to_tensor(g).to(o.dtype) for g, o in zip(grad_outputs, diff)]
            total = sum((o * g).sum() for o, g in zip(diff, gs))
            total.backward()
        result["input_grads"] = [to_array(x.grad) if isinstance(x, torch.Tensor) and x.grad is not None
                                 else None for x in xs]
        result["param_grads"] = {name: (to_array(p.grad) if p.grad is not None else None)
                                 for name, p in obj.named_parameters()}
    return result


@probe
def train_and_logits(module, *, fn: str, config=None, eval_inputs=None, seed: int | None = 0,
                     eval_kwargs=None):
    """Call the student's training function ``fn(**config)``, which returns a model,
    then return the model's outputs (logits) on `eval_inputs` in eval mode.

    The grader computes the loss from the returned logits itself.
    """
    torch = _torch()
    seed_everything(seed)
    train_fn = _get(module, fn, "function")
    model = train_fn(**dict(config or {}))
    if not isinstance(model, torch.nn.Module):
        raise Missing(f"{fn} must return a torch.nn.Module, it returned a {type(model).__name__}")
    model.eval()
    x = to_tensor(eval_inputs)
    with torch.no_grad():
        out = model(x, **to_tensor(dict(eval_kwargs or {}))) if not isinstance(x, (list, tuple)) \
            else model(*x, **to_tensor(dict(eval_kwargs or {})))
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise Missing(f"the model returned by {fn} must output a tensor of logits")
    return to_array(out)
