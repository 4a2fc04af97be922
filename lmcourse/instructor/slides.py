"""Lecture slides, built from the chapters: one reveal.js deck per unit.

A deck's source is a companion file, ``book/slides/<unit>.md``, next to the
chapter it teaches from. It holds what only a slide needs (short bullets, the
speaker notes) and pulls everything else from the chapter *by reference*, so
that a figure, an equation or a code block exists once:

    {figure}`ngram-fig-zipf`            the chapter's figure of that name, as executed
    {equation}`ngram-mle`               the chapter's labelled equation
    {code}`def perplexity(`             the chapter's code cell holding that text (it must be unique)
    {code}`def perplexity(` lines 1-8   ... only those lines of it
    {code}`def train(` lines 1-3, 9-12  ... lines 1-3, a line `...` for 4-8, then lines 9-12
    {code}`class Table:` lines 1-9, ...  ... lines 1-9, then `...` for the rest of the class
    {output}`print(f"{name:28s} H`      the text that cell printed when the chapter ran

each on a line of its own. Slides are separated by a line holding only
``---``; a line ``Note:`` starts the slide's speaker notes (reveal.js's
speaker view, key S), which run to the end of the slide. A line
``Syllabus: 2, 5`` says which of the unit's starred syllabus items the slide
teaches (it is not shown). Everything else is Markdown with ``$...$`` maths.

A code excerpt must read as code: what a slide shows is a whole syntactic
unit, never a body without its ``def`` or a ``return`` cut loose from its
function. So every range starts where a statement starts and ends where one
ends (not inside an open bracket), the excerpt starts at a statement of the
cell's top level or of a class body (a method is a unit; the inside of a
function or a loop is not), and nothing shown is cut off unless the cut is
marked: a ``...`` line stands for the lines left out between two ranges, or
after the last one with ``, ...``; it is indented like the first line it
replaces, so the excerpt, flush left, still compiles as Python (IPython's
``%magic`` and ``!shell`` lines count as the calls IPython makes of them; a
``%%`` cell magic is not Python, and is shown unchecked).
``check_excerpt`` says what is wrong and which lines would be whole.

``lmcourse slides --check`` validates every deck against its chapter without
building anything (20-35 slides, speaker notes on every slide, every
reference found once, every code excerpt whole); ``lmcourse book`` renders
them after the chapters have run, into ``book/_build/html/slides/<unit>.html``,
with every figure of the book exported next to them as SVG and PNG under
stable names (``figures/<unit>/<figure name>.svg``). Where Chromium is
installed, each deck is also printed twice (print_pdfs): ``<unit>.pdf``, one
page per slide, and ``<unit>-notes.pdf``, the instructor's handout: A4
portrait, each slide scaled down above its speaker notes, two to a page.
"""

from __future__ import annotations

import base64
import html
import inspect
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
# The handout (<unit>-notes.pdf): A4 portrait, each slide this wide (of 210 mm) above its notes.
HANDOUT_SLIDE_MM, HANDOUT_MARGIN_MM = 150, 12

_REF = re.compile(r"^\{(figure|equation|code|output)\}`([^`]+)`(?:\s+lines\s+(.*?))?\s*$")
# "12-20", "1-3, 9-12", "12-20, ..." (a line `...` for what follows line 20 in the statement shown)
_LINES = re.compile(r"^(\d+\s*-\s*\d+(?:\s*,\s*\d+\s*-\s*\d+)*)(\s*,\s*\.\.\.)?$")
_SYLLABUS = re.compile(r"^Syllabus:\s*([\d,\s]+)$")


class SlidesError(Exception):
    """A deck that does not match its chapter (the message names the deck, the slide and the fix)."""


# --- the deck source ---------------------------------------------------------


@dataclass
class Ref:
    kind: str  # figure | equation | code | output
    key: str
    lines: tuple[tuple[int, int], ...] = ()  # the line ranges shown (1-based, inclusive); () = all of it
    more: bool = False  # `lines ..., ...`: a line `...` after the last range stands for the rest
    spec: str = ""  # the `lines ...` text as written, for messages ("" when there is none)

    @property
    def unreadable(self) -> bool:
        """A `lines ...` that is not a list of ranges (the check says so)."""
        return bool(self.spec) and not self.lines


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
                slide.body.append(_ref(ref.group(1), ref.group(2), (ref.group(3) or "").strip()))
            else:
                buf.append(line)
        if "\n".join(buf).strip():
            slide.body.append("\n".join(buf))
        slides.append(slide)
    return Deck(path.stem, path, slides)


def _ref(kind: str, key: str, spec: str) -> Ref:
    m = _LINES.match(spec)
    if not m:
        return Ref(kind, key, spec=spec)
    ranges = tuple(tuple(int(x) for x in r.split("-")) for r in re.sub(r"\s", "", m.group(1)).split(","))
    return Ref(kind, key, ranges, more=bool(m.group(2)), spec=spec)


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


# --- code excerpts ---------------------------------------------------------------


def _as_python(source: str) -> list[str] | None:
    """The cell's lines as the Python that IPython runs, line for line: `%time f()` becomes
    `get_ipython().run_line_magic('time', 'f()')`, `!ls` a `.system('ls')` call. None for a cell that
    starts with a `%%` cell magic (its body is another language) or that IPython would not run line for line."""
    lines = source.splitlines()
    if source.lstrip().startswith("%%"):
        return None
    if not any(re.match(r"\s*[%!]|[^#'\"]*=\s*[%!]", line) for line in lines):
        return lines
    from IPython.core.inputtransformer2 import TransformerManager

    python = TransformerManager().transform_cell(source).splitlines()
    return python if len(python) == len(lines) else None


@dataclass
class _Statement:
    start: int  # first line (its first decorator's, for a decorated def or class)
    end: int
    node: object  # the ast node
    parent: object  # the ast node whose body holds it (the Module, a ClassDef, a FunctionDef, a For, ...)

    @property
    def kind(self) -> str:
        """def, class, or the statement's keyword (for, with, ...)."""
        import ast

        return {ast.FunctionDef: "def", ast.AsyncFunctionDef: "def", ast.ClassDef: "class"}.get(
            type(self.node), type(self.node).__name__.lower())

    @property
    def name(self) -> str:
        """`def forward`, `class Norm`, or `the for statement`."""
        if self.kind in ("def", "class"):
            return f"`{self.kind} {self.node.name}`"
        return f"the `{self.kind}` statement"

    def header_end(self) -> int:
        """The last line of a def's or class's header, its docstring included (the lines before its body)."""
        import ast

        body = self.node.body
        first = body[0]
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
                and len(body) > 1):
            return first.end_lineno
        return first.lineno - 1


def _statements(tree) -> list[_Statement]:
    """Every statement of a module, at every depth, with the node whose body holds it."""
    import ast

    found = []

    def visit(node):
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, name, None) or []:
                if isinstance(child, ast.stmt):
                    start = min([child.lineno] + [d.lineno for d in getattr(child, "decorator_list", [])])
                    found.append(_Statement(start, child.end_lineno, child, node))
                visit(child)

    visit(tree)
    return found


def _logical_lines(python: list[str]) -> tuple[set[int], set[int], set[int]]:
    """(lines where a statement's text starts, lines where one ends, lines holding code) of a cell, from its
    tokens: a line inside an open bracket, or continued with a backslash, neither starts nor ends one."""
    import io
    import tokenize

    starts, ends, code = set(), set(), set()
    layout = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.ENDMARKER}
    at_start = True
    for tok in tokenize.generate_tokens(io.StringIO("\n".join(python) + "\n").readline):
        if tok.type == tokenize.NEWLINE:
            ends.add(tok.start[0])
            at_start = True
        elif tok.type not in layout:
            if at_start:
                starts.add(tok.start[0])
                at_start = False
            code.update(range(tok.start[0], tok.end[0] + 1))
    return starts, ends, code


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def check_excerpt(source: str, ranges: tuple[tuple[int, int], ...], more: bool = False) -> tuple[str, list[str]]:
    """The excerpt a slide shows of a code cell, and what is wrong with it ([] when it is a whole unit).

    `ranges`: the 1-based, inclusive line ranges shown (() = the whole cell); between two of them, and
    after the last when `more`, a line `...` stands for what was left out, indented like the first
    line it replaces. The excerpt is returned flush left. A problem names the lines that would be
    whole ("widen the range to lines 12-24, the whole `class CountTable`").
    """
    import ast

    lines = source.splitlines()
    ranges = ranges or ((1, len(lines)),)
    problems = [f"lines {a}-{b} of a cell of {len(lines)} lines" for a, b in ranges if not 1 <= a <= b <= len(lines)]
    problems += [f"lines {a}-{b} come after lines {c}-{d}: list the ranges in order, apart"
                 for (c, d), (a, b) in zip(ranges, ranges[1:]) if a <= d]
    if problems:
        return "", problems
    python = _as_python(source)
    try:
        tree = ast.parse("\n".join(python)) if python is not None else None
    except SyntaxError:
        tree = None  # the chapter ran it, so only a cell IPython reads differently gets here: shown unchecked
    if tree is None:
        python = lines
    starts, ends, code = _logical_lines(python) if tree is not None else (set(), set(), set(range(1, len(lines) + 1)))
    statements = _statements(tree) if tree is not None else []

    def first_code(a: int, b: int) -> int | None:
        return next((n for n in range(a, b + 1) if n in code), None)

    def last_code(a: int, b: int) -> int | None:
        return next((n for n in range(b, a - 1, -1) if n in code), None)

    shown, checked = [], []
    for i, (a, b) in enumerate(ranges):
        if i:  # the lines left out since the previous range
            gap = first_code(ranges[i - 1][1] + 1, a - 1)
            if gap is None:
                problems.append(f"lines {ranges[i - 1][1] + 1}-{a - 1}, left out, hold no code: join the two ranges")
                continue
            shown.append(_indent(lines[gap - 1]) + "...")
            checked.append(_indent(python[gap - 1]) + "...")
        shown += lines[a - 1: b]
        checked += python[a - 1: b]
        if tree is None:
            continue
        first, last = first_code(a, b), last_code(a, b)
        if first is None:
            problems.append(f"lines {a}-{b} hold no code")
            continue
        if first not in starts:
            begins = max(n for n in starts if n < first)
            problems.append(f"line {first} is inside a statement that begins on line {begins} (an open bracket or "
                            f"a continued line): start the range at line {begins}")
        if last not in ends:
            ending = min(n for n in ends if n > last)
            problems.append(f"line {last} ends mid-statement (it goes on to line {ending}): "
                            f"end the range at line {ending}")
    first, last = first_code(ranges[0][0], ranges[-1][1]), last_code(ranges[0][0], ranges[-1][1])
    if tree is not None and first is not None and not problems:
        # The excerpt must start at a unit: a statement of the cell's top level, or of a class body.
        opener = min((s for s in statements if first in (s.start, s.node.lineno)), key=lambda s: s.start, default=None)
        if opener is not None and not isinstance(opener.parent, (ast.Module, ast.ClassDef)):
            unit = next(s for s in statements if s.node is opener.parent)  # climb to the unit that holds it
            while not isinstance(unit.parent, (ast.Module, ast.ClassDef)):
                unit = next(s for s in statements if s.node is unit.parent)
            rest = ", ..." if last < unit.end else ""
            if unit.header_end() < first - 1:  # its header, then the lines shown: `lines 9-10, 18-27`
                other = f"keep its header: `lines {unit.start}-{unit.header_end()}, {_spec(ranges)}{rest}`"
            else:  # the lines shown follow its header: start there
                other = f"start at its header: `lines {unit.start}-{last}{rest}`" if rest else ""
            problems.append(f"lines {first}-{last} are the inside of {unit.name} (lines {unit.start}-{unit.end}), a "
                            f"body without its header: widen the range to lines {unit.start}-{unit.end}, the whole "
                            f"{unit.kind}" + (f", or {other}" if other else ""))
        # ... and end where every statement it opened has ended, unless `, ...` marks the cut.
        cut = [s for s in statements if first <= s.start <= last < s.end]
        if cut and not more:
            outer = min(cut, key=lambda s: s.start)
            problems.append(f"the excerpt stops inside {outer.name} (lines {outer.start}-{outer.end}): widen the "
                            f"range to end at line {outer.end}, the whole {outer.kind}, or mark the cut: "
                            f"`lines {_spec(ranges)}, ...`")
        if more:
            after = first_code(last + 1, len(lines))
            if not cut or after is None:
                problems.append(f"`, ...` after line {last}, but no statement shown goes on after it: drop the `, ...`")
            else:
                shown.append(_indent(lines[after - 1]) + "...")
                checked.append(_indent(python[after - 1]) + "...")
    excerpt = textwrap.dedent("\n".join(shown)).strip("\n")
    if tree is not None and not problems:
        try:
            compile(textwrap.dedent("\n".join(checked)).strip("\n"), "<excerpt>", "exec", dont_inherit=True)
        except SyntaxError as err:
            problems.append(f"the excerpt does not compile on its own: {err.msg} (its line {err.lineno}); "
                            "show the statement that holds it, whole")
    return excerpt, problems


def _spec(ranges: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"{a}-{b}" for a, b in ranges)


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
    if ref.unreadable:
        raise SlidesError(f"`lines {ref.spec}`: write the lines shown as ranges, e.g. `lines 1-8`, `lines 1-3, 9-12` "
                          "or `lines 1-9, ...`")
    index, cell = chapter.code_cell(ref.key)
    if ref.kind == "code":
        excerpt, problems = check_excerpt(cell["source"], ref.lines, ref.more)
        if problems:
            raise SlidesError(f"{{code}}`{ref.key}`" + (f" lines {ref.spec}" if ref.spec else "") + ": "
                              + "; ".join(problems))
        return Resolved(highlight(excerpt))
    # output
    if len(ref.lines) > 1 or ref.more:
        raise SlidesError(f"`lines {ref.spec}`: what a cell printed is shown as one range of lines, e.g. `lines 1-8`")
    if not executed:
        return Resolved("")
    shown = _outputs_html(chapter.executed_cell(cell), ref.lines[0] if ref.lines else None)
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


def figure_alt(cell: dict) -> str:
    """What a figure cell's image shows, in words: the alt text its kernel wrote (lmcourse.figure_notes),
    else the figure's caption, else its name."""
    for o in reversed(cell.get("outputs", [])):
        alt = ((o.get("metadata") or {}).get("image/png") or {}).get("alt")
        if alt:
            return alt
    figure = (dict(cell.get("metadata", {})).get("mystnb") or {}).get("figure") or {}
    return " ".join(str(figure.get("caption", "")).split()) or str(_figure_name(cell) or "figure")


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
                str(dict(cell["metadata"])["mystnb"]["figure"].get("caption", "")).split()), "alt": figure_alt(cell)}
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
            rows.append(f'<figure><img src="{src}" alt="{html.escape(f.get("alt") or f["name"])}" loading="lazy">'
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
/* The title slide's block sits at the slide's centre, by absolute position rather than padding: reveal.js's
   print layout zeroes every slide's padding and its scroll view (phones) forces every slide's height, so
   padding or reveal's own `center` (which measures the content) would put the title elsewhere in each. */
.reveal .slides section.title-slide { text-align: center; padding: 0; }
.reveal .title-block { position: absolute; left: 0; right: 0; top: 50%; transform: translateY(-50%); padding: 0 80px; }
.reveal .title-block > :first-child { margin-top: 0; }
.reveal .title-block > :last-child { margin-bottom: 0; }
.reveal .title-block h1 { margin-bottom: .45em; }
.reveal .title-block h1::after { content: ""; display: block; width: 120px; height: 5px; margin: .35em auto 0;
  border-radius: 3px; background: #2a76dd; }
.reveal .title-block p { color: #444; margin: .35em 0; }
/* The slide number: reveal's white on 40% black is 2.8:1 (WCAG asks 4.5:1), and its link is 14 px tall
   (a touch target needs 24 px). */
.reveal .slide-number { background-color: #595959; color: #fff; font-size: 14px; padding: 0; }
.reveal .slide-number a { display: inline-block; padding: 5px 8px; line-height: 14px; }
.reveal .slide-number-pdf { padding: 5px 8px; }
/* Printed, a slide is the slide's size: reveal.js leaves each at its page's height, a margin taller. */
html.reveal-print .reveal .slides section { height: {HEIGHT}px; }
html.reveal-print .pdf-page:has(> section.title-slide) > .slide-number-pdf { display: none; }
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
/* The handout (?print-pdf&handout): A4 portrait, slides scaled down above their speaker notes, two to a page
   (see buildHandout below). */
html.handout body { background: #fff; }
html.handout .reveal .slides { text-align: left; }
html.handout .handout-item { break-inside: avoid; page-break-inside: avoid; padding-bottom: 3mm; margin-bottom: 4mm;
  border-bottom: .5pt solid #bbb; }
html.handout.reveal-print .reveal .slide-number-pdf { display: none; }  /* the label under the slide numbers it */
html.handout .handout-item:last-of-type { margin-bottom: 0; border-bottom: 0; }  /* else a blank last page */
html.handout .handout-slide { width: {HANDOUT_SLIDE_MM}mm; margin: 0 auto; position: relative; }
/* the slide's frame, drawn over the slide: reveal.js paints each page above its parent (z-index 1) */
html.handout .handout-slide::after { content: ""; position: absolute; inset: 0; z-index: 2; border: 1pt solid #999; }
html.handout.reveal-print .reveal .slides .pdf-page { page-break-after: auto; break-after: auto; }
html.handout .handout-notes { font-family: "Source Sans Pro", Helvetica, Arial, sans-serif; font-size: 10.5pt;
  line-height: 1.4; color: #1a1a1a; margin-top: 2.5mm; }
html.handout .handout-notes p { margin: 0 0 1.5mm; line-height: 1.4; }
html.handout .handout-notes .handout-label { font-weight: 600; font-size: 10pt; color: #444; margin-bottom: 1mm; }
html.handout .handout-notes code { font-size: 10pt; }
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
                    alt = figure_alt(chapter.figure_cell(res.figure[1]))  # res.figure: (unit, name)
                    parts.append(f'<img class="figure" src="../figures/{src}" alt="{html.escape(alt)}">')
                    continue
                parts.append(res.html)
            else:
                body = markdown(chunk)
                parts.append(body)
            if not (isinstance(chunk, str) and re.fullmatch(r"\s*#.*\s*", chunk)):
                figure_only = False
        if slide.number == 1:  # centred as one block (see _STYLE)
            parts = [f'<div class="title-block">{"".join(parts)}</div>']
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
<style>{_STYLE.replace("{HEIGHT}", str(HEIGHT)).replace("{HANDOUT_SLIDE_MM}", str(HANDOUT_SLIDE_MM))}
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
  transition: "none", pdfSeparateFragments: false, plugins: [RevealNotes]
}});
Reveal.on('ready', fitMaths);
Reveal.on('slidechanged', fitMaths);
// ?print-pdf&handout: the instructor's handout. reveal.js has laid every slide out as a page of its own
// (.pdf-page); each becomes a slide scaled down to the handout's width, with its speaker notes below it in
// print-sized type, on A4 paper, as many to a page as fit whole (two, for notes of usual length).
function buildHandout() {{
  const pages = Array.from(document.querySelectorAll('.reveal .slides > .pdf-page'));
  const config = Reveal.getConfig(), width = Math.floor(config.width * (1 + config.margin));  // as reveal.js's
  document.body.style.width = document.body.style.height = '';  // reveal.js sized the body to one slide
  document.documentElement.classList.add('handout');
  pages.forEach((page, i) => {{
    const section = page.querySelector('section');
    const item = document.createElement('article'), frame = document.createElement('div');
    const notes = document.createElement('div'), label = document.createElement('p');
    item.className = 'handout-item'; frame.className = 'handout-slide'; notes.className = 'handout-notes';
    label.className = 'handout-label';
    const heading = section.querySelector('h1, h2');
    label.textContent = `Slide ${{i + 1}} of ${{pages.length}}`
                        + (heading ? ` · ${{heading.textContent.trim()}}` : '');
    page.replaceWith(item);
    frame.appendChild(page);
    notes.appendChild(label);
    const aside = section.querySelector('aside.notes');  // moved, not copied: MathJax may not have typeset it yet
    while (aside && aside.firstChild) notes.appendChild(aside.firstChild);
    item.append(frame, notes);
    page.style.width = width + 'px';  // the whole page, slide and margin, scaled into the frame
    page.style.zoom = frame.clientWidth / width;
  }});
  // reveal.js asked for paper the size of a slide; the handout is printed on A4 (a later rule wins)
  const paper = document.createElement('style');
  paper.textContent = '@page {{ size: A4 portrait; margin: {HANDOUT_MARGIN_MM}mm {HANDOUT_MARGIN_MM}mm '
                      + '{HANDOUT_MARGIN_MM + 4}mm; }}';  // the bottom margin holds the footer
  document.head.appendChild(paper);
  document.documentElement.classList.add('handout-ready');
}}
if (new URLSearchParams(location.search).has('handout')) Reveal.on('pdf-ready', buildHandout);
// Printed, every slide is shown, but reveal.js still marks all but the first as hidden from assistive
// technology (hidden, aria-hidden): they would be left out of the PDF's tags, and out of an accessibility audit.
Reveal.on('pdf-ready', () => document.querySelectorAll('.reveal .slides section').forEach(section => {{
  section.hidden = false;
  section.removeAttribute('aria-hidden');
}}));
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
  // &handout: the handout is assembled from those pages in the same task that appends them; say so if not
  if (/[?&]handout/.test(location.search) && !document.documentElement.classList.contains('handout-ready'))
    return 'the handout was not assembled from the slides';
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
    """Each deck printed by headless Chromium, offline, to two PDFs:

    - ``<unit>.pdf``: reveal.js's ?print-pdf layout, one page per slide, on paper the size reveal.js asks
      for (the slide and its margin: 1331 x 748 px), so that nothing is scaled;
    - ``<unit>-notes.pdf``: the handout (?print-pdf&handout, see buildHandout in the deck's page), A4
      portrait, each slide above its speaker notes, with the deck's title and the page number in the footer.
    """
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
    # Two PDFs a deck: the slides, and the handout with each slide's speaker notes beneath it.
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
            query = "?print-pdf&handout" if notes else "?print-pdf"
            page.goto((slides_dir / f"{unit}.html").resolve().as_uri() + query, wait_until="load")
            state = page.evaluate(WAIT_FOR_DECK)
            if state != "ready":
                raise SlidesError(f"{unit}: {state} while printing {pdf.name}")
            page.wait_for_timeout(300)
            # The page's @page rule sets paper and margins (reveal.js's for the slides, A4 for the handout).
            options = dict(path=str(pdf), prefer_css_page_size=True, print_background=True)
            if notes:
                title = html.escape(page.title().removesuffix(" · slides"))
                options.update(display_header_footer=True, header_template="<span></span>", footer_template=(
                    '<div style="font: 8pt Helvetica, Arial, sans-serif; color: #555; width: 100%; '
                    f'margin: 0 {HANDOUT_MARGIN_MM}mm; display: flex; justify-content: space-between">'
                    f'<span>{title} · speaker notes</span>'
                    '<span>page <span class="pageNumber"></span> of <span class="totalPages"></span></span></div>'))
            page.pdf(**options)
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
    # How print_pdfs prints (paper, margins, footer): a change to it prints every PDF again.
    h.update(inspect.getsource(print_pdfs).encode())
    return h.hexdigest()
