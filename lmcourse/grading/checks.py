"""What a hidden check is made of: the ``check`` decorator and ``expect_*`` helpers.

A check is a pytest function in ``autograder/<id>/`` decorated with
:func:`check`, which records its points, the test cell whose points it earns,
a name a student understands, and its visibility. The grader shows a failing
check's *message* and nothing else (no source, no pytest introspection), so
the helpers below build messages that say what was expected (type, shape,
property, tolerance) and what was found, naming values only for the inputs the
check chose, never the solution's code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
ATTR = "__lmcourse_check__"


@dataclass(frozen=True)
class CheckInfo:
    points: float
    cell: str
    name: str
    visibility: str = "hidden"

    @property
    def gradescope_visibility(self) -> str:
        """Gradescope's word: a hidden check shows its name and score, its message once published."""
        return "after_published" if self.visibility == "hidden" else self.visibility


def check(*, points: float, cell: str, name: str, visibility: str = "hidden") -> Callable:
    """Mark a pytest function as a graded check.

    ``points`` are earned when it passes; all checks naming ``cell`` (a test
    cell's ``grade_id``) add up to that cell's points. ``visibility`` is
    ``"visible"`` (message shown at once, and run by ``lmcourse check``) or
    ``"hidden"`` (name and score shown; the message once grades are released).
    """
    if not (isinstance(points, (int, float)) and points >= 0):
        raise ValueError(f"check points must be a number >= 0, got {points!r}")
    if visibility not in VISIBILITIES:
        raise ValueError(f"check visibility must be one of {VISIBILITIES}, got {visibility!r}")
    if not name or not cell:
        raise ValueError("a check needs a `name` a student understands and the `cell` it earns points for")
    info = CheckInfo(float(points), cell, name, visibility)

    def mark(fn: Callable) -> Callable:
        setattr(fn, ATTR, info)
        return fn

    return mark


def info_of(fn: Callable) -> CheckInfo | None:
    return getattr(fn, ATTR, None)


# ----------------------------------------------------------------------------- helpers


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, np.ndarray):
        text = f"array of shape {value.shape}, dtype {value.dtype}"
        if value.size <= 8:
            text = np.array2string(value, precision=6, threshold=8)
        return text[:limit]
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float, np.number)):
        return "a number"
    return f"a {type(value).__name__}"


def _as_array(found: Any, what: str) -> np.ndarray:
    """Numbers, nested lists and arrays become a float array; anything else fails clearly."""
    if isinstance(found, (str, bytes, dict)) or found is None:
        raise AssertionError(f"{what}: expected numbers (an array, list or number), found {_kind(found)}")
    try:
        arr = np.asarray(found)
    except Exception:
        raise AssertionError(f"{what}: expected numbers (an array, list or number), found {_kind(found)}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise AssertionError(f"{what}: expected numbers, found {_kind(found)} of {arr.dtype}")
    return arr


def expect_shape(found: Any, shape: tuple, *, what: str = "result") -> np.ndarray:
    """Fail unless ``found`` is numeric with ``shape`` (``None`` in ``shape`` matches any size)."""
    arr = _as_array(found, what)
    ok = arr.ndim == len(shape) and all(s is None or s == f for s, f in zip(shape, arr.shape))
    if not ok:
        want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise AssertionError(f"{what}: expected shape {want}, found shape {arr.shape}")
    return arr


def expect_close(found: Any, expected: Any, *, what: str = "result", rtol: float = 1e-5, atol: float = 1e-8) -> None:
    """Fail unless ``found`` has ``expected``'s shape and matches it within tolerance.

    The message gives the shape, how many entries differ, the largest
    difference, and the first differing entry: enough to debug, not the code.
    """
    exp = np.asarray(expected, dtype=np.float64)
    arr = expect_shape(found, exp.shape, what=what).astype(np.float64)
    mismatch = np.isfinite(arr) != np.isfinite(exp)
    if mismatch.any():
        bad = int(mismatch.sum())
        idx = tuple(int(i) for i in np.argwhere(mismatch)[0]) if mismatch.ndim else ()
        raise AssertionError(
            f"{what}: {bad} of {exp.size} entries are NaN or infinite where a finite value was expected "
            f"(or the reverse); first at index {idx}: expected {exp[idx]:.6g}, found {arr[idx]:.6g}. "
            "Watch for overflow (exp of large numbers), log(0) or 0/0")
    close = np.isclose(arr, exp, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return
    diff = np.where(close, 0.0, np.abs(np.nan_to_num(arr) - np.nan_to_num(exp)))
    n_bad = int((~close).sum())
    if exp.ndim == 0:
        raise AssertionError(f"{what}: expected {float(exp):.6g} (within rtol={rtol:g}, atol={atol:g}), "
                             f"found {float(arr):.6g}")
    idx = tuple(int(i) for i in np.argwhere(~close)[0])
    raise AssertionError(
        f"{what}: {n_bad} of {exp.size} entries differ from the expected values "
        f"(largest difference {diff.max():.3g}, tolerance rtol={rtol:g}, atol={atol:g}); "
        f"first at index {idx}: expected {exp[idx]:.6g}, found {arr[idx]:.6g}"
    )


def expect_equal(found: Any, expected: Any, *, what: str = "result") -> None:
    """Fail unless ``found`` equals ``expected`` exactly (dicts, lists, strings, numbers, arrays).

    ``found`` is plain data from the worker, so ``==`` here is the real thing,
    not an object the student controls.
    """
    problem = _difference(found, expected, what)
    if problem:
        raise AssertionError(problem)


def _difference(found: Any, expected: Any, where: str) -> str | None:
    if isinstance(expected, np.ndarray) or isinstance(found, np.ndarray):
        exp = np.asarray(expected)
        if not isinstance(found, (np.ndarray, list, tuple, int, float, bool)):
            return f"{where}: expected {_kind(exp)}, found {_kind(found)}"
        arr = np.asarray(found)
        if arr.shape != exp.shape:
            return f"{where}: expected shape {exp.shape}, found shape {arr.shape}"
        if arr.dtype.kind in "OUS" or exp.dtype.kind in "OUS":
            same = arr.astype(str) == exp.astype(str) if arr.dtype.kind == exp.dtype.kind else np.zeros(arr.shape, bool)
        else:
            same = arr == exp
        if np.all(same):
            return None
        idx = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0]) if arr.ndim else ()
        return (f"{where}: {int((~np.asarray(same)).sum())} of {exp.size} entries differ; first at index {idx}: "
                f"expected {_short(exp[idx])}, found {_short(arr[idx])}")
    if isinstance(expected, dict):
        if not isinstance(found, dict):
            return f"{where}: expected a dict, found {_kind(found)}"
        missing = [k for k in expected if k not in found]
        extra = [k for k in found if k not in expected]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"{len(missing)} key(s) missing, e.g. {_short(missing[0], 40)}")
            if extra:
                parts.append(f"{len(extra)} unexpected key(s), e.g. {_short(extra[0], 40)}")
            return f"{where}: expected {len(expected)} keys, found {len(found)}; " + "; ".join(parts)
        for k in expected:
            sub = _difference(found[k], expected[k], f"{where}[{_short(k, 40)}]")
            if sub:
                return sub
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(found, (list, tuple)):
            return f"{where}: expected a list of length {len(expected)}, found {_kind(found)}"
        if len(found) != len(expected):
            return f"{where}: expected length {len(expected)}, found length {len(found)}"
        for i, (f, e) in enumerate(zip(found, expected)):
            sub = _difference(f, e, f"{where}[{i}]")
            if sub:
                return sub
        return None
    if isinstance(expected, bool) or expected is None or isinstance(expected, (str, bytes)):
        return None if type(found) is type(expected) and found == expected else \
            f"{where}: expected {_short(expected)}, found {_short(found)}"
    if isinstance(expected, (int, float, np.number)):
        if isinstance(found, bool) or not isinstance(found, (int, float, np.number)):
            return f"{where}: expected a number, found {_kind(found)}"
        if isinstance(expected, float) and math.isnan(expected) and isinstance(found, float) and math.isnan(found):
            return None
        return None if found == expected else f"{where}: expected {_short(expected)}, found {_short(found)}"
    return None if found == expected else f"{where}: expected {_short(expected)}, found {_short(found)}"
