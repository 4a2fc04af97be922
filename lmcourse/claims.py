"""Claims the prose makes about the build's own numbers, checked on the numbers each build computes.

A chapter's cells compute their numbers when the book is built: on another machine, with another thread count
or another library version, a loss or an accuracy moves, and a timing moves a lot. The sentences around them do
not move. So every sentence that states such a number, or a comparison between two of them ("at least thirty
times higher", "high in every format", "fails past the training length"), is backed by a `claim` in a hidden
cell (tag `remove-cell`) placed right after the code that computes the numbers:

    claim("tf-no-positions-year", "without positions, the year's digits are mostly wrong",
          holds=year_accuracy < 0.5, year_accuracy=year_accuracy)

The claim's verdict goes into the executed notebook as a cell output of its own kind, which the page does not
show. `collect` reads the verdicts back from the build's executed notebooks; `lmcourse book` prints any that do
not hold, and tests/test_book.py fails on them, naming the sentence and the numbers. A claim must be a
condition the prose really states, with the margin the prose really gives: a claim that only restates what a
cell prints (or that no build could contradict) backs nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

MIME = "application/vnd.lmcourse.claim+json"


@dataclass(frozen=True)
class Claim:
    key: str  # unique within the chapter, e.g. "tf-no-positions-year"
    prose: str  # what the chapter's text says, in a few words
    holds: bool
    numbers: dict  # the values the condition was evaluated on, as the build computed them
    chapter: str = ""  # the executed notebook's name, filled in by collect


def _plain(value):
    """A number the JSON output can carry (numpy scalars and 0-d tensors included), rounded for reading."""
    if hasattr(value, "tolist"):  # numpy scalars and arrays, torch tensors
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or isinstance(value, (int, str)) or value is None:
        return value
    value = float(value)
    return value if not math.isfinite(value) else float(f"{value:.6g}")


def claim(key: str, prose: str, holds, **numbers) -> None:
    """Record whether the sentence `prose` holds on this build's `numbers`.

    `holds` is the condition, already evaluated (a bool, or a numpy bool). The numbers are stored beside the
    verdict so that a failure says what the build computed, not only that the sentence is wrong.
    """
    if not key or not prose:
        raise ValueError("a claim needs a key and the sentence it backs")
    verdict = bool(holds)
    record = {"key": key, "prose": prose, "holds": verdict, "numbers": {k: _plain(v) for k, v in numbers.items()}}
    try:
        from IPython.display import display
    except ImportError:  # run as a plain script: nothing to store the verdict in
        return
    text = f"claim {key}: {'holds' if verdict else 'CONTRADICTED'}: {prose} {record['numbers']}"
    display({MIME: record, "text/plain": text}, raw=True)


def from_notebook(path: Path) -> list[Claim]:
    """Every claim recorded in one executed notebook, in cell order."""
    notebook = json.loads(Path(path).read_text())
    found = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            record = output.get("data", {}).get(MIME)
            if record is not None:
                if isinstance(record, str):  # some writers store JSON outputs as text
                    record = json.loads(record)
                found.append(Claim(record["key"], record["prose"], bool(record["holds"]), record["numbers"],
                                   Path(path).stem))
    return found


def collect(executed: Path) -> list[Claim]:
    """The claims of every executed notebook under `executed` (the build's jupyter_execute folder)."""
    claims = []
    for path in sorted(Path(executed).rglob("*.ipynb")):
        claims += from_notebook(path)
    return claims


def report(claims: list[Claim]) -> str:
    """One line per contradicted claim (empty when every claim holds)."""
    return "\n".join(f"{c.chapter}: {c.key}: the prose says {c.prose!r}, but this build computed {c.numbers}"
                     for c in claims if not c.holds)
