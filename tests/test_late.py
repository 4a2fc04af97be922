"""Late work: due dates and policies from term.toml, times from nbgrader's timestamp.txt or the file's mtime,
applied to the recorded score once, however often the grades are written again."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcourse.errors import CommandError
from lmcourse.instructor import late
from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"
UTC = dt.timezone.utc
DUE = dt.datetime(2027, 1, 25, 23, 59, tzinfo=UTC)  # Europe/London is UTC in January

TERM = """
timezone = "Europe/London"
grace_minutes = 10

[late]
policy = "penalty"
per_day = 0.10
max_days = 2
late_days = 3

[due]
"00-fixture" = "2027-01-25 23:59"
"a-early" = { due = "2027-01-11 23:59", policy = "late-days" }
"b-later" = { due = "2027-01-18 23:59+00:00", policy = "late-days", per_day = 0.25 }
"c-cutoff" = { due = "2027-01-25 23:59", policy = "cutoff" }
"""


def _nb(folder: Path, student: str, when: dt.datetime | None, stamp: bool = True) -> Path:
    """A submission in nbgrader's layout, handed in at `when` (timestamp.txt as nbgrader writes it, or mtime)."""
    path = folder / student / AID / f"{AID}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    if when is not None and stamp:
        (path.parent / "timestamp.txt").write_text(when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    if when is not None:
        os.utime(path, (when.timestamp(), when.timestamp()))
    return path


@pytest.fixture
def term(tmp_path):
    (tmp_path / "term.toml").write_text(TERM)
    return late.load_term(tmp_path)


def test_days_late_count_whole_days_begun_after_the_grace(term):
    assert term.due[AID] == DUE and term.grace == dt.timedelta(minutes=10)
    for minutes, days in [(-60, 0), (9, 0), (11, 1), (24 * 60 + 9, 1), (24 * 60 + 11, 2), (72 * 60, 3)]:
        assert late.days_late(DUE + dt.timedelta(minutes=minutes), DUE, term.grace) == days, minutes


def test_times_come_from_nbgrader_then_the_file(tmp_path):
    stamped = _nb(tmp_path, "ana", DUE + dt.timedelta(hours=5))
    os.utime(stamped, (0, 0))  # a copy's mtime: the exchange's timestamp wins
    when, source = late.submission_time(stamped)
    assert when == DUE + dt.timedelta(hours=5) and source == "nbgrader timestamp.txt"
    plain = _nb(tmp_path, "ben", DUE + dt.timedelta(days=1), stamp=False)
    assert late.submission_time(plain) == (DUE + dt.timedelta(days=1), "file modification time")
    flat = tmp_path / "flat" / "dee.ipynb"  # a flat folder: a timestamp.txt beside it belongs to no one
    flat.parent.mkdir()
    flat.write_text("{}")
    os.utime(flat, (DUE.timestamp(),) * 2)
    (flat.parent / "timestamp.txt").write_text((DUE + dt.timedelta(days=9)).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    assert late.submission_time(flat) == (DUE, "file modification time")
    broken = _nb(tmp_path, "cy", DUE - dt.timedelta(days=1))
    (broken.parent / "timestamp.txt").write_text("yesterday-ish")
    assert late.submission_time(broken)[1] == "file modification time"  # unreadable stamp: the file's time


def test_penalty_and_cutoff(term, tmp_path):
    graded = {s: (8.0, 10.0, _nb(tmp_path, s, DUE + dt.timedelta(hours=h)))
              for s, h in [("on", -1), ("grace", 0.1), ("one", 3), ("two", 30), ("three", 50)]}
    adj = late.adjust(term, AID, graded)
    assert {s: (a.days_late, a.penalty, a.score) for s, a in adj.items()} == {
        "on": (0, 0, 8), "grace": (0, 0, 8), "one": (1, 1, 7), "two": (2, 2, 6), "three": (3, 8, 0)}
    assert "more than the 2 accepted" in adj["three"].note and adj["one"].raw_score == 8
    cut = late.adjust(term, "c-cutoff", graded)
    assert {s: a.score for s, a in cut.items()} == {"on": 8, "grace": 8, "one": 0, "two": 0, "three": 0}


def test_late_days_are_spent_in_due_order_and_a_rerun_changes_nothing(term, tmp_path):
    early, later = dt.datetime(2027, 1, 11, 23, 59, tzinfo=UTC), dt.datetime(2027, 1, 18, 23, 59, tzinfo=UTC)
    # ana: 2 days late on a-early, 2 on b-later (3 days in the term: 1 left for b, 1 charged at 25%)
    first = {"ana": (10.0, 10.0, _nb(tmp_path / "a", "ana", early + dt.timedelta(hours=30))),
             "ben": (10.0, 10.0, _nb(tmp_path / "a", "ben", early))}
    second = {"ana": (9.0, 10.0, _nb(tmp_path / "b", "ana", later + dt.timedelta(hours=40))),
              "ben": (9.0, 10.0, _nb(tmp_path / "b", "ben", later + dt.timedelta(hours=40)))}
    a = late.adjust(term, "a-early", first)
    assert (a["ana"].days_late, a["ana"].late_days_used, a["ana"].score) == (2, 2, 10)
    for _ in range(2):  # graded again: the ledger's entry is replaced, never added to
        b = late.adjust(term, "b-later", second)
        assert (b["ana"].days_late, b["ana"].late_days_used, b["ana"].penalty, b["ana"].score) == (2, 1, 2.5, 6.5)
        assert (b["ben"].late_days_used, b["ben"].score) == (2, 9)  # ben's own 3 days: both covered
        assert json.loads(term.ledger_path.read_text()) == {"a-early": {"ana": 2, "ben": 0},
                                                             "b-later": {"ana": 2, "ben": 2}}
    # grading the earlier assignment again after the later one spends the same days
    assert late.adjust(term, "a-early", first)["ana"].late_days_used == 2
    assert late.adjust(term, "b-later", second)["ana"].score == 6.5


@pytest.mark.parametrize("text, fix", [
    ('[due]\n"x" = "tomorrow"', "write it as 2027-01-25 23:59"),
    ('[late]\npolicy = "lenient"', "one of late-days, penalty, cutoff"),
    ('timezone = "Mars/Olympus"', "IANA zone"),
    ('[late]\nper_day = 5', "share between 0 and 1"),
    ("[due\n", "cannot be read")])
def test_a_bad_term_file_says_what_to_write(tmp_path, text, fix):
    (tmp_path / "term.toml").write_text(text)
    with pytest.raises(CommandError, match=fix):
        late.load_term(tmp_path)


def test_grading_applies_the_policy_once_in_grades_feedback_and_the_gradebook(tmp_path):
    """The whole path, twice: `lmcourse grade --term` on the fixture course; the second run grades nothing again
    and writes the same adjusted scores."""
    subs = tmp_path / "subs"
    alice = submission_from_solution(FIXTURE, AID, subs / "alice" / AID)  # nbgrader layout, 1 day late
    (alice.parent / "timestamp.txt").write_text((DUE + dt.timedelta(hours=20)).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    bob = submission_from_solution(FIXTURE, AID, subs / "_b")  # flat layout, on time by its mtime
    bob = bob.rename(subs / "bob.ipynb")
    os.utime(bob, ((DUE - dt.timedelta(hours=1)).timestamp(),) * 2)
    released_notebook(FIXTURE, AID, subs / "cy" / AID)  # nothing written, 3 days late: 0 either way
    (subs / "cy" / AID / "timestamp.txt").write_text((DUE + dt.timedelta(days=3)).strftime("%Y-%m-%d %H:%M:%S UTC"))
    (tmp_path / "term.toml").write_text(TERM)
    out, db = tmp_path / "out", tmp_path / "gradebook.db"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for run in range(2):
        proc = subprocess.run([sys.executable, "-m", "lmcourse.cli", "grade", AID, str(subs), "--out", str(out),
                               "--course", str(FIXTURE), "--term", str(tmp_path / "term.toml"), "--gradebook",
                               str(db), "--no-preflight", "--hints", "off"], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "late work (term.toml" in proc.stdout and "2 of 3 late" in proc.stdout
        rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
        assert {s: (r["raw_score"], r["days_late"], r["late_penalty"], r["score"]) for s, r in rows.items()} == {
            "alice": ("6", "1", "0.6", "5.4"), "bob": ("6", "0", "0", "6"), "cy": ("0", "3", "0", "0")}, run
        assert json.loads((out / "students" / "alice" / "results.json").read_text())["score"] == 6  # raw, kept
        page = (out / "students" / "alice" / "feedback.html").read_text()
        assert "Score: 5.4 / 6" in page and "the checks gave 6" in page and "1 day(s) late" in page
    assert "graded 0, unchanged 3" in proc.stdout  # the second run re-applied the policy, and graded nothing
    from lmcourse.instructor.release import tools_on_path
    tools_on_path()
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        notebook = gb.find_submission_notebook(AID, AID, "alice")
        assert notebook.late_submission_penalty == pytest.approx(0.6)
        assert gb.find_submission(AID, "alice").timestamp == (DUE + dt.timedelta(hours=20)).replace(tzinfo=None)
