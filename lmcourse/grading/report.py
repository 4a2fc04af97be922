"""What students see: ``lmcourse check``'s report and feedback.html, both read off a `Result`.

Both are built from the result alone (names, points, messages), which never
holds a check's source, so neither can leak a hidden check. `readiness` is the
one reading of a result that says what is left to do; the check's text and the
feedback page both print it, so the two cannot drift. (Gradescope's strict
results.json is `Result.to_gradescope`.) Each function takes a `Result` or its
JSON as stored in results.json.
"""

from __future__ import annotations

import html
import re
import textwrap

from lmcourse.grading.result import Result, hint_text


def _as_result(result: Result | dict) -> Result:
    return result if isinstance(result, Result) else Result.from_json(result)


_CSS = """
body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}
.pass{color:#176f2c}.fail{color:#a4161a}.msg{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.9em}
.status{padding:.6rem;background:#fff3cd;border-left:4px solid #e0a800}
"""


def feedback_html(result: Result | dict, student_id: str, late=None) -> str:
    """A self-contained page: score, status, problems, one row per check (name, points, message).

    late: the `lmcourse.instructor.late.Adjustment` of a submission graded under a due date (None: none).
    """
    result = _as_result(result)
    e = html.escape
    rows = []
    for t in result.tests:
        hidden = t.visibility != "visible"
        rows.append(
            f"<tr><td class={'pass' if t.passed else 'fail'}>{'✓' if t.passed else '✗'}</td>"
            f"<td>{e(str(t.name))}{' <small>(hidden check)</small>' if hidden else ''}</td>"
            f"<td>{e(str(t.cell or ''))}</td>"
            f"<td>{t.score:g} / {t.max_score:g}</td>"
            f"<td class=msg>{e(str(t.output or ''))}</td></tr>"
        )
    problems = "".join(f"<li><code>{e(str(p.get('status')))}</code> {e(str(p.get('message')))}</li>"
                       for p in result.problems)
    banner = "" if result.status == "ok" else f"<p class=status><b>{e(result.status)}</b>: {e(result.message)}</p>"
    score = f"<b>Score: {result.score:g} / {result.max_score:g}</b>"
    if late is not None and result.graded:
        when = f"handed in {late.submitted:%Y-%m-%d %H:%M} UTC ({late.source}); " if late.submitted else ""
        score = (f"<b>Score: {late.score:g} / {result.max_score:g}</b> (the checks gave {result.score:g}; "
                 f"{e(when)}{e(late.note)})")
    if not result.graded:  # the grader's failure: no score to show, and its reason (paths, nodes) is the instructor's
        score = "<b>Not graded yet</b>"
        banner = ("<p class=status><b>grader-error</b>: the grader failed on this submission; this is not a problem "
                  "with your notebook. Your instructor has the details, and it will be graded again.</p>")
    todo = readiness(result)["todo"] if result.readiness else []
    if todo:  # the same reading of the result as `lmcourse check`'s summary
        banner += (f"<p class=status><b>Not written yet</b> (still raising NotImplementedError, or missing): "
                   f"{e(todo_text(todo))}</p>")
    failing = readiness(result)["failing"] if result.readiness and result.graded else []
    if failing:  # root cause first (lmcourse.grading.causes): the order to fix them in
        banner += (f"<p class=status><b>Written but failing</b>, each after the code it uses (fix them in this "
                   f"order): {e(', '.join(failing))}</p>")
    hints = "".join(f"<li>{e(hint_text(h))}</li>" for h in result.hints or []) if result.graded else ""
    if hints:  # known mistakes that fail exactly these checks (lmcourse.grading.signatures)
        banner += (f"<h2>Likely causes</h2><p>Your failures are exactly those of a known mistake; the advice "
                   f"below says where to look (it is a likely cause, not a certainty):</p><ul class=hints>{hints}</ul>")
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><title>Feedback: {e(result.assignment)} · {e(student_id)}</title>
<style>{_CSS}</style></head><body>
<h1>{e(result.assignment)}: feedback for {e(student_id)}</h1>
<p>{score}</p>
{banner}
{f'<h2>Problems with the notebook</h2><ul>{problems}</ul>' if problems else ''}
<h2>Checks</h2>
<table><thead><tr><th></th><th>check</th><th>cell</th><th>points</th><th>message</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
</body></html>
"""


# ----------------------------------------------------------------------------- readiness

def readiness(result: Result | dict) -> dict:
    """What a student needs to know before submitting, read off a grading result.

    Returns ``todo`` (``[(part, name, "missing" | "unimplemented")]``, in the
    notebook's order), ``visible`` (earned, available) points of the visible
    checks, ``failing_checks`` (visible checks that did not pass), ``failing``
    (functions written but failing a check or test cell, each after what it
    uses: `lmcourse.grading.causes`), ``cells``
    (``(passed, run)`` of the notebook's test cells, or None where they were
    not run), ``hidden_points`` (the points of checks that run only when
    graded), ``errors`` (notebook problems that are not warnings) and
    ``ready``: nothing to do, no error, every visible check and test cell passes.
    """
    result = _as_result(result)
    parts = result.parts or {}
    todo = []
    for kind in ("missing", "unimplemented"):
        for gid, name in (result.readiness or {}).get(kind, []):
            todo.append((parts.get(gid, ""), name, kind))
    order = {title: k for k, title in enumerate(dict.fromkeys(parts.values()))}
    todo.sort(key=lambda t: order.get(t[0], len(order)))
    visible = [t for t in result.tests if t.visibility == "visible"]
    failing = [t for t in visible if not t.passed]
    cells = result.test_cells
    cell_counts = None if cells is None else (sum(1 for c in cells if c.get("passed")), len(cells))
    errors = [p for p in result.problems if not p.get("warning")]
    ready = result.status == "ok" and not todo and not errors and not failing and \
        (cell_counts is None or cell_counts[0] == cell_counts[1])
    return {"todo": todo, "visible": (sum(t.score for t in visible), sum(t.max_score for t in visible)),
            "failing_checks": failing, "failing": list((result.readiness or {}).get("failing", [])),
            "cells": cell_counts, "hidden_points": result.hidden_points or 0,
            "errors": errors, "ready": ready}


def todo_text(todo) -> str:
    """'Part 2: keep_probabilities, subsample; Part 4: ...': what is left, by part."""
    by_part: dict[str, list[str]] = {}
    for part, name, kind in todo:
        by_part.setdefault(part.split(" — ")[0].split(" (")[0] or "answer cells", []).append(
            name + (" (missing: copy its cell back)" if kind == "missing" else ""))
    return "; ".join(f"{part}: {', '.join(names)}" for part, names in by_part.items())


def readiness_lines(result: Result | dict) -> list[str]:
    """The summary at the end of ``lmcourse check``, one fact per line (feedback.html shows its to-do)."""
    r = readiness(result)
    out = []
    if r["todo"]:
        n = len(r["todo"])
        out.append(f"to do: {n} function{'s' if n > 1 else ''} or class{'es' if n > 1 else ''} not written yet "
                   f"(still raising NotImplementedError, or missing) — {todo_text(r['todo'])}")
    if r["failing"]:
        out.append(f"written but failing: {', '.join(r['failing'])}" + (
            " (fix them in this order: each comes after what it uses)" if len(r["failing"]) > 1 else ""))
    if r["errors"]:
        out.append(f"notebook problems: {len(r['errors'])} (listed above); fix them first")
    if r["cells"] is not None:
        passed, run = r["cells"]
        out.append(f"the notebook's test cells: {passed} of {run} pass")
    earned, available = r["visible"]
    out.append(f"visible checks: {earned:g} / {available:g} points")
    if r["hidden_points"]:
        out.append(f"not covered here: hidden checks worth {r['hidden_points']:g} points run only when your work is "
                   "graded; passing everything visible does not guarantee them")
    if r["ready"]:
        out.append("ready to submit: nothing left to implement and everything visible passes")
    else:
        out.append("not ready to submit yet")
    return out


def isolation_line(isolation: str, verbose: bool = False) -> str:
    """One line on how the student's code was run (the whole plan with ``verbose``)."""
    iso = str(isolation or "")
    if verbose or not iso:
        return f"isolation: {iso or 'none (nothing was run)'}"
    if iso.startswith("full, without root"):  # bubblewrap in a user namespace: a sandbox of its own, your uid
        return "isolation: full (your code ran in a sandbox of its own, without network, with time and memory limits)"
    if iso.startswith("full"):
        return "isolation: full (your code ran as a separate user, without network, with time and memory limits)"
    if iso.startswith("partial"):
        why = iso.split(":", 1)[1].split(";")[0].strip() if ":" in iso else ""
        if "full isolation is not available here" in iso or "isolation turned off" in why:
            why = "no bubblewrap here" if "bubblewrap" in iso or "bwrap" in iso else "full isolation not available"
        return (f"isolation: partial ({why}): your code ran as in Jupyter, with time and memory limits; "
                "that is all a check of your own work needs (-v says more)")
    return f"isolation: {iso.split(';')[0]}"


def _indent(text: str, first: str = "      ", rest: str = "        ") -> list[str]:
    out = []
    for line in str(text).splitlines():
        out.append(textwrap.fill(line, 100, initial_indent=first, subsequent_indent=rest) if line.strip() else "")
    return out


def check_text(result: Result | dict, notebook, verbose: bool = False) -> str:
    """``lmcourse check``'s report: problems, then part by part the test cells and visible checks, then readiness."""
    result = _as_result(result)
    out = [f"lmcourse check {result.assignment} {notebook}", isolation_line(result.isolation, verbose)]
    problems = result.problems
    wrong = [p for p in problems if p.get("status") == "wrong-assignment"]
    if wrong:  # everything else follows from it: say only that
        out.append(f"  ✗ [wrong-assignment] {wrong[0]['message']}")
        out.append(f"    ({len(problems) - 1} missing or changed cells follow from this and are not listed)")
        out.append("summary:\n  not ready to submit yet")
        return "\n".join(out)
    if problems:
        out.append("notebook problems:")
        for p in problems:
            mark = "!" if p.get("warning") else "✗"  # a warning costs nothing: say so by its mark
            first, *more = str(p["message"]).split("\n")  # (a traceback after the first line: indented under it)
            out.append(f"  {mark} [{p['status']}] " + (f"cell '{p['cell']}': " if p.get("cell") else "") + first)
            out += [f"      {line}" for line in more]
    # One error that stops every check (the code does not import, say): shown once, in full.
    tests = result.tests
    outputs = {t.output for t in tests if not t.passed}
    shared = next(iter(outputs)) if len(outputs) == 1 and len(tests) > 1 and not any(t.passed for t in tests) \
        else None
    if result.status != "ok" and not [p for p in problems if not p.get("warning")]:
        if shared:
            out.append(f"  ✗ [{result.status}]")
            out += _indent(shared, "      ", "        ")
        else:
            out.append(f"  ✗ [{result.status}] {result.message}")
    if not problems and result.status == "ok":
        out.append("notebook structure: ok")
    parts = result.parts or {}
    todo = readiness(result)["todo"]
    unwritten = {name for _, name, _ in todo}
    sections: dict[str, list[str]] = {}

    def section(title: str) -> list[str]:
        return sections.setdefault(title, [])  # "": a notebook without "Part" headings

    for part, name, kind in todo:
        section(part).append(f"  … {name}: " + ("missing (copy its answer cell back)" if kind == "missing"
                                                 else "not written yet (still raises NotImplementedError)"))
    for c in result.test_cells or []:
        lines = section(parts.get(c["cell"], ""))
        if c.get("passed"):
            lines.append(f"  ✓ test cell '{c['cell']}' runs without an error")
            continue
        err = c.get("error") or {}
        where = f" (line {err['line']})" if err.get("line") else ""
        stub = [n for n in re.findall(r"\w+", (err.get("statement") or "") + " " + (err.get("traceback") or ""))
                if n in unwritten]
        if err.get("type") == "NotImplementedError" and stub:
            lines.append(f"  ✗ test cell '{c['cell']}'{where}: stops at {stub[0]}, not written yet")
            continue
        lines.append(f"  ✗ test cell '{c['cell']}'{where}: {err.get('type') or 'failed'}")
        if err.get("cause"):  # root cause first (lmcourse.grading.causes)
            lines += _indent("likely cause: " + err["cause"])
        if err.get("statement"):  # code: shown as it is, never re-wrapped
            lines += [f"      > {line}" for line in err["statement"].splitlines()[:8]]
        if err.get("message"):
            lines += _indent(err["message"])
        if err.get("traceback"):
            lines.append("      in your code:")
            lines += _indent(err["traceback"], "      ", "      ")
    for t in tests:
        lines = section(parts.get(t.cell, ""))
        mark = "✓" if t.passed else "✗"
        where = f"function {t.function}" if t.function else f"cell '{t.cell}'"
        lines.append(f"  {mark} check: {t.name}  [{t.score:g}/{t.max_score:g}]  ({where})")
        if not t.passed and t.output:
            if t.function in unwritten and "NotImplementedError" in t.output:
                lines[-1] += f" — {t.function} is not written yet"
            else:
                lines += ["      (the error above)"] if t.output == shared else _indent(t.output)
    order = list(dict.fromkeys(parts.values()))
    for title in sorted(sections, key=lambda x: order.index(x) if x in order else len(order)):
        if title:
            out.append(title)
        out += sections[title]
    shown = [h for h in result.hints or [] if h.get("visibility") == "visible"]
    if shown:  # known mistakes whose failures are exactly these (lmcourse.grading.signatures)
        out.append("likely causes (your failures are exactly those of a known mistake; a likely cause, not a "
                   "certainty):")
        for h in shown:
            out += _indent(hint_text(h), "  ? ", "    ")
    out.append("summary:")
    out += [f"  {line}" for line in readiness_lines(result)]
    return "\n".join(out)
