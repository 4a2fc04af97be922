"""`lmcourse export`: grades into Canvas (its import CSV and its API) and a generic CSV; a grader error is never 0.

The import file is read back by `parse_canvas_import`, written from Canvas's documented format (Canvas guides,
"How do I import grades in the Gradebook?": the columns Student, ID, SIS User ID, SIS Login ID, Section, then
one column per assignment named "Name (id)", an optional "Points Possible" row, numbers or empty cells). The API
path runs against a fake Canvas on the loopback interface only.
"""

from __future__ import annotations

import csv
import io
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lmcourse import cli
from lmcourse.grading.result import Result, Status
from lmcourse.instructor import export as ex
from lmcourse.instructor.batch import write_grades_csv

ROOT = Path(__file__).resolve().parent.parent
# canvasapi warns about http://; the fake Canvas is on the loopback interface, where TLS would prove nothing
pytestmark = pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly:UserWarning")

ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,Bigrams (4710),Attention 04-attention (4711),Current Score
    Points Possible,,,,,10,100,
"Lovelace, Ada",101,S001,ada,Sec 1,9,,
"Turing, Alan",102,S002,alan,Sec 1,,,
"Hopper, Grace",103,S003,grace,Sec 2,,,
"Noether, Emmy",104,S004,emmy,Sec 2,,,
"Shannon, Claude",105,S005,claude,Sec 2,,,
"""


def parse_canvas_import(text: str) -> dict:
    """A reader of Canvas's documented import format: strict about what Canvas requires."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"], header
    columns = {}
    for name in header[5:]:
        m = re.fullmatch(r"(.*\S) \((\d+)\)", name)
        assert m, f"an assignment column must be 'Name (id)': {name!r}"
        columns[name] = int(m.group(2))
    body = rows[1:]
    points = {}
    if body and body[0][0].strip() == "Points Possible":
        points = {c: float(v) for c, v in zip(header[5:], body[0][5:]) if v}
        body = body[1:]
    students = {}
    for row in body:
        assert len(row) == len(header), row
        assert row[1].isdigit(), f"every student row needs Canvas's numeric ID: {row}"
        cells = {}
        for c, v in zip(header[5:], row[5:]):
            cells[c] = None if v == "" else float(v)  # a number or empty; never text
        students[row[1]] = {"login": row[3], "cells": cells}
    return {"columns": columns, "points": points, "students": students}


def _result(score, status, max_score=100.0):
    return Result(score=score, max_score=max_score, status=status, message="", output="", assignment="04-attention")


@pytest.fixture
def graded(tmp_path):
    out = tmp_path / "graded"
    out.mkdir()
    rows = [("ada", _result(87.5, Status.OK)),
            ("alan", _result(0.0, Status.OK)),  # a real zero: graded, nothing passed
            ("grace", _result(0.0, Status.GRADER_ERROR)),  # the grader failed: never a 0
            ("Emmy", _result(42.0, Status.TIMEOUT)),  # graded (its code timed out); the id in another case
            ("zed", _result(70.0, Status.OK))]  # on no roster
    write_grades_csv(out, rows)
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    return out, roster


def test_the_canvas_import_round_trips_and_a_grader_error_stays_empty(graded, tmp_path, capsys):
    out, roster = graded
    target = tmp_path / "canvas.csv"
    rc = cli.main(["export", "canvas", "04-attention", str(out), "--roster", str(roster), "--out", str(target)])
    said = capsys.readouterr().out
    assert rc == 1  # zed matched no one: said, and the command says so in its status
    assert "zed: matches no one" in said and "grace: not graded" in said
    parsed = parse_canvas_import(target.read_text())
    column = "Attention 04-attention (4711)"
    assert parsed["columns"] == {column: 4711} and parsed["points"] == {column: 100.0}
    cells = {s["login"]: s["cells"][column] for s in parsed["students"].values()}
    assert cells == {"ada": 87.5, "alan": 0.0, "grace": None, "emmy": 42.0, "claude": None}
    assert set(parsed["students"]) == {"101", "102", "103", "104", "105"}  # every enrolled student, once


def test_the_column_must_be_named_when_the_roster_is_ambiguous(graded, tmp_path):
    out, roster = graded
    text = ROSTER.replace("Attention 04-attention (4711)", "Attention (4711)")
    roster.write_text(text)
    assert cli.main(["export", "canvas", "04-attention", str(out), "--roster", str(roster),
                     "--out", str(tmp_path / "x.csv")]) != 0
    assert cli.main(["export", "canvas", "04-attention", str(out), "--roster", str(roster),
                     "--out", str(tmp_path / "x.csv"), "--column", "4711"]) == 1  # zed still unmatched
    assert parse_canvas_import((tmp_path / "x.csv").read_text())["columns"] == {"Attention (4711)": 4711}


def test_a_file_that_is_not_a_canvas_export_is_refused_with_the_fix(graded, tmp_path, capsys):
    out, _ = graded
    bad = tmp_path / "bad.csv"
    bad.write_text("name,score\nada,3\n")
    assert cli.main(["export", "canvas", "04-attention", str(out), "--roster", str(bad), "--out",
                     str(tmp_path / "x.csv")]) != 0
    assert "Export Entire Gradebook" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_the_generic_csv(graded, tmp_path):
    out, _ = graded
    assert cli.main(["export", "csv", "04-attention", str(out), "--out", str(tmp_path / "g.csv")]) == 0
    rows = {r["student_id"]: r for r in csv.DictReader(open(tmp_path / "g.csv"))}
    assert rows["grace"]["score"] == "" and rows["grace"]["graded"] == "0" and rows["grace"]["status"] == "grader-error"
    assert rows["alan"]["score"] == "0" and rows["alan"]["graded"] == "1"
    assert rows["ada"]["score"] == "87.5" and rows["ada"]["max_score"] == "100"


class _FakeCanvas(BaseHTTPRequestHandler):
    """The three calls the export makes, as Canvas answers them (https://canvas.instructure.com/doc/api/)."""

    posted: list = []

    def log_message(self, *args):  # quiet
        pass

    def _json(self, data, code=200):
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorised(self):
        if self.headers.get("Authorization") != "Bearer secret-token":
            self._json({"errors": [{"message": "Invalid access token."}]}, 401)
            return False
        return True

    def do_GET(self):
        if not self._authorised():
            return
        if m := re.fullmatch(r"/api/v1/courses/(\d+)", self.path.split("?")[0]):
            return self._json({"id": int(m.group(1)), "name": "Language models"})
        if m := re.fullmatch(r"/api/v1/courses/(\d+)/assignments/(\d+)", self.path.split("?")[0]):
            return self._json({"id": int(m.group(2)), "course_id": int(m.group(1)), "name": "Attention"})
        self._json({"errors": [{"message": "not found"}]}, 404)

    def do_POST(self):
        if not self._authorised():
            return
        m = re.fullmatch(r"/api/v1/courses/(\d+)/assignments/(\d+)/submissions/update_grades", self.path)
        if not m:
            return self._json({"errors": [{"message": "not found"}]}, 404)
        length = int(self.headers.get("Content-Length", 0))
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        _FakeCanvas.posted.append((m.group(1), m.group(2), form))
        self._json({"id": 9, "workflow_state": "queued", "url": "/api/v1/progress/9"})


@pytest.fixture
def canvas():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeCanvas)  # loopback only
    _FakeCanvas.posted = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_api_posts_the_scores_and_never_a_grader_error(graded, canvas, monkeypatch, capsys):
    out, roster = graded
    monkeypatch.setenv("CANVAS_TOKEN", "secret-token")
    rc = cli.main(["export", "canvas", "04-attention", str(out), "--roster", str(roster), "--url", canvas,
                   "--course", "77"])
    said = capsys.readouterr().out
    assert rc == 1 and "3 scores posted to assignment 4711 of course 77" in said  # zed unmatched: rc 1
    [(course, assignment, form)] = _FakeCanvas.posted
    assert (course, assignment) == ("77", "4711")
    assert form == {"grade_data[101][posted_grade]": ["87.5"], "grade_data[102][posted_grade]": ["0"],
                    "grade_data[104][posted_grade]": ["42"]}  # grace (grader-error) and claude (nothing) absent


def test_the_api_needs_a_token_from_the_environment(graded, canvas, monkeypatch, capsys):
    out, roster = graded
    monkeypatch.delenv("CANVAS_TOKEN", raising=False)
    assert cli.main(["export", "canvas", "04-attention", str(out), "--roster", str(roster), "--url", canvas,
                     "--course", "77"]) != 0
    assert "$CANVAS_TOKEN" in capsys.readouterr().err and not _FakeCanvas.posted
    monkeypatch.setenv("CANVAS_TOKEN", "wrong")
    with pytest.raises(Exception, match="Invalid access token"):
        ex.push(canvas, "wrong", 77, 4711, {"101": 1.0})
