"""Probes: trusted helpers that run *inside* the worker, next to the student module.

A check cannot hand a torch module across the boundary, so it asks the
worker to run a probe instead::

    out = student.probe("module_forward", cls="Attention", init_kwargs={"d": 8},
                        state_dict=weights, inputs=[x], grad=True, seed=0)

and computes the reference with the very same function on the trusted side::

    from lmcourse.grading.sandbox.inside import probes
    ref = probes.run_local("module_forward", reference_module, cls="Attention", ...)

Every probe takes the student module as its first argument, then keyword
arguments of plain data, and returns plain data (tensors are converted to
NumPy arrays by the wire format).  The probe code is the grader's, but it runs
in the student's process, so its result is exactly as trustworthy as the
student's own return value: checks compare it against a reference computed on
the trusted side, never against anything else the worker says.

This module belongs to the worker's package (`lmcourse.grading.sandbox.inside`):
standard library, NumPy, torch imported lazily, and `protocol`. The sandbox
copies the package into the worker's private boot folder.

Errors: `Missing` when the module lacks the named class or function (the
student sees "not defined"), `WrongResult` when the student's code ran but
built or returned something of the wrong kind (the student sees the message),
`ProbeUsageError` when the check passed bad arguments (a bug of the grader's:
the submission ends as a grader error, never as a score).  Any other
exception comes from the student's code.

Adding a probe: decorate a function with ``@probe``; its name is the probe
name.  Keep it deterministic (take a ``seed``) so that ``run_local`` on the
reference module gives comparable numbers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import random
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .protocol import Missing as MissingReason

PROBES: dict[str, Callable] = {}


class Missing(LookupError):
    """The student module does not define what the probe needs (`reason`: a `protocol.Missing`)."""

    def __init__(self, name: str, reason: str = MissingReason.UNDEFINED) -> None:
        super().__init__(f"{'not callable' if reason == MissingReason.NOT_CALLABLE else 'not defined'}: {name}")
        self.name, self.reason = name, MissingReason(reason)


class WrongResult(TypeError):
    """The student's code ran, but what it built or returned is not what the probe needs."""


class ProbeUsageError(ValueError):
    """The check called the probe with arguments it cannot use (grader bug)."""


def probe(fn: Callable) -> Callable:
    PROBES[fn.__name__] = fn
    return fn


def run_local(name: str, module, *args, **kwargs):
    """Run probe `name` on a trusted module in this process (reference values)."""
    if name not in PROBES:
        raise ProbeUsageError(f"unknown probe {name!r}")
    # A recorded or replayed reference (lmcourse.grading.replay, the student edition) answers for itself.
    through = getattr(type(module), "_lmcourse_run_local", None)
    if through is not None:
        return through(module, name, args, kwargs, lambda target: PROBES[name](target, *args, **kwargs))
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
            raise Missing(name)
        obj = getattr(obj, part)
    if not callable(obj):
        raise Missing(name, MissingReason.NOT_CALLABLE)
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


def _for_use(obj):
    """`obj` in eval mode where it is a torch module (the mode a trained model is used in), else as it is."""
    torch = _torch()
    if isinstance(obj, torch.nn.Module):
        obj.eval()
    return obj


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
            raise WrongResult(f"{cls} is not a torch.nn.Module, so weights cannot be loaded into it")
        sd = {k: to_tensor(v) for k, v in state_dict.items()}
        try:
            obj.load_state_dict(sd, strict=strict)
        except RuntimeError:  # the student's layout, said in the instructions' words, not as their code's error
            raise WrongResult(f"the grader loads its weights into your {cls} by the names and shapes of the "
                              f"instructions' layout, and could not: {_layout_difference(obj, sd, strict)}; name and "
                              "shape the layers as the instructions do") from None
    return obj


def _layout_difference(obj, given: dict, strict: bool) -> str:
    """What stops ``obj.load_state_dict(given)``: names missing, names unexpected, shapes that differ."""
    own = {k: tuple(v.shape) for k, v in obj.state_dict().items()}
    shape = {k: tuple(getattr(v, "shape", ())) for k, v in given.items()}
    parts = []
    missing = [k for k in own if k not in shape]
    unexpected = [k for k in shape if k not in own]
    if strict and missing:
        parts.append(f"your {type(obj).__name__} has {', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}, "
                     "which the layout does not")
    if strict and unexpected:
        parts.append(f"it has no {', '.join(unexpected[:4])}{', ...' if len(unexpected) > 4 else ''}")
    differ = [f"{k} is {own[k]}, expected {shape[k]}" for k in own if k in shape and own[k] != shape[k]]
    if differ:
        parts.append("; ".join(differ[:3]))
    return "; ".join(parts) or "its load_state_dict refused them"


# --------------------------------------------------------------------------- #
# refusing PyTorch's built-ins, for assignments that ask for a layer written by hand
# --------------------------------------------------------------------------- #

class BuiltinUsed(RuntimeError):
    """Raised inside the student's code when it calls a PyTorch built-in that the assignment asks it
    to write with tensor operations (see `without_builtins`)."""


class BuiltinRNNUsed(BuiltinUsed):
    """One of PyTorch's built-in recurrent layers (nn.RNN, nn.LSTM, nn.GRU, their cells) was called."""


class BuiltinAttentionUsed(BuiltinUsed):
    """PyTorch's built-in attention (F.scaled_dot_product_attention, nn.MultiheadAttention, the
    nn.Transformer layers) was called."""


# Torch's fused recurrent kernels, which nn.RNN, nn.LSTM, nn.GRU and their cells call.
BUILTIN_RNN = ("rnn_tanh", "rnn_tanh_cell", "rnn_relu", "rnn_relu_cell", "lstm", "lstm_cell", "gru", "gru_cell")

# Torch's attention functions, which every built-in path to attention calls: F.scaled_dot_product_attention
# (it *is* torch._C._nn.scaled_dot_product_attention, a C function) and its backends;
# F.multi_head_attention_forward, which nn.MultiheadAttention calls, and with it every nn.Transformer* layer;
# the fused kernels that nn.MultiheadAttention and nn.TransformerEncoderLayer call instead in inference
# (eval mode, no gradients); and flex_attention.
BUILTIN_ATTENTION = ("scaled_dot_product_attention", "multi_head_attention_forward", "_native_multi_head_attention",
                     "_transformer_encoder_layer_fwd", "_scaled_dot_product_attention_math",
                     "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                     "flex_attention")


# Torch's normalisation functions: nn.LayerNorm and every nn.Transformer* layer call F.layer_norm, which
# calls torch.layer_norm; group and RMS norms compute a layer norm as well, given the right shapes. (The
# encoder layer's fused inference kernel, used only in eval mode without gradients, is refused by name by the
# source scan; every comparison of a block runs with gradients, through F.layer_norm.)
BUILTIN_NORMS = ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm", "_fused_rms_norm")


class BuiltinNormUsed(BuiltinUsed):
    """PyTorch's built-in normalisation (nn.LayerNorm, F.layer_norm, group and RMS norms) or one of the
    nn.Transformer layers, which use it, was called."""


# What nn.TransformerEncoderLayer and nn.MultiheadAttention call (in training, and their fused kernels in
# inference), and nothing that nn.LayerNorm or the course's MultiHeadAttention (F.scaled_dot_product_attention)
# calls: 06-bert refuses the ready-made layers and keeps those.
BUILTIN_ENCODER = ("multi_head_attention_forward", "_native_multi_head_attention", "_transformer_encoder_layer_fwd")


class BuiltinEncoderUsed(BuiltinUsed):
    """One of PyTorch's ready-made transformer layers or nn.MultiheadAttention was called."""


# The entry points of the tokenizer libraries and of the course's reference tokenizers: tiktoken's Encoding (and
# its pure-Python teaching trainer), Hugging Face tokenizers' Tokenizer, BPE model, trainer and byte-level
# pre-tokenizer, lmcourse.bpe's builders and lmcourse.smollm's rebuilt tokenizer and digit splitting. 07-gpt and the
# capstone ask for byte-pair encoding (and SmolLM2's pre-tokenizer) written by hand.
BUILTIN_TOKENIZERS = ("Encoding", "SimpleBytePairEncoding", "bpe_train", "bpe_encode", "Tokenizer", "BPE",
                      "BpeTrainer", "ByteLevel", "tiktoken_encoding", "gpt2_encoding", "hf_tokenizer", "digits_apart")


# Template engines and the course's reference chat template: the capstone asks for SmolLM2's chat format written
# with string operations.
BUILTIN_TEMPLATES = ("chat_prompt", "Template", "Environment", "apply_chat_template")


class BuiltinTemplateUsed(BuiltinUsed):
    """A template engine (jinja2) or the course's reference chat template was called."""


class BuiltinTokenizerUsed(BuiltinUsed):
    """A tokenizer library (tiktoken, Hugging Face tokenizers) or one of the course's reference tokenizers
    was called."""


# The ATen operators behind each family, as PyTorch's dispatcher knows them. A Python function can be reached in
# ways no name replacement sees (``operator.attrgetter``, ``pkgutil.resolve_name``, a reference kept since import
# time), but every call of the built-in ends in one of these operators, and the dispatcher is where
# `refused_operators` puts its kernels.
RNN_OPS = ("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
           "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "mkldnn_rnn_layer", "_cudnn_rnn", "quantized_lstm_cell")
ATTENTION_OPS = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_fused_attention_overrideable", "_native_multi_head_attention",
                 "_transformer_encoder_layer_fwd", "_flash_attention_forward", "_efficient_attention_forward",
                 "_triton_multi_head_attention", "_triton_scaled_dot_attention")
NORM_OPS = ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm", "_fused_rms_norm",
            "_transformer_encoder_layer_fwd")
ENCODER_OPS = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd")


@dataclass(frozen=True)
class Refusal:
    """A family of PyTorch built-ins that an assignment can refuse.

    names: the functions refused; owners: the modules in which PyTorch's own code looks them up when it
    calls them (a name is replaced in each owner that has it); error and message (``{name}``: the
    function called): what a call raises; ops: the ATen operators behind them, refused in PyTorch's
    dispatcher however they are reached (`refused_operators`).
    """

    names: tuple[str, ...]
    owners: tuple[str, ...]
    error: type
    message: str
    ops: tuple[str, ...] = ()  # ATen operators refused in torch's dispatcher (`refused_operators`)


# The probes' keyword (``no_builtin_rnn=True``) -> what it refuses. `lmcourse.grading.rules.RULES` has the
# same keys: the scan of the source that verifies each rule outside the worker.
REFUSALS = {
    "no_builtin_rnn": Refusal(
        BUILTIN_RNN, ("torch._VF", "torch"), BuiltinRNNUsed,
        "PyTorch's built-in recurrent layer was called (torch's `{name}` kernel, used by nn.RNN, nn.LSTM, nn.GRU "
        "and their cells); this assignment asks for the recurrence written with tensor operations", ops=RNN_OPS),
    "no_builtin_attention": Refusal(
        BUILTIN_ATTENTION, ("torch.nn.functional", "torch._C._nn", "torch", "torch.nn.attention.flex_attention"),
        BuiltinAttentionUsed,
        "PyTorch's built-in attention was called (torch's `{name}`, one of the functions behind "
        "F.scaled_dot_product_attention, nn.MultiheadAttention and the nn.Transformer layers); this assignment "
        "asks for attention written with tensor operations", ops=ATTENTION_OPS),
    "no_builtin_transformer": Refusal(
        BUILTIN_NORMS, ("torch.nn.functional", "torch"), BuiltinNormUsed,
        "PyTorch's built-in normalisation was called (torch's `{name}`, used by nn.LayerNorm, F.layer_norm and "
        "the nn.Transformer layers); this assignment asks for layer normalisation and the transformer's blocks "
        "written with tensor operations", ops=NORM_OPS),
    "no_builtin_encoder": Refusal(
        BUILTIN_ENCODER, ("torch.nn.functional", "torch"), BuiltinEncoderUsed,
        "PyTorch's ready-made transformer layers were called (torch's `{name}`, used by nn.MultiheadAttention and "
        "the nn.Transformer layers); this assignment asks for the encoder layer written from its parts (the given "
        "attention, linear layers, LayerNorm)", ops=ENCODER_OPS),
    "no_tokenizer_library": Refusal(
        BUILTIN_TOKENIZERS, ("tiktoken", "tiktoken.core", "tiktoken._educational", "tokenizers", "tokenizers.models",
                             "tokenizers.trainers", "tokenizers.pre_tokenizers", "lmcourse.bpe", "lmcourse.smollm"),
        BuiltinTokenizerUsed,
        "a tokenizer library was called (`{name}`, from tiktoken, Hugging Face's tokenizers or the course's "
        "reference tokenizers); this assignment asks for byte-pair encoding written by hand"),
    "no_template_library": Refusal(
        BUILTIN_TEMPLATES, ("jinja2", "jinja2.environment", "lmcourse.smollm"), BuiltinTemplateUsed,
        "a template engine was called (`{name}`, from jinja2 or the course's reference chat template); this "
        "assignment asks for the chat format written with string operations"),
}

_ABSENT = object()  # what a name that is not there holds


def _owner(path: str):
    """The module at `path`, imported if need be (a function imported later would escape), or None."""
    try:
        return importlib.import_module(path)
    except ImportError:  # a torch without it: nothing there to refuse
        return None


def _refuse(refusal: Refusal, name: str) -> Callable:
    def builtin(*args, **kwargs):
        raise refusal.error(refusal.message.format(name=name))
    return builtin


class GuardRemoved(BuiltinUsed):
    """The dispatcher's refusal of a built-in was removed or pre-empted by the code under test."""


# The dispatch keys a refusing kernel is registered for: the composite key catches an operator implemented in
# terms of others (scaled_dot_product_attention, layer_norm) before it decomposes; the backend keys catch one
# with kernels of its own (native_layer_norm), whatever calls it.
_OPERATOR_KEYS = ("CompositeImplicitAutograd", "CPU", "CUDA")


_REFUSING: dict[str, bool] = {}  # operators whose refusing kernels are registered now


def _operator_kernel(refusal: Refusal, op: str) -> Callable:
    def kernel(*args, **kwargs):
        raise refusal.error(refusal.message.format(name=f"aten::{op}"))
    return kernel


def _ours(op: str) -> int:
    """How many of this operator's kernels this file registered (PyTorch's registry names each kernel's file)."""
    try:
        dump = _torch()._C._dispatch_dump(f"aten::{op}")
    except Exception:  # noqa: BLE001 (an operator this torch does not have)
        return 0
    return sum(1 for line in dump.splitlines() if line.split(":")[0] in _OPERATOR_KEYS + (
        "CompositeImplicitAutograd[alias]",) and __file__ in line)


@contextlib.contextmanager
def refused_operators(*refusals: Refusal):
    """While active, every call of one of the refusals' ATen operators raises the refusal's error, whatever
    Python path led to it.

    Replacing names (`without_builtins`) catches what looks a function up by its name; a function reached by
    ``operator.attrgetter``, ``pkgutil.resolve_name``, ``torch.ops.aten``, or kept in a default argument since
    import time, is the same C function and escapes it. Every such call still goes through PyTorch's
    dispatcher, so a kernel registered there (``torch.library``, for the keys of `_OPERATOR_KEYS`) sees it.
    Only the refused operators are touched: every other operation runs at full speed, which matters for a
    graded training run.

    PyTorch allows one Python kernel per operator and key: code that registered its own first (to keep the
    built-in reachable) makes the registration fail, which raises `GuardRemoved`; so does code that removed
    the kernels while they were active (checked on exit). Registration costs about a millisecond.
    """
    # an operator an enclosing `refused_operators` already refuses keeps that kernel (one per key is allowed)
    asked = [(refusal, op) for refusal in refusals for op in refusal.ops if not _REFUSING.get(op)]
    if not asked:
        yield
        return
    import warnings

    torch = _torch()
    library = torch.library.Library("aten", "IMPL")
    expected: dict[str, int] = {}
    try:
        with warnings.catch_warnings():  # "overriding a previously registered kernel": that is the point
            warnings.simplefilter("ignore")
            for refusal, op in asked:
                if op in expected or not hasattr(torch.ops.aten, op):
                    continue
                expected[op] = 0
                _REFUSING[op] = True
                for key in _OPERATOR_KEYS:
                    try:
                        library.impl(op, _operator_kernel(refusal, op), key)
                        expected[op] += 1
                    except RuntimeError as exc:
                        if "already a kernel registered from python" in str(exc):
                            raise GuardRemoved(f"torch's `aten::{op}` was already overridden from Python before "
                                               "the grader's check ran, so the grader could not refuse it; this "
                                               "assignment asks for it written with tensor operations") from None
                        # a key this operator cannot take a kernel for: the others catch it
        yield
        removed = [op for op, n in expected.items() if _ours(op) < n]
        if removed:
            raise GuardRemoved(f"the grader's refusal of torch's `aten::{removed[0]}` was removed while your code "
                               "ran; this assignment asks for it written with tensor operations")
    finally:
        for op in expected:
            _REFUSING.pop(op, None)
        library._destroy()


@contextlib.contextmanager
def without_builtins(*refusals: Refusal, module=None, functions: bool = True):
    """While active, calling one of the refusals' functions raises the refusal's error.

    Where the name is bound decides what replacing it catches. PyTorch's layers look their kernels up when
    they are called (nn.LSTM calls ``torch._VF.lstm``, nn.MultiheadAttention calls
    ``F.multi_head_attention_forward``), so replacing the name in the module that holds it catches the
    layer however the student imported the layer. A function the student calls directly is different:
    ``from torch.nn.functional import scaled_dot_product_attention`` at the top of the student's module binds
    the function itself to a name in the student's module, at import time, before any guard, and no
    attribute of torch's changes what that name holds. So the guard also replaces, in `module` (the
    student's module, which every probe receives), each global name that holds one of the functions.

    What no name replacement can see is a function kept somewhere else since import time (a default
    argument, a tuple), or reached by ``operator.attrgetter`` and the like. Two more layers see those, by
    what runs rather than by name: the refusals' ATen operators are refused in PyTorch's dispatcher
    (`refused_operators`), and, with `functions` (every probe but the training ones), a function mode
    refuses the functions themselves (`_refusing_functions`), which catches the Python-level ones with no
    operator of their own (``F.multi_head_attention_forward``). The function mode costs every tensor
    operation a Python call (measured: 25-45% more time for a small recurrent model's forward and backward),
    which a graded training run would pay; the dispatcher's refusal costs nothing but the refused operators.
    The source scan (`lmcourse.grading.rules`) stays, as the early warning `lmcourse check` explains.

    Everything replaced is put back on exit, also when the student's code raises.
    """
    refused = {}  # id(original function) -> (refusal, name, the original): what the function mode refuses
    with contextlib.ExitStack() as stack:
        stack.enter_context(refused_operators(*refusals))
        undo = []  # (namespace, name, what it held), in the order replaced
        stack.callback(_put_back, undo)
        for refusal in refusals:
            stand_ins = {}  # id(original function) -> (the original, what replaces it)
            for path in refusal.owners:
                owner = _owner(path)
                if owner is None:
                    continue
                for name in refusal.names:
                    original = getattr(owner, name, _ABSENT)
                    if original is _ABSENT:
                        continue
                    if id(original) not in stand_ins:
                        stand_ins[id(original)] = (original, _refuse(refusal, name))
                        refused.setdefault(id(original), (refusal, name, original))
                    namespace = vars(owner)  # torch._VF finds its kernels by __getattr__: a name set here wins
                    undo.append((namespace, name, namespace.get(name, _ABSENT)))
                    namespace[name] = stand_ins[id(original)][1]
            namespace = getattr(module, "__dict__", None)
            if isinstance(namespace, dict):
                for key, value in list(namespace.items()):
                    original, stand_in = stand_ins.get(id(value), (None, None))
                    if stand_in is not None and value is original:
                        undo.append((namespace, key, value))
                        namespace[key] = stand_in
        if functions and refused:
            stack.enter_context(_refusing_functions(refused))
        yield


def _put_back(undo: list) -> None:
    for namespace, name, held in reversed(undo):
        if held is _ABSENT:
            namespace.pop(name, None)
        else:
            namespace[name] = held


def _function_modes() -> list | None:
    """torch's stack of function modes, innermost last (None where this torch cannot tell)."""
    try:
        from torch.overrides import _get_current_function_mode_stack
        return list(_get_current_function_mode_stack())
    except Exception:  # noqa: BLE001 (a private API of torch's: absent or changed)
        return None


@contextlib.contextmanager
def _refusing_functions(refused: dict):
    """A function mode (``torch.overrides.TorchFunctionMode``) that refuses the original functions in `refused`
    however they are reached: PyTorch calls the innermost mode for every function of its Python API
    (``F.multi_head_attention_forward`` included, which has no ATen operator of its own), with the function
    object itself. Every tensor operation pays a Python call while it is active, so the training probes run
    without it (`TRAINING_PROBES`); the dispatcher's refusal covers them."""
    from torch.overrides import TorchFunctionMode

    class Refusing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            hit = refused.get(id(func))
            if hit is not None and hit[2] is func:
                refusal, name, _ = hit
                raise refusal.error(refusal.message.format(name=name))
            return func(*args, **(kwargs or {}))

    mode = Refusing()
    mode.__enter__()
    try:
        yield
        stack = _function_modes()
        if stack is not None and mode not in stack:
            raise GuardRemoved("the grader's refusal of PyTorch's built-in functions was switched off while your "
                               "code ran (its function mode left the stack)")
    finally:
        stack = _function_modes()
        if stack is None or mode in stack:
            try:
                mode.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 (the stack was changed under it: nothing more to undo)
                pass


def without_builtin_rnn(active: bool = True, module=None):
    """While active, PyTorch's built-in recurrent layers raise `BuiltinRNNUsed` (see `without_builtins`)."""
    return without_builtins(*([REFUSALS["no_builtin_rnn"]] if active else []), module=module)


def without_builtin_attention(active: bool = True, module=None):
    """While active, PyTorch's built-in attention raises `BuiltinAttentionUsed` (see `without_builtins`)."""
    return without_builtins(*([REFUSALS["no_builtin_attention"]] if active else []), module=module)


def refusing_builtins(fn: Callable) -> Callable:
    """Give a probe the keywords of `REFUSALS`: with ``no_builtin_rnn=True`` or ``no_builtin_attention=True``
    (or both) it runs with those built-ins refused in the student's code (`without_builtins`)."""
    @functools.wraps(fn)
    def run(module, *args, **kwargs):
        asked = [refusal for keyword, refusal in REFUSALS.items() if kwargs.pop(keyword, False)]
        with without_builtins(*asked, module=module, functions=fn.__name__ not in TRAINING_PROBES):
            return fn(module, *args, **kwargs)
    return run


# The probes that run a student's whole training loop: no function mode there (see `without_builtins`).
TRAINING_PROBES = frozenset({"train_and_keep", "train_and_trace"})


# --------------------------------------------------------------------------- #
# generic probes
# --------------------------------------------------------------------------- #

@probe
@refusing_builtins
def seq2seq_loss_gradient(module, *, cls: str, init_kwargs, state_dict, src, tgt_in, tgt_out, pad_id: int):
    """``{name: array}``: the gradient of the mean cross-entropy over the real target tokens (`pad_id` ignored)
    of ``module.<cls>(**init_kwargs)`` with `state_dict`, teacher-forced on one batch (``model(src, tgt_in)``,
    or its first element when it returns a tuple), in training mode. The student edition's stand-in for the
    solution's gradient in a training trace check (`lmcourse.grading.seq2seq.trusted_model`)."""
    torch = _torch()
    model = instantiate(module, cls, init_kwargs, state_dict)
    if not isinstance(model, torch.nn.Module):
        raise WrongResult(f"{cls} is not a torch.nn.Module")
    model.train(True)
    model.zero_grad(set_to_none=True)
    with torch.enable_grad():
        out = model(to_tensor(np.asarray(src)), to_tensor(np.asarray(tgt_in)))
        logits = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
            raise WrongResult(f"{cls}(src, tgt_in) did not return logits of shape (B, T, vocab_size)")
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                 to_tensor(np.asarray(tgt_out)).reshape(-1), ignore_index=int(pad_id))
        loss.backward()
    return {name: (to_array(p.grad).astype(np.float64) if p.grad is not None else np.zeros(tuple(p.shape)))
            for name, p in model.named_parameters()}


@probe
def initial_weights(module, *, cls: str, init_kwargs=None, seed=None):
    """``{name: array}``: the weights of a freshly built ``module.<cls>(**init_kwargs)``, torch seeded with
    `seed` first. A check takes a trusted module's starting weights through it (`run_local`), so that the
    student edition can record them (`lmcourse.grading.replay`) instead of shipping the class."""
    if seed is not None:
        _torch().manual_seed(int(seed))
    obj = instantiate(module, cls, init_kwargs)
    if not hasattr(obj, "state_dict"):
        raise WrongResult(f"{cls} is not a torch.nn.Module")
    return {k: to_array(v) for k, v in obj.state_dict().items()}


@probe
@refusing_builtins
def call_method(module, *, cls: str, method: str, init_kwargs=None, args=(), kwargs=None,
                state_dict=None, seed=None, tensors: bool = False):
    """Instantiate `cls` (weights optional) and return ``obj.<method>(*args, **kwargs)``.

    tensors=True turns array arguments into torch tensors first. A module is put in eval mode first, the
    mode a model is used in (decoding, generating, embedding): a dropout the student added never reaches a
    check by accident.
    no_builtin_rnn=True and no_builtin_attention=True refuse PyTorch's own recurrent layers and
    attention (`refusing_builtins`).
    """
    obj = _for_use(instantiate(module, cls, init_kwargs, state_dict, seed))
    if type(method) is not str or method.startswith("__"):
        raise ProbeUsageError("method must be a public method name")
    if not hasattr(obj, method):
        raise Missing(f"{cls}.{method}")
    fn = getattr(obj, method)
    if not callable(fn):
        raise Missing(f"{cls}.{method}", MissingReason.NOT_CALLABLE)
    args = list(args or ())
    kwargs = dict(kwargs or {})
    if tensors:
        args, kwargs = to_tensor(args), to_tensor(kwargs)
    return fn(*args, **kwargs)


@probe
@refusing_builtins
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
@refusing_builtins
def call_with_generators(module, *, fn: str, args=(), kwargs=None, seeds=(0,), keyword: str = "generator",
                         cls: str | None = None, init_kwargs=None, state_dict=None, repeat: int = 1,
                         same_inputs: bool = False):
    """``[fn(*args, **kwargs, generator=torch.Generator().manual_seed(s)) for s in seeds]``: a function that
    draws its randomness from a ``torch.Generator`` it is given (BERT's masking), once per seed.

    Arrays become tensors. torch's global generator (and NumPy's) is seeded with the same value before every
    seed's calls, so a function that ignores the generator it was given returns the same result for every
    seed, and a check can tell. Results come back as plain data (tensors as arrays).

    cls: a model first, ``fn(model, *args, ...)`` (``generate(model, idx, ...)``): ``module.<cls>(**init_kwargs)``
    with `state_dict`, in eval mode, built once. repeat: how many calls per seed, one generator carried through
    them (so many draws in one round trip); each seed's entry is then the list of its calls' results.
    same_inputs=True: the arguments become tensors once and every call gets those same tensors (a function that
    modifies its input in place then changes what the next call reads); returns ``{"results": the list above,
    "inputs_after": the arguments as they are after the last call}``.
    """
    torch = _torch()
    f = _get(module, fn, "function")
    if type(repeat) is not int or not 1 <= repeat <= 10_000:
        raise ProbeUsageError("repeat must be an int in 1..10000")
    first = [] if cls is None else [_for_use(instantiate(module, cls, init_kwargs, state_dict, 0))]
    out = []
    given = (to_tensor(list(args or ())), to_tensor(dict(kwargs or {}))) if same_inputs else None
    for s in list(seeds):
        seed_everything(0)
        generator = torch.Generator().manual_seed(int(s))
        calls = []
        for _ in range(repeat):
            a, kw = given if same_inputs else (to_tensor(list(args or ())), to_tensor(dict(kwargs or {})))
            calls.append(f(*first, *a, **kw, **{keyword: generator}))
        out.append(calls[0] if repeat == 1 else calls)
    if same_inputs:
        return {"results": out, "inputs_after": [to_array(a) if isinstance(a, torch.Tensor) else a for a in given[0]]}
    return out


@probe
def parameter_shapes(module, *, cls: str, init_kwargs=None, seed=None):
    """``{name: shape}`` of the instance's named parameters, plus ``"__total__"``: the parameter count."""
    torch = _torch()
    obj = instantiate(module, cls, init_kwargs, None, seed)
    if not isinstance(obj, torch.nn.Module):
        raise WrongResult(f"{cls} is not a torch.nn.Module")
    shapes = {name: tuple(int(d) for d in p.shape) for name, p in obj.named_parameters()}
    shapes["__total__"] = int(sum(p.numel() for p in obj.parameters()))
    return shapes


def _requiring_grad(x):
    """A copy of x whose floating tensors (in tuples and lists too: an LSTM's (h, c)) require grad."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return x.clone().requires_grad_(True) if x.is_floating_point() else x
    if type(x) in (tuple, list):
        return type(x)(_requiring_grad(v) for v in x)
    return x


def _grad_of(x):
    """The gradient of each tensor in x (None where there is none), in x's structure."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return to_array(x.grad) if x.grad is not None else None
    if type(x) in (tuple, list):
        return type(x)(_grad_of(v) for v in x)
    return None


@probe
@refusing_builtins
def module_forward(module, *, cls: str, init_kwargs=None, state_dict=None, inputs=(), kwargs=None,
                   grad: bool = True, grad_outputs=None, seed: int | None = 0, train: bool = False,
                   dtype: str | None = None):
    """Forward (and backward) of ``module.<cls>(**init_kwargs)`` with given weights.

    inputs: positional arguments (arrays become tensors, dtype kept).  With
    grad=True, floating inputs require grad and the backward pass runs on
    ``sum(out_i * g_i)``, where ``g_i`` are `grad_outputs` (arrays shaped like
    each output tensor) or, if not given, standard normal weights drawn with
    `seed` (so a trusted `run_local` with the same seed uses the same ones).

    A tuple or list input (an LSTM's ``(h, c)``) gets a tuple or list of
    gradients in ``input_grads``. no_builtin_rnn=True (no_builtin_attention=True)
    refuses PyTorch's own recurrent layers (attention) while the module is built
    and run (`refusing_builtins`).

    Returns ``{"outputs": [arrays], "input_grads": [array or None],
    "param_grads": {name: array or None}}``.
    """
    torch = _torch()
    obj = instantiate(module, cls, init_kwargs, state_dict, seed)
    if not isinstance(obj, torch.nn.Module):
        raise WrongResult(f"{cls} is not a torch.nn.Module")
    if dtype is not None:
        obj = obj.to(getattr(torch, dtype))
    obj.train(bool(train))
    xs = [to_tensor(x) for x in (inputs or ())]
    kw = to_tensor(dict(kwargs or {}))
    if grad:
        xs = [_requiring_grad(x) for x in xs]
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
        result["input_grads"] = [_grad_of(x) for x in xs]
        result["param_grads"] = {name: (to_array(p.grad) if p.grad is not None else None)
                                 for name, p in obj.named_parameters()}
    return result


# What PyTorch says when the tensors of one operation sit on two devices (in a fake mode's words too).
_DEVICE_MISMATCH = ("on the same device", "two different devices", "is not on the expected device",
                    "two devices")


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except Exception:  # noqa: BLE001 (a student's exception whose __str__ fails)
        return "<the exception's message could not be shown>"


def _device_mismatch(exc: BaseException) -> bool:
    try:
        from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError
    except ImportError:  # an older torch: the message alone tells
        FakeTensorDeviceMismatchError = ()
    if FakeTensorDeviceMismatchError and isinstance(exc, FakeTensorDeviceMismatchError):
        return True
    return isinstance(exc, RuntimeError) and any(m in _message(exc) for m in _DEVICE_MISMATCH)


def _summary(outs) -> list:
    return [{"device": str(o.device), "dtype": str(o.dtype).replace("torch.", ""),
             "shape": [int(d) for d in o.shape]} for o in outs]


@probe
@refusing_builtins
def forward_on_other_device(module, *, cls: str, init_kwargs=None, state_dict=None, inputs=(), kwargs=None,
                            seed: int | None = 0, device: str = "meta"):
    """Does ``module.<cls>(**init_kwargs)`` run where its inputs are, on a device other than the CPU?

    A tensor made inside a module without a device (``torch.zeros(B, d)``) is
    made on the CPU whatever the input's device: right on a CPU, an error on
    a GPU. The grader's machine may have no GPU, so the probe runs the module
    with its parameters, buffers and inputs as *fake* tensors on another
    device (PyTorch's ``FakeTensorMode``: shapes, dtypes and devices are
    propagated, no number is computed), where every operation that mixes a
    CPU tensor with the others fails as on a GPU. The default device is
    "meta", not "cuda": on a CPU-only build of PyTorch, a fake CUDA tensor
    cannot be indexed (``x[:, t]`` asks for a CUDA device guard) and one
    that requires grad aborts the process; a fake "meta" tensor does neither
    and mixes with a CPU tensor exactly as a CUDA one does (a 0-d CPU tensor
    is allowed, any other is an error). Runs without gradients, and the fake
    parameters do not require grad.

    First the module runs for real on the CPU, with the given inputs (arrays
    become tensors): an error there is the student's, and propagates as any
    student error does. Then the fake run. Returns ``{"ran": bool,
    "mismatch": PyTorch's message where an operation mixed devices, else
    None, "inconclusive": "<type>: <message>" where the fake run failed
    otherwise (an operation fake tensors cannot run, such as ``.item()``:
    the probe cannot tell, and a check must not count it against the
    student), else None, "outputs": [{"device", "dtype", "shape"}] of the
    fake run's output tensors (flattened; empty unless it ran), "cpu": the
    same of the real run}``. Untrusted like every probe's result.
    no_builtin_rnn=True (no_builtin_attention=True) refuses PyTorch's own recurrent layers (attention),
    in both runs (`refusing_builtins`).
    """
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    obj = instantiate(module, cls, init_kwargs, state_dict, seed)
    if not isinstance(obj, torch.nn.Module):
        raise WrongResult(f"{cls} is not a torch.nn.Module")
    obj.eval()
    xs = [to_tensor(x) for x in (inputs or ())]
    kw = to_tensor(dict(kwargs or {}))
    with torch.no_grad():
        cpu = _summary(_flat_tensors(obj(*xs, **kw)))
    result = {"ran": False, "mismatch": None, "inconclusive": None, "outputs": [], "cpu": cpu}
    target = torch.device(device)

    def fake(x):
        if isinstance(x, torch.Tensor):
            return torch.empty(x.shape, dtype=x.dtype, device=target)
        if type(x) in (tuple, list):
            return type(x)(fake(v) for v in x)
        if isinstance(x, dict):
            return {k: fake(v) for k, v in x.items()}
        return x

    try:
        # allow_non_fake_inputs: a real tensor the module kept outside its parameters and buffers (which
        # .to(device) does not move) becomes a fake one on the CPU, and mixes as it would on a GPU
        with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
            for sub in obj.modules():  # in place of Module._apply, which cannot swap some modules' parameters
                for name, p in list(sub._parameters.items()):
                    if p is not None:
                        sub._parameters[name] = torch.nn.Parameter(fake(p.detach()), requires_grad=False)
                for name, b in list(sub._buffers.items()):
                    if b is not None:
                        sub._buffers[name] = fake(b)
                if hasattr(sub, "_init_flat_weights"):  # torch's recurrent layers keep a list of their weights
                    sub._init_flat_weights()
            fxs, fkw = fake(xs), fake(kw)
            try:
                outs = _flat_tensors(obj(*fxs, **fkw))
            except Exception as exc:  # noqa: BLE001 (what the fake run's failure was decides its meaning)
                if _device_mismatch(exc):
                    result["mismatch"] = _message(exc)
                else:
                    result["inconclusive"] = f"{type(exc).__name__}: {_message(exc)}"
                return result
            result["ran"], result["outputs"] = True, _summary(outs)
    except BuiltinUsed:
        raise
    except Exception as exc:  # noqa: BLE001 (the fake mode itself failed: the probe cannot tell)
        result["inconclusive"] = f"{type(exc).__name__}: {_message(exc)}"
    return result


# What a check writes where the device goes (``causal_mask(T, device=DEVICE_ARG)``): the CPU in the probe's first
# run, the other device in its second; and where a ``torch.Generator`` goes: a CPU generator seeded with the
# probe's seed, a fresh one in each run (the same draws twice).
DEVICE_ARG = "<device>"
GENERATOR_ARG = "<generator>"


def _with_device(value, device, seed=0):
    if isinstance(value, str) and value == DEVICE_ARG:
        return device
    if isinstance(value, str) and value == GENERATOR_ARG:
        return _torch().Generator().manual_seed(int(seed or 0))
    if type(value) in (tuple, list):
        return type(value)(_with_device(v, device, seed) for v in value)
    if isinstance(value, dict):
        return {k: _with_device(v, device, seed) for k, v in value.items()}
    return value


def _same(a, b) -> bool:
    torch = _torch()
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.equal(a.detach(), b.detach())))
    if type(a) in (tuple, list) and type(b) in (tuple, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (a student's object whose == fails or is ambiguous)
        return False


@probe
@refusing_builtins
def call_elsewhere(module, *, fn: str | None = None, cls: str | None = None, method: str | None = None,
                   init_kwargs=None, state_dict=None, args=(), kwargs=None, seed: int | None = 0):
    """Does a function (`fn`), or a module's method (``cls(**init_kwargs).<method>``, with `state_dict`; the
    module itself where `method` is None), run where its inputs are, on a device other than the CPU? With both
    `fn` and `cls`, the function is given the module first (``generate(model, idx, ...)``).

    Runs it twice, without gradients and in eval mode: for real on the CPU (an error there is the student's
    and propagates), then with the module's parameters and buffers and every tensor argument on another
    device (`elsewhere.Elsewhere`: marked as on ``cuda:0``, computed on the CPU with real numbers, so data-
    dependent code such as a greedy decoder's early stop runs). Arrays in `args`/`kwargs` become tensors;
    `DEVICE_ARG` becomes the device ("cpu", then ``cuda:0``). torch and NumPy are seeded with `seed` before
    each run.

    Returns ``{"ran": bool, "mismatch": PyTorch's words where an operation mixed devices (or a CUDA tensor
    met NumPy), else None, "inconclusive": "<type>: <message>" where the second run failed otherwise (what a
    CPU build of PyTorch cannot do for a CUDA device: the probe cannot tell), "outputs": [{"device",
    "dtype", "shape"}] of the second run's output tensors (flattened), "cpu": the same of the first,
    "same": whether the second run returned what the first did}``. Untrusted like every probe's result.
    """
    torch = _torch()
    from . import elsewhere

    if cls is not None:
        obj = instantiate(module, cls, init_kwargs, state_dict, seed)
        if not isinstance(obj, torch.nn.Module):
            raise WrongResult(f"{cls} is not a torch.nn.Module")
        obj.eval()
        if fn is not None:
            target = functools.partial(_get(module, fn, "function"), obj)
        elif method is None:
            target = obj
        else:
            if type(method) is not str or method.startswith("__"):
                raise ProbeUsageError("method must be a public method name")
            target = getattr(obj, method, None)
            if not callable(target):
                raise Missing(f"{cls}.{method}")
    elif fn is not None:
        obj, target = None, _get(module, fn, "function")
    else:
        raise ProbeUsageError("call_elsewhere needs fn, or cls (and method)")

    def inputs(device):
        return (to_tensor(_with_device(list(args or ()), device, seed)),
                to_tensor(_with_device(dict(kwargs or {}), device, seed)))

    xs, kw = inputs("cpu")
    seed_everything(seed)
    with torch.no_grad():
        first = target(*xs, **kw)
    result = {"ran": False, "mismatch": None, "inconclusive": None, "outputs": [],
              "cpu": _summary(_flat_tensors(first)), "same": False}
    xs, kw = inputs(torch.device(elsewhere.DEVICE))
    elsewhere.mark((xs, kw))
    if obj is not None:
        elsewhere.place(obj)
    seed_everything(seed)
    try:
        with torch.no_grad(), elsewhere.Elsewhere():
            second = target(*xs, **kw)
    except BuiltinUsed:
        raise
    except Exception as exc:  # noqa: BLE001 (what the second run's failure was decides its meaning)
        if isinstance(exc, elsewhere.DeviceMismatch) or _device_mismatch(exc):
            result["mismatch"] = _message(exc)
        else:
            result["inconclusive"] = f"{type(exc).__name__}: {_message(exc)}"
        return result
    outs = _flat_tensors(second)
    result.update(ran=True, same=_same(first, second), outputs=[
        dict(s, device=elsewhere.DEVICE if elsewhere.marked(o) else "cpu") for s, o in zip(_summary(outs), outs)])
    return result


@contextlib.contextmanager
def _full_float32():
    """float32 matrix products in full precision (no TF32) while active, whatever the student's code set:
    the logits a model returns are then comparable with the grader's, computed on a CPU."""
    torch = _torch()
    precision = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.allow_tf32
    try:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.allow_tf32 = False
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn


# The model a graded training run returned, kept in the worker between its two probes (`train_and_keep`, then
# `evaluate_kept`): one at a time, dropped when evaluated or when the next run starts.
_KEPT: dict = {}


@probe
@refusing_builtins
def train_and_keep(module, *, fn: str, config=None, seed: int | None = 0):
    """The first half of a graded training run (`lmcourse.grading.training.train_then_evaluate`).

    Calls the student's training function ``fn(**config)``, which returns a
    model, keeps the model in this process for `evaluate_kept`, and returns
    its weights: ``{"state_dict": {name: array}}`` (``nn.Module.state_dict``
    itself, not an override), taken *before* any evaluation input exists in
    this process. The grader scores those weights with its own model, so
    nothing the model does once it sees the evaluation batch (fitting itself
    to it, say) can change the score: the second half only shows whether the
    student's forward computes what these weights say. no_builtin_rnn=True
    (and the other `REFUSALS` keywords) refuse PyTorch's built-ins throughout.
    """
    torch = _torch()
    _KEPT.clear()
    seed_everything(seed)
    train_fn = _get(module, fn, "function")
    model = train_fn(**dict(config or {}))
    if not isinstance(model, torch.nn.Module):
        raise WrongResult(f"{fn} must return a torch.nn.Module, it returned a {type(model).__name__}")
    state = torch.nn.Module.state_dict(model)
    weights = {str(k): to_array(v) for k, v in state.items() if isinstance(v, torch.Tensor)}
    _KEPT["model"] = model
    return {"state_dict": weights}


@probe
@refusing_builtins
def evaluate_kept(module, *, eval_inputs=None, eval_kwargs=None, fn: str = "the training function"):
    """The second half of a graded training run: the model `train_and_keep` kept, run once, in eval mode,
    without gradients and without TF32, on the whole evaluation batch `eval_inputs` (an int array ``(rows,
    T)``: held-out rows and perturbed copies of some, in an order the model cannot tell apart).

    Returns ``{"logits": array (the model's output, or its first element), "dtype": the logits' torch dtype
    as text}``. Untrusted: the grader requires these logits to equal what the weights returned by
    `train_and_keep` give in its own model, and scores the latter.
    """
    torch = _torch()
    if eval_inputs is None:
        raise ProbeUsageError("evaluate_kept needs eval_inputs")
    model = _KEPT.pop("model", None)
    if model is None:  # the worker restarted after a failure, or something in it dropped the model
        raise WrongResult(f"the model returned by {fn} was no longer there when the grader asked for its outputs "
                          "(no trained model is kept: did something left running by the training end the process?)")
    model.eval()
    x = to_tensor(eval_inputs)
    kw = to_tensor(dict(eval_kwargs or {}))
    first = next(iter(model.parameters()), None)
    if first is not None:  # a model trained on a GPU is asked there
        x = x.to(first.device)
        kw = {k: v.to(first.device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    with torch.no_grad(), _full_float32():
        out = model(x, **kw)
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise WrongResult(f"the model returned by {fn} must output a tensor of logits (or a tuple whose first "
                          f"element is one), it output a {type(out).__name__}")
    return {"logits": to_array(out), "dtype": str(out.dtype).replace("torch.", "")}


@probe
@refusing_builtins
def incremental_logits(module, *, cls: str, init_kwargs=None, state_dict=None, ids=None, chunks=(), n_layers: int = 1,
                       cache_cls: str = "KVCache", seed: int | None = 0):
    """Drive a decoder's key-value cache: ``ids`` (B, T) fed to ``cls(**init_kwargs)`` in consecutive chunks of
    the lengths in `chunks`, each call ``model(chunk, cache=cache)`` with one ``module.<cache_cls>(n_layers)``
    (07-gpt's given KVCache), in eval mode, without gradients, without TF32.

    Returns ``{"logits": the chunks' logits concatenated along positions (B, sum of chunks run, V) or None,
    "raised": the exception's type name or None, "message": its text, "at": the chunk it stopped at}``: a
    check may ask for a chunk past the model's context and expect a ValueError. Everything is untrusted.
    """
    torch = _torch()
    model = instantiate(module, cls, init_kwargs, state_dict, seed)
    model.eval()
    cache = _get(module, cache_cls, "class")(int(n_layers))
    x = to_tensor(ids)
    out, at = [], 0
    raised = message = stopped = None
    with torch.no_grad(), _full_float32():
        for k, n in enumerate(list(chunks)):
            try:
                logits = model(x[:, at:at + int(n)], cache=cache)
            except Exception as exc:  # reported: a check decides whether this error was the one asked for
                raised, message, stopped = type(exc).__name__, _message(exc), k
                break
            if isinstance(logits, (tuple, list)) and logits:
                logits = logits[0]
            if not isinstance(logits, torch.Tensor):
                raise WrongResult(f"{cls}(ids, cache=cache) must return a tensor of logits, it returned a "
                                  f"{type(logits).__name__}")
            out.append(logits)
            at += int(n)
    return {"logits": to_array(torch.cat(out, dim=1)) if out else None, "raised": raised, "message": message,
            "at": stopped}


# The student's model holding pretrained weights, kept for the worker's life (one grade): loading SmolLM2 (reading
# and dequantising its GGUF, building 134.5 M parameters, the student's loader) costs seconds, and every check of
# the capstone that uses the real weights asks for the same model.
_PRETRAINED: dict = {}


@probe
@refusing_builtins
def pretrained(module, *, cls: str, init_kwargs=None, load_fn: str = "load_gguf_weights",
               tensors_fn: str = "smollm.torch_tensors", ids=None, chunks=None, generate_fn: str | None = None,
               generate_kwargs=None, cache_cls: str = "KVCache", seed: int | None = 0):
    """The student's ``cls(**init_kwargs)`` with pretrained weights loaded by the student's ``load_fn(model,
    tensors)``, in eval mode, without gradients, without TF32; built once per worker process and reused.

    ``tensors`` is a new dict of what ``tensors_fn`` returns, a dotted name looked up in the student's module: the
    capstone's given setup imports ``lmcourse.smollm``, whose ``torch_tensors()`` reads SmolLM2's verified GGUF
    (the worker's own code imports nothing of lmcourse: tests/test_layers.py).

    Then one of: ``generate_fn`` given: ``module.<generate_fn>(model, ids, **generate_kwargs)`` (its tokens, and
    ``calls``: for every call of the model meanwhile, [positions fed, whether a cache was passed]);
    ``chunks`` given: ``ids`` fed in consecutive chunks through one ``module.<cache_cls>(len(model.blocks))``
    (the logits concatenated); otherwise ``model(ids)``. Returns ``{"logits"}`` or ``{"tokens"}`` as arrays:
    untrusted, like everything a probe returns.
    """
    torch = _torch()
    key = (cls, repr(sorted((init_kwargs or {}).items())), load_fn, tensors_fn)
    model = _PRETRAINED.get(key)
    if model is None:
        _PRETRAINED.clear()  # one model at a time: 540 MB each
        owner, _, name = tensors_fn.rpartition(".")
        source = getattr(getattr(module, owner, None), name, None) if owner else getattr(module, name, None)
        if not callable(source):
            raise ProbeUsageError(f"the notebook's module has no {tensors_fn}() to read the weights with")
        loader = _get(module, load_fn, "function")
        model = instantiate(module, cls, init_kwargs, None, seed)
        with torch.no_grad():
            loaded = loader(model, dict(source()))
        if loaded is not None and loaded is not model:
            raise WrongResult(f"{load_fn}(model, tensors) must load the weights into the model it is given (and "
                              f"return it); it returned a different {type(loaded).__name__}")
        model.eval()
        _PRETRAINED[key] = model
    x = to_tensor(ids)
    with torch.no_grad(), _full_float32():
        if generate_fn:
            calls = []  # (positions fed, whether a cache came with them) of every call of the model

            def seen(_module, args, kwargs):
                ids = args[0] if args else kwargs.get("idx")
                cache = args[1] if len(args) > 1 else kwargs.get("cache")
                calls.append([int(ids.shape[-1]) if isinstance(ids, torch.Tensor) else -1, cache is not None])

            hook = model.register_forward_pre_hook(seen, with_kwargs=True)
            try:
                out = _get(module, generate_fn, "function")(model, x, **dict(generate_kwargs or {}))
            finally:
                hook.remove()
            if not isinstance(out, torch.Tensor):
                raise WrongResult(f"{generate_fn} must return a tensor of token ids, it returned a "
                                  f"{type(out).__name__}")
            return {"tokens": to_array(out), "calls": calls}
        if chunks:
            cache = _get(module, cache_cls, "class")(len(model.blocks))
            parts, at = [], 0
            for n in chunks:
                parts.append(model(x[:, at:at + int(n)], cache=cache))
                at += int(n)
            logits = torch.cat([p[0] if isinstance(p, (tuple, list)) else p for p in parts], dim=1)
        else:
            logits = model(x)
            logits = logits[0] if isinstance(logits, (tuple, list)) else logits
    if not isinstance(logits, torch.Tensor):
        raise WrongResult(f"{cls}(ids) must return a tensor of logits, it returned a {type(logits).__name__}")
    return {"logits": to_array(logits)}


@probe
@refusing_builtins
def load_named_tensors(module, *, fn: str, cls: str, init_kwargs=None, tensors=None, seed: int | None = 0):
    """``fn(model, tensors)`` with ``model = module.<cls>(**init_kwargs)`` (seeded) and ``tensors`` a new dict of
    name -> tensor, without gradients (as `pretrained` loads): a loader of named weights, on any set of names.

    Returns ``{"raised": the exception's type name or None, "message": its text, "returned_model": whether it
    returned the model it was given, "state": {parameter name: array} of the model afterwards}``: a check may
    hand over a set with a tensor missing, one too many or one of the wrong shape and expect a ValueError.
    Everything is untrusted."""
    torch = _torch()
    loader = _get(module, fn, "function")
    model = instantiate(module, cls, init_kwargs, None, seed)
    given = {str(name): to_tensor(value) for name, value in dict(tensors or {}).items()}
    raised = message = returned = None
    with torch.no_grad():
        try:
            returned = loader(model, given)
        except Exception as exc:  # reported: a check decides whether this error was the one asked for
            raised, message = type(exc).__name__, _message(exc)
    state = {name: to_array(p.detach()) for name, p in model.named_parameters()}
    return {"raised": raised, "message": message, "returned_model": returned is model, "state": state}


def _traced(value):
    """What `train_and_trace` records of an argument: tensors as arrays, containers as lists, None as None,
    anything else by its type's name."""
    torch = _torch()
    if value is None or isinstance(value, torch.Tensor):
        return None if value is None else to_array(value)
    if isinstance(value, (list, tuple)):
        return [_traced(v) for v in value]
    return f"<{type(value).__name__}>"


@probe
@refusing_builtins
def train_and_trace(module, *, fn: str, cls: str, config=None, seed: int | None = 0, max_calls: int = 1000,
                    gradients: bool = False):
    """Run the student's training function ``fn(**config)`` and record what it does, step by step.

    - Every call of ``module.<cls>.forward`` (the student's model class) made with gradients enabled, so
      the training passes and not an evaluation under ``no_grad``: its arguments by parameter name
      (tensors as arrays, tuples and lists as lists, None as None), ``attached``: whether a tensor
      argument requires grad (a state carried without ``detach()``), ``returned``: the tensors it
      returned, flattened, and ``step``: how many optimiser steps came before it.
    - Every ``step()`` of any torch optimiser: the global L2 norm of the gradients of the optimiser's
      parameters just before the step, that is, what the update is computed from, ``rates``: the
      learning rate of each of its parameter groups at that moment (a warm-up schedule's value), and
      ``optimizers``: its class's name, which optimiser object it is (0 for the first one seen, 1 for
      the next...), its groups' settings (betas, eps, weight_decay... with the names of their
      parameters) and ``state_step``: how many steps its state had counted (Adam's ``step``; None for
      an optimiser with no state yet), so that a check sees an optimiser made anew every step.
    - With ``gradients=True``, also each call's ``weights``: the model's ``state_dict`` as the call
      found it (``nn.Module.state_dict`` itself, not an override), and each step's ``gradients``: every
      parameter's ``.grad`` just before the step (None where it has none), by the parameter's name in
      the traced model (``"<parameter i>"`` for one it does not hold), and ``moves``: each parameter's
      value just before and just after the step (``{name: [before, after]}``). A check then recomputes,
      with the reference model on its side, the gradient of each step's loss from that step's weights,
      batch and state, and sees whether the step received it or something else (gradients left over from
      earlier steps, say); and, from the gradients received, the update the spec's optimiser makes.

    - Of the model `fn` returns: whether it is in training mode (``returned_training``; None when it
      returns no module), and whether in training mode it gives two different outputs for the first
      training call's input (``random_in_training``: dropout, where the assignment's model has none).

    Returns ``{"calls": [{"args": {...}, "attached": bool, "returned": [arrays], "step": int,
    ("weights": {name: array})}], "steps": [float], "rates": [[float per group]],
    "optimizers": [{"type": str, "object": int, "groups": [{...}], "state_step": int or None}],
    "gradients": [{name: array or None}], "moves": [{name: [array, array]}], "returned_training": bool or
    None, "random_in_training": bool or None}`` (at most
    `max_calls` calls recorded; ``gradients`` is empty unless asked). For small configurations:
    everything recorded crosses the wire. Untrusted like every probe's result: a check compares it with
    what the assignment's training loop does. no_builtin_rnn=True (no_builtin_attention=True) refuses
    PyTorch's own recurrent layers (attention) throughout.
    """
    import inspect

    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    torch = _torch()
    seed_everything(seed)
    train_fn = _get(module, fn, "function")
    klass = _get(module, cls)
    if not (isinstance(klass, type) and issubclass(klass, torch.nn.Module)):
        raise WrongResult(f"{cls} is not a torch.nn.Module class")
    own = klass.__dict__.get("forward")
    forward = klass.forward
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):
        signature = None
    calls, steps, rates, grads_seen, optimizers, moves = [], [], [], [], [], []
    names: dict[int, str] = {}  # id(parameter) -> its name in the model last traced
    seen_optimizers: list = []  # each optimiser object once (kept alive, so no two share an id)
    before: dict[str, object] = {}

    def traced(self, *args, **kwargs):
        recording = torch.is_grad_enabled() and len(calls) < int(max_calls)
        weights = None
        if recording and gradients:
            names.update({id(p): str(n) for n, p in self.named_parameters()})
            weights = {str(k): to_array(v) for k, v in torch.nn.Module.state_dict(self).items()
                       if isinstance(v, torch.Tensor)}
        done = len(steps)
        out = forward(self, *args, **kwargs)
        if recording:
            try:
                bound = signature.bind(self, *args, **kwargs)
                bound.apply_defaults()
                named = dict(list(bound.arguments.items())[1:])
            except (AttributeError, TypeError):
                named = {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}
            tensors = _flat_tensors(list(named.values()))
            call = {"args": {str(k): _traced(v) for k, v in named.items()},
                    "attached": any(t.requires_grad for t in tensors),
                    "returned": [to_array(t) for t in _flat_tensors(out)], "step": done}
            if weights is not None:
                call["weights"] = weights
            calls.append(call)
        return out

    def label(i, p):
        return names.get(id(p), f"<parameter {i}>")

    def before_step(optimizer, args, kwargs):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        grads = [p.grad.detach() for p in params if p.grad is not None]
        steps.append(float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads))) if grads else 0.0)
        rates.append([float(group.get("lr", float("nan"))) for group in optimizer.param_groups])
        if not any(o is optimizer for o in seen_optimizers):
            seen_optimizers.append(optimizer)
        counted = [optimizer.state[p].get("step") for p in params
                   if isinstance(optimizer.state.get(p), dict) and "step" in optimizer.state[p]]
        index = {id(p): i for i, p in enumerate(params)}
        optimizers.append({
            "type": type(optimizer).__name__,
            "object": next(i for i, o in enumerate(seen_optimizers) if o is optimizer),
            "groups": [dict({k: _setting(v) for k, v in group.items() if k != "params"},
                            params=[label(index[id(p)], p) for p in group["params"]])
                       for group in optimizer.param_groups],
            "state_step": int(float(counted[0])) if counted else None})
        if gradients and len(grads_seen) < int(max_calls):
            grads_seen.append({label(i, p): (to_array(p.grad) if p.grad is not None else None)
                               for i, p in enumerate(params)})
            before.clear()
            before.update({label(i, p): to_array(p) for i, p in enumerate(params)})

    def after_step(optimizer, args, kwargs):
        if gradients and before and len(moves) < int(max_calls):
            params = [p for group in optimizer.param_groups for p in group["params"]]
            moves.append({label(i, p): [before.get(label(i, p)), to_array(p)] for i, p in enumerate(params)})
            before.clear()

    handle = register_optimizer_step_pre_hook(before_step)
    after_handle = register_optimizer_step_post_hook(after_step)
    klass.forward = traced
    try:
        returned = train_fn(**dict(config or {}))
    finally:
        handle.remove()
        after_handle.remove()
        if own is not None:
            klass.forward = own
        else:
            del klass.forward
    model = returned if isinstance(returned, torch.nn.Module) else None
    return {"calls": calls, "steps": steps, "rates": rates, "optimizers": optimizers, "gradients": grads_seen,
            "moves": moves, "returned_training": None if model is None else bool(model.training),
            "random_in_training": _random_in_training(model, calls[0]["args"] if calls else None)}


def _random_in_training(model, args) -> bool | None:
    """Whether `model` in training mode gives two different outputs for the same input (dropout, or noise of
    its own), its input the first training call's recorded arguments; None where that cannot be run. Leaves
    the model's mode and weights as they were."""
    torch = _torch()
    if model is None or not isinstance(args, dict):
        return None
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")

    def back(value):
        if isinstance(value, np.ndarray):
            return torch.from_numpy(value.copy()).to(device)
        if isinstance(value, list):
            return [back(v) for v in value]
        return None if value is None or isinstance(value, str) else value

    was = model.training
    try:
        inputs = {k: back(v) for k, v in args.items()}
        model.train(True)
        with torch.no_grad():
            outs = [_flat_tensors(model(**inputs)) for _ in range(2)]
        return any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(*outs))
    except Exception:  # noqa: BLE001 (an argument the record could not carry back, say)
        return None
    finally:
        model.train(was)


def _setting(value):
    """An optimiser group's setting as plain data: numbers, booleans, None and tuples of them as they are
    (a tensor learning rate as its float), anything else by its type's name."""
    torch = _torch()
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_setting(v) for v in value]
    return f"<{type(value).__name__}>"


@probe
@refusing_builtins
def call_with_module(module, *, fn: str, cls: str, init_kwargs=None, state_dict=None, args=(), kwargs=None,
                     seed: int | None = 0, record_inputs: bool = False):
    """``fn(obj, *args, **kwargs)`` with ``obj = module.<cls>(**init_kwargs)`` holding the given weights: a
    function that takes a model (a measurement of its gradients, say), in eval mode (as `call_method`). Arrays
    become tensors; torch's generator is seeded with `seed` before the call. no_builtin_rnn=True
    (no_builtin_attention=True) refuses PyTorch's own recurrent layers (attention) while it runs.
    record_inputs=True: returns ``{"result": ..., "inputs": [array or None per call of the model], "cached": [bool
    per call]}``, the first tensor each call of the model was given (what a generate fed its model: the context it
    cropped) and whether a cache came with it (a second argument, or ``cache=``, not None)."""
    torch = _torch()
    f = _get(module, fn, "function")
    obj = _for_use(instantiate(module, cls, init_kwargs, state_dict, seed))
    seed_everything(seed)
    if not record_inputs:
        return f(obj, *to_tensor(list(args or ())), **to_tensor(dict(kwargs or {})))
    if not isinstance(obj, torch.nn.Module):
        raise WrongResult(f"{cls} is not a torch.nn.Module")
    inputs, cached = [], []

    def seen(_module, call_args, call_kwargs):
        tensors = _flat_tensors(list(call_args) + list(call_kwargs.values()))
        inputs.append(to_array(tensors[0]) if tensors else None)
        cached.append((call_args[1] if len(call_args) > 1 else call_kwargs.get("cache")) is not None)

    handle = obj.register_forward_pre_hook(seen, with_kwargs=True)
    try:
        result = f(obj, *to_tensor(list(args or ())), **to_tensor(dict(kwargs or {})))
    finally:
        handle.remove()
    return {"result": result, "inputs": inputs, "cached": cached}


@probe
def call_with_tensors(module, *, fn: str, args=(), kwargs=None, grad_args=(), seed: int | None = 0):
    """``fn(*args, **kwargs)`` for a function written for torch tensors: arrays become tensors first.

    grad_args: positions of floating arguments to differentiate with respect to;
    then the result must be a scalar tensor, and the probe returns
    ``{"result": value, "grads": [d result / d args[i] for i in grad_args]}``.
    Otherwise it returns the result itself (tensors come back as arrays).
    torch's global generator is seeded with `seed` first.
    """
    torch = _torch()
    f = _get(module, fn, "function")
    seed_everything(seed)
    args = list(to_tensor(list(args or ())))
    kw = to_tensor(dict(kwargs or {}))
    grad_args = [int(i) for i in (grad_args or ())]
    for i in grad_args:
        if not (0 <= i < len(args)) or not isinstance(args[i], torch.Tensor) or not args[i].is_floating_point():
            raise ProbeUsageError("grad_args must name floating tensor arguments")
        args[i] = args[i].clone().requires_grad_(True)
    with torch.set_grad_enabled(bool(grad_args)):
        out = f(*args, **kw)
    if not grad_args:
        return to_array(out)
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        raise WrongResult(f"{fn} must return a scalar tensor, it returned "
                      + (f"a tensor of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else
                         f"a {type(out).__name__}"))
    if not out.requires_grad:
        raise WrongResult(f"{fn} returned a tensor without a gradient: keep the computation in torch "
                      "(no .item(), .numpy() or .detach())")
    out.reshape(()).backward()
    return {"result": to_array(out), "grads": [_grad_of(args[i]) for i in grad_args]}


@probe
def call_with_parameters(module, *, fn: str, grads, args=(), kwargs=None, iterator: bool = False):
    """Build one ``nn.Parameter`` per entry of `grads` (zeros, with that array as its ``.grad``;
    None: a parameter without a gradient), call ``fn(parameters, *args, **kwargs)``, and
    return ``{"result": its return value, "grads": [each .grad afterwards, or None]}``.

    For functions that work on gradients in place, such as gradient clipping.
    iterator=True passes the parameters as a one-pass iterator, as
    ``model.parameters()`` is, instead of a list.
    """
    torch = _torch()
    f = _get(module, fn, "function")
    if not isinstance(grads, list):
        raise ProbeUsageError("grads must be a list of arrays or None")
    params = []
    for g in grads:
        if g is None:
            params.append(torch.nn.Parameter(torch.zeros(1)))
            continue
        g = to_tensor(g)
        p = torch.nn.Parameter(torch.zeros_like(g))
        p.grad = g.clone()
        params.append(p)
    out = f(iter(params) if iterator else list(params), *to_tensor(list(args or ())), **to_tensor(dict(kwargs or {})))
    return {"result": to_array(out), "grads": [to_array(p.grad) if p.grad is not None else None for p in params]}


class _Tail:
    """A stdout that keeps the last `limit` characters written (a test cell may print in a loop)."""

    def __init__(self, limit: int = 2000):
        self.limit, self.text = limit, ""

    def write(self, s) -> int:
        s = str(s)
        self.text = (self.text + s)[-self.limit:]
        return len(s)

    def flush(self) -> None:
        pass


def _test_cell_code(source: str, filename: str):
    """The test cell compiled as Jupyter compiles it. Not with pytest's assertion rewriting: every assertion
    of a test cell says what failed in its own message, and the rewrite's explanation after it ("assert
    False", "+ where False = <built-in method allclose ...>") is noise that also differed with the machine
    (pytest is out of the worker's view under bubblewrap, importable without it)."""
    return compile(source, filename, "exec")


@probe
def run_test_cell(module, *, source: str, cell: str):
    """Run one of the notebook's visible test cells, as Jupyter would, in the student module's namespace.

    `source` is the release's test cell (the grader's copy, never the
    student's). Cells run one after another in the same namespace, as in the
    kernel, after every answer cell. Returns ``{"passed": bool, "printed":
    the last 2,000 characters it printed, "error": None or {"type", "message",
    "line": the line of the test cell that failed, "statement": its source,
    "traceback": the frames in the student's code}}``. Like every probe's
    result, it is the student's process talking: `lmcourse check` shows it to
    the student and nothing scores it.
    """
    import ast
    import traceback

    if not isinstance(source, str) or not isinstance(cell, str):
        raise ProbeUsageError("run_test_cell needs the cell's source and grade_id as text")
    filename = f"<test cell {cell}>"
    code = _test_cell_code(source, filename)
    out = _Tail()
    previous = sys.stdout
    sys.stdout = out
    try:
        exec(code, module.__dict__)
    except BaseException as exc:  # noqa: BLE001 (SystemExit and KeyboardInterrupt are the student's too)
        frames = traceback.extract_tb(exc.__traceback__)
        line = next((fr.lineno for fr in reversed(frames) if fr.filename == filename), None)
        statement = ""
        if line is not None:  # the whole statement, an assertion over several lines included
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For,
                                                                        ast.While, ast.If, ast.With, ast.Try)) \
                        and node.lineno <= line <= (node.end_lineno or node.lineno):
                    statement = ast.get_source_segment(source, node) or ""
                    break
            statement = statement or source.splitlines()[line - 1]
        own = getattr(module, "__file__", None)
        student = [f"  line {fr.lineno}, in {fr.name}" + (f"\n    {fr.line.strip()}" if fr.line else "")
                   for fr in frames if own and fr.filename == own][-6:]
        try:
            message = str(exc)
        except BaseException:  # noqa: BLE001
            message = "<the exception's message could not be shown>"
        return {"passed": False, "printed": out.text,
                "error": {"type": type(exc).__name__, "message": message[:3000], "line": line,
                          "statement": statement[:1000], "traceback": "\n".join(student)}}
    finally:
        sys.stdout = previous
    return {"passed": True, "printed": out.text, "error": None}
