"""Accessibility checks in the browser: axe-core (Deque's rule engine, vendored from npm) run inside a page.

Used by every browser test that shows a reader something (the book's pages, the
decks, the self-checks, the instructor pages). axe-core tests the rendered DOM
against WCAG 2.0/2.1 A and AA and Deque's best practices; a page passes when no
violation is *serious* or *critical* (the issue's bar). The moderate and minor
ones are returned too, for the summary, but do not fail a test.

    from axe import audit, blocking, describe
    found = audit(page)                  # after the page has loaded and drawn
    assert not blocking(found), describe(blocking(found))
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # package.json pins it; `npm ci` installs it
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
BLOCKING = ("serious", "critical")

_RUN = """async ([tags, context]) => {
  const result = await axe.run(context || document, {runOnly: {type: 'tag', values: tags},
                                                     resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, url: v.helpUrl,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                              summary: (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 240)})),
  }));
}"""


def audit(page, context: str | None = None) -> list[dict]:
    """axe-core's violations on the page as it is now (or within the elements matching CSS `context`)."""
    if not AXE_JS.exists():
        raise RuntimeError(f"{AXE_JS} is missing: run `npm ci` in {ROOT} (`make test` does it)")
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    return page.evaluate(_RUN, [TAGS, context])


def blocking(violations: list[dict]) -> list[dict]:
    """The violations that fail a page: serious or critical."""
    return [v for v in violations if v["impact"] in BLOCKING]


def describe(violations: list[dict], limit: int = 3) -> str:
    """One paragraph per violation: the rule, how to fix it, and the first few elements that break it."""
    out = []
    for v in violations:
        lines = [f"{v['impact']} {v['id']}: {v['help']} ({len(v['nodes'])} elements; {v['url']})"]
        lines += [f"    {n['target']}  {n['html']!r}\n      {n['summary']}" for n in v["nodes"][:limit]]
        out.append("\n".join(lines))
    return "\n".join(out)
