"""Lecture slides, built from the chapters: one reveal.js deck per unit.

A deck's source is a companion file, ``book/slides/<unit>.md``, next to the
chapter it teaches from. It holds what only a slide needs (short bullets, the
speaker notes) and pulls everything else from the chapter *by reference*, so
that a figure, an equation or a code block exists once:

    {figure}`ngram-fig-zipf`            the chapter's figure of that name, as executed
    {equation}`ngram-mle`               the chapter's labelled equation
    {code}`def perplexity(`             the chapter's code cell holding that text (it must be unique)
    {code}`def perplexity(` lines 1-8   ... only those lines of it
    {output}`print(f"{name:28s} H`      the text that cell printed when the chapter ran

each on a line of its own. Slides are separated by a line holding only
``---``; a line ``Note:`` starts the slide's speaker notes (reveal.js's
speaker view, key S), which run to the end of the slide. A line
``Syllabus: 2, 5`` says which of the unit's starred syllabus items the slide
teaches (it is not shown). Everything else is Markdown with ``$...$`` maths.

``lmcourse slides --check`` validates every deck against its chapter without
building anything (20-35 slides, speaker notes on every slide, every
reference found once); ``lmcourse book`` renders them after the chapters have
run, into ``book/_build/html/slides/<unit>.html`` (plus a PDF when Chromium is
installed), with every figure of the book exported next to them as SVG and PNG
under stable names (``figures/<unit>/<figure name>.svg``).
"""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

SLIDES_SRC = Path("book") / "slides"
UNITS_SRC = Path("book") / "units"
EXECUTED = Path("book") / "_build" / "jupyter_execute" / "units"
REVEAL_DIR = Path("node_modules") / "reveal.js" / "dist"
MIN_SLIDES, MAX_SLIDES = 20, 35
# The slide's logical size: reveal.js scales it to the window, and the PDF prints one page per slide.
WIDTH, HEIGHT = 1280, 720

_REF = re.compile(r"^\{(figure|equation|code|output)\}`([^`]+)`(?:\s+lines\s+(\d+)-(\d+))?\s*$")
_SYLLABUS = re.compile(r"^Syllabus:\s*([\d,\s]+)$")


class SlidesError(Exception):
    """A deck that does not match its chapter (the message names the deck, the slide and the fix)."""


# --- the deck source ---------------------------------------------------------


@dataclass
class Ref:
    kind: str  # figure | equation | code | output
    key: str
    lines: tuple[int, int] | None = None


@dataclass
class Slide:
    number: int  # 1-based, as reveal.js counts them
    body: list[str | Ref] = field(default_factory=list)  # Markdown chunks and references, in order
    notes: str = ""
    syllabus: list[int] = field(default_factory=list)

    @property
    def title(self) -> str:
        for chunk in self.body:
            if isinstance(chunk, str):
                for line in chunk.splitlines():
                    if line.startswith("#"):
                        return line.lstrip("#").strip()
        return ""


@dataclass
class Deck:
    unit: str
    path: Path
    slides: list[Slide]

    @property
    def title(self) -> str:
        return self.slides[0].title if self.slides else self.unit


def parse_deck(path: Path) -> Deck:
    """Split a deck's source into slides: Markdown, references, notes and syllabus items."""
    slides: list[Slide] = []
    blocks = re.split(r"(?m)^---[ \t]*$", path.read_text(encoding="utf-8"))
    for number, block in enumerate(blocks, start=1):
        slide = Slide(number)
        text, notes = _split_notes(block)
        slide.notes = notes.strip()
        buf: list[str] = []
        for line in text.splitlines():
            ref, syl = _REF.match(line.strip()), _SYLLABUS.match(line.strip())
            if syl:
                slide.syllabus += [int(x) for x in re.findall(r"\d+", syl.group(1))]
            elif ref:
                if buf:
                    slide.body.append("\n".join(buf))
                    buf = []
                lines = (int(ref.group(3)), int(ref.group(4))) if ref.group(3) else None
                slide.body.append(Ref(ref.group(1), ref.group(2), lines))
            else:
                buf.append(line)
        if "\n".join(buf).strip():
            slide.body.append("\n".join(buf))
        slides.append(slide)
    return Deck(path.stem, path, slides)


def _split_notes(block: str) -> tuple[str, str]:
    """(slide text, speaker notes): the notes start at a line that begins with 'Note:'."""
    parts = re.split(r"(?m)^Note:[ \t]*", block, maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")


# --- the chapter a deck refers to ----------------------------------------------


@dataclass
class Chapter:
    unit: str
    code: list[dict]  # code cells of the source (jupytext), in order
    equations: dict[str, str]  # label -> TeX
    executed: list[dict] | None  # code cells of the executed notebook, when the book was built

    def code_cell(self, needle: str) -> tuple[int, dict]:
        hits = [(i, c) for i, c in enumerate(self.code) if needle in c["source"]]
        if len(hits) != 1:
            where = "no code cell" if not hits else f"{len(hits)} code cells"
            raise SlidesError(f"{where} of the chapter hold(s) the text {needle!r}; a code reference must "
                              "name text found in exactly one cell (quote more of its first line)")
        return hits[0]

    def figure_cell(self, name: str) -> dict:
        for cell in self.executed_or_source():
            if _figure_name(cell) == name:
                return cell
        names = sorted(n for n in map(_figure_name, self.code) if n)
        raise SlidesError(f"the chapter has no figure named {name!r}; its figures are: {', '.join(names) or 'none'}")

    def executed_or_source(self) -> list[dict]:
        return self.executed if self.executed is not None else self.code

    def executed_cell(self, source_cell: dict) -> dict:
        """The executed copy of a source code cell (matched by its code)."""
        if self.executed is None:
            raise SlidesError(f"{self.unit} has not been executed: build the book first (`lmcourse book`)")
        for cell in self.executed:
            if cell["source"] == source_cell["source"]:
                return cell
        raise SlidesError(f"the executed chapter {self.unit} is older than its source: build the book again")


def _figure_name(cell: dict) -> str | None:
    return ((cell.get("metadata") or {}).get("mystnb") or {}).get("figure", {}).get("name")


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


_MATH_BLOCK = re.compile(r"```\{math\}\n:label:\s*(\S+)\n(.*?)\n```", re.S)
_DOLLAR_LABEL = re.compile(r"\$\$\n?(.*?)\n?\$\$\s*\(([\w-]+)\)", re.S)


def load_chapter(root: Path, unit: str, cells: list[dict] | None = None, *, outputs: bool = True) -> Chapter:
    """A chapter's source code cells and labelled equations, and its executed cells (`cells`, when the
    caller has them already: see build; else read from the execution cache, unless `outputs` is False:
    checking a deck's references needs the source only)."""
    import jupytext

    md = root / UNITS_SRC / f"{unit}.md"
    if not md.exists():
        raise SlidesError(f"there is no chapter {md.relative_to(root)} for the deck {unit}")
    text = md.read_text(encoding="utf-8")
    nb = jupytext.reads(text, fmt="md:myst")
    code = [{"source": _source(c), "metadata": dict(c.metadata)} for c in nb.cells if c.cell_type == "code"]
    equations = {m.group(1): m.group(2).strip() for m in _MATH_BLOCK.finditer(text)}
    equations.update({m.group(2): m.group(1).strip() for m in _DOLLAR_LABEL.finditer(text)})
    if cells is None and outputs:
        cells = executed_cells(root, unit)
    executed = None if cells is None else [{**c, "source": _source(c)} for c in cells if c["cell_type"] == "code"]
    return Chapter(unit, code, equations, executed)


JUPYTER_CACHE = Path("book") / "_build" / ".jupyter_cache"


def cached_notebook(root: Path, unit: str):
    """The chapter as a notebook with the outputs of its last run, from the book's execution cache
    (jupyter-cache, matched on the chapter's code as myst-nb matches it); None when it has no match."""
    from myst_nb.core.read import read_myst_markdown_notebook

    md = root / UNITS_SRC / f"{unit}.md"
    cache_dir = root / JUPYTER_CACHE
    if not cache_dir.is_dir():
        return None
    from jupyter_cache import get_cache

    nb = read_myst_markdown_notebook(md.read_text(encoding="utf-8"), path=str(md))
    try:
        return get_cache(str(cache_dir)).merge_match_into_notebook(nb)[1]
    except KeyError:
        return None


def executed_cells(root: Path, unit: str) -> list[dict] | None:
    """The chapter's cells with the outputs of its last run (None when it has not run since its code changed).

    From the execution cache, not from book/_build/jupyter_execute/: myst-nb writes that copy without
    outputs when it takes them from the cache, i.e. on every rebuild of a chapter whose code did not change.
    """
    nb = cached_notebook(root, unit)
    if nb is not None:
        return [dict(c) for c in nb.cells]
    ipynb = root / EXECUTED / f"{unit}.ipynb"  # a build without the cache (execute_notebooks: force)
    if ipynb.exists():
        cells = json.loads(ipynb.read_text(encoding="utf-8"))["cells"]
        if any(c.get("outputs") for c in cells if c["cell_type"] == "code"):
            return cells
    return None


def restore_outputs(root: Path, html_dir: Path) -> list[str]:
    """Put the cached outputs back into the executed copies myst-nb wrote without them.

    The book's "download .ipynb" button serves html/_sources/units/<unit>.ipynb, a copy of that
    output-less file after a cached rebuild. Returns the files rewritten.
    """
    import nbformat

    fixed = []
    for md in sorted((root / UNITS_SRC).glob("*.md")):
        copies = [root / EXECUTED / f"{md.stem}.ipynb", html_dir / "_sources" / "units" / f"{md.stem}.ipynb"]
        stale = [p for p in copies if p.exists() and not any(
            c.get("outputs") for c in json.loads(p.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code")]
        nb = cached_notebook(root, md.stem) if stale else None
        if nb is None:
            continue
        text = nbformat.writes(nb)
        for path in stale:
            path.write_text(text, encoding="utf-8")
            fixed.append(str(path.relative_to(root)))
    return fixed


# --- checks --------------------------------------------------------------------


def starred_items(syllabus: Path, unit_number: int) -> list[str]:
    """The starred (★) items of one unit in the syllabus, in order."""
    text = syllabus.read_text(encoding="utf-8")
    sections = re.split(r"(?m)^## ", text)
    for sec in sections:
        if re.match(rf"Unit {unit_number}\b", sec):
            items = re.split(r"(?m)^- ", sec)[1:]
            return [" ".join(i.split()) for i in items if "★" in i]
    return []


def check_deck(deck: Deck, chapter: Chapter, *, starred: int | None = None, executed: bool = False) -> list[str]:
    """Everything wrong with a deck, as messages that name the slide; [] when it is fine."""
    problems: list[str] = []
    n = len(deck.slides)
    if not MIN_SLIDES <= n <= MAX_SLIDES:
        problems.append(f"{deck.unit}: {n} slides; a deck has {MIN_SLIDES}-{MAX_SLIDES}")
    covered: set[int] = set()
    for slide in deck.slides:
        where = f"{deck.unit} slide {slide.number} ({slide.title or 'untitled'})"
        if not slide.title:
            problems.append(f"{where}: no heading (start the slide with '# ' or '## ')")
        if len(slide.notes.split()) < 8:
            problems.append(f"{where}: speaker notes missing or too short (a 'Note:' line, then what to say)")
        covered |= set(slide.syllabus)
        for ref in slide.body:
            if isinstance(ref, Ref):
                try:
                    resolve(ref, chapter, executed=executed)
                except SlidesError as err:
                    problems.append(f"{where}: {err}")
    if starred is not None:
        missing = sorted(set(range(1, starred + 1)) - covered)
        extra = sorted(covered - set(range(1, starred + 1)))
        if missing:
            problems.append(f"{deck.unit}: starred syllabus items {missing} are on no slide (mark the slide that "
                            "teaches one with a line 'Syllabus: N')")
        if extra:
            problems.append(f"{deck.unit}: 'Syllabus:' names items {extra}; the unit has {starred} starred items")
    return problems


# --- rendering -------------------------------------------------------------------


@dataclass
class Resolved:
    html: str
    figure: tuple[str, str] | None = None  # (unit, figure name) of a figure reference


def resolve(ref: Ref, chapter: Chapter, *, executed: bool = True) -> Resolved:
    """A reference's HTML (executed=False: only check that its target exists in the source)."""
    if ref.kind == "equation":
        if ref.key not in chapter.equations:
            raise SlidesError(f"the chapter has no equation labelled {ref.key!r}; its labels are: "
                              f"{', '.join(sorted(chapter.equations)) or 'none'}")
        return Resolved(f'<div class="math display">\\[{html.escape(chapter.equations[ref.key])}\\]</div>')
    if ref.kind == "figure":
        cell = chapter.figure_cell(ref.key) if executed else _source_figure(chapter, ref.key)
        if executed and not _images(cell):
            raise SlidesError(f"the figure {ref.key!r} has no image in the executed chapter")
        return Resolved("", figure=(chapter.unit, ref.key))
    index, cell = chapter.code_cell(ref.key)
    if ref.kind == "code":
        lines = cell["source"].splitlines()
        if ref.lines:
            a, b = ref.lines
            if not 1 <= a <= b <= len(lines):
                raise SlidesError(f"lines {a}-{b} of a cell of {len(lines)} lines")
            lines = lines[a - 1: b]
        # An excerpt from inside a function reads better flush left.
        return Resolved(highlight(textwrap.dedent("\n".join(lines)).strip("\n")))
    # output
    if not executed:
        return Resolved("")
    shown = _outputs_html(chapter.executed_cell(cell), ref.lines)
    if not shown:
        raise SlidesError(f"the cell holding {ref.key!r} showed nothing (no text, no table) when the chapter ran")
    return Resolved(shown)


def _source_figure(chapter: Chapter, name: str) -> dict:
    for cell in chapter.code:
        if _figure_name(cell) == name:
            return cell
    names = sorted(n for n in map(_figure_name, chapter.code) if n)
    raise SlidesError(f"the chapter has no figure named {name!r}; its figures are: {', '.join(names) or 'none'}")


def _outputs_html(cell: dict, lines: tuple[int, int] | None) -> str:
    """What a cell showed when the chapter ran, as slide HTML: printed text, Markdown tables, HTML.

    Printed text keeps only `lines` (1-based, inclusive) when given; images
    are left to {figure} references.
    """
    parts, text = [], []
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            text.append(_source({"source": o.get("text", "")}))
        elif "text/markdown" in data:
            parts.append(f'<div class="output-table">{markdown(_source({"source": data["text/markdown"]}))}</div>')
        elif "text/html" in data and not any(k.startswith("image/") for k in data):
            parts.append(f'<div class="output-table">{_source({"source": data["text/html"]})}</div>')
        elif "text/plain" in data and not any(k.startswith("image/") for k in data):
            text.append(_source({"source": data["text/plain"]}) + "\n")
    printed = "".join(text)
    if lines:
        printed = "\n".join(printed.splitlines()[lines[0] - 1: lines[1]])
    if printed.strip():
        parts.insert(0, f'<pre class="output">{html.escape(printed.rstrip())}</pre>')
    return "".join(parts)


def _images(cell: dict) -> dict[str, str]:
    """A figure cell's image outputs: mime type -> data (the last figure the cell drew)."""
    found: dict[str, str] = {}
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        imgs = {k: _source({"source": v}) for k, v in data.items() if k in ("image/png", "image/svg+xml")}
        if imgs:
            found = imgs
    return found


def highlight(code: str) -> str:
    """Python source as highlighted HTML (Pygments classes; the deck's stylesheet colours them)."""
    from pygments import highlight as pyg
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return pyg(code, PythonLexer(), HtmlFormatter(cssclass="code"))


def markdown(text: str) -> str:
    """Slide Markdown as HTML; `$..$` and `$$..$$` become MathJax's \\(..\\) and \\[..\\]."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    def tex(content: str, options: dict) -> str:
        escaped = html.escape(content)
        return f'<div class="math display">\\[{escaped}\\]</div>' if options.get("display_mode") \
            else f'<span class="math">\\({escaped}\\)</span>'

    md = MarkdownIt("commonmark", {"html": True}).enable("table").use(dollarmath_plugin, renderer=tex)
    return md.render(text)


def export_figures(root: Path, html_dir: Path, executed: dict[str, list[dict] | None]) -> dict[str, list[dict]]:
    """Every figure of every executed chapter, as figures/<unit>/<name>.svg and .png; returns the index.

    The names are the chapters' own figure names (`ngram-fig-zipf`), so an
    instructor's slides that link to one keep working from one build to the next.
    `executed`: unit -> its executed cells (executed_cells).
    """
    out = html_dir / "figures"
    shutil.rmtree(out, ignore_errors=True)
    index: dict[str, list[dict]] = {}
    for unit, cells in sorted(executed.items()):
        if cells is None:
            raise SlidesError(f"{unit} has not been executed since its code changed: build the book first")
        index[unit] = []
        for cell in cells:
            name = _figure_name(cell) if cell["cell_type"] == "code" else None
            images = _images(cell) if name else {}
            if not images:
                continue
            folder = out / unit
            folder.mkdir(parents=True, exist_ok=True)
            entry = {"name": name, "caption": " ".join(
                str(dict(cell["metadata"])["mystnb"]["figure"].get("caption", "")).split())}
            if "image/svg+xml" in images:
                (folder / f"{name}.svg").write_text(images["image/svg+xml"], encoding="utf-8")
                entry["svg"] = f"{unit}/{name}.svg"
            if "image/png" in images:
                (folder / f"{name}.png").write_bytes(base64.b64decode(images["image/png"]))
                entry["png"] = f"{unit}/{name}.png"
            index[unit].append(entry)
    _write_gallery(out, index)
    return index


def _write_gallery(out: Path, index: dict[str, list[dict]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for unit, figures in index.items():
        rows.append(f"<h2 id=\"{unit}\">{html.escape(unit)}</h2>")
        if not figures:
            rows.append("<p>This chapter draws no figure.</p>")
        for f in figures:
            src = f.get("png") or f.get("svg")
            links = " · ".join(f'<a href="{f[k]}">{k.upper()}</a>' for k in ("svg", "png") if k in f)
            rows.append(f'<figure><img src="{src}" alt="{html.escape(f["name"])}" loading="lazy">'
                        f'<figcaption><code>{html.escape(f["name"])}</code> ({links}): '
                        f'{html.escape(f["caption"])}</figcaption></figure>')
    (out / "index.html").write_text(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Figures of the course</title>"
        "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "figure{margin:1.5rem 0}img{max-width:28rem;border:1px solid #ddd}"
        "figcaption{font-size:.9rem}</style></head><body><h1>Figures of the course</h1>"
        "<p>Every figure of the book, as drawn when the book was built, in SVG (for slides and print) and "
        "PNG. Names are stable: <code>figures/&lt;unit&gt;/&lt;figure name&gt;.svg</code>. "
        "<a href=\"../intro.html\">Back to the book</a>.</p>"
        + "\n".join(rows) + "</body></html>\n", encoding="utf-8")


_STYLE = """
.reveal { --r-heading-text-transform: none; --r-main-font-size: 30px; }
.reveal h1 { font-size: 2.0em; } .reveal h2 { font-size: 1.35em; margin-bottom: .4em; }
.reveal .slides section { text-align: left; height: 100%; box-sizing: border-box; padding-top: 14px; }
.reveal .slides section.title-slide { text-align: center; padding-top: 180px; }
.reveal ul, .reveal ol { display: block; margin-left: 1em; }
.reveal li { margin: .25em 0; }
.reveal p { margin: .5em 0; }
.reveal table { font-size: .7em; margin: .5em 0; }
/* A figure fills the space the slide leaves it; SVG stays sharp when scaled up. */
.reveal img.figure { display: block; margin: .3em auto; width: 100%; height: 430px; object-fit: contain; }
.reveal .slides section.figure-only img.figure { height: 570px; }
.reveal div.code { font-size: 19px; line-height: 1.35; margin: .4em 0; }
.reveal div.code pre, .reveal pre.output { font-size: inherit; margin: 0; padding: .5em .8em; background: #f6f8fa;
  border-radius: 6px; white-space: pre; box-shadow: none; width: auto; max-height: none; overflow: hidden;
  line-height: 1.35; }
.reveal pre.output { font-size: 19px; margin: .4em 0; }
.reveal .output-table table { font-size: 19px; }
.reveal .math.display { margin: .3em 0; }
"""


def render_deck(deck: Deck, chapter: Chapter, figures: dict[tuple[str, str], str]) -> str:
    """The deck as a reveal.js page that lives in html/slides/ (all paths relative: works from a folder)."""
    from pygments.formatters import HtmlFormatter

    sections = []
    for slide in deck.slides:
        parts, figure_only = [], True
        for chunk in slide.body:
            if isinstance(chunk, Ref):
                res = resolve(chunk, chapter)
                if res.figure:
                    src = figures[res.figure]
                    parts.append(f'<img class="figure" src="../figures/{src}" alt="figure {html.escape(chunk.key)}">')
                    continue
                parts.append(res.html)
            else:
                body = markdown(chunk)
                parts.append(body)
            if not (isinstance(chunk, str) and re.fullmatch(r"\s*#.*\s*", chunk)):
                figure_only = False
        classes = ["title-slide"] if slide.number == 1 else []
        if figure_only and any('class="figure"' in p for p in parts):
            classes.append("figure-only")
        notes = f'<aside class="notes">{markdown(slide.notes)}</aside>' if slide.notes else ""
        cls = f' class="{" ".join(classes)}"' if classes else ""
        sections.append(f'<section{cls} data-slide="{slide.number}">\n{"".join(parts)}\n{notes}\n</section>')
    code_css = HtmlFormatter(style="default").get_style_defs(".code")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(deck.title)} · slides</title>
<link rel="stylesheet" href="reveal/reveal.css">
<link rel="stylesheet" href="reveal/theme/white.css">
<style>{_STYLE}
{code_css}</style>
</head>
<body>
<div class="reveal"><div class="slides">
{chr(10).join(sections)}
</div></div>
<script src="reveal/reveal.js"></script>
<script src="reveal/plugin/notes.js"></script>
<script>
// MathJax (vendored with the book) typesets every slide once; reveal.js then lays the slides out again.
window.MathJax = {{
  tex: {{ inlineMath: [["\\\\(", "\\\\)"]], displayMath: [["\\\\[", "\\\\]"]] }},
  options: {{ skipHtmlTags: ["script", "noscript", "style", "textarea", "pre", "code"] }},
  startup: {{ ready: () => {{ MathJax.startup.defaultReady();
                             MathJax.startup.promise.then(() => {{ fitMaths(); if (Reveal.isReady()) Reveal.layout(); }}); }} }}
}};
// A displayed equation, or a code block, wider than the slide is set in a smaller size until it fits
// (shown slides only: a hidden one has no width to measure). Code never goes below 12 px.
function fitMaths() {{
  document.querySelectorAll('.reveal .slides section .math.display mjx-container').forEach(m => {{
    if (!m.clientWidth) return;
    for (let size = 95; m.scrollWidth > m.clientWidth + 1 && size >= 50; size -= 5) m.style.fontSize = size + '%';
  }});
  document.querySelectorAll('.reveal .slides section pre').forEach(pre => {{
    if (!pre.clientWidth) return;
    for (let px = 18; pre.scrollWidth > pre.clientWidth + 1 && px >= 12; px -= 1) pre.style.fontSize = px + 'px';
  }});
}}
Reveal.initialize({{
  width: {WIDTH}, height: {HEIGHT}, margin: 0.04, hash: true, slideNumber: "c/t", center: false,
  transition: "none", pdfSeparateFragments: false, plugins: [RevealNotes],
  // ?notes (with ?print-pdf): each slide's speaker notes printed on a page of their own after it
  showNotes: new URLSearchParams(location.search).has("notes") ? "separate-page" : false
}});
Reveal.on('ready', fitMaths);
Reveal.on('slidechanged', fitMaths);
</script>
<script src="../_static/mathjax/tex-mml-chtml.js" async></script>
</body>
</html>
"""


# --- building every deck ---------------------------------------------------------


def copy_reveal(root: Path, slides_dir: Path) -> None:
    """reveal.js (npm, package-lock.json) next to the decks: reveal/ with its CSS, theme and plugins."""
    src = root / REVEAL_DIR
    if not (src / "reveal.js").exists():
        raise SlidesError(f"reveal.js is not installed under {src.parent}: run `npm ci` at the course root "
                          "(`lmcourse book` does it when npm is installed)")
    dst = slides_dir / "reveal"
    shutil.rmtree(dst, ignore_errors=True)
    (dst / "theme").mkdir(parents=True)
    (dst / "plugin").mkdir()
    for name in ("reveal.js", "reveal.css", "reset.css"):
        shutil.copy2(src / name, dst / name)
    shutil.copy2(src / "theme" / "white.css", dst / "theme" / "white.css")
    fonts = src / "theme" / "fonts"
    if fonts.is_dir():
        shutil.copytree(fonts, dst / "theme" / "fonts")
    for name in ("notes.js",):
        shutil.copy2(src / "plugin" / name, dst / "plugin" / name)
    (dst / "LICENSE").write_text((src.parent / "LICENSE").read_text(encoding="utf-8"), encoding="utf-8")


def decks(root: Path) -> list[Path]:
    return sorted((root / SLIDES_SRC).glob("*.md"))


def build(root: Path, html_dir: Path | None = None, *, pdf: bool = True) -> dict:
    """Export the figures, render every deck and print each to PDF; returns a summary (also summary.json)."""
    html_dir = html_dir or root / "book" / "_build" / "html"
    t0 = time.perf_counter()
    # Each chapter's outputs, read once from the execution cache for the figures and the decks.
    executed = {md.stem: executed_cells(root, md.stem) for md in sorted((root / UNITS_SRC).glob("*.md"))}
    index = export_figures(root, html_dir, executed)
    figures = {(unit, f["name"]): (f.get("svg") or f["png"]) for unit, fs in index.items() for f in fs}
    slides_dir = html_dir / "slides"
    slides_dir.mkdir(parents=True, exist_ok=True)
    copy_reveal(root, slides_dir)
    sources = {p.stem for p in decks(root)}
    for stale in slides_dir.glob("*.*"):  # a deck whose source is gone (its page, PDFs and their stamps)
        if stale.is_file() and stale.name.lstrip(".").split(".")[0].removesuffix("-notes") not in sources | {"summary"}:
            stale.unlink()
    summary: dict = {"decks": {}, "figures": sum(len(v) for v in index.values())}
    problems: list[str] = []
    for path in decks(root):
        deck = parse_deck(path)
        chapter = load_chapter(root, deck.unit, executed.get(deck.unit))
        found = check_deck(deck, chapter, executed=True)
        if found:
            problems += found
            continue
        t = time.perf_counter()
        (slides_dir / f"{deck.unit}.html").write_text(render_deck(deck, chapter, figures), encoding="utf-8")
        summary["decks"][deck.unit] = {"slides": len(deck.slides), "title": deck.title,
                                      "render_seconds": round(time.perf_counter() - t, 2)}
    if problems:
        raise SlidesError("the slide decks do not match their chapters:\n  " + "\n  ".join(problems))
    if pdf:
        summary["pdf"] = print_pdfs(slides_dir, list(summary["decks"]))
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (slides_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def chromium() -> str | None:
    """The Chromium binary: $LMCOURSE_CHROMIUM, else Debian's /usr/bin/chromium, else PATH."""
    import os

    for candidate in (os.environ.get("LMCOURSE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

# Resolves once MathJax has typeset every slide (or at once in a deck without maths).
WAIT_FOR_DECK = """async () => {
  const start = Date.now();
  while (!(window.Reveal && Reveal.isReady())) {
    if (Date.now() - start > 60000) return 'reveal.js never became ready';
    await new Promise(r => setTimeout(r, 50));
  }
  // ?print-pdf: reveal.js lays the slides out as pages only after the window's load event and a frame,
  // later than isReady(); a PDF printed before then is one page, the screen's. It appends every page at
  // once, just before its 'pdf-ready' event, so the first .pdf-page means the layout is done.
  if (/[?&]print-pdf/.test(location.search)) {
    while (!document.querySelector('.pdf-page')) {
      if (Date.now() - start > 60000) return 'reveal.js never laid its slides out as pages';
      await new Promise(r => setTimeout(r, 50));
    }
  }
  if (document.querySelector('.math')) {
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
      if (Date.now() - start > 60000) return 'MathJax never started';
      await new Promise(r => setTimeout(r, 50));
    }
    await MathJax.startup.promise;
    if (MathJax.typesetPromise) await MathJax.typesetPromise();
  }
  await Promise.all(Array.from(document.images).map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  Reveal.layout();
  return 'ready';
}"""


def print_pdfs(slides_dir: Path, units: list[str]) -> dict:
    """Each deck printed to <unit>.pdf and <unit>-notes.pdf by headless Chromium (reveal.js's ?print-pdf
    layout), offline."""
    binary = chromium()
    if binary is None:
        print("slides: Chromium is not installed (Debian package `chromium`), so no PDF was printed; "
              "the HTML decks are complete", file=sys.stderr)
        return {"skipped": "no chromium"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("slides: Playwright is not installed, so no PDF was printed", file=sys.stderr)
        return {"skipped": "no playwright"}
    # Two PDFs a deck: the slides, and a handout with each slide's speaker notes on the page after it.
    prints = [(unit, notes) for unit in units for notes in (False, True)]
    result, todo = {}, []
    for unit, notes in prints:
        pdf = slides_dir / _pdf_name(unit, notes)
        stamp = slides_dir / f".{pdf.name}.sha256"
        if pdf.exists() and stamp.exists() and stamp.read_text() == _digest(slides_dir, unit):
            result[pdf.stem] = {"seconds": 0.0, "bytes": pdf.stat().st_size, "cached": True}
        else:
            todo.append((unit, notes))
    if not todo:
        return result
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=binary, headless=True, args=CHROMIUM_ARGS)
        for unit, notes in todo:
            # A fresh page for each print: reveal.js's notes plugin, reloaded in the same tab from file://,
            # trips over the previous document's frame.
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            # Offline by construction: anything that is not a file of this folder is refused.
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                       else route.abort())
            t = time.perf_counter()
            pdf = slides_dir / _pdf_name(unit, notes)
            query = "?print-pdf&notes" if notes else "?print-pdf"
            page.goto((slides_dir / f"{unit}.html").resolve().as_uri() + query, wait_until="load")
            state = page.evaluate(WAIT_FOR_DECK)
            if state != "ready":
                raise SlidesError(f"{unit}: {state} while printing {pdf.name}")
            page.wait_for_timeout(300)
            page.pdf(path=str(pdf), width=f"{WIDTH}px", height=f"{HEIGHT}px",
                     print_background=True, margin={"top": "0", "bottom": "0", "left": "0", "right": "0"})
            result[pdf.stem] = {"seconds": round(time.perf_counter() - t, 1), "bytes": pdf.stat().st_size}
            (slides_dir / f".{pdf.name}.sha256").write_text(_digest(slides_dir, unit))
            page.close()
        browser.close()
    return result


def _pdf_name(unit: str, notes: bool) -> str:
    return f"{unit}-notes.pdf" if notes else f"{unit}.pdf"


def _digest(slides_dir: Path, unit: str) -> str:
    """What a deck's PDF depends on: its page, the figures it shows, reveal.js and MathJax."""
    import hashlib

    page = (slides_dir / f"{unit}.html").read_bytes()
    h = hashlib.sha256(page)
    for src in sorted(set(re.findall(rb'src="(\.\./figures/[^"]+)"', page))):
        h.update((slides_dir / src.decode()).resolve().read_bytes())
    for dep in ("reveal/reveal.js", "reveal/reveal.css", "reveal/theme/white.css",
                "../_static/mathjax/.lmcourse-version"):
        path = slides_dir / dep
        h.update(path.read_bytes() if path.exists() else b"-")
    return h.hexdigest()
