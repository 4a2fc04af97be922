"""Wire format between the trusted grader and the sandboxed worker.

Both sides use this module: the grader imports it from
`lmcourse.grading.sandbox.inside`, and the worker from the copy of that
package in its boot folder. Standard library and NumPy only.

Plain data
----------
The only values that cross the boundary are *plain data*:

    None, bool, int, float, str, list, tuple, dict (keys: str, int, float,
    bool, None or tuples of those), numpy.ndarray with a bool, integer,
    unsigned, float or complex dtype.

`to_plain` turns a Python value into plain data on the sending side: NumPy
scalars become Python scalars, torch tensors become arrays,
``collections.Counter`` / ``OrderedDict`` / ``defaultdict`` become dicts,
``torch.Size`` becomes a tuple.  Anything else (user classes, objects with a
custom ``__eq__``, subclasses of int/float/str/list/dict/ndarray, generators,
object or string arrays, sets, bytes) raises `RefusedValue`.

The *receiving* side never trusts that: `decode` rebuilds every value from
JSON text and ``.npy`` bytes into exact built-in types (``type(x) is float``,
never a subclass), with caps on size, depth and node count.  Nothing is ever
unpickled: arrays are read with ``numpy.load(..., allow_pickle=False)`` after
their header has been checked against the bytes that were actually sent.

Frames
------
One message is one frame on a pipe::

    b"LMCW" | u32 json_length | u32 n_arrays | json | (u64 length | .npy bytes) * n_arrays

The JSON is a 3-element array ``[id, tag, payload]``: ``id`` a short string
(request id), ``tag`` a short string (operation or reply status), ``payload``
a value in the tagged encoding below.  Arrays travel as raw ``.npy`` bytes
after the JSON instead of base64 inside it, so a large array costs no JSON
parsing and the JSON part can be capped tightly.

Tagged encoding (every JSON object is a tag, so there is no ambiguity)::

    null / true / false / number / string / [list items]
    {"$": "tuple", "v": [items]}
    {"$": "dict", "v": [[key, value], ...]}
    {"$": "float", "v": "nan" | "inf" | "-inf"}
    {"$": "array", "v": index}          # index into the frame's arrays
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import sys
from dataclasses import dataclass

import numpy as np

MAGIC = b"LMCW"
HEADER = struct.Struct(">4sII")
ARRAY_LENGTH = struct.Struct(">Q")
ALLOWED_ARRAY_KINDS = "biufc"   # bool, int, uint, float, complex
_MAX_ID_CHARS = 64
_MAX_TAG_CHARS = 32


class WireError(ValueError):
    """A frame or value that does not follow the format (malformed, too big, too deep)."""


class RefusedValue(TypeError):
    """A value that is not plain data. `where` says where in the value it was found."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where


@dataclass(frozen=True)
class Caps:
    max_json_bytes: int = 32 << 20
    max_arrays: int = 100_000
    max_array_bytes: int = 512 << 20     # all arrays of one frame together
    max_depth: int = 64
    max_nodes: int = 4_000_000
    max_ndim: int = 32

    @property
    def max_frame_bytes(self) -> int:
        return (HEADER.size + self.max_json_bytes
                + self.max_arrays * ARRAY_LENGTH.size + self.max_array_bytes)


DEFAULT_CAPS = Caps()


# --------------------------------------------------------------------------- #
# Sending side: arbitrary Python value -> plain data
# --------------------------------------------------------------------------- #

def _type_name(x: object) -> str:
    t = type(x)
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", "?")
    if not isinstance(name, str):
        name = "?"
    return name if mod in ("builtins", "") else f"{mod}.{name}"


def _torch():
    return sys.modules.get("torch")


def _check_array(a: np.ndarray, where: str) -> np.ndarray:
    dt = a.dtype
    if dt.hasobject or dt.fields is not None or dt.subdtype is not None or dt.kind not in ALLOWED_ARRAY_KINDS:
        raise RefusedValue(
            f"a NumPy array of dtype {dt} (only bool, integer, float and complex arrays are accepted)", where)
    if a.ndim > DEFAULT_CAPS.max_ndim:
        raise RefusedValue(f"an array with {a.ndim} dimensions", where)
    return a


def _tensor_to_array(t, where: str) -> np.ndarray:
    torch = _torch()
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.dtype in (torch.bfloat16,) or str(t.dtype).startswith("torch.float8"):
        t = t.float()
    try:
        a = t.numpy()
    except Exception as exc:  # quantized, meta, ...
        raise RefusedValue(f"a torch tensor of dtype {t.dtype} that cannot become a NumPy array ({exc})", where)
    return _check_array(np.array(a, copy=True), where)


_COLLECTION_DICTS = ("Counter", "OrderedDict", "defaultdict")


def to_plain(value, where: str = "the value", *, max_depth: int = DEFAULT_CAPS.max_depth,
             max_nodes: int = DEFAULT_CAPS.max_nodes):
    """Convert `value` to plain data (see the module docstring) or raise `RefusedValue`."""
    budget = [max_nodes]

    def conv(x, where, depth, key=False):
        budget[0] -= 1
        if budget[0] < 0:
            raise RefusedValue(f"a value with more than {max_nodes} items in total", where)
        if depth > max_depth:
            raise RefusedValue(f"a value nested more than {max_depth} levels deep", where)
        t = type(x)
        if x is None or t is bool or t is int or t is float or t is str:
            return x
        if t is tuple:
            return tuple(conv(v, f"{where}[{i}]", depth + 1, key) for i, v in enumerate(x))
        if key:
            if isinstance(x, np.generic) and t.__module__ == "numpy":
                return conv(x.item(), where, depth, key)
            raise RefusedValue(f"a dict key of type {_type_name(x)}", where)
        if t is list:
            return [conv(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(x)]
        if t is dict or (isinstance(x, dict) and t.__module__ == "collections"
                         and t.__name__ in _COLLECTION_DICTS):
            out = {}
            for k, v in dict.items(x):
                pk = conv(k, f"{where} (a key)", depth + 1, key=True)
                out[pk] = conv(v, f"{where}[{k!r}]" if type(k) in (str, int) else f"{where}[...]", depth + 1)
            return out
        if t is np.ndarray:
            return _check_array(x, where)
        if isinstance(x, np.generic) and t.__module__ == "numpy":
            if isinstance(x, np.bool_):
                return bool(x)
            if isinstance(x, np.integer):
                return int(x)
            if isinstance(x, np.floating):
                return float(x)
            if isinstance(x, np.complexfloating):
                return np.array(x)
            if isinstance(x, np.str_):  # rng.choice(list_of_words) gives these
                return str(x)
            raise RefusedValue(f"a NumPy scalar of type {_type_name(x)}", where)
        torch = _torch()
        if torch is not None:
            if t is torch.Tensor or t is torch.nn.Parameter:
                return _tensor_to_array(x, where)
            if t is torch.Size:
                return tuple(int(v) for v in tuple.__iter__(x))
        if isinstance(x, (int, float, str, list, dict, tuple, np.ndarray)):
            raise RefusedValue(
                f"an object of type {_type_name(x)}, a subclass of a built-in type; return a plain "
                f"{type(x).__mro__[1].__name__ if len(type(x).__mro__) > 1 else 'value'} instead", where)
        raise RefusedValue(f"an object of type {_type_name(x)}", where)

    return conv(value, where, 0)


# --------------------------------------------------------------------------- #
# Plain data <-> tagged JSON + arrays
# --------------------------------------------------------------------------- #

def _tag(x, arrays: list):
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        if math.isfinite(x):
            return x
        return {"$": "float", "v": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
    if t is list:
        return [_tag(v, arrays) for v in x]
    if t is tuple:
        return {"$": "tuple", "v": [_tag(v, arrays) for v in x]}
    if t is dict:
        return {"$": "dict", "v": [[_tag(k, arrays), _tag(v, arrays)] for k, v in x.items()]}
    if t is np.ndarray:
        buf = io.BytesIO()
        np.save(buf, _check_array(x, "array"), allow_pickle=False)
        arrays.append(buf.getvalue())
        return {"$": "array", "v": len(arrays) - 1}
    raise RefusedValue(f"an object of type {_type_name(x)}")


def encode_frame(msg_id: str, tag: str, payload, *, caps: Caps = DEFAULT_CAPS) -> bytes:
    """One frame carrying `payload` (converted with `to_plain` first)."""
    arrays: list[bytes] = []
    body = json.dumps([msg_id, tag, _tag(to_plain(payload, max_depth=caps.max_depth,
                                                   max_nodes=caps.max_nodes), arrays)],
                      ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
    total = sum(len(a) for a in arrays)
    if len(body) > caps.max_json_bytes or len(arrays) > caps.max_arrays or total > caps.max_array_bytes:
        raise WireError(f"message too large ({len(body)} bytes of JSON, {len(arrays)} arrays, {total} array bytes)")
    parts = [HEADER.pack(MAGIC, len(body), len(arrays)), body]
    for a in arrays:
        parts.append(ARRAY_LENGTH.pack(len(a)))
        parts.append(a)
    return b"".join(parts)


def _load_array(data: bytes, caps: Caps) -> np.ndarray:
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=10000)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=10000)
        else:
            raise WireError(f"unsupported .npy version {version}")
    except WireError:
        raise
    except Exception as exc:
        raise WireError(f"bad .npy header: {exc}") from None
    if (type(dtype) is not np.dtype and not isinstance(dtype, np.dtype)) or dtype.hasobject \
            or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in ALLOWED_ARRAY_KINDS:
        raise WireError(f"refused array dtype {dtype}")
    if type(shape) is not tuple or len(shape) > caps.max_ndim or \
            not all(type(d) is int and d >= 0 for d in shape):
        raise WireError(f"bad array shape {shape!r}")
    count = math.prod(shape)
    if count * dtype.itemsize != len(data) - f.tell():
        raise WireError("array data does not match its header")
    f.seek(0)
    try:
        arr = np.load(f, allow_pickle=False)
    except Exception as exc:
        raise WireError(f"bad .npy data: {exc}") from None
    if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != shape:
        raise WireError("array does not match its header")
    return np.array(arr, copy=True)   # owned, writable, C order


def _reject_constant(name):
    raise WireError(f"non-standard JSON constant {name}")


class _Obj(tuple):
    """Marker for a JSON object while decoding (pairs, in order)."""


def _untag(x, arrays: list, caps: Caps, budget: list, depth: int, used: set, key: bool = False):
    budget[0] -= 1
    if budget[0] < 0:
        raise WireError("too many values")
    if depth > caps.max_depth:
        raise WireError("value nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return int(x)
    if t is float:
        return float(x)
    if t is list:
        if key:
            raise WireError("a list cannot be a dict key")
        return [_untag(v, arrays, caps, budget, depth + 1, used) for v in x]
    if t is _Obj:
        keys = [k for k, _ in x]
        if keys != ["$", "v"] or type(x[0][1]) is not str:
            raise WireError("malformed tagged object")
        tag, v = x[0][1], x[1][1]
        if tag == "tuple" and type(v) is list:
            return tuple(_untag(i, arrays, caps, budget, depth + 1, used, key) for i in v)
        if key:
            raise WireError(f"a {tag} cannot be a dict key")
        if tag == "float" and type(v) is str and v in ("nan", "inf", "-inf"):
            return float(v)
        if tag == "dict" and type(v) is list:
            out = {}
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("malformed dict item")
                k = _untag(pair[0], arrays, caps, budget, depth + 1, used, key=True)
                if k in out:
                    raise WireError("duplicate dict key")
                out[k] = _untag(pair[1], arrays, caps, budget, depth + 1, used)
            return out
        if tag == "array" and type(v) is int:
            if not 0 <= v < len(arrays) or v in used:
                raise WireError("bad array reference")
            used.add(v)
            return _load_array(arrays[v], caps)
        raise WireError(f"unknown tag {tag!r}")
    raise WireError(f"unexpected JSON value of type {t.__name__}")


def decode_body(body: bytes, arrays: list, *, caps: Caps = DEFAULT_CAPS):
    """Decode one frame's JSON part and arrays into ``(id, tag, payload)`` of exact built-in types."""
    if len(body) > caps.max_json_bytes:
        raise WireError("JSON part too large")
    try:
        text = body.decode("utf-8", errors="strict")
        top = json.loads(text, object_pairs_hook=_Obj, parse_constant=_reject_constant)
    except WireError:
        raise
    except (ValueError, RecursionError, MemoryError) as exc:
        raise WireError(f"malformed JSON: {type(exc).__name__}") from None
    if type(top) is not list or len(top) != 3 or type(top[0]) is not str or type(top[1]) is not str \
            or len(top[0]) > _MAX_ID_CHARS or len(top[1]) > _MAX_TAG_CHARS:
        raise WireError("malformed envelope")
    used: set = set()
    try:
        payload = _untag(top[2], arrays, caps, [caps.max_nodes], 0, used)
    except RecursionError:
        raise WireError("value nested too deeply") from None
    if len(used) != len(arrays):
        raise WireError("unreferenced arrays in frame")
    return str(top[0]), str(top[1]), payload


def decode_frame(frame: bytes, *, caps: Caps = DEFAULT_CAPS):
    """Decode a complete frame held in memory (tests, small messages)."""
    reader = FrameReader(None, caps=caps)
    reader.buffer.extend(frame)
    got = reader.try_parse()
    if got is None or reader.buffer:
        raise WireError("incomplete frame or trailing bytes")
    return decode_body(*got, caps=caps)


# --------------------------------------------------------------------------- #
# Pipes
# --------------------------------------------------------------------------- #

class FrameReader:
    """Incremental frame parser over a file descriptor (or a buffer in tests).

    `try_parse` returns ``(json_bytes, [array_bytes])`` once a whole frame is
    buffered, None if more bytes are needed, and raises `WireError` as soon
    as the header announces something over the caps (before reading it).
    """

    def __init__(self, fd: int | None, *, caps: Caps = DEFAULT_CAPS) -> None:
        self.fd = fd
        self.caps = caps
        self.buffer = bytearray()

    def try_parse(self):
        buf = self.buffer
        if len(buf) < HEADER.size:
            if buf and not MAGIC.startswith(bytes(buf[:4])):
                raise WireError("bad frame magic")
            return None
        magic, json_len, n_arrays = HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise WireError("bad frame magic")
        if json_len > self.caps.max_json_bytes or n_arrays > self.caps.max_arrays:
            raise WireError("frame over the size caps")
        pos = HEADER.size + json_len
        if len(buf) < pos:
            return None
        body = bytes(buf[HEADER.size:pos])
        arrays = []
        total = 0
        for _ in range(n_arrays):
            if len(buf) < pos + ARRAY_LENGTH.size:
                return None
            (n,) = ARRAY_LENGTH.unpack_from(buf, pos)
            total += n
            if total > self.caps.max_array_bytes:
                raise WireError("frame over the size caps")
            pos += ARRAY_LENGTH.size
            if len(buf) < pos + n:
                return None
            arrays.append(bytes(buf[pos:pos + n]))
            pos += n
        del buf[:pos]
        return body, arrays

    def read_blocking(self):
        """Block until one frame is read (worker side). Raises EOFError at end of stream."""
        while True:
            got = self.try_parse()
            if got is not None:
                return got
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError("channel closed")
            self.buffer.extend(chunk)


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to a blocking fd."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
