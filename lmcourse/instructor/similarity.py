"""Similarity between the submissions of one assignment, graded function by graded function.

    lmcourse similarity 04-attention submitted/ --out similarity/04-attention

writes ``index.html`` (the pairs at or above the threshold, each with its matching regions side by side),
``pairs.csv`` (every pair of students that shares any compared function, most similar first),
``functions.csv`` (every compared function of every such pair) and ``students.csv`` (what was read from each
notebook, or why it could not be).

What is compared. Only the code a student wrote for what the release asks for: each top-level function or class
of an answer cell is a unit of its own (its last definition, the one a kernel keeps), compared only with the same
unit of the other students. So a helper everyone writes alike adds to one unit's similarity, not to the whole
notebook's, and a student who copied one function and wrote the rest stands out on that function.

What is not evidence. Three kinds of shared code are removed before anything is compared: the release's code (the
stubs, their docstrings and the given cells, which every submission holds), code that more than a quarter of the
cohort wrote identically for the same unit (the idioms of a short function: MOSS's ``-m``, Schleimer, Wilkerson and
Aiken 2003), and anything in a unit too short to tell copying from convergence (under `MIN_CHARACTERS` of
filtered code). The instructor's solution is compared too, as one more party: a submission close to it is listed
("the solution") and never counted as the cohort's idiom.

How. copydetect (Hansen's implementation of winnowing) tokenises each unit with Pygments, replaces every name by
one letter and every string by another, drops comments and whitespace, and fingerprints the result in
`NOISE`-character windows: renamed variables, reordered functions, rewritten comments and reformatting change
nothing; reordered statements inside a function only cut the matching regions into pieces. A pair's score is its
most similar unit (the larger of the two shares of matching code); pairs are ranked by how many of their units
reach the threshold (a notebook copied whole before one function lifted), then by that score and by the share of
all their code that matches. The page shows every pair at or above the threshold.

Student code is never run: notebooks are read as the grader reads them (in a child process with a memory and
time budget, `lmcourse.grading.bounded`), parsed with `ast`, and tokenised. A notebook that cannot be read (not
JSON, a link, too large) is listed with the reason, and the others are compared all the same.
"""

from __future__ import annotations

import ast
import csv
import html
import io
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NOISE = 25             # characters of filtered code per fingerprint (copydetect's default noise threshold)
THRESHOLD = 0.8        # a pair is listed on the page when one of its units matches at least this share
MIN_CHARACTERS = 80    # a unit with less filtered code (after the release and the idioms are removed) is not judged
COMMON_SHARE = 0.25    # a fingerprint in more than this share of the cohort's versions of a unit is an idiom
SOLUTION = "(solution)"
PAGE_PAIRS = 100       # pairs drawn side by side on the page (all of them are in pairs.csv and functions.csv)


@dataclass
class Party:
    """One notebook's answer code: a student's, or the instructor's solution."""

    name: str
    units: dict[str, str] = field(default_factory=dict)  # unit name -> its source
    problem: str = ""  # why the notebook could not be read ("" when it was)


@dataclass
class UnitMatch:
    unit: str
    share_a: float  # share of a's (judged) code that matches b's
    share_b: float
    characters: int  # filtered characters of a's code in the matching regions
    slices_a: np.ndarray  # (2, n) start and end offsets of the matching regions in a's source
    slices_b: np.ndarray

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


@dataclass
class Pair:
    a: str
    b: str
    matches: list[UnitMatch]
    overall: float = 0.0  # share of all the judged code the two have in common units that matches (the larger side)

    @property
    def score(self) -> float:
        """The most similar unit's share: one function lifted whole is as suspicious as a whole notebook."""
        return max((m.score for m in self.matches), default=0.0)

    def flagged(self, threshold: float) -> list[UnitMatch]:
        return sorted((m for m in self.matches if m.score >= threshold), key=lambda m: -m.score)


# ----------------------------------------------------------------------------- reading (in a bounded child)


def _definitions(code: str) -> dict[str, str] | None:
    """Top-level function and class definitions of one cell, name -> source (decorators included); None if it
    does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    lines = code.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[node.name] = "\n".join(lines[first - 1:node.end_lineno])
    return out


def _answer_units(path: Path, release, release_path: str | None) -> dict:
    """The answer cells' definitions of one submission, as the grader extracts them (runs in the bounded child)."""
    from lmcourse.grading import notebook as nbmod

    nb = nbmod.read_notebook(path)
    extraction = nbmod.check_and_extract(nb, release, release_path)
    answers = {nbmod.grade_id(c) for c in release.cells if nbmod.role(c) == "solution"}
    lines = extraction.source.splitlines()
    units: dict[str, str] = {}
    for first, last, gid in extraction.line_map:
        if gid not in answers:
            continue
        code = "\n".join(lines[first - 1:last])
        found = _definitions(code)
        if found is None:  # a cell that does not parse is compared whole
            units[f"cell {gid}"] = code
        else:
            units.update(found)  # a later definition replaces an earlier one, as in a kernel
    return {"units": units}


def _release_units(release) -> dict[str, str]:
    from lmcourse.grading import notebook as nbmod

    return {"release": "\n\n".join(nbmod.cell_source(c) for c in release.cells if c.get("cell_type") == "code")}


def read_party(name: str, path: Path, release, release_path: str | None) -> Party:
    """A submission's units, or the reason it could not be read (never an exception for the student's input)."""
    from lmcourse.grading import bounded
    from lmcourse.grading.notebook import NotebookError

    if path.is_symlink():
        return Party(name, problem="a link, not a notebook: links are never followed")
    if not path.is_file():
        return Party(name, problem="not a regular file")
    try:
        data = bounded.run(_answer_units, path, release, release_path, what=path.name)
    except NotebookError as err:
        return Party(name, problem=f"{err.status}: {err.message}")
    except bounded.BoundedError as err:
        return Party(name, problem=f"the reader failed (grader-error, not the student's): {err}")
    return Party(name, units=dict(data["units"]))


# ----------------------------------------------------------------------------- fingerprints


def _fingerprint(code: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint("unit.py", NOISE, 1, boilerplate=boilerplate, language="python", fp=io.StringIO(code))


def _hashes(code: str) -> set[int]:
    return set(_fingerprint(code).hashes)


@dataclass
class Comparison:
    assignment: str
    parties: list[Party]
    pairs: list[Pair]
    judged: dict[str, dict[str, int]]  # party -> unit -> judged filtered characters (after the boilerplate)
    threshold: float
    seconds: float

    def unreadable(self) -> list[Party]:
        return [p for p in self.parties if p.problem]

    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.score >= self.threshold]


def compare(assignment: str, parties: list[Party], release, *, threshold: float = THRESHOLD) -> Comparison:
    """Every pair of readable parties, unit by unit, most similar pair first."""
    from copydetect import compare_files

    started = time.perf_counter()
    readable = [p for p in parties if not p.problem]
    release_hashes = _hashes(_release_units(release)["release"])
    students = [p for p in readable if p.name != SOLUTION]
    # An idiom: a fingerprint that more than COMMON_SHARE of the students' versions of a unit contain
    # (at least 3 of them, so that a small cohort's copies are not taken for idioms).
    boilerplate = lambda hashes: np.array(sorted(hashes), dtype=np.int64)
    # Two prints of every unit: with the idioms kept, for student against the solution (so that a posted solution
    # copied by much of the class, its code then an "idiom", still shows); without them, student against student.
    prints = {(p.name, u, True): _fingerprint(code, boilerplate(release_hashes))
              for p in readable for u, code in p.units.items()}
    idioms: dict[str, set[int]] = {}
    for unit in sorted({u for p in readable for u in p.units}):
        counts = Counter(h for p in students if unit in p.units for h in prints[p.name, unit, True].hashes)
        limit = max(3, COMMON_SHARE * sum(unit in p.units for p in students))
        idioms[unit] = {h for h, n in counts.items() if n > limit}
    prints |= {(p.name, u, False): _fingerprint(code, boilerplate(release_hashes | idioms[u]))
               for p in students for u, code in p.units.items()}
    judged = {p.name: {u: int(prints[p.name, u, p.name == SOLUTION].token_coverage) for u in p.units}
              for p in readable}
    pairs = []
    for a, b in itertools.combinations(readable, 2):
        with_solution = SOLUTION in (a.name, b.name)
        shared = sorted(set(a.units) & set(b.units))
        coverage = {(side.name, u): int(prints[side.name, u, with_solution].token_coverage)
                    for side in (a, b) for u in shared}
        matches = []
        for unit in shared:
            fa, fb = prints[a.name, unit, with_solution], prints[b.name, unit, with_solution]
            if min(fa.token_coverage, fb.token_coverage) < MIN_CHARACTERS or not (fa.hashes & fb.hashes):
                continue
            overlap, (share_a, share_b), (slices_a, slices_b) = compare_files(fa, fb)
            if overlap < MIN_CHARACTERS:
                continue
            matches.append(UnitMatch(unit, float(share_a), float(share_b), int(overlap),
                                     np.asarray(slices_a), np.asarray(slices_b)))
        if matches:
            judged_units = [u for u in shared if min(coverage[a.name, u], coverage[b.name, u]) >= MIN_CHARACTERS]
            side_share = lambda side, share: (sum(getattr(m, share) * coverage[side, m.unit] for m in matches)
                                              / max(1, sum(coverage[side, u] for u in judged_units)))
            pairs.append(Pair(a.name, b.name, matches, max(side_share(a.name, "share_a"), side_share(b.name, "share_b"))))
    # Most units at the threshold first (a whole notebook copied before one function), then the most code shared.
    pairs.sort(key=lambda p: (-len(p.flagged(threshold)), -round(p.score, 3), -p.overall, p.a, p.b))
    return Comparison(assignment, parties, pairs, judged, threshold, time.perf_counter() - started)


# ----------------------------------------------------------------------------- output


def write(comparison: Comparison, out: Path) -> dict[str, Path]:
    """index.html, pairs.csv, functions.csv and students.csv under `out`; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("index.html", "pairs.csv", "functions.csv", "students.csv")}
    with open(paths["pairs.csv"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "student_a", "student_b", "score", "overall", "flagged", "units_sharing_code",
                    "units_at_threshold", "most_similar_unit"])
        for rank, p in enumerate(comparison.pairs, 1):
            best = max(p.matches, key=lambda m: m.score)
            w.writerow([rank, p.a, p.b, f"{p.score:.3f}", f"{p.overall:.3f}", int(p.score >= comparison.threshold),
                        len(p.matches), len(p.flagged(comparison.threshold)), best.unit])
    with open(paths["functions.csv"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_a", "student_b", "unit", "share_a", "share_b", "matching_characters"])
        for p in comparison.pairs:
            for m in sorted(p.matches, key=lambda m: -m.score):
                w.writerow([p.a, p.b, m.unit, f"{m.share_a:.3f}", f"{m.share_b:.3f}", m.characters])
    with open(paths["students.csv"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "read", "units", "judged_units", "problem"])
        for party in comparison.parties:
            judged = comparison.judged.get(party.name, {})
            w.writerow([party.name, int(not party.problem), len(party.units),
                        sum(n >= MIN_CHARACTERS for n in judged.values()), party.problem])
    paths["index.html"].write_text(_page(comparison), encoding="utf-8")
    return paths


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #1a1a1a; line-height: 1.45 }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem } td, th { border: 1px solid #bbb; padding: 0.25rem 0.6rem }
th { background: #eef } .side { display: grid; grid-template-columns: 1fr 1fr; gap: 0.8rem } .side > div { min-width: 0 }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.85rem; border: 1px solid #ddd }
mark { background: #ffe08a; color: #1a1a1a } h3 { margin-bottom: 0.2rem } .note { color: #444 }
"""


def _highlighted(code: str, slices: np.ndarray) -> str:
    from copydetect.utils import highlight_overlap

    if slices.size == 0:
        return html.escape(code)
    return highlight_overlap(code, slices.astype(int), "<mark>", "</mark>", escape_html=True)[0]


def _page(c: Comparison) -> str:
    parties = {p.name: p for p in c.parties}
    flagged = c.flagged()
    n_students = sum(p.name != SOLUTION for p in c.parties)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Similarity: {html.escape(c.assignment)}"
             f"</title><style>{_STYLE}</style></head><body>",
             f"<h1>Similarity between submissions: {html.escape(c.assignment)}</h1>",
             f"<p class='note'>{n_students} submissions ({len(c.unreadable())} could not be read); each graded "
             f"function or class compared with the same one of every other submission and of the instructor's "
             f"solution {html.escape(SOLUTION)}, after removing the release's code and the cohort's idioms. "
             f"A pair is listed when one of its units matches at {c.threshold:.0%} or more. Similar code is a "
             f"reason to look, not a finding: read the code before you decide anything.</p>"]
    if c.unreadable():
        parts.append("<h2>Not compared</h2><table><tr><th>submission</th><th>why</th></tr>")
        parts += [f"<tr><td>{html.escape(p.name)}</td><td>{html.escape(p.problem)}</td></tr>" for p in c.unreadable()]
        parts.append("</table>")
    parts.append(f"<h2>Pairs at or above {c.threshold:.0%} ({len(flagged)})</h2>")
    if flagged:
        parts.append("<table id='ranking'><tr><th>rank</th><th>pair</th><th>most similar unit</th><th>all shared units</th>"
                     "<th>units at the threshold</th></tr>")
        for i, p in enumerate(flagged[:PAGE_PAIRS], 1):
            anchor = f"<a href='#pair-{i}'>"
            units = ", ".join(html.escape(m.unit) for m in p.flagged(c.threshold))
            parts.append(f"<tr><td>{i}</td><td>{anchor}{html.escape(p.a)} and {html.escape(p.b)}</a></td>"
                         f"<td>{p.score:.0%}</td><td>{p.overall:.0%}</td><td>{units}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>None.</p>")
    if len(flagged) > PAGE_PAIRS:
        parts.append(f"<p>The {PAGE_PAIRS} closest pairs are shown below; the other {len(flagged) - PAGE_PAIRS} "
                     f"are in pairs.csv and functions.csv. So many pairs at the threshold usually means one source "
                     f"shared widely (a posted solution?): compare them with {html.escape(SOLUTION)} first.</p>")
    for i, p in enumerate(flagged[:PAGE_PAIRS], 1):
        parts.append(f"<h2 id='pair-{i}'>{i}. {html.escape(p.a)} and {html.escape(p.b)}: {p.score:.0%}</h2>")
        for m in p.flagged(c.threshold):
            code_a, code_b = parties[p.a].units[m.unit], parties[p.b].units[m.unit]
            parts.append(f"<h3>{html.escape(m.unit)}</h3><p class='note'>{m.share_a:.0%} of {html.escape(p.a)}'s "
                         f"code here matches {html.escape(p.b)}'s; {m.share_b:.0%} of {html.escape(p.b)}'s matches "
                         f"{html.escape(p.a)}'s (highlighted).</p><div class='side'>"
                         # tabindex: a code block that scrolls sideways must be reachable by keyboard (WCAG 2.1.1)
                         f"<div><b>{html.escape(p.a)}</b><pre tabindex=\"0\">{_highlighted(code_a, m.slices_a)}</pre></div>"
                         f"<div><b>{html.escape(p.b)}</b><pre tabindex=\"0\">{_highlighted(code_b, m.slices_b)}</pre></div></div>")
    parts.append(f"<p class='note'>Compared in {c.seconds:.1f} s. All pairs, with every unit's shares: pairs.csv, "
                 f"functions.csv.</p></body></html>")
    return "\n".join(parts)


# ----------------------------------------------------------------------------- the command


def solution_units(root: Path, assignment_id: str) -> dict[str, str]:
    """The instructor's solution, unit by unit: its answer cells' definitions of what the release asks for."""
    from lmcourse.course import Course
    from lmcourse.grading import notebook as nbmod

    assignment = Course(root).assignment(assignment_id)
    answers = nbmod.answer_names(assignment.load_release())
    units: dict[str, str] = {}
    for cell in assignment.load_source().cells:
        if cell.get("cell_type") == "code" and nbmod.role(cell) == "solution":
            code = nbmod.comment_magics(nbmod.strip_markers(nbmod.cell_source(cell)))
            units.update({u: c for u, c in (_definitions(code) or {}).items() if u in answers})
    return units


def run(root: Path, assignment_id: str, submissions: Path, out: Path, *, threshold: float = THRESHOLD,
        with_solution: bool = True) -> Comparison:
    """Read every submission of `submissions` (the layouts `lmcourse grade` takes), compare, write to `out`."""
    from lmcourse.course import Course
    from lmcourse.instructor.batch import find_submissions

    assignment = Course(root).assignment(assignment_id)
    release = assignment.load_release()
    found, skipped = find_submissions(Path(submissions), assignment_id)
    parties = [read_party(s.student, Path(s.path), release, assignment.release_relpath) for s in found]
    parties += [Party(entry, problem=f"skipped: {entry}") for entry in skipped]
    if with_solution and assignment.source_path.exists():
        parties.append(Party(SOLUTION, units=solution_units(root, assignment_id)))
    comparison = compare(assignment_id, parties, release, threshold=threshold)
    write(comparison, out)
    return comparison
