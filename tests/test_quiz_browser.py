"""The self-check questions in a real browser: drawn, answered with the keyboard alone, typeset, accessible.

Each unit's questions (every section, drawn by `quiz.fill_placeholders` as the
book's Sphinx extension draws them) are put into the frame of the built
chapter's page: its theme, its MathJax configuration, its sidebars, and the
`mathjax_ignore` section around the body. The page is served from a copy of
the built site on 127.0.0.1 (the site's own files are linked, not copied), and
headless Chromium (as in test_lecture_browser.py) refuses any other address.

On each unit's page:

- every question of the file is drawn, and every formula typeset by MathJax
  (no `$`, `\\(` or `\\[` left in what the reader sees, no TeX error);
- a multiple-choice question is answered wrongly, then rightly, with the
  keyboard only (Tab to the option, Enter the first time, Space the second):
  the feedback written for that option is shown, after "Not quite." and then
  "Correct.";
- a numeric question is answered with a number that lands in a wrong-answer
  range only once rounded to the question's precision (that range's feedback),
  then with the right value typed with a digit too many (accepted);
- axe-core finds no serious or critical violation in the quizzes, answered,
  at 1280 px and at 390 px (and, for one unit, in the dark theme); a copy
  with the answer box's label removed proves that the audit can fail;
- nothing is logged as an error, and nothing is fetched from outside.

Screenshots of a multiple-choice question after a wrong answer and of a
numeric one, at both widths, go to book/_build/quiz-screenshots/. The page
without MathJax, with MathJax arriving late, with a MathJax configuration
whose first pass skips the quizzes, and with a quiz added after MathJax has
started (a notebook's new output) are tried too.

One browser context serves the whole module, one page per unit: CI has two
cores and little time.
"""

from __future__ import annotations

import contextlib
import html
import re
from pathlib import Path

import pytest

from axe import audit, blocking, describe
from booksite import BUILD, HTML, ROOT, built_book, loopback_only, serve, watch
from lmcourse import quiz
from lmcourse.instructor import slides

pytestmark = pytest.mark.slow

QUIZZES = ROOT / "book" / "quizzes"
UNITS = sorted(p.stem for p in QUIZZES.glob("*.yaml"))
SHOTS = BUILD / "quiz-screenshots"
SHOWN = "04-attention"  # the unit whose questions are photographed: emphasis, inline code and maths
WIDE, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


# --- the test pages ---------------------------------------------------------------------------


def _site_assets() -> None:
    """The built site's theme and MathJax; built if absent (the chapters' content does not matter here)."""
    if not (HTML / "_static" / "mathjax" / "tex-mml-chtml.js").exists() or not (HTML / "units").is_dir():
        book = built_book()
        if not (HTML / "_static" / "mathjax" / "tex-mml-chtml.js").exists():
            pytest.fail(f"the book was not built; see book/_build/test-build.log:\n{book.log_tail(30)}")


def chapter_frame(unit: str) -> str:
    """The built chapter page of `unit` (or the first chapter), to hold the questions."""
    page = HTML / "units" / f"{unit}.html"
    if not page.exists():
        page = sorted((HTML / "units").glob("*.html"))[0]
    return page.read_text(encoding="utf-8")


def quiz_page(unit: str, frame: str) -> str:
    """`frame` with its article replaced by the self-checks of `unit`, each in a cell output as the chapter has it
    (and its table of contents by the list of those sections: the theme's scrollspy looks each entry up)."""
    sections = list(quiz.load(unit, QUIZZES))
    with contextlib.chdir(ROOT):  # quiz_dir() is found from the working directory, as in the book's build
        blocks = "".join(
            f'<section id="sc-{key}"><h2>Section {html.escape(key)}</h2>'
            f"<p><strong>Self-check.</strong> Pick an answer: each option explains itself.</p>"
            f'<div class="cell tag_remove-input docutils container"><div class="cell_output docutils container">'
            f'<div class="output text_html">{quiz.fill_placeholders(quiz.PLACEHOLDER.format(unit=unit, section=key))}'
            f"</div></div></div></section>"
            for key in sections)
    start = frame.index('<article class="bd-article">') + len('<article class="bd-article">')
    end = frame.index("</article>", start)
    body = (f'<section class="tex2jax_ignore mathjax_ignore" id="self-checks"><h1>Self-checks of {unit}</h1>'
            f"{blocks}</section>")
    page = frame[:start] + body + frame[end:]
    toc = "".join(f'<li class="toc-h2 nav-item toc-entry"><a class="reference internal nav-link" href="#sc-{key}">'
                  f"Section {html.escape(key)}</a></li>" for key in sections)
    return re.sub(r'(<nav id="pst-page-toc-nav"[^>]*>).*?(</nav>)',
                  lambda m: f'{m.group(1)}<ul class="nav section-nav flex-column">{toc}</ul>{m.group(2)}',
                  page, count=1, flags=re.S)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A copy of the built site (its files linked) with a page of self-checks per unit: units/quiz-<unit>.html."""
    _site_assets()
    root = tmp_path_factory.mktemp("site")
    for entry in HTML.iterdir():
        if entry.name != "units":
            (root / entry.name).symlink_to(entry)
    (root / "units").mkdir()
    if not (root / "favicon.ico").exists():  # Chromium asks for one; a 404 would be logged as a console error
        (root / "favicon.ico").write_bytes(b"")
    for unit in UNITS:
        (root / "units" / f"quiz-{unit}.html").write_text(quiz_page(unit, chapter_frame(unit)), encoding="utf-8")
    with serve(root) as url:
        yield url, root


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One Chromium context for the module; requests outside 127.0.0.1 are refused and listed."""
    from playwright.sync_api import sync_playwright

    chromium = slides.chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian packages `chromium`, `chromium-driver`; `make test` installs "
                    "them as root)")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=chromium, headless=True,
            args=slides.CHROMIUM_ARGS, viewport=WIDE,
            reduced_motion="reduce")  # no colour caught halfway through a transition by axe or a photo
        outside = loopback_only(context)
        yield context, outside
        context.close()


# Resolves once MathJax has started and no quiz on the page holds TeX any more (or after 20 s).
_TYPESET = r"""async () => {
  const raw = () => Array.from(document.querySelectorAll('.lmcourse-quiz')).filter(q => /\\\(|\\\[/.test(q.textContent));
  const start = Date.now();
  while (!(window.MathJax && MathJax.startup && MathJax.startup.promise && MathJax.typesetPromise)) {
    if (Date.now() - start > 20000) return 'MathJax never started';
    await new Promise(r => setTimeout(r, 50));
  }
  await MathJax.startup.promise;
  while (raw().length && Date.now() - start < 20000) await new Promise(r => setTimeout(r, 50));
  return raw().length ? `${raw().length} quizzes still hold TeX` : 'typeset';
}"""

# What a reader sees of the quizzes' maths: TeX left over, TeX errors, typeset formulas, and formulas
# inside an option that the keyboard would stop on.
_MATHS = r"""() => {
  const quizzes = Array.from(document.querySelectorAll('.lmcourse-quiz'));
  return {
    questions: document.querySelectorAll('.lmcourse-quiz__question').length,
    raw: quizzes.map(q => q.innerText).filter(t => /\$|\\\(|\\\[/.test(t)).map(t => t.slice(0, 120)),
    rawHidden: quizzes.map(q => q.textContent).filter(t => /\\\(|\\\[/.test(t)).map(t => t.slice(0, 120)),
    texErrors: document.querySelectorAll('.lmcourse-quiz mjx-merror').length,
    typeset: document.querySelectorAll('.lmcourse-quiz mjx-container').length,
    tabbable: document.querySelectorAll('.lmcourse-quiz__option [tabindex]').length,
  };
}"""

_FEEDBACK = r"""(qid) => {
  const region = document.getElementById(qid + '-feedback');
  const shown = Array.from(region.querySelectorAll('.lmcourse-quiz__why')).filter(w => !w.hidden);
  return {verdict: region.dataset.verdict, words: region.querySelector('.lmcourse-quiz__verdict').textContent,
          shown: shown.map(w => w.id), text: region.innerText,
          pressed: Array.from(document.getElementById(qid + '-prompt').closest('fieldset')
                              .querySelectorAll('.lmcourse-quiz__option[aria-pressed="true"]')).map(o => o.id)};
}"""


def _plain(text: str) -> str:
    return " ".join(text.split())


def _prose(text: str) -> str:
    """The longest run of a Markdown text between its formulas, without the Markdown's marks: the part that
    reaches the page unchanged (MathJax replaces the maths; the marks become <em> and <code>)."""
    runs = re.split(r"\$\$.*?\$\$|\$[^$]*\$", text)
    return max((_plain(re.sub(r"[*`]", "", r)) for r in runs), key=len)


def _settle(page, condition: str, arg) -> None:
    """Wait (up to 20 s, for a loaded machine) until `condition(arg)` holds in the page; if it never does, go on:
    the assertions on what the page shows then say what went wrong, better than a timeout would."""
    try:
        page.wait_for_function(condition, arg=arg, timeout=20000)
    except Exception:  # noqa: BLE001 (playwright's TimeoutError: the caller's assertions report it)
        pass


def _tab_to(page, target: str, start: str, limit: int = 40) -> int:
    """Press Tab from the element `start` until the element with id `target` has the focus; the presses."""
    page.evaluate("(id) => { const e = document.getElementById(id); e.tabIndex = -1; e.focus(); }", start)
    for presses in range(1, limit + 1):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == target:
            return presses
    raise AssertionError(f"{target} never took the focus in {limit} presses of Tab from {start}")


def _answer_multiple_choice(page, unit: str) -> dict:
    """The first multiple-choice question of the page, answered wrongly (Enter) and rightly (Space) by keyboard."""
    qid = page.evaluate("document.querySelector('.lmcourse-quiz__question[data-type=multiple_choice] "
                        ".lmcourse-quiz__prompt').id.replace(/-prompt$/, '')")
    section, number = re.fullmatch(rf"lmcourse-quiz-{unit}-(.+)-q(\d+)", qid).groups()
    written = quiz.load(unit, QUIZZES)[section][int(number) - 1]
    record = {"question": written["question"][:80]}
    for which, key in (("wrong", "Enter"), ("right", "Space")):
        option = page.evaluate(f"document.querySelector('#{qid}-prompt ~ .lmcourse-quiz__options "
                               f".lmcourse-quiz__option[data-correct={str(which == 'right').lower()}]').id")
        _tab_to(page, option, f"{qid}-prompt")
        page.keyboard.press(key)
        _settle(page, "(id) => document.getElementById(id).getAttribute('aria-pressed') === 'true'", option)
        seen = page.evaluate(_FEEDBACK, qid)
        label = _plain(page.evaluate("(id) => document.getElementById(id).innerText", option))
        chosen = [a for a in written["answers"] if _prose(a["answer"]) in label]
        record[which] = {**seen, "option": option, "label": label,
                         "expected": chosen[0]["feedback"] if len(chosen) == 1 else None}
    return record


# Of the first numeric question with a wrong-answer range, what to type: a number that lands in the range only
# once rounded to the question's precision (just below the range's low end, which is inclusive), so that the
# page is seen to round as the schema says; and the right value with a digit too many, which must round back
# onto it. Where the low end has more digits than the precision, a number inside the range instead.
_NUMERIC = r"""() => {
  for (const input of document.querySelectorAll('.lmcourse-quiz__input')) {
    const fieldset = input.closest('.lmcourse-quiz__question');
    const p = Number(input.dataset.precision) || 0;
    const rounded = x => p > 0 ? Number(Number(x).toPrecision(p)) : x;
    const ulp = x => Math.pow(10, Math.floor(Math.log10(Math.abs(x))) - p + 1);  // a unit in the last kept digit
    const clean = x => Number(x.toPrecision(p + 3));                             // no binary noise when typed
    const range = fieldset.querySelector('.lmcourse-quiz__why[data-kind=range]');
    const right = fieldset.querySelector('.lmcourse-quiz__why[data-kind=value][data-correct=true]');
    if (!range) continue;
    const lo = Number(range.dataset.low), hi = Number(range.dataset.high), value = Number(right.dataset.value);
    const inside = x => x >= lo && x < hi;
    let wrong = p > 0 && rounded(lo) === lo ? clean(lo - 0.4 * ulp(lo)) : null;
    const roundingMatters = wrong !== null && !inside(wrong) && inside(rounded(wrong));
    if (!roundingMatters) wrong = [lo, (lo + hi) / 2, hi - (hi - lo) / 1000].map(rounded).find(inside);
    return {qid: input.id.replace(/-input$/, ''), wrong: wrong === undefined ? null : wrong, range: [lo, hi],
            roundingMatters: roundingMatters, wrongWhy: range.id,
            right: p > 0 ? clean(rounded(value) + 0.3 * ulp(value)) : value, rightWhy: right.id};
  }
  return null;
}"""


def _answer_numeric(page, unit: str) -> dict:
    """The first numeric question with a wrong-answer range, answered by keyboard: a number in the range (typed,
    then Enter), then the right value (typed, then Tab to Check and Space)."""
    target = page.evaluate(_NUMERIC)
    if target is None or target["wrong"] is None:
        return {"unreachable": target}
    qid = target["qid"]
    section, number = re.fullmatch(rf"lmcourse-quiz-{unit}-(.+)-q(\d+)", qid).groups()
    written = quiz.load(unit, QUIZZES)[section][int(number) - 1]
    by_id = {f"{qid}-a{i}-why": a for i, a in enumerate(written["answers"], start=1)}
    record = {"target": target}
    for which in ("wrong", "right"):
        _tab_to(page, f"{qid}-input", f"{qid}-prompt")
        page.keyboard.press("Control+A")
        page.keyboard.type(_typed(target[which]))
        if which == "wrong":
            page.keyboard.press("Enter")
        else:
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.className") == "lmcourse-quiz__check"
            page.keyboard.press("Space")
        _settle(page, "(id) => !document.getElementById(id).hidden", target[f"{which}Why"])
        seen = page.evaluate(_FEEDBACK, qid)
        record[which] = {**seen, "expected": by_id[target[f"{which}Why"]]["feedback"], "why": target[f"{which}Why"]}
    return record


def _typed(x: float) -> str:
    """A number as a reader types it: no exponent, no trailing ".0"."""
    return f"{x:.10f}".rstrip("0").rstrip(".")


# "Back to top" floats over whatever is under it; it is hidden for the picture only.
_PHOTO_STYLE = "#pst-back-to-top { visibility: hidden !important; }"


def _shoot(page, selector: str, path: Path) -> None:
    """A picture of one element, with a margin of the page around it, as the reader sees it below the page's
    sticky header (the window is made tall enough to hold the whole element, then put back)."""
    size = page.viewport_size
    height = page.locator(selector).bounding_box()["height"]
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], int(height) + 240)})
    page.evaluate("(sel) => { document.activeElement.blur(); "
                  "window.scrollBy(0, document.querySelector(sel).getBoundingClientRect().top - 160); }", selector)
    box = page.locator(selector).bounding_box()
    margin = 16
    x = max(0, box["x"] - margin)
    page.screenshot(path=str(path), style=_PHOTO_STYLE, clip={
        "x": x, "y": box["y"] - margin, "width": min(box["width"] + 2 * margin, size["width"] - x),
        "height": box["height"] + 2 * margin})
    page.set_viewport_size(size)


@pytest.fixture(scope="module")
def visits(site, browser):
    """Every unit's page, as the browser showed it and as the keyboard answered it; audited by axe-core at both
    widths once answered (the chosen option and the feedback have colours of their own)."""
    url, _ = site
    context, _ = browser
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    seen = {}
    for unit in UNITS:
        page = context.new_page()
        errors = watch(page)
        page.goto(f"{url}/units/quiz-{unit}.html", wait_until="load")
        record = {"state": page.evaluate(_TYPESET), "maths": page.evaluate(_MATHS)}
        record["mc"] = _answer_multiple_choice(page, unit)
        record["numeric"] = _answer_numeric(page, unit)
        if unit == SHOWN:  # the photos show each question after a wrong answer
            page.click("#" + record["mc"]["wrong"]["option"])
            qid = record["numeric"]["target"]["qid"]
            page.fill(f"#{qid}-input", _typed(record["numeric"]["target"]["wrong"]))
            page.press(f"#{qid}-input", "Enter")
            photos = {"multiple-choice": "fieldset:has(#%s)" % record["mc"]["wrong"]["option"],
                      "numeric": f"fieldset:has(#{qid}-input)"}
        record["axe"] = {"1280": audit(page, ".lmcourse-quiz")}
        for name, selector in (photos.items() if unit == SHOWN else ()):
            _shoot(page, selector, SHOTS / f"{unit}-{name}-1280.png")
        page.set_viewport_size(PHONE)
        record["axe"]["390"] = audit(page, ".lmcourse-quiz")
        record["overflow"] = page.evaluate(
            "Array.from(document.querySelectorAll('.lmcourse-quiz__question'))"
            ".filter(q => q.scrollWidth > q.clientWidth + 1 || q.getBoundingClientRect().right > innerWidth)"
            ".map(q => q.querySelector('.lmcourse-quiz__prompt').id)")
        if unit == SHOWN:
            for name, selector in photos.items():
                _shoot(page, selector, SHOTS / f"{unit}-{name}-390.png")
            page.evaluate("document.documentElement.dataset.theme = 'dark'")  # the theme's own switch
            page.wait_for_timeout(300)  # the theme's own transitions
            record["axe"]["390 dark"] = audit(page, ".lmcourse-quiz")
            _shoot(page, photos["multiple-choice"], SHOTS / f"{unit}-multiple-choice-390-dark.png")
        record["errors"] = list(errors)
        seen[unit] = record
        page.close()
    return seen


@pytest.mark.parametrize("unit", UNITS)
def test_every_question_is_drawn_and_typeset(visits, unit):
    visit = visits[unit]
    expected = sum(len(qs) for qs in quiz.load(unit, QUIZZES).values())
    maths = visit["maths"]
    assert maths["questions"] == expected, f"{unit}: {maths['questions']} questions on the page, {expected} in its file"
    assert visit["state"] == "typeset", f"{unit}: {visit['state']}"
    assert not maths["raw"] and not maths["rawHidden"], f"{unit}: TeX left untypeset: {maths['raw'] or maths['rawHidden']}"
    assert not maths["texErrors"], f"{unit}: {maths['texErrors']} TeX errors"
    assert not maths["tabbable"], f"{unit}: formulas inside options are in the tab order"
    assert not visit["errors"], f"{unit}: the browser reported errors: {visit['errors'][:5]}"


def test_the_typeset_check_is_not_vacuous(visits):
    assert sum(v["maths"]["typeset"] for v in visits.values()) >= 40, {u: v["maths"]["typeset"] for u, v in visits.items()}


@pytest.mark.parametrize("unit", UNITS)
def test_multiple_choice_answers_with_the_keyboard(visits, unit):
    record = visits[unit]["mc"]
    for which, verdict, words in (("wrong", "incorrect", "Not quite."), ("right", "correct", "Correct.")):
        seen = record[which]
        assert seen["verdict"] == verdict and seen["words"] == words, \
            f"{unit}: a {which} answer to {record['question']!r} by keyboard gave {seen['verdict']!r} ({seen['words']!r})"
        assert seen["pressed"] == [seen["option"]], f"{unit}: aria-pressed is on {seen['pressed']}, not {seen['option']}"
        assert seen["shown"] == [seen["option"] + "-why"], f"{unit}: shown {seen['shown']} for {seen['option']}"
        assert seen["expected"], f"{unit}: the option {seen['label']!r} matches no answer of the file"
        assert _prose(seen["expected"]) in _plain(seen["text"]), \
            f"{unit}: after a {which} answer the page shows {seen['text']!r}, not its feedback {seen['expected']!r}"
        assert _plain(seen["text"]).startswith(words), f"{unit}: the verdict does not come first: {seen['text']!r}"


@pytest.mark.parametrize("unit", UNITS)
def test_numeric_answers_follow_ranges_and_precision(visits, unit):
    record = visits[unit]["numeric"]
    assert "unreachable" not in record, \
        f"{unit}: no numeric question whose wrong-answer range a number rounded to its precision can reach: {record}"
    for which, verdict in (("wrong", "incorrect"), ("right", "correct")):
        seen = record[which]
        assert seen["verdict"] == verdict, f"{unit}: typing {record['target'][which]} gave {seen['verdict']!r}"
        assert seen["shown"] == [seen["why"]], f"{unit}: typing {record['target'][which]} showed {seen['shown']}"
        assert _prose(seen["expected"]) in _plain(seen["text"]), f"{unit}: shown {seen['text']!r}, not {seen['expected']!r}"


def test_numeric_answers_are_rounded_before_they_are_compared(visits):
    """The check above is not only on round numbers: in most units the wrong number typed lies outside its range
    and enters it by the rounding to `precision` (and every right value was typed with a digit too many)."""
    rounded = [u for u, v in visits.items() if v["numeric"].get("target", {}).get("roundingMatters")]
    assert len(rounded) >= len(visits) // 2, {u: v["numeric"].get("target") for u, v in visits.items()}


@pytest.mark.parametrize("unit", UNITS)
def test_quizzes_pass_axe_at_both_widths(visits, unit):
    for width, found in visits[unit]["axe"].items():
        assert not blocking(found), f"{unit} at {width}px:\n{describe(blocking(found))}"
    assert not visits[unit]["overflow"], f"{unit}: questions wider than a 390 px screen: {visits[unit]['overflow']}"


def test_screenshots_were_taken(visits):
    shots = sorted(p.name for p in SHOTS.glob(f"{SHOWN}-*.png"))
    assert len(shots) == 5, shots


# --- the checks can fail, and the pages work whatever MathJax does --------------------------------


def test_axe_finds_an_unlabelled_answer_box(site, browser):
    """A copy of a quiz without the numeric answer's <label>: the audit must report it (critical)."""
    url, root = site
    unit = UNITS[0]  # every unit has a numeric question (test_lecture_materials.py)
    page_html = (root / "units" / f"quiz-{unit}.html").read_text()
    broken = re.sub(r'<label class="lmcourse-quiz__label" for="[^"]+">Your answer</label>', "", page_html)
    assert broken != page_html
    (root / "units" / f"broken-{unit}.html").write_text(broken)
    page = browser[0].new_page()
    page.goto(f"{url}/units/broken-{unit}.html", wait_until="load")
    found = blocking(audit(page, ".lmcourse-quiz"))
    page.close()
    assert any(v["id"] == "label" for v in found), f"axe did not see the unlabelled input: {describe(found)}"


def _nothing_but(page, unit: str) -> dict:
    """Answer the first multiple-choice question by clicking a wrong option; what the page then shows."""
    qid = page.evaluate("document.querySelector('.lmcourse-quiz__question[data-type=multiple_choice] "
                        ".lmcourse-quiz__prompt').id.replace(/-prompt$/, '')")
    page.click(f"#{qid}-prompt ~ .lmcourse-quiz__options .lmcourse-quiz__option[data-correct=false]")
    return page.evaluate(_FEEDBACK, qid)


def test_questions_work_without_mathjax(site, browser):
    """MathJax never arrives (blocked, or a failed download): every question is drawn and answers, no error."""
    url, _ = site
    unit = "07-gpt"
    page = browser[0].new_page()
    errors = watch(page)
    page.route("**/mathjax/**", lambda route: route.abort())
    page.goto(f"{url}/units/quiz-{unit}.html", wait_until="load")
    assert page.evaluate("typeof window.MathJax === 'object' && !window.MathJax.version"), \
        "the test needs MathJax's configuration on the page without MathJax itself"
    drawn = page.evaluate("document.querySelectorAll('.lmcourse-quiz__question').length")
    seen = _nothing_but(page, unit)
    page.close()
    errors = [e for e in errors if "net::ERR_FAILED" not in e]  # the refused download itself
    assert not errors, f"{unit} without MathJax: {errors[:3]}"
    assert drawn == sum(len(qs) for qs in quiz.load(unit, QUIZZES).values())
    assert seen["verdict"] == "incorrect" and seen["words"] == "Not quite." and len(seen["shown"]) == 1, seen


def test_questions_are_typeset_when_mathjax_comes_late(site, browser):
    """MathJax arrives three seconds after the questions are on the page (a slow connection): their maths,
    the hidden feedback's included, is typeset all the same, with no error on the way."""
    import urllib.parse

    url, _ = site
    unit = "08-capstone"  # its questions are full of maths
    page = browser[0].new_page()
    errors = watch(page)

    def delayed(route):
        parts = urllib.parse.urlsplit(route.request.url)
        if parts.path.endswith("tex-mml-chtml.js") and "late=1" not in parts.query:
            late = parts._replace(query="late=1").geturl()
            body = (f"setTimeout(() => {{ const s = document.createElement('script'); s.src = '{late}'; "
                    "document.head.appendChild(s); }, 3000);")
            route.fulfill(status=200, content_type="text/javascript", body=body)
        else:
            route.continue_()

    page.route("**/mathjax/**", delayed)
    page.goto(f"{url}/units/quiz-{unit}.html", wait_until="load")
    early = page.evaluate("!window.MathJax.version")
    state = page.evaluate(_TYPESET)
    maths = page.evaluate(_MATHS)
    page.close()
    assert early, "MathJax was there before the questions: the test did not make the race it is about"
    assert state == "typeset" and maths["typeset"] > 0 and not maths["rawHidden"], (state, maths)
    assert not errors, f"{unit} with MathJax late: {errors[:3]}"


def test_quizzes_the_first_pass_skips_are_typeset_once_mathjax_has_started(site, browser):
    """On a page whose MathJax configuration does not process class "math" inside the ignored body, MathJax's
    first pass leaves the questions alone: only the quizzes' own wait (lmcourseTypesetLater) typesets them."""
    url, root = site
    unit = "08-capstone"
    page_html = (root / "units" / f"quiz-{unit}.html").read_text()
    otherwise = page_html.replace('"processHtmlClass": "tex2jax_process|mathjax_process|math|output_area"',
                                  '"processHtmlClass": "tex2jax_process|mathjax_process|output_area"')
    assert otherwise != page_html, "the chapter page's MathJax configuration changed: update this test"
    (root / "units" / f"otherwise-{unit}.html").write_text(otherwise)
    page = browser[0].new_page()
    errors = watch(page)
    page.goto(f"{url}/units/otherwise-{unit}.html", wait_until="load")
    state = page.evaluate(_TYPESET)
    maths = page.evaluate(_MATHS)
    page.close()
    assert state == "typeset" and maths["typeset"] > 0 and not maths["rawHidden"] and not errors, (state, maths, errors)


def test_a_quiz_added_after_mathjax_started_is_typeset(site, browser):
    """A notebook adds outputs as its cells run, long after MathJax started: the block's own script typesets it."""
    url, _ = site
    page = browser[0].new_page()
    errors = watch(page)
    page.goto(f"{url}/units/quiz-08-capstone.html", wait_until="load")
    assert page.evaluate(_TYPESET) == "typeset"
    with contextlib.chdir(ROOT):
        block = quiz.quiz_html("08-capstone", next(iter(quiz.load("08-capstone", QUIZZES))))
    block = block.replace("lmcourse-quiz-08-capstone", "late-quiz")  # ids stay unique on the page
    # innerHTML does not run scripts: re-create them, as JupyterLab does for an output's scripts
    page.evaluate("""(html) => {
      const host = document.createElement('div'); host.id = 'late'; host.innerHTML = html;
      document.querySelector('article').appendChild(host);
      host.querySelectorAll('script').forEach(old => { const s = document.createElement('script');
        s.textContent = old.textContent; old.replaceWith(s); });
    }""", block)
    page.wait_for_function(r"!/\\\(|\\\[/.test(document.querySelector('#late .lmcourse-quiz').textContent)", timeout=20000)
    typeset = page.evaluate("document.querySelectorAll('#late mjx-container').length")
    assert page.evaluate("typeof window.lmcourseQuiz.parse") == "function"
    page.close()
    assert typeset > 0 and not errors, (typeset, errors)


def test_typed_numbers_are_read_as_a_reader_means_them(site, browser):
    """A decimal comma (a phone's decimal keypad offers it in many languages), thousands separators, a
    typographic minus, a fraction: each is the number the reader meant; anything else is no number."""
    cases = {"8": 8, " 0.25 ": 0.25, "2/9": 2 / 9, "1e-3": 0.001, "\u22123": -3, "0,25": 0.25, "6,406": 6406,
             "6 406": 6406, "1,234.5": 1234.5, ".5": 0.5, "abc": None, "": None, "1/0": None, "2/3/4": None}
    url, _ = site
    page = browser[0].new_page()
    page.goto(f"{url}/units/quiz-{UNITS[0]}.html", wait_until="load")
    got = page.evaluate("(ts) => ts.map(t => { const x = window.lmcourseQuiz.parse(t); return Number.isNaN(x) ? null : x; })",
                        list(cases))
    page.close()
    for (typed, expected), x in zip(cases.items(), got):
        assert (x is None) if expected is None else x == pytest.approx(expected), (typed, x)


def test_quizzes_fetch_nothing_from_the_internet(visits, browser):
    """Last in the module: every page above was opened in the same browser context, which refused and listed
    any request leaving 127.0.0.1."""
    assert not browser[1], f"the quiz pages asked for resources outside 127.0.0.1: {sorted(set(browser[1]))[:10]}"
