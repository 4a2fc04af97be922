"""The lecture materials, opened in a real browser: every slide of every deck, every chapter's self-check.

Headless Chromium (as in test_browser.py) loads the built site from a loopback
HTTP server; any request leaving 127.0.0.1 is refused and reported.

- **Decks.** Each deck is stepped through slide by slide at 1280x720: no
  console error, every image loaded, every maths element typeset by MathJax
  (no TeX error), and nothing cut off: every element of the slide lies inside
  the slide's box, and no code or output block hides a wider line. The title
  slide's block sits at the slide's centre. axe-core finds no serious or
  critical accessibility violation, on the page around the slides (controls,
  slide number: one template, audited on the first deck) and on every slide
  (audited at once in reveal.js's print layout, where all are shown and none
  is hidden from assistive technology: axe skips what is); a violation
  planted in a copy of a deck proves the audit can fail. On a phone (390 px wide) the deck
  switches to reveal.js's scroll view and nothing is wider than the screen. A
  screenshot of every slide goes to book/_build/slide-screenshots/, with
  each deck's title and first code slide on a phone, and the first deck's
  PDFs rendered by Chromium's PDF viewer.
- **PDFs.** Each deck's PDF has one page per slide, the title centred on the
  first; the handout (<unit>-notes.pdf) holds every slide above its complete
  speaker notes in type of at least 10 pt, two slides to a page (pypdf reads
  the text and where it lies).

The chapters' self-check questions are tested in tests/test_quiz_browser.py.
"""

from __future__ import annotations

import io
import json
import math
import re
import unicodedata
import urllib.parse

import pytest

from axe import audit, blocking, describe
from booksite import BUILD, HTML, ROOT, built_book, loopback_only, serve, watch
from lmcourse.instructor import slides

pytestmark = pytest.mark.slow

SHOTS = BUILD / "slide-screenshots"  # not under screenshots/, which test_browser.py empties
DECKS = sorted(p.stem for p in (ROOT / slides.SLIDES_SRC).glob("*.md"))
PHONE = {"width": 390, "height": 844}  # a phone held upright (CSS pixels)

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
  // Where the content sits in the box: the union of its text (each text's own extent, not its block's) and
  // its images.
  let ink = null;
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  const rects = Array.from(slide.querySelectorAll('img, svg')).map(el => el.getBoundingClientRect());
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim() || node.parentElement.closest('aside.notes, mjx-assistive-mml')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    rects.push(range.getBoundingClientRect());
  }
  for (const r of rects.filter(r => r.width > 0 && r.height > 0))
    ink = ink ? [Math.min(ink[0], r.left), Math.min(ink[1], r.top), Math.max(ink[2], r.right), Math.max(ink[3], r.bottom)]
              : [r.left, r.top, r.right, r.bottom];
  const clipped = Array.from(slide.querySelectorAll('pre, .output-table'))
      .filter(el => el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1)
      .map(el => (el.textContent || '').trim().slice(0, 60));
  const maths = Array.from(slide.querySelectorAll('.math'));
  return {
    index: Reveal.getIndices().h,
    box: [box.left, box.top, box.width, box.height],
    ink: ink,
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

# The deck on a phone: reveal.js (below 435 px) shows every slide, scaled to the width, one under another.
_INSPECT_PHONE = r"""() => {
  const vw = document.documentElement.clientWidth;
  const sections = Array.from(document.querySelectorAll('.reveal .slides section'));
  const wide = sections.map((s, i) => [i + 1, s.getBoundingClientRect()])
      .filter(([i, r]) => r.left < -1 || r.right > vw + 1)
      .map(([i, r]) => `slide ${i}: ${Math.round(r.left)}..${Math.round(r.right)}`);
  const first = sections[0].getBoundingClientRect();
  return {scrollView: Reveal.isScrollView(), viewport: vw, page: document.documentElement.scrollWidth,
          wide: wide.slice(0, 5), scale: first.width / %d,
          code: sections.findIndex(s => s.querySelector('div.code'))};
}""" % slides.WIDTH


def _browser(pw, tmp_path_factory, viewport):
    chromium = slides.chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian packages `chromium`, `chromium-driver`; `make test` installs "
                    "them as root)")
    context = pw.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")), executable_path=chromium, headless=True,
        args=slides.CHROMIUM_ARGS, viewport=viewport)
    return context, loopback_only(context)


@pytest.fixture(scope="module")
def site():
    book = built_book()
    if not (HTML / "slides" / "summary.json").exists():
        pytest.fail(f"the book (with its decks) was not built; see book/_build/test-build.log:\n{book.log_tail(30)}")
    with serve(HTML) as url:
        yield url


def _on_a_phone(page, unit: str) -> dict:
    """The deck now open, resized to a phone: reveal.js's scroll view; screenshots of its title and first code slide."""
    page.set_viewport_size(PHONE)
    page.wait_for_function("Reveal.isScrollView()", timeout=30000)  # generous: a loaded machine is slow
    page.evaluate("fitMaths()")
    seen = page.evaluate(_INSPECT_PHONE)
    page.screenshot(path=str(SHOTS / f"{unit}-phone-01.png"))
    if seen["code"] > 0:
        page.evaluate(f"document.querySelectorAll('.reveal .scroll-page')[{seen['code']}].scrollIntoView()")
        page.wait_for_timeout(100)
        page.screenshot(path=str(SHOTS / f"{unit}-phone-{seen['code'] + 1:02d}.png"))
    return seen


def _planted_violation(page, site: str, unit: str) -> list[dict]:
    """The audit the decks pass, run on a copy of one whose second slide shows an image without alt text."""
    text = (HTML / "slides" / f"{unit}.html").read_text(encoding="utf-8")
    src = re.search(r'src="(\.\./figures/[^"]+)"', text).group(1)
    planted = re.sub(r'(<section data-slide="2">)', rf'\1<img src="{src}" class="planted">', text, count=1)
    assert planted != text
    page.route(lambda url: "/slides/planted-" in url,
               lambda route: route.fulfill(status=200, content_type="text/html", body=planted))
    page.goto(f"{site}/slides/planted-{unit}.html?print-pdf", wait_until="load")
    assert page.evaluate(slides.WAIT_FOR_DECK) == "ready"
    return audit(page)


def _pdf_picture(page, url: str, out, size: dict) -> None:
    """Page 1 of a PDF as Chromium's PDF viewer draws it, cropped to the paper (the viewer's grey around it cut)."""
    from PIL import Image

    page.set_viewport_size(size)
    page.goto(f"{url}#page=1&toolbar=0&navpanes=0&view=Fit", wait_until="load")
    for _ in range(100):  # the viewer starts a plugin and draws later than `load`: wait for white paper
        shot = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
        white = shot.convert("L").point(lambda v: 255 if v > 250 else 0)
        paper = white.getbbox()
        if paper and (paper[2] - paper[0]) * (paper[3] - paper[1]) > 0.3 * size["width"] * size["height"]:
            # the first page only: stop at the viewer's grey gap before the next page, if one shows (a row with
            # no white at all: a rule or a frame drawn on the paper leaves white at its ends)
            import numpy as np

            rows = (np.asarray(white.crop(paper)) > 0).mean(axis=1)
            gap = next((i for i, w in enumerate(rows) if w < 0.02), len(rows))
            shot.crop((paper[0], paper[1], paper[2], paper[1] + gap)).save(out)
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"Chromium's PDF viewer drew no page of {url} in 10 s")


@pytest.fixture(scope="module")
def deck_visits(site, tmp_path_factory):
    """Every slide of every deck, as the browser showed it; each deck's accessibility audits and its look on a
    phone; the audit of a copy with a planted violation; pictures of the first deck's PDFs. One browser for
    all of it: a start costs CI seconds."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    seen: dict[str, dict] = {}
    with sync_playwright() as pw:
        context, outside = _browser(pw, tmp_path_factory, {"width": slides.WIDTH, "height": slides.HEIGHT})
        for unit in DECKS:
            page = context.new_page()
            errors = watch(page)
            page.goto(f"{site}/slides/{unit}.html", wait_until="load")
            state = page.evaluate(slides.WAIT_FOR_DECK)
            total = page.evaluate("Reveal.getTotalSlides()")
            # The page around the slides (controls, slide number, the document's language and title) is the same
            # template in every deck: audited on the first. The slides themselves are audited below, every one.
            axe_page = audit(page) if unit == DECKS[0] else []
            shown = []
            for i in range(total):
                page.evaluate(f"Reveal.slide({i})")
                page.wait_for_timeout(60)
                info = page.evaluate(_INSPECT_SLIDE)
                shot = SHOTS / f"{unit}-{i + 1:02d}.png"
                page.screenshot(path=str(shot))
                info["screenshot"] = str(shot.relative_to(ROOT))
                shown.append(info)
            phone = _on_a_phone(page, unit)
            page.close()
            # Every slide at once for axe, which skips what is hidden: reveal.js's print layout shows them all.
            page = context.new_page()
            errors += watch(page)
            page.goto(f"{site}/slides/{unit}.html?print-pdf", wait_until="load")
            printed = page.evaluate(slides.WAIT_FOR_DECK)
            # axe leaves out what is hidden from assistive technology too: every slide must be exposed here
            unaudited = page.evaluate("document.querySelectorAll('.reveal .slides section[hidden], "
                                      ".reveal .slides section[aria-hidden=\"true\"]').length")
            axe_slides = audit(page) if printed == "ready" else []
            page.close()
            seen[unit] = {"state": state, "printed": printed, "total": total, "slides": shown, "errors": list(errors),
                          "axe": axe_page + axe_slides, "unaudited": unaudited, "phone": phone}
        page = context.new_page()
        planted = _planted_violation(page, site, DECKS[0])
        page.close()
        # The PDFs as a reader's viewer draws them (the viewer is part of Chromium: let its own files through).
        page = context.new_page()
        page.route(lambda url: url.startswith(("chrome-extension://", "chrome://")), lambda route: route.continue_())
        _pdf_picture(page, f"{site}/slides/{DECKS[0]}.pdf", SHOTS / f"{DECKS[0]}-pdf-page1.png",
                     {"width": slides.WIDTH, "height": slides.HEIGHT})
        _pdf_picture(page, f"{site}/slides/{DECKS[0]}.pdf", SHOTS / f"{DECKS[0]}-pdf-page1-390.png",
                     {"width": 390, "height": 300})  # a phone's width, the page fitted to it
        _pdf_picture(page, f"{site}/slides/{DECKS[0]}-notes.pdf", SHOTS / f"{DECKS[0]}-handout-page1.png",
                     {"width": 900, "height": 1273})  # A4's proportions
        page.close()
        context.close()
    (SHOTS / "summary.json").write_text(json.dumps(
        {u: {"slides": v["total"], "screenshots": [s["screenshot"] for s in v["slides"]]} for u, v in seen.items()},
        indent=1))
    return {"decks": seen, "outside": outside, "planted": planted}


@pytest.mark.parametrize("unit", DECKS)
def test_every_slide_shows_fully(deck_visits, unit):
    visit = deck_visits["decks"][unit]
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


@pytest.mark.parametrize("unit", DECKS)
def test_the_title_slide_is_centred(deck_visits, unit):
    """The title block's centre within 10% (of the slide's size) of the slide's centre, both ways."""
    title = deck_visits["decks"][unit]["slides"][0]
    left, top, width, height = title["box"]
    x0, y0, x1, y1 = title["ink"]
    dx, dy = ((x0 + x1) / 2 - (left + width / 2)) / width, ((y0 + y1) / 2 - (top + height / 2)) / height
    assert abs(dx) < 0.1 and abs(dy) < 0.1, \
        f"{unit}: the title slide's content is off centre by {dx:+.0%} of the width, {dy:+.0%} of the height"


@pytest.mark.parametrize("unit", DECKS)
def test_every_deck_passes_axe(deck_visits, unit):
    visit = deck_visits["decks"][unit]
    assert visit["printed"] == "ready", f"{unit} in reveal.js's print layout (audited there): {visit['printed']}"
    assert not visit["unaudited"], (f"{unit}: {visit['unaudited']} slides of the print layout are hidden from "
                                    "assistive technology, so axe did not audit them")
    found = blocking(visit["axe"])
    assert not found, f"{unit}: axe-core's serious or critical violations:\n{describe(found)}"


def test_the_deck_audit_catches_a_planted_violation(deck_visits):
    """The audit above is not vacuous: an image without alt text, planted on a copy's slide, fails it."""
    found = blocking(deck_visits["planted"])
    assert any(v["id"] == "image-alt" and any("planted" in n["html"] for n in v["nodes"]) for v in found), \
        f"axe did not report the planted image without alt text: {describe(deck_visits['planted'])}"


@pytest.mark.parametrize("unit", DECKS)
def test_a_deck_reads_on_a_phone(deck_visits, unit):
    phone = deck_visits["decks"][unit]["phone"]
    assert phone["scrollView"], f"{unit} at {PHONE['width']} px: reveal.js did not switch to its scroll view"
    assert phone["page"] <= phone["viewport"], f"{unit}: the page scrolls sideways on a phone ({phone['page']} px wide)"
    assert not phone["wide"], f"{unit}: slides wider than a phone's screen: {phone['wide']}"
    assert phone["scale"] > 0.25, f"{unit}: slides shown at {phone['scale']:.0%} of their size on a phone"


def test_decks_show_figures_and_maths(deck_visits):
    """The checks above are not vacuous: the decks do show figures and typeset maths."""
    visits = deck_visits["decks"]
    assert sum(s["images"] for v in visits.values() for s in v["slides"]) >= 2 * len(visits)
    assert sum(s["typeset"] for v in visits.values() for s in v["slides"]) >= 20


def test_decks_fetch_nothing_from_the_internet(deck_visits):
    assert not deck_visits["outside"], \
        f"the decks asked for resources outside 127.0.0.1: {sorted(set(deck_visits['outside']))[:10]}"


def test_the_pdfs_were_pictured(deck_visits):
    for name in (f"{DECKS[0]}-pdf-page1.png", f"{DECKS[0]}-pdf-page1-390.png", f"{DECKS[0]}-handout-page1.png"):
        assert (SHOTS / name).stat().st_size > 4_000, f"{name}: Chromium's PDF viewer drew nothing"


# --- the PDFs, read back -------------------------------------------------------------------------------


# A line of a content stream that draws (a path and its painting), as Chromium's PDF writer puts one operator a line.
_DRAWING = re.compile(rb"(?m)^(?:[-+.\d ]+ )?(?:[mlcvyh]|re|[fFSsBbn]\*?|W\*? n)\r?\n")


def _pdf_pages(path, read: int | None = None) -> list[dict]:
    """Each page of a PDF, read by pypdf (the `test` extra installs it): {"size": (width, height) in points,
    "text": its text, "placed": [(x, y, size, text), ...] from the bottom left corner}; the text of the first
    `read` pages only, when given (the others: "" and []).

    The pages' drawing operators are dropped before the text is read: the checks read text only, and a figure
    of thousands of points (01's Zipf plot, 11 MB of paths) costs pypdf seconds to parse.
    """
    try:
        from pypdf import PdfReader
        from pypdf.generic import DecodedStreamObject, NameObject
    except ImportError:
        pytest.fail("pypdf is not installed: the PDF tests read the decks' PDFs with it (pip install -e '.[test]')")
    assert path.exists(), f"{path} was not printed (needs Chromium at build time)"
    pages = []
    for number, page in enumerate(PdfReader(path).pages):
        size = (float(page.mediabox.width), float(page.mediabox.height))
        if read is not None and number >= read:
            pages.append({"size": size, "text": "", "placed": []})
            continue
        text_only = DecodedStreamObject()
        text_only.set_data(_DRAWING.sub(b"", page.get_contents().get_data()))
        page[NameObject("/Contents")] = text_only
        pieces, placed = [], []

        def seen(text, cm, tm, font, size):
            pieces.append(text)
            if text.strip():  # the text matrix, then the page's transformation: the position on the paper
                x, y = tm[4] * cm[0] + tm[5] * cm[2] + cm[4], tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
                placed.append((x, y, size * abs(tm[3] * cm[3]), unicodedata.normalize("NFKC", text.strip())))

        page.extract_text(visitor_text=seen)
        pages.append({"size": size, "text": unicodedata.normalize("NFKC", "".join(pieces)), "placed": placed})
    return pages


def _pdf_words(text: str) -> list[str]:
    """The words of a text (NFKC: the PDF's ligatures, ﬀ, are two letters again), maths and Markdown left out."""
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|<[^>]+>", " ", unicodedata.normalize("NFKC", text), flags=re.S)
    return re.findall(r"[A-Za-z0-9]+", text)


def _in_order(needle: list[str], haystack: list[str]) -> bool:
    """Every word of `needle` in `haystack`, in order (other words may come between: typeset maths, line ends).
    Words of one letter are not looked for: in the source they are often maths ($d$<sub>k</sub>), which the
    PDF sets otherwise."""
    rest = iter(haystack)
    return all(word in rest for word in needle if len(word) > 1)


@pytest.mark.parametrize("unit", DECKS)
def test_each_deck_has_a_pdf_with_a_page_per_slide_and_its_title_centred(site, unit):
    deck = slides.parse_deck(ROOT / slides.SLIDES_SRC / f"{unit}.md")
    pages = _pdf_pages(HTML / "slides" / f"{unit}.pdf", read=1)
    assert len(pages) == len(deck.slides), \
        f"{unit}.pdf has {len(pages)} pages for {len(deck.slides)} slides (a slide that overflows adds pages)"
    height = pages[0]["size"][1]
    title = [(y, size) for x, y, size, text in pages[0]["placed"] if _pdf_words(text)]
    assert len(title) >= 2, f"{unit}.pdf: page 1 shows {pages[0]['placed']}, not the title and its subtitle"
    # A line's ink runs from about its baseline - 0.25 size (descenders) to its baseline + 0.75 size (capitals).
    top, bottom = max(y + 0.75 * size for y, size in title), min(y - 0.25 * size for y, size in title)
    off = ((top + bottom) / 2 - height / 2) / height
    assert abs(off) < 0.05, (f"{unit}.pdf: the title's text is centred {off:+.1%} of the page's height from the "
                             f"page's middle (text from {bottom:.0f} to {top:.0f} pt of {height:.0f})")


@pytest.mark.parametrize("unit", DECKS)
def test_the_handout_holds_every_slide_above_its_notes(site, unit):
    """<unit>-notes.pdf: A4 portrait; each slide on the same page as its whole speaker notes (their words, in
    order: nothing cut off), the notes in type of 10 pt or more, and no page but the last less than 60% full."""
    deck = slides.parse_deck(ROOT / slides.SLIDES_SRC / f"{unit}.md")
    pages = _pdf_pages(HTML / "slides" / f"{unit}-notes.pdf")
    n = len(deck.slides)
    width, height = pages[0]["size"]
    assert (round(width), round(height)) == (595, 842), \
        f"{unit}-notes.pdf: {width:.0f} x {height:.0f} pt, not A4 portrait"
    assert math.ceil(n / 2) <= len(pages) <= math.ceil(n / 2) + 2, \
        f"{unit}-notes.pdf: {len(pages)} pages for {n} slides (two to a page, fewer where notes are long)"
    problems, page_of = [], {}
    for number, page in enumerate(pages, start=1):
        for label in re.finditer(r"Slide (\d+) of (\d+)", page["text"]):
            page_of.setdefault(int(label.group(1)), []).append(number)
        body = [(x, y, size) for x, y, size, text in page["placed"] if y > 60]  # above the footer
        margin = min(x for x, y, size in body)  # the notes and their labels start at the left margin
        small = sorted({round(size, 1) for x, y, size in body if x < margin + 1 and size < 9.95})
        if small:
            problems.append(f"page {number}: notes set in {small} pt (at least 10)")
        lowest = min(y for x, y, size in body)
        if number < len(pages) and lowest > 0.4 * height:
            problems.append(f"page {number}: its text ends {1 - lowest / height:.0%} down the page")
    for slide in deck.slides:
        on = page_of.get(slide.number, [])
        if len(on) != 1:
            problems.append(f"slide {slide.number}: on pages {on}, not on one")
            continue
        words = _pdf_words(pages[on[0] - 1]["text"])
        if not _in_order(_pdf_words(slide.notes), words):
            problems.append(f"slide {slide.number}: its notes are not all on page {on[0]} (cut off?)")
        if not _in_order(_pdf_words(slide.title) * 2, words):  # once on the slide, once in the label above its notes
            problems.append(f"slide {slide.number}: the slide itself is not on page {on[0]}")
    assert not problems, f"{unit}-notes.pdf:\n" + "\n".join(problems)


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
    """Each unit's notes page: maths typeset, no console error, no serious accessibility violation, and its
    links (deck, PDF, figures, chapter) lead to files that exist. The notes' index and the figure gallery pass
    axe-core too, and the gallery's images say what they show."""
    from playwright.sync_api import sync_playwright

    built = BUILD / "instructors"
    problems = []
    with serve(BUILD) as url, sync_playwright() as pw:
        context, outside = _browser(pw, tmp_path_factory, {"width": 1280, "height": 900})
        for unit in DECKS:
            page = context.new_page()
            errors = watch(page)
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
            if blocking(audit(page)):
                problems.append(f"{unit}: {describe(blocking(audit(page)))}")
            page.close()
        page = context.new_page()
        for other in ("instructors/index.html", "html/figures/index.html"):
            page.goto(f"{url}/{other}", wait_until="load")
            if blocking(audit(page)):
                problems.append(f"{other}: {describe(blocking(audit(page)))}")
        alts = page.eval_on_selector_all("img", "es => es.map(e => e.getAttribute('alt') || '')")
        problems += [f"figure gallery: an image with alt text {a!r}" for a in alts if len(a) < 30]
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
