"""Root cause first: a check that fails because code it relies on fails says so.

A student whose `LayerNorm` uses the unbiased variance sees four checks fail:
LayerNorm's own, and EncoderBlock's, DecoderBlock's and Transformer's, each
comparing its outputs with PyTorch's and blaming the code it was written for.
Only the first is about the bug. Here every failing check (and, in ``lmcourse
check``, every failing test cell) whose code *uses* a function or class that
fails its own check, or is not written yet, is told so first:

    `EncoderBlock` uses `LayerNorm`, which fails its own check: fix `LayerNorm`
    first (this check may then pass).

"Uses" is read from the student's own code (`notebook.uses`, parsed in the
reader's bounded child): an EncoderBlock built on ``nn.LayerNorm`` does not
depend on the student's LayerNorm, and is not excused by it. Among several
failing dependencies only the deepest are named (Transformer uses EncoderBlock
and LayerNorm; EncoderBlock fails because of LayerNorm: fix LayerNorm). The
written functions that fail are also listed in that order for the summary
(``result.readiness["failing"]``): fix them from the first.

Nothing here changes a score; it only words what the checks found. It names
functions and classes of the student's notebook, never a hidden input.
"""

from __future__ import annotations

from .result import Result

# Failures that say nothing about the function's behaviour: the grader's, or a check that never ran.
_NOT_ABOUT_THE_CODE = {"grader-error", "skipped", "structure"}


def _reach(uses: dict[str, list[str]], name: str) -> set[str]:
    """Every name `name`'s definition relies on, directly or through other definitions (not itself)."""
    seen: set[str] = set()
    todo = list(uses.get(name, ()))
    while todo:
        n = todo.pop()
        if n not in seen and n != name:
            seen.add(n)
            todo += uses.get(n, ())
    return seen


def _deepest(uses: dict[str, list[str]], culprits: set[str]) -> list[str]:
    """The culprits not explained by another culprit they rely on (sorted)."""
    return sorted(c for c in culprits if not (_reach(uses, c) & (culprits - {c})))


def _names(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def cause_sentence(whose: list[str], roots: list[str], unwritten: set[str]) -> str:
    """'`EncoderBlock` uses `LayerNorm`, which fails its own check: fix `LayerNorm` first (...).'"""
    failing = [r for r in roots if r not in unwritten]
    missing = [r for r in roots if r in unwritten]
    said = []
    if failing:
        verb = "fails its own check" if len(failing) == 1 else "fail their own checks"
        said.append(f"{_names(failing)}, which {verb}")
    if missing:
        said.append(f"{_names(missing)}, {'not written yet' if len(missing) == 1 else 'not written yet either'}")
    return (f"{_names(whose)} {'uses' if len(whose) == 1 else 'use'} {'; and '.join(said)}: "
            f"fix {_names(roots)} first (this may then pass). What this check found:")


def dependency_order(uses: dict[str, list[str]], names: list[str]) -> list[str]:
    """`names` with each after the names it relies on; otherwise in the given order (the notebook's)."""
    left, out = list(names), []
    while left:
        ready = [n for n in left if not (_reach(uses, n) & (set(left) - {n}))] or left[:1]  # a cycle: as given
        out.append(ready[0])
        left.remove(ready[0])
    return out


def name_root_causes(result: Result, uses: dict[str, list[str]], tested_by: dict[str, str],
                     order: list[str]) -> None:
    """Prefix each failing check and test cell of `result` that a failing dependency explains; fill
    ``result.readiness["failing"]`` (written functions that fail, dependencies first).

    uses: `notebook.uses` of the student's module; tested_by: `notebook.tested_by` of the release;
    order: the answer names in the notebook's order.
    """
    readiness = result.readiness if isinstance(result.readiness, dict) else {}
    unwritten = {name for _, name in readiness.get("missing", []) + readiness.get("unimplemented", [])}
    fails: set[str] = set(unwritten)
    for t in result.tests:
        if not t.passed and t.function and t.kind not in _NOT_ABOUT_THE_CODE:
            fails.add(t.function)
    cell_names: dict[str, list[str]] = {}
    for name, gid in tested_by.items():
        cell_names.setdefault(gid, []).append(name)
    for c in result.test_cells or []:
        if not c.get("passed") and (c.get("error") or {}).get("type") != "not-run":
            fails.update(cell_names.get(c.get("cell"), []))

    def roots_of(whose: list[str]) -> list[str]:
        relied = set().union(*(_reach(uses, w) for w in whose)) - set(whose)
        return _deepest(uses, relied & fails)

    for t in result.tests:
        if t.passed or not t.function or t.function in unwritten or t.kind in _NOT_ABOUT_THE_CODE | {"import-error"}:
            continue
        roots = roots_of([t.function])
        if roots:
            t.output = f"{cause_sentence([t.function], roots, unwritten)} {t.output}"
    for c in result.test_cells or []:
        err = c.get("error")
        whose = sorted(cell_names.get(c.get("cell"), []))
        if c.get("passed") or not isinstance(err, dict) or err.get("type") in ("not-run", "NotImplementedError") \
                or not whose or set(whose) & unwritten:
            continue
        roots = roots_of(whose)
        if roots:
            err["cause"] = cause_sentence(whose, roots, unwritten).removesuffix(" What this check found:")
    rank = {n: k for k, n in enumerate(order)}
    written = sorted(fails - unwritten, key=lambda n: rank.get(n, len(rank)))
    if isinstance(result.readiness, dict):
        result.readiness["failing"] = dependency_order(uses, written)
