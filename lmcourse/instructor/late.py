"""Late work: a due date and a policy per assignment, applied after grading to the recorded score.

The term's dates and policies live in ``term.toml`` at the course's root (or the file ``lmcourse grade --term``
names)::

    timezone = "America/New_York"        # due times written without an offset are in this zone
    grace_minutes = 10                   # a submission this close after the due time is on time

    [late]                               # every assignment's policy, unless its own entry says otherwise
    policy = "late-days"                 # "late-days", "penalty" or "cutoff"
    late_days = 4                        # late-days: days each student may spend over the whole term
    per_day = 0.10                       # penalty (and late-days, past the student's days): share of the
                                         #   maximum score lost per day or part of a day late
    max_days = 5                         # penalty: later than this many days scores 0

    [due]
    "01-ngrams" = "2027-01-25 23:59"
    "02-word2vec" = { due = "2027-02-08 23:59", policy = "cutoff" }

When a submission was made: nbgrader's ``timestamp.txt`` beside the notebook (written by its exchange at
submission), else the notebook file's modification time (which a copy can change: prefer the exchange). Days
late are counted in whole days begun after the due time and the grace.

What each policy does, for a submission ``d`` days late:
- ``cutoff``: 0 points.
- ``penalty``: ``per_day * d`` of the maximum score is taken off (never below 0); past ``max_days``, 0.
- ``late-days``: the student spends up to ``d`` of their remaining term days, in the assignments' due order;
  the days they no longer have cost ``per_day`` each, as under ``penalty``.

The grader's raw score stays in results.json; grades.csv shows it beside the late adjustment and the score, and
the student's feedback says what was applied and why. Every run computes the adjustment again from the raw score,
so a re-run never applies it twice. Late days are spent across the term in due order: the ledger
``late-days.json`` (beside ``term.toml``) holds, per assignment and student, the days late that each grading run
measured, and is rewritten (not added to) for the assignment being graded.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lmcourse.errors import CommandError
from lmcourse.files import atomic_write

TERM_FILE = "term.toml"
LEDGER_FILE = "late-days.json"
POLICIES = ("late-days", "penalty", "cutoff")


@dataclass(frozen=True)
class Policy:
    policy: str = "penalty"
    late_days: int = 0
    per_day: float = 0.0
    max_days: int | None = None


@dataclass(frozen=True)
class Term:
    path: Path
    due: dict[str, dt.datetime]  # assignment -> due time (aware)
    policies: dict[str, Policy]
    grace: dt.timedelta
    default: Policy = Policy()  # [late]: the policy of an assignment the term gives no entry of its own

    @property
    def ledger_path(self) -> Path:
        return self.path.parent / LEDGER_FILE


@dataclass(frozen=True)
class Adjustment:
    """What lateness did to one student's score on one assignment."""

    submitted: dt.datetime | None
    source: str  # where the time came from: "nbgrader timestamp.txt", "file modification time"
    days_late: int
    late_days_used: int  # of the term's allowance, on this assignment
    penalty: float  # points taken off
    raw_score: float
    score: float
    note: str  # one sentence for grades.csv and the feedback

    def as_dict(self) -> dict:
        return {"submitted": self.submitted.isoformat() if self.submitted else "", "source": self.source,
                "days_late": self.days_late, "late_days_used": self.late_days_used, "penalty": self.penalty,
                "raw_score": self.raw_score, "score": self.score, "note": self.note}


def _problem(path: Path, what: str) -> CommandError:
    return CommandError(f"{path}: {what} (see `lmcourse.instructor.late` for the format)")


def _policy(path: Path, table: dict, base: Policy | None = None) -> Policy:
    base = base or Policy()
    name = table.get("policy", base.policy)
    if name not in POLICIES:
        raise _problem(path, f"policy {name!r}: one of {', '.join(POLICIES)}")
    per_day = float(table.get("per_day", base.per_day))
    late_days = int(table.get("late_days", base.late_days))
    max_days = table.get("max_days", base.max_days)
    if not 0 <= per_day <= 1 or late_days < 0 or (max_days is not None and int(max_days) < 0):
        raise _problem(path, "per_day is a share between 0 and 1; late_days and max_days are whole days >= 0")
    return Policy(name, late_days, per_day, None if max_days is None else int(max_days))


def _when(path: Path, text: str, zone: dt.tzinfo) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise _problem(path, f"due time {text!r}: write it as 2027-01-25 23:59 (or with an offset, +01:00)") from None
    return when if when.tzinfo else when.replace(tzinfo=zone)


def load_term(root: Path, path: Path | None = None) -> Term | None:
    """The term's file (`path`, or term.toml at the course root); None when there is none."""
    path = Path(path) if path else Path(root) / TERM_FILE
    if not path.exists():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise _problem(path, f"cannot be read ({err})") from err
    try:
        zone = ZoneInfo(data.get("timezone", "UTC"))
    except (ZoneInfoNotFoundError, ValueError):
        raise _problem(path, f"timezone {data.get('timezone')!r} is not an IANA zone such as Europe/London") from None
    default = _policy(path, data.get("late", {}))
    due, policies = {}, {}
    for assignment, entry in data.get("due", {}).items():
        table = entry if isinstance(entry, dict) else {"due": entry}
        if "due" not in table:
            raise _problem(path, f"[due] {assignment}: no due time")
        due[assignment] = _when(path, table["due"], zone)
        policies[assignment] = _policy(path, table, default)
    return Term(path, due, policies, dt.timedelta(minutes=float(data.get("grace_minutes", 0))), default)


def submission_time(notebook: Path) -> tuple[dt.datetime | None, str]:
    """When the notebook was handed in, and where that came from.

    nbgrader's timestamp.txt counts only in nbgrader's layout (``<student>/<id>/<id>.ipynb``, the file beside the
    notebook): in a flat folder of ``<student>.ipynb`` a timestamp.txt beside them is no one's.
    """
    notebook = Path(notebook)
    stamp = notebook.parent / "timestamp.txt"
    if notebook.parent.name == notebook.stem and stamp.is_file() and not stamp.is_symlink():
        try:
            from nbgrader.utils import parse_utc

            return parse_utc(stamp.read_text(encoding="utf-8").strip()).replace(tzinfo=dt.timezone.utc), \
                "nbgrader timestamp.txt"
        except (ValueError, OverflowError, UnicodeDecodeError, OSError):
            pass  # unreadable: fall back to the file's time, and say so
    try:
        return dt.datetime.fromtimestamp(os.lstat(notebook).st_mtime, dt.timezone.utc), "file modification time"
    except OSError:
        return None, "unknown"


def days_late(submitted: dt.datetime | None, due: dt.datetime, grace: dt.timedelta) -> int:
    """Whole days begun after the due time and the grace (0: on time)."""
    if submitted is None:
        return 0
    over = (submitted - due - grace).total_seconds()
    return max(0, math.ceil(over / 86400)) if over > 0 else 0


def cost(policy: Policy, days: int, raw: float, top: float, spent: int = 0, used_before: int = 0) -> tuple[float, str]:
    """(points taken off, the sentence saying why) for a submission `days` late, `spent` of them covered by late
    days (`used_before` already spent on earlier assignments). The one place a policy's arithmetic lives."""
    charged = days - spent
    if days == 0:
        return 0.0, "on time"
    if policy.policy == "cutoff":
        return raw, f"{days} day(s) late, after the cut-off: 0 points"
    if charged == 0:
        return 0.0, f"{days} day(s) late, covered by your late days ({used_before + spent} of {policy.late_days} used)"
    if policy.policy == "penalty" and policy.max_days is not None and days > policy.max_days:
        return raw, f"{days} day(s) late, more than the {policy.max_days} accepted: 0 points"
    penalty = min(raw, policy.per_day * charged * top)
    covered = f"{spent} covered by late days, " if spent else ""
    return penalty, (f"{days} day(s) late ({covered}{charged} at {policy.per_day:.0%} of the maximum each): "
                     f"-{penalty:g} points")


def _ledger(term: Term) -> dict[str, dict[str, int]]:
    try:
        return json.loads(term.ledger_path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise CommandError(f"{term.ledger_path}: the late-days ledger cannot be read ({err}); restore it from a "
                           f"backup, or delete it and grade the term's assignments again in order") from err


def adjust(term: Term, assignment: str, graded: dict[str, tuple[float, float, Path]]) -> dict[str, Adjustment]:
    """The adjustment of every graded student: ``graded`` maps student -> (raw score, max score, notebook).

    Updates the ledger of days late for this assignment (written again from scratch: a re-run replaces it).
    """
    if assignment not in term.due:
        return {}
    policy, due = term.policies[assignment], term.due[assignment]
    times = {s: submission_time(nb) for s, (_, _, nb) in graded.items()}
    late = {s: days_late(t, due, term.grace) for s, (t, _) in times.items()}
    import fcntl

    with open(term.ledger_path.with_name(f".{LEDGER_FILE}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two assignments graded at once each rewrite only their own entry
        ledger = _ledger(term)
        ledger[assignment] = {s: d for s, d in sorted(late.items())}
        atomic_write(term.ledger_path, json.dumps(ledger, indent=1, sort_keys=True) + "\n")
    # the assignments before this one, in due order, spend the late days first
    earlier = sorted((a for a in ledger if a in term.due and a != assignment and term.due[a] < due),
                     key=lambda a: term.due[a])
    out = {}
    for student, (raw, top, _) in graded.items():
        d = late[student]
        used_before = 0
        for a in earlier:
            if term.policies[a].policy == "late-days":
                used_before += min(ledger[a].get(student, 0), max(0, policy.late_days - used_before))
        spent = min(d, max(0, policy.late_days - used_before)) if policy.policy == "late-days" else 0
        penalty, note = cost(policy, d, raw, top, spent, used_before)
        submitted, source = times[student]
        out[student] = Adjustment(submitted, source, d, spent, round(penalty, 6), raw, round(raw - penalty, 6), note)
    return out


def finish(root: Path, assignment: str, notebooks: dict[str, Path], rows: list,
           term_path: Path | None = None, log=print) -> dict[str, Adjustment]:
    """After a batch: the late adjustment of every graded row (the batch writes it into grades.csv and the feedback).

    rows: (student, Result) as the batch collected them; notebooks: student -> the submission's path.
    """
    term = load_term(root, term_path)
    if term is None or assignment not in term.due:
        if term_path is not None and term is None:
            raise CommandError(f"--term {term_path}: no such file")
        return {}
    graded = {s: (r.score, r.max_score, notebooks[s]) for s, r in rows if r.graded and s in notebooks}
    adjustments = adjust(term, assignment, graded)
    late = [a for a in adjustments.values() if a.days_late]
    log(f"late work ({term.path.name}, due {term.due[assignment]:%Y-%m-%d %H:%M %Z}, "
        f"{term.policies[assignment].policy}): {len(late)} of {len(adjustments)} late, "
        f"{sum(a.penalty > 0 for a in late)} lost points")
    return adjustments


# ----------------------------------------------------------------------------- on Gradescope


def gradescope(course: Path, assignment: str, results: Path, metadata: Path) -> str:
    """Apply the term's policy to a Gradescope results.json, from Gradescope's submission_metadata.json.

    The due time is term.toml's for this assignment, else the one Gradescope holds (a student's own extension
    first). Late days cannot be counted across a term here (each submission is graded alone): under
    ``late-days`` the days late are recorded (output and ``extra_data``) and the score is left as graded.
    Returns the note written (empty when nothing applied).
    """
    term = load_term(course)
    if term is None:
        return ""
    data = json.loads(Path(results).read_text())
    extra = data.setdefault("extra_data", {})
    if extra.get("status") == "grader-error":
        return ""
    try:
        meta = json.loads(Path(metadata).read_text())
        submitted = dt.datetime.fromisoformat(meta["created_at"])
        own = [u.get("assignment", {}).get("due_date") for u in meta.get("users", [])]
        gradescope_due = next((d for d in own if d), None) or meta.get("assignment", {}).get("due_date")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        submitted, gradescope_due = None, None
    due = term.due.get(assignment) or (dt.datetime.fromisoformat(gradescope_due) if gradescope_due else None)
    if due is None:
        return ""
    policy = term.policies.get(assignment, term.default)
    raw = float(extra.get("raw_score", data.get("score", 0.0)))  # a regrade starts again from the raw score
    top = float(extra.get("max_score", 0.0))
    d = days_late(submitted, due, term.grace)
    if submitted is None:
        note, penalty = "the submission's time is not in Gradescope's metadata: no late policy applied", 0.0
    elif policy.policy == "late-days" and d:  # no ledger of the term here: recorded, not charged
        note, penalty = f"{d} day(s) late: your instructor counts late days across the term", 0.0
    else:
        penalty, note = cost(policy, d, raw, top)
    data["score"] = round(raw - penalty, 6)
    extra["raw_score"] = raw
    extra["late"] = {"submitted": submitted.isoformat() if submitted else "", "source": "Gradescope metadata",
                     "days_late": d, "penalty": penalty, "note": note}
    output = str(data.get("output", "")).split("\n\nLate work: ")[0]
    data["output"] = f"{output}\n\nLate work: {note} (the checks gave {raw:g})."
    atomic_write(results, json.dumps(data, indent=1))
    return note


if __name__ == "__main__":  # run_autograder: python -m lmcourse.instructor.late COURSE ID RESULTS METADATA
    import sys

    try:
        print("late work:", gradescope(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])) or "none")
    except CommandError as err:
        print(f"late work: not applied: {err}")
        sys.exit(1)
