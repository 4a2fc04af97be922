"""No solution and no hidden check appears anywhere in the built book site.

The book and the assignments teach the same ideas, so it is easy for a
chapter to print, in passing, the very line a student is asked to write.
This check collects every *secret* line:

- in solutions/*/*.ipynb, the lines between `### BEGIN SOLUTION` and
  `### END SOLUTION` and between `### BEGIN HIDDEN TESTS` and
  `### END HIDDEN TESTS`, and the whole of any solution cell without such
  markers (nbgrader replaces it entirely in the student version);
- every line of autograder/**/*.py (the hidden checks),

minus the lines the student sees anyway (the rest of the solution notebook),
minus a short list of lines too common to mean anything (imports,
`return x`, brackets, very short lines). It then looks for each one in every
text file of the built site (HTML with its markup stripped, notebooks cell by
cell, search index, sources), comparing lines with all whitespace removed and
trailing comments dropped.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from booksite import HTML, ROOT, built_book

BEGIN = re.compile(r"^\s*### BEGIN (SOLUTION|HIDDEN TESTS)\s*$")
END = re.compile(r"^\s*### END (SOLUTION|HIDDEN TESTS)\s*$")

# Lines that carry no secret even when a solution contains them (matched on
# the line with its whitespace collapsed to single spaces).
COMMON = re.compile(
    r"""^(
        (import|from)\s.*                          # imports
      | return(\s[\w.]+(,\s?[\w.]+)*)?              # return / return x / return a, b
      | (pass|continue|break|else:|try:|finally:|raise|yield)
      | raise\sNotImplementedError(\(\))?          # nbgrader's stub
      | [\[\](){}:,;'"\s]*                         # brackets, quotes, blank
      | \#.*                                       # comment-only lines
      | (if|elif|for|while|with|except)\b.*:       # block headers: the body, not the header, is the answer
    )$""",
    re.X,
)
# Idioms too general to give an answer away, found in a chapter and a solution alike.
ALLOWED = {
    "return p / p.sum()",  # normalise a vector of counts into a distribution
    "loss.backward()",  # backpropagate: every PyTorch training loop has it
    "B, T, _ = x.shape",  # unpacking a (B, T, d) input's shape
    "return weights @ v, weights",  # attention's last step, returning the (outputs, weights) that 04's spec names;
    # the chapter's `attention` stops there, short of the assignment's masked softmax and fully masked rows
    "self.combine = nn.Linear(2 * d_hidden, d_hidden)",  # 04's Part 4 gives this layer in its table of parameters
    "schedule.step()",  # a learning-rate scheduler's step: every chapter that trains with one has it
    "model.eval()", "model.train()",  # switching a model's mode: every chapter that trains one has them
    # the attention projections: Units 4-7 give them by name and shape in every spec (docs/adding-a-unit.md §2.9)
    "self.q_proj = nn.Linear(d_model, d_model)", "self.k_proj = nn.Linear(d_model, d_model)",
    "self.v_proj = nn.Linear(d_model, d_model)", "self.out_proj = nn.Linear(d_model, d_model)",
}
MIN_CHARS = 12  # after removing whitespace: shorter lines (`x=0`, `i+=1`) are everywhere


def normalise(line: str) -> str:
    """A code line compared without whitespace: `x = f(a, b)` and `x=f(a,b)` match."""
    return re.sub(r"\s+", "", line)


def without_comment(line: str) -> str:
    """Drop a trailing `# comment` (when no quote follows the #, so never inside a string)."""
    return re.sub(r"\s*#[^'\"]*$", "", line)


_ALLOWED = {normalise(line) for line in ALLOWED}


def is_common(line: str) -> bool:
    """True for a line too short or too generic to count as a leak (or with no letter or digit in it:
    a Markdown table's rule ``|---|---|``, a row of ``=``)."""
    norm = normalise(line)
    return (len(norm) < MIN_CHARS or norm in _ALLOWED or bool(COMMON.match(" ".join(line.split())))
            or not any(c.isalnum() for c in line))


@dataclass(frozen=True)
class Origin:
    path: str
    line: str


def _cell_source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_lines(path: Path) -> tuple[list[str], list[str]]:
    """(secret lines, public lines) of one nbgrader source notebook."""
    nb = json.loads(path.read_text())
    secret, public = [], []
    for cell in nb.get("cells", []):
        lines = _cell_source(cell).splitlines()
        meta = cell.get("metadata", {}).get("nbgrader", {})
        marked = any(BEGIN.match(line) for line in lines)
        if meta.get("solution") and not marked:
            secret += lines  # the whole cell is the answer
            continue
        inside = False
        for line in lines:
            if BEGIN.match(line):
                inside = True
            elif END.match(line):
                inside = False
            else:
                (secret if inside else public).append(line)
    return secret, public


def secret_lines(solutions: Path, autograder: Path) -> dict[str, Origin]:
    """Normalised secret line -> where it comes from."""
    secrets: dict[str, Origin] = {}
    public: set[str] = set()
    for nb in sorted(solutions.glob("*/*.ipynb")):
        hidden, shown = notebook_lines(nb)
        public.update(normalise(text) for line in shown for text in (line, without_comment(line)))
        for line in hidden:
            secrets.setdefault(normalise(line), Origin(str(nb), line.strip()))
    for py in sorted(autograder.rglob("*.py")):
        for line in py.read_text().splitlines():
            secrets.setdefault(normalise(line), Origin(str(py), line.strip()))
    out = {}
    for origin in secrets.values():
        for line in {origin.line, without_comment(origin.line)}:
            key = normalise(line)
            if key not in public and not is_common(line):
                out[key] = origin
    return out


def site_text_lines(path: Path) -> list[str]:
    """The lines a reader (or a scraper) can get from one file of the site."""
    raw = path.read_bytes()
    if b"\0" in raw[:4096]:
        return []  # images, fonts
    text = raw.decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(text)
        except ValueError:
            return text.splitlines()
        lines = []
        for cell in nb.get("cells", []):
            lines += _cell_source(cell).splitlines()
            for out in cell.get("outputs", []):
                for value in [out.get("text", "")] + list(out.get("data", {}).values()):
                    lines += ("".join(value) if isinstance(value, list) else str(value)).splitlines()
        return lines
    if path.suffix in {".html", ".htm", ".xml", ".svg"}:
        # Block elements end a line as a browser shows it; inline markup
        # (Pygments' <span>s) disappears, entities become characters.
        text = re.sub(r"<(?:/?(?:p|div|pre|li|tr|td|th|h[1-6])\b|br)[^>]*>", "\n", text, flags=re.I)
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return text.splitlines()


def find_leaks(site: Path, secrets: dict[str, Origin]) -> list[str]:
    """Every line of the site that equals a secret line, as readable findings."""
    found = []
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        for number, line in enumerate(site_text_lines(path), 1):
            norm = normalise(line)
            if len(norm) < MIN_CHARS:
                continue
            origin = secrets.get(norm) or secrets.get(normalise(without_comment(line)))
            if origin:
                found.append(f"{path.relative_to(site)}:{number}: {line.strip()[:100]!r} "
                             f"(from {Path(origin.path).relative_to(ROOT) if origin.path.startswith(str(ROOT)) else origin.path})")
    return found


# --- the check on the real site ---------------------------------------------


def test_no_solution_or_hidden_check_in_the_site():
    book = built_book()
    if not (HTML / "intro.html").exists():
        pytest.fail(f"the book was not built; see book/_build/test-build.log:\n{book.log_tail(30)}")
    secrets = secret_lines(ROOT / "solutions", ROOT / "autograder")
    leaks = find_leaks(HTML, secrets)
    assert not leaks, (
        f"{len(leaks)} lines of the built book are solution or hidden-check code; rewrite the chapter so it "
        "teaches the idea without the assignment's answer (or, if the line is harmless, make the solution "
        "differ):\n" + "\n".join(leaks[:40])
    )


def prose_key(line: str) -> str:
    """A line of prose compared without its Markdown (emphasis, code ticks, list and heading marks) or spaces."""
    return normalise(re.sub(r"^\s*(?:[-+]|\d+\.)\s+", "", re.sub(r"[*`#|>]", "", line)))


def instructor_lines(notes: Path, public_sources: list[Path]) -> dict[str, Origin]:
    """Lines of the instructor notes that appear nowhere in the public sources (chapters, decks, questions).

    The notes say what the hidden checks test and which bugs they catch; a
    line a note quotes from a chapter is public anyway and is left out.
    """
    public = {prose_key(line) for src in public_sources for line in src.read_text(encoding="utf-8").splitlines()}
    out = {}
    for md in sorted(notes.glob("*.md")):
        for line in md.read_text(encoding="utf-8").splitlines():
            key = prose_key(line)
            if len(key) >= 40 and key not in public:
                out[key] = Origin(str(md), line.strip())
    return out


def test_instructor_notes_stay_out_of_the_site():
    """The notes are built next to the site, never into it, and no line of them is on a public page."""
    book = built_book()
    if not (HTML / "intro.html").exists():
        pytest.fail(f"the book was not built; see book/_build/test-build.log:\n{book.log_tail(30)}")
    built = ROOT / "book" / "_build" / "instructors"
    assert (built / "index.html").exists(), "`lmcourse book` did not write the instructor notes"
    assert HTML.resolve() not in built.resolve().parents
    notes = ROOT / "instructors"
    public = sorted((ROOT / "book").glob("units/*.md")) + sorted((ROOT / "book").glob("slides/*.md")) \
        + sorted((ROOT / "book").glob("quizzes/*.yaml"))
    secrets = instructor_lines(notes, public)
    assert len(secrets) >= 50 * len(list(notes.glob("*.md"))) // 10, "too few note lines collected: the check is vacuous"
    # the site's text, with each note line compared whole (the notes' own markup stripped)
    found = []
    for path in sorted(p for p in HTML.rglob("*") if p.is_file()):
        for number, line in enumerate(site_text_lines(path), 1):
            key = prose_key(line)
            if key in secrets:
                found.append(f"{path.relative_to(HTML)}:{number}: {line.strip()[:100]!r}")
    assert not found, "instructor notes on the public site:\n" + "\n".join(found[:20])


def test_a_planted_instructor_note_is_caught(tmp_path):
    notes = tmp_path / "instructors"
    notes.mkdir()
    line = "**What the student sees.** The hidden check reports that the counts differ at the sentence end."
    (notes / "01-ngrams.md").write_text(f"# Notes\n\n{line}\n")
    secrets = instructor_lines(notes, [])
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.html").write_text(f"<html><body><p>{html.escape(line[30:])}</p></body></html>")
    assert prose_key(line) in secrets
    assert not any(prose_key(t) in secrets for t in site_text_lines(site / "page.html"))
    # as markdown-it renders the note: emphasis becomes <strong>
    (site / "page.html").write_text("<html><body><p><strong>What the student sees.</strong> The hidden check "
                                    "reports that the counts differ at the sentence end.</p></body></html>")
    assert any(prose_key(t) in secrets for t in site_text_lines(site / "page.html"))


# --- the check can fail ------------------------------------------------------

SOLUTION_NB = {
    "nbformat": 4, "nbformat_minor": 5, "metadata": {},
    "cells": [
        {"cell_type": "code", "metadata": {"nbgrader": {"solution": False, "locked": True, "grade": False}},
         "source": ["import numpy as np\n", "VOCAB = ['<BOS>', '<EOS>']\n"], "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {"nbgrader": {"solution": True, "grade": False, "grade_id": "counts"}},
         "source": ["def bigram_counts(tokens):\n", "    \"\"\"Count adjacent pairs.\"\"\"\n",
                    "    ### BEGIN SOLUTION\n", "    pairs = list(zip(tokens[:-1], tokens[1:]))  # adjacent\n",
                    "    return Counter(pairs)\n", "    ### END SOLUTION\n"],
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {"nbgrader": {"solution": True, "grade": False, "grade_id": "temp"}},
         "source": ["def apply_temperature(p, t):\n", "    logits = np.log(p) / t\n", "    return softmax(logits)\n"],
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "locked": True, "points": 1}},
         "source": ["assert bigram_counts('abc')[('a', 'b')] == 1\n", "### BEGIN HIDDEN TESTS\n",
                    "assert bigram_counts('abab')[('a', 'b')] == 2\n", "### END HIDDEN TESTS\n"],
         "outputs": [], "execution_count": None},
    ],
}
CHECK_PY = ("import numpy as np\n\n\ndef test_counts(student, rng):\n"
            "    corpus = rng.integers(0, 7, size=1000).tolist()\n    if t > 0:\n        return pairs\n")


@pytest.fixture
def fake_course(tmp_path):
    (tmp_path / "solutions" / "01-toy").mkdir(parents=True)
    (tmp_path / "solutions" / "01-toy" / "01-toy.ipynb").write_text(json.dumps(SOLUTION_NB))
    (tmp_path / "autograder" / "01-toy").mkdir(parents=True)
    (tmp_path / "autograder" / "01-toy" / "test_toy.py").write_text(CHECK_PY)
    site = tmp_path / "site"
    (site / "units").mkdir(parents=True)
    return tmp_path, site


def _highlighted(line: str) -> str:
    """A line as Pygments renders it in the HTML: tokens in spans, entities escaped."""
    spans = "".join(f'<span class="n">{html.escape(tok)}</span>' for tok in re.split(r"(\W)", line) if tok)
    return f'<div class="highlight"><pre>{spans}\n</pre></div>'


def test_the_secret_lines_are_the_right_ones(fake_course):
    root, _ = fake_course
    secrets = secret_lines(root / "solutions", root / "autograder")
    origins = {o.line for o in secrets.values()}
    assert "pairs = list(zip(tokens[:-1], tokens[1:]))  # adjacent" in origins  # inside BEGIN/END SOLUTION
    assert "logits = np.log(p) / t" in origins  # a whole solution cell without markers
    assert "assert bigram_counts('abab')[('a', 'b')] == 2" in origins  # hidden tests
    assert "corpus = rng.integers(0, 7, size=1000).tolist()" in origins  # autograder
    assert normalise("def apply_temperature(p, t):") in secrets  # whole cell: even its signature
    assert normalise("def bigram_counts(tokens):") not in secrets  # shown to students
    assert normalise("assert bigram_counts('abc')[('a', 'b')] == 1") not in secrets  # visible test
    assert normalise("return Counter(pairs)") in secrets  # `return <expression>` can be the answer
    for common in ("import numpy as np", "return pairs", "if t > 0:", "]", ""):
        assert normalise(common) not in secrets, f"{common!r} is too common to count as a leak"


@pytest.mark.parametrize("where", ["html", "ipynb", "md"])
def test_a_planted_solution_line_is_caught(fake_course, where):
    root, site = fake_course
    secret = "    pairs = list(zip(tokens[:-1], tokens[1:]))"  # comment dropped, indent changed
    if where == "html":
        (site / "units" / "page.html").write_text(f"<html><body><p>Some prose.</p>{_highlighted(secret)}</body></html>")
    elif where == "ipynb":
        cell = {"cell_type": "code", "source": ["x = 1\n", secret + "\n"], "outputs": [], "metadata": {}}
        (site / "units" / "page.ipynb").write_text(json.dumps({"cells": [cell], "nbformat": 4}))
    else:
        (site / "units" / "page.md").write_text(f"# A chapter\n\n```python\n{secret.strip()}\n```\n")
    leaks = find_leaks(site, secret_lines(root / "solutions", root / "autograder"))
    assert len(leaks) == 1 and "pairs = list(zip" in leaks[0], leaks


def test_harmless_lines_are_not_leaks(fake_course):
    root, site = fake_course
    page = "\n".join(["import numpy as np", "return pairs", "def bigram_counts(tokens):",
                      "VOCAB = ['<BOS>', '<EOS>']", "pairs = zip(a, b)"])
    (site / "page.html").write_text(f"<pre>{html.escape(page)}</pre>")
    assert find_leaks(site, secret_lines(root / "solutions", root / "autograder")) == []
    assert is_common("|---|---|---|---|---|") and is_common("=" * 40)  # a table's rule in a docstring and a page
    assert not is_common("counts[(prev, word)] += 1  # the solution's line")


def test_a_real_solution_line_planted_in_a_site_is_caught(tmp_path):
    """The same, with the course's own solutions and checks (whatever exists today)."""
    secrets = secret_lines(ROOT / "solutions", ROOT / "autograder")
    if not secrets:
        pytest.skip("no solutions/ or autograder/ content yet")
    norm, origin = max(secrets.items(), key=lambda kv: len(kv[0]))  # a distinctive line
    (tmp_path / "page.html").write_text(f"<html><body>{_highlighted(origin.line)}</body></html>")
    leaks = find_leaks(tmp_path, secrets)
    assert leaks, f"the line {origin.line!r} from {origin.path} was planted in a page and not found"
