"""Every page of the built book, opened in a real browser, looks right to a reader.

Headless Chromium (the Debian package, driven by Playwright for Python)
loads each page from a local HTTP server on 127.0.0.1 and we check what a
reader would notice: a title, no errors in the console, every image loaded,
the maths typeset by MathJax (no raw `$$` or `\\(` left on the page), and
every link inside the site leading to a page and anchor that exist. Any
request that would leave the machine is blocked and reported: the site must
work offline. A screenshot of each page goes to book/_build/screenshots/,
with a summary (sizes, timings) in summary.json.

Accessibility: axe-core (tests/axe.py) audits every page against WCAG 2.1 AA
and finds no serious or critical violation; every figure has alt text that
says what it shows; every special token of the sources (`<EOS>`, `<BOS>`,
`<|im_start|>`) is on the page, not swallowed as an unknown HTML tag. A
chapter is also opened at phone width (390 px): audited, and screenshotted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import pytest
import yaml

from axe import audit, blocking, describe
from booksite import BUILD, HTML, ROOT, built_book, loopback_only, serve
from lmcourse import figure_notes
from lmcourse.instructor.book import special_tokens
from lmcourse.instructor.slides import CHROMIUM_ARGS, chromium as chromium_binary

pytestmark = pytest.mark.slow

SCREENSHOTS = BUILD / "screenshots"
def _pages_from_toc() -> list[str]:
    """Pages a reader can reach: every _toc.yml entry, plus Sphinx's search and index pages."""
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            pages.append(chapter["file"])
            pages += [s["file"] for s in chapter.get("sections", [])]
    return pages + ["search", "genindex"]


PAGES = _pages_from_toc()


@dataclass
class PageVisit:
    """What the browser saw on one page."""

    url: str
    status: int = 0
    title: str = ""
    console_errors: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    maths: int = 0  # elements Sphinx marked as maths
    typeset: int = 0  # of those, the ones MathJax replaced by its output
    tex_errors: list[str] = field(default_factory=list)
    raw_tex: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # absolute URLs of <a href> on this server
    screenshot: str = ""
    screenshot_bytes: int = 0
    size: tuple[int, int] = (0, 0)
    seconds: float = 0.0
    violations: list[dict] = field(default_factory=list)  # axe-core's, all impacts
    text: str = ""  # the page's text, as the DOM holds it (code blocks and hidden cells included)
    figures: list[dict] = field(default_factory=list)  # the executed cells' images: src, alt, widths
    column: int = 0  # the article's content width in CSS pixels


@pytest.fixture(scope="module")
def server():
    """The built site over HTTP on a free loopback port (as a reader's browser gets it)."""
    book = built_book()
    if not (HTML / "intro.html").exists():
        pytest.fail(f"the book was not built; see test_book.py and book/_build/test-build.log:\n{book.log_tail(30)}")
    with serve(HTML) as url:
        yield url


# JavaScript run in the page once it has loaded.
_WAIT_FOR_IMAGES = """async () => {
  window.scrollTo(0, document.body.scrollHeight);   // wake lazily loaded images
  await Promise.all(Array.from(document.images).map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  window.scrollTo(0, 0);
}"""
_WAIT_FOR_MATHJAX = """async () => {
  if (!document.querySelector('.math')) return 'no maths';
  const start = Date.now();
  while (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
    if (Date.now() - start > 20000) return 'MathJax never started';
    await new Promise(r => setTimeout(r, 50));
  }
  await MathJax.startup.promise;
  return 'typeset';
}"""
_INSPECT = r"""() => {
  const maths = Array.from(document.querySelectorAll('.math'));
  // Text a reader sees, outside code blocks and MathJax's own output.
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode: n =>
      n.parentElement.closest('pre, code, script, style, mjx-container, mjx-assistive-mml, .highlight, textarea')
        ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  const raw = [];
  while (walker.nextNode()) {
    const t = walker.currentNode.textContent;
    if (/\$\$|\\\(|\\\[|\\begin\{/.test(t)) raw.push(t.trim().slice(0, 80));
  }
  return {
    title: document.title,
    broken: Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)
                 .map(i => i.getAttribute('src')),
    maths: maths.length,
    typeset: maths.filter(m => m.querySelector('mjx-container') || m.tagName === 'MJX-CONTAINER').length,
    texErrors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.getAttribute('data-mjx-error') || e.textContent),
    raw: raw,
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
    text: (document.querySelector('main') || document.body).textContent,
    figures: Array.from(document.querySelectorAll('.cell_output img')).map(i => ({
      src: i.getAttribute('src'), alt: i.getAttribute('alt') || '', natural: i.naturalWidth,
      shown: Math.round(i.getBoundingClientRect().width)})),
    column: (() => { const a = document.querySelector('.bd-article'); if (!a) return 0;
                     const s = getComputedStyle(a);
                     return Math.round(a.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)); })(),
  };
}"""


@pytest.fixture(scope="module")
def visits(server, tmp_path_factory):
    """Open every page once in headless Chromium and record what it shows."""
    chromium = chromium_binary()
    if chromium is None:
        reason = ("Chromium is not installed: the Debian packages `chromium` and `chromium-driver` are needed "
                  "(`make test` installs them when run as root, through tools/ensure-system-deps.sh)")
        if os.geteuid() == 0:
            pytest.fail(reason + "; this run is root, so run `tools/ensure-system-deps.sh` (or `make test`) and re-run")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    results: dict[str, PageVisit] = {}
    start = time.perf_counter()
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # fresh profile: no cache, no cookies
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        outside = loopback_only(context)  # requests that tried to leave the machine
        page = context.new_page()
        for name in PAGES:
            visit = results[name] = PageVisit(url=f"{server}/{name}.html")
            errors = visit.console_errors
            on_console = lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None
            on_error = lambda exc: errors.append(f"uncaught: {exc}")
            on_response = lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None
            page.on("console", on_console)
            page.on("pageerror", on_error)
            page.on("response", on_response)
            t0 = time.perf_counter()
            response = page.goto(visit.url, wait_until="load")
            visit.status = response.status if response else 0
            page.evaluate(_WAIT_FOR_IMAGES)
            mathjax = page.evaluate(_WAIT_FOR_MATHJAX)
            if mathjax == "MathJax never started":
                errors.append("MathJax did not load within 20 s")
            page.wait_for_load_state("networkidle")
            seen = page.evaluate(_INSPECT)
            visit.seconds = time.perf_counter() - t0
            visit.title = seen["title"]
            visit.broken_images = seen["broken"]
            visit.maths, visit.typeset = seen["maths"], seen["typeset"]
            visit.tex_errors, visit.raw_tex = seen["texErrors"], seen["raw"]
            visit.links = [u for u in seen["links"] if u.startswith(server + "/")]
            visit.text, visit.figures, visit.column = seen["text"], seen["figures"], seen["column"]
            visit.violations = audit(page)
            shot = SCREENSHOTS / f"{name.replace('/', '__')}.png"
            page.screenshot(path=str(shot), full_page=True)
            visit.screenshot, visit.screenshot_bytes = str(shot.relative_to(ROOT)), shot.stat().st_size
            visit.size = tuple(page.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"))
            page.remove_listener("console", on_console)
            page.remove_listener("pageerror", on_error)
            page.remove_listener("response", on_response)
        context.close()
    total = time.perf_counter() - start
    summary = {"seconds": round(total, 2), "chromium": chromium, "outside_requests": outside,
               "pages": {n: {"screenshot": v.screenshot, "bytes": v.screenshot_bytes, "size": list(v.size),
                             "seconds": round(v.seconds, 2), "maths": v.maths,
                             "axe": {f"{x['impact']} {x['id']}": len(x["nodes"]) for x in v.violations}}
                         for n, v in results.items()}}
    (SCREENSHOTS / "summary.json").write_text(json.dumps(summary, indent=2))
    return results, outside


@pytest.mark.parametrize("name", PAGES)
def test_page_renders(visits, name):
    visit = visits[0][name]
    where = f"{name}.html"
    assert visit.status == 200, f"{where}: expected HTTP 200, got {visit.status}"
    assert visit.title.strip(), f"{where}: the page has no <title>"
    assert not visit.console_errors, f"{where}: the browser reported errors: {visit.console_errors}"
    assert not visit.broken_images, f"{where}: images that did not load (naturalWidth 0): {visit.broken_images}"
    assert visit.typeset == visit.maths, (
        f"{where}: MathJax typeset {visit.typeset} of {visit.maths} maths elements; open the page and look for raw TeX"
    )
    assert not visit.tex_errors, f"{where}: MathJax could not parse some TeX: {visit.tex_errors}"
    assert not visit.raw_tex, f"{where}: TeX delimiters left as text (maths not typeset): {visit.raw_tex[:5]}"
    assert visit.screenshot_bytes > 10_000, f"{where}: the screenshot {visit.screenshot} is nearly empty"


def test_pages_with_maths_are_typeset(visits):
    """The notation page is all maths: if MathJax never ran, the check above would pass vacuously there."""
    assert visits[0]["course/notation"].typeset >= 20


def test_nothing_is_fetched_from_the_internet(visits):
    outside = visits[1]
    assert not outside, (
        f"pages asked for {len(outside)} resources outside 127.0.0.1 (the site must work offline): "
        f"{sorted(set(outside))[:10]}"
    )


def test_every_internal_link_resolves(visits, server):
    """Each <a href> inside the site leads to a page that exists, and to an anchor that exists on it."""
    ids_cache: dict[str, set[str] | None] = {}

    def anchors(url: str) -> set[str] | None:
        if url not in ids_cache:
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    body = r.read().decode("utf-8", "replace")
                ids_cache[url] = set(re.findall(r"\b(?:id|name)=[\"']([^\"']+)", body))
            except urllib.error.HTTPError:
                ids_cache[url] = None
        return ids_cache[url]

    broken = []
    for name, visit in visits[0].items():
        for link in sorted(set(visit.links)):
            target, _, fragment = link.partition("#")
            if target.endswith("/"):
                target += "index.html"
            found = anchors(target)
            if found is None:
                broken.append(f"{name}.html -> {link} (no such file)")
            elif fragment and target.endswith(".html") and urllib.parse.unquote(fragment) not in found:
                broken.append(f"{name}.html -> {link} (no element with id {fragment!r})")
    assert not broken, f"{len(broken)} links inside the site lead nowhere:\n" + "\n".join(broken[:30])


# --- accessibility, special tokens, figures -------------------------------------------------------


@pytest.mark.parametrize("name", PAGES)
def test_page_has_no_serious_accessibility_violation(visits, name):
    found = blocking(visits[0][name].violations)
    assert not found, f"{name}.html: axe-core finds serious or critical WCAG violations:\n{describe(found)}"


def _source_text(name: str) -> str:
    """What a page is made from: its Markdown (roles' hidden targets removed), a chapter's question file
    and its executed outputs."""
    text = (ROOT / "book" / f"{name}.md").read_text(encoding="utf-8") if (ROOT / "book" / f"{name}.md").exists() else ""
    # `{term}`embedding <Embedding>``: the part in <> is the glossary entry linked, not text on the page
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", text)
    if name.startswith("units/"):
        quiz_file = ROOT / "book" / "quizzes" / f"{name.split('/', 1)[1]}.yaml"
        if quiz_file.exists():
            text += quiz_file.read_text(encoding="utf-8")
    return text


@pytest.mark.parametrize("name", [p for p in PAGES if (ROOT / "book" / f"{p}.md").exists()])
def test_special_tokens_survive_to_the_page(visits, name):
    """`<EOS>` in a caption once reached the page as an unknown tag and vanished ("the last row wrote )")."""
    expected = special_tokens(_source_text(name))
    missing = sorted(tok for tok in expected if tok not in visits[0][name].text)
    assert not missing, (f"{name}.html: the sources write {missing} but the page does not show them: the browser took "
                         "them for HTML tags (write them in `code`, or check lmcourse.instructor.book._keep_special_tokens)")


def test_special_tokens_are_checked_where_they_matter(visits):
    """The check above is not vacuous: the chapters that use special tokens are among the pages it reads."""
    for name, tokens in {"units/01-ngrams": {"<BOS>", "<EOS>", "<UNK>"}, "units/04-attention": {"<EOS>"},
                         "units/08-capstone": {"<|im_start|>", "<|im_end|>"}}.items():
        assert tokens <= special_tokens(_source_text(name)), f"{name}: expected its sources to write {tokens}"


def test_every_figure_says_what_it_shows(visits):
    """Each image a chapter's code drew has alt text from lmcourse.figure_notes, not its file name."""
    bad, counted = [], 0
    for name, visit in visits[0].items():
        for fig in visit.figures:
            counted += 1
            alt = fig["alt"].strip()
            if len(alt) < 30 or "_images/" in alt or alt.lower() in {"figure", "image", "plot"}:
                bad.append(f"{name}.html {fig['src']}: alt={alt!r}")
    assert counted >= 40, f"only {counted} figures found on the chapters' pages; the selector missed them"
    assert not bad, f"{len(bad)} figures without a description:\n" + "\n".join(bad[:10])


def test_the_column_is_as_wide_as_the_figures_assume(visits):
    """Figure legibility (tests/test_book.py) is computed for a column of figure_notes.PAGE_WIDTH_PX at 1280 px."""
    column = visits[0]["units/04-attention"].column
    assert column >= figure_notes.PAGE_WIDTH_PX - 1, (
        f"a chapter's column is {column} px wide in a 1280-px window, narrower than the {figure_notes.PAGE_WIDTH_PX} "
        "px the figures' font sizes are checked at: lower lmcourse.figure_notes.PAGE_WIDTH_PX")
    for fig in visits[0]["units/04-attention"].figures:
        assert fig["shown"] >= min(fig["natural"], figure_notes.PAGE_WIDTH_PX) - 1, fig


def test_axe_finds_a_planted_violation(server):
    """The accessibility check can fail: an image without alt text and grey-on-grey text are found."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_binary(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{server}/intro.html", wait_until="load")
        page.evaluate("""() => { const m = document.querySelector('main');
          m.insertAdjacentHTML('afterbegin', '<img src="_static/images/logo_binder.svg">' +
            '<p style="color:#aaa;background:#bbb">unreadable</p>'); }""")
        found = {v["id"] for v in blocking(audit(page))}
        browser.close()
    assert {"image-alt", "color-contrast"} <= found, f"axe-core found only {found} on a page with planted violations"


PAGE_SHOTS = BUILD / "page-screenshots"  # a reader's first screen, at desktop and at phone width


@pytest.mark.parametrize("width", [1280, 390])
def test_a_chapter_at_desktop_and_phone_width(server, width):
    """A reader's first screen of a chapter and of the landing page, on a laptop and on a phone (390 px): no
    sideways scrolling, no serious violation at that width either, and a screenshot of each to look at
    (book/_build/page-screenshots/<page>-<width>.png)."""
    from playwright.sync_api import sync_playwright

    PAGE_SHOTS.mkdir(parents=True, exist_ok=True)
    phone = width < 600
    results = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_binary(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": width, "height": 844 if phone else 900},
                                      device_scale_factor=2 if phone else 1, is_mobile=phone, has_touch=phone)
        loopback_only(context)
        page = context.new_page()
        for name in ("intro", "units/04-attention"):
            page.goto(f"{server}/{name}.html", wait_until="load")
            page.evaluate(_WAIT_FOR_IMAGES)
            page.evaluate(_WAIT_FOR_MATHJAX)
            page.screenshot(path=str(PAGE_SHOTS / f"{name.replace('/', '__')}-{width}.png"))
            results[name] = {"width": page.evaluate("document.documentElement.scrollWidth"),
                             "violations": blocking(audit(page))}
        browser.close()
    for name, r in results.items():
        assert r["width"] <= width + 1, f"{name}.html scrolls sideways at {width} px (the page is {r['width']} px wide)"
        assert not r["violations"], f"{name}.html at {width} px:\n{describe(r['violations'])}"
