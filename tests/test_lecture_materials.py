"""The lecture materials' sources: decks, self-check questions and instructor notes match their chapters.

Fast (no build, no browser): what `lmcourse slides --check` reports, per
unit, must be nothing; and the checks behind it catch each kind of mistake
an author makes (proved on broken copies).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lmcourse import quiz
from lmcourse.instructor import lecture, notes as instructors, slides

ROOT = Path(__file__).resolve().parent.parent
SYLLABUS = ROOT.parent / "shared" / "guides" / "syllabus.md"
CHAPTERS = sorted(p.stem for p in (ROOT / "book" / "units").glob("*.md"))
DECKS = sorted(p.stem for p in (ROOT / slides.SLIDES_SRC).glob("*.md"))


def test_every_chapter_has_a_deck_questions_and_notes():
    for unit in CHAPTERS:
        assert (ROOT / slides.SLIDES_SRC / f"{unit}.md").exists(), f"{unit}: no deck in book/slides/"
        assert (ROOT / "book" / "quizzes" / f"{unit}.yaml").exists(), f"{unit}: no self-check questions"
        assert (ROOT / instructors.NOTES_SRC / f"{unit}.md").exists(), f"{unit}: no instructor notes"


@pytest.mark.parametrize("unit", DECKS)
def test_deck_matches_its_chapter(unit):
    deck = slides.parse_deck(ROOT / slides.SLIDES_SRC / f"{unit}.md")
    chapter = slides.load_chapter(ROOT, unit, outputs=False)
    starred = None
    number = int(unit.split("-")[0])
    if SYLLABUS.exists() and number <= 7:
        starred = len(slides.starred_items(SYLLABUS, number))
        assert starred >= 3, f"the syllabus lists {starred} starred items for unit {number}: the parser lost some"
    problems = slides.check_deck(deck, chapter, starred=starred, executed=False)
    assert not problems, "\n".join(problems)
    refs = [c for s in deck.slides for c in s.body if isinstance(c, slides.Ref)]
    assert refs, f"{unit}: the deck pulls nothing from its chapter"
    if any(slides._figure_name(c) for c in chapter.code):
        assert any(r.kind == "figure" for r in refs), f"{unit}: the deck shows none of the chapter's figures"


@pytest.mark.parametrize("unit", DECKS)
def test_self_checks_are_shown_in_their_chapter(unit):
    assert lecture.check_self_checks(ROOT, unit) == []
    data = quiz.load(unit, ROOT / "book" / "quizzes")
    kinds = [q["type"] for qs in data.values() for q in qs]
    assert "numeric" in kinds and "multiple_choice" in kinds, f"{unit}: needs both kinds of question, has {kinds}"


@pytest.mark.parametrize("unit", DECKS)
def test_instructor_notes_are_complete(unit):
    deck = slides.parse_deck(ROOT / slides.SLIDES_SRC / f"{unit}.md")
    assert instructors.check_notes(ROOT, unit, deck_slides=len(deck.slides)) == []


def test_the_check_command_passes():
    assert lecture.main(ROOT, [], check_only=True) == 0


# --- the checks catch broken sources -------------------------------------------------------

DECK = """# A deck

Note:
These are the speaker notes of the title slide, long enough.

---

## The chain rule

{equation}`ngram-chain-rule`

Syllabus: 1

Note:
These are the speaker notes of the second slide, long enough too.
"""


def _deck(tmp_path, text: str, copies: int = 22) -> slides.Deck:
    body = text + "".join(f"\n---\n\n## Slide {i}\n\n- a point\n\nNote:\nWhat to say on this slide, in a full sentence here.\n"
                          for i in range(copies - 2))
    path = tmp_path / "01-ngrams.md"
    path.write_text(body)
    return slides.parse_deck(path)


@pytest.fixture(scope="module")
def chapter():
    return slides.load_chapter(ROOT, "01-ngrams", outputs=False)


def test_a_good_deck_passes(tmp_path, chapter):
    deck = _deck(tmp_path, DECK)
    assert len(deck.slides) == 22
    assert slides.check_deck(deck, chapter, starred=1, executed=False) == []


@pytest.mark.parametrize("change, expected", [
    (lambda t: t, "slides; a deck has 20-35"),  # too few slides (copies=5 below)
    (lambda t: t.replace("Note:\nThese are the speaker notes of the second slide, long enough too.\n", ""),
     "speaker notes missing"),
    (lambda t: t.replace("{equation}`ngram-chain-rule`", "{figure}`ngram-fig-nowhere`"), "no figure named"),
    (lambda t: t.replace("{equation}`ngram-chain-rule`", "{equation}`no-such-label`"), "no equation labelled"),
    (lambda t: t.replace("{equation}`ngram-chain-rule`", "{code}`import`"), "code cells of the chapter hold"),
    (lambda t: t.replace("Syllabus: 1", ""), "starred syllabus items [1] are on no slide"),
    (lambda t: t.replace("## The chain rule", "The chain rule"), "no heading"),
])
def test_a_broken_deck_is_caught(tmp_path, chapter, change, expected):
    copies = 5 if expected.startswith("slides;") else 22
    deck = _deck(tmp_path, change(DECK), copies=copies)
    problems = slides.check_deck(deck, chapter, starred=1, executed=False)
    assert any(expected in p for p in problems), problems


def test_code_lines_out_of_range_are_caught(tmp_path, chapter):
    deck = _deck(tmp_path, DECK.replace("{equation}`ngram-chain-rule`",
                                        "{code}`trigram_followers = defaultdict(Counter)` lines 2-90"))
    assert any("lines 2-90" in p for p in slides.check_deck(deck, chapter, executed=False))


# --- code excerpts are whole units ----------------------------------------------------------

CELL = '''\
%matplotlib inline
def perplexity(model, tokens):
    """exp of the mean negative log-probability."""
    total = 0.0
    for t, token in enumerate(tokens):
        total -= math.log(model(tokens[:t], token))
    return math.exp(total / len(tokens))


class Table:
    """Counts."""

    def __init__(self, rows):
        self.rows = {k: sorted(v,
                               reverse=True) for k, v in rows.items()}

    def get(self, key):
        return self.rows[key]


tables = [Table(r) for r in ROWS]
!ls data
'''


@pytest.mark.parametrize("ranges, more, shown", [
    ((), False, None),  # the whole cell, magics included (read as IPython reads them)
    (((2, 7),), False, "def perplexity(model, tokens):"),  # a whole def
    (((17, 18),), False, "def get(self, key):\n    return self.rows[key]"),  # a method, shown flush left
    (((2, 3), (7, 7)), False, 'def perplexity(model, tokens):\n    """exp of the mean negative log-probability."""\n'
                              "    ...\n    return math.exp(total / len(tokens))"),
    (((10, 15),), True, "\n    ..."),  # the class up to its __init__, the rest elided
    (((21, 22),), False, "!ls data"),  # a shell line is a statement of its own
])
def test_a_whole_excerpt_passes(ranges, more, shown):
    excerpt, problems = slides.check_excerpt(CELL, ranges, more)
    assert problems == [], problems
    if shown:
        assert shown in excerpt
    assert not excerpt.startswith(" "), "an excerpt is shown flush left"


@pytest.mark.parametrize("ranges, more, expected", [
    (((4, 7),), False, "the inside of `def perplexity` (lines 2-7), a body without its header: widen the range to "
                       "lines 2-7, the whole def"),  # ending in an orphan return
    (((5, 6),), False, "the inside of `def perplexity`"),  # a loop without its def
    (((2, 5),), False, "stops inside `def perplexity` (lines 2-7): widen the range to end at line 7"),
    (((10, 15),), False, "mark the cut: `lines 10-15, ...`"),
    (((15, 18),), False, "line 15 is inside a statement that begins on line 14 (an open bracket"),
    (((13, 14),), False, "line 14 ends mid-statement (it goes on to line 15): end the range at line 15"),
    (((2, 7), (17, 18)), False, "does not compile on its own"),  # a def, then a method cut from its class
    (((2, 3), (4, 7)), False, "hold no code: join the two ranges"),
    (((2, 7),), True, "no statement shown goes on after it: drop the `, ...`"),
    (((7, 2),), False, "lines 7-2 of a cell of 22 lines"),
    (((10, 15), (2, 3)), False, "list the ranges in order"),
])
def test_a_broken_excerpt_is_caught(ranges, more, expected):
    _, problems = slides.check_excerpt(CELL, ranges, more)
    assert any(expected in p for p in problems), problems


def test_a_cell_magic_is_shown_unchecked():
    excerpt, problems = slides.check_excerpt("%%bash\necho one\n  echo two\n", ((2, 3),))
    assert problems == [] and excerpt == "echo one\n  echo two"


@pytest.mark.parametrize("spec, readable", [
    ("lines 12-20", True),
    ("lines 1-3, 9-12", True),
    ("lines 12-20, ...", True),
    ("lines 12", False),
    ("lines 12-20, ..., 22-23", False),
])
def test_the_lines_syntax(tmp_path, spec, readable):
    path = tmp_path / "01-ngrams.md"
    path.write_text(f"# T\n\n{{code}}`class CountTable:` {spec}\n")
    ref = slides.parse_deck(path).slides[0].body[-1]
    assert isinstance(ref, slides.Ref) and ref.spec == spec.removeprefix("lines ")
    assert ref.unreadable != readable


def test_a_deck_that_cuts_a_def_is_caught_with_the_fix(tmp_path, chapter):
    """Through check_deck (what `lmcourse slides --check` runs): the message names the slide and the whole lines."""
    deck = _deck(tmp_path, DECK.replace("{equation}`ngram-chain-rule`", "{code}`class CountTable:` lines 16-20"))
    problems = slides.check_deck(deck, chapter, executed=False)
    assert any(p.startswith("01-ngrams slide 2 (The chain rule): {code}`class CountTable:` lines 16-20: lines 16-20 "
                            "are the inside of `def __init__` (lines 15-20), a body without its header: widen the "
                            "range to lines 15-20, the whole def") for p in problems), problems
    unreadable = _deck(tmp_path, DECK.replace("{equation}`ngram-chain-rule`", "{code}`class CountTable:` lines 16"))
    assert any("write the lines shown as ranges" in p for p in slides.check_deck(unreadable, chapter, executed=False))


QUESTION = {"question": "Which?", "type": "multiple_choice", "answers": [
    {"answer": "this", "correct": True, "feedback": "Right, because."},
    {"answer": "that", "correct": False, "feedback": "No: that is the other thing."}]}
NUMERIC = {"question": "How many?", "type": "numeric", "precision": 3, "answers": [
    {"type": "value", "value": 27, "correct": True, "feedback": "One per symbol."},
    {"type": "range", "range": [728, 730], "correct": False, "feedback": "That counts cells."},
    {"type": "default", "feedback": "Count the histories."}]}


def _quiz(**changes):
    import copy

    mc, num = copy.deepcopy(QUESTION), copy.deepcopy(NUMERIC)
    for key, fn in changes.items():
        fn(mc if key == "mc" else num)
    return {"a": [mc, num], "b": [copy.deepcopy(QUESTION)] * 2, "c": [copy.deepcopy(NUMERIC)]}


def test_a_good_question_file_passes():
    assert quiz.validate(_quiz()) == []


@pytest.mark.parametrize("changes, expected", [
    ({"mc": lambda q: q["answers"][1].update(correct=True)}, "2 answers marked correct"),
    ({"mc": lambda q: q["answers"][1].pop("feedback")}, "answer 2 has no feedback"),
    ({"mc": lambda q: q.update(type="essay")}, "type 'essay'"),
    ({"num": lambda q: q["answers"].pop()}, "exactly one {type: default"),
    ({"num": lambda q: q["answers"][0].update(value="27")}, "needs a {type: value"),
    ({"num": lambda q: q["answers"][1].update(range=[730, 728])}, "low < high"),
])
def test_a_broken_question_is_caught(changes, expected):
    problems = quiz.validate(_quiz(**changes))
    assert any(expected in p for p in problems), problems


def test_too_many_questions_are_caught():
    data = {f"s{i}": [QUESTION, NUMERIC] for i in range(6)}
    assert any("12 questions" in p for p in quiz.validate(data))


def _notes(tmp_path, change=lambda t: t) -> list[str]:
    text = (ROOT / instructors.NOTES_SRC / "01-ngrams.md").read_text()
    folder = tmp_path / "instructors"
    folder.mkdir(exist_ok=True)
    (folder / "01-ngrams.md").write_text(change(text))
    (tmp_path / "autograder" / "01-ngrams").mkdir(parents=True, exist_ok=True)
    (tmp_path / "autograder" / "01-ngrams" / "mistakes.py").write_text(
        (ROOT / "autograder" / "01-ngrams" / "mistakes.py").read_text())
    deck = slides.parse_deck(ROOT / slides.SLIDES_SRC / "01-ngrams.md")
    return instructors.check_notes(tmp_path, "01-ngrams", deck_slides=len(deck.slides))


def test_good_notes_pass(tmp_path):
    assert _notes(tmp_path) == []


@pytest.mark.parametrize("change, expected", [
    (lambda t: t.replace("## Learning objectives", "## Objectives"), "no section '## Learning objectives'"),
    (lambda t: re.sub(r"(?m)^\| (\d+) \|", lambda m: f"| {int(m.group(1)) + 1} |", t, count=1), "adds up to 76"),
    (lambda t: re.sub(r"(?m)^(## Common mistakes\n+### )", r"\1not a real bug\n**The bug.** x\n"
                      r"**What the student sees.** y\n**How to help.** z\n\n### ", t), "not a known-wrong variant"),
    (lambda t: t.replace("**How to help.**", "**Help.**", 1), "has no **How to help.**"),
])
def test_broken_notes_are_caught(tmp_path, change, expected):
    problems = _notes(tmp_path, change)
    assert any(expected in p for p in problems), problems


def test_variant_names_are_read_from_the_mistakes_file():
    names = instructors.variant_names(ROOT, "02-word2vec")
    assert len(names) >= 10
    assert any(n.startswith("train_sgns: SparseAdam") for n in names), "VARIANTS[...] = ... after the literal is read too"
