"""One comparison every model unit's checks need: a student's module against a trusted one, same weights.

The trusted side runs `lmcourse.grading.sandbox.inside.probes.module_forward` in this
process on a trusted module (a PyTorch layer behind the assignment's
interface, see `lmcourse.grading.layers`, or the reference solution's
class); the student's side runs the same probe in the worker on the
student's class, with the same weights, inputs and output gradients. The
outputs, the gradients of the inputs and the gradients of the parameters
must agree, and a failure names the first one that does not::

    from lmcourse.grading.compare import compare_modules, random_weights

    w = random_weights(reference, "Attention", {"d": 8}, seed=1)
    compare_modules(student, cls="Attention", trusted=reference, trusted_cls="Attention",
                    init_kwargs={"d": 8}, weights=w, inputs=[x], what="Attention on x (2, 5, 8)")

A second dtype: ``dtype="float64"`` runs *both* sides in float64 (each
module converted by the probe, every floating input converted here), with
tolerances to match, and requires the student's outputs to come out in
float64. On a CPU this is what exposes a tensor made with a fixed dtype or
device inside the module (a zero state made with ``torch.zeros(B, d)`` is
float32 on the CPU, whatever the input is), the bug that otherwise shows
only where the grader has a GPU.

A second device: `expect_on_other_device` runs the student's module with
its parameters and inputs on a device other than the CPU (fake tensors on
PyTorch's "meta" device, see the probe `forward_on_other_device`): a tensor
made inside the module without a device (``torch.zeros(B, d, dtype=x.dtype)``
is on the CPU, whatever the input's device) then fails as it would on a GPU,
on a machine without one.

Checks import it (``autograder/<id>/``), and so do benchmarks and the
project's tests: one definition.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

from lmcourse.grading.sandbox.inside import probes
from lmcourse.grading.checks import expect_close

__all__ = ["TOLERANCES", "as_dtype", "block_weights", "compare_modules", "expect_on_other_device", "flat",
           "one_thread", "random_weights", "run_both"]

# (rtol, atol) of a comparison, by the dtype both sides run in (None: the weights' float32)
TOLERANCES = {None: (1e-4, 1e-5), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-11)}


def _same(name: str) -> str:
    return name


def flat(value) -> list:
    """Arrays (or None) of a nested tuple/list structure, in order (the wire turns tuples into lists)."""
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(flat(v))
        return out
    return [value]


@contextlib.contextmanager
def one_thread():
    """torch on one thread while active, for the trusted side of a check. Its computations are small (a
    recurrent step's products), and on a loaded machine (CI's two cores, the worker beside the grader)
    several threads wait on each other far longer than they compute: measured, 1.5-4 s instead of 0.01-0.02 s
    for one gradient measurement of a 24-unit RNN over 40 steps."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def random_weights(trusted, cls: str, init_kwargs: dict, seed: int, scale: float = 1.0) -> dict:
    """{name: float32 array}: a freshly initialised ``trusted.<cls>(**init_kwargs)``'s weights, times `scale`.

    `scale` > 1 makes the nonlinearities matter (PyTorch's default
    initialisation keeps many layers close to linear on small inputs).
    """
    initial = probes.run_local("initial_weights", trusted, cls=cls, init_kwargs=init_kwargs, seed=seed)
    return {k: (scale * np.asarray(v, dtype=np.float32)).astype(np.float32) for k, v in initial.items()}


def block_weights(cls, init_kwargs: dict, rng, scale: float = 1.5, drawn: tuple[str, ...] = (), *,
                  trusted=None) -> dict:
    """{name: float32 array}: a freshly initialised ``cls(**init_kwargs)`` (a trusted block, or the
    reference's model) for a comparison where every parameter must matter. With `trusted`, `cls` is the
    name of a class of that module (the reference: its starting weights then come through the probe
    `initial_weights`, which the student edition can record).

    The linear and embedding weights are multiplied by `scale`; every LayerNorm's gain and bias (a submodule
    named ``ln...`` or ``..._ln``: ``ln1``, ``enc_ln``, ``emb_ln``) are drawn as 1 + 0.5 N(0, 1) and
    0.5 N(0, 1), since ones and zeros would hide a LayerNorm in the wrong place or two swapped; the
    parameters named in `drawn` (a bias initialised to zeros, say) are drawn from N(0, 1). The seed comes
    from `rng`, the check's generator.
    """
    import torch

    seed = int(rng.integers(1 << 30))
    if trusted is not None:
        initial = probes.run_local("initial_weights", trusted, cls=cls, init_kwargs=init_kwargs, seed=seed)
    else:
        torch.manual_seed(seed)
        initial = {k: v.numpy() for k, v in cls(**init_kwargs).state_dict().items()}
    out = {}
    for name, value in initial.items():
        value = np.asarray(value, dtype=np.float64)
        owner = name.split(".")[-2] if "." in name else ""  # the submodule holding it: ln1, enc_ln, emb_ln, ...
        if owner.startswith("ln") or owner.endswith("_ln"):
            value = (1.0 if name.endswith("weight") else 0.0) + 0.5 * rng.normal(size=value.shape)
        elif name in drawn:
            value = rng.normal(size=value.shape)
        else:
            value = scale * value
        out[name] = value.astype(np.float32)
    return out


def as_dtype(value, dtype: str | None):
    """`value` (arrays, None, nested tuples/lists of them) with every floating array converted to `dtype`."""
    if dtype is None:
        return value
    if isinstance(value, np.ndarray):
        return value.astype(dtype) if value.dtype.kind == "f" else value
    if isinstance(value, (list, tuple)):
        return type(value)(as_dtype(v, dtype) for v in value)
    return value


def run_both(student, *, cls: str, trusted, trusted_cls: str, init_kwargs: dict, weights: dict, inputs: list,
             rename: Callable[[str], str] = _same, grad: bool = True, seed: int = 0, dtype: str | None = None,
             **probe_options) -> tuple[dict, dict]:
    """(student's, trusted) `module_forward` results with the same weights, inputs and output gradients.

    `weights` are in the trusted module's names; the student's module gets
    them as ``rename(name)``. `dtype` (e.g. ``"float64"``) goes to *both*
    sides: both modules are converted to it, and so is every floating input
    (`as_dtype`). `probe_options` go to the student's probe only (e.g.
    ``no_builtin_rnn=True``, an assignment's rule).
    """
    inputs = as_dtype(inputs, dtype)
    with one_thread():
        expected = probes.run_local("module_forward", trusted, cls=trusted_cls, init_kwargs=init_kwargs,
                                    state_dict=weights, inputs=inputs, grad=grad, seed=seed, dtype=dtype)
    found = student.probe("module_forward", cls=cls, init_kwargs=init_kwargs,
                          state_dict={rename(k): v for k, v in weights.items()}, inputs=inputs, grad=grad, seed=seed,
                          dtype=dtype, **probe_options)
    if not isinstance(found, dict) or not isinstance(found.get("outputs"), list):
        raise AssertionError(f"{cls}: the grader could not read your module's outputs")
    return found, expected


def compare_modules(student, *, cls: str, trusted, trusted_cls: str, init_kwargs: dict, weights: dict,
                    inputs: list, what: str, rename: Callable[[str], str] = _same, grad: bool = True,
                    seed: int = 0, rtol: float | None = None, atol: float | None = None, dtype: str | None = None,
                    **probe_options) -> dict:
    """Run the student's `cls` and ``trusted.<trusted_cls>`` with the same weights on the same inputs.

    Fails (AssertionError) with a message naming the first output or gradient
    that differs, in the student's parameter names; returns the student's
    probe result. See `run_both` for `rename`, `dtype` and `probe_options`.
    With a `dtype`, every output of the student's module must have it.
    `rtol` and `atol` default to ``TOLERANCES[dtype]``.
    """
    if dtype not in TOLERANCES:
        raise ValueError(f"no tolerances for dtype {dtype!r}: one of {sorted(map(str, TOLERANCES))}")
    rtol = TOLERANCES[dtype][0] if rtol is None else rtol
    atol = TOLERANCES[dtype][1] if atol is None else atol
    found, expected = run_both(student, cls=cls, trusted=trusted, trusted_cls=trusted_cls, init_kwargs=init_kwargs,
                               weights=weights, inputs=inputs, rename=rename, grad=grad, seed=seed, dtype=dtype,
                               **probe_options)
    outs, ref_outs = found["outputs"], expected["outputs"]
    if len(outs) != len(ref_outs):
        raise AssertionError(f"{what}: expected {len(ref_outs)} output tensor(s) "
                             f"(shapes {[tuple(o.shape) for o in ref_outs]}), found {len(outs)}")
    if dtype is not None:
        for i, o in enumerate(outs):
            found_dtype = getattr(o, "dtype", type(o).__name__)
            if found_dtype != np.dtype(dtype):
                raise AssertionError(
                    f"{what}: output tensor {i + 1} of {len(ref_outs)} is {found_dtype}; the module's weights and "
                    f"inputs are {dtype}, so expected {dtype}. A tensor made inside the module with a fixed dtype "
                    "or device (a default zero state is float32 on the CPU) does not follow the input's: make "
                    "new tensors with the input's dtype and device")
    for i, (o, r) in enumerate(zip(outs, ref_outs)):
        expect_close(o, r, what=f"{what}: output tensor {i + 1} of {len(ref_outs)} (shape {tuple(r.shape)})",
                     rtol=rtol, atol=atol)
    if not grad:
        return found
    ins, ref_ins = flat(found["input_grads"]), flat(expected["input_grads"])
    for i, r in enumerate(ref_ins):
        if r is None:
            continue
        g = ins[i] if i < len(ins) else None
        if g is None:
            raise AssertionError(f"{what}: no gradient reached input {i + 1} (shape {tuple(r.shape)}); the "
                                 "outputs must depend on it through torch operations")
        expect_close(g, r, what=f"{what}: gradient with respect to input {i + 1} (shape {tuple(r.shape)})",
                     rtol=rtol, atol=atol)
    params = found["param_grads"]
    for name, r in expected["param_grads"].items():
        ours = rename(name)
        g = params.get(ours)
        if r is not None and g is None:
            raise AssertionError(f"{what}: no gradient reached the parameter {ours}")
        if r is not None:
            expect_close(g, r, what=f"{what}: gradient of {ours} (shape {tuple(r.shape)})", rtol=rtol, atol=atol)
    return found


OTHER_DEVICE = "meta"  # where `expect_on_other_device` puts the module: see the probe `forward_on_other_device`


def expect_on_other_device(student, *, cls: str, inputs: list, what: str, init_kwargs: dict | None = None,
                           weights: dict | None = None, **probe_options) -> dict:
    """The student's ``cls(**init_kwargs)`` must run where its inputs are: on a device other than the CPU.

    The probe `forward_on_other_device` runs the module once on the CPU (an
    error there is the student's and fails the check as any error does),
    then with its parameters and `inputs` as fake tensors on another device.
    Fails (AssertionError) where an operation mixed a CPU tensor with the
    others (a tensor made inside the module without a device), or where an
    output came back elsewhere than on the inputs' device or not as on the
    CPU (count, shape, dtype). Where the fake run failed for another reason
    (an operation fake tensors cannot run, such as ``.item()``), the probe
    cannot tell, and the check passes: a grader's limitation never costs a
    point. `weights` (optional) in the student's names; `probe_options` go to
    the probe (``no_builtin_rnn=True``). Returns the probe's result.
    """
    found = student.probe("forward_on_other_device", cls=cls, init_kwargs=init_kwargs, state_dict=weights,
                          inputs=inputs, device=OTHER_DEVICE, **probe_options)
    if not (isinstance(found, dict) and isinstance(found.get("outputs"), list) and isinstance(found.get("cpu"), list)):
        raise AssertionError(f"{what}: the grader could not read what your module did on another device")
    advice = ("Make every new tensor inside the module on the input's device (and with its dtype): "
              "x.new_zeros(...), or torch.zeros(..., device=x.device, dtype=x.dtype)")
    where = (f"{what}, with its parameters and inputs on a device other than the CPU (as on a GPU; the grader "
             f"uses PyTorch's data-free {OTHER_DEVICE!r} device)")
    if found.get("mismatch"):
        raise AssertionError(f"{where}: it stopped with PyTorch's error \"{str(found['mismatch'])[:300]}\". A "
                             "tensor made without a device (torch.zeros(B, d) is made on the CPU, whatever the "
                             f"input's device) does not follow the input. {advice}")
    if not found.get("ran"):
        return found  # inconclusive: the fake run failed for a reason the probe cannot judge
    _expect_outputs_there(found, where, lambda d: str(d).split(":")[0] == OTHER_DEVICE,
                          "Keep the outputs where the inputs are (no .cpu() or .to('cpu') inside the module). " + advice)
    return found


def _expect_outputs_there(found: dict, where: str, there: Callable, advice: str) -> None:
    """The outputs a device probe reports (``found["outputs"]``) against the CPU run's (``found["cpu"]``): as
    many, each where `there` (a device's name) says, of the same dtype and shape."""
    outs, cpu = found["outputs"], found["cpu"]
    if len(outs) != len(cpu):
        raise AssertionError(f"{where}: it returned {len(outs)} tensor(s), and {len(cpu)} on the CPU")
    for i, (o, c) in enumerate(zip(outs, cpu)):
        if not (isinstance(o, dict) and isinstance(c, dict)):
            raise AssertionError(f"{where}: the grader could not read your code's outputs")
        if not there(o.get("device", "")):
            raise AssertionError(f"{where}: output tensor {i + 1} of {len(outs)} came back on {o.get('device')}; "
                                 f"expected on the inputs' device. {advice}")
        if o.get("dtype") != c.get("dtype") or o.get("shape") != c.get("shape"):
            raise AssertionError(f"{where}: output tensor {i + 1} of {len(outs)} is {o.get('dtype')} of shape "
                                 f"{tuple(o.get('shape') or ())}; on the CPU it is {c.get('dtype')} of shape "
                                 f"{tuple(c.get('shape') or ())}")


def expect_runs_elsewhere(student, *, what: str, **probe_options) -> dict:
    """A function (``fn=``), or a module's method (``cls=``, ``method=``, ``init_kwargs=``, ``state_dict=``),
    must run where its inputs are, and give there what it gives on the CPU.

    The probe `call_elsewhere` runs it on the CPU, then with its tensors (arguments, the module's parameters
    and buffers) marked as on a GPU and computed on the CPU (`inside.elsewhere`): unlike
    `expect_on_other_device`'s fake tensors, with real numbers, so a greedy decoder's loop and early stop, a
    sampler's draws and ``.item()`` all run. Fails (AssertionError) where an operation mixed a CPU tensor with
    the others, where NumPy met a GPU tensor, where an output came back on the CPU, or where the outputs
    differ from the CPU's. A failure the probe cannot judge (something a CPU build of PyTorch cannot do for a
    CUDA device) passes: a grader's limitation never costs a point. ``"<device>"`` (`DEVICE_ARG`) in
    ``args``/``kwargs`` becomes the device of each run. Returns the probe's result.
    """
    from lmcourse.grading.sandbox.inside import elsewhere

    found = student.probe("call_elsewhere", **probe_options)
    if not (isinstance(found, dict) and isinstance(found.get("outputs"), list) and isinstance(found.get("cpu"), list)):
        raise AssertionError(f"{what}: the grader could not read what your code did on another device")
    where = f"{what}, with its inputs on a GPU (the grader's stands in for one: the tensors act as on {elsewhere.DEVICE})"
    advice = ("Make every new tensor on the device of the inputs: torch.full(..., device=src.device), "
              "x.new_zeros(...), torch.zeros_like(x)")
    mismatch = found.get("mismatch")
    if mismatch:
        if "for generator" in str(mismatch):
            raise AssertionError(f"{where}: it stopped with PyTorch's error \"{str(mismatch)[:200]}\". The generator "
                                 "it was given lives on the CPU and draws only there: draw on the CPU, then move the "
                                 "draws to the inputs' device (.to(x.device))")
        if "numpy" in str(mismatch):
            raise AssertionError(f"{where}: it stopped with PyTorch's error \"{str(mismatch)[:200]}\". A tensor on a "
                                 "GPU cannot become a NumPy array; keep the computation in torch (or call .cpu() "
                                 "first where a NumPy value is really wanted)")
        raise AssertionError(f"{where}: it stopped with PyTorch's error \"{str(mismatch)[:300]}\". A tensor made "
                             "without a device is made on the CPU, whatever the inputs' device, and cannot meet "
                             f"them in one operation. {advice}")
    if not found.get("ran"):
        return found  # inconclusive: the run failed for a reason the probe cannot judge
    _expect_outputs_there(found, where, lambda d: d == elsewhere.DEVICE,
                          "No .cpu() or .to('cpu') on what it returns, and every tensor it builds made where the "
                          "inputs are. " + advice)
    if found.get("same") is not True:
        raise AssertionError(f"{where}: it returned other values than on the CPU, from the same inputs and seed; "
                             "the result must not depend on the device")
    return found


def comparison_fixtures(rules: dict):
    """The fixtures every module-comparing assignment's conftest defines, bound to its `rules` (probe
    options such as ``no_builtin_rnn=True``): ``rules``, ``compare``, ``both`` and ``weights``.

    Use in a conftest as ``rules, compare, both, weights = comparison_fixtures(RULES)``; pytest finds them
    by name there, so a check asks for ``compare`` and gets `compare_modules` under this assignment's rules.
    """
    import functools

    import pytest

    @pytest.fixture(name="rules")
    def rules_fixture():
        """This assignment's rules, as probe options (for probes called directly)."""
        return dict(rules)

    @pytest.fixture(name="compare")
    def compare_fixture():
        """`compare(student, cls=..., trusted=..., trusted_cls=..., ...)`: `compare_modules` under the rules."""
        return functools.partial(compare_modules, **rules)

    @pytest.fixture(name="both")
    def both_fixture():
        """`both(student, cls=..., trusted=..., ...)`: the two raw results (`run_both`, under the rules)."""
        return functools.partial(run_both, **rules)

    @pytest.fixture(name="weights")
    def weights_fixture():
        """`weights(trusted, cls, init_kwargs, seed, scale)`: see `random_weights`."""
        return random_weights

    return rules_fixture, compare_fixture, both_fixture, weights_fixture
