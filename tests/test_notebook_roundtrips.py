"""Honest notebooks keep their marks, whatever the editor did to them (issue #13).

A fuzz corpus of structural round trips of each assignment's solution, as a
student's editor could hand them in: cell metadata dropped (per cell or all at
once), ids regenerated, answer cells split or merged at blank lines, CRLF line
endings, trailing whitespace, tabs in markdown, outputs of every type, scratch
cells, cells reordered where the order does not matter, duplicated answer
cells, Colab / VS Code metadata, older nbformat, jupytext ``.py`` and ``.md``.

Each round trip is *read and extracted* (what the grader does before it runs
anything): the student module must be equivalent to the honest notebook's
(same final definitions, same other statements: see :func:`signature`) and no
problem other than a warning may be reported (60 round trips per assignment:
each kind of change alone, then 25 combinations drawn by hypothesis). Only a
handful are graded end to end, since a full grade starts a worker and runs
every check: nine round trips of 01-ngrams (full marks), its release without
metadata (still 0), and 03-rnnlm without metadata (its training check left out).

The attacks against the matching by content are at the end of the file.
"""

from __future__ import annotations

import ast
import base64
import copy
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmcourse.instructor.release  # noqa: F401  (first: it makes importing nbformat fast)
from lmcourse.course import Course, load_release
from lmcourse.grading import notebook as nbmod
from lmcourse.grading import runner
from lmcourse.instructor.testing import released_notebook, submission_from_solution

import jupytext  # noqa: E402
import nbformat  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# 01-ngrams' total, from its release (the points its test cells carry)
NGRAMS_POINTS = sum(nbmod.graded_cells(load_release(ROOT, "01-ngrams")).values())
UNITS = tuple(Course(ROOT).assignment_ids())  # every unit: a new one joins the corpus by existing


# ----------------------------------------------------------------------------- notebooks as JSON


def src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_answer(cell) -> bool:
    return bool(nbg(cell).get("solution"))


def is_given_or_test(cell) -> bool:
    return bool(nbg(cell).get("locked") or nbg(cell).get("grade")) and not is_answer(cell)


def is_demo(cell) -> bool:
    return "demo" in cell.get("metadata", {}).get("tags", [])


def new_id(rng: random.Random) -> str:
    return "%08x" % rng.getrandbits(32)


def code_cell(source: str, rng: random.Random, metadata: dict | None = None) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": new_id(rng), "metadata": metadata or {},
            "outputs": [], "source": source}


def top_level_chunks(code: str) -> list[str]:
    """``code`` cut at blank lines before a top-level statement, each chunk valid Python on its own."""
    lines = code.split("\n")
    cuts = [i for i in range(1, len(lines))
            if lines[i - 1].strip() == "" and lines[i][:1] not in ("", " ", "\t", ")", "]", "}")]
    chunks, start = [], 0
    for cut in cuts:
        head = "\n".join(lines[start:cut]).strip("\n")
        try:
            ast.parse(head)
            ast.parse("\n".join(lines[cut:]))
        except SyntaxError:
            continue
        if head:
            chunks.append(head)
            start = cut
    chunks.append("\n".join(lines[start:]).strip("\n"))
    return [c for c in chunks if c.strip()]


# ----------------------------------------------------------------------------- the round trips
# Each takes the notebook as JSON (a dict) and a seeded Random, changes it in place and/or returns
# (text, suffix) for what is written to disk; None means: write the dict as .ipynb.


def as_is(nb, rng):
    return None


def string_sources(nb, rng):
    for c in nb["cells"]:
        c["source"] = src(c)


def nbgrader_metadata_removed(nb, rng):
    for c in nb["cells"]:
        for key in ("nbgrader", "deletable", "editable"):
            c["metadata"].pop(key, None)


def all_metadata_and_outputs_removed(nb, rng):
    for c in nb["cells"]:
        c["metadata"] = {}
        if c["cell_type"] == "code":
            c["outputs"], c["execution_count"] = [], None


def metadata_dropped_on_some_cells(nb, rng):
    cells = [c for c in nb["cells"] if c["metadata"]]
    for c in rng.sample(cells, k=min(len(cells), rng.randint(1, 4))):
        c["metadata"] = {}


def cell_ids_regenerated(nb, rng):
    for c in nb["cells"]:
        c["id"] = new_id(rng)


def nbformat_4_0_without_cell_ids(nb, rng):
    nb["nbformat_minor"] = 0
    for c in nb["cells"]:
        c.pop("id", None)


def grade_ids_renamed(nb, rng):
    for c in nb["cells"]:
        if nbg(c):
            c["metadata"]["nbgrader"]["grade_id"] = "cell-" + new_id(rng)


def nbgrader_checksums_and_points_edited(nb, rng):
    for c in nb["cells"]:
        meta = nbg(c)
        meta.pop("checksum", None)
        if "points" in meta:
            meta["points"] = 100


def crlf(nb, rng):
    for c in nb["cells"]:
        c["source"] = src(c).replace("\r\n", "\n").replace("\n", "\r\n")


def trailing_whitespace(nb, rng):
    """Blanks at the end of lines, where an editor leaves them: before a CRLF's CR. (After it, "\\r \\n" is two
    line breaks to Python, and inside a multi-line string that is an extra line, not trailing whitespace.)"""
    def ended(line: str, end: str) -> str:
        return line[:-1] + end + "\r" if line.endswith("\r") else line + end

    for c in nb["cells"]:
        lines = src(c).split("\n")
        ends = ["", " ", "  ", "\t"]
        c["source"] = "\n".join(ended(line, rng.choice(ends)) for line in lines) + rng.choice(["", "\n", "\n\n"])


def tabs_in_markdown(nb, rng):
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            c["source"] = "\n".join(("\t" + line[4:]) if line.startswith("    ") else line
                                    for line in src(c).split("\n")) + "\n\n\t\n"


OUTPUTS = [
    {"output_type": "stream", "name": "stdout", "text": ["hello\n", "world\n"]},
    {"output_type": "stream", "name": "stderr", "text": "a warning\r\n"},
    {"output_type": "execute_result", "execution_count": 3, "metadata": {},
     "data": {"text/plain": ["{'a': 1}"], "text/html": "<b>1</b>", "application/json": {"a": [1, 2]}}},
    {"output_type": "display_data", "metadata": {"image/png": {"width": 10}},
     "data": {"image/png": base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode(),
              "text/plain": "<Figure size 640x480 with 1 Axes>"}},
    {"output_type": "error", "ename": "NotImplementedError", "evalue": "",
     "traceback": ["\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
                   "\x1b[0;31mNotImplementedError\x1b[0m: "]},
    {"output_type": "stream", "name": "stdout", "text": "0123456789abcdef\n" * 40_000},  # 680 kB
]


def outputs_of_every_type(nb, rng):
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "code":
            c["outputs"] = [copy.deepcopy(o) for o in rng.sample(OUTPUTS, k=rng.randint(1, 3))]
            c["execution_count"] = i + 1


SCRATCH = [
    "print(len('scratch'))",
    "%time x = sum(range(10))\n!echo hi",
    "def my_helper(x):\n    return x + 1\n\nmy_helper(2)",
    "import numpy as np\nnp.arange(3)",
    "# an empty thought",
    "",
    "for i in range(3):\n    print(i)",
]


def scratch_cells_added(nb, rng):
    for _ in range(rng.randint(1, 5)):
        kind = rng.choice(["code", "code", "markdown", "raw"])
        if kind == "code":
            cell = code_cell(rng.choice(SCRATCH), rng)
        else:
            cell = {"cell_type": kind, "id": new_id(rng), "metadata": {}, "source": "my notes\n\n* a\n* b"}
        nb["cells"].insert(rng.randint(0, len(nb["cells"])), cell)


def _split_answers(nb, rng, metadata: str):
    out = []
    for c in nb["cells"]:
        pieces = top_level_chunks(src(c)) if is_answer(c) else []
        if len(pieces) < 2:
            out.append(c)
            continue
        for k, piece in enumerate(pieces):
            meta = copy.deepcopy(c["metadata"]) if metadata == "all" or (metadata == "first" and k == 0) else {}
            out.append(dict(code_cell(piece, rng, meta), source=piece))
    nb["cells"] = out


def answers_split_metadata_copied(nb, rng):
    _split_answers(nb, rng, "all")


def answers_split_metadata_on_first(nb, rng):
    _split_answers(nb, rng, "first")


def answers_split_no_metadata(nb, rng):
    """With the metadata gone, every code cell that defines something is split (given cells too)."""
    nbgrader_metadata_removed(nb, rng)
    out = []
    for c in nb["cells"]:
        pieces = top_level_chunks(src(c)) if c["cell_type"] == "code" and "def " in src(c) and not is_demo(c) else []
        out += [dict(code_cell(p, rng)) for p in pieces] if len(pieces) > 1 else [c]
    nb["cells"] = out


def _answer_positions(nb):
    return [i for i, c in enumerate(nb["cells"]) if is_answer(c)]


def answers_merged_keeping_first_metadata(nb, rng):
    """Two answer cells merged into the first (the merge of Jupyter: the first cell's metadata)."""
    pos = _answer_positions(nb)
    if len(pos) < 2:
        return None  # (after another change removed the metadata: nothing to recognise them by here)
    i = rng.randrange(len(pos) - 1)
    first, second = nb["cells"][pos[i]], nb["cells"][pos[i + 1]]
    first["source"] = src(first).rstrip("\n") + "\n\n\n" + src(second)
    nb["cells"].remove(second)


def answers_merged_no_metadata(nb, rng):
    pos = _answer_positions(nb)
    if len(pos) < 2:
        return None
    i = rng.randrange(len(pos) - 1)
    first, second = nb["cells"][pos[i]], nb["cells"][pos[i + 1]]
    merged = code_cell(src(first).rstrip("\n") + "\n\n" + src(second), rng)
    nb["cells"][pos[i]] = merged
    nb["cells"].remove(second)
    nbgrader_metadata_removed(nb, rng)


def reordered_with_metadata(nb, rng):
    """With nbgrader ids, the grader uses the release's order: any order of cells grades the same."""
    rng.shuffle(nb["cells"])


def reordered_where_order_does_not_matter(nb, rng):
    """Markdown, test and demo cells move; answer and given cells keep their order. No metadata at all."""
    movable = [i for i, c in enumerate(nb["cells"])
               if c["cell_type"] != "code" or is_demo(c) or nbg(c).get("grade")]
    moved = [nb["cells"][i] for i in movable]
    rng.shuffle(moved)
    for i, c in zip(movable, moved):
        nb["cells"][i] = c
    all_metadata_and_outputs_removed(nb, rng)


def demo_and_markdown_cells_deleted(nb, rng):
    nb["cells"] = [c for c in nb["cells"] if c["cell_type"] == "code" and not is_demo(c)]


def answer_cell_duplicated(nb, rng):
    if not _answer_positions(nb):
        return None
    i = rng.choice(_answer_positions(nb))
    twin = copy.deepcopy(nb["cells"][i])
    twin["id"] = new_id(rng)
    nb["cells"].insert(i + rng.choice([1, 2]), twin)


def answer_cell_duplicated_no_metadata(nb, rng):
    answer_cell_duplicated(nb, rng)
    all_metadata_and_outputs_removed(nb, rng)


def colab(nb, rng):
    nb["metadata"] = {"colab": {"provenance": [], "name": "01.ipynb", "collapsed_sections": []},
                      "kernelspec": {"name": "python3", "display_name": "Python 3"},
                      "language_info": {"name": "python"}, "accelerator": "GPU"}
    for c in nb["cells"]:
        c["metadata"]["id"] = new_id(rng)
        if c["cell_type"] == "code":
            c["metadata"]["colab"] = {"base_uri": "https://localhost:8080/", "height": 35}
            c["metadata"]["outputId"] = new_id(rng)


def vscode(nb, rng):
    nb["metadata"]["vscode"] = {"interpreter": {"hash": "ab" * 32}}
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            c["metadata"]["vscode"] = {"languageId": "python"}
            c["source"] = src(c).splitlines(keepends=True)


def other_kernelspec(nb, rng):
    nb["metadata"]["kernelspec"] = {"name": "conda-env-nlp-py", "display_name": "Python [conda env:nlp]",
                                    "language": "python"}
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.12.1"}


def windows(nb, rng):
    crlf(nb, rng)
    nbgrader_metadata_removed(nb, rng)
    return json.dumps(nb, indent=1).replace("\n", "\r\n"), ".ipynb"


def utf8_bom_and_ascii_json(nb, rng):
    return "\ufeff" + json.dumps(nb, ensure_ascii=True), ".ipynb"


def nbformat_v3(nb, rng):
    node = nbformat.reads(json.dumps(nb), as_version=4)
    return nbformat.writes(nbformat.convert(node, 3), version=3), ".ipynb"


def _jupytext(nb, fmt, filtered=False):
    node = nbformat.reads(json.dumps(nb), as_version=4)
    if filtered:
        node.metadata["jupytext"] = {"cell_metadata_filter": "-all", "notebook_metadata_filter": "-all"}
    return jupytext.writes(node, fmt=fmt)


def jupytext_py_percent(nb, rng):
    return _jupytext(nb, "py:percent"), ".py"


def jupytext_md(nb, rng):
    return _jupytext(nb, "md"), ".md"


def jupytext_py_without_metadata(nb, rng):
    return _jupytext(nb, "py:percent", filtered=True), ".py"


def jupytext_md_without_metadata(nb, rng):
    return _jupytext(nb, "md", filtered=True), ".md"


def jupytext_py_and_back_to_ipynb(nb, rng):
    back = jupytext.reads(_jupytext(nb, "py:percent"), fmt="py:percent")
    return nbformat.writes(back), ".ipynb"


SHAPES = {f.__name__: f for f in [
    as_is, string_sources, nbgrader_metadata_removed, all_metadata_and_outputs_removed,
    metadata_dropped_on_some_cells, cell_ids_regenerated, nbformat_4_0_without_cell_ids, grade_ids_renamed,
    nbgrader_checksums_and_points_edited, crlf, trailing_whitespace, tabs_in_markdown, outputs_of_every_type,
    scratch_cells_added, answers_split_metadata_copied, answers_split_metadata_on_first,
    answers_split_no_metadata, answers_merged_keeping_first_metadata, answers_merged_no_metadata,
    reordered_with_metadata, reordered_where_order_does_not_matter, demo_and_markdown_cells_deleted,
    answer_cell_duplicated, answer_cell_duplicated_no_metadata, colab, vscode, other_kernelspec, windows,
    utf8_bom_and_ascii_json, nbformat_v3, jupytext_py_percent, jupytext_md, jupytext_py_without_metadata,
    jupytext_md_without_metadata, jupytext_py_and_back_to_ipynb,
]}
# Changes that combine freely (the property-based test applies several in a row). The jupytext
# and file-level writers come last, once.
COMBINABLE = [
    "string_sources", "nbgrader_metadata_removed", "metadata_dropped_on_some_cells", "cell_ids_regenerated",
    "grade_ids_renamed", "nbgrader_checksums_and_points_edited", "crlf", "trailing_whitespace",
    "tabs_in_markdown", "outputs_of_every_type", "scratch_cells_added", "answers_split_metadata_on_first",
    "answers_merged_keeping_first_metadata", "answer_cell_duplicated", "colab", "vscode",
]
WRITERS = ["as_is", "windows", "utf8_bom_and_ascii_json", "nbformat_v3", "jupytext_py_percent", "jupytext_md",
           "jupytext_py_without_metadata", "jupytext_md_without_metadata"]


# ----------------------------------------------------------------------------- reading and comparing


_HONEST: dict[str, dict] = {}


def honest_json(aid: str) -> dict:
    """The honest notebook of ``aid`` as JSON (the solution typed into the release), a fresh copy."""
    if aid not in _HONEST:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path = submission_from_solution(ROOT, aid, Path(d))
            _HONEST[aid] = json.loads(path.read_text())
    return copy.deepcopy(_HONEST[aid])


def write_shape(aid: str, names: list[str], seed: int, dest: Path, base: dict | None = None) -> Path:
    """Apply the round trips ``names`` in order to the honest notebook of ``aid`` (or to ``base``);
    write the result to ``dest``; its path."""
    rng = random.Random(f"{aid}/{seed}/{'+'.join(names)}")
    nb = copy.deepcopy(base) if base is not None else honest_json(aid)
    out = None
    for name in names:
        out = SHAPES[name](nb, rng)
        if out is not None:
            break  # a writer: the last change
    text, suffix = out if out is not None else (json.dumps(nb, indent=1), ".ipynb")
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{aid}{suffix}"
    path.write_bytes(text.encode("utf-8"))
    return path


def extract(aid: str, path: Path) -> dict:
    """What the grader reads from ``path`` (runner._read_and_extract, here in this process)."""
    return runner._read_and_extract(path, load_release(ROOT, aid))


class _TrailingBlanks(ast.NodeTransformer):
    """Trailing whitespace inside a string literal (a docstring) is no change of code either."""

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            node.value = "\n".join(line.rstrip() for line in node.value.split("\n"))
        return node


def signature(source: str) -> tuple:
    """The module ``source`` up to what cannot change what it defines: (last definition of each
    top-level name, the other top-level statements in order). Comments, blank lines, the cells'
    header lines, a definition repeated and where a definition sits do not count."""
    defs, other = {}, []
    tree = _TrailingBlanks().visit(ast.parse(source))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = ast.dump(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # the module docstring
        else:
            other.append(ast.dump(node))
    return defs, other


def blocking(data: dict) -> list[dict]:
    return [p for p in data["problems"] if not p.get("warning")]


_SIGNATURES: dict[str, tuple] = {}


def honest_extraction(aid: str, tmp_path: Path) -> dict:
    return extract(aid, write_shape(aid, ["as_is"], 0, tmp_path / "honest"))


def honest_signature(aid: str, tmp_path: Path) -> tuple:
    if aid not in _SIGNATURES:
        data = honest_extraction(aid, tmp_path)
        assert data["problems"] == [] and data["blocked"] == {}
        _SIGNATURES[aid] = (signature(data["source"]), sorted(data["findings"]))
    return _SIGNATURES[aid]


def assert_like_honest(aid: str, data: dict, tmp_path: Path, what: str) -> None:
    assert blocking(data) == [], f"{what}: {blocking(data)}"
    assert data["blocked"] == {}, what
    for p in data["problems"]:
        assert "\n" not in p["message"] and p["status"] in WARNINGS, (what, p)
    sig, findings = honest_signature(aid, tmp_path)
    assert signature(data["source"]) == sig, f"{what}: the student module differs from the honest one"
    assert sorted(data["findings"]) == findings, what


WARNINGS = {"recovered-cells", "duplicate-cell", "missing-cell", "modified-cell"}


# ----------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("aid", UNITS)
def test_each_round_trip_extracts_the_honest_module(aid, shape, tmp_path):
    """35 kinds of change x 3 assignments: the module is the honest one, and nothing but warnings."""
    data = extract(aid, write_shape(aid, [shape], 0, tmp_path / shape))
    assert_like_honest(aid, data, tmp_path, shape)


@pytest.mark.parametrize("aid", UNITS)
def test_combined_round_trips_extract_the_honest_module(aid, tmp_path_factory):
    """Several changes in a row, then a way of saving (hypothesis, derandomized: the same 25 every run)."""
    tmp = tmp_path_factory.mktemp(f"combined-{aid}")
    seen = []

    @settings(max_examples=25, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(changes=st.lists(st.sampled_from(COMBINABLE), min_size=1, max_size=5, unique=True),
           writer=st.sampled_from(WRITERS), seed=st.integers(0, 2**16))
    def run(changes, writer, seed):
        names = changes + [writer]
        path = write_shape(aid, names, seed, tmp / f"{len(seen)}")
        seen.append(names)
        assert_like_honest(aid, extract(aid, path), tmp, "+".join(names) + f" (seed {seed})")

    run()
    assert len(seen) >= 20


def test_recovery_is_reported_as_one_warning(tmp_path):
    data = extract("01-ngrams", write_shape("01-ngrams", ["all_metadata_and_outputs_removed"], 0, tmp_path))
    assert [(p["status"], p["warning"]) for p in data["problems"]] == [("recovered-cells", True)]
    message = data["problems"][0]["message"]
    assert "cell metadata was missing" in message and "matched 6 answer cells by their function names" in message
    assert "9 given and test cells by their content" in message


# ----------------------------------------------------------------------------- graded end to end (01-ngrams)


GRADED = [
    ["all_metadata_and_outputs_removed"],
    ["crlf"],
    ["trailing_whitespace", "nbgrader_checksums_and_points_edited"],
    ["answers_split_no_metadata", "outputs_of_every_type"],
    ["answers_merged_no_metadata", "scratch_cells_added"],
    ["answer_cell_duplicated", "reordered_with_metadata"],
    ["windows"],
    ["jupytext_py_percent"],
    ["jupytext_md_without_metadata"],
]


@pytest.mark.parametrize("names", GRADED, ids="+".join)
def test_round_trips_keep_full_marks(names, tmp_path):
    r = runner.grade(ROOT, "01-ngrams", write_shape("01-ngrams", names, 0, tmp_path), tier="cpu")
    assert r["score"] == r["max_score"] == NGRAMS_POINTS, [t["output"] for t in r["tests"] if t["score"] < t["max_score"]]
    assert r["status"] == "ok" and r["message"] == "graded", r["message"]
    assert all(p["warning"] for p in r["problems"])


def test_edited_and_deleted_test_cells_cost_nothing(tmp_path):
    """The grader never runs test cells (their points come from trusted checks): editing one, or
    deleting one, neither blocks its checks nor earns anything. Warnings, status ok, full marks."""
    nb = honest_json("01-ngrams")
    tests = [c for c in nb["cells"] if nbg(c).get("grade")]
    tests[0]["source"] = "assert True  # I changed this"
    nb["cells"].remove(tests[1])
    path = tmp_path / "01-ngrams.ipynb"
    path.write_text(json.dumps(nb))
    r = runner.grade(ROOT, "01-ngrams", path, tier="cpu")
    assert r["score"] == r["max_score"] == NGRAMS_POINTS and r["status"] == "ok"
    got = {(p["status"], p["cell"], p["warning"]) for p in r["problems"]}
    assert got == {("modified-cell", nbg(tests[0])["grade_id"], True),
                   ("missing-cell", nbg(tests[1])["grade_id"], True)}
    assert r["cells"][nbg(tests[1])["grade_id"]]["score"] > 0


@pytest.mark.parametrize("names", [["all_metadata_and_outputs_removed"], ["jupytext_py_without_metadata"]],
                         ids="+".join)
def test_the_release_still_scores_zero_without_its_metadata(names, tmp_path):
    release = json.loads(released_notebook(ROOT, "01-ngrams", tmp_path / "release").read_text())
    r = runner.grade(ROOT, "01-ngrams", write_shape("01-ngrams", names, 0, tmp_path / "shape", base=release),
                     tier="cpu")
    assert r["score"] == 0 and r["max_score"] == NGRAMS_POINTS
    assert all("NotImplementedError" in t["output"] for t in r["tests"])


def test_rnnlm_without_metadata_keeps_full_marks_and_passes_the_source_rule(tmp_path):
    """03-rnnlm's checks that forbid built-in recurrent layers read the answer cells found by content."""
    from test_unit03_rnnlm import TRAINING

    path = write_shape("03-rnnlm", ["all_metadata_and_outputs_removed", "answers_split_no_metadata"], 0, tmp_path)
    r = runner.grade(ROOT, "03-rnnlm", path, tier="cpu", exclude={TRAINING})
    assert r["score"] == r["max_score"] > 0 and r["not_run"] == 1, \
        [t["output"] for t in r["tests"] if t["score"] < t["max_score"]]
    assert r["status"] == "ok" and all(p["warning"] for p in r["problems"])


# ----------------------------------------------------------------------------- attacks on the matching


def edited(aid: str, tmp_path: Path, change, strip_metadata: bool = False, name: str | None = None) -> Path:
    """The honest notebook of ``aid`` with ``change(cells)`` applied (and all metadata dropped, if asked)."""
    nb = honest_json(aid)
    for c in nb["cells"]:
        c["source"] = src(c)
    change(nb["cells"])
    if strip_metadata:
        for c in nb["cells"]:
            c["metadata"] = {}
    path = tmp_path / (name or f"{aid}.ipynb")
    path.write_text(json.dumps(nb))
    return path


def by_id(cells, gid):
    return next(c for c in cells if nbg(c).get("grade_id") == gid)


def final_defs(source: str) -> dict[str, str]:
    return signature(source)[0]


WRONG_BUILD_MODEL = "def build_model(sentences, vocab, n):\n    return {'cheat': True}\n"
WRONG_COUNTS = "def ngram_counts(sentences, n):\n    return {'wrong': 1}\n"


@pytest.mark.parametrize("strip", [False, True], ids=["with-metadata", "metadata-dropped"])
def test_a_cell_that_claims_to_be_given_code_cannot_replace_it(tmp_path, strip):
    """A copy of a given cell with one more definition is no given cell: given code always comes from
    the release, and a definition of given code in a student cell never reaches the module (it is not
    an answer's name)."""
    def change(cells):
        given = by_id(cells, "build_model")
        cells.insert(cells.index(given) + 1, code_cell(src(given) + "\n\n" + WRONG_BUILD_MODEL, random.Random(1)))
        setup = by_id(cells, "setup")
        cells.insert(cells.index(setup) + 1, code_cell(src(setup) + "\nnp.allclose = lambda *a, **k: True",
                                                       random.Random(2)))

    data = extract("01-ngrams", edited("01-ngrams", tmp_path, change, strip))
    honest = honest_extraction("01-ngrams", tmp_path)
    assert final_defs(data["source"])["build_model"] == final_defs(honest["source"])["build_model"]
    assert "cheat" not in data["source"] and "np.allclose = lambda" not in data["source"]
    assert blocking(data) == []


def test_an_answer_cell_cannot_replace_given_code_the_release_places_after_it(tmp_path):
    """Found by content, an answer cell sits in the place of its answer: the given `build_model`,
    which the release places after `ngram_counts`, still wins over a redefinition in that cell."""
    def change(cells):
        answer = by_id(cells, "ngram_counts")
        answer["source"] = src(answer) + "\n\n" + WRONG_BUILD_MODEL

    data = extract("01-ngrams", edited("01-ngrams", tmp_path, change, strip_metadata=True))
    honest = honest_extraction("01-ngrams", tmp_path)
    assert final_defs(data["source"])["build_model"] == final_defs(honest["source"])["build_model"]
    assert "cheat" in data["source"]  # it is there, and then replaced by the given code


@pytest.mark.parametrize("strip", [False, True], ids=["with-metadata", "tag-only"])
def test_an_answer_moved_into_a_demo_cell_is_not_graded(tmp_path, strip):
    """The answer cell deleted, its code written into a demo cell: a cell tagged `demo` is never an
    answer, whatever else its metadata says."""
    def change(cells):
        answer = by_id(cells, "vocabulary")
        demo = next(c for c in cells[cells.index(answer):] if is_demo(c))
        demo["source"] = src(answer) + "\n\n" + src(demo)
        cells.remove(answer)
        if strip:
            demo["metadata"] = {"tags": ["demo"]}  # the tag is what marks it

    data = extract("01-ngrams", edited("01-ngrams", tmp_path, change))
    assert ("missing-cell", "vocabulary", False) in {(p["status"], p["cell"], p["warning"]) for p in data["problems"]}
    assert "tokenize_lines" not in final_defs(data["source"])


@pytest.mark.parametrize("strip", [False, True], ids=["with-metadata", "metadata-dropped"])
@pytest.mark.parametrize("order", ["wrong-then-right", "right-then-wrong"])
def test_two_answers_to_one_function_the_last_one_wins(tmp_path, strip, order):
    def change(cells):
        answer = by_id(cells, "ngram_counts")
        twin = copy.deepcopy(answer)
        twin["id"] = "twin"
        twin["source"] = src(answer) + "\n\n" + WRONG_COUNTS  # the whole cell again, one function wrong
        # a copy of the answer cell, before it or after it
        cells.insert(cells.index(answer) + (0 if order == "wrong-then-right" else 1), twin)

    data = extract("01-ngrams", edited("01-ngrams", tmp_path, change, strip))
    counts = final_defs(data["source"])["ngram_counts"]
    assert ("'wrong'" in counts) == (order == "right-then-wrong")
    assert blocking(data) == []
    assert any(p["status"] == "duplicate-cell" and "ngram_counts" in p["message"] and "last definition wins"
               in p["message"] and p["warning"] for p in data["problems"])


def test_ids_win_over_content(tmp_path):
    """With the answer cell's id present and complete, a scratch cell that redefines one of its
    functions (after it, as in a kernel session) is not graded: only missing functions are looked for."""
    def change(cells):
        answer = by_id(cells, "ngram_counts")
        cells.insert(cells.index(answer) + 1, code_cell(WRONG_COUNTS, random.Random(3)))

    data = extract("01-ngrams", edited("01-ngrams", tmp_path, change))
    assert "'wrong'" not in final_defs(data["source"])["ngram_counts"] and data["problems"] == []


def test_the_source_rule_reads_answer_cells_found_by_content(tmp_path):
    """03-rnnlm: built-in recurrent layers are refused in answer cells found by content too, wherever the
    student put them: a cell without metadata, or a cell still labelled as the given setup cell."""
    cheat = ("class ElmanCell(nn.Module):\n    def __init__(self, d_in, d_hidden):\n        super().__init__()\n"
             "        self.cell = nn.RNNCell(d_in, d_hidden)\n\n    def forward(self, x, h):\n"
             "        return self.cell(x, h)\n")

    def no_metadata(cells):
        answer = by_id(cells, "elman")
        answer["source"] = src(answer) + "\n\n" + cheat

    def in_the_setup_cell(cells):
        answer, setup = by_id(cells, "elman"), by_id(cells, "setup")
        setup["source"] = src(setup) + "\n\n" + src(answer) + "\n\n" + cheat
        cells.remove(answer)

    for change, strip in [(no_metadata, True), (in_the_setup_cell, False)]:
        data = extract("03-rnnlm", edited("03-rnnlm", tmp_path, change, strip, name=f"{change.__name__}.ipynb"))
        assert ".RNNCell" in data["findings"], change.__name__
        assert {gid for gid, _ in data["findings"][".RNNCell"]} == {"elman"}, change.__name__
        assert "self.cell = nn.RNNCell" in data["source"]


def test_a_test_cell_is_never_run_whatever_it_holds(tmp_path):
    """A cell that keeps a test cell's id never reaches the module, even when the answer cell is gone
    and the test cell defines the answer's function. (With every id gone a cell is known by its content
    only: a cell that defines an answer's function is then that answer, as in the student's kernel.)"""
    def change(cells):
        test = by_id(cells, "test_ngram_counts")
        test["source"] = src(test) + "\n\n" + WRONG_COUNTS + "\nimport os\nos.system('echo pwned')\n"

    def and_no_answer_cell(cells):
        change(cells)
        cells.remove(by_id(cells, "ngram_counts"))

    for how in (change, and_no_answer_cell):
        data = extract("01-ngrams", edited("01-ngrams", tmp_path, how, name=f"{how.__name__}.ipynb"))
        assert "pwned" not in data["source"] and "'wrong'" not in data["source"], how.__name__
    data = extract("01-ngrams", edited("01-ngrams", tmp_path, change, strip_metadata=True))
    assert "'wrong'" in final_defs(data["source"])["ngram_counts"]  # the last definition, the student's own
    assert {gid for first, last, gid in data["line_map"] if "pwned" in "\n".join(
        data["source"].splitlines()[first - 1:last])} == {"ngram_counts"}  # an answer cell: the rules read it


def test_many_cells_that_look_like_given_code_are_cheap_to_read(tmp_path):
    """Matching by content stays linear: 20,000 cells holding the first line of the given setup cell."""
    import time

    def change(cells):
        first = src(by_id(cells, "setup")).splitlines()[0]
        cells += [code_cell(first, random.Random(i)) for i in range(20_000)]

    path = edited("01-ngrams", tmp_path, change, strip_metadata=True)
    started = time.process_time()
    data = extract("01-ngrams", path)
    assert time.process_time() - started < 20
    assert blocking(data) == []


@pytest.mark.parametrize("text, suffix", [
    ("# ---\n# jupyter:\n#   a: &a [*a]\n# ---\n\n# %%\nx = 1\n", ".py"),   # a header that refers to itself
    ("---\njupyter: [unclosed\n---\n\nhello\n", ".md"),
    ("---\njupyter:\n  k: !!python/object/apply:os.system ['echo pwned']\n---\n", ".md"),  # safe YAML only
])
def test_broken_text_notebooks_get_a_status(tmp_path, text, suffix):
    path = tmp_path / f"nb{suffix}"
    path.write_text(text)
    try:
        nb = nbmod.read_notebook(path)
    except nbmod.NotebookError as err:
        assert err.status == "invalid-notebook" and path.name in err.message and "\n" not in err.message
    else:
        assert isinstance(nb.cells, list)


def test_reading_text_notebooks_leaves_jupytext_whole():
    """notebook.py imports jupytext without its Jupyter-server contents managers (a fifth of a second
    per grading process); a later import of those modules still works."""
    pytest.importorskip("jupyter_server")
    import importlib

    assert nbmod.jupytext is not None
    module = importlib.import_module("jupytext.sync_contentsmanager")
    assert hasattr(module, "build_sync_jupytext_contents_manager_class")


def test_a_batch_grades_jupytext_exports_like_notebooks(tmp_path):
    """`<student>.py` and nbgrader's `<student>/<id>/<id>.md`: full marks; a README beside them is no student."""
    import csv
    import os
    import subprocess
    import sys

    fixture, aid = Path(__file__).resolve().parent / "fixtures" / "course", "00-fixture"
    subs = tmp_path / "subs"
    honest = submission_from_solution(fixture, aid, tmp_path / "honest")
    nb = jupytext.read(honest)
    subs.mkdir()
    jupytext.write(nb, subs / "alice.py", fmt="py:percent")
    (subs / "bob" / aid).mkdir(parents=True)
    jupytext.write(nb, subs / "bob" / aid / f"{aid}.md", fmt="md")
    (subs / "README.md").write_text("# Submissions of week 3\n")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    run = subprocess.run([sys.executable, "-m", "lmcourse.cli", "grade", aid, str(subs), "--out", str(tmp_path / "out"),
                          "--course", str(fixture), "--no-progress"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["student_id"]: r for r in csv.DictReader((tmp_path / "out" / "grades.csv").open())}
    assert set(rows) == {"alice", "bob"} and "skipped README.md" in run.stdout
    assert rows["alice"]["score"] == rows["bob"]["score"] == "6" and rows["alice"]["status"] == "ok"
