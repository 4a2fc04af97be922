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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# A match below this similarity is not worth naming: most of what failed is not what the mistake makes fail.
CLOSEST = 0.5


@dataclass(frozen=True)
class Signature:
    mistake: str
    failing: Mapping[str, str]          # check name -> how it failed (its kind)
    ran: tuple[str, ...]                # every check the mistake's grade ran: what the signature speaks for
    hint: str = ""
    function: str = ""                  # the function or class the mistake is in

    def to_json(self) -> dict:
        return {"mistake": self.mistake, "function": self.function, "hint": self.hint,
                "failing": dict(self.failing), "ran": list(self.ran)}

    @classmethod
    def from_json(cls, data: Mapping) -> "Signature":
        return cls(str(data["mistake"]), {str(k): str(v) for k, v in dict(data["failing"]).items()},
                   tuple(str(n) for n in data["ran"]), str(data.get("hint", "")), str(data.get("function", "")))


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


def signature(mistake: str, tests: Iterable[Mapping], *, hint: str = "", function: str = "") -> Signature:
    """The signature of a mistake from its grade's ``tests``."""
    failing, ran = outcome(tests)
    return Signature(mistake, failing, tuple(sorted(ran)), hint, function)


@dataclass(frozen=True)
class Match:
    signature: Signature
    similarity: float    # 1.0: the same checks failed, the same way, among those both ran
    exact: bool
    compared: int        # how many checks both ran
    coverage: float      # the share of the mistake's failing checks that the submission ran
    shared_failures: tuple[str, ...] = field(default=())

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
    return Match(sig, value, value == 1.0, len(both), len(theirs) / len(sig.failing), tuple(sorted(shared)))


def matches(tests: Iterable[Mapping], signatures: Iterable[Signature], *, least: float = CLOSEST) -> list[Match]:
    """The known mistakes a graded submission looks like, best first: exact matches, then by similarity,
    then those of whose failures the submission ran more (a mistake that also fails a training run the
    submission's grade left out is less certain than one whose every failure was seen), then the mistake
    whose signature says the most. A submission that failed nothing matches nothing."""
    failing, ran = outcome(tests)
    if not failing:
        return []
    found = [m for sig in signatures if (m := similarity(failing, ran, sig)) is not None and m.similarity >= least]
    return sorted(found, key=lambda m: (-m.exact, -m.similarity, -m.coverage, -len(m.signature.failing),
                                         m.mistake))


def best(found: list[Match]) -> list[Match]:
    """The matches tied for first (mistakes with one signature cannot be told apart by their grades)."""
    if not found:
        return []
    top = found[0]
    return [m for m in found if (m.exact, m.similarity, m.coverage, dict(m.signature.failing)) ==
            (top.exact, top.similarity, top.coverage, dict(top.signature.failing))]
