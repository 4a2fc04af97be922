"""``lmcourse leaderboard ID GRADES_DIR``: the cohort's grader-verified training results, ranked, on one HTML page.

Courses with leaderboards usually rank what students report, then re-run the top entries by hand. Here every
number is one the grader measured itself: the graded training run re-trains the student's code under a fixed
budget and seed, in the sandbox, and the validation loss comes from the *reference* model loaded with the
trained weights, on data relabelled by a secret, after the causality and finiteness checks
(`lmcourse.grading.training`). The check records that loss in its result (``measured``, in
``students/<student>/results.json`` of a ``lmcourse grade --out GRADES_DIR`` folder), and this module reads it
from there: nothing a student submits can put a number on the board except through that run.

- One table per tier (``cpu``, ``gpu``): the two tiers train different models, so their losses are not
  comparable.
- Lower is better. Ties share a rank (1, 2, 2, 4).
- Only losses measured under the current contract (``measured["protocol"]`` equal to
  `lmcourse.grading.training.PROTOCOL`: the trained weights left the worker before any evaluation input
  entered it) are ranked; a result graded by an older grader is counted as stale and named on the page,
  to be graded again (``lmcourse grade --force``).
- A run whose loss is above the check's threshold is still ranked (its loss was verified), marked as not
  passing; a submission whose run never produced a verified loss (the contract failed, the code crashed) is
  not on the board; a ``grader-error`` is not a grade and never appears.
- Who is shown is the instructor's choice (``--show``): the ids as they are in GRADES_DIR (``student``), or
  stable pseudonyms (``pseudonym``, the default): a keyed hash of the id, with the key kept in
  ``GRADES_DIR/leaderboard.key`` (made once, random), so a pseudonym stays the same from one rendering to
  the next and cannot be reversed by someone who does not hold the key. ``--names FILE`` (a CSV of
  ``student,shown``, e.g. nicknames students chose) overrides either for the students it lists.

The page is self-contained (no script, no remote asset) and every name on it is escaped: student ids are
folder names students chose.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import html
import math
import secrets
from dataclasses import dataclass
from pathlib import Path

from lmcourse.files import atomic_write
from lmcourse.grading.result import Result
from lmcourse.grading.training import PROTOCOL

METRIC = "validation_loss"
KEY_FILE = "leaderboard.key"
SHOW = ("pseudonym", "student")


@dataclass(frozen=True)
class Entry:
    """One student's verified run: who, on which tier, the value, and whether the check passed."""

    student: str
    tier: str
    value: float
    passed: bool
    check: str
    threshold: float | None = None  # the check's threshold, when it recorded one (``measured["threshold"]``)


def collect(grades: Path, assignment_id: str, metric: str = METRIC) -> tuple[list[Entry], dict[str, int]]:
    """(entries, counts) from ``grades/students/*/results.json``: one entry per student whose result for
    `assignment_id` holds a check that measured `metric` (the first such check). counts: how many results
    were read, ranked, left off (graded, no verified value), grader errors, unreadable."""
    counts = {"results": 0, "ranked": 0, "no_value": 0, "stale": 0, "grader_error": 0, "unreadable": 0}
    entries = []
    folder = Path(grades) / "students"
    for path in sorted(folder.glob("*/results.json")) if folder.is_dir() else []:
        result = Result.read(path)  # None for a damaged file: counted, never fatal for the board
        if result is None:
            counts["unreadable"] += 1
            continue
        if result.assignment != assignment_id:
            continue
        counts["results"] += 1
        if not result.status.graded:
            counts["grader_error"] += 1
            continue
        found = next(((t, t.measured[metric]) for t in result.tests
                      if t.measured and isinstance(t.measured.get(metric), (int, float))
                      and math.isfinite(t.measured[metric])), None)
        if found is None:
            counts["no_value"] += 1
            continue
        check, value = found
        if check.measured.get("protocol") != PROTOCOL:  # measured when the model could still see the data first
            counts["stale"] += 1
            continue
        threshold = check.measured.get("threshold")
        threshold = float(threshold) if isinstance(threshold, (int, float)) and math.isfinite(threshold) else None
        entries.append(Entry(student=path.parent.name, tier=result.tier or "cpu", value=float(value),
                             passed=check.passed, check=check.name, threshold=threshold))
        counts["ranked"] += 1
    return entries, counts


def _verdict(e: Entry) -> str:
    if e.threshold is None:
        return "passed" if e.passed else "above it"
    return f"passed (at most {e.threshold:.2f})" if e.passed else f"above {e.threshold:.2f}"


def ranked(entries: list[Entry]) -> dict[str, list[tuple[int, Entry]]]:
    """{tier: [(rank, entry)]}, each tier by value, lowest first; equal values share a rank (1, 2, 2, 4)."""
    out: dict[str, list[tuple[int, Entry]]] = {}
    for tier in sorted({e.tier for e in entries}):
        rows = sorted((e for e in entries if e.tier == tier), key=lambda e: (e.value, e.student))
        ranks, previous = [], None
        for i, e in enumerate(rows):
            rank = ranks[-1][0] if previous is not None and e.value == previous else i + 1
            ranks.append((rank, e))
            previous = e.value
        out[tier] = ranks
    return out


def _key(grades: Path) -> bytes:
    path = Path(grades) / KEY_FILE
    if not path.exists():
        atomic_write(path, secrets.token_hex(32) + "\n")
        path.chmod(0o600)  # the key is what keeps pseudonyms unlinkable: the instructor's alone
    return path.read_text().strip().encode()


def pseudonym(student: str, key: bytes) -> str:
    """A stable name for `student` that reveals nothing without `key`: ``anon-`` and 8 hex digits of an HMAC."""
    return "anon-" + hmac.new(key, student.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:8]


def read_names(path: Path) -> dict[str, str]:
    """``student,shown`` rows of a CSV (a header row ``student,shown`` is allowed) -> {student: shown}."""
    names = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[0].strip() and row[0].strip().lower() != "student":
                names[row[0].strip()] = row[1].strip()
    return names


def render(assignment_id: str, board: dict[str, list[tuple[int, Entry]]], shown: dict[str, str],
           counts: dict[str, int], metric: str = METRIC) -> str:
    """The page: one table per tier. Every text from a submission goes through html.escape."""
    esc = html.escape
    label = metric.replace("_", " ")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(assignment_id)}: leaderboard</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}"
        "table{border-collapse:collapse;width:100%;margin:1rem 0 2rem}th,td{padding:.35rem .6rem;"
        "border-bottom:1px solid #ddd;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}"
        "tr.fail td{color:#888}caption{text-align:left;font-weight:600;font-size:1.15rem;margin-bottom:.3rem}"
        "p.note{color:#555;font-size:.92rem}</style></head><body>",
        f"<h1>{esc(assignment_id)}: leaderboard</h1>",
        f'<p class="note">Every {esc(label)} here was measured by the grader: it re-trained the submitted code in '
        "its sandbox with a fixed budget and seed, loaded the trained weights into the reference model, checked "
        "that no prediction reads a later token, and computed the loss itself on held-out text relabelled by a "
        "secret. Lower is better; the tiers train different models and are ranked apart.</p>",
    ]
    if not board:
        parts.append('<p class="note">No verified result yet.</p>')
    for tier, rows in board.items():
        parts.append(f"<table><caption>{esc(tier.upper())} tier ({len(rows)} "
                     f"{'student' if len(rows) == 1 else 'students'})</caption>")
        parts.append(f"<thead><tr><th>rank</th><th>who</th><th>{esc(label)}</th><th>threshold</th></tr></thead><tbody>")
        for rank, e in rows:
            parts.append(f'<tr class="{"pass" if e.passed else "fail"}"><td class="num">{rank}</td>'
                         f"<td>{esc(shown.get(e.student, e.student))}</td><td class=\"num\">{e.value:.4f}</td>"
                         f"<td>{_verdict(e)}</td></tr>")
        parts.append("</tbody></table>")
    left = counts.get("no_value", 0)
    if left:
        parts.append(f'<p class="note">{left} graded submission{"s" if left != 1 else ""} without a verified result '
                     "(the training run failed its checks or did not finish) are not ranked.</p>")
    stale = counts.get("stale", 0)
    if stale:
        parts.append(f'<p class="note">{stale} result{"s" if stale != 1 else ""} graded by an older version of the '
                     "grader, which read the trained weights after showing the model the evaluation data, "
                     f"{'are' if stale != 1 else 'is'} not ranked: grade {'them' if stale != 1 else 'it'} again "
                     "(lmcourse grade --force).</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def build(grades: Path, assignment_id: str, *, show: str = "pseudonym", names: Path | None = None,
          out: Path | None = None, metric: str = METRIC) -> tuple[Path, dict[str, int]]:
    """Collect, rank and write the page (default ``GRADES_DIR/leaderboard.html``); returns (path, counts)."""
    if show not in SHOW:
        raise ValueError(f"show must be one of {SHOW}, not {show!r}")
    entries, counts = collect(grades, assignment_id, metric)
    if show == "student":
        shown = {e.student: e.student for e in entries}
    else:
        key = _key(grades)
        shown = {e.student: pseudonym(e.student, key) for e in entries}
    if names is not None:
        shown.update({s: n for s, n in read_names(names).items() if s in shown})
    page = render(assignment_id, ranked(entries), shown, counts, metric)
    path = Path(out) if out is not None else Path(grades) / "leaderboard.html"
    atomic_write(path, page)
    return path, counts
