"""``lmcourse report ID GRADES_DIR``: what a cohort got wrong, on one page, for Monday's lecture.

A column of scores says who lost points, not why. This page reads every graded
submission of an assignment and says, for the instructor only:

- the score distribution (a histogram), and how many submissions were graded;
- per check: how many submissions failed it, how (assertion, exception,
  time-out ...), and the most common messages, numbers folded together so
  that "differs by up to 0.117" and "by up to 0.5" count as one message;
- per known mistake (``autograder/<id>/mistakes.py``): how many submissions
  match its signature exactly, and how many have it as their closest
  explanation (`lmcourse.grading.signatures`); and how many failing
  submissions no known mistake explains, the ones to read by hand;
- grader errors (never grades: each with the grader's message, to re-run),
  the statuses that are the student's (a notebook that did not load, a
  time-out), and the grading time per submission.

What it reads (`collect`): the ``--out`` folder of ``lmcourse grade`` (a local
batch, or a Slurm round after ``--collect``: ``students/<student>/results.json``),
a folder of Gradescope ``results.json`` files (one folder per submission, as
downloaded), or Gradescope's "Download submissions" export, whose
``submission_metadata.yml`` holds each submission's autograder results. An
unreadable file is counted and named, never fatal.

The page is self-contained (no script, no remote asset, its histogram an
inline SVG) and escapes every name: student ids are folder names students
chose. The CSV files beside it hold the same numbers for a spreadsheet:
one row per student (``report-students.csv``) and one per check
(``report-checks.csv``). The page names the hidden checks and what they found,
so it is for instructors, like the instructor notes: never put it on the
course site.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lmcourse.files import atomic_write
from lmcourse.grading.result import Result
from lmcourse.grading.signatures import Signature, best, matches

PAGE = "report.html"
STUDENTS_CSV = "report-students.csv"
CHECKS_CSV = "report-checks.csv"
BINS = 10
TOP_MESSAGES = 3


@dataclass
class Submission:
    student: str
    result: Result
    source: str          # the file it was read from, relative to the folder


@dataclass
class Cohort:
    assignment: str
    submissions: list[Submission] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)   # files that hold no result, named for the page
    layout: str = ""                                       # what the folder was read as


# ------------------------------------------------------------------ reading a cohort


def _from_gradescope(data: dict) -> Result:
    """A Result from Gradescope's results.json (lmcourse's own keys sit in ``extra_data`` there)."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    merged = dict(data.get("extra_data") or {})
    merged.update({k: v for k, v in data.items() if k not in ("extra_data", "tests")})
    tests = []
    for t in data.get("tests") or []:
        t = dict(t)
        t.update({k: v for k, v in (t.pop("extra_data", None) or {}).items() if k not in t})
        tests.append(t)
    merged["tests"] = tests
    merged.setdefault("score", sum(float(t.get("score") or 0) for t in tests))
    merged.setdefault("max_score", sum(float(t.get("max_score") or 0) for t in tests))
    return Result.from_json(merged)


def _read(path: Path) -> Result | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    try:
        return _from_gradescope(data) if isinstance(data, dict) and "extra_data" in data else Result.from_json(data)
    except ValueError:
        return None


def _gradescope_export(folder: Path, cohort: Cohort) -> None:
    """Gradescope's "Download submissions": ``submission_metadata.yml`` maps each submission's folder to its
    submitters and (for an autograded assignment) ``:results:``, the results.json the autograder wrote."""
    import yaml

    try:
        meta = yaml.safe_load((folder / "submission_metadata.yml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        cohort.unreadable.append(f"submission_metadata.yml ({type(err).__name__})")
        return
    for key, record in (meta or {}).items() if isinstance(meta, dict) else []:
        record = record if isinstance(record, dict) else {}
        submitters = record.get(":submitters") or record.get("submitters") or []
        who = [str(s.get(":sid") or s.get(":email") or s.get(":name") or "") for s in submitters
               if isinstance(s, dict)]
        results = record.get(":results") or record.get("results")
        try:
            result = _from_gradescope(_plain(results))
        except (ValueError, TypeError, AttributeError):
            cohort.unreadable.append(str(key))
            continue
        cohort.submissions.append(Submission("+".join(w for w in who if w) or str(key), result,
                                             f"submission_metadata.yml: {key}"))


def _plain(value):
    """YAML's Ruby-style keys (``:score``) as plain ones."""
    if isinstance(value, dict):
        return {(k[1:] if isinstance(k, str) and k.startswith(":") else k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def collect(folder: Path, assignment_id: str) -> Cohort:
    """Every result of `assignment_id` under `folder` (see the module docstring for the layouts)."""
    folder = Path(folder)
    cohort = Cohort(assignment_id)
    if (folder / "students").is_dir():
        cohort.layout = "lmcourse grade --out folder"
        paths = sorted((folder / "students").glob("*/results.json"))
        who = lambda p: p.parent.name  # noqa: E731
    elif (folder / "submission_metadata.yml").is_file():
        cohort.layout = "Gradescope export (submission_metadata.yml)"
        _gradescope_export(folder, cohort)
        paths, who = [], None
    else:
        cohort.layout = "folders of results.json"
        paths = sorted(p for p in folder.rglob("results.json") if p.is_file())
        who = lambda p: str(p.parent.relative_to(folder)).replace("/results", "") or p.parent.name  # noqa: E731
    for path in paths:
        result = _read(path)
        if result is None:
            cohort.unreadable.append(str(path.relative_to(folder)))
            continue
        cohort.submissions.append(Submission(who(path), result, str(path.relative_to(folder))))
    # another assignment's results in the same folder are not this cohort's (a Gradescope result without
    # lmcourse's keys names no assignment: kept)
    cohort.submissions = [s for s in cohort.submissions if s.result.assignment in ("", assignment_id)]
    return cohort


# ------------------------------------------------------------------ the numbers


_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def message_kind(output: str) -> str:
    """A failure message with its numbers folded to #: the messages one bug gives on different inputs."""
    first = next((line.strip() for line in str(output).splitlines() if line.strip()), "(no message)")
    return _NUMBER.sub("#", first)[:240]


@dataclass
class CheckStats:
    name: str
    max_score: float
    visibility: str
    ran: int = 0
    failed: int = 0
    unwritten: int = 0     # of the failures, those whose function was never written (NotImplementedError)
    kinds: Counter = field(default_factory=Counter)
    messages: Counter = field(default_factory=Counter)
    example: dict = field(default_factory=dict)     # message kind -> one message as written


@dataclass
class Summary:
    assignment: str
    layout: str
    total: int
    graded: list[Submission]
    grader_errors: list[Submission]
    unreadable: list[str]
    statuses: Counter
    max_score: float
    scores: list[float]
    checks: list[CheckStats]
    mistakes: list[dict]          # per known mistake: name, function, hint, exact, closest, students
    unexplained: list[str]        # failing submissions that no known mistake explains
    attribution: dict[str, dict]  # student -> {"mistakes": [...], "exact": bool, "similarity": float}
    seconds: list[float]
    signatures_note: str


def summarise(cohort: Cohort, signatures: list[Signature] | None, signatures_note: str = "") -> Summary:
    graded = [s for s in cohort.submissions if s.result.status.graded]
    errors = [s for s in cohort.submissions if not s.result.status.graded]
    checks: dict[str, CheckStats] = {}
    for s in graded:
        for t in s.result.tests:
            c = checks.setdefault(t.name, CheckStats(t.name, t.max_score, t.visibility))
            c.ran += 1
            if t.score < t.max_score:
                c.failed += 1
                c.unwritten += "NotImplementedError" in t.output
                c.kinds[t.kind or "failed"] += 1
                key = message_kind(t.output)
                c.messages[key] += 1
                c.example.setdefault(key, next((ln for ln in t.output.splitlines() if ln.strip()), ""))
    max_score = max((s.result.max_score for s in graded), default=0.0)
    per_mistake = {sig.mistake: {"name": sig.mistake, "function": sig.function, "hint": sig.hint, "exact": [],
                                 "closest": []} for sig in signatures or []}
    attribution, unexplained = {}, []
    for s in graded:
        tests = [t.to_json() for t in s.result.tests]
        failing = any(t["score"] < t["max_score"] for t in tests)
        if signatures is None or not failing:
            continue
        top = best(matches(tests, signatures))
        if not top:
            unexplained.append(s.student)
            continue
        attribution[s.student] = {"mistakes": [m.mistake for m in top], "exact": top[0].exact,
                                  "similarity": round(top[0].similarity, 3)}
        for m in top:
            per_mistake[m.mistake]["exact" if m.exact else "closest"].append(s.student)
    return Summary(
        assignment=cohort.assignment, layout=cohort.layout, total=len(cohort.submissions), graded=graded,
        grader_errors=errors, unreadable=cohort.unreadable,
        statuses=Counter(str(s.result.status) for s in graded), max_score=max_score,
        scores=[s.result.score for s in graded],
        checks=sorted(checks.values(), key=lambda c: (-c.failed, c.name)),
        mistakes=sorted(per_mistake.values(), key=lambda m: (-len(m["exact"]), -len(m["closest"]), m["name"])),
        unexplained=unexplained, attribution=attribution,
        seconds=[s.result.execution_time for s in cohort.submissions if s.result.execution_time],
        signatures_note=signatures_note)


def histogram(scores: list[float], max_score: float, bins: int = BINS) -> list[tuple[float, float, int]]:
    """(low, high, count) per bin over [0, max_score]; full marks fall in the last bin."""
    if max_score <= 0:
        return []
    width = max_score / bins
    counts = [0] * bins
    for x in scores:
        counts[min(bins - 1, max(0, int(x / width)))] += 1
    return [(i * width, (i + 1) * width, counts[i]) for i in range(bins)]


# ------------------------------------------------------------------ writing it


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _svg_histogram(summary: Summary) -> str:
    bars = histogram(summary.scores, summary.max_score)
    if not bars:
        return "<p>No graded submission.</p>"
    top = max(c for _, _, c in bars) or 1
    w, h, pad = 36, 160, 24
    parts = [f'<svg role="img" aria-labelledby="hist-title" width="{len(bars) * w + 2 * pad}" height="{h + 60}" '
             f'viewBox="0 0 {len(bars) * w + 2 * pad} {h + 60}" xmlns="http://www.w3.org/2000/svg">',
             '<title id="hist-title">Scores of the graded submissions</title>']
    for i, (lo, hi, count) in enumerate(bars):
        bh = round(h * count / top)
        x = pad + i * w
        parts.append(f'<rect class="bar" data-count="{count}" x="{x + 2}" y="{h - bh + 10}" width="{w - 4}" '
                     f'height="{bh}" fill="#3b6ea5"><title>{lo:g}–{hi:g} points: {count}</title></rect>')
        parts.append(f'<text x="{x + w / 2}" y="{h - bh + 6}" font-size="11" text-anchor="middle">{count}</text>')
        parts.append(f'<text x="{x}" y="{h + 26}" font-size="10">{lo:g}</text>')
    parts.append(f'<text x="{pad + len(bars) * w}" y="{h + 26}" font-size="10" text-anchor="end">'
                 f'{summary.max_score:g}</text>')
    parts.append(f'<text x="{pad}" y="{h + 48}" font-size="12">points (of {summary.max_score:g})</text></svg>')
    return "".join(parts)


_STYLE = """body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;line-height:1.45;
color:#1d1d1f}table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;
padding:.25rem .5rem;vertical-align:top;text-align:left}th{background:#f3f4f6}td.n{text-align:right;
white-space:nowrap}.note{background:#fff7e0;padding:.5rem 1rem;border-radius:6px}.muted{color:#555}
details summary{cursor:pointer}code{background:#f4f4f4;padding:0 .2rem}.stats span{margin-right:1.5rem}"""


def render(summary: Summary) -> str:
    s = summary
    scores = s.scores
    stat = (f"<span>mean <b>{statistics.fmean(scores):.1f}</b></span><span>median <b>{statistics.median(scores):g}"
            f"</b></span><span>full marks <b>{sum(x >= s.max_score for x in scores)}</b></span>") if scores else ""
    out = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(s.assignment)}: cohort report'
           f'</title><style>{_STYLE}</style></head><body>',
           f"<h1>{_e(s.assignment)}: what the cohort got wrong</h1>",
           '<p class="note">Instructors only: this page names the hidden checks and what they found. '
           'Do not publish it.</p>',
           f'<p class="stats" id="counts" data-total="{s.total}" data-graded="{len(s.graded)}" '
           f'data-grader-errors="{len(s.grader_errors)}" data-unreadable="{len(s.unreadable)}">'
           f"<span>submissions <b>{s.total}</b></span><span>graded <b>{len(s.graded)}</b></span>"
           f"<span>grader errors <b>{len(s.grader_errors)}</b></span>"
           + (f"<span>unreadable files <b>{len(s.unreadable)}</b></span>" if s.unreadable else "") + stat + "</p>",
           f'<p class="muted">Read as: {_e(s.layout)}.</p>',
           "<h2>Scores</h2>", _svg_histogram(s)]
    student_statuses = {k: v for k, v in s.statuses.items() if k != "ok"}
    if student_statuses:
        out.append("<p>Graded with a problem of the student's: " + ", ".join(
            f"<code>{_e(k)}</code> {v}" for k, v in sorted(student_statuses.items())) + ".</p>")

    out.append('<h2>Checks, most failed first</h2><table id="checks"><thead><tr><th>check</th><th>points</th>'
               '<th>failed</th><th>how</th><th>most common messages</th></tr></thead><tbody>')
    for c in s.checks:
        msgs = "".join(f"<li>{n} × {_e(c.example[k])}</li>" for k, n in c.messages.most_common(TOP_MESSAGES))
        how = ", ".join(f"{_e(k)} {n}" for k, n in c.kinds.most_common())
        shown = "hidden" if c.visibility != "visible" else "visible"
        out.append(f'<tr data-check="{_e(c.name)}" data-failed="{c.failed}"><td>{_e(c.name)} '
                   f'<span class="muted">({shown})</span></td><td class="n">{c.max_score:g}</td>'
                   f'<td class="n">{c.failed} of {c.ran}'
                   + (f'<br><span class="muted">{c.unwritten} not written</span>' if c.unwritten else "")
                   + f'</td><td>{how}</td><td><ul>{msgs}</ul></td></tr>')
    out.append("</tbody></table>")

    out.append("<h2>Known mistakes</h2>")
    if s.signatures_note:
        out.append(f'<p class="muted">{_e(s.signatures_note)}</p>')
    if s.mistakes:
        out.append('<p class="muted">A submission matches a known mistake exactly when it fails the same checks, '
                   "the same way, as the mistake does; otherwise the closest mistake (at least half alike) is "
                   "counted. Mistakes that no check can tell apart share their submissions.</p>"
                   '<table id="mistakes"><thead><tr><th>mistake</th><th>in</th><th>exact</th><th>closest</th>'
                   "<th>hint the students see</th><th>who</th></tr></thead><tbody>")
        for m in s.mistakes:
            who = sorted(m["exact"]) + [f"{w} (closest)" for w in sorted(m["closest"])]
            names = (f"<details><summary>{len(who)}</summary>{_e(', '.join(who))}</details>" if who else "")
            out.append(f'<tr data-mistake="{_e(m["name"])}" data-exact="{len(m["exact"])}" '
                       f'data-closest="{len(m["closest"])}"><td>{_e(m["name"])}</td><td><code>{_e(m["function"])}'
                       f'</code></td><td class="n">{len(m["exact"])}</td><td class="n">{len(m["closest"])}</td>'
                       f"<td>{_e(m['hint'])}</td><td>{names}</td></tr>")
        out.append("</tbody></table>")
        out.append(f'<p id="unexplained" data-count="{len(s.unexplained)}">Failing submissions no known mistake '
                   f"explains: <b>{len(s.unexplained)}</b>"
                   + (f" ({_e(', '.join(sorted(s.unexplained)))}): read these by hand." if s.unexplained else ".")
                   + "</p>")

    out.append("<h2>Grader errors</h2>")
    if s.grader_errors:
        out.append('<p>Not grades: nothing was recorded for these. Fix what the message names and grade again '
                   '(<code>lmcourse grade</code> re-grades them on its next run).</p><table id="grader-errors">'
                   "<thead><tr><th>student</th><th>what the grader said</th></tr></thead><tbody>")
        for e in s.grader_errors:
            out.append(f"<tr><td>{_e(e.student)}</td><td>{_e(e.result.message)}</td></tr>")
        out.append("</tbody></table>")
    else:
        out.append("<p>None.</p>")
    if s.unreadable:
        out.append("<p>Files that hold no result (damaged, or not results): " +
                   ", ".join(f"<code>{_e(u)}</code>" for u in s.unreadable) + ".</p>")

    out.append("<h2>Grading time</h2>")
    if s.seconds:
        slow = sorted(((x.result.execution_time, x.student) for x in s.graded + s.grader_errors), reverse=True)[:5]
        out.append(f'<p id="time">Per submission: median {statistics.median(s.seconds):.1f} s, mean '
                   f"{statistics.fmean(s.seconds):.1f} s, longest {max(s.seconds):.1f} s; "
                   f"{sum(s.seconds) / 60:.1f} minutes in all. Slowest: "
                   + ", ".join(f"{_e(w)} ({t:.1f} s)" for t, w in slow) + ".</p>")
    else:
        out.append("<p>No times recorded.</p>")
    out.append("</body></html>")
    return "\n".join(out)


def students_csv(summary: Summary) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student", "status", "score", "max_score", "failed_checks", "mistake", "match", "seconds"])
    for s in sorted(summary.graded + summary.grader_errors, key=lambda x: x.student):
        r = s.result
        a = summary.attribution.get(s.student)
        graded = r.status.graded
        w.writerow([s.student, str(r.status), r.score if graded else "", r.max_score if graded else "",
                    sum(t.score < t.max_score for t in r.tests) if graded else "",
                    " | ".join(a["mistakes"]) if a else "",
                    ("exact" if a["exact"] else f"closest ({a['similarity']:g})") if a else "",
                    f"{r.execution_time:.2f}"])
    return buf.getvalue()


def checks_csv(summary: Summary) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["check", "visibility", "points", "ran", "failed", "not_written", "kinds", "most_common_message",
                "count"])
    for c in summary.checks:
        top = c.messages.most_common(1)
        w.writerow([c.name, c.visibility, c.max_score, c.ran, c.failed, c.unwritten,
                    "; ".join(f"{k} {n}" for k, n in c.kinds.most_common()),
                    c.example[top[0][0]] if top else "", top[0][1] if top else 0])
    return buf.getvalue()


def build(root: Path, grades: Path, assignment_id: str, *, out: Path | None = None, with_mistakes: bool = True,
          tier: str = "cpu", progress=None, signatures: list[Signature] | None = None) -> tuple[Path, Summary]:
    """Read the cohort, match it against the known mistakes' signatures (graded once per course version
    and cached: `lmcourse.instructor.mistakes.signatures`; or those given), write the page and the CSV
    files beside it."""
    from lmcourse.instructor import mistakes

    cohort = collect(grades, assignment_id)
    note = "Known mistakes not matched (--no-mistakes)."
    if signatures is not None:
        note = f"{len(signatures)} known mistakes of {assignment_id}."
    elif with_mistakes:
        try:
            signatures = mistakes.signatures(root, assignment_id, tier=tier, progress=progress)
            note = (f"{len(signatures)} known mistakes of {assignment_id}, each graded as a submission on the "
                    f"{tier} tier; the slow checks in its catalogue's LEAVE_OUT run only for the mistakes written "
                    "to fail them.")
        except FileNotFoundError:
            note = f"{assignment_id} lists no known mistakes (autograder/{assignment_id}/mistakes.py)."
    summary = summarise(cohort, signatures, note)
    page = Path(out) if out is not None else Path(grades) / PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(page, render(summary))
    atomic_write(page.with_name(STUDENTS_CSV), students_csv(summary))
    atomic_write(page.with_name(CHECKS_CSV), checks_csv(summary))
    return page, summary
