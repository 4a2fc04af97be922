"""The wire format between grader and worker: exact round trips, strict refusals."""

from __future__ import annotations

import collections
import io
import json
import math
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lmcourse.grading.sandbox.inside import wire
from lmcourse.grading.sandbox.inside.wire import RefusedValue, WireError, decode_frame, encode_frame, to_plain


def roundtrip(value):
    msg_id, tag, out = decode_frame(encode_frame("id1", "ok", value))
    assert (msg_id, tag) == ("id1", "ok")
    return out


def same(a, b) -> bool:
    """Exact equality including types (bool vs int, tuple vs list, float bits, array dtype)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(same(k1, k2) and same(a[k1], b[k2]) for k1, k2 in zip(a, b))
    if type(a) is np.ndarray:
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    return a == b


CASES = [
    None, True, False, 0, -1, 2 ** 80, 1.5, -0.0, float("nan"), float("inf"), float("-inf"), 1e-310,
    "", "héllo \u2603 \udc80", [], (), {}, [1, (2, 3), {"a": [4.0]}], ((1,),),
    {"x": 1, "y": {"z": (1, 2)}}, {("the", "cat"): 3, ("a",): 1}, {1: "one", 2.5: "x", None: 0, False: "f"},
    np.arange(12, dtype=np.int64).reshape(3, 4), np.zeros((0, 3), np.float32), np.array(3.5),
    np.array([True, False]), np.array([1 + 2j], np.complex64), np.asfortranarray(np.ones((2, 3))),
    np.array([[1, 2], [3, 4]], dtype=">i4"), np.float16([1.5, 2]),
]


@pytest.mark.parametrize("value", CASES, ids=lambda v: type(v).__name__)
def test_roundtrip_exact(value):
    assert same(roundtrip(value), value)


def test_decoded_arrays_are_owned_plain_ndarrays():
    out = roundtrip({"a": np.arange(5)})["a"]
    assert type(out) is np.ndarray and out.flags.writeable and out.flags.owndata
    out[0] = 7


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4),
    max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_roundtrip_property(value):
    assert same(roundtrip(value), value)


# ------------------------------------------------------------------ conversion on the sending side

def test_conversions():
    assert same(to_plain(np.float32(1.5)), 1.5)
    assert same(to_plain(np.int64(3)), 3)
    assert same(to_plain(np.bool_(True)), True)
    assert same(to_plain(collections.Counter({"a": 2})), {"a": 2})
    assert same(to_plain(collections.OrderedDict(b=1)), {"b": 1})
    assert same(to_plain(collections.defaultdict(int, {("x",): 1})), {("x",): 1})
    assert same(to_plain({np.int64(1): 2}), {1: 2})
    # rng.choice over a list of words returns NumPy strings: an honest answer, sent as str
    word = np.random.default_rng(0).choice(["thee", "thou"])
    assert type(word) is np.str_ and same(to_plain(word), str(word))
    assert same(to_plain([np.str_("a"), {"k": np.str_("b")}]), ["a", {"k": "b"}])


def test_torch_tensors_become_arrays():
    torch = pytest.importorskip("torch")
    out = roundtrip({"t": torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_(False),
                     "p": torch.nn.Parameter(torch.ones(2)), "b": torch.ones(2, dtype=torch.bfloat16),
                     "s": torch.Size([2, 3])})
    assert type(out["t"]) is np.ndarray and out["t"].dtype == np.float32 and out["t"].shape == (2, 3)
    assert type(out["p"]) is np.ndarray and out["b"].dtype == np.float32
    assert same(out["s"], (2, 3))

    class MyTensor(torch.Tensor):
        pass
    with pytest.raises(RefusedValue):
        to_plain(torch.ones(2).as_subclass(MyTensor))


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


class LyingFloat(float):
    def __eq__(self, other):
        return True


class LyingList(list):
    def __eq__(self, other):
        return True


class LyingDict(dict):
    def __eq__(self, other):
        return True


class LyingStr(str):
    def __eq__(self, other):
        return True


class LyingInt(int):
    def __eq__(self, other):
        return True


class LyingArray(np.ndarray):
    def __eq__(self, other):
        return True


def _gen():
    yield 1


@pytest.mark.parametrize("bad", [
    AlwaysEqual(), LyingFloat(0.0), LyingList([1]), LyingDict(a=1), LyingStr("x"), LyingInt(3),
    np.zeros(2).view(LyingArray), np.array([object()], dtype=object), np.array(["a", "b"]),
    np.zeros(2, dtype=[("a", "f4")]), _gen(), {1, 2}, b"bytes", len, [AlwaysEqual()],
    {"k": LyingFloat(1.0)}, {AlwaysEqual(): 1}, {frozenset(): 1}, range(3),
], ids=lambda v: type(v).__name__)
def test_refuses_non_plain(bad):
    with pytest.raises(RefusedValue):
        encode_frame("i", "ok", bad)


def test_refuses_self_referential():
    x = []
    x.append(x)
    with pytest.raises(RefusedValue):
        to_plain(x)


# ------------------------------------------------------------------ strict decoding of untrusted frames

def frame(body, arrays=()):
    body = body if isinstance(body, bytes) else json.dumps(body).encode()
    parts = [wire.HEADER.pack(wire.MAGIC, len(body), len(arrays)), body]
    for a in arrays:
        parts += [wire.ARRAY_LENGTH.pack(len(a)), a]
    return b"".join(parts)


def npy(arr, allow_pickle=False):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def test_pickled_object_array_is_refused():
    evil = np.array([{"x": 1}, None], dtype=object)
    with pytest.raises(WireError):
        decode_frame(frame(["i", "ok", {"$": "array", "v": 0}], [npy(evil, allow_pickle=True)]))


def test_raw_pickle_is_refused():
    with pytest.raises(WireError):
        decode_frame(pickle.dumps({"score": 100}))
    with pytest.raises(WireError):
        decode_frame(frame(["i", "ok", {"$": "array", "v": 0}], [pickle.dumps(np.zeros(3))]))


@pytest.mark.parametrize("arr_bytes", [
    npy(np.zeros(4))[:-8],                                       # truncated data
    npy(np.zeros(4)) + b"\0" * 8,                                # trailing data
    npy(np.array(["x"])),                                        # unicode dtype
    npy(np.zeros(2, dtype=[("a", "f4"), ("b", "i4")])),          # structured
    npy(np.zeros(1)).replace(b"(1,)", b"(1000000000000,)"),  # header promises far more than sent
])
def test_bad_arrays_are_refused(arr_bytes):
    with pytest.raises(WireError):
        decode_frame(frame(["i", "ok", {"$": "array", "v": 0}], [arr_bytes]))


@pytest.mark.parametrize("body", [
    b"not json", b"\xff\xfe", b'["i","ok",NaN]', b'["i","ok"]', b'{"i":1}', b'[1,"ok",null]',
    b'["i","ok",{"$":"pickle","v":"gASV"}]', b'["i","ok",{"$":"dict","v":[["a",1],["a",2]]}]',
    b'["i","ok",{"$":"dict","v":[[["l"],1]]}]', b'["i","ok",{"v":1,"$":"tuple"}]',
    b'["i","ok",{"$":"array","v":0}]', b'["i","ok",{"$":"float","v":"1.0"}]',
    b'["i","ok",{"$":"tuple","v":[1],"x":2}]', b'["' + b"x" * 100 + b'","ok",null]',
    b'["i","ok",' + b"[" * 100_000 + b"]" * 100_000 + b"]",
    b'["i","ok",' + b"1" * 10_000 + b"]",
])
def test_malformed_bodies_are_refused(body):
    with pytest.raises(WireError):
        decode_frame(frame(body))


def test_unreferenced_or_reused_arrays_are_refused():
    a = npy(np.zeros(2))
    with pytest.raises(WireError):
        decode_frame(frame(["i", "ok", None], [a]))
    with pytest.raises(WireError):
        decode_frame(frame(["i", "ok", [{"$": "array", "v": 0}, {"$": "array", "v": 0}]], [a]))


def test_huge_announcements_fail_before_reading():
    caps = wire.Caps(max_json_bytes=1 << 20, max_array_bytes=1 << 20)
    reader = wire.FrameReader(None, caps=caps)
    reader.buffer.extend(wire.HEADER.pack(wire.MAGIC, 1 << 30, 0))
    with pytest.raises(WireError):
        reader.try_parse()
    reader = wire.FrameReader(None, caps=caps)
    reader.buffer.extend(wire.HEADER.pack(wire.MAGIC, 2, 1) + b"[]" + struct.pack(">Q", 10 << 30))
    with pytest.raises(WireError):
        reader.try_parse()
    reader = wire.FrameReader(None, caps=caps)
    reader.buffer.extend(b"GARBAGE!")
    with pytest.raises(WireError):
        reader.try_parse()


def test_too_many_nodes_refused():
    caps = wire.Caps(max_nodes=1000)
    with pytest.raises(WireError):
        decode_frame(frame(["i", "ok", list(range(2000))]), caps=caps)
    with pytest.raises(RefusedValue):
        encode_frame("i", "ok", list(range(2000)), caps=caps)


def test_partial_frames_wait_for_more_bytes():
    data = encode_frame("abc", "ok", {"x": np.arange(3)})
    reader = wire.FrameReader(None)
    for i in range(len(data) - 1):
        reader.buffer.append(data[i])
        assert reader.try_parse() is None
    reader.buffer.append(data[-1])
    body, arrays = reader.try_parse()
    assert same(wire.decode_body(body, arrays)[2], {"x": np.arange(3)})
