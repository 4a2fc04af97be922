"""Grades into the university's LMS: Canvas's gradebook import CSV, a generic CSV, or Canvas's API.

    lmcourse export canvas 04-attention graded/04 --roster canvas_gradebook.csv --out canvas_04.csv
    lmcourse export canvas 04-attention graded/04 --roster canvas_gradebook.csv --column "Attention (4711)" \\
        --url https://canvas.example.edu --course 1234 --assignment 4711      # token from $CANVAS_TOKEN
    lmcourse export csv 04-attention graded/04 --out grades_04.csv

GRADES is the ``--out`` folder of ``lmcourse grade`` (or of ``--collect`` after a Slurm run): its grades.csv.

Canvas's gradebook import (Canvas guides, "How do I import grades in the Gradebook?") takes the CSV its own
gradebook exports: the columns Student, ID, SIS User ID, SIS Login ID and Section identify each student, then one
column per assignment named ``Name (assignment id)``, and optionally a first row "Points Possible". So the roster
is that export, downloaded once from the course's gradebook: it gives every enrolled student's Canvas ids and the
assignment column's exact name. A student's lmcourse id (the name of their submission) is matched to the roster's
``--match`` column (the SIS login by default).

What a cell holds. A graded submission: its score. A submission the grader failed on (``grader-error``): nothing,
never 0: it was not graded, and an empty cell leaves Canvas's grade as it is. A student on the roster who handed in
nothing: nothing either (the instructor decides what a missing submission is worth). A submission whose id matches
no one on the roster is not exported and is listed, so that no grade is lost silently.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from lmcourse.errors import CommandError

CANVAS_ID_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
ASSIGNMENT_COLUMN = re.compile(r"^(?P<name>.*\S)\s+\((?P<id>\d+)\)$")
MATCH = {"sis-login": "SIS Login ID", "sis-user": "SIS User ID", "id": "ID", "name": "Student"}
POINTS_POSSIBLE = "Points Possible"


@dataclass(frozen=True)
class Grade:
    student: str
    score: float | None  # None: not a grade (the grader failed)
    max_score: float | None
    status: str


def read_grades(grades_dir: Path) -> list[Grade]:
    """grades.csv of a graded folder (`lmcourse grade --out`)."""
    path = Path(grades_dir) / "grades.csv"
    if not path.is_file():
        raise CommandError(f"{path}: no grades.csv (expected the --out folder of `lmcourse grade`, after it finished)")
    grades = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            missing = {"student_id", "score", "max_score", "status"} - set(row)
            if missing:
                raise CommandError(f"{path}: not a grades.csv of lmcourse (no column {sorted(missing)})")
            score = float(row["score"]) if row["score"] and row["status"] != "grader-error" else None
            top = float(row["max_score"]) if row["max_score"] else None
            grades.append(Grade(row["student_id"], score, top, row["status"]))
    return grades


@dataclass
class Roster:
    """Canvas's gradebook export: its students (the identifying columns) and its assignment columns."""

    students: list[dict[str, str]]
    assignments: list[str]  # column names, "Name (id)"

    def column(self, wanted: str | None, assignment_id: str) -> str:
        """The roster's column for this assignment: `wanted` (exactly, or its Canvas id alone), or the only one
        whose name mentions the lmcourse id."""
        if wanted:
            exact = [c for c in self.assignments if c == wanted or ASSIGNMENT_COLUMN.match(c).group("id") == wanted]
            if len(exact) == 1:
                return exact[0]
            raise CommandError(f"--column {wanted!r}: the roster has no such assignment column (it has: "
                               f"{', '.join(self.assignments) or 'none'})")
        guess = [c for c in self.assignments if assignment_id.lower() in c.lower()]
        if len(guess) == 1:
            return guess[0]
        raise CommandError(f"which of the roster's assignment columns is {assignment_id}? Name it with --column "
                           f"(one of: {', '.join(self.assignments) or 'none: create the assignment in Canvas first'})")


def read_roster(path: Path) -> Roster:
    """Parse a Canvas gradebook export (the format Canvas's import takes back)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise CommandError(f"{path}: cannot read the Canvas gradebook export ({err})") from err
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [h.strip() for h in rows[0][:5]] != CANVAS_ID_COLUMNS:
        raise CommandError(f"{path}: not a Canvas gradebook export (its first columns must be "
                           f"{', '.join(CANVAS_ID_COLUMNS)}; export it from the course's Gradebook: Export > "
                           f"Export Entire Gradebook)")
    header = [h.strip() for h in rows[0]]
    assignments = [h for h in header[5:] if ASSIGNMENT_COLUMN.match(h)]
    students = []
    for row in rows[1:]:
        record = dict(zip(header, row))
        name = record.get("Student", "").strip()
        if not name or name == POINTS_POSSIBLE or not record.get("ID", "").strip():
            continue  # the points row, Canvas's muted/read-only marker rows, blank lines
        students.append({c: record.get(c, "").strip() for c in CANVAS_ID_COLUMNS})
    return Roster(students, assignments)


@dataclass
class Matched:
    scores: dict[str, float | None]  # Canvas user ID -> score (None: leave the cell empty)
    unmatched: list[Grade]  # graded submissions no one on the roster matches
    ambiguous: list[Grade]  # matched more than one roster row
    not_graded: list[Grade]  # grader errors: exported empty


def match(grades: list[Grade], roster: Roster, key: str = "sis-login") -> Matched:
    column = MATCH[key]
    by_key: dict[str, list[dict]] = {}
    for student in roster.students:
        by_key.setdefault(student[column].casefold(), []).append(student)
    scores: dict[str, float | None] = {s["ID"]: None for s in roster.students}
    unmatched, ambiguous, not_graded = [], [], []
    for grade in grades:
        found = by_key.get(grade.student.casefold(), [])
        if not found:
            unmatched.append(grade)
        elif len(found) > 1:
            ambiguous.append(grade)
        else:
            scores[found[0]["ID"]] = grade.score
            if grade.score is None:
                not_graded.append(grade)
    return Matched(scores, unmatched, ambiguous, not_graded)


def _number(x: float) -> str:
    return f"{x:g}"


def canvas_csv(roster: Roster, column: str, matched: Matched, points: float | None) -> str:
    """The import file: the identifying columns, the one assignment column, a Points Possible row."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CANVAS_ID_COLUMNS + [column])
    w.writerow([POINTS_POSSIBLE, "", "", "", "", _number(points) if points is not None else ""])
    for s in roster.students:
        score = matched.scores.get(s["ID"])
        w.writerow([s[c] for c in CANVAS_ID_COLUMNS] + ["" if score is None else _number(score)])
    return buf.getvalue()


def generic_csv(grades: list[Grade]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student_id", "score", "max_score", "status", "graded"])
    for g in sorted(grades, key=lambda g: g.student):
        w.writerow([g.student, "" if g.score is None else _number(g.score),
                    "" if g.max_score is None else _number(g.max_score), g.status, int(g.score is not None)])
    return buf.getvalue()


def push(url: str, token: str, course_id: int, assignment_id: int, scores: dict[str, float | None]) -> dict:
    """Post the scores with canvasapi's bulk update (an asynchronous Canvas job); empty cells are not sent."""
    from canvasapi import Canvas

    grade_data = {user: {"posted_grade": _number(score)} for user, score in scores.items() if score is not None}
    if not grade_data:
        return {"sent": 0, "progress": None}
    assignment = Canvas(url, token).get_course(course_id).get_assignment(assignment_id)
    progress = assignment.submissions_bulk_update(grade_data=grade_data)
    return {"sent": len(grade_data), "progress": getattr(progress, "id", None),
            "state": getattr(progress, "workflow_state", None)}


def points_possible(grades: list[Grade]) -> float | None:
    tops = {g.max_score for g in grades if g.max_score is not None}
    return tops.pop() if len(tops) == 1 else None
