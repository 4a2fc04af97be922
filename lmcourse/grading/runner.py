"""Grade one submission: structure check → extraction → worker → checks → result.

This is the unit of work of every grading path (``lmcourse grade``,
``lmcourse check``, Gradescope's ``run_autograder``). It runs in the trusted
process; student code runs only inside the sandbox's :class:`Worker`, and the
hidden checks run through the pytest plugin (`lmcourse.grading.plugin`). What
comes out is a `lmcourse.grading.result.Result`.

As a process of its own it grades one submission and writes its files (one
Slurm array task per submission, Gradescope's ``run_autograder``)::

    python -m lmcourse.grading.runner ROOT ASSIGNMENT NOTEBOOK --out results.json [--gradescope]

or, for a batch, grades the notebooks named on its stdin, one per line, and
answers each with its result as one line of JSON on stdout (``--serve``): it
writes nothing, the batch writes the files. It imports nothing above itself
(batch, preflight, the commands).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Collection
from pathlib import Path
from types import ModuleType

from lmcourse.course import Assignment, Course, load_release
from lmcourse.errors import GraderError
from lmcourse.files import atomic_write
from lmcourse.grading import bounded, causes, rules, signatures
from lmcourse.grading.kinds import STATUS_KINDS, STUDENT_KINDS
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.plugin import GradingPlugin, run_checks, sandbox_module
from lmcourse.grading.report import feedback_html, readiness, todo_text
from lmcourse.grading.result import CheckResult, Result, Status, clean_text


def reference_module(root: Path, assignment_id: str) -> ModuleType:
    """The reference module of `assignment_id` (see `lmcourse.course.Assignment.reference_module`)."""
    return Assignment(Course(root), assignment_id).reference_module()


def resolve_tier(tier: str | None) -> str:
    """'cpu' or 'gpu'; 'auto' (or None) means gpu exactly when CUDA is available. LMCOURSE_TIER forces it."""
    forced = os.environ.get("LMCOURSE_TIER", "").strip()
    tier = forced or tier or "auto"
    if tier == "auto":
        import torch

        return "gpu" if torch.cuda.is_available() else "cpu"
    if tier not in ("cpu", "gpu"):
        raise ValueError(f"tier must be 'cpu', 'gpu' or 'auto', got {tier!r}")
    if tier == "gpu":
        import torch

        if not torch.cuda.is_available():  # else every training check would fail, and it is not the students' fault
            raise GraderError("the GPU tier was asked for (--tier gpu or LMCOURSE_TIER=gpu) but CUDA is not "
                              "available on this machine; grade with --tier auto or --tier cpu, or on a GPU machine")
    return tier


def checks_dir(root: Path, assignment_id: str) -> Path:
    """The assignment's checks; `GraderError` when there are none (a student edition may have none to show:
    then only the notebook's test cells run)."""
    assignment = Assignment(Course(root), assignment_id)
    if not assignment.check_files() and not assignment.course.is_edition:
        raise GraderError(f"no checks in {assignment.checks_dir} (expected autograder/{assignment_id}/test_*.py)")
    return assignment.checks_dir


def _limits(root: Path, assignment_id: str, overrides: dict | None):
    """The sandbox's default limits, with autograder/<id>/limits.json and ``overrides`` applied."""
    limits = sandbox_module().Limits()
    extra = Assignment(Course(root), assignment_id).limits_overrides()
    extra.update(overrides or {})
    return dataclasses.replace(limits, **extra) if extra else limits


# The third-party libraries (top-level import names) every assignment's code may import: NumPy, PyTorch and
# what torch loads (torchgen, functorch; sympy, mpmath and networkx for its fake tensors and symbolic shapes,
# filelock and fsspec), matplotlib with what it loads, tqdm for progress bars, regex for the GPT-2 pattern.
# SciPy is allowed: the course's own honest variants use it (scipy.optimize, scipy.special) and no check is
# about what it offers. Every other library in site-packages (transformers, tokenizers, tiktoken, sentencepiece, gensim,
# jinja2 ...) is absent from the worker: each would write some assignment's answer. An assignment adds what its
# given code needs in autograder/<id>/libraries.json ({"allow": [...], "note": "..."}).
LIBRARIES = frozenset({
    "numpy", "torch", "torchgen", "functorch", "typing_extensions", "sympy", "mpmath", "networkx", "filelock",
    "fsspec", "matplotlib", "mpl_toolkits", "pylab", "PIL", "contourpy", "cycler", "dateutil", "six", "kiwisolver",
    "fontTools", "pyparsing", "packaging", "tqdm", "regex", "scipy", "lmcourse",
})
LIBRARIES_NOTE = ("Your code may import the Python standard library, numpy, scipy, torch, matplotlib, tqdm, regex and the "
                  "course's lmcourse modules{extra}; other libraries would do part of the assignment for you, so "
                  "the grader does not have them")


def libraries(root: Path, assignment_id: str):
    """What the worker of `assignment_id` can import (`sandbox.libraries.Libraries`): `LIBRARIES` plus the
    assignment's ``libraries.json``."""
    extra = Assignment(Course(root), assignment_id).libraries_overrides()
    allow = [str(name) for name in extra.get("allow", [])]
    shown = [name for name in allow if name not in extra.get("hidden_from_note", [])]
    note = extra.get("note") or LIBRARIES_NOTE.format(extra=(", " + ", ".join(shown)) if shown else "")
    return sandbox_module().Libraries(allowed=LIBRARIES | frozenset(allow), note=note)


def grader_fingerprint(root: Path, assignment_id: str, tier: str) -> str:
    """Hash of everything besides the notebook that decides a grade (a batch's resume key, the preflight's)."""
    from lmcourse import __version__

    # The grader's own version, not its code bytes: editing a docstring must not force
    # re-grading a cohort; --force does that deliberately.
    return Assignment(Course(root), assignment_id).fingerprint(f"tier={tier}", f"lmcourse={__version__}")


def secret_dirs(root: Path) -> list[Path]:
    """What the worker must not see: this course's checks and solutions, and those of the course this
    package was installed from (grading another course with ``--course`` must not expose them)."""
    own = Course.of_package()
    return Course(root).secret_dirs() + (own.secret_dirs() if own is not None else [])


def grade(root: Path, assignment_id: str, notebook: Path, *, tier: str = "cpu", visible_only: bool = False,
          limits: dict | None = None, exclude: Collection[str] = (), test_cells: bool = False,
          own_machine: bool = False, reference: object | None = None, hints: list | None = None) -> Result:
    """Grade ``notebook`` against ``autograder/<assignment_id>/``; return its `Result`.

    visible_only: run the visible checks only (``lmcourse check``). exclude: names of
    checks to leave out; they are neither run nor counted in ``max_score`` (the course's
    own tests use it to skip a training run that a known-wrong variant is not about).
    test_cells: also run the notebook's own visible test cells (the release's copies) in
    the worker, after the checks, and report each under ``test_cells`` (``lmcourse
    check``); they earn nothing, since their outcome comes from the student's process.
    own_machine: a student checking their own code (``lmcourse check``): where full
    isolation is impossible (root without bubblewrap, say), run it without, as Jupyter
    does, and say so, instead of refusing.
    reference: what the checks compare with, in place of the course's solution (``lmcourse publish
    student`` passes a `replay.Recording` of it).
    hints: the known mistakes' `signatures.Signature`s, whose exact matches become ``result.hints``
    (None: those of ``hints.json`` beside the checks, where the student edition and a Gradescope bundle
    keep them; [] for none).

    Never raises for anything the submission does; raises :class:`GraderError`
    when the course itself is broken (no checks, a reference that fails).
    """
    sandbox = sandbox_module()
    StudentError, Worker = sandbox.StudentError, sandbox.Worker
    started = time.perf_counter()
    root = Path(root)
    tier = resolve_tier(tier)
    release = load_release(root, assignment_id)
    reference = reference_module(root, assignment_id) if reference is None else reference
    folder = checks_dir(root, assignment_id)
    edition = Course(root).is_edition  # a student edition: perhaps no visible check, and no hidden one to count

    problems: list[nbmod.Problem] = []
    blocked: dict[str, str] = {}
    block_all: tuple[str, str] | None = None
    unloaded: dict[str, str] = {}
    unloaded_names: dict[str, str] = {}
    extraction = None
    try:
        # The work that grows with the submission runs in a child with a memory and time budget.
        extraction, upgraded_from = _from_json(bounded.run(_read_and_extract, Path(notebook), release,
                                                           Assignment(Course(root), assignment_id).release_relpath,
                                                           what=Path(notebook).name))
    except nbmod.NotebookError as err:
        block_all = (err.status, err.message)
        problems.append(nbmod.Problem(err.status, err.message))
    except bounded.BoundedError as err:
        raise GraderError(str(err)) from err
    else:
        problems, blocked = extraction.problems, extraction.blocked_cells
        if upgraded_from:
            problems.insert(0, nbmod.Problem(
                "old-nbformat", f"the notebook was in format v{upgraded_from} and was "
                "upgraded to v4 for grading; save it from a current Jupyter"))

    worker = None
    isolation = "none (nothing was run)"
    captured = ""
    try:
        if block_all is None:
            try:
                secret = secret_dirs(root)
                try:
                    worker = Worker(extraction.source, limits=_limits(root, assignment_id, limits),
                                    secret_dirs=secret, libraries=libraries(root, assignment_id))
                    unavailable = ""
                except getattr(sandbox, "SandboxError", ()) as err:
                    if not own_machine:
                        raise
                    unavailable = f"; full isolation is not available here ({err})"
                    worker = Worker(extraction.source, limits=_limits(root, assignment_id, limits),
                                    secret_dirs=secret, isolate=False, libraries=libraries(root, assignment_id))
                worker.__enter__()
                isolation = worker.isolation + unavailable
                failed = getattr(worker, "import_error", None)
                if failed is not None:  # nothing of the module can be called: every check says why
                    block_all = (getattr(failed, "kind", "import-error"),
                                 _name_cell(getattr(failed, "message", str(failed)), extraction))
                else:  # the cells that raised were reported, and the others loaded
                    raised, unloaded, unloaded_names = _cells_that_raised(worker, extraction, release)
                    problems.extend(raised)
            except StudentError as err:
                block_all = (err.kind, _name_cell(err.message, extraction))
                worker = None
            except getattr(sandbox, "SandboxError", ()) as err:  # the grader's setup, not the student
                raise GraderError(f"the sandbox cannot start: {err}") from err
        plugin = GradingPlugin(worker=worker, reference=reference, tier=tier, assignment=assignment_id,
                               blocked=blocked, block_all=block_all, visible_only=visible_only,
                               exclude=frozenset(exclude),
                               findings=extraction.findings if extraction is not None else {},
                               unloaded=unloaded, unloaded_names=unloaded_names)
        if not edition or Assignment(Course(root), assignment_id).check_files():
            run_checks(folder, plugin)
        cell_results = _run_test_cells(worker, release, extraction, block_all, StudentError, unloaded) \
            if test_cells else None
        if worker is not None:
            try:
                captured = worker.captured_output
            except Exception:
                captured = ""
    finally:
        if worker is not None:
            try:
                worker.close()
            except Exception:
                pass
    if plugin.config_errors:
        raise GraderError("; ".join(plugin.config_errors))
    if not plugin.order and not plugin.not_run and not edition:
        raise GraderError(f"no checks were collected from {folder}")

    if extraction is not None and _mostly_missing(problems, release):
        looks = looks_like(root, assignment_id, extraction.found_ids)
        if looks:
            problems.insert(0, nbmod.Problem("wrong-assignment", looks))
    if extraction is not None:
        for r in plugin.results.values():
            if r["kind"] in STUDENT_KINDS:
                r["output"] = _name_cell(r["output"], extraction)
    result = _result(assignment_id, release, plugin, problems, block_all, tier, isolation, captured,
                     time.perf_counter() - started, Path(notebook).name)
    result.readiness = extraction.readiness if extraction is not None else {"missing": [], "unimplemented": []}
    result.parts = nbmod.part_titles(release)
    result.hidden_points = round(sum(n["max_score"] for n in plugin.not_run if n["visibility"] != "visible"), 6)
    if edition:  # the hidden checks are not there to count: the release's points less those run
        result.hidden_points = round(sum(nbmod.graded_cells(release).values())
                                     - sum(t.max_score for t in result.tests), 6)
    result.test_cells = cell_results
    if extraction is not None and block_all is None:
        causes.name_root_causes(result, extraction.uses, nbmod.tested_by(release), _answer_order(release))
    if extraction is not None and block_all is None:
        try:
            signatures.attach(result, signatures.load_file(folder / signatures.FILE) if hints is None else hints)
        except ValueError as err:  # the course's file, not the student: the grade stands, without hints
            result.warnings = (result.warnings or []) + [f"no known-mistake hints: {err}"]
    todo = readiness(result)["todo"]
    if todo:  # what Gradescope shows on top, and the feedback page: the same reading as `lmcourse check`
        result.output += f" Not written yet: {todo_text(todo)}."
    return result


def _answer_order(release) -> list[str]:
    """The functions and classes the answer cells ask for, in the notebook's order."""
    return [name for cell in release.cells if nbmod.role(cell) == "solution"
            for name in sorted(nbmod.stub_names(cell))]


def _mostly_missing(problems, release) -> bool:
    """Half or more of the release's answer and given cells are missing: perhaps another assignment."""
    cells = [c for c in release.cells if nbmod.role(c) in ("solution", "locked")]
    missing = {p.cell for p in problems if p.status == "missing-cell" and p.cell}
    return bool(cells) and 2 * len(missing) >= len(cells)


def looks_like(root: Path, assignment_id: str, found_ids) -> str | None:
    """"this notebook looks like 02-word2vec's ..." when another assignment's cells match it better."""
    found = set(found_ids)
    if not found:
        return None
    best, best_share = None, 0.0
    for other in Course(root).assignment_ids():
        try:
            ids = {nbmod.grade_id(c) for c in load_release(root, other).cells if nbmod.grade_id(c)}
        except (FileNotFoundError, nbmod.NotebookError):
            continue
        share = len(found & ids) / max(1, len(ids))
        if share > best_share:
            best, best_share = other, share
    if best is None or best == assignment_id or best_share < 0.5:
        return None
    return (f"this notebook looks like assignment {best} (its cells are there), not {assignment_id}: check it "
            f"with `lmcourse check {best} NOTEBOOK`, or open "
            f"{Assignment(Course(root), assignment_id).release_relpath} for {assignment_id}")


def _tidy_assertion(message: str) -> str:
    """pytest's explanation of a failed assertion, without object addresses and module reprs."""
    lines = []
    for line in message.splitlines():
        if re.search(r"= <module '", line):
            continue  # "+ where <function allclose> = <module 'numpy' from '...'>.allclose": noise
        line = re.sub(r"<(?:bound method \S+ of .*?|function|built-in function|built-in method) ([\w.]+)"
                      r"(?: at 0x[0-9a-f]+)?>", r"\1", line)
        line = re.sub(r" at 0x[0-9a-f]+", "", line)
        lines.append(line)
    return "\n".join(lines[:14])


# A test cell is a few asserts on tiny inputs (under 2 s on one core, the first torch optimiser's import
# included): one that runs for 20 s is looping, and the next cells should not wait as long for it.
TEST_CELL_SECONDS = 20.0


def _run_test_cells(worker, release, extraction, block_all, StudentError, unloaded=None) -> list[dict]:
    """Run the release's test cells in the worker, in order; one entry per cell (see `grade`).

    A test cell whose checks are not run because the cell it tests raised when the module was loaded
    (``unloaded``, `_cells_that_raised`) is not run either, and says so."""
    points = nbmod.graded_cells(release)
    out = []
    for cell in release.cells:
        if nbmod.role(cell) != "test" or cell.get("cell_type") != "code":
            continue
        gid = nbmod.grade_id(cell)
        entry = {"cell": gid, "points": points.get(gid, 0.0), "passed": False, "printed": "", "error": None}
        if worker is None or block_all is not None:
            entry["error"] = {"type": "not-run", "message": "not run: your code could not be loaded (see above)",
                              "line": None, "statement": "", "traceback": ""}
            out.append(entry)
            continue
        if gid in (unloaded or {}):
            entry["error"] = {"type": "not-run", "message": unloaded[gid], "line": None, "statement": "",
                              "traceback": ""}
            out.append(entry)
            continue
        try:
            reply = worker.probe("run_test_cell", source=nbmod.comment_magics(nbmod.cell_source(cell)), cell=gid,
                                 timeout=min(TEST_CELL_SECONDS, worker.limits.call_timeout))
        except StudentError as err:
            entry["error"] = {"type": err.kind, "message": _name_cell(clean_text(err.message), extraction),
                              "line": None, "statement": "", "traceback": ""}
            out.append(entry)
            continue
        except getattr(sandbox_module(), "SandboxError", ()) as err:  # the probe's or the sandbox's failure
            raise GraderError(f"running the test cell '{gid}' failed in the grader: {err}") from err
        # The student's process answered: only shapes we expect, as text, capped.
        reply = reply if isinstance(reply, dict) else {}
        entry["passed"] = reply.get("passed") is True
        entry["printed"] = clean_text(reply.get("printed", ""))[-2000:] if isinstance(reply.get("printed"), str) \
            else ""
        error = reply.get("error")
        if not entry["passed"]:
            error = error if isinstance(error, dict) else {}
            text = {k: clean_text(error.get(k, "")) if isinstance(error.get(k), str) else ""
                    for k in ("type", "message", "statement", "traceback")}
            line = error.get("line")
            text["message"] = _tidy_assertion(text["message"][:3000])
            text["traceback"] = _name_cell(text["traceback"][:3000], extraction)
            entry["error"] = dict(text, line=line if isinstance(line, int) and not isinstance(line, bool) else None,
                                  statement=text["statement"][:1000])
            hint = _skipped_name_hint(text["type"] + ": " + text["message"], extraction)
            if hint:
                entry["error"]["message"] += " " + hint
        out.append(entry)
    return out


def _cells_that_raised(worker, extraction, release) -> tuple[list[nbmod.Problem], dict[str, str], dict[str, str]]:
    """The cells that raised while the worker loaded the module, and what they cost (issue #37).

    The worker runs the module cell by cell, as a kernel's "run all" does
    (`sandbox.inside.cells.run_cells`): a cell that raises (a scratch
    ``print(debug_tensor.shape)`` left at its top level) keeps what it
    defined before that line, and the next cells still run. What it defines
    (`nbmod.names_lost`: the names whose last definition is in it) is not
    graded: the checks of the test cell that tests those names
    (`nbmod.tested_by`) are not run, and any other check that calls one of
    them fails, each with a line that names the cell. Those earn what a stub
    in that cell would, nothing more; checks that need nothing of that cell
    run as usual. The cause is said once, as a notebook problem (status
    ``import-error``) with the line and the student's traceback. A cell that
    does not compile (``return`` outside a function) defined nothing, like one
    that does not parse: a ``syntax-error`` problem, worded the same way.

    Returns (problems, test cell -> why its checks are not run, name -> why a
    check that calls it fails). The worker's report is the student's process
    speaking: cells are named from the grader's own line map, and a forged
    entry could only cost its sender points.
    """
    errors = getattr(worker, "cell_errors", None) or []
    if not errors or extraction is None:
        return [], {}, {}
    cells = {first: (first, last, gid) for first, last, gid in extraction.line_map}
    given = {nbmod.grade_id(c) for c in release.cells if nbmod.role(c) == "locked"}
    raised: dict[int, dict] = {}
    for err in errors:
        if err["first"] in cells and err["first"] not in raised:  # (never the module's docstring)
            raised[err["first"]] = err
    compiled = {first for first, err in raised.items() if not (err["type"] == "SyntaxError" and not err["traceback"])}
    lost = nbmod.names_lost(extraction.line_map, extraction.cell_names, compiled)
    tests = nbmod.tested_by(release)
    problems, unloaded, unloaded_names = [], {}, {}
    for first, err in sorted(raised.items()):
        _, last, gid = cells[first]
        what = f"the given cell '{gid}'" if gid in given else f"cell '{gid}'"
        line = min(max(err["line"], first), last) - first + 1
        if first not in compiled:
            problems.append(nbmod.Problem("syntax-error", f"{what} has a syntax error at line {line}: "
                                          f"{err['message']}; nothing in this cell could be graded", gid))
            continue
        names = sorted(lost.get(first, ()))
        error = f"{err['type']}: {err['message']}" if err["message"] else err["type"]
        if gid in given:
            fix = ("It is the released code: something one of your cells before it defines or changes (a name, "
                   "a module) makes it fail")
        else:
            fix = "Remove or fix that line"
        cost = (f"only the checks that need {', '.join(names)} from this cell score 0" if names else
                "no check needs what this cell defines")
        said = err["message"].strip().rstrip(".")
        message = (f"{what} raised {err['type']} at line {line} when your notebook was loaded"
                   f"{': ' + said if said else ''}. {fix}; the other cells were loaded, and {cost}.")
        trace = _name_cell(err["traceback"], extraction)
        if trace:
            message += f"\nIn your code:\n{trace}"
        hint = _skipped_name_hint(error, extraction)
        if hint:
            message += f"\n{hint}"
        problems.append(nbmod.Problem("import-error", message, gid))
        pointer = f"not run: {what} raised {err['type']} when your notebook was loaded (see the notebook's problems)"
        for name in names:
            unloaded_names.setdefault(name, f"{pointer}, and `{name}` is defined there")
            if name in tests:
                unloaded.setdefault(tests[name], f"{pointer}; this check needs `{name}` from that cell")
    return problems, unloaded, unloaded_names


def _read_and_extract(path: Path, release, release_path: str | None = None) -> dict:
    """Read the submission and line it up with the release (runs in `bounded`'s child)."""
    nb = nbmod.read_notebook(path)
    ext = nbmod.check_and_extract(nb, release, release_path)
    answers = {nbmod.grade_id(c) for c in release.cells if nbmod.role(c) == "solution"}
    return {"source": clean_text(ext.source), "problems": [p.as_dict() for p in ext.problems],
            "blocked": ext.blocked_cells, "line_map": ext.line_map,
            "upgraded_from": nb.metadata.get("lmcourse_upgraded_from"),
            "findings": rules.scan_answers(ext.source, ext.line_map, answers),
            "skipped_names": {clean_text(k): v for k, v in list(ext.skipped_names.items())[:5000]},
            "found_ids": [clean_text(str(i))[:200] for i in ext.found_ids[:1000]],
            "readiness": nbmod.readiness(ext.source, release),
            "cell_names": [[clean_text(n) for n in names] for names in ext.cell_names],
            "uses": nbmod.uses(ext.source, nbmod.answer_names(release))}


def _from_json(data: dict) -> tuple[nbmod.Extraction, int | None]:
    problems = [nbmod.Problem(p["status"], clean_text(p["message"]), p["cell"], bool(p.get("warning")))
                for p in data["problems"]]
    extraction = nbmod.Extraction(data["source"], problems, dict(data["blocked"]),
                                  [tuple(x) for x in data["line_map"]], data["findings"],
                                  skipped_names=dict(data["skipped_names"]), found_ids=list(data["found_ids"]),
                                  readiness=data["readiness"], cell_names=data["cell_names"],
                                  uses=data.get("uses") or {})
    return extraction, data["upgraded_from"]


def _name_cell(message: str, extraction) -> str:
    """Rewrite "line N" of the extracted module as "line k of cell 'grade_id'": where the student looks.

    Idempotent: a line already located ("line 3 of cell ...") is left alone, so a message that
    passes here twice is not moved to another cell. A NameError for a name that only a cell left
    out of the module defines (a demo cell, say) gets a hint saying so.
    """
    if extraction is None or not message:
        return message

    def where(m: re.Match) -> str:
        n = int(m.group(1))
        for first, last, gid in extraction.line_map:
            if first <= n <= last:
                return f"line {n - first + 1} of cell '{gid}'"
        return m.group(0)

    located = re.sub(r"\bline (\d+)\b(?! of )", where, message)
    hint = _skipped_name_hint(located, extraction)
    return f"{located}\n{hint}" if hint and hint not in located else located


def _skipped_name_hint(message: str, extraction) -> str:
    m = re.search(r"NameError: name '(\w+)' is not defined", message or "")
    names = getattr(extraction, "skipped_names", None) or {}
    if not m or m.group(1) not in names:
        return ""
    name = m.group(1)
    return (f"('{name}' is defined only in {names[name]}. Your answer cells must not use it: define what you "
            f"need inside the answer cell or the function, or pass it in as an argument.)")


def _result(assignment_id, release, plugin, problems, block_all, tier, isolation, captured, seconds,
            filename) -> Result:
    """The plugin's per-check records and the notebook's problems, summed up as a `Result`."""
    tests = []
    for number, nodeid in enumerate(plugin.order, 1):
        r = plugin.results[nodeid]
        tests.append(CheckResult(
            name=r["name"], number=str(number), score=r["score"], max_score=r["max_score"], status=r["status"],
            output=r["output"], visibility=r["gradescope_visibility"], tags=[r["cell"]], cell=r["cell"],
            check=r["check"], function=r["function"], kind=r["kind"], seconds=r["seconds"],
            measured=dict(r["measured"]) if r.get("measured") else None))
    cells = {gid: {"score": 0.0, "max_score": 0.0} for gid in nbmod.graded_cells(release)}
    for cell, score, max_score in [(t.cell, t.score, t.max_score) for t in tests] + \
            [(n["cell"], 0.0, n["max_score"]) for n in plugin.not_run]:
        c = cells.setdefault(cell, {"score": 0.0, "max_score": 0.0})
        c["score"] += score
        c["max_score"] += max_score
    warnings = [f"cell '{gid}' is worth {pts:g} points in the notebook but its checks add up to "
                f"{cells.get(gid, {}).get('max_score', 0):g}"
                for gid, pts in nbmod.graded_cells(release).items()
                if not (plugin.visible_only or plugin.exclude)
                and abs(cells.get(gid, {}).get("max_score", 0) - pts) > 1e-9]

    errors = [p for p in problems if not getattr(p, "warning", False)]  # a warning leaves the status alone
    if block_all:
        status, message = block_all
    elif errors:
        status, message = errors[0].status, errors[0].message
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    else:
        kinds = [t.kind for t in tests if t.kind in STATUS_KINDS]
        if kinds:
            status = max(set(kinds), key=kinds.count)
            first = next(t for t in tests if t.kind == status)
            # The top-level message is shown at once: a hidden check's message (which may quote what
            # the student's code made of the hidden inputs) waits for publication like the check.
            detail = first.output if first.visibility == "visible" else \
                f"in the check '{first.name}' (its message is shown when grades are released)"
            message = f"{STUDENT_KINDS[status]}: {detail}"
        else:
            status, message = Status.OK, "graded"
    status = Status(status)
    message = " ".join(str(message).split())  # one line
    score = round(sum(t.score for t in tests), 6)
    max_score = round(sum(t.max_score for t in tests), 6)
    return Result(
        score=score, max_score=max_score, status=status, message=message,
        output=f"{score:g} / {max_score:g} points. " + ("" if status == Status.OK else f"{status}: {message}"),
        execution_time=round(seconds, 3), tests=tests, cells=cells, problems=[p.as_dict() for p in problems],
        not_run=len(plugin.not_run), assignment=assignment_id, notebook=filename, tier=tier, isolation=isolation,
        captured_output=(captured or "")[-4000:], warnings=warnings)


def grade_or_fail(root: Path, assignment_id: str, notebook: Path, *, tier: str = "cpu") -> Result:
    """`grade`, with the grader's own failure (`GraderError`) turned into a ``grader-error`` result."""
    try:
        return grade(root, assignment_id, notebook, tier=tier)
    except GraderError as err:
        return Result.failed(assignment_id, Status.GRADER_ERROR, str(err))


def grade_to_files(root: Path, assignment_id: str, notebook: Path, out: Path, *, feedback: Path | None = None,
                   student: str | None = None, tier: str = "cpu", extra: dict | None = None,
                   gradescope: bool = False) -> Result:
    """Grade and write feedback.html (if asked) then results.json, each atomically; return the result.

    What one runner process does on its own (a Slurm task, Gradescope's
    ``run_autograder``); in a batch the batch writes these files instead.
    """
    result = grade_or_fail(root, assignment_id, notebook, tier=tier)
    if extra:
        result.extra_data = {**(result.extra_data or {}), **extra}
    if feedback:
        atomic_write(feedback, feedback_html(result, student or Path(notebook).stem))
    result.write(out, gradescope=gradescope)  # last: its presence marks the submission as graded
    return result


def serve(root: Path, assignment_id: str, tier: str) -> int:
    """Grade a stream of submissions for a batch: one JSON task per stdin line, one result per stdout line.

    A task is ``{"notebook": PATH}``; the answer is the submission's `Result`
    as one line of JSON (`Result.dumps`), a ``grader-error`` one when the
    grader itself failed. Nothing is written to disk: the batch owns the
    files. Python, pytest and the reference module are loaded once per runner
    instead of once per submission, while each submission still gets its own
    sandboxed worker. Anything printed by checks goes to stderr; stdout
    carries only the answers.
    """
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # fd 1 is stderr from here on: stray prints cannot garble the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            task = json.loads(line)
            result = grade_or_fail(root, assignment_id, Path(task["notebook"]), tier=tier)
        except Exception as err:  # a bug of ours: report it, keep serving
            result = Result.failed(assignment_id, Status.GRADER_ERROR, f"{type(err).__name__}: {err}")
        channel.write(result.dumps(indent=None) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lmcourse.grading.runner", description="Grade one submission.")
    p.add_argument("root", type=Path, help="course root (solutions/, assignments/, autograder/)")
    p.add_argument("assignment")
    p.add_argument("notebook", type=Path, nargs="?", help="the submission (omit with --serve)")
    p.add_argument("--out", type=Path, help="results.json to write (atomically)")
    p.add_argument("--feedback", type=Path, help="also write feedback.html here")
    p.add_argument("--student", default=None, help="student id shown in the feedback")
    p.add_argument("--tier", default="cpu", choices=["auto", "cpu", "gpu"])
    p.add_argument("--extra", default=None, help="JSON object merged into the result's extra_data")
    p.add_argument("--gradescope", action="store_true", help="write Gradescope's schema only")
    p.add_argument("--serve", action="store_true",
                   help="grade the notebooks named on stdin (JSON lines), answer each result on stdout (batches)")
    args = p.parse_args(argv)
    sys.dont_write_bytecode = True
    if args.serve:
        return serve(args.root, args.assignment, resolve_tier(args.tier))
    if args.notebook is None or args.out is None:
        p.error("NOTEBOOK and --out are required (or use --serve)")
    result = grade_to_files(args.root, args.assignment, args.notebook, args.out, feedback=args.feedback,
                            student=args.student, tier=args.tier,
                            extra=json.loads(args.extra) if args.extra else None, gradescope=args.gradescope)
    return 0 if result.graded else 3


if __name__ == "__main__":
    # Run with -m, this file is __main__: hand over to the package's module, so that the
    # GraderError raised by other modules is the very class `main` catches.
    from lmcourse.grading.runner import main as _main

    sys.exit(_main())
