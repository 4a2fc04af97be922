"""The book builds offline, with no warning that matters, and serves only local assets.

The build itself (seconds to minutes: every chapter is executed, or served
from the execution cache) happens once per session in booksite.built_book();
the browser test and the leak check read the same site.
"""

from __future__ import annotations

import json
import re
from collections import Counter
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from booksite import BUILD, HTML, ROOT, built_book, mirror_env
from lmcourse import claims

pytestmark = pytest.mark.slow

REMOTE = re.compile(r"^\s*(https?:)?//", re.I)


@pytest.fixture(scope="module")
def book():
    return built_book()


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return files


def test_book_builds_with_no_warnings(book):
    assert book.returncode == 0, (
        "`lmcourse book --no-assign --check` failed (every Sphinx warning and every cell error fails it); "
        f"fix what the build log says (full log: book/_build/test-build.log):\n{book.log_tail()}"
    )
    # Sphinx's own warnings ("file.md:12: WARNING: ..."), not a kernel's log lines.
    warnings = [line for line in book.log.splitlines() if re.search(r"(^|: )(WARNING|ERROR|CRITICAL): ", line)]
    assert not warnings, "the build printed warnings:\n" + "\n".join(warnings)


def test_every_toc_entry_is_a_page(book):
    missing = [f for f in _toc_files() if not (HTML / f"{f}.html").exists()]
    assert not missing, f"pages listed in book/_toc.yml but not built: {missing}"
    assert (HTML / "index.html").exists()


def test_units_in_syllabus_order():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    units = [c["file"] for p in toc["parts"] for c in p["chapters"] if c["file"].startswith("units/")]
    assert units == sorted(units), f"unit chapters must follow the syllabus order (01, 02, ...), found {units}"
    assert units and units[0] == "units/01-ngrams", f"the first unit chapter must be units/01-ngrams, found {units[:1]}"
    on_disk = sorted(f"units/{p.stem}" for p in (ROOT / "book" / "units").glob("*.md"))
    assert on_disk == units, (
        f"chapters in book/units/ {on_disk} and in book/_toc.yml {units} differ: list each chapter file in "
        "_toc.yml's Units part"
    )
    # One sidebar entry per unit: a part per unit showed each unit twice (the part's caption, then the chapter).
    parts = [p for p in toc["parts"] if any(c["file"].startswith("units/") for c in p["chapters"])]
    assert len(parts) == 1, (f"the units are spread over {len(parts)} parts of book/_toc.yml "
                             f"({[p.get('caption') for p in parts]}); list them all in one part, `Units`")


def _remote_references(text: str) -> list[str]:
    """http(s) scripts, stylesheets, fonts and CSS imports an HTML or CSS file would fetch."""
    found = []
    for tag in re.findall(r"<(?:script|link|img|iframe|source)\b[^>]*>", text, re.I):
        if re.match(r"<link\b", tag, re.I) and not re.search(
            r"rel=[\"']?(stylesheet|preload|modulepreload|icon|shortcut icon|font)", tag, re.I
        ):
            continue  # <link rel="next" href=...> is a hyperlink, not an asset
        for url in re.findall(r"\b(?:src|href)=[\"']([^\"']+)", tag, re.I):
            if REMOTE.match(url):
                found.append(tag)
    for url in re.findall(r"url\(\s*[\"']?([^\"')]+)", text) + re.findall(r"@import\s+[\"']([^\"']+)", text):
        if REMOTE.match(url):
            found.append(f"url({url})")
    return found


def test_no_page_fetches_remote_assets(book):
    offenders = {}
    for path in [*book.pages(), *HTML.rglob("*.css")]:
        if found := _remote_references(path.read_text(errors="replace")):
            offenders[str(path.relative_to(HTML))] = found[:5]
    assert not offenders, (
        "the site must work offline, but these pages or stylesheets load scripts, styles or fonts from the "
        f"internet: {offenders}; vendor the asset (see package.json) or drop it"
    )


def test_remote_reference_check_catches_cdn_assets():
    """The detector above is not vacuous."""
    page = ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
            '<link rel="stylesheet" href="//fonts.googleapis.com/css?family=Lato">'
            '<link rel="next" href="https://example.org/">'
            '<style>@font-face { src: url("https://fonts.gstatic.com/x.woff2") }</style>')
    assert len(_remote_references(page)) == 3


def test_maths_uses_the_vendored_mathjax(book):
    entry = HTML / "_static" / "mathjax" / "tex-mml-chtml.js"
    assert entry.exists(), f"MathJax was not copied into the site: {entry} is missing"
    with_maths = 0
    for page in book.pages():
        text = page.read_text()
        scripts = re.findall(r"<script\b[^>]*src=\"([^\"]*mathjax[^\"]*)\"", text, re.I)
        assert len(scripts) <= 1, (
            f"{page.relative_to(HTML)} loads {len(scripts)} MathJax scripts; MathJax must not sit in book/_static/ "
            "(Jupyter Book adds every .js there to each page)"
        )
        if 'class="math' in text:
            with_maths += 1
            assert scripts and "_static/mathjax/tex-mml-chtml.js" in scripts[0], (
                f"{page.relative_to(HTML)} has maths but loads {scripts or 'no MathJax'}; "
                "expected the vendored _static/mathjax/tex-mml-chtml.js"
            )
    assert with_maths >= 1, "no page has maths; the notation page at least should"


def test_chapters_offer_notebook_downloads(book):
    for chapter in (ROOT / "book" / "units").glob("*.md"):
        page = HTML / "units" / f"{chapter.stem}.html"
        ipynb = HTML / "_sources" / "units" / f"{chapter.stem}.ipynb"
        assert ipynb.exists(), f"the executed notebook {ipynb.relative_to(HTML)} is not offered for download"
        cells = json.loads(ipynb.read_text())["cells"]
        assert any(c.get("outputs") for c in cells if c["cell_type"] == "code"), (
            f"{ipynb.relative_to(HTML)} has no outputs: a reader downloads the chapter without its results "
            "(myst-nb writes it so after a cached rebuild; lmcourse.instructor.slides.restore_outputs puts them back)")
        text = page.read_text()
        assert f"{chapter.stem}.ipynb" in text, f"{page.name} has no .ipynb download button"
        assert "mybinder.org" in text, f"{page.name} has no launch-in-Jupyter (Binder) button"


# --- the build really fails when it should -----------------------------------


def _mini_book(tmp_path: Path, chapter: str) -> Path:
    """A one-chapter book with the course's own _config.yml and extension."""
    from lmcourse.instructor.book import ensure_mathjax

    ensure_mathjax(ROOT)  # `npm ci` on a fresh clone, if the session build has not run yet
    root = tmp_path / "course"
    book = root / "book"
    book.mkdir(parents=True)
    shutil.copy(ROOT / "book" / "_config.yml", book / "_config.yml")
    (root / "node_modules").symlink_to(ROOT / "node_modules")
    (book / "references.bib").write_text((ROOT / "book" / "references.bib").read_text())
    for folder in ("images", "_templates"):  # the favicon and the theme's components _config.yml names
        shutil.copytree(ROOT / "book" / folder, book / folder)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapter\n")
    (book / "intro.md").write_text("# Intro\n\nA test book.\n")
    header = ("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
              "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n")
    (book / "chapter.md").write_text(header + chapter)
    return book


def _build_mini(book: Path) -> subprocess.CompletedProcess:
    jb = Path(sys.executable).parent / "jupyter-book"
    return subprocess.run([str(jb), "build", str(book), "--keep-going", "-W", "-n"],
                          capture_output=True, text=True, cwd=book.parent)


def test_a_cell_error_fails_the_build(tmp_path):
    book = _mini_book(tmp_path, "# Chapter\n\n```{code-cell} python\nraise ValueError('planted error')\n```\n")
    proc = _build_mini(book)
    assert proc.returncode != 0, "a chapter whose cell raises built successfully; the build must fail"
    assert "planted error" in proc.stdout + proc.stderr


BROKEN = {  # what a chapter author might get wrong -> what the build log must name
    "broken-ref": ("See {ref}`no-such-label`.", "no-such-label"),
    "broken-doc-link": ("See [the missing page](missing-page.md).", "missing-page"),
    "missing-image": ("![a figure](missing.png)", "missing.png"),
    "unknown-role": ("A {unknownrole}`thing`.", "unknownrole"),
    "unknown-citation": ("As shown by {cite:t}`nobody2099`.", "nobody2099"),
}


def test_broken_references_fail_the_build(tmp_path):
    """One build with every mistake: `--keep-going` reports them all, `-W` fails on them."""
    book = _mini_book(tmp_path, "# Chapter\n\n" + "\n\n".join(body for body, _ in BROKEN.values()) + "\n")
    proc = _build_mini(book)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, "a chapter with broken references built successfully; the build must fail"
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    unreported = [name for name, (_, symptom) in BROKEN.items() if not any(symptom in w for w in warnings)]
    assert not unreported, f"the build never warned about: {unreported}\n{log[-3000:]}"


def test_unchanged_book_rebuilds_from_the_cache(book):
    """A second build with nothing changed executes no chapter. How long it takes is the benchmarks' business
    (a loaded machine must not fail a test): what is asserted is the work done, not the seconds."""
    if book.returncode != 0:
        pytest.skip("the book does not build; see test_book_builds_with_no_warnings")
    proc = subprocess.run([sys.executable, "-m", "lmcourse.cli", "book", "--no-assign", "--check"],
                          cwd=ROOT, env=mirror_env(), capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    executed = [line for line in log.splitlines() if "Executing notebook" in line]
    assert not executed, f"an unchanged chapter was executed again: {executed}"
    pdfs = json.loads((book.html / "slides" / "summary.json").read_text())["pdf"]
    if "skipped" not in pdfs:   # no Chromium: test_slides says so
        printed = sorted(name for name, made in pdfs.items() if not made.get("cached"))
        assert not printed, f"an unchanged deck was printed to PDF again: {printed}"


def test_the_book_modules_share_one_worker_under_make_test():
    """`make test`'s xdist scheduler keeps every module that reads the built book on one worker (conftest.py),
    so no worker sits idle waiting for another's build; other tests keep their module or class scope."""
    from conftest import BOOK_MODULES, scope_of

    here = Path(__file__).resolve().parent
    readers = {f"tests/{p.name}" for p in here.glob("test_*.py") if "built_book" in p.read_text(encoding="utf-8")}
    assert readers == set(BOOK_MODULES)
    assert {scope_of(f"{m}::test_x", m) for m in BOOK_MODULES} == {"the built book"}
    assert scope_of("tests/test_cli.py::test_x", "tests/test_cli.py") == "tests/test_cli.py"


# The fewest claims (lmcourse.claims) each chapter must record: a chapter whose prose states what its build
# computes backs those sentences; a claim deleted by accident (or a chapter that stopped recording) fails here.
MIN_CLAIMS = {"01-ngrams": 3, "02-word2vec": 23, "03-rnnlm": 15, "04-attention": 8, "05-transformer": 26,
              "06-bert": 8, "07-gpt": 12, "08-capstone": 6}


def test_the_prose_claims_hold_on_this_build(book):
    """Every sentence backed by a claim holds on the numbers this build computed (and `lmcourse book` says so)."""
    if book.returncode != 0:
        pytest.skip("the book does not build; see test_book_builds_with_no_warnings")
    found = claims.collect(BUILD / "jupyter_execute")
    per_chapter = Counter(c.chapter for c in found)
    short = {chapter: per_chapter[chapter] for chapter, n in MIN_CLAIMS.items() if per_chapter[chapter] < n}
    assert not short, f"chapters recording fewer claims than they back (chapter: found): {short}"
    keys = Counter((c.chapter, c.key) for c in found)
    assert not [k for k, n in keys.items() if n > 1], "a claim key used twice in one chapter"
    assert not claims.report(found), "the prose states what this build did not compute:\n" + claims.report(found)
    assert f"prose claims: {len(found)} of {len(found)} hold" in book.log


def _figures_of_the_book():
    """(chapter, cell index, PNG width, the PNG output's metadata) for every figure the chapters drew."""
    import base64
    import struct

    for path in sorted((BUILD / "jupyter_execute" / "units").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for i, cell in enumerate(nb["cells"]):
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    width = struct.unpack(">II", base64.b64decode(png)[16:24])[0]
                    yield path.stem, i, width, out.get("metadata", {}).get("image/png", {})


def test_every_figure_of_the_book_is_legible(book):
    """Each figure a chapter draws, as its kernel measured it (lmcourse.figure_notes): its smallest text is at
    least MIN_FONT_PX tall once shown in the page's column, and it has none of the problems the audit looks for
    (fractional ticks on a counted axis, maths outside $...$, annotations that do not contrast with their cell,
    series that only colour tells apart and a colour-blind reader could not)."""
    from lmcourse import figure_notes

    if book.returncode != 0:
        pytest.skip("the book does not build; see test_book_builds_with_no_warnings")
    figures = list(_figures_of_the_book())
    assert len(figures) >= 40, f"only {len(figures)} figures in the executed chapters"
    unmeasured = [f"{ch} cell {i}" for ch, i, _, md in figures if figure_notes.NOTES_KEY not in md
                  or "error" in md[figure_notes.NOTES_KEY]]
    assert not unmeasured, ("figures the kernel did not measure (is lmcourse.figure_notes.install in the book's "
                            f"IPython profile?): {unmeasured[:10]}")
    small, problems = [], []
    for chapter, i, width, md in figures:
        notes = md[figure_notes.NOTES_KEY]
        shown = figure_notes.font_px_on_page(notes["min_font_px"], width)
        if shown < figure_notes.MIN_FONT_PX:
            small.append(f"{chapter} cell {i}: '{notes['min_font_text']}' is {shown:.1f} px on the page "
                         f"({notes['min_font_px']:.1f} px in a {width}-px PNG)")
        problems += [f"{chapter} cell {i}: {p}" for p in notes["problems"]]
    assert not small, (f"text smaller than {figure_notes.MIN_FONT_PX} px once the figure is fitted to the "
                       f"{figure_notes.PAGE_WIDTH_PX}-px column (make the figure narrower or the text larger):\n"
                       + "\n".join(small))
    assert not problems, "figures a reader would trip over:\n" + "\n".join(problems)


def test_every_unit_is_listed_wherever_the_units_are():
    """The landing page's table and the instructors' table of materials name every chapter, the capstone too
    (the landing table once stopped at Unit 7)."""
    chapters = sorted(p.stem for p in (ROOT / "book" / "units").glob("*.md"))
    titles = {}
    for stem in chapters:
        heading = next(line for line in (ROOT / "book" / "units" / f"{stem}.md").read_text().splitlines()
                       if line.startswith("# "))
        titles[stem] = heading[2:].split(":", 1)[1].strip().lower()  # "Unit 1: Counting ..." -> "counting ..."
    intro = (ROOT / "book" / "intro.md").read_text()
    rows = [line for line in intro.splitlines() if line.startswith("| ") and not line.startswith(("| unit", "| ---"))]
    assert len(rows) == len(chapters), f"book/intro.md's table has {len(rows)} rows for {len(chapters)} chapters"
    for stem, row in zip(chapters, rows):
        assert titles[stem].split()[0] in row.lower(), f"book/intro.md: the row {row[:60]!r} is not {stem}'s"
    instructors = (ROOT / "book" / "course" / "instructors.md").read_text()
    missing = [stem for stem in chapters if f"../units/{stem}.html" not in instructors]
    assert not missing, f"book/course/instructors.md's table of materials leaves out {missing}"
