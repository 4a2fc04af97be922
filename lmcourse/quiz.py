"""Self-check questions at the end of a chapter's major sections, answered in the browser.

The questions of a unit live in ``book/quizzes/<unit>.yaml``, grouped by the
section they close; a hidden-input cell at the end of that section shows them:

    from lmcourse.quiz import self_check
    self_check("01-ngrams", "markov")

They are drawn by `jupyterquiz <https://github.com/jmshea/jupyterquiz>`_,
which embeds its JavaScript and the questions in the cell's output: the page
needs no server and no remote asset. Every option carries an explanation,
the wrong ones most of all: a reader who picks one learns *why* it is wrong.

The schema is jupyterquiz's, checked here before anything is shown:

- ``type: multiple_choice``: ``answers`` is a list of ``{answer, correct, feedback}``,
  exactly one of them correct;
- ``type: numeric``: ``answers`` holds ``{type: value, value, correct: true, feedback}``
  (one or more), optional ``{type: range, range: [lo, hi], correct: false, feedback}``
  entries for the usual wrong answers, and one ``{type: default, feedback}``;
  ``precision`` (significant digits) rounds what the reader types before it is compared.
"""

from __future__ import annotations

import html
import re
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


def _escaped(value):
    """Text for jupyterquiz, which writes it with innerHTML: `<BOS>` must stay text, not become a tag."""
    if isinstance(value, str):
        return html.escape(value, quote=False)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: (_escaped(v) if k in ("question", "answer", "feedback") or isinstance(v, (list, dict)) else v)
                for k, v in value.items()}
    return value


# Set by `lmcourse book` for the chapters it runs: self_check() then leaves a placeholder that the book's
# Sphinx extension fills with the questions as they are *now* (see self_check).
BOOK_BUILD_ENV = "LMCOURSE_BOOK_BUILD"
PLACEHOLDER = '<div class="lmcourse-self-check" data-unit="{unit}" data-section="{section}"></div>'
_PLACEHOLDER_RE = re.compile(r'<div class="lmcourse-self-check" data-unit="([\w-]+)" data-section="([\w-]+)"></div>')


def _drawn(unit: str, section: str, show) -> None:
    """Call jupyterquiz's display_quiz with `show` as its display function."""
    import random
    import zlib
    from unittest import mock

    from jupyterquiz import display_quiz

    # jupyterquiz names the quiz's <div> with Python's global `random`. A chapter that re-seeds it
    # (seed_everything) would give two quizzes the same id, and the second would never be drawn; and
    # every draw here would shift the chapter's later random numbers. So: a seed of our own, from the
    # section's name (stable ids), and the caller's random state put back afterwards.
    state = random.getstate()
    random.seed(zlib.crc32(f"{unit}/{section}".encode()))
    try:
        with mock.patch("jupyterquiz.dynamic.display.display", show):
            display_quiz(_escaped(questions(unit, section)), shuffle_answers=True, max_width=720,
                         question_alignment="left")
    finally:
        random.setstate(state)


def quiz_html(unit: str, section: str, folder: Path | None = None) -> str:
    """The questions of one section as a block of HTML with its script (what the book's page shows)."""
    parts: list[str] = []

    def show(obj):
        data = obj.data if hasattr(obj, "data") else str(obj)
        parts.append(data if type(obj).__name__ == "HTML" else f'<script type="text/javascript">{data}</script>')

    if folder is not None:
        questions(unit, section, folder)  # validates, with the folder's path in the message
    _drawn(unit, section, show)
    drawn = _MATHJAX_TEST.sub(r"\g<0> && MathJax.version && MathJax.typeset || lmcourseTypesetLater()",
                              "".join(parts))
    return f'<script type="text/javascript">{_TYPESET_LATER}</script>' + drawn


# jupyterquiz asks `typeof MathJax != 'undefined'` before reading MathJax.version and calling
# MathJax.typeset. On the book's pages `window.MathJax` is the configuration object until the deferred
# MathJax script replaces it (and typeset exists only once MathJax has started), so a quiz drawn first
# (a slow connection, a loaded machine) threw "reading '0'" and was left half-drawn. Now a quiz drawn
# early skips its own typesetting and asks for the questions to be typeset once MathJax has started
# (the page's own first pass leaves them alone: the theme tells MathJax to ignore the document body).
_MATHJAX_TEST = re.compile(r"typeof MathJax\s*!==?\s*'undefined'")
_TYPESET_LATER = """window.lmcourseTypesetLater = window.lmcourseTypesetLater || function () {
  if (window.lmcourseTypesetWaiting) return false;
  window.lmcourseTypesetWaiting = true;
  const start = Date.now();
  (function wait() {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      mj.startup.promise.then(() => mj.typesetPromise(Array.from(document.querySelectorAll('.Quiz'))))
        .finally(() => { window.lmcourseTypesetWaiting = false; });
    } else if (Date.now() - start < 120000) {
      setTimeout(wait, 100);
    } else {
      window.lmcourseTypesetWaiting = false;  // MathJax never came: the questions stay as plain TeX
    }
  })();
  return false;
};"""


def fill_placeholders(body: str) -> str:
    """Every self-check placeholder in a page's HTML, replaced by its questions."""
    return _PLACEHOLDER_RE.sub(lambda m: quiz_html(m.group(1), m.group(2)), body)


def self_check(unit: str, section: str) -> None:
    """Show the questions that close `section` of `unit`.

    In a notebook, jupyterquiz draws them at once. While `lmcourse book` runs
    the chapter, the output is a placeholder instead, which the book's Sphinx
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
        _drawn(unit, section, display)
