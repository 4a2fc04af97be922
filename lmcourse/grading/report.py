"""What students and Gradescope see: feedback.html and the strict results.json.

Both are built from the result dict alone (names, points, messages), which
never holds a check's source, so neither can leak a hidden check.
"""

from __future__ import annotations

import html

GRADESCOPE_TEST_KEYS = ("score", "max_score", "status", "name", "number", "output", "tags", "visibility")
GRADESCOPE_TOP_KEYS = ("score", "execution_time", "output", "visibility", "stdout_visibility")


def to_gradescope(result: dict) -> dict:
    """Gradescope's schema exactly; lmcourse's extra keys move under ``extra_data``."""
    out = {k: result[k] for k in GRADESCOPE_TOP_KEYS if k in result}
    out["extra_data"] = {k: v for k, v in result.items() if k not in GRADESCOPE_TOP_KEYS and k != "tests"}
    out["tests"] = []
    for t in result.get("tests", []):
        test = {k: t[k] for k in GRADESCOPE_TEST_KEYS if k in t}
        test["extra_data"] = {k: v for k, v in t.items() if k not in GRADESCOPE_TEST_KEYS}
        out["tests"].append(test)
    return out


_CSS = """
body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}
.pass{color:#176f2c}.fail{color:#a4161a}.msg{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.9em}
.status{padding:.6rem;background:#fff3cd;border-left:4px solid #e0a800}
"""


def feedback_html(result: dict, student_id: str) -> str:
    """A self-contained page: score, status, problems, one row per check (name, points, message)."""
    e = html.escape
    rows = []
    for t in result.get("tests", []):
        ok = t.get("status") == "passed"
        hidden = t.get("visibility") != "visible"
        rows.append(
            f"<tr><td class={'pass' if ok else 'fail'}>{'✓' if ok else '✗'}</td>"
            f"<td>{e(str(t.get('name', '')))}{' <small>(hidden check)</small>' if hidden else ''}</td>"
            f"<td>{e(str(t.get('cell', '') or ''))}</td>"
            f"<td>{t.get('score', 0):g} / {t.get('max_score', 0):g}</td>"
            f"<td class=msg>{e(str(t.get('output', '') or ''))}</td></tr>"
        )
    problems = "".join(f"<li><code>{e(str(p.get('status')))}</code> {e(str(p.get('message')))}</li>"
                       for p in result.get("problems", []))
    status = result.get("status", "ok")
    banner = "" if status == "ok" else \
        f"<p class=status><b>{e(status)}</b>: {e(str(result.get('message', '')))}</p>"
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><title>Feedback: {e(str(result.get('assignment', '')))} · {e(student_id)}</title>
<style>{_CSS}</style></head><body>
<h1>{e(str(result.get('assignment', '')))}: feedback for {e(student_id)}</h1>
<p><b>Score: {result.get('score', 0):g} / {result.get('max_score', 0):g}</b></p>
{banner}
{f'<h2>Problems with the notebook</h2><ul>{problems}</ul>' if problems else ''}
<h2>Checks</h2>
<table><thead><tr><th></th><th>check</th><th>cell</th><th>points</th><th>message</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
</body></html>
"""
