"""Finding answers where students can read them.

Everything a student receives (the book site, the released notebooks, a
student edition and the wheel built from it) must hold no solution and no
hidden check. This module collects what is secret and looks for it in a
folder, file by file, the way a curious student would: text and notebooks
line by line, HTML as a browser shows it, archives (wheels, zips, tarballs)
member by member, and bytecode by what it was compiled from.

What is secret:

- **solution lines**: in ``solutions/*/*.ipynb``, the lines between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (or ``HIDDEN TESTS``), and
  the whole of a solution cell without such markers (nbgrader replaces it
  entirely in the release); every line of ``autograder/**/*.py`` but the
  known-mistake catalogues (``mistakes.py``: wrong code written as edits of
  solution lines, which are secret as such already); minus what
  the student sees anyway (the rest of the source notebook) and lines too
  common to mean anything (imports, ``return x``, brackets, short lines);
- **compiled answers**: the bytecode of every function that a solution cell
  or a check file defines and the release does not (a ``.pyc`` copy of an
  answer has no source line left to match);
- **hidden check names**: the pytest name (``test_...``) and the title
  (``name=``) of every check that is not ``visibility="visible"``.

Lines are compared with all whitespace removed and a trailing comment
dropped, so re-indenting or re-spacing a line does not hide it.
"""

from __future__ import annotations

import ast
import gzip
import html
import io
import json
import marshal
import re
import tarfile
import types
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

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
MIN_BYTECODE = 24  # bytes of a function's code: shorter ones (a stub, `return x`) say nothing
ARCHIVES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".gz")


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


@dataclass
class Secrets:
    """What must not reach a student: normalised lines, compiled functions, hidden check names."""

    lines: dict[str, Origin] = field(default_factory=dict)
    bytecode: dict[bytes, Origin] = field(default_factory=dict)
    names: dict[str, Origin] = field(default_factory=dict)


def _cell_source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_lines(path: Path) -> tuple[list[str], list[str]]:
    """(secret lines, public lines) of one nbgrader source notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
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


def _check_files(autograder: Path) -> list[Path]:
    """The checks' Python files: not the known-mistake catalogues (`lmcourse.instructor.mistakes`), whose
    wrong versions of the chapters' own code (a trainer that forgets to zero its gradients) the book may
    show, and whose solution lines are secret where they come from."""
    return sorted(p for p in autograder.rglob("*.py") if p.name != "mistakes.py")


def secret_lines(solutions: Path, autograder: Path) -> dict[str, Origin]:
    """Normalised secret line -> where it comes from."""
    secrets: dict[str, Origin] = {}
    public: set[str] = set()
    for nb in sorted(solutions.glob("*/*.ipynb")):
        hidden, shown = notebook_lines(nb)
        public.update(normalise(text) for line in shown for text in (line, without_comment(line)))
        for line in hidden:
            secrets.setdefault(normalise(line), Origin(str(nb), line.strip()))
    for py in _check_files(autograder):
        for line in py.read_text(encoding="utf-8").splitlines():
            secrets.setdefault(normalise(line), Origin(str(py), line.strip()))
    out = {}
    for origin in secrets.values():
        for line in {origin.line, without_comment(origin.line)}:
            key = normalise(line)
            if key not in public and not is_common(line):
                out[key] = origin
    return out


# --- bytecode -------------------------------------------------------------------------------


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def fingerprint(code: types.CodeType) -> bytes:
    """What a compiled function is, wherever it was compiled: its name, instructions, names and
    constants (nested functions by their own fingerprint), never its file or line numbers."""
    consts = tuple(fingerprint(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return marshal.dumps((code.co_name, code.co_code, code.co_names, code.co_varnames, repr(consts)))


def _functions(source: str, filename: str) -> dict[bytes, str]:
    """Fingerprint -> qualified name of every function or class body compiled from `source` that is
    long enough to be an answer ({} when the source does not compile)."""
    try:
        module = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return {}
    # named functions and methods only: a comprehension or a lambda (`<listcomp>`, `<genexpr>`) compiles
    # to the same bytes wherever `[w for w in words]` is written
    return {fingerprint(c): c.co_qualname for c in _code_objects(module)
            if not c.co_name.startswith("<") and len(c.co_code) >= MIN_BYTECODE}


def secret_bytecode(solutions: Path, autograder: Path, releases: Path | None = None) -> dict[bytes, Origin]:
    """Fingerprints of the functions solution cells and check files define, less those the release
    defines too (given code, the stubs' signatures compiled to the same thing)."""
    out: dict[bytes, Origin] = {}
    public: set[bytes] = set()
    for nb in sorted(solutions.glob("*/*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8")).get("cells", []):
            if cell.get("cell_type") == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                for fp, name in _functions(_cell_source(cell), str(nb)).items():
                    out.setdefault(fp, Origin(str(nb), f"compiled {name}"))
            elif cell.get("cell_type") == "code":
                public.update(_functions(_cell_source(cell), str(nb)))
    if releases is not None:
        for nb in sorted(releases.glob("*/*.ipynb")):
            for cell in json.loads(nb.read_text(encoding="utf-8")).get("cells", []):
                if cell.get("cell_type") == "code":
                    public.update(_functions(_cell_source(cell), str(nb)))
    for py in _check_files(autograder):
        for fp, name in _functions(py.read_text(encoding="utf-8"), str(py)).items():
            out.setdefault(fp, Origin(str(py), f"compiled {name}"))
    return {fp: o for fp, o in out.items() if fp not in public}


# --- hidden check names -----------------------------------------------------------------------


def hidden_check_names(autograder: Path, public_text: str = "") -> dict[str, Origin]:
    """The pytest name and the title of every check that is not visible (read from the source, never
    imported), less any that `public_text` (the releases) holds anyway, such as a test cell's id."""
    out: dict[str, Origin] = {}
    shown: set[str] = set()  # a visible check's names are public, even where another unit's hidden one shares them
    for py in sorted(autograder.rglob("test_*.py")):
        try:
            tree = ast.parse(py.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if not (isinstance(dec, ast.Call) and getattr(dec.func, "id", getattr(dec.func, "attr", "")) == "check"):
                    continue
                kw = {k.arg: k.value for k in dec.keywords}
                visibility = kw.get("visibility")
                visible = isinstance(visibility, ast.Constant) and visibility.value == "visible"
                title = kw.get("name")
                try:
                    text = ast.literal_eval(title) if title is not None else None
                except ValueError:
                    text = None
                if visible:
                    shown.update({node.name, text} - {None})
                    continue
                out[node.name] = Origin(str(py), f"def {node.name}")
                if isinstance(text, str) and len(text) >= 20:
                    out[text] = Origin(str(py), f"name={text!r}")
    return {k: v for k, v in out.items() if k not in shown and k not in public_text}


def collect(root: Path, published: Path | None = None) -> Secrets:
    """Everything secret in the course at `root` (its solutions/, autograder/ and assignments/).

    `published`: a folder of check files published on purpose (the student edition's visible checks, cut
    out of autograder/, and their fixtures): what they hold of autograder/ is public. What they hold of a
    solution cell stays secret, and so does every hidden check's name."""
    releases = root / "assignments"
    public = "\n".join(p.read_text(encoding="utf-8") for p in sorted(releases.glob("*/*.ipynb")))
    secrets = Secrets(lines=secret_lines(root / "solutions", root / "autograder"),
                      bytecode=secret_bytecode(root / "solutions", root / "autograder", releases),
                      names=hidden_check_names(root / "autograder", public))
    if published is not None:
        checks = str((root / "autograder").resolve())
        from_checks = lambda origin: str(Path(origin.path).resolve()).startswith(checks)  # noqa: E731
        for py in sorted(published.rglob("*.py")):
            text = py.read_text(encoding="utf-8")
            for line in text.splitlines():
                for key in {normalise(line), normalise(without_comment(line))}:
                    if key in secrets.lines and from_checks(secrets.lines[key]):
                        del secrets.lines[key]
            for fp in _functions(text, str(py)):
                if fp in secrets.bytecode and from_checks(secrets.bytecode[fp]):
                    del secrets.bytecode[fp]
    return secrets


# --- reading what a student receives ----------------------------------------------------------


def text_lines(name: str, raw: bytes) -> list[str]:
    """The lines a reader (or a scraper) can get from one file of text."""
    if b"\0" in raw[:4096]:
        return []  # images, fonts
    text = raw.decode("utf-8", errors="replace")
    if name.endswith(".ipynb"):
        try:
            nb = json.loads(text)
        except ValueError:
            return text.splitlines()
        lines = []
        for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
            lines += _cell_source(cell).splitlines()
            for out in cell.get("outputs", []):
                for value in [out.get("text", "")] + list(out.get("data", {}).values()):
                    lines += ("".join(value) if isinstance(value, list) else str(value)).splitlines()
        return lines
    if name.endswith((".html", ".htm", ".xml", ".svg")):
        # Block elements end a line as a browser shows it; inline markup
        # (Pygments' <span>s) disappears, entities become characters.
        text = re.sub(r"<(?:/?(?:p|div|pre|li|tr|td|th|h[1-6])\b|br)[^>]*>", "\n", text, flags=re.I)
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return text.splitlines()


def members(name: str, raw: bytes, depth: int = 0):
    """(path, bytes) of every file in `raw`, looking inside archives (a wheel in a tarball in a zip...)."""
    if depth > 4:
        yield name, raw
        return
    inner: list[tuple[str, bytes]] | None = None
    try:
        if name.endswith((".whl", ".zip")) or (raw[:4] == b"PK\x03\x04"):
            with zipfile.ZipFile(io.BytesIO(raw)) as z:
                inner = [(i.filename, z.read(i)) for i in z.infolist() if not i.is_dir()]
        elif name.endswith((".tar", ".tar.gz", ".tgz")):
            with tarfile.open(fileobj=io.BytesIO(raw)) as t:
                inner = [(m.name, t.extractfile(m).read()) for m in t.getmembers() if m.isfile()]
        elif name.endswith(".gz"):
            inner = [(name[:-3], gzip.decompress(raw))]
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError):
        inner = None
    if inner is None:
        yield name, raw
        return
    for sub, data in inner:
        yield from members(f"{name}!{sub}", data, depth + 1)


def _pyc_code(raw: bytes) -> types.CodeType | None:
    """The module code of a .pyc of this Python (16-byte header), or None."""
    try:
        code = marshal.loads(raw[16:])
    except (ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def find(folder: Path, secrets: Secrets, limit: int = 200) -> list[str]:
    """Every place in `folder` (or one file) that holds a secret, as readable findings."""
    paths = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    found: list[str] = []
    for path in paths:
        rel = path.name if folder.is_file() else str(path.relative_to(folder))
        for name, raw in members(rel, path.read_bytes()):
            found += _find_in(name, raw, secrets)
            if len(found) >= limit:
                return found
    return found


def _find_in(name: str, raw: bytes, secrets: Secrets) -> list[str]:
    found = []
    if name.endswith(".pyc"):
        code = _pyc_code(raw)
        if code is not None:
            for c in _code_objects(code):
                origin = None if c.co_name.startswith("<") else secrets.bytecode.get(fingerprint(c))
                if origin:
                    found.append(f"{name}: {c.co_qualname} is {origin.line} ({origin.path})")
                for const in c.co_consts:
                    if isinstance(const, str) and const in secrets.names:
                        found.append(f"{name}: the string {const[:80]!r} ({secrets.names[const].path})")
                for ident in c.co_names + (c.co_name,):
                    if ident in secrets.names:
                        found.append(f"{name}: the name {ident!r} ({secrets.names[ident].path})")
        return sorted(set(found))
    if name.endswith(".py") and secrets.bytecode:
        # a copied answer, however it is spaced or commented: the functions the file compiles to
        for fp, qualname in _functions(raw.decode("utf-8", errors="replace"), name).items():
            origin = secrets.bytecode.get(fp)
            if origin:
                found.append(f"{name}: {qualname} is {origin.line} ({origin.path})")
    lines = text_lines(name, raw) if secrets.lines or secrets.names else []
    for number, line in enumerate(lines, 1):
        norm = normalise(line)
        if len(norm) < MIN_CHARS:
            continue
        origin = secrets.lines.get(norm) or secrets.lines.get(normalise(without_comment(line)))
        if origin:
            found.append(f"{name}:{number}: {line.strip()[:100]!r} (from {origin.path})")
    if secrets.names and lines:
        text = "\n".join(lines)
        for secret, origin in secrets.names.items():
            if secret in text and re.search(rf"(?<![\w]){re.escape(secret)}(?![\w])", text):
                found.append(f"{name}: the hidden check {secret[:80]!r} ({origin.path})")
    return found
