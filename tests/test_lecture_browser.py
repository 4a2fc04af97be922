"""The lecture materials, opened in a real browser: every slide of every deck, every chapter's self-check.

Headless Chromium (as in test_browser.py) loads the built site from a loopback
HTTP server; any request leaving 127.0.0.1 is refused and reported.

- **Decks.** Each deck is stepped through slide by slide at 1280x720: no
  console error, every image loaded, every maths element typeset by MathJax
  (no TeX error), and nothing cut off: every element of the slide lies inside
  the slide's box, and no code or output block hides a wider line. A
  screenshot of every slide goes to book/_build/slide-screenshots/. The PDF
  beside each deck has one page per slide.
- **Self-checks.** On every chapter, one multiple-choice question is answered
  wrongly, then rightly, and a numeric one wrongly: each time the feedback
  shown is the one written for that answer, marked right or wrong.
"""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest

from booksite import BUILD, HTML, ROOT, built_book, loopback_only, serve
from lmcourse import quiz
from lmcourse.instructor import slides

pytestmark = pytest.mark.slow

SHOTS = BUILD / "slide-screenshots"  # not under screenshots/, which test_browser.py empties
DECKS = sorted(p.stem for p in (ROOT / slides.SLIDES_SRC).glob("*.md"))
QUIZZES = sorted(p.stem for p in (ROOT / "book" / "quizzes").glob("*.yaml"))

# Everything about the slide on screen that a reader would notice.
_INSPECT_SLIDE = r"""() => {
  const slide = Reveal.getCurrentSlide();
  const box = document.querySelector('.reveal .slides').getBoundingClientRect();
  const outside = [];
  for (const el of slide.querySelectorAll('*')) {
    if (el.closest('aside.notes, mjx-assistive-mml')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
      outside.push(`${el.tagName.toLowerCase()}.${el.className || ''}: ` +
                   `[${Math.round(r.left)}, ${Math.round(r.top)}, ${Math.round(r.right)}, ${Math.round(r.bottom)}]`);
  }
  const clipped = Array.from(slide.querySelectorAll('pre, .output-table'))
      .filter(el => el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1)
      .map(el => (el.textContent || '').trim().slice(0, 60));
  const maths = Array.from(slide.querySelectorAll('.math'));
  return {
    index: Reveal.getIndices().h,
    box: [box.width, box.height],
    outside: outside.slice(0, 5),
    clipped: clipped,
    images: slide.querySelectorAll('img').length,
    broken: Array.from(slide.querySelectorAll('img')).filter(i => !i.complete || i.naturalWidth === 0)
                 .map(i => i.getAttribute('src')),
    maths: maths.length,
    typeset: maths.filter(m => m.querySelector('mjx-container')).length,
    texErrors: Array.from(slide.querySelectorAll('mjx-merror')).map(e => e.getAttribute('data-mjx-error') || e.textContent),
    notes: (slide.querySelector('aside.notes') || {textContent: ''}).textContent.trim().length,
  };
}"""


def _browser(pw, tmp_path_factory, viewport):
    chromium = slides.chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian packages `chromium`, `chromium-driver`; `make test` installs "
                    "them as root)")
    context = pw.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")), executable_path=chromium, headless=True,
        args=slides.CHROMIUM_ARGS, viewport=viewport)
    return context, loopback_only(context)


def _watch(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return errors


@pytest.fixture(scope="module")
def site():
    book = built_book()
    if not (HTML / "slides" / "summary.json").exists():
        pytest.fail(f"the book (with its decks) was not built; see book/_build/test-build.log:\n{book.log_tail(30)}")
    with serve(HTML) as url:
        yield url


@pytest.fixture(scope="module")
def deck_visits(site, tmp_path_factory):
    """Every slide of every deck, as the browser showed it."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    seen: dict[str, dict] = {}
    with sync_playwright() as pw:
        context, outside = _browser(pw, tmp_path_factory, {"width": slides.WIDTH, "height": slides.HEIGHT})
        page = context.new_page()
        for unit in DECKS:
            errors = _watch(page)
            page.goto(f"{site}/slides/{unit}.html", wait_until="load")
            state = page.evaluate(slides.WAIT_FOR_DECK)
            total = page.evaluate("Reveal.getTotalSlides()")
            shown = []
            for i in range(total):
                page.evaluate(f"Reveal.slide({i})")
                page.wait_for_timeout(60)
                info = page.evaluate(_INSPECT_SLIDE)
                shot = SHOTS / f"{unit}-{i + 1:02d}.png"
                page.screenshot(path=str(shot))
                info["screenshot"] = str(shot.relative_to(ROOT))
                shown.append(info)
            seen[unit] = {"state": state, "total": total, "slides": shown, "errors": list(errors)}
            page.close()
            page = context.new_page()
        context.close()
    (SHOTS / "summary.json").write_text(json.dumps(
        {u: {"slides": v["total"], "screenshots": [s["screenshot"] for s in v["slides"]]} for u, v in seen.items()},
        indent=1))
    return seen, outside


@pytest.mark.parametrize("unit", DECKS)
def test_every_slide_shows_fully(deck_visits, unit):
    visit = deck_visits[0][unit]
    assert visit["state"] == "ready", f"{unit}: {visit['state']}"
    source = slides.parse_deck(ROOT / slides.SLIDES_SRC / f"{unit}.md")
    assert visit["total"] == len(source.slides), f"{unit}: the page has {visit['total']} slides, its source {len(source.slides)}"
    assert not visit["errors"], f"{unit}: the browser reported errors: {visit['errors'][:5]}"
    problems = []
    for s in visit["slides"]:
        where = f"{unit} slide {s['index'] + 1} ({s['screenshot']})"
        if s["outside"]:
            problems.append(f"{where}: content beyond the slide's edge: {s['outside']}")
        if s["clipped"]:
            problems.append(f"{where}: a code or output block wider or taller than its box: {s['clipped']}")
        if s["broken"]:
            problems.append(f"{where}: images that did not load: {s['broken']}")
        if s["typeset"] != s["maths"] or s["texErrors"]:
            problems.append(f"{where}: {s['typeset']} of {s['maths']} maths typeset, TeX errors {s['texErrors']}")
        if s["notes"] < 40:
            problems.append(f"{where}: no speaker notes")
    assert not problems, "\n".join(problems)


def test_decks_show_figures_and_maths(deck_visits):
    """The checks above are not vacuous: the decks do show figures and typeset maths."""
    visits = deck_visits[0]
    assert sum(s["images"] for v in visits.values() for s in v["slides"]) >= 2 * len(visits)
    assert sum(s["typeset"] for v in visits.values() for s in v["slides"]) >= 20


def test_decks_fetch_nothing_from_the_internet(deck_visits):
    assert not deck_visits[1], f"the decks asked for resources outside 127.0.0.1: {sorted(set(deck_visits[1]))[:10]}"


@pytest.mark.parametrize("unit", DECKS)
def test_each_deck_has_a_pdf_with_a_page_per_slide(site, unit):
    pdf = HTML / "slides" / f"{unit}.pdf"
    assert pdf.exists(), f"{pdf} was not printed (needs Chromium at build time)"
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf.read_bytes()))
    expected = len(slides.parse_deck(ROOT / slides.SLIDES_SRC / f"{unit}.md").slides)
    assert pages == expected, f"{unit}.pdf has {pages} pages for {expected} slides (a slide that overflows adds pages)"
    notes = HTML / "slides" / f"{unit}-notes.pdf"
    assert notes.exists(), f"{notes} was not printed"
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", notes.read_bytes()))
    # Chromium ends reveal.js's notes layout with one blank page (its last notes block breaks after itself);
    # the slides' own PDF above is the exact count.
    assert 2 * expected <= pages <= 2 * expected + 1, \
        f"{notes.name} has {pages} pages for {expected} slides, each followed by its notes"


# --- self-check questions in the chapters -----------------------------------------------

_ANSWER = r"""async ([correct]) => {
  const q = Array.from(document.querySelectorAll('.Quiz')).find(w => w.querySelector('.MultipleChoiceQn'));
  if (!q) return {error: 'no multiple-choice question on the page'};
  const label = q.querySelector(`label.MCButton[data-correct="${correct}"]`);
  label.click();
  await new Promise(r => setTimeout(r, 200));
  const fb = q.querySelector('.Feedback');
  const decoded = document.createElement('div');
  decoded.innerHTML = label.dataset.feedback;   // the text as written in the question file
  return {expected: decoded.textContent, shown: fb.textContent.trim(), classes: fb.className,
          question: q.querySelector('.MultipleChoiceQn').textContent.trim().slice(0, 80)};
}"""
_NUMERIC = r"""() => {
  const inp = document.querySelector('.Quiz .NumericQn ~ .Answer input.Input-text, .Quiz input.Input-text');
  if (!inp) return null;
  const answers = JSON.parse(inp.dataset.answers);
  const p = inp.dataset.precision;
  const typed = x => p > 0 ? Number(Number(x).toPrecision(p)) : x;   // what jupyterquiz compares
  const wrong = answers.find(a => a.type === 'range' && a.correct === false);
  const right = answers.find(a => a.type === 'value' && a.correct === true);
  let value = null;
  if (wrong) {   // a number a student could type that lands in the range once rounded to `precision`
    const [lo, hi] = wrong.range;
    value = [lo, (lo + hi) / 2, hi - (hi - lo) / 1000].map(typed).find(v => v >= lo && v < hi);
    if (value === undefined) return {id: inp.id, unreachable: wrong.range, precision: p};
  }
  return {id: inp.id, wrong: value, wrongFeedback: wrong ? wrong.feedback : null,
          right: right.value, rightFeedback: right.feedback};
}"""


def _words(text: str) -> str:
    """The first words of a feedback text outside its maths (MathJax rewrites the maths on the page)."""
    prose = re.sub(r"\$[^$]*\$|\\\(.*?\\\)", " ", text)
    return " ".join(re.sub(r"[*_`]", "", prose).split()[:4])


def _shows(shown: str, expected: str) -> bool:
    return _words(expected) in " ".join(shown.split())


@pytest.fixture(scope="module")
def quiz_visits(site, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    seen = {}
    with sync_playwright() as pw:
        context, outside = _browser(pw, tmp_path_factory, {"width": 1280, "height": 900})
        for unit in QUIZZES:
            page = context.new_page()
            errors = _watch(page)
            page.goto(f"{site}/units/{unit}.html", wait_until="load")
            # jupyterquiz draws each section's questions from its own script: wait for all of them
            expected = sum(len(qs) for qs in quiz.load(unit, ROOT / "book" / "quizzes").values())
            try:
                page.wait_for_function(f"document.querySelectorAll('.Quiz').length >= {expected}", timeout=20000)
            except Exception:  # noqa: BLE001 (a timeout: the count is compared in the test, with its message)
                pass
            record = {"quizzes": page.evaluate("document.querySelectorAll('.Quiz').length"),
                      "wrong": page.evaluate(_ANSWER, ["false"]), "right": page.evaluate(_ANSWER, ["true"])}
            numeric = page.evaluate(_NUMERIC)
            if numeric and "unreachable" in numeric:
                record["unreachable"] = numeric
            elif numeric:
                box = page.locator(f"[id='{numeric['id']}']")
                for which in ("wrong", "right"):
                    if numeric[which] is None:
                        continue
                    box.click()
                    box.fill("")
                    box.type(repr(numeric[which]))
                    box.press("Enter")
                    page.wait_for_timeout(200)
                    fb = page.evaluate(f"(() => {{ const i = document.getElementById('{numeric['id']}'); "
                                       "const f = i.closest('.Quiz').querySelector('.Feedback'); "
                                       "return {shown: f.textContent.trim(), classes: f.className}; })()")
                    record[f"numeric_{which}"] = {**fb, "expected": numeric[f"{which}Feedback"]}
            record["errors"] = list(errors)
            seen[unit] = record
            page.close()
        context.close()
    return seen, outside


@pytest.mark.parametrize("unit", QUIZZES)
def test_self_checks_answer_in_the_browser(quiz_visits, unit):
    visit = quiz_visits[0][unit]
    expected = sum(len(qs) for qs in quiz.load(unit, ROOT / "book" / "quizzes").values())
    assert visit["quizzes"] == expected, f"{unit}: {visit['quizzes']} questions on the page, {expected} in its file"
    written = {" ".join(a["feedback"].split()) for qs in quiz.load(unit, ROOT / "book" / "quizzes").values()
               for q in qs for a in q["answers"]}
    for which, mark in (("wrong", "incorrect"), ("right", "correct")):
        r = visit[which]
        assert "error" not in r, f"{unit}: {r.get('error')}"
        assert " ".join(r["expected"].split()) in written, f"{unit}: the page's feedback {r['expected']!r} is not in its file"
        assert mark in r["classes"].split(), f"{unit}: a {which} answer to {r['question']!r} was marked {r['classes']!r}"
        assert _shows(r["shown"], r["expected"]), \
            f"{unit}: after a {which} answer the page shows {r['shown']!r}, not its feedback {r['expected']!r}"
    assert "unreachable" not in visit, (f"{unit}: no number rounded to the question's precision lands in the wrong-answer "
                                        f"range: {visit.get('unreachable')}")
    if "numeric_wrong" in visit:
        r = visit["numeric_wrong"]
        assert "incorrect" in r["classes"].split(), f"{unit}: a wrong numeric answer was marked {r['classes']!r}"
        assert _shows(r["shown"], r["expected"]), f"{unit}: shown {r['shown']!r}, not {r['expected']!r}"
    if "numeric_right" in visit:
        assert "correct" in visit["numeric_right"]["classes"].split(), f"{unit}: the right numeric answer was refused"
    assert not visit["errors"], f"{unit}: the browser reported errors: {visit['errors'][:5]}"


def test_every_chapter_has_a_numeric_self_check(quiz_visits):
    missing = [u for u, v in quiz_visits[0].items() if "numeric_wrong" not in v]
    assert not missing, f"chapters whose page offers no numeric question with a typical wrong answer: {missing}"


def test_self_checks_fetch_nothing_from_the_internet(quiz_visits):
    assert not quiz_visits[1], f"the chapters asked for resources outside 127.0.0.1: {sorted(set(quiz_visits[1]))[:10]}"


# --- every figure, for reuse ---------------------------------------------------------------


def test_every_figure_is_exported_as_svg_and_png(site):
    """Each image a chapter draws belongs to a named figure, exported as figures/<unit>/<name>.svg and .png."""
    unnamed, missing, exported = [], [], 0
    for md in sorted((ROOT / slides.UNITS_SRC).glob("*.md")):
        for cell in slides.executed_cells(ROOT, md.stem):
            if cell["cell_type"] != "code" or not any(k.startswith("image/") for o in cell.get("outputs", [])
                                                      for k in o.get("data", {})):
                continue
            name = slides._figure_name(cell)
            if not name:
                unnamed.append(f"{md.stem}: {''.join(cell['source'])[:60]!r}")
                continue
            for ext in ("svg", "png"):
                path = HTML / "figures" / md.stem / f"{name}.{ext}"
                if not path.exists() or path.stat().st_size < 1000:
                    missing.append(str(path.relative_to(HTML)))
            svg = HTML / "figures" / md.stem / f"{name}.svg"
            if svg.exists():
                assert svg.read_text()[:400].lstrip().startswith(("<?xml", "<svg")), f"{svg} is not an SVG"
            exported += 1
    assert not unnamed, f"images drawn outside a named figure cell (no stable name to export them under): {unnamed}"
    assert not missing, f"figures not exported: {missing}"
    assert exported >= 40, f"only {exported} figures found in the executed chapters"
    gallery = (HTML / "figures" / "index.html").read_text()
    assert gallery.count("<figure>") == exported


def test_every_chapter_links_to_its_deck_and_figures(site):
    for unit in DECKS:
        page = (HTML / "units" / f"{unit}.html").read_text()
        for href in (f"../slides/{unit}.html", f"../slides/{unit}.pdf", f"../slides/{unit}-notes.pdf",
                     f"../figures/index.html#{unit}"):
            assert f'href="{href}"' in page, f"units/{unit}.html has no link to {href}"


# --- instructor notes (built beside the site) ---------------------------------------------

_INSPECT_NOTES = r"""async () => {
  if (document.querySelector('.math')) { await MathJax.startup.promise; }
  const maths = Array.from(document.querySelectorAll('.math'));
  return {
    title: document.title,
    maths: maths.length, typeset: maths.filter(m => m.querySelector('mjx-container')).length,
    texErrors: document.querySelectorAll('mjx-merror').length,
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
    mistakes: Array.from(document.querySelectorAll('h3')).length,
  };
}"""


def test_instructor_pages_render_and_link_to_the_materials(site, tmp_path_factory):
    """Each unit's notes page: maths typeset, no console error, and its links (deck, PDF, figures,
    chapter) lead to files that exist."""
    from playwright.sync_api import sync_playwright

    built = BUILD / "instructors"
    problems = []
    with serve(BUILD) as url, sync_playwright() as pw:
        context, outside = _browser(pw, tmp_path_factory, {"width": 1280, "height": 900})
        for unit in DECKS:
            page = context.new_page()
            errors = _watch(page)
            page.goto(f"{url}/instructors/{unit}.html", wait_until="load")
            seen = page.evaluate(_INSPECT_NOTES)
            if errors:
                problems.append(f"{unit}: browser errors {errors[:3]}")
            if seen["typeset"] != seen["maths"] or seen["texErrors"]:
                problems.append(f"{unit}: {seen['typeset']} of {seen['maths']} maths typeset, {seen['texErrors']} TeX errors")
            for link in seen["links"]:
                path = urllib.parse.urlsplit(link).path
                if link.startswith(url) and not (BUILD / path.lstrip("/")).exists():
                    problems.append(f"{unit}: broken link {path}")
            page.close()
        context.close()
    assert (built / "index.html").exists()
    assert not outside, f"instructor pages asked for resources outside 127.0.0.1: {outside[:5]}"
    assert not problems, "\n".join(problems)


def test_outputs_come_from_the_cache_not_myst_nbs_copy(site, tmp_path):
    """On a rebuild that takes a chapter's outputs from the cache, myst-nb writes its jupyter_execute copy
    (and the site's downloadable copy) without outputs; the decks and the figure export must still find
    them (in the execution cache), and the downloadable copy gets them back."""
    root = tmp_path / "course"
    (root / "book" / "_build" / "jupyter_execute" / "units").mkdir(parents=True)
    (root / "book" / "units").symlink_to(ROOT / "book" / "units")
    (root / slides.JUPYTER_CACHE).symlink_to(ROOT / slides.JUPYTER_CACHE)
    for md in sorted((ROOT / slides.UNITS_SRC).glob("*.md")):
        empty = {"cells": [{"cell_type": "code", "source": "x", "metadata": {}, "outputs": []}]}
        (root / slides.EXECUTED / f"{md.stem}.ipynb").write_text(json.dumps(empty))
        cells = slides.executed_cells(root, md.stem)
        assert cells and sum(len(c.get("outputs", [])) for c in cells) >= 10, md.stem
    # the copies the book's "download .ipynb" button serves get their outputs back
    html = root / "html"
    (html / "_sources" / "units").mkdir(parents=True)
    (html / "_sources" / "units" / "01-ngrams.ipynb").write_text(json.dumps(empty))
    fixed = slides.restore_outputs(root, html)
    assert "html/_sources/units/01-ngrams.ipynb" in fixed and len(fixed) == 1 + len(list((ROOT / slides.UNITS_SRC).glob("*.md")))
    restored = json.loads((html / "_sources" / "units" / "01-ngrams.ipynb").read_text())
    assert sum(len(c.get("outputs", [])) for c in restored["cells"] if c["cell_type"] == "code") >= 10
    (root / slides.JUPYTER_CACHE).unlink()
    (root / slides.EXECUTED / "01-ngrams.ipynb").write_text(json.dumps(empty))
    assert slides.executed_cells(root, "01-ngrams") is None, "no cache and an empty copy: not executed"


def test_self_checks_work_before_mathjax_arrives(site, tmp_path_factory):
    """The questions are drawn by inline scripts, MathJax by a deferred one: on a slow connection (or a
    loaded machine) a quiz is drawn while `window.MathJax` is still the page's configuration object.
    jupyterquiz's own test (`typeof MathJax != 'undefined'`) then read `MathJax.version[0]` and threw,
    leaving the quiz half-drawn. Here MathJax never arrives at all: every question must still be drawn
    and answer."""
    from playwright.sync_api import sync_playwright

    unit = "07-gpt"
    expected = sum(len(qs) for qs in quiz.load(unit, ROOT / "book" / "quizzes").values())
    with sync_playwright() as pw:
        context, _ = _browser(pw, tmp_path_factory, {"width": 1280, "height": 900})
        page = context.new_page()
        page.route("**/mathjax/**", lambda route: route.abort())
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{site}/units/{unit}.html", wait_until="load")
        try:
            page.wait_for_function(f"document.querySelectorAll('.Quiz').length >= {expected}", timeout=20000)
        except Exception:  # noqa: BLE001 (a timeout: the count is asserted below, with its message)
            pass
        assert page.evaluate("typeof window.MathJax === 'object' && !window.MathJax.version"), \
            "the test needs MathJax's configuration on the page without MathJax itself"
        drawn = page.evaluate("document.querySelectorAll('.Quiz').length")
        answer = page.evaluate(_ANSWER, ["false"])
        context.close()
    assert not errors, f"{unit} without MathJax: {errors[:3]}"
    assert drawn == expected, f"{unit} without MathJax: {drawn} questions drawn of {expected}"
    assert "incorrect" in answer["classes"].split() and _shows(answer["shown"], answer["expected"]), answer


def test_self_checks_drawn_before_mathjax_are_typeset_when_it_arrives(site, tmp_path_factory):
    """The same race the other way round: MathJax arrives five seconds after the questions were drawn.
    The questions' maths must still be typeset (the page's own first pass ignores the document body, so
    nothing else would), with no error on the way."""
    from playwright.sync_api import sync_playwright

    unit = "08-capstone"  # its questions are full of maths
    with sync_playwright() as pw:
        context, _ = _browser(pw, tmp_path_factory, {"width": 1280, "height": 900})
        page = context.new_page()

        def delayed(route):
            url = urllib.parse.urlsplit(route.request.url)
            if url.path.endswith("tex-mml-chtml.js") and "late=1" not in url.query:
                # the page's own request (`?v=<digest>` or none): answer with a loader that waits
                late = url._replace(query="late=1").geturl()
                body = (f"setTimeout(() => {{ const s = document.createElement('script'); s.src = '{late}'; "
                        "document.head.appendChild(s); }, 3000);")
                route.fulfill(status=200, content_type="text/javascript", body=body)
            else:
                route.continue_()

        page.route("**/mathjax/**", delayed)
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{site}/units/{unit}.html", wait_until="load")
        expected = sum(len(qs) for qs in quiz.load(unit, ROOT / "book" / "quizzes").values())
        page.wait_for_function(f"document.querySelectorAll('.Quiz').length >= {expected}", timeout=20000)
        drawn_early = page.evaluate("!window.MathJax.version")
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.typesetPromise", timeout=60000)
        page.wait_for_timeout(1500)
        state = page.evaluate(r"""() => {
          const quizzes = Array.from(document.querySelectorAll('.Quiz'));
          return {typeset: quizzes.reduce((n, q) => n + q.querySelectorAll('mjx-container').length, 0),
                  raw: quizzes.map(q => q.textContent).filter(t => /\\\(|\\\[/.test(t)).map(t => t.slice(0, 80))};
        }""")
        context.close()
    assert drawn_early, "the questions were not drawn before MathJax: the test did not make the race it is about"
    assert not errors, f"{unit} with MathJax late: {errors[:3]}"
    assert state["typeset"] > 0 and not state["raw"], f"{unit} with MathJax late: {state}"
