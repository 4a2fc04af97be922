"""`lmcourse slides`: build the lecture decks, or check a unit's lecture materials against its chapter.

The three sources of a unit's lecture materials (docs/lecture-materials.md) are
checked together: the deck (lmcourse.instructor.slides), the self-check questions and the
chapter cells that show them (lmcourse.quiz), and the instructor notes
(lmcourse.instructor.notes).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lmcourse.instructor.notes import check_notes
from lmcourse.instructor.slides import (SLIDES_SRC, UNITS_SRC, SlidesError, build, check_deck, decks, load_chapter, parse_deck,
                             starred_items)


def main(root: Path, units: list[str], *, check_only: bool) -> int:
    """`lmcourse slides [--check] [UNIT ...]`."""
    paths = [p for p in decks(root) if not units or p.stem in units]
    if units and len(paths) != len(set(units)):
        print(f"slides: no deck for {sorted(set(units) - {p.stem for p in paths})} under {SLIDES_SRC}",
              file=sys.stderr)
        return 2
    if not check_only:
        try:
            summary = build(root)
        except SlidesError as err:
            print(f"slides: {err}", file=sys.stderr)
            return 1
        for unit, d in summary["decks"].items():
            print(f"{unit}: {d['slides']} slides")
        return 0
    syllabus = root.parent / "shared" / "guides" / "syllabus.md"
    bad = 0
    for path in paths:
        deck = parse_deck(path)
        try:
            chapter = load_chapter(root, deck.unit, outputs=False)
        except SlidesError as err:
            print(f"{deck.unit}: {err}")
            bad += 1
            continue
        starred = None
        m = re.match(r"0*(\d+)-", deck.unit)
        if syllabus.exists() and m and int(m.group(1)) <= 7:
            starred = len(starred_items(syllabus, int(m.group(1))))
        problems = check_deck(deck, chapter, starred=starred, executed=False)
        problems += check_self_checks(root, deck.unit)
        problems += check_notes(root, deck.unit, deck_slides=len(deck.slides))
        for p in problems:
            print(p)
        bad += bool(problems)
        print(f"{deck.unit}: {len(deck.slides)} slides, " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if bad else 0


_SELF_CHECK = re.compile(r"""self_check\(\s*["']([\w-]+)["']\s*,\s*["']([\w-]+)["']\s*\)""")


def check_self_checks(root: Path, unit: str) -> list[str]:
    """The chapter shows every section of its question file exactly once, and only those."""
    from lmcourse import quiz

    try:
        sections = quiz.load(unit, root / "book" / "quizzes")
    except quiz.QuizError as err:
        return [f"{unit} self-checks: {err}"]
    text = (root / UNITS_SRC / f"{unit}.md").read_text(encoding="utf-8")
    calls = _SELF_CHECK.findall(text)
    problems = [f"{unit} self-checks: the chapter calls self_check({u!r}, ...) for another unit" for u, _ in calls if u != unit]
    shown = [s for u, s in calls if u == unit]
    for s in sections:
        if shown.count(s) != 1:
            problems.append(f"{unit} self-checks: section {s!r} is shown {shown.count(s)} times in the chapter "
                            f'(a hidden-input cell `self_check("{unit}", "{s}")` at the end of that section)')
    problems += [f"{unit} self-checks: the chapter shows {s!r}, which the question file lacks"
                 for s in set(shown) - set(sections)]
    return problems
