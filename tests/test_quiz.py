"""The self-check questions as HTML (lmcourse.quiz), without a browser: Markdown, maths, markup, shuffling.

The browser half (answering with the keyboard, MathJax, axe-core) is in
test_quiz_browser.py. Here, fast:

- question texts are Markdown: emphasis, inline code and `$...$` maths become
  `<em>`, `<code>` and `\\(...\\)` for MathJax; raw HTML is text, so `<EOS>` is
  shown as written and never swallowed as a tag;
- the markup names every question and labels every control, and ties each
  option to its own feedback;
- the options are shuffled the same way on every build, without touching the
  chapter's `random`;
- every question file of the course validates and renders cleanly.
"""

from __future__ import annotations

import html.parser
import random
import re
from pathlib import Path

import pytest
import yaml

from lmcourse import quiz

ROOT = Path(__file__).resolve().parent.parent
QUIZZES = ROOT / "book" / "quizzes"
UNITS = sorted(p.stem for p in QUIZZES.glob("*.yaml"))

MC = {"question": "After *current* state $h_t$, what does `count_pairs` count?", "type": "multiple_choice",
      "answers": [{"answer": "Pairs after `<BOS>`", "correct": True, "feedback": "Right: $P(w \\mid h)$ needs them."},
                  {"answer": "Only <EOS>", "correct": False, "feedback": "No: <EOS> is *predicted*."},
                  {"answer": "Characters", "correct": False, "feedback": "That is $$\\sum_i c_i$$."}]}
NUMERIC = {"question": "How many rows has a bigram table of 27 symbols?", "type": "numeric", "precision": 3,
           "answers": [{"type": "value", "value": 27, "correct": True, "feedback": "One per symbol."},
                       {"type": "range", "range": [728, 730], "correct": False, "feedback": "That counts cells: $27^2$."},
                       {"type": "default", "feedback": "Count the histories."}]}


class Tree(html.parser.HTMLParser):
    """The elements of a piece of HTML (tag, attributes) and its text, as a browser would read them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self._skip = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style")

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)

    def find(self, tag=None, **attrs) -> list[dict]:
        return [a for t, a in self.elements if (tag is None or t == tag)
                and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_class(self, name: str) -> list[dict]:
        return [a for _, a in self.elements if name in (a.get("class") or "").split()]


@pytest.fixture
def folder(tmp_path):
    """A unit's question file with one multiple-choice and one numeric question per section."""
    data = {"first": [MC, NUMERIC], "second": [MC, NUMERIC], "third": [MC]}
    (tmp_path / "09-test.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return tmp_path


# --- Markdown and maths ---------------------------------------------------------------------------


def test_markdown_becomes_emphasis_code_and_mathjax_delimiters():
    out = quiz.markdown("Its *current* state $h_t$, from $h_{t-1}$, counted by `count_pairs`.")
    assert "<em>current</em>" in out and "<code>count_pairs</code>" in out
    assert r'<span class="math notranslate nohighlight">\(h_t\)</span>' in out
    assert r"\(h_{t-1}\)" in out and "$" not in out
    block = quiz.markdown("Sum:\n\n$$\n\\sum_i c_i\n$$")
    assert r'<div class="math notranslate nohighlight">\[\sum_i c_i\]</div>' in block
    assert r"\[x^2\]" in quiz.markdown("Display $$x^2$$ in a sentence.")  # a YAML string is one line


def test_special_tokens_and_html_stay_visible_text():
    for text in ("A line ends with <EOS> after <BOS> and <UNK>.", "Ends with `<EOS>`, `<|im_start|>assistant`."):
        out = quiz.markdown(text)
        shown = "".join(Tree(out).text)
        for token in re.findall(r"<[^>]+>", text):
            assert token in shown, f"{token} disappeared from {out!r}"
        assert not Tree(out).find("eos") and not Tree(out).find("bos")
    out = quiz.markdown("Try <script>alert(1)</script> and <b>bold</b>.")
    assert "<script>" not in out and "&lt;script&gt;" in out and "<b>" not in out
    assert "&lt;EOS&gt;" in quiz.markdown_inline("Only <EOS>")


def test_maths_is_escaped_for_html_and_left_to_mathjax():
    out = quiz.markdown("If $a < b$ and $c > d$ then $\\texttt{<BOS>}$.")
    assert r"\(a &lt; b\)" in out and r"\(c &gt; d\)" in out and r"\(\texttt{&lt;BOS&gt;}\)" in out
    assert "".join(Tree(out).text).count(r"\(") == 3  # the browser hands MathJax the TeX as written


def test_an_option_is_phrasing_content():
    """A <button> may hold no paragraph or list: options are rendered inline whatever they start with."""
    for text in ("1. the first", "- a dash", "# not a heading", "two\n\nparagraphs", "> quoted"):
        out = quiz.markdown_inline(text)
        assert not re.search(r"<(p|ol|ul|li|h\d|blockquote)\b", out), (text, out)


# --- the markup ------------------------------------------------------------------------------------


def test_each_question_is_a_named_group_with_labelled_controls(folder):
    page = quiz.quiz_html("09-test", "first", folder)
    tree = Tree(page)
    ids = [a["id"] for _, a in tree.elements if "id" in a]
    assert len(ids) == len(set(ids)), "duplicate ids"
    assert len(tree.find("style")) == 1 and len(tree.find("script")) == 1
    block = tree.by_class("lmcourse-quiz")
    assert len(block) == 1 and block[0]["data-unit"] == "09-test" and block[0]["data-section"] == "first"
    questions = tree.find("fieldset")
    assert [q["data-type"] for q in questions] == ["multiple_choice", "numeric"]
    for q in questions:  # named by its number and its text, both on the page
        assert all(i in ids for i in q["aria-labelledby"].split()), q
        assert q["aria-labelledby"].split()[-1].endswith("-prompt")

    options = tree.by_class("lmcourse-quiz__option")
    assert len(options) == 3 and all(o["type"] == "button" and o["aria-pressed"] == "false" for o in options)
    assert sorted(o["data-correct"] for o in options) == ["false", "false", "true"]
    whys = {a["id"]: a for a in tree.by_class("lmcourse-quiz__why")}
    for o in options:  # each option has its own feedback, hidden until chosen, and agreeing on correctness
        assert whys[o["data-why"]]["data-correct"] == o["data-correct"] and "hidden" in whys[o["data-why"]]

    (field,) = tree.find("input")
    assert field["inputmode"] == "decimal" and field["data-precision"] == "3"
    assert tree.find("label", **{"for": field["id"]}), "the numeric answer box has no <label>"
    assert tree.find("button", type="submit", **{"class": "lmcourse-quiz__check"})
    numeric = [a for a in tree.by_class("lmcourse-quiz__why") if "data-kind" in a]
    assert [(a["data-kind"], a.get("data-value"), a.get("data-low"), a.get("data-high"), a["data-correct"])
            for a in numeric] == [("value", "27", None, None, "true"), ("range", None, "728", "730", "false"),
                                  ("default", None, None, None, "false")]
    regions = tree.by_class("lmcourse-quiz__feedback")
    assert len(regions) == 2 and all(r["role"] == "status" and r["aria-live"] == "polite" for r in regions)
    assert field["aria-describedby"] in [r["id"] for r in regions]


def test_the_written_text_reaches_the_page(folder):
    page = quiz.quiz_html("09-test", "first", folder)
    assert "<em>current</em>" in page and r"\(h_t\)" in page and "<code>count_pairs</code>" in page
    assert "<code>&lt;BOS&gt;</code>" in page and "Only &lt;EOS&gt;" in page and r"\[\sum_i c_i\]" in page
    assert "No: &lt;EOS&gt; is <em>predicted</em>." in page


def test_quizzes_on_one_page_have_distinct_ids(folder):
    page = "".join(quiz.quiz_html("09-test", s, folder) for s in ("first", "second", "third"))
    ids = [a["id"] for _, a in Tree(page).elements if "id" in a]
    assert len(ids) == len(set(ids))


def test_the_script_defines_its_functions_once():
    """Many blocks on one page: each script must check before it defines, and listen on the document once."""
    assert "window.lmcourseQuiz = window.lmcourseQuiz ||" in quiz._SCRIPT
    assert "window.lmcourseTypesetLater = window.lmcourseTypesetLater ||" in quiz._SCRIPT
    assert quiz._SCRIPT.count("document.addEventListener") == 2
    assert quiz._SCRIPT.index("document.addEventListener") > quiz._SCRIPT.index("window.lmcourseQuiz || (function")


# --- shuffling --------------------------------------------------------------------------------------


def _options(page: str) -> list[str]:
    """The options' texts, in the order the page shows them."""
    return ["".join(Tree(m).text) for m in re.findall(r'class="lmcourse-quiz__text">(.*?)</span></button>', page)]


def test_shuffling_is_deterministic_and_leaves_random_alone(folder):
    random.seed(0)
    first = quiz.quiz_html("09-test", "first", folder)
    after = random.random()
    random.seed(0)
    again = quiz.quiz_html("09-test", "first", folder)
    random.seed(0)
    assert after == random.random(), "drawing a quiz consumed the chapter's random numbers"
    assert first == again, "two draws of the same section differ"
    # the same question in three sections: the seed depends on where it is, so not all three orders agree
    orders = {tuple(_options(quiz.quiz_html("09-test", s, folder))) for s in ("first", "second", "third")}
    assert len(orders) > 1, "every section shows the options in the same order"
    assert sorted(_options(first)) == sorted(a["answer"].replace("`", "") for a in MC["answers"])


def test_the_right_option_is_not_always_first():
    firsts = []
    for unit in UNITS:
        for section in quiz.load(unit, QUIZZES):
            page = quiz.quiz_html(unit, section, QUIZZES)
            firsts += re.findall(r'<div class="lmcourse-quiz__options[^"]*"><button [^>]*data-correct="(\w+)"', page)
    assert "true" in firsts and "false" in firsts and firsts.count("true") < len(firsts) / 2, firsts


# --- the placeholder and the notebook ---------------------------------------------------------------


def test_the_book_fills_placeholders_with_the_current_questions(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    monkeypatch.chdir(ROOT / "book" / "units")
    section = next(iter(quiz.load("03-rnnlm", QUIZZES)))
    monkeypatch.setenv(quiz.BOOK_BUILD_ENV, "1")
    quiz.self_check("03-rnnlm", section)
    assert len(shown) == 1 and "lmcourse-self-check" in shown[0].data and "<script" not in shown[0].data
    page = quiz.fill_placeholders("<p>before</p>" + shown[0].data + "<p>after</p>")
    assert page.startswith("<p>before</p>") and page.endswith("<p>after</p>") and "<script>" in page
    assert page.count("<fieldset") == len(quiz.load("03-rnnlm", QUIZZES)[section])
    monkeypatch.delenv(quiz.BOOK_BUILD_ENV)
    quiz.self_check("03-rnnlm", section)  # in a notebook: the questions themselves
    assert len(shown) == 2 and shown[1].data == quiz.quiz_html("03-rnnlm", section)


def test_a_page_carries_the_style_and_the_script_once():
    """A chapter has five or so question blocks: the page gets the CSS before the first and the script after the
    last, not once a block; a notebook output (quiz_html) keeps both, since it arrives alone."""
    sections = list(quiz.load("04-attention", QUIZZES))
    holders = "".join(f"<p>{s}</p>" + quiz.PLACEHOLDER.format(unit="04-attention", section=s) for s in sections)
    page = quiz.fill_placeholders(holders + "<p>end</p>")
    assert len(sections) > 1 and page.count("<style>") == 1 and page.count("<script>") == 1
    assert page.index("<style>") < page.index('class="lmcourse-quiz"')
    assert page.rindex('class="lmcourse-quiz"') < page.index("<script>") < page.index("<p>end</p>")
    assert page.count('class="lmcourse-quiz"') == len(sections)
    alone = quiz.quiz_html("04-attention", sections[0])
    assert alone.count("<style>") == 1 and alone.count("<script>") == 1


def test_validate_refuses_entities_and_links_in_options():
    broken = {"a": [dict(MC, question="After &lt;BOS&gt;?")], "b": [MC, MC], "c": [NUMERIC, NUMERIC]}
    assert any("HTML entity" in p for p in quiz.validate(broken))
    linked = dict(MC, answers=[dict(MC["answers"][0], answer="See [the chapter](../units/01-ngrams.html)")]
                  + MC["answers"][1:])
    assert any("a link in an answer" in p for p in quiz.validate({"a": [linked], "b": [MC, MC], "c": [NUMERIC, NUMERIC]}))
    assert quiz.validate({"a": [MC], "b": [MC, MC], "c": [NUMERIC, NUMERIC]}) == []


# --- the course's own questions ---------------------------------------------------------------------


def _written(unit: str):
    for section, qs in quiz.load(unit, QUIZZES).items():
        for q in qs:
            yield section, q["question"]
            for a in q["answers"]:
                if "answer" in a:
                    yield section, a["answer"]
                yield section, a["feedback"]


def _leftovers(text: str) -> list[str]:
    """What Markdown leaves behind when it was written wrongly: a `$`, a `*` or a backtick that did not pair
    up, a backslash outside the maths (an escape eaten by YAML), a formula that did not become one."""
    out = quiz.markdown(text)
    maths = re.findall(r'<(?:span|div) class="math notranslate nohighlight">(.*?)</(?:span|div)>', out, flags=re.S)
    prose = re.sub(r'<(span|div) class="math notranslate nohighlight">.*?</\1>|<code>.*?</code>', " ", out, flags=re.S)
    prose = "".join(Tree(prose).text)
    problems = []
    if re.search(r"[$*`\\]", prose):
        problems.append(f"Markdown left in the text: {prose.strip()[:120]!r}")
    if len(maths) != len(re.findall(r"\$\$.*?\$\$|\$[^$]*\$", text)):
        problems.append(f"{len(maths)} formulas rendered for the $...$ in {text[:80]!r}")
    return problems


@pytest.mark.parametrize("text", ["a *lone star", "an `open code span", "a \\times outside maths", "half a formula $x",
                                  "one $x$ and one $$y"])
def test_the_leftover_check_sees_broken_markdown(text):
    assert _leftovers(text), text


@pytest.mark.parametrize("unit", UNITS)
def test_every_question_file_validates_and_renders_cleanly(unit):
    data = yaml.safe_load((QUIZZES / f"{unit}.yaml").read_text(encoding="utf-8"))
    assert quiz.validate(data, unit) == []
    problems = [f"{section}: {p}" for section, text in _written(unit) for p in _leftovers(text)]
    for section in data:
        page = re.sub(r"<(script|style)>.*?</\1>", "", quiz.quiz_html(unit, section, QUIZZES), flags=re.S)
        if page.count(r"\(") != page.count(r"\)") or page.count(r"\[") != page.count(r"\]"):
            problems.append(f"{section}: unpaired TeX delimiters")
    assert not problems, "\n".join(problems)


def test_the_questions_use_markdown_and_maths():
    """The course writes maths as maths and code as code in its questions, not as plain text."""
    texts = [t for unit in UNITS for _, t in _written(unit)]
    assert sum("$" in t for t in texts) >= 150 and sum("`" in t for t in texts) >= 40
    plain = [t for t in texts if re.search(r"\b[a-zA-Z]_[a-zA-Z0-9(]", re.sub(r"\$[^$]*\$|`[^`]*`", "", t))]
    assert not plain, f"subscripts written as plain text (h_t): {plain[:5]}"
