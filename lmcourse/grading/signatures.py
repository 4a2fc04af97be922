"""Which known mistake a graded submission looks like: signatures and matching.

A known mistake (``autograder/<id>/mistakes.py``, `lmcourse.instructor.mistakes`)
is graded like a submission once per course version; its *signature* is what
that grade said: which of the checks it ran failed, and how (the check's
``kind``: an assertion, an exception, a time-out ...). A submission *matches*
a mistake when it fails the same checks, in the same way, among the checks
both ran. An exact match is strong evidence (each mistake's signature is
proven by the course's tests to be its own, or shared only with mistakes it
cannot be told apart from); a partial one is the closest known explanation,
offered as such.

Only plain data lives here (names, kinds, hints): no mistake's code, so this
module and a catalogue of signatures can travel where students' feedback is
made.

A signature speaks for the hidden checks and for what a student sees: the
visible checks and the notebook's own test cells (named ``test cell 'gid'``).
`likely_causes` turns a match into the hints a student reads ("likely cause"),
strictly: only an exact match, and only when at most `MOST_HINTS` mistakes
share it. A match over the visible checks and test cells may be shown at once
(``lmcourse check``; Gradescope's top-level output); one that needs the hidden
checks waits for the grades to be released, like the hidden checks' own
messages. The student edition ships each mistake's signature cut to what it
sees (`restricted`), in ``autograder/<id>/hints.json``: never a hidden check's
name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# A match below this similarity is not worth naming: most of what failed is not what the mistake makes fail.
CLOSEST = 0.5
# More mistakes than this sharing one signature: the failures do not point at one cause, so no hint.
MOST_HINTS = 3
# Where a course's grader finds its signatures (the student edition's, cut to what students see;
# a Gradescope bundle's, whole); see `load_file`.
FILE = "hints.json"


@dataclass(frozen=True)
class Signature:
    mistake: str
    failing: Mapping[str, str]          # check name -> how it failed (its kind)
    ran: tuple[str, ...]                # every check the mistake's grade ran: what the signature speaks for
    hint: str = ""
    function: str = ""                  # the function or class the mistake is in
    visible: tuple[str, ...] = ()       # those of `ran` a student sees: visible checks, test cells

    def to_json(self) -> dict:
        return {"mistake": self.mistake, "function": self.function, "hint": self.hint,
                "failing": dict(self.failing), "ran": list(self.ran), "visible": list(self.visible)}

    @classmethod
    def from_json(cls, data: Mapping) -> "Signature":
        return cls(str(data["mistake"]), {str(k): str(v) for k, v in dict(data["failing"]).items()},
                   tuple(str(n) for n in data["ran"]), str(data.get("hint", "")), str(data.get("function", "")),
                   tuple(str(n) for n in data.get("visible", ())))


def outcome(tests: Iterable[Mapping]) -> tuple[dict[str, str], set[str]]:
    """(failing: check name -> kind, ran: every check's name) of a result's ``tests``.

    Reads `lmcourse.grading.result.Result`'s tests and Gradescope's exported ones (where ``kind`` sits in
    ``extra_data``)."""
    failing, ran = {}, set()
    for t in tests:
        name = str(t.get("name", ""))
        ran.add(name)
        if float(t.get("score") or 0) < float(t.get("max_score") or 0):
            kind = t.get("kind") or (t.get("extra_data") or {}).get("kind") or "failed"
            failing[name] = str(kind)
    return failing, ran


def cell_name(gid: str) -> str:
    """How a notebook test cell is named among the checks of a signature."""
    return f"test cell '{gid}'"


def _cell_kind(error: Mapping | None) -> str:
    kind = str((error or {}).get("type") or "failed")
    return "assertion" if kind == "AssertionError" else kind if kind[:1].islower() else "error"


def entries(result) -> list[dict]:
    """A graded result's checks and test cells as one list of tests (``name``, ``score``, ``max_score``,
    ``kind``, ``visibility``, ``function``): what a signature is made of and compared with. Reads a
    `Result` or its JSON; a test cell counts 1 point, passed or not."""
    get = result.get if isinstance(result, Mapping) else (lambda k, d=None: getattr(result, k, d))
    out = []
    for t in get("tests") or []:
        t = t if isinstance(t, Mapping) else t.to_json()
        out.append({"name": str(t.get("name", "")), "score": t.get("score") or 0, "max_score": t.get("max_score") or 0,
                    "kind": t.get("kind") or (t.get("extra_data") or {}).get("kind"),
                    "visibility": t.get("visibility") or "visible", "function": t.get("function")})
    for c in get("test_cells") or []:
        out.append({"name": cell_name(str(c.get("cell"))), "score": 1 if c.get("passed") else 0, "max_score": 1,
                    "kind": None if c.get("passed") else _cell_kind(c.get("error")), "visibility": "visible",
                    "function": None, "error_type": (c.get("error") or {}).get("type")})
    return out


def signature(mistake: str, tests: Iterable[Mapping], *, hint: str = "", function: str = "") -> Signature:
    """The signature of a mistake from its grade's ``tests`` (or `entries` of its grade, test cells and all)."""
    tests = list(tests)
    failing, ran = outcome(tests)
    visible = {str(t.get("name", "")) for t in tests if (t.get("visibility") or "visible") == "visible"}
    return Signature(mistake, failing, tuple(sorted(ran)), hint, function, tuple(sorted(visible & ran)))


def restricted(sig: Signature, names: Iterable[str]) -> Signature | None:
    """`sig` cut to the checks `names` (what a student sees: `Signature.visible`); None when none of its
    failures is among them (nothing there to recognise the mistake by)."""
    keep = set(names)
    failing = {n: k for n, k in sig.failing.items() if n in keep}
    if not failing:
        return None
    ran = tuple(n for n in sig.ran if n in keep)
    return Signature(sig.mistake, failing, ran, sig.hint, sig.function, ran)


@dataclass(frozen=True)
class Match:
    signature: Signature
    similarity: float    # 1.0: the same checks failed, the same way, among those both ran
    exact: bool
    compared: int        # how many checks both ran
    coverage: float      # the share of the mistake's failing checks that the submission ran
    shared_failures: tuple[str, ...] = field(default=())
    seen: tuple[tuple[str, str], ...] = field(default=())  # the mistake's failures among the checks both ran

    @property
    def mistake(self) -> str:
        return self.signature.mistake


def similarity(failing: Mapping[str, str], ran: set[str], sig: Signature) -> Match | None:
    """How alike a submission's failures and a mistake's are, over the checks both ran; None when nothing
    the mistake fails was run on the submission (nothing to compare)."""
    both = ran & set(sig.ran)
    theirs = {n: k for n, k in sig.failing.items() if n in both}
    if not theirs:
        return None
    ours = {n: k for n, k in failing.items() if n in both}
    shared = set(ours) & set(theirs)
    # a check failed both ways counts fully, failed in another way (an exception for an assertion) half
    agree = sum(1.0 if ours[n] == theirs[n] else 0.5 for n in shared)
    value = agree / len(set(ours) | set(theirs))
    # Coverage counts what the submission could have shown: the mistake's test cells only where the
    # submission's test cells ran (a graded submission runs none, `lmcourse check` all), so that a mistake a
    # test cell also catches is not ranked below one no test cell sees when no cell ran.
    cells = any(_is_cell(n) for n in ran)
    considered = [n for n in sig.failing if cells or not _is_cell(n)]
    return Match(sig, value, value == 1.0, len(both), len(theirs) / max(1, len(considered)), tuple(sorted(shared)),
                 tuple(sorted(theirs.items())))


def _is_cell(name: str) -> bool:
    return name.startswith("test cell ")


def matches(tests: Iterable[Mapping], signatures: Iterable[Signature], *, least: float = CLOSEST) -> list[Match]:
    """The known mistakes a graded submission looks like, best first: exact matches, then by similarity,
    then those of whose failures the submission ran more (a mistake that also fails a training run the
    submission's grade left out is less certain than one whose every failure was seen), then the mistake
    whose signature says the most. A submission that failed nothing matches nothing."""
    failing, ran = outcome(tests)
    if not failing:
        return []
    found = [m for sig in signatures if (m := similarity(failing, ran, sig)) is not None and m.similarity >= least]
    return sorted(found, key=lambda m: (-m.exact, -m.similarity, -m.coverage, -len(m.seen), m.mistake))


def best(found: list[Match]) -> list[Match]:
    """The matches tied for first: mistakes that fail alike over the checks the submission ran cannot be told
    apart by its grade."""
    if not found:
        return []
    top = found[0]
    return [m for m in found if (m.exact, m.similarity, m.coverage, m.seen) ==
            (top.exact, top.similarity, top.coverage, top.seen)]


# ------------------------------------------------------------------ hints for the student


def _to_judge(result) -> list[dict]:
    """`entries` of `result` less what says nothing about a mistake: the checks of functions not written
    yet (a stub is to-do, not a known mistake), test cells that stop at a stub or were not run, and the
    grader's own failures."""
    get = result.get if isinstance(result, Mapping) else (lambda k, d=None: getattr(result, k, d))
    readiness = get("readiness") or {}
    unwritten = {str(n) for _, n in list(readiness.get("missing", [])) + list(readiness.get("unimplemented", []))}
    keep = []
    for e in entries(result):
        if e["function"] in unwritten or e["kind"] in ("grader-error", "skipped", "structure", "missing"):
            continue
        if e.get("error_type") in ("NotImplementedError", "not-run"):
            continue
        keep.append(e)
    return keep


def _specific(found: list[Match]) -> list[Match]:
    """The top matches, when they are exact and few enough to point at a cause."""
    top = best(found)
    return top if top and top[0].exact and len(top) <= MOST_HINTS else []


def likely_causes(result, signatures: Iterable[Signature]) -> list[dict]:
    """The hints of the known mistakes `result` matches exactly: ``{"function", "hint", "checks",
    "visibility"}`` each, best first; ``checks`` are the failing checks the match rests on.

    Where the hidden checks ran, the match is over every check; its hints are "visible" (shown at once)
    only when the visible checks and test cells alone single out the same mistakes, else
    "after_published": showing them at once would tell what the hidden checks found."""
    signatures = list(signatures)
    judged = _to_judge(result)
    seen = [e for e in judged if e["visibility"] == "visible"]
    shown = [r for s in signatures if (r := restricted(s, s.visible)) is not None]
    seen_top = _specific(matches(seen, shown)) if seen else []
    if len(seen) < len(judged):  # the hidden checks ran
        top = _specific(matches(judged, signatures))
        visibility = "visible" if {m.mistake for m in top} == {m.mistake for m in seen_top} else "after_published"
    else:
        top, visibility = seen_top, "visible"
    out: list[dict] = []
    for m in top:
        if m.signature.hint and all(h["hint"] != m.signature.hint for h in out):
            out.append({"function": m.signature.function, "hint": m.signature.hint,
                        "checks": list(m.shared_failures), "visibility": visibility})
    return out


def hinted(sig: Signature, signatures: Iterable[Signature], *, where: str = "check") -> bool:
    """Whether a submission that fails exactly as `sig`'s mistake gets its hint: in ``lmcourse check``
    (``where="check"``: the visible checks and test cells) or in graded feedback (``"graded"``: every
    check, no test cell)."""
    def cut(s: Signature) -> Signature | None:
        if where == "check":
            return restricted(s, s.visible)
        return restricted(s, [n for n in s.ran if not n.startswith("test cell ")])

    own = cut(sig)
    if own is None:
        return False
    tests = [{"name": n, "score": 0 if n in own.failing else 1, "max_score": 1, "kind": own.failing.get(n)}
             for n in own.ran]
    top = _specific(matches(tests, [c for s in signatures if (c := cut(s)) is not None]))
    return sig.mistake in [m.mistake for m in top]


def attach(result, signatures: Iterable[Signature] | None) -> None:
    """Set ``result.hints`` (`likely_causes`) on a graded `Result`; nothing for a grader error, a
    submission that could not be run, or when there are no signatures."""
    if not signatures or not getattr(result, "graded", False):
        return
    hints = likely_causes(result, signatures)
    result.hints = hints or None


def dumps(signatures: Iterable[Signature], *, assignment: str) -> str:
    """The text of a ``hints.json`` (`load_file` reads it)."""
    return json.dumps({"assignment": assignment, "signatures": [s.to_json() for s in signatures]}, indent=1)


def load_file(path: Path) -> list[Signature]:
    """The signatures stored at `path` (`dumps`); [] when there is no such file. A file that cannot be
    read is the grader's problem, never the student's: ValueError."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [Signature.from_json(s) for s in data["signatures"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a file of known-mistake signatures: {err}") from None
