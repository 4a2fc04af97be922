"""Elsewhere: tensors that act as if they sat on a GPU, computed on the CPU.

A function that makes a tensor without a device (``torch.zeros(B, 1)``, the
``<BOS>`` column of a greedy decoder, ``torch.arange(T)`` for a mask) makes it
on the CPU whatever its inputs' device: right on a laptop, an error on a GPU.
The grader's machine may have no GPU, so `Elsewhere` lends one. While it is
active, the tensors it marks report ``cuda:0`` as their device (and
``is_cuda``), yet compute on the CPU as they are: real numbers, so a greedy
decoder's early stop, ``.item()`` and sampling all run, unlike PyTorch's fake
tensors. An operation that mixes a marked tensor with an unmarked one that
has dimensions fails with PyTorch's own words, as it would on a GPU.

What follows a marked tensor is marked: an operation's results, a factory
asked for ``device=x.device`` (or any CUDA device), ``x.new_zeros(...)``,
``torch.zeros_like(x)``, ``y.to(x.device)``, ``y.to(x)`` and ``y.cuda()`` (a
copy: ``y`` itself stays where it was). ``x.cpu()`` and ``x.to("cpu")`` are not
marked. As on a GPU, a 0-d CPU tensor mixes with anything, a marked tensor
may be indexed with CPU indices and copied to or from the CPU, ``x.numpy()``
refuses, and a CPU ``torch.Generator`` draws only on the CPU.

Only Python-level calls are seen (it is a ``torch.overrides.TorchFunctionMode``):
what happens inside one C++ call happens on one device. The operations that
take some tensors on the CPU on purpose (a packed sequence's lengths, which
CUDA wants on the CPU) are `CPU_ARGUMENTS`. What a CPU build of
PyTorch cannot do for a CUDA device (``torch.Generator(device="cuda")``,
CUDA autocast) fails otherwise than by a mismatch; a check counts that as
inconclusive, never against the student.
"""

from __future__ import annotations

DEVICE = "cuda:0"
_MARK = "_lmc_elsewhere"

# Functions that make a tensor from nothing (their device comes from the `device` keyword, else the CPU), and
# those that make one like their first argument (on its device unless `device` says otherwise).
FACTORIES = frozenset({"zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "tensor",
                       "as_tensor", "rand", "randn", "randint", "randperm", "tril_indices", "triu_indices",
                       "empty_strided", "scalar_tensor", "from_numpy", "asarray"})
LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
                  "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
# Operations a GPU allows across devices: indexing with CPU indices, copying, and the moves themselves.
ACROSS = frozenset({"__getitem__", "__setitem__", "copy_", "to", "cpu", "cuda", "type_as", "__repr__", "__str__",
                    "__format__", "__bool__", "__len__", "item", "tolist", "size", "dim", "numel"})

# Operations that take some of their tensors on the CPU on a GPU too: a packed sequence's lengths and batch
# sizes (``pack_padded_sequence(x, lengths.cpu())``, the recurrent kernels that read them), CTC's lengths.
CPU_ARGUMENTS = frozenset({"_pack_padded_sequence", "_pad_packed_sequence", "pack_padded_sequence",
                           "pad_packed_sequence", "lstm", "gru", "rnn_tanh", "rnn_relu", "ctc_loss"})


class DeviceMismatch(RuntimeError):
    """What a GPU would have raised: tensors of one operation on two devices, or a CUDA tensor to NumPy."""


def marked(t) -> bool:
    import torch

    return isinstance(t, torch.Tensor) and bool(getattr(t, _MARK, False))


def mark(value):
    """Mark every tensor in `value` (tensors, and tuples, lists and dicts of them) as being elsewhere."""
    import torch

    if isinstance(value, torch.Tensor):
        try:
            setattr(value, _MARK, True)
        except (AttributeError, TypeError, RuntimeError):  # a tensor that takes no attribute: left as it is
            pass
    elif isinstance(value, (tuple, list)):  # tuples, lists, and torch's named results (topk's values, indices)
        for v in value:
            mark(v)
    elif isinstance(value, dict):
        for v in value.values():
            mark(v)
    return value


def _tensors(value, out: list) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out)
    return out


def _is_there(device) -> bool | None:
    """True for a CUDA device, False for the CPU, None where `device` names no device (a dtype, say)."""
    import torch

    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        try:
            return torch.device(device).type == "cuda"
        except (RuntimeError, ValueError):
            return None
    if isinstance(device, int) and not isinstance(device, bool):
        return True  # `x.to(0)`: CUDA device 0
    return None


def _target(name: str, args: tuple, kwargs: dict) -> bool | None:
    """Where a move (``to``, ``cuda``, ``cpu``, ``type_as``) sends its tensor: True (elsewhere), False (the
    CPU) or None (where it is)."""
    if name == "cuda":
        return True
    if name == "cpu":
        return False
    if name == "type_as":
        return marked(args[1]) if len(args) > 1 else None
    if "device" in kwargs:
        return _is_there(kwargs["device"])
    for a in args[1:]:
        if marked(a) or (hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "device")):
            return marked(a)
        there = _is_there(a)
        if there is not None:
            return there
    return None


def _cpu_device(kwargs: dict) -> dict:
    """A factory's keywords with its device made the CPU (what actually computes)."""
    import torch

    if _is_there(kwargs.get("device")) is not None:
        kwargs = dict(kwargs, device=torch.device("cpu"))
    return kwargs


def _cpu_move(args: tuple) -> tuple:
    """A ``to``'s arguments with the device it names made the CPU (a dtype, a tensor: as they are)."""
    import torch

    return tuple(a if k == 0 or hasattr(a, "shape") or _is_there(a) is None else torch.device("cpu")
                 for k, a in enumerate(args))


def _cpu_generator(kwargs: dict) -> bool:
    gen = kwargs.get("generator")
    return gen is not None and getattr(getattr(gen, "device", None), "type", "cpu") == "cpu"


def _generator_mismatch(op: str) -> DeviceMismatch:
    return DeviceMismatch(f"Expected a 'cuda' device type for generator but found 'cpu' (in {op}): a generator draws "
                          "on its own device")


def _mismatch(op: str) -> DeviceMismatch:
    return DeviceMismatch(f"Expected all tensors to be on the same device, but found at least two devices, "
                          f"{DEVICE} and cpu! (when checking argument for {op})")


def Elsewhere():
    """The function mode (a context manager): see the module's docstring."""
    import torch
    from torch.overrides import TorchFunctionMode

    there = torch.device(DEVICE)

    class _Elsewhere(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            owner = getattr(func, "__self__", None)
            if name == "__get__" and owner is not None:  # a tensor's property
                prop, t = getattr(owner, "__name__", ""), (args[0] if args else None)
                if marked(t) and prop == "device":
                    return there
                if marked(t) and prop == "is_cuda":
                    return True
                out = func(*args, **kwargs)
                return mark(out) if marked(t) and prop in ("grad", "data", "T", "mT", "H", "real", "imag") else out
            if name == "numpy" and args and marked(args[0]):
                raise DeviceMismatch(f"can't convert {DEVICE} device type tensor to numpy. Use Tensor.cpu() to copy "
                                     "the tensor to host memory first.")
            if name in ("to", "cuda", "cpu", "type_as"):
                goes = _target(name, args, kwargs)
                if name in ("cuda", "cpu"):
                    out = args[0]
                else:
                    out = func(*_cpu_move(args), **_cpu_device(kwargs))
                if goes is not None and goes != marked(args[0]) and out is args[0]:
                    out = out.clone()  # a move makes a copy; the original stays where it was
                if marked(args[0]) if goes is None else goes:
                    return mark(out)
                if out is not args[0] and marked(out):
                    setattr(out, _MARK, False)
                return out
            if name in FACTORIES or name in LIKE:
                if kwargs.get("device") is not None:
                    goes = _is_there(kwargs["device"])
                else:  # x.new_zeros(...), torch.zeros_like(x): where x is; torch.zeros(...): the CPU
                    goes = name in LIKE and bool(args) and marked(args[0])
                if goes and _cpu_generator(kwargs):
                    raise _generator_mismatch(name)
                out = func(*args, **_cpu_device(kwargs))
                return mark(out) if goes else out
            found = _tensors((args, kwargs), [])
            if not any(marked(t) for t in found):
                return func(*args, **kwargs)
            if _cpu_generator(kwargs) and name not in ACROSS:  # torch.multinomial(probs, 1, generator=...)
                raise _generator_mismatch(name)
            if name not in ACROSS and name not in CPU_ARGUMENTS:
                for t in found:
                    if not marked(t) and t.dim() > 0:
                        raise _mismatch(name or repr(func))
            out = func(*args, **kwargs)
            if name in ("__getitem__", "__setitem__", "copy_") and not marked(args[0]):
                return out  # read from, or written into, a CPU tensor: it stays on the CPU
            if name in ("_pack_padded_sequence", "_pad_packed_sequence") and type(out) is tuple:
                return (mark(out[0]),) + out[1:]  # the batch sizes, or the lengths, stay on the CPU (as on CUDA)
            return mark(out)

    return _Elsewhere()


def place(module) -> None:
    """Mark a module's parameters and buffers (``module.to("cuda")``, as far as this mode can tell)."""
    for p in module.parameters():
        mark(p)
    for b in module.buffers():
        mark(b)
