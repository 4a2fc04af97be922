"""The reference solution answered from a record: what the student edition's visible checks compare with.

A visible check compares the student's code with the instructor's solution,
the ``reference`` fixture. The student edition cannot ship the solution, so
``lmcourse publish student`` runs every visible check once against it through
a :class:`Recording` and ships what the solution *answered*, never its code:
for each call a check made on it (``reference.tokenize_lines(text)``, or a
probe run on it in the grader's process, ``probes.run_local(name, reference,
...)``), a digest of the arguments and the value that came back. In the
edition the checks get a :class:`Replay` of that record: the same call returns
the same value, so a check reads exactly as it does in the course's grader and
gives the same verdict.

A check can only be replayed if the calls it makes on the reference do not
depend on the student's answers (the inputs come from its seeded ``rng`` and
its own data, as they should). A call that was never recorded raises
:class:`NotRecorded`, a grader failure that names the check: it never counts
against the student. ``tests/test_student_edition.py`` runs every visible
check of every assignment in the edition on an honest notebook, on the release
and on known-wrong variants, and requires the verdicts of the course's own
grader.

The record is a pickle that may only name a short list of safe types (numpy
arrays, tensors, the builtin containers): :func:`dumps` refuses anything else
when it is written, and :func:`loads` when it is read, so a record can neither
carry a function of the solution nor run code when it is opened.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import hashlib
import io
import math
import pickle
import struct
import types
from collections.abc import Mapping
from typing import Any, Callable

__all__ = ["NotRecorded", "Recording", "Replay", "digest", "dumps", "loads"]

FORMAT = 1


class NotRecorded(LookupError):
    """The edition's record holds no answer for a call a check made on the reference."""


# --------------------------------------------------------------------------- the digest of a call


def _feed(h, value: Any, depth: int = 0) -> None:
    """Feed `value`'s canonical form to the hash `h`: equal values (however they were built) feed equal bytes."""
    if depth > 200:
        raise TypeError("a value nested more than 200 levels deep")
    t = type(value)
    if value is None or t is bool:
        h.update(b"N" if value is None else (b"T" if value else b"F"))
    elif t is int:
        h.update(b"i" + str(value).encode() + b";")
    elif t is float:
        h.update(b"f" + (value.hex() if math.isfinite(value) or math.isinf(value) else "nan").encode() + b";")
    elif t is str:
        data = value.encode("utf-8", "surrogatepass")
        h.update(b"s" + struct.pack("<Q", len(data)) + data)
    elif t is bytes:
        h.update(b"b" + struct.pack("<Q", len(value)) + value)
    elif t in (list, tuple):
        h.update((b"l" if t is list else b"t") + struct.pack("<Q", len(value)))
        for item in value:
            _feed(h, item, depth + 1)
    elif isinstance(value, Mapping):
        # Counter, defaultdict, OrderedDict and dict alike: a mapping is its items, in no particular order
        items = sorted((digest(k), v) for k, v in value.items())
        h.update(b"d" + struct.pack("<Q", len(items)))
        for k, v in items:
            h.update(k)
            _feed(h, v, depth + 1)
    elif isinstance(value, (set, frozenset)):
        h.update(b"S" + b"".join(sorted(digest(v) for v in value)))
    elif _is_array(value):
        import numpy as np

        array = np.ascontiguousarray(value)
        h.update(b"a" + array.dtype.str.encode() + repr(array.shape).encode())
        h.update(array.view(np.uint8).tobytes() if array.dtype != object else _object_array(array))
    elif _is_tensor(value):
        h.update(b"x" + str(value.dtype).encode() + repr(tuple(value.shape)).encode())
        h.update(_Tensor.of(value).array.view("uint8").tobytes())
    elif isinstance(value, (int, float, str)):  # numpy scalars, enum members and other subclasses
        _feed(h, value.item() if hasattr(value, "item") else t.__mro__[1](value), depth + 1)
    elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        h.update(b"c" + f"{getattr(value, '__module__', '')}.{value.__qualname__}".encode() + b";")
    elif dataclasses.is_dataclass(value):
        h.update(b"D" + t.__qualname__.encode() + b";")
        _feed(h, {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, depth + 1)
    else:
        raise TypeError(f"a {t.__module__}.{t.__qualname__} cannot be recorded")


def _is_array(value) -> bool:
    """A numpy array or scalar (np.float64 among them)."""
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and hasattr(value, "shape")


def _object_array(array) -> bytes:
    h = hashlib.sha256()
    for item in array.ravel():
        _feed(h, item)
    return h.digest()


def _is_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and type(value).__name__ in ("Tensor", "Parameter")


def digest(value: Any) -> bytes:
    """A 32-byte digest of `value`'s content: what a recorded call is looked up by."""
    h = hashlib.sha256()
    _feed(h, value)
    return h.digest()


def call_key(kind: str, name: str, args: tuple, kwargs: dict) -> str:
    """The record's key for one call on the reference: its kind (``call`` or ``probe``), name and arguments."""
    return hashlib.sha256(kind.encode() + b"\0" + name.encode() + b"\0" + digest((list(args), dict(kwargs)))).hexdigest()


# --------------------------------------------------------------------------- recording, replaying


class Recording:
    """The reference module, with every answer it gives recorded (``lmcourse publish student``).

    ``reference.f(...)`` on a function of the solution and ``probes.run_local(name, reference, ...)``
    are recorded; anything else a check takes from the reference (a class, a constant) cannot be
    replayed and is listed in `unreplayable` (the check that took it must be rewritten before the
    edition can hold it).
    """

    def __init__(self, module: types.ModuleType):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "answers", {})          # key -> the value returned
        object.__setattr__(self, "unreplayable", [])     # what a check took that no record can stand for
        object.__setattr__(self, "check", "")            # the check running now (set by the publisher)

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if isinstance(value, types.FunctionType):
            def recorded(*args, **kwargs):
                key = call_key("call", name, args, kwargs)
                args_before = copy.deepcopy((args, kwargs))
                result = value(*args, **kwargs)
                if digest(args_before) != digest((args, kwargs)):
                    self.unreplayable.append((self.check, f"{name}(...) changed its arguments"))
                self.answers[key] = copy.deepcopy(result)
                return result
            return recorded
        self.unreplayable.append((self.check, f"reference.{name} (a {type(value).__name__}, not a function)"))
        return value

    def _lmcourse_run_local(self, name: str, args: tuple, kwargs: dict, run: Callable[[Any], Any]):
        key = call_key("probe", name, args, kwargs)
        result = run(self._module)
        self.answers[key] = copy.deepcopy(result)
        return result


class Replay:
    """Stands in for the reference in the student edition: each call answered from the record."""

    def __init__(self, answers: dict[str, Any], assignment: str = ""):
        self._answers = answers
        self._assignment = assignment

    def _answer(self, key: str, what: str):
        if key not in self._answers:
            raise NotRecorded(f"{self._assignment}: this check asked the solution for {what}, which the student "
                              "edition did not record (a call that depends on your answers cannot be replayed); "
                              "this is the edition's fault, not your code's: tell your instructor")
        return copy.deepcopy(self._answers[key])

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def replayed(*args, **kwargs):
            return self._answer(call_key("call", name, args, kwargs), f"{name}(...)")
        return replayed

    def _lmcourse_run_local(self, name: str, args: tuple, kwargs: dict, run: Callable[[Any], Any]):
        return self._answer(call_key("probe", name, args, kwargs), f"the probe {name}")


def is_replay(reference) -> bool:
    """Whether the checks run in the student edition, against a record instead of the solution."""
    return isinstance(reference, Replay)


def unwrapped(reference):
    """The solution module behind a `Recording` (else `reference` itself): for a check's trusted side that the
    edition computes another way (see `lmcourse.grading.seq2seq.trusted_model`), so it is not recorded."""
    return object.__getattribute__(reference, "_module") if isinstance(reference, Recording) else reference


# --------------------------------------------------------------------------- the record on disk

# What a record may name: containers, numbers and numpy arrays (a tensor is written as a `_Tensor`: torch's own
# pickle of a tensor goes through torch.load, which could run anything).
SAFE_GLOBALS = {("builtins", n) for n in ("list", "tuple", "dict", "set", "frozenset", "bytearray", "complex",
                                          "int", "float", "str", "bool")} | \
    {("collections", n) for n in ("OrderedDict", "Counter", "defaultdict")} | \
    {(m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("_reconstruct", "scalar")} | \
    {("numpy", "dtype"), ("numpy", "ndarray"), (__name__, "_Tensor")}


@dataclasses.dataclass
class _Tensor:
    """A tensor in a record: its values as a numpy array (bfloat16 and float16 as their int16 bits)."""
    array: Any
    dtype: str
    requires_grad: bool

    @classmethod
    def of(cls, tensor) -> "_Tensor":
        import torch

        data = tensor.detach().to("cpu").contiguous()
        if data.dtype in (torch.bfloat16, torch.float16):
            data = data.view(torch.int16)
        return cls(data.numpy().copy(), str(tensor.dtype).removeprefix("torch."), bool(tensor.requires_grad))

    def tensor(self):
        import torch

        t = torch.from_numpy(self.array.copy())
        if self.dtype in ("bfloat16", "float16"):
            t = t.view(getattr(torch, self.dtype))
        return t.requires_grad_(self.requires_grad)


def _convert(value, to_record: bool, depth: int = 0):
    """Tensors to `_Tensor`s (`to_record`) or back, through the builtin containers; other values unchanged."""
    if depth > 200:
        raise TypeError("a value nested more than 200 levels deep")
    if to_record and _is_tensor(value):
        return _Tensor.of(value)
    if not to_record and type(value) is _Tensor:
        return value.tensor()
    t = type(value)
    if t in (list, tuple, set, frozenset):
        return t(_convert(v, to_record, depth + 1) for v in value)
    if isinstance(value, dict):
        out = copy.copy(value)  # keeps the mapping's type (Counter, defaultdict and its factory, OrderedDict)
        for k, v in value.items():
            out[k] = _convert(v, to_record, depth + 1)
        return out
    return value


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"the record names {module}.{name}, which a record may not hold")
        return super().find_class(module, name)


def dumps(answers: dict[str, Any]) -> bytes:
    """The record as gzip'd pickle bytes; `pickle.UnpicklingError` when an answer holds a type a record may not."""
    data = pickle.dumps({"format": FORMAT, "answers": _convert(answers, True)}, protocol=4)
    _Unpickler(io.BytesIO(data)).load()  # what loads() would refuse is refused now, with the same message
    return gzip.compress(data, mtime=0)


def loads(data: bytes) -> dict[str, Any]:
    """The answers of a record written by `dumps`; refuses a record that names any other type."""
    record = _Unpickler(io.BytesIO(gzip.decompress(data))).load()
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError("not a record of this version of lmcourse")
    return _convert(record["answers"], False)
