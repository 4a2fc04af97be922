"""No solution and no hidden check appears anywhere in the built book site (the scanner is
:mod:`lmcourse.instructor.leaks`), nor in the package a student installs.

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
from pathlib import Path

import pytest

from booksite import HTML, ROOT, built_book

from lmcourse.instructor import leaks
from lmcourse.instructor.leaks import Origin, is_common, normalise, secret_lines  # noqa: F401 (used below)


def site_text_lines(path: Path) -> list[str]:
    """The lines a reader (or a scraper) can get from one file of the site."""
    return leaks.text_lines(path.name, path.read_bytes())


def find_leaks(site: Path, secrets: dict[str, Origin]) -> list[str]:
    """Every line of the site that equals a secret line, as readable findings."""
    return leaks.find(site, leaks.Secrets(lines=secrets))


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


# --- what a student installs and downloads: releases, the package, archives, bytecode ----------


@pytest.fixture(scope="module")
def course_secrets():
    secrets = leaks.collect(ROOT)
    # not vacuous: every unit's answers are in there, compiled and as lines, and its hidden checks' names
    assert len(secrets.lines) > 1000 and len(secrets.bytecode) > 200 and len(secrets.names) > 200, \
        (len(secrets.lines), len(secrets.bytecode), len(secrets.names))
    return secrets


def test_the_released_notebooks_hold_no_secret(course_secrets):
    found = leaks.find(ROOT / "assignments", course_secrets)
    assert not found, "the student notebooks hold solution or hidden-check material:\n" + "\n".join(found[:20])


def test_the_package_a_student_installs_holds_no_secret(course_secrets, tmp_path):
    """The `lmcourse` wheel (what `pip install` puts on a student's machine) and its bytecode: no answer,
    no hidden check, no check's name (`digits_apart`, the capstone's answer, once lived in lmcourse).
    This is the course's whole package, instructors' part included (what the Gradescope bundle and an
    instructor install); the student edition's smaller one is scanned in tests/test_student_edition.py."""
    import compileall
    import shutil
    import subprocess
    import sys

    source = tmp_path / "source"  # a copy: setuptools leaves build/ and *.egg-info beside what it builds
    shutil.copytree(ROOT / "lmcourse", source / "lmcourse", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("lmcourse-*.whl"))
    package = tmp_path / "lmcourse"
    shutil.copytree(ROOT / "lmcourse", package, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(str(package), quiet=1, legacy=True)  # .pyc beside each .py
    # Lines are not compared: the package is the course's given code, and shares idioms with answers and
    # checks line for line (`torch.manual_seed(seed)`); a function compiled from an answer or a check is
    # (however it is spaced or commented), and so is the name or title of a hidden check.
    secrets = leaks.Secrets(bytecode=course_secrets.bytecode, names=course_secrets.names)
    found = leaks.find(wheel, secrets) + leaks.find(package, secrets)
    assert not found, "the student's package holds solution or hidden-check material:\n" + "\n".join(found[:20])


def _solution_function(secrets: leaks.Secrets) -> tuple[str, str]:
    """A function of a real solution cell whose bytecode is secret: (its notebook, its source)."""
    import ast

    for nb in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(nb.read_text()).get("cells", []):
            if not cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                continue
            source = "".join(cell["source"])
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.FunctionDef):
                    one = ast.get_source_segment(source, node)
                    if any(fp in secrets.bytecode for fp in leaks._functions(one, "planted")):
                        return str(nb), one
    raise AssertionError("no solution function found")


@pytest.mark.parametrize("wrapping", ["pyc", "pyc in a wheel in a tarball", "py in a zip", "check name in a pyc"])
def test_a_planted_secret_is_caught_in_archives_and_bytecode(course_secrets, tmp_path, wrapping):
    import io
    import py_compile
    import tarfile
    import zipfile

    _, function = _solution_function(course_secrets)
    hidden = next(n for n in course_secrets.names if n.startswith("test_"))
    source = f"def {hidden}():\n    return 1\n" if wrapping == "check name in a pyc" else function
    src = tmp_path / "given.py"
    src.write_text(source)
    pyc = tmp_path / "given.pyc"
    py_compile.compile(str(src), cfile=str(pyc), doraise=True)
    out = tmp_path / "received"
    out.mkdir()
    if wrapping in ("pyc", "check name in a pyc"):
        (out / "given.cpython-311.pyc").write_bytes(pyc.read_bytes())
    elif wrapping == "py in a zip":
        with zipfile.ZipFile(out / "notes.zip", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("pkg/given.py", source)
    else:
        wheel = io.BytesIO()
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("pkg/__pycache__/given.cpython-311.pyc", pyc.read_bytes())
        data = wheel.getvalue()
        with tarfile.open(out / "edition.tar.gz", "w:gz") as t:
            info = tarfile.TarInfo("dist/pkg-0.1-py3-none-any.whl")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    found = leaks.find(out, course_secrets)
    assert found, f"{wrapping}: planted and not found"
    # and nothing is found in the same wrapping of harmless code (not a check that flags everything)
    for f in out.iterdir():
        f.unlink()
    harmless = "def helper(xs):\n    total = 0\n    for x in xs:\n        total += x * x\n    return total\n"
    with zipfile.ZipFile(out / "notes.zip", "w") as z:
        z.writestr("pkg/given.py", harmless)
    assert not leaks.find(out, course_secrets)


def test_a_visible_checks_name_is_not_a_secret(course_secrets):
    """Visible checks are shown to students (run by `lmcourse check`): their names are not secrets; every
    hidden one is, unless a visible check or a release shares it (a test cell's id)."""
    import ast

    visible, hidden = set(), set()
    for py in (ROOT / "autograder").rglob("test_*.py"):
        for node in ast.parse(py.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.decorator_list:
                text = ast.unparse(node.decorator_list[0])
                if text.startswith("check("):
                    (visible if "visibility='visible'" in text else hidden).add(node.name)
    releases = "\n".join(p.read_text() for p in (ROOT / "assignments").glob("*/*.ipynb"))
    assert visible and hidden
    assert not visible & set(course_secrets.names)
    assert {h for h in hidden if h not in visible and h not in releases} <= set(course_secrets.names)
    assert len(hidden - visible) > 100
