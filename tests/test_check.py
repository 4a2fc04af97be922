"""`lmcourse check`: the feedback a student gets before submitting (issue 14).

- Readiness counts down: each unit's release, filled part by part from the
  solution; the functions left to write fall to zero at every part, the
  notebook's own test cells that pass rise to all (checked at the release,
  halfway and finished), and only the finished notebook is "ready" (exit 0).
- Visible coverage: every function or class a student writes is exercised by
  a visible check or a visible test cell of the notebook.
- The notebook of another assignment is named as such; an error in an answer
  cell's top-level code is located in that cell; a name that only a demo cell
  defines is pointed out; the release's path is given where a cell must be
  copied back.
- Without bubblewrap the check still runs and says so in one line.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import nbformat
import pytest

from lmcourse.course import Course, load_release, load_source
from lmcourse.cli import main as cli_main
from lmcourse.grading import notebook as nbmod
from lmcourse.grading import runner, sandbox
from lmcourse.grading.sandbox.inside import probes
from lmcourse.grading.report import check_text, readiness
from lmcourse.instructor import testing
from lmcourse.instructor.testing import released_notebook, submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
UNITS = Course(ROOT).assignment_ids()  # every unit, 4-7 included as they land


def check(aid: str, nb: Path) -> dict:
    """What `lmcourse check AID NB` computes (the CLI prints `check_text` of it)."""
    return runner.grade(ROOT, aid, nb, tier="cpu", visible_only=True, test_cells=True, own_machine=True)


def filled(aid: str, tmp_path: Path, parts: int) -> Path:
    """The release with its first `parts` answer cells holding the solution, the others untouched."""
    solution = nbformat.read(submission_from_solution(ROOT, aid, tmp_path / "solution"), 4)
    release = nbformat.read(released_notebook(ROOT, aid, tmp_path / "release"), 4)
    answers = {nbmod.grade_id(c): c.source for c in solution.cells if nbmod.role(c) == "solution"}
    k = 0
    for cell in release.cells:
        if nbmod.role(cell) == "solution":
            k += 1
            if k <= parts:
                cell.source = answers[nbmod.grade_id(cell)]
    path = tmp_path / f"{aid}-{parts}.ipynb"
    nbformat.write(release, path)
    return path


def answer_cells(aid: str) -> list[str]:
    return [nbmod.grade_id(c) for c in load_release(ROOT, aid).cells if nbmod.role(c) == "solution"]


@pytest.mark.slow
@pytest.mark.parametrize("aid", UNITS)
def test_readiness_counts_down_to_ready(aid, tmp_path):
    """The functions left to write are read off the notebook without running it (nbgrader's cells,
    parsed), so the countdown is followed at every part; the sandboxed check, which runs the visible
    checks and test cells, is run on the release, halfway and finished (every part of it costs a
    sandbox, and 08's loads SmolLM2 each time: 107 s for its ten steps on a CI core)."""
    release = load_release(ROOT, aid)
    n = len(answer_cells(aid))
    todo, passing = [], []
    for parts in range(n + 1):
        nb = filled(aid, tmp_path, parts)
        left = nbmod.readiness(nbmod.check_and_extract(nbformat.read(nb, 4), release).source, release)
        todo.append(len(left["missing"]) + len(left["unimplemented"]))
        if parts not in (0, n // 2, n):
            continue
        result = check(aid, nb)
        r = readiness(result)
        text = check_text(result, "nb.ipynb")
        assert len(r["todo"]) == todo[-1], (r["todo"], left)  # the report's list is the one counted here
        passing.append(r["cells"][0])
        assert r["cells"][1] == len(nbmod.graded_cells(release))
        if parts < n:
            assert not r["ready"] and "not ready to submit yet" in text, text
            assert f"hidden checks worth {r['hidden_points']:g} points" in text
        else:
            failing = [c for c in result["test_cells"] if not c["passed"]]
            assert r["ready"] and "ready to submit" in text and not failing, text
    # every part done takes at least one function off the list, and no test cell passes less
    assert all(a > b for a, b in zip(todo, todo[1:])), todo
    assert todo[0] == len(nbmod.readiness(nbmod.check_and_extract(*[release] * 2).source,
                                          release)["unimplemented"]) and todo[-1] == 0
    assert passing[0] == 0 and all(a <= b for a, b in zip(passing, passing[1:])) and passing[-1] > passing[0]


def _names_used(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def uncovered(release, visible_functions: set[str]) -> list[str]:
    """The student's functions and classes (the release's stubs) that no visible check calls and no
    visible test cell names."""
    stubs = [name for _, name in nbmod.readiness(nbmod.check_and_extract(release, release).source,
                                                 release)["unimplemented"]]
    in_cells = set()
    for cell in release.cells:
        if nbmod.role(cell) == "test":
            in_cells |= _names_used(nbmod.comment_magics(nbmod.cell_source(cell)))
    return [name for name in stubs if name not in in_cells and name not in visible_functions]


@pytest.mark.parametrize("aid", UNITS)
def test_every_graded_function_has_visible_coverage(aid, tmp_path):
    release = load_release(ROOT, aid)
    result = runner.grade(ROOT, aid, released_notebook(ROOT, aid, tmp_path), visible_only=True)
    visible = {t["function"] for t in result["tests"] if t["visibility"] == "visible" and t.get("function")}
    assert not uncovered(release, visible), f"{aid}: no visible check or test cell exercises {uncovered(release, visible)}"


def test_the_coverage_test_fails_when_a_function_has_no_visible_check():
    release = load_release(ROOT, "02-word2vec")
    release.cells = [c for c in release.cells if nbmod.grade_id(c) != "test_analogy"]
    assert uncovered(release, set()) == ["analogy"]


def test_another_assignments_notebook_is_named(tmp_path):
    nb = released_notebook(ROOT, "02-word2vec", tmp_path)
    result = check("03-rnnlm", nb)
    assert result["status"] == "wrong-assignment" and result["score"] == 0
    assert "looks like assignment 02-word2vec" in result["message"]
    text = check_text(result, nb)
    assert "lmcourse check 02-word2vec" in text and "missing-cell" not in text and len(text.splitlines()) < 8
    # the right assignment is never told it is another one, however unfinished
    assert not any(p["status"] == "wrong-assignment" for p in check("02-word2vec", nb)["problems"])


def test_error_in_answer_cell_code_is_located_and_a_demo_only_name_pointed_out(tmp_path):
    nb = submission_from_solution(ROOT, "02-word2vec", tmp_path)
    notebook = nbformat.read(nb, 4)
    (cell,) = [c for c in notebook.cells if nbmod.grade_id(c) == "skipgram_pairs"]
    cell.source += "\n\nexample = skipgram_pairs(sentences[:2], 2)  # `sentences`: the demo cell's corpus\n"
    line = len(cell.source.rstrip("\n").splitlines())
    nbformat.write(notebook, nb)
    result = check("02-word2vec", nb)
    assert result["status"] == "import-error"
    text = check_text(result, nb)
    assert f"line {line} of cell 'skipgram_pairs', in <module>" in text, text
    assert "of cell 'setup'" not in text  # never located twice
    assert "'sentences' is defined only in a demo cell" in text
    assert text.count("'sentences' is defined only") == 1  # the shared error is shown once


def test_name_cell_is_idempotent():
    ext = nbmod.Extraction("", line_map=[(3, 40, "setup"), (43, 80, "skipgram_pairs")])
    once = runner._name_cell("line 75, in <module>", ext)
    assert once == "line 33 of cell 'skipgram_pairs', in <module>"
    assert runner._name_cell(once, ext) == once


def test_missing_cell_names_the_release_path(tmp_path):
    nb = submission_from_solution(ROOT, "01-ngrams", tmp_path)
    notebook = nbformat.read(nb, 4)
    notebook.cells = [c for c in notebook.cells if nbmod.grade_id(c) != "perplexity"]
    nbformat.write(notebook, nb)
    result = check("01-ngrams", nb)
    (problem,) = [p for p in result["problems"] if p["cell"] == "perplexity"]
    assert "assignments/01-ngrams/01-ngrams.ipynb" in problem["message"]
    assert ["perplexity", "sentence_probs"] in result["readiness"]["missing"]
    assert "sentence_probs (missing: copy its cell back)" in check_text(result, nb)


def test_a_failing_test_cell_names_its_line_and_statement_without_solution_code(tmp_path):
    wrong = "def cosine_similarity(A, B):\n    return A @ B.T  # not normalised\n"
    nb = submission_from_solution(ROOT, "02-word2vec", tmp_path, replace={"cosine_similarity": wrong})
    result = check("02-word2vec", nb)
    (cell,) = [c for c in result["test_cells"] if c["cell"] == "test_similarity"]
    assert not cell["passed"] and cell["error"]["type"] == "AssertionError" and cell["error"]["line"]
    assert "cosine_similarity(A, B)" in cell["error"]["statement"]
    assert not readiness(result)["ready"]
    text = check_text(result, nb)
    assert "test cell 'test_similarity'" in text and "0x" not in text
    solution = nbmod.strip_markers(next(nbmod.cell_source(c) for c in load_source(ROOT, "02-word2vec").cells
                                        if nbmod.grade_id(c) == "similarity"))
    body = [ln.strip() for ln in solution.splitlines() if ln.strip() and not ln.strip().startswith(("#", "def ", '"'))]
    assert not [ln for ln in body if len(ln) > 20 and ln in text]  # no line of the solution's code


def test_check_runs_without_bubblewrap_and_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sandbox.plan._CACHE, "bwrap", (False, "bubblewrap (bwrap) is not installed"))
    nb = submission_from_solution(ROOT, "01-ngrams", tmp_path)
    rc = cli_main(["check", "01-ngrams", str(nb)])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("isolation:")]
    assert len(lines) == 1 and lines[0].startswith("isolation: partial (") and "bubblewrap" in lines[0], lines
    assert "ready to submit" in out and rc == 0, out
    rc = cli_main(["check", "-v", "01-ngrams", str(nb)])
    verbose = capsys.readouterr().out
    assert "bubblewrap (bwrap) is not installed" in verbose or "isolation turned off" in verbose


def test_check_is_quiet_about_isolation_by_default(tmp_path, capsys):
    nb = released_notebook(ROOT, "01-ngrams", tmp_path)
    rc = cli_main(["check", "01-ngrams", str(nb)])
    out = capsys.readouterr().out
    assert rc == 1 and "not ready to submit yet" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("isolation:")]
    assert "seccomp" not in line and "namespace" not in line and len(line) < 140
    assert re.search(r"to do: 13 functions", out)


def test_graded_feedback_lists_what_is_not_written_as_the_check_does(tmp_path):
    from lmcourse.grading.report import feedback_html, todo_text

    nb = filled("02-word2vec", tmp_path, len(answer_cells("02-word2vec")) - 1)  # Part 7 left undone
    result = runner.grade(ROOT, "02-word2vec", nb, tier="cpu")
    todo = readiness(result)["todo"]
    assert [name for _, name, _ in todo] == ["cosine_similarity", "nearest_neighbours", "analogy"]
    assert "Not written yet: Part 7: cosine_similarity, nearest_neighbours, analogy." in result["output"]
    assert todo_text(todo) in feedback_html(result, "student")
    assert todo_text(todo) in check_text(result, nb)


@pytest.mark.parametrize("aid", UNITS)
def test_every_assertion_of_a_visible_test_cell_says_what_is_wrong(aid):
    """A bare ``assert`` shows the student only "AssertionError": each one carries a message."""
    bare = []
    for cell in load_release(ROOT, aid).cells:
        if nbmod.role(cell) == "test":
            tree = ast.parse(nbmod.comment_magics(nbmod.cell_source(cell)))
            bare += [f"{nbmod.grade_id(cell)} line {n.lineno}" for n in ast.walk(tree)
                     if isinstance(n, ast.Assert) and n.msg is None]
    assert not bare, f"{aid}: assertions without a message: {bare}"


# Known-wrong variants that only a hidden check can catch, and why.
NOT_VISIBLE = {
    # the pattern of the visible training cell is learnt either way (0.10 vs 0.06 nats): any visible
    # threshold between them would fail honest students who initialise in another order
    "gradients never zeroed between steps",
    # 02-word2vec's training behaviours that show only on a hidden corpus built for each: the visible
    # cell's clusters come out the same for W_t + W_c (its corpus has no word whose contexts are all
    # another's), and with subsampling ignored (the cell trains with sample=0)
    "train_sgns returns W_t + W_c",
    "train_sgns ignores sample (no subsampling)",
    # ... and the schedule, noise and optimiser variants, which show only on the hidden corpora built for each
    # (the visible cell trains 3 epochs with sample=0 at word2vec's lr)
    "train_sgns: noise distribution from the counts after subsampling (each epoch's kept words)",
    "train_sgns: noise distribution from the expected counts after subsampling (counts * keep)",
    "train_sgns: learning rate restarts from lr at every epoch",
    "train_sgns: SparseAdam instead of plain SGD (the autograd trainer)",
    # 03-rnnlm's device variants: a tensor made without device= is on the CPU, like everything else in a
    # visible cell run on the student's CPU; only the hidden checks' fake second device shows the mix
    "Elman zero state made with the input's dtype but no device (on the CPU)",
    "LSTM zero states made with the input's dtype but no device (on the CPU)",
    "RNNLM makes the zero state itself, with the weights' dtype but no device",
    # 07-gpt's causal mask made without device=: on a student's CPU it is where everything else is
    "causal mask made on the CPU",
    # 04's and 05's tensors made on, or sent to, the CPU (and 05's detour through NumPy): invisible where
    # everything is on the CPU; the hidden checks run them as on a GPU
    "key_padding_mask's positions made on the CPU",
    "greedy_decode's <BOS> column made on the CPU",
    "greedy_decode returns its tokens on the CPU",
    "greedy_decode returns its tokens through NumPy",
    "mask_tokens makes its special ids on the CPU",
    "mask_tokens draws with a CPU generator on the ids' device",
    "mask_tokens leaves its draws on the CPU",
    "top_k_filter fills with a tensor of -inf made on the CPU",
    "generate appends each new token on the CPU",
    "apply_rope's frequencies made on the CPU",
    "apply_rope's frequencies from a Python list",
    # 07-gpt's visible training cell learns its repeating pattern with gradients that pile up too (a loss below
    # 0.3 either way); the hidden run on Shakespeare fails it (2.31 against the threshold 2.08)
    "train_gpt never zeroes the gradients",
    # 03-rnnlm's optimiser (issue #40, class 2): the visible cells' patterns are learnt with either; the hidden
    # step-by-step check follows Adam's updates
    "train_lm makes a new Adam every step",
    "train_lm ignores its lr argument",
    # 08-capstone's sampling (issue #40, class 8): the visible cells generate greedily; the hidden check samples
    "generate samples with torch's global generator, not the one given",
    "generate applies the temperature after the softmax",
    # 07's visible cells generate within the context; the hidden check follows the model's calls past it
    "generate crops to the oldest block_size tokens",
    # 08's visible cells build every model with the default eps; the hidden check builds one with another
    "Llama's final norm built without the model's eps",
    # 08's visible chat cell has no message with whitespace around it; the hidden conversations do
    "chat_prompt strips each message",
    # 06's training loops (issue #40, class 9): the visible cell's toy language is learnt with each of these; the
    # hidden step-by-step checks trace the mask, the optimiser, its groups and the clipping
    "pretrain_mlm runs the encoder without the padding mask",
    "pretrain_mlm with Adam's L2 weight decay, not AdamW",
    "fine_tune trains the encoder and the head at one rate",
    "fine_tune freezes the pretrained encoder",
    "pretrain_mlm without gradient clipping",
    "fine_tune without gradient clipping",
    "fine_tune without the warm-up",
}


# Variants no test cell can see but a visible check can: `lmcourse check` runs it and shows its message
# before the student submits. 04-attention's training loop, followed step by step on a tiny model: the
# visible cell's 150 steps on strings of 2-4 digits reach the same accuracy with each of these.
CAUGHT_BY_A_VISIBLE_CHECK = {
    "loss averaged over the padding too",
    "gradients never clipped",
    "clipping before backward()",
    "gradients never zeroed",
    # 05-transformer's loop, followed the same way: the visible cell's 120 steps reach half the characters
    # without a warm-up or clipping too
    "no warm-up",
    "train_transformer: gradients never clipped",
    # 07-gpt's loop, followed the same way (a visible check): the visible cell's 80 steps learn the pattern anyway
    "train_gpt without the warm-up (cosine from the first step)",
    "train_gpt never clips the gradients",
    "train_gpt's schedule one step late",
    # 04's causal_mask is checked on the device it is given by a visible check
    "causal_mask ignores its device argument",
    # the optimisers of 04, 05 and 07 (issue #40, class 2), followed step by step by their visible checks
    "train_reverser makes a new Adam every step",
    "train_reverser ignores its lr argument",
    "train_transformer with Adam's default betas and eps",
    "train_transformer ignores its lr argument",
    "train_gpt with Adam's L2 weight decay, not AdamW's",
    "train_gpt with AdamW's default betas",
    "train_gpt ignores its weight_decay argument",
    # 07's batches drawn from torch's global generator: its visible step-by-step check compares them with the
    # seeded generator's
    "train_gpt draws its batches from torch's global generator",
    # 08's pre-tokenizer with its steps swapped: a visible check's texts hold whitespace runs before numbers
    "GPT-2's pattern first, then the digits split out",
}


def _run_cells_locally(aid: str, tmp_path: Path, replace: dict, first_only: bool = False) -> list[str]:
    """The test cells that fail when the solution, with `replace` swapped in, runs them in this process
    (the very probe `lmcourse check` runs in the worker, without the sandbox: the variants are ours).

    first_only: stop at the first failing cell. A variant that some cell must catch needs only one, and
    the cells after it include the training cells, the slowest (about 25 s of 04's 30 s a variant)."""
    import types

    nb = submission_from_solution(ROOT, aid, tmp_path, replace=replace)
    release = load_release(ROOT, aid)
    source = nbmod.check_and_extract(nbmod.read_notebook(nb), release).source
    module = types.ModuleType(f"variant_{aid.replace('-', '_')}")
    module.__file__ = str(tmp_path / "variant.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    failing = []
    for cell in release.cells:
        if nbmod.role(cell) == "test":
            out = probes.run_local("run_test_cell", module, source=nbmod.comment_magics(nbmod.cell_source(cell)),
                                   cell=nbmod.grade_id(cell))
            if not out["passed"]:
                failing.append(nbmod.grade_id(cell))
                if first_only:
                    break
    return failing


def _variants():
    import importlib

    out = []
    for aid in UNITS:
        try:
            unit = importlib.import_module(f"test_unit{aid.replace('-', '_')}")
        except ImportError:
            continue
        out += [(aid, name) for name in getattr(unit, "VARIANTS", {})]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("aid,variant", _variants())
def test_known_wrong_variant_fails_a_visible_test_cell(aid, variant, tmp_path):
    """What students really get wrong (each unit's known-wrong variants) shows before they submit."""
    import importlib

    function, source, _ = importlib.import_module(f"test_unit{aid.replace('-', '_')}").VARIANTS[variant]
    if variant in CAUGHT_BY_A_VISIBLE_CHECK:
        # no test cell catches these (a loop's gradients, its schedule); a visible check does, which
        # `lmcourse check` runs. The unit's contract grades the variant through the grader and proves that each
        # check it names scores 0 with a message (test_known_wrong_variant_is_caught); here, that one of them
        # is visible. (Grading it again with the visible checks alone cost about 4 s a variant.)
        catchers = importlib.import_module(f"test_unit{aid.replace('-', '_')}").VARIANTS[variant][2]
        failing = sorted(set(catchers) & _visible_check_names(aid))
    else:
        # a variant expected to show stops at its first failing cell; one on NOT_VISIBLE runs every cell
        failing = _run_cells_locally(aid, tmp_path, {function: source}, first_only=variant not in NOT_VISIBLE)
    if variant in NOT_VISIBLE:
        assert not failing, f"{variant!r} is now caught by {failing}: take it off NOT_VISIBLE"
    else:
        assert failing, f"{aid}: no visible test cell fails for the known-wrong variant {variant!r}"


@functools.cache
def _visible_check_names(aid: str) -> frozenset[str]:
    """The names of `aid`'s visible checks (those `lmcourse check` runs), read from their decorators."""
    return frozenset(info.name for info in testing.check_infos(ROOT, aid) if info.visibility == "visible")


def test_the_solution_passes_every_test_cell_in_process(tmp_path):
    for aid in UNITS:
        assert _run_cells_locally(aid, tmp_path / aid, {}) == [], aid


def test_a_looping_function_times_its_test_cells_out_and_the_check_goes_on(tmp_path):
    nb = submission_from_solution(ROOT, "01-ngrams", tmp_path,
                                  replace={"cross_entropy": "def cross_entropy(*args, **kwargs):\n    while True:\n"
                                                            "        pass"})
    result = runner.grade(ROOT, "01-ngrams", nb, visible_only=True, test_cells=True, own_machine=True,
                          limits={"call_timeout": 3})
    cells = {c["cell"]: c for c in result["test_cells"]}
    assert cells["test_perplexity"]["error"]["type"] == "timeout"
    assert "`test_perplexity` did not finish in time" in cells["test_perplexity"]["error"]["message"]
    assert cells["test_greedy"]["passed"] and cells["test_sampling"]["passed"]  # the cells after it still ran
    assert "run_test_cell" not in check_text(result, nb)  # the grader's own names stay out of sight


def test_a_variant_written_as_an_edit_applies_and_cannot_drift(tmp_path):
    from lmcourse.instructor.testing import Edit

    edit = Edit("return x, y", "return x, x.clone()", why="targets not shifted")
    nb = submission_from_solution(ROOT, "03-rnnlm", tmp_path, replace={"batchify": edit})
    code = "".join(nbmod.cell_source(c) for c in nbformat.read(nb, 4).cells if nbmod.grade_id(c) == "batchify")
    assert "return x, x.clone()" in code and "return x, y" not in code
    with pytest.raises(ValueError, match="exactly once.*update the variant"):
        submission_from_solution(ROOT, "03-rnnlm", tmp_path / "drifted",
                                 replace={"batchify": Edit("return y, x", "return x, x")})
