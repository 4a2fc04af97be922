"""Building the online book (Jupyter Book 1 over Sphinx), offline.

Two jobs live here:

1. `build()`, behind `lmcourse book`: vendor MathJax from npm when needed,
   then run `jupyter-book build book` so that any warning that survives the
   short `suppress_warnings` list in book/_config.yml fails the build (broken
   cross-references, missing files, unknown roles), and a cell that raises
   fails it too (`execute.raise_on_error`). Chapters are executed through
   jupyter-cache, so a rebuild re-runs only the chapters whose code changed.

2. A tiny Sphinx extension (book/_config.yml lists `lmcourse.instructor.book` in
   `extra_extensions`): Sphinx's MathJax comes from a CDN by default, which a
   reader offline (or a classroom behind a firewall) never gets. We point
   `mathjax_path` at a relative path and copy MathJax 3's `es5/` folder from
   node_modules/ into `_build/html/_static/mathjax/` when the build finishes.
   It is deliberately not in book/_static/: Jupyter Book adds every .js file
   found under its static paths to every page, which for MathJax is hundreds
   of scripts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# Where `npm ci` (package.json / package-lock.json at the repo root) puts MathJax.
MATHJAX_DIR = Path("node_modules") / "mathjax" / "es5"
MATHJAX_ENTRY = "tex-mml-chtml.js"  # TeX + MathML input, CommonHTML output
MATHJAX_OUT = "mathjax"  # under _static/ in the built site


class BookError(RuntimeError):
    """A build prerequisite is missing; the message says how to get it."""


def _tool(name: str) -> str:
    """A console script from the same environment as this Python."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if not found:
        raise BookError(f"`{name}` is not installed in this environment; run `make book` to set it up")
    return found


def _installed_version(root: Path, package: str) -> str | None:
    """The version of an npm package installed under node_modules/, or None when absent."""
    meta = root / "node_modules" / package / "package.json"
    entry = {"mathjax": MATHJAX_DIR / MATHJAX_ENTRY, "reveal.js": Path("node_modules/reveal.js/dist/reveal.js")}
    if not meta.exists() or (package in entry and not (root / entry[package]).exists()):
        return None
    return json.loads(meta.read_text())["version"]


def _locked_versions(root: Path) -> dict[str, str]:
    """package -> version, for every package package-lock.json pins at the top of node_modules/."""
    lock = json.loads((root / "package-lock.json").read_text())
    return {name.removeprefix("node_modules/"): meta["version"] for name, meta in lock["packages"].items()
            if name.startswith("node_modules/") and name.count("node_modules/") == 1}


def ensure_mathjax(root: Path) -> Path:
    """Install the browser assets (MathJax for the maths, reveal.js for the slides) from the npm registry
    (`npm ci`) unless the locked versions are already there."""
    locked = _locked_versions(root)
    stale = {p: v for p, v in locked.items() if _installed_version(root, p) != v}
    if stale:
        wanted = ", ".join(f"{p} {v}" for p, v in stale.items())
        npm = shutil.which("npm")
        if npm is None:
            raise BookError(
                f"the book needs {wanted} from npm (maths and slides that work offline), but `npm` is not "
                "installed; install Node.js and npm (Debian: `apt-get install npm`, or run `make book`, which "
                "does it as root), then run `npm ci` in the repository root"
            )
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
        print("+", " ".join(cmd), flush=True)
        if subprocess.call(cmd, cwd=root) != 0 or any(_installed_version(root, p) != v for p, v in stale.items()):
            raise BookError(f"`npm ci` in {root} did not install {wanted}; see npm's message above")
    return root / MATHJAX_DIR


def _kernel_profile(root: Path) -> Path:
    """An IPython folder whose kernels draw every figure as PNG *and* SVG, the PNG with its alt text.

    The page shows the PNG (book/_config.yml ranks it first); the SVG is kept
    in the executed notebook so that `lmcourse.instructor.slides` can export each figure
    in both formats under a stable name, for slides and print.
    """
    ipython = root / "book" / "_build" / ".ipython"
    config = ipython / "profile_default" / "ipython_kernel_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    # ... and attach to each PNG its alt text and legibility measurements (lmcourse.figure_notes).
    text = ('c.InlineBackend.figure_formats = {"png", "svg"}\n'
            'c.InteractiveShellApp.exec_lines = ["from lmcourse.figure_notes import install as _lmcourse_notes", '
            '"_lmcourse_notes()", "del _lmcourse_notes"]\n')
    if not config.exists() or config.read_text() != text:
        config.write_text(text)
    return ipython


def build(root: Path, *, assignments: bool = True, check: bool = False) -> int:
    """Build book/ into book/_build/html.

    Every warning fails the build (`-W`, after the build has run to the end
    with `--keep-going`, so one run lists them all). `check` adds Sphinx's
    nit-picky mode (`-n`), which also reports references to missing targets
    that plain mode lets pass; the tests use it.
    """
    if assignments and any((root / "solutions").glob("*/*.ipynb")):
        from lmcourse.instructor import release

        rc = release.main(root, [], check_only=False)
        if rc:
            return rc
    try:
        ensure_mathjax(root)
        jb = _tool("jupyter-book")
    except BookError as err:
        print(f"lmcourse book: {err}", file=sys.stderr)
        return 1
    cmd = [jb, "build", str(root / "book"), "--keep-going", "-W"]
    if check:
        cmd += ["-n"]
    # Chapters import lmcourse and read corpora; run them with this
    # environment's tools first on PATH (nbgrader and friends shell out by name).
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["IPYTHONDIR"] = str(_kernel_profile(root))
    env["LMCOURSE_BOOK_BUILD"] = "1"  # self-check cells leave placeholders, filled in by _self_checks below
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=root, env=env)
    if rc == 0:
        rc = _lecture_materials(root)
    if rc == 0:
        _prose_claims(root)
    if rc == 0:
        print(f"book: {root / 'book' / '_build' / 'html' / 'index.html'}")
        print(f"instructor notes (not part of the site): {root / 'book' / '_build' / 'instructors' / 'index.html'}")
    else:
        print(
            "lmcourse book: the build failed; the warnings or the failing cell are listed above "
            "(a chapter's full execution log is under book/_build/html/reports/)",
            file=sys.stderr,
        )
    return rc


def _prose_claims(root: Path) -> None:
    """Say whether the prose's claims hold on this build's numbers (lmcourse.claims; tests/test_book.py fails on them).

    A contradicted claim does not fail the build: the site is complete and correct as computed, and an instructor
    building on a slow or unusual machine should still get it. It is printed, so that the sentence can be checked
    before the site is published.
    """
    from lmcourse import claims

    found = claims.collect(root / "book" / "_build" / "jupyter_execute")
    wrong = claims.report(found)
    print(f"prose claims: {sum(c.holds for c in found)} of {len(found)} hold on this build's numbers")
    if wrong:
        print("lmcourse book: warning: the prose of these chapters states what this build did not compute:\n" + wrong,
              file=sys.stderr)


def _lecture_materials(root: Path) -> int:
    """After the chapters ran: figures as SVG/PNG, the slide decks (HTML, PDF), the instructor notes."""
    from lmcourse.instructor import notes as instructors, slides

    # myst-nb writes a chapter's executed copies (jupyter_execute/, and the site's download) without outputs
    # when it takes them from its cache: put them back first.
    slides.restore_outputs(root, root / "book" / "_build" / "html")
    try:
        summary = slides.build(root)
    except slides.SlidesError as err:
        print(f"lmcourse book: {err}", file=sys.stderr)
        return 1
    decks = summary["decks"]
    counts = ", ".join(f"{unit} {deck['slides']}" for unit, deck in decks.items())
    print(f"slides: {len(decks)} decks ({counts} slides), {summary['figures']} figures as SVG and PNG, "
          f"{summary['seconds']} s")
    instructors.build(root, sorted(decks))
    return 0


# --- the Sphinx extension ----------------------------------------------------


def _check_mathjax(app, config) -> None:
    """At config time: fail early, with the fix, when MathJax was never vendored."""
    if app.builder.format != "html":
        return
    root = Path(app.srcdir).resolve().parent
    if not (root / MATHJAX_DIR / MATHJAX_ENTRY).exists():
        from sphinx.errors import ExtensionError

        raise ExtensionError(
            f"MathJax is vendored from npm for offline maths, and {root / MATHJAX_DIR / MATHJAX_ENTRY} "
            f"is missing; run `npm ci` in {root} (`make book` and `lmcourse book` do it for you)"
        )


def _copy_mathjax(app, exception) -> None:
    """After a successful HTML build: copy MathJax's es5/ folder to _static/mathjax/."""
    if exception is not None or app.builder.format != "html":
        return
    src = Path(app.srcdir).resolve().parent / MATHJAX_DIR
    dst = Path(app.outdir) / "_static" / MATHJAX_OUT
    # A version stamp makes the no-change rebuild skip the 24 MB copy.
    stamp = dst / ".lmcourse-version"
    version = (src.parent / "package.json").read_text()
    if stamp.exists() and stamp.read_text() == version:
        return
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    stamp.write_text(version)


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated <script> entries from a page.

    Jupyter Book registers sphinx-thebe's and sphinx-togglebutton's inline
    scripts twice, at two priorities, and Sphinx 7.4 keeps both copies; the
    second `const THEBE_JS_URL` is a SyntaxError in every reader's console.
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # Same file (or inline body) and attributes; the copies differ only in
        # how "no file" is spelled (None or "").
        key = (str(getattr(js, "filename", js) or ""),
               tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique


def _teaching_links(app, pagename, templatename, context, doctree) -> None:
    """Under the title of every chapter that has a deck: links to its slides (HTML, PDF) and its figures (SVG, PNG).

    The decks are rendered after Sphinx (they need the executed chapters), so
    the links point at files `lmcourse book` writes next to the pages.
    """
    if not pagename.startswith("units/") or "body" not in context:
        return
    unit = pagename.split("/", 1)[1]
    if not (Path(app.srcdir) / "slides" / f"{unit}.md").exists():
        return
    links = (
        '<p class="lmcourse-teaching">Lecture slides for this chapter: '
        f'<a href="../slides/{unit}.html">Slides</a> (<a href="../slides/{unit}.pdf">PDF</a>, '
        f'<a href="../slides/{unit}-notes.pdf">PDF with speaker notes</a>) · '
        f'<a href="../figures/index.html#{unit}">its figures as SVG and PNG</a></p>\n')
    # Under the chapter's title, where a reader looks for them (above it they read as a stray banner).
    body = context["body"]
    end = body.find("</h1>")
    context["body"] = body[:end + 5] + "\n" + links + body[end + 5:] if end >= 0 else links + body


def _accessible_markup(app, pagename, templatename, context, doctree) -> None:
    """Markup of myst-nb's that fails an accessibility rule, rewritten in the page's body.

    A hidden code cell's "Show code cell source" toggle is a <summary> named "Toggle hidden content" by an
    aria-label: what a screen reader says is then not what a sighted voice-control user sees and speaks
    (WCAG 2.5.3, label in name). Without the label, its name is its visible text.

    The bibliography's entries sit in a <div role="list"> whose children are sphinxcontrib-bibtex's anchors
    and entries with the deprecated DPUB role doc-biblioentry, not list items: a list that is no list to a
    screen reader (axe-core: critical). Plain <div>s read as the paragraphs they are.
    """
    if "body" in context:
        context["body"] = (context["body"]
                           .replace('<summary aria-label="Toggle hidden content">', "<summary>")
                           .replace('<div role="list" class="citation-list">', '<div class="citation-list">')
                           .replace(' role="doc-biblioentry"', ""))


# Special tokens the course writes in prose, captions and outputs: <EOS>, <BOS>, <UNK>, <|endoftext|>.
SPECIAL_TOKEN = re.compile(r"<(\|[\w-]+\||[A-Za-z][\w-]*)>")
# ... and the HTML elements a page may really mean when its Markdown holds one (only these stay markup).
HTML_ELEMENTS = frozenset("""a abbr b bdi bdo br cite code data del dfn em i img ins kbd mark q s samp small span strong
sub sup time u var wbr p div table thead tbody tfoot tr td th caption colgroup col ul ol li dl dt dd pre
blockquote figure figcaption hr h1 h2 h3 h4 h5 h6 details summary section article aside header footer nav main
label input button select option textarea form iframe video audio source picture svg math script style""".split())


def special_tokens(text: str) -> set[str]:
    """The special tokens in a text (<EOS>, <|im_start|>), leaving out what is an HTML element (<td>, <b>)."""
    return {m.group(0) for m in SPECIAL_TOKEN.finditer(text) if m.group(1).lower() not in HTML_ELEMENTS}


def _keep_special_tokens(app, doctree) -> None:
    """A `<EOS>` written in Markdown stays on the page as text.

    MyST passes inline HTML through, so "the last row wrote <EOS>" in a caption reached the page as an
    unknown tag, which the browser drops ("the last row wrote )"). Any raw inline HTML that is exactly one
    such token, and not an HTML element, becomes the text it spells.
    """
    from docutils import nodes

    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext().strip()
        if "html" in raw.get("format", "").split() and SPECIAL_TOKEN.fullmatch(text) and special_tokens(text):
            raw.replace_self(nodes.Text(text))


def _quiz_dependency(app, docname, source) -> None:
    """A chapter's page is rebuilt when its question file changes (its cells' cache keys do not see it),
    or the code that draws the questions does (lmcourse/quiz.py)."""
    if docname.startswith("units/"):
        quizzes = Path(app.srcdir) / "quizzes" / f"{docname.split('/', 1)[1]}.yaml"
        if quizzes.exists():
            app.env.note_dependency(str(quizzes))
            from lmcourse import quiz

            app.env.note_dependency(str(Path(quiz.__file__).resolve()))


class FigureAltText:
    """myst-nb's hook for a PNG output: the <img> gets the alt text the chapter's kernel wrote for it.

    `lmcourse.figure_notes.install` (run in every chapter's kernel by `_kernel_profile`) stores what the
    figure shows, in words, in the PNG output's metadata; myst-nb itself reads only its width and height
    there, and would give the image its file name as alt text. An alt text set on the cell
    (``mystnb: image: alt:``) wins. Registered under the entry point group ``myst_nb.mime_renderers``
    (pyproject.toml).
    """

    mime_priority_overrides = ()

    @staticmethod
    def handle_mime(renderer, data, inline):
        if data.mime_type != "image/png":
            return None
        alt = (data.output_metadata.get("image/png") or {}).get("alt")
        if not alt:
            return None
        images = renderer.render_image_inline(data) if inline else renderer.render_image(data)
        for image in images:
            if not image.get("alt"):
                image["alt"] = alt
        return images


def _chapter_figure_numbers(app, env) -> list[str]:
    """Number each chapter's figures from 1, after its unit: Figure 3.2 is Unit 3's second figure.

    Sphinx numbers figures across the whole book (Unit 3's first figure was "Fig. 11"), unless its
    chapters carry section numbers, which would put "3." before every "Unit 3:" title. So this runs after
    Sphinx's own numbering (env-get-updated, after the toctree collector) and renumbers, in the order
    Sphinx found them, every figure, table and listing of a `units/NN-...` page as (NN, k). Both the
    captions and the {numref} cross-references read these numbers.
    """
    for docname, kinds in env.toc_fignumbers.items():
        match = re.match(r"units/(\d+)-", docname)
        if not match:
            continue
        for numbers in kinds.values():
            for k, figure_id in enumerate(sorted(numbers, key=numbers.get), start=1):
                numbers[figure_id] = (int(match.group(1)), k)
    return []


GRADING_COST = "<!-- lmcourse: grading-cost -->"  # book/course/grading.md: where the measured costs go


def _grading_costs(app, docname, source) -> None:
    """The grading page's table of measured costs, from instructors/grading-cost.json (rebuilt when it changes)."""
    if GRADING_COST in source[0]:
        from lmcourse.instructor.notes import cohort_cost_table

        root = Path(app.srcdir).parent
        app.env.note_dependency(str(root / "instructors" / "grading-cost.json"))
        source[0] = source[0].replace(GRADING_COST, cohort_cost_table(root))


def _self_checks(app, pagename, templatename, context, doctree) -> None:
    """Fill each self-check placeholder a chapter's cell left with the questions (lmcourse.quiz)."""
    if "body" in context and "lmcourse-self-check" in context["body"]:
        from lmcourse import quiz

        context["body"] = quiz.fill_placeholders(context["body"])


def setup(app):
    """Sphinx entry point (book/_config.yml: sphinx.extra_extensions)."""
    app.connect("source-read", _quiz_dependency)
    app.connect("source-read", _grading_costs)
    app.connect("doctree-read", _keep_special_tokens)
    app.connect("html-page-context", _self_checks)
    app.connect("builder-inited", lambda app: _check_mathjax(app, app.config))
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _teaching_links)
    app.connect("html-page-context", _accessible_markup)
    app.connect("build-finished", _copy_mathjax)
    app.connect("env-get-updated", _chapter_figure_numbers, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
