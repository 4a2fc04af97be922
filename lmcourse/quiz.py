"""Self-check questions at the end of a chapter's major sections, answered in the browser.

The questions of a unit live in ``book/quizzes/<unit>.yaml``, grouped by the
section they close; a hidden-input cell at the end of that section shows them:

    from lmcourse.quiz import self_check
    self_check("01-ngrams", "markov")

Every option carries an explanation, the wrong ones most of all: a reader who
picks one learns *why* it is wrong.

**The schema**, checked by `validate` before anything is shown:

- ``type: multiple_choice``: ``answers`` is a list of ``{answer, correct, feedback}``,
  exactly one of them correct;
- ``type: numeric``: ``answers`` holds ``{type: value, value, correct: true, feedback}``
  (one or more), optional ``{type: range, range: [lo, hi], correct: false, feedback}``
  entries for the usual wrong answers, and one ``{type: default, feedback}``;
  ``precision`` (significant digits) rounds what the reader types before it is
  compared. The first value or range (in the file's order) that the rounded
  number matches answers it; a range holds ``lo <= x < hi``.

Question, answer and feedback texts are **Markdown**: ``*emphasis*``, code
between backticks, ``$h_t$`` and ``$$...$$`` for maths. They are rendered here, on the
server, by markdown-it-py (myst-parser's engine) with raw HTML switched off, so
that ``<BOS>`` is text and never a tag. Maths comes out as ``\\(...\\)`` and
``\\[...\\]`` inside ``<span class="math">`` (the markup Sphinx gives the
chapters' own maths), for MathJax to typeset in the page.

**The markup is accessible by construction**: each question is a ``<fieldset>``
named by its text; multiple-choice options are ``<button>`` elements (focusable,
operated with Enter or Space, ``aria-pressed`` on the one chosen); a numeric
answer is typed into a labelled ``<input>`` and checked with Enter or the Check
button; the verdict, in words ("Correct." or "Not quite.") and then the written
feedback, appears in a ``role="status"`` region that screen readers announce.
Everything a reader may see is in the HTML from the start (feedback hidden until
chosen), so MathJax typesets it together with the questions, and the script only
shows and hides.

The CSS class and data-attribute vocabulary (tests and the book's styles rely on it):

- ``.lmcourse-quiz[data-unit][data-section]``: one section's questions;
- ``.lmcourse-quiz__question[data-type="multiple_choice|numeric"]``, named by its
  ``.lmcourse-quiz__prompt``;
- ``button.lmcourse-quiz__option[data-correct="true|false"][aria-pressed]``;
- ``form.lmcourse-quiz__answer`` with ``input.lmcourse-quiz__input[data-precision]``
  and ``button.lmcourse-quiz__check``;
- ``.lmcourse-quiz__feedback[data-verdict="|correct|incorrect|invalid"]`` (the
  live region), holding ``.lmcourse-quiz__verdict`` and one ``.lmcourse-quiz__why``
  per answer (numeric ones carry ``data-kind``, ``data-value`` or ``data-low`` and
  ``data-high``, ``data-correct``).
"""

from __future__ import annotations

import html
import json
import random
import re
import zlib
from functools import cache
from pathlib import Path

MIN_QUESTIONS, MAX_QUESTIONS = 5, 10
TYPES = ("multiple_choice", "numeric")


class QuizError(ValueError):
    """A question file that does not follow the schema (the message names the question and the fix)."""


def quiz_dir(start: Path | None = None) -> Path:
    """book/quizzes/, found from a chapter's working directory (book/units/) or the course root."""
    start = (start or Path.cwd()).resolve()
    for base in (start, *start.parents):
        for candidate in (base / "quizzes", base / "book" / "quizzes"):
            if candidate.is_dir():
                return candidate
    raise QuizError(f"no book/quizzes/ folder above {start}")


def load(unit: str, folder: Path | None = None) -> dict[str, list[dict]]:
    """A unit's questions, by section key, validated."""
    import yaml

    path = (folder or quiz_dir()) / f"{unit}.yaml"
    if not path.exists():
        raise QuizError(f"no self-check questions for {unit}: {path} is missing")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    problems = validate(data, unit)
    if problems:
        raise QuizError(f"{path.name}:\n  " + "\n  ".join(problems))
    return data


def validate(data: dict, unit: str = "") -> list[str]:
    """Everything wrong with a unit's question file; [] when it is fine."""
    problems: list[str] = []
    if not isinstance(data, dict) or not data:
        return [f"{unit}: expected sections (a mapping of section key -> list of questions)"]
    total = 0
    for section, questions in data.items():
        if not isinstance(questions, list) or not questions:
            problems.append(f"{section}: expected a non-empty list of questions")
            continue
        for i, q in enumerate(questions, start=1):
            total += 1
            problems += [f"{section} question {i}: {p}" for p in _question_problems(q)]
    if not MIN_QUESTIONS <= total <= MAX_QUESTIONS:
        problems.append(f"{unit}: {total} questions; a chapter has {MIN_QUESTIONS}-{MAX_QUESTIONS}")
    return problems


def _question_problems(q) -> list[str]:
    if not isinstance(q, dict):
        return ["expected a mapping with question, type and answers"]
    out = []
    if not str(q.get("question", "")).strip():
        out.append("no question text")
    texts = [str(q.get("question", ""))] + [str(a.get(k, "")) for a in q.get("answers") or [] if isinstance(a, dict)
                                            for k in ("answer", "feedback")]
    if any(re.search(r"&(lt|gt|amp|quot|#\d+);", t) for t in texts):
        out.append("an HTML entity such as &lt;: write the character itself (<BOS>); the page escapes it")
    kind = q.get("type")
    if kind not in TYPES:
        return out + [f"type {kind!r}; expected one of {', '.join(TYPES)}"]
    answers = q.get("answers")
    if not isinstance(answers, list) or len(answers) < 2:
        return out + ["expected at least two answers (the right one and the wrong ones, each with feedback)"]
    for j, a in enumerate(answers, start=1):
        if not isinstance(a, dict) or not str(a.get("feedback", "")).strip():
            out.append(f"answer {j} has no feedback (say why it is right, or why it is wrong)")
    if kind == "multiple_choice":
        correct = [a for a in answers if isinstance(a, dict) and a.get("correct") is True]
        if len(correct) != 1:
            out.append(f"{len(correct)} answers marked correct; a multiple-choice question has exactly one")
        if any(not str(a.get("answer", "")).strip() for a in answers if isinstance(a, dict)):
            out.append("an answer without text")
        # An option is a button: a link inside it could be neither focused nor followed on its own.
        if any(re.search(r"\]\(|<https?:", str(a.get("answer", ""))) for a in answers if isinstance(a, dict)):
            out.append("a link in an answer (an option is a button: put the link in the feedback)")
    else:
        values = [a for a in answers if isinstance(a, dict) and a.get("type") == "value" and a.get("correct") is True]
        if not values or any(not isinstance(a.get("value"), (int, float)) for a in values):
            out.append("a numeric question needs a {type: value, value: <number>, correct: true} answer")
        if sum(isinstance(a, dict) and a.get("type") == "default" for a in answers) != 1:
            out.append("a numeric question needs exactly one {type: default, feedback: ...} answer")
        for a in answers:
            if isinstance(a, dict) and a.get("type") == "range":
                r = a.get("range")
                if not (isinstance(r, list) and len(r) == 2 and r[0] < r[1]):
                    out.append(f"range {r!r}: expected [low, high] with low < high")
    return out


def questions(unit: str, section: str, folder: Path | None = None) -> list[dict]:
    data = load(unit, folder)
    if section not in data:
        raise QuizError(f"{unit} has no self-check section {section!r}; its sections are: {', '.join(data)}")
    return data[section]


# --- Markdown and maths ------------------------------------------------------------------------


@cache
def _markdown():
    """CommonMark with `$...$` maths, and raw HTML off: `<EOS>` in a question is text, never a tag."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": False})
    # double_inline: `$$...$$` in the middle of a sentence is display maths too (a YAML string is one line).
    md.use(dollarmath_plugin, allow_labels=False, double_inline=True)

    # The plugin's own rules write the bare TeX; MathJax needs its delimiters back. The class "math" is the
    # one Sphinx gives the chapters' maths: the book's MathJax configuration processes it (processHtmlClass)
    # even inside the chapter's body, which the theme otherwise tells MathJax to skip.
    def inline(self, tokens, idx, options, env):
        return f'<span class="math notranslate nohighlight">\\({html.escape(tokens[idx].content.strip())}\\)</span>'

    def display(self, tokens, idx, options, env):
        return f'<span class="math notranslate nohighlight">\\[{html.escape(tokens[idx].content.strip())}\\]</span>'

    def block(self, tokens, idx, options, env):
        return f'<div class="math notranslate nohighlight">\\[{html.escape(tokens[idx].content.strip())}\\]</div>\n'

    md.add_render_rule("math_inline", inline)
    md.add_render_rule("math_inline_double", display)
    md.add_render_rule("math_block", block)
    return md


def markdown(text: str) -> str:
    """A question's or a feedback's text as HTML blocks (paragraphs, lists, display maths)."""
    return _markdown().render(str(text).strip())


def markdown_inline(text: str) -> str:
    """An option's text as HTML phrasing content, which is all a <button> may hold (no paragraph, no list)."""
    return _markdown().renderInline(" ".join(str(text).split()))


# --- the questions as HTML -----------------------------------------------------------------------


def _shuffled(items: list, seed: str) -> list:
    """`items` in an order that is the same on every build, seeded by the question's place (its unit, section
    and number), and drawn from a generator of our own: the global `random` is the chapter's, and its later
    numbers must not move when a quiz is drawn."""
    return random.Random(zlib.crc32(seed.encode())).sample(items, len(items))


def _attr(value) -> str:
    return html.escape(str(value), quote=True)


def _multiple_choice(q: dict, qid: str) -> tuple[str, str]:
    """The options (as buttons) and their feedback texts, hidden until chosen."""
    options, why = [], []
    answers = _shuffled(list(q["answers"]), qid)
    short = all(len(str(a["answer"])) <= 36 for a in answers)  # short options can sit side by side
    for i, a in enumerate(answers):
        oid = f"{qid}-o{i + 1}"
        correct = "true" if a.get("correct") is True else "false"
        options.append(
            f'<button type="button" class="lmcourse-quiz__option" id="{oid}" aria-pressed="false" '
            f'data-correct="{correct}" data-why="{oid}-why">'
            f'<span class="lmcourse-quiz__key" aria-hidden="true">{chr(ord("A") + i)}</span>'
            f'<span class="lmcourse-quiz__text">{markdown_inline(a["answer"])}</span></button>')
        why.append(f'<div class="lmcourse-quiz__why" id="{oid}-why" data-correct="{correct}" hidden>'
                   f'{markdown(a["feedback"])}</div>')
    layout = " lmcourse-quiz__options--short" if short else ""
    # no role="group" here: the fieldset around the question already groups the options under its name
    body = f'<div class="lmcourse-quiz__options{layout}">' + "".join(options) + "</div>"
    return body, "".join(why)


def _numeric(q: dict, qid: str) -> tuple[str, str]:
    """A labelled input and its Check button (a form: Enter submits it), and the feedback of every answer,
    in the file's order, with the numbers the script compares against."""
    precision = int(q.get("precision") or 0)
    body = (f'<form class="lmcourse-quiz__answer" novalidate>'
            f'<label class="lmcourse-quiz__label" for="{qid}-input">Your answer</label>'
            f'<span class="lmcourse-quiz__row">'
            f'<input class="lmcourse-quiz__input" id="{qid}-input" type="text" inputmode="decimal" '
            f'autocomplete="off" spellcheck="false" data-precision="{precision}" aria-describedby="{qid}-feedback">'
            f'<button type="submit" class="lmcourse-quiz__check">Check</button></span></form>')
    why = []
    for i, a in enumerate(q["answers"]):
        kind = a.get("type")
        data = f'data-kind="{_attr(kind)}" data-correct="{"true" if a.get("correct") is True else "false"}"'
        if kind == "value":
            data += f' data-value="{json.dumps(a["value"])}"'
        elif kind == "range":
            data += f' data-low="{json.dumps(a["range"][0])}" data-high="{json.dumps(a["range"][1])}"'
        why.append(f'<div class="lmcourse-quiz__why" id="{qid}-a{i + 1}-why" {data} hidden>{markdown(a["feedback"])}</div>')
    return body, "".join(why)


def _question(q: dict, qid: str, number: int, total: int) -> str:
    """One question: a fieldset named by its number and its text, its answer controls, and the live region
    where the feedback appears."""
    kind = q["type"]
    body, why = _multiple_choice(q, qid) if kind == "multiple_choice" else _numeric(q, qid)
    count = f"Question {number} of {total}" if total > 1 else "Question"
    return (f'<fieldset class="lmcourse-quiz__question" data-type="{kind}" aria-labelledby="{qid}-count {qid}-prompt">'
            f'<p class="lmcourse-quiz__count" id="{qid}-count">{count}</p>'
            f'<div class="lmcourse-quiz__prompt" id="{qid}-prompt">{markdown(q["question"])}</div>'
            f'{body}'
            f'<div class="lmcourse-quiz__feedback" id="{qid}-feedback" role="status" aria-live="polite" data-verdict="">'
            f'<p class="lmcourse-quiz__verdict"></p>{why}</div>'
            f'</fieldset>')


def quiz_html(unit: str, section: str, folder: Path | None = None, *, style: bool = True,
              script: bool = True) -> str:
    """The questions of one section as a self-contained block of HTML: its style, the questions, its script.

    The same block serves the book's page and a notebook's output. A notebook's outputs arrive one by one,
    so each carries the style and the script: the CSS is the same each time, and the script defines its
    functions and its listeners once (on `window` and `document`); every copy after the first only asks for
    the maths of quizzes not yet typeset. A book page is written at once: `fill_placeholders` puts the style
    before its first block and the script after its last, once each.
    """
    qs = questions(unit, section, folder)
    block = f"lmcourse-quiz-{unit}-{section}"
    drawn = "".join(_question(q, f"{block}-q{i}", i, len(qs)) for i, q in enumerate(qs, start=1))
    return ((f"<style>{_STYLE}</style>" if style else "")
            + f'<div class="lmcourse-quiz" id="{block}" data-unit="{unit}" data-section="{section}">{drawn}</div>'
            + (f"<script>{_SCRIPT}</script>" if script else ""))


# Colours and type come from the book's theme (pydata-sphinx-theme's variables switch with its light and dark
# modes), then from JupyterLab's, then fixed values that are the theme's light mode. Every text colour below
# is the theme's body text on a background of the theme's own: the success and danger colours are used for
# borders and marks only, where they would not reach 4.5:1 as text on their tinted backgrounds.
_STYLE = """
.lmcourse-quiz {
  --lq-text: var(--pst-color-text-base, var(--jp-content-font-color1, #222832));
  --lq-muted: var(--pst-color-text-muted, var(--jp-content-font-color2, #48566b));
  --lq-bg: var(--pst-color-background, var(--jp-layout-color0, #fff));
  --lq-surface: var(--pst-color-surface, var(--jp-layout-color2, #f3f4f5));
  --lq-border: var(--pst-color-border, var(--jp-border-color1, #d1d5da));
  --lq-primary: var(--pst-color-primary, var(--jp-brand-color1, #0a7d91));
  --lq-on-primary: var(--pst-color-primary-text, #fff);
  --lq-primary-bg: var(--pst-color-primary-bg, #d0ecf1);
  --lq-right: var(--pst-color-success, #00843f);
  --lq-right-bg: var(--pst-color-success-bg, #d6ece1);
  --lq-wrong: var(--pst-color-danger, #d72d47);
  --lq-wrong-bg: var(--pst-color-danger-bg, #f9e1e4);
  max-width: 720px;
  margin: 0.75rem 0 1.75rem;
  color: var(--lq-text);
  font-family: var(--pst-font-family-base, var(--jp-content-font-family, system-ui, sans-serif));
  line-height: 1.55;
}
.lmcourse-quiz__question {
  margin: 0 0 1rem;
  padding: 1rem 1.25rem 1.1rem;
  min-width: 0;
  border: 1px solid var(--lq-border);
  border-radius: 0.5rem;
  background: var(--lq-bg);
  box-shadow: 0 1px 2px var(--pst-color-shadow, rgba(0, 0, 0, 0.06));
}
.lmcourse-quiz p { margin: 0 0 0.5rem; }
.lmcourse-quiz p:last-child { margin-bottom: 0; }
.lmcourse-quiz__count {
  font-size: 0.8rem;
  font-weight: 600;
  letter-spacing: 0.04em;
  text-transform: uppercase;
  color: var(--lq-muted);
}
.lmcourse-quiz__prompt { margin: 0 0 0.85rem; font-weight: 500; }
.lmcourse-quiz__options { display: grid; gap: 0.5rem; grid-template-columns: minmax(0, 1fr); }
.lmcourse-quiz__options--short { grid-template-columns: repeat(auto-fill, minmax(min(100%, 15rem), 1fr)); }
.lmcourse-quiz__option {
  display: flex;
  align-items: baseline;
  gap: 0.65rem;
  width: 100%;
  margin: 0;
  padding: 0.55rem 0.8rem;
  text-align: left;
  font: inherit;
  font-size: 0.95rem;
  line-height: 1.5;
  color: var(--lq-text);
  background: var(--lq-surface);
  border: 1px solid var(--lq-border);
  border-radius: 0.375rem;
  cursor: pointer;
  transition: border-color 0.12s, background-color 0.12s;
}
.lmcourse-quiz__option:hover { border-color: var(--lq-primary); }
.lmcourse-quiz__key {
  flex: none;
  display: inline-grid;
  place-items: center;
  width: 1.5rem;
  height: 1.5rem;
  font-size: 0.8rem;
  font-weight: 600;
  color: var(--lq-text);
  background: var(--lq-bg);
  border: 1px solid var(--lq-border);
  border-radius: 50%;
}
.lmcourse-quiz__text { flex: 1 1 auto; min-width: 0; overflow-wrap: anywhere; }
.lmcourse-quiz__option[aria-pressed="true"][data-correct="true"] {
  background: var(--lq-right-bg); border-color: var(--lq-right); box-shadow: inset 4px 0 0 var(--lq-right);
}
.lmcourse-quiz__option[aria-pressed="true"][data-correct="false"] {
  background: var(--lq-wrong-bg); border-color: var(--lq-wrong); box-shadow: inset 4px 0 0 var(--lq-wrong);
}
.lmcourse-quiz__option[aria-pressed="true"] .lmcourse-quiz__key { color: var(--lq-bg); border-color: transparent; }
.lmcourse-quiz__option[aria-pressed="true"][data-correct="true"] .lmcourse-quiz__key { background: var(--lq-right); }
.lmcourse-quiz__option[aria-pressed="true"][data-correct="false"] .lmcourse-quiz__key { background: var(--lq-wrong); }
.lmcourse-quiz__answer { margin: 0; }
.lmcourse-quiz__label { display: block; margin: 0 0 0.3rem; font-size: 0.9rem; font-weight: 600; }
.lmcourse-quiz__row { display: flex; flex-wrap: wrap; gap: 0.5rem; }
.lmcourse-quiz__input {
  width: 11rem;
  max-width: 100%;
  margin: 0;
  padding: 0.45rem 0.7rem;
  font: inherit;
  color: var(--lq-text);
  background: var(--lq-bg);
  border: 1px solid var(--lq-muted);  /* a field's edge needs 3:1 against the page (WCAG 1.4.11) */
  border-radius: 0.375rem;
}
.lmcourse-quiz__check {
  margin: 0;
  padding: 0.45rem 1.1rem;
  font: inherit;
  font-weight: 600;
  color: var(--lq-on-primary);
  background: var(--lq-primary);
  border: 1px solid var(--lq-primary);
  border-radius: 0.375rem;
  cursor: pointer;
}
.lmcourse-quiz__check:hover { filter: brightness(0.92); }
.lmcourse-quiz__option:focus-visible, .lmcourse-quiz__check:focus-visible, .lmcourse-quiz__input:focus-visible {
  outline: 3px solid var(--lq-primary);
  outline-offset: 2px;
}
.lmcourse-quiz__feedback:not([data-verdict=""]) {
  margin-top: 0.85rem;
  padding: 0.65rem 0.9rem;
  font-size: 0.95rem;
  border-radius: 0.375rem;
  border-left: 4px solid var(--lq-border);
  background: var(--lq-surface);
}
.lmcourse-quiz__feedback[data-verdict="correct"] { border-left-color: var(--lq-right); background: var(--lq-right-bg); }
.lmcourse-quiz__feedback[data-verdict="incorrect"] { border-left-color: var(--lq-wrong); background: var(--lq-wrong-bg); }
.lmcourse-quiz__verdict { font-weight: 700; margin: 0 0 0.25rem; }
.lmcourse-quiz__verdict:empty { display: none; }
.lmcourse-quiz__feedback[data-verdict="correct"] .lmcourse-quiz__verdict::before {
  content: "\\2713" / ""; color: var(--lq-right); margin-right: 0.4rem;
}
.lmcourse-quiz__feedback[data-verdict="incorrect"] .lmcourse-quiz__verdict::before {
  content: "\\2717" / ""; color: var(--lq-wrong); margin-right: 0.4rem;
}
.lmcourse-quiz__why[hidden] { display: none; }
/* In dark mode the theme puts every HTML cell output in a light box (for outputs drawn for light pages only);
   the quizzes take the theme's dark colours themselves, so theirs is given back to the page. */
html[data-theme="dark"] .cell_output .text_html:has(> .lmcourse-quiz) {
  background: none !important; color: inherit !important; padding: 0 !important;
}
@media (max-width: 480px) {
  .lmcourse-quiz__question { padding: 0.85rem 0.9rem 1rem; }
}
@media (prefers-reduced-motion: reduce) { .lmcourse-quiz__option { transition: none; } }
"""
_STYLE = " ".join(_STYLE.split())  # sent once per quiz block: no indentation

# MathJax on the book's pages: vendored MathJax 3 loads deferred, so a quiz's script runs while
# `window.MathJax` is still the page's configuration object (no typesetPromise yet). The theme tells MathJax's
# first pass to skip the document body except elements of class "math", which ours are: that pass typesets the
# questions and their hidden feedback. What it did not reach (a page configured otherwise, a notebook whose
# MathJax does not typeset outputs itself) `lmcourseTypesetLater` typesets once MathJax has started; a block
# added after that (a notebook's new output) asks MathJax at once (the end of _SCRIPT). Only quizzes still
# holding TeX are typeset, and the requests wait for one another in a queue of our own (`lmcourseTypesetQueue`,
# which starts with MathJax's startup), so no formula is typeset twice. JupyterLab typesets HTML outputs itself and has no
# global MathJax: there the wait ends after two minutes with nothing to do.
_TYPESET_LATER = r"""// Typeset the quizzes that still hold TeX, once MathJax's own pass and every earlier request are over.
window.lmcourseTypesetNow = window.lmcourseTypesetNow || function (mj) {
  window.lmcourseTypesetQueue = (window.lmcourseTypesetQueue || mj.startup.promise)
    .then(() => {
      const todo = Array.from(document.querySelectorAll('.lmcourse-quiz')).filter(q => /\\\(|\\\[/.test(q.textContent));
      return todo.length ? mj.typesetPromise(todo) : null;
    })
    .then(() => window.lmcourseQuiz.untab())
    .catch(err => console.warn('lmcourse quiz: MathJax could not typeset the questions', err));
  return window.lmcourseTypesetQueue;
};
window.lmcourseTypesetLater = window.lmcourseTypesetLater || function () {
  if (window.lmcourseTypesetWaiting) return false;
  window.lmcourseTypesetWaiting = true;
  const start = Date.now();
  (function wait() {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      window.lmcourseTypesetNow(mj).finally(() => { window.lmcourseTypesetWaiting = false; });
    } else if (Date.now() - start < 120000) {
      setTimeout(wait, 100);
    } else {
      window.lmcourseTypesetWaiting = false;  // MathJax never came: the questions stay as plain TeX
    }
  })();
  return false;
};"""

# One click listener and one submit listener on the document serve every quiz, those drawn later included
# (a notebook adds outputs as cells run), so the script defines them once and a repeated block adds nothing.
_SCRIPT = _TYPESET_LATER + r"""
window.lmcourseQuiz = window.lmcourseQuiz || (function () {
  const VERDICT = {correct: 'Correct.', incorrect: 'Not quite.', invalid: 'Type a number, such as 0.25, 2/9 or 1e-3.'};

  // Show one answer's feedback: the verdict in words first (colour alone would tell a screen-reader user,
  // or a colour-blind one, nothing), then the explanation written for that answer.
  function show(question, why, verdict) {
    const region = question.querySelector('.lmcourse-quiz__feedback');
    region.querySelectorAll('.lmcourse-quiz__why').forEach(w => { w.hidden = w !== why; });
    region.dataset.verdict = verdict;
    region.querySelector('.lmcourse-quiz__verdict').textContent = VERDICT[verdict];
  }

  function choose(option) {
    const question = option.closest('.lmcourse-quiz__question');
    question.querySelectorAll('.lmcourse-quiz__option').forEach(o => o.setAttribute('aria-pressed', String(o === option)));
    show(question, document.getElementById(option.dataset.why), option.dataset.correct === 'true' ? 'correct' : 'incorrect');
  }

  // What the reader typed, as a number: "0.25", "2/9", "1e-3", "−3" (a typographic minus), "0,25" (a decimal
  // comma, which a phone's decimal keypad offers in many languages) and "6,406" or "6 406" (thousands).
  function parse(text) {
    let s = text.trim().replace(/[\s\u00a0\u202f']/g, '').replace(/[\u2212\u2013]/g, '-');
    if (s.includes(',')) s = s.includes('.') || /^[-+]?\d{1,3}(,\d{3})+$/.test(s) ? s.replace(/,/g, '') : s.replace(',', '.');
    const number = t => /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(t) ? Number(t) : NaN;
    const parts = s.split('/');
    const x = parts.length === 2 ? number(parts[0]) / number(parts[1]) : number(s);
    return Number.isFinite(x) ? x : NaN;
  }

  function check(form) {
    const question = form.closest('.lmcourse-quiz__question');
    const input = form.querySelector('.lmcourse-quiz__input');
    const typed = parse(input.value);
    if (Number.isNaN(typed)) return show(question, null, 'invalid');
    // The schema's rule: round what was typed (and each right value) to `precision` significant digits,
    // then the first value or range that matches, in the file's order, answers; else the default feedback.
    const digits = Number(input.dataset.precision) || 0;
    const round = x => digits > 0 ? Number(Number(x).toPrecision(digits)) : Number(x);
    const x = round(typed);
    const answers = Array.from(question.querySelectorAll('.lmcourse-quiz__why'));
    const match = answers.find(a => (a.dataset.kind === 'value' && round(a.dataset.value) === x) ||
                                    (a.dataset.kind === 'range' && Number(a.dataset.low) <= x && x < Number(a.dataset.high)))
                  || answers.find(a => a.dataset.kind === 'default');
    show(question, match, match && match.dataset.correct === 'true' ? 'correct' : 'incorrect');
  }

  // MathJax puts every formula in the tab order; inside an option that is a focusable element within a
  // button (the keyboard would stop on it, and a screen reader would not know what it belongs to).
  function untab() {
    document.querySelectorAll('.lmcourse-quiz__option mjx-container[tabindex]').forEach(m => m.removeAttribute('tabindex'));
  }

  document.addEventListener('click', event => {
    const option = event.target.closest && event.target.closest('.lmcourse-quiz__option');
    if (option) choose(option);
  });
  document.addEventListener('submit', event => {
    const form = event.target.closest && event.target.closest('.lmcourse-quiz__answer');
    if (form) { event.preventDefault(); check(form); }
  });
  return {choose: choose, check: check, parse: parse, untab: untab};
})();
(function () {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
    // MathJax is running (a notebook, or a block added after the page loaded): once its first pass and any
    // typesetting a quiz asked for before are over, typeset what is still TeX.
    window.lmcourseTypesetNow(mj);
  } else {
    window.lmcourseTypesetLater();
  }
})();"""


# Set by `lmcourse book` for the chapters it runs: self_check() then leaves a placeholder that the book's
# Sphinx extension fills with the questions as they are *now* (see self_check).
BOOK_BUILD_ENV = "LMCOURSE_BOOK_BUILD"
PLACEHOLDER = '<div class="lmcourse-self-check" data-unit="{unit}" data-section="{section}"></div>'
_PLACEHOLDER_RE = re.compile(r'<div class="lmcourse-self-check" data-unit="([\w-]+)" data-section="([\w-]+)"></div>')


def fill_placeholders(body: str) -> str:
    """Every self-check placeholder in a page's HTML, replaced by its questions: the style with the first
    block, the script with the last (once the page's questions are all in the document)."""
    found = list(_PLACEHOLDER_RE.finditer(body))
    out, end = [], 0
    for i, m in enumerate(found):
        out += [body[end:m.start()], quiz_html(m.group(1), m.group(2), style=i == 0, script=i == len(found) - 1)]
        end = m.end()
    return "".join(out) + body[end:]


def self_check(unit: str, section: str) -> None:
    """Show the questions that close `section` of `unit`.

    In a notebook, they are drawn at once. While `lmcourse book` runs the
    chapter, the output is a placeholder instead, which the book's Sphinx
    extension fills when it writes the page: the chapter's executed outputs
    are cached on its code alone, so questions drawn at execution time would
    go stale the first time a question file changed without the chapter.
    """
    import os

    from IPython.display import HTML, display

    questions(unit, section)  # a broken question file fails here, in the chapter, with its message
    if os.environ.get(BOOK_BUILD_ENV) == "1":
        display(HTML(PLACEHOLDER.format(unit=unit, section=section)))
    else:
        display(HTML(quiz_html(unit, section)))
