"""The result of grading one submission, in one type: what every grading path returns and writes.

The runner builds a :class:`Result` (one :class:`CheckResult` per hidden or
visible check, plus what the notebook's structure and the student's code did);
everything else only reads it: ``lmcourse check`` prints it
(`lmcourse.grading.report`), a batch writes it as ``results.json`` and records
it in nbgrader's gradebook, Gradescope's ``run_autograder`` writes it in
Gradescope's schema. A runner process hands it to its batch as one line of
JSON on its pipe (`Result.dumps` / `Result.from_json`), so the batch is the
only process that writes result files.

On disk a result is Gradescope's ``results.json`` schema (``score``,
``max_score``, ``tests`` with ``name``, ``number``, ``score``, ``max_score``,
``status``, ``output``, ``visibility``, ``tags``) plus lmcourse's own keys:
``status`` and ``message`` (one line: what, if anything, went wrong),
``cells`` (points per test cell, for the gradebook), ``problems``, and for a
submission that was graded at all ``isolation``, ``readiness``, ``parts`` and
the rest (`Result` lists them). `Result.to_gradescope` gives Gradescope's
schema exactly, with lmcourse's keys under ``extra_data``.

The status of a submission is a :class:`Status`. ``grader-error`` is the
grader's failure, never the student's: it is never a grade (a batch records
no score for it, ``run_autograder`` leaves no results.json). Every other
status is a grade, ``ok`` included (the score says how good).

A result also reads like the dict it is written as (``result["score"]``,
``result.get("tests")``): that is the JSON view, for readers of results.json
and the tests; the library reads the attributes.

This module is a leaf: it imports only the standard library and
`lmcourse.files`, whose `atomic_write` is the one way lmcourse writes a file.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmcourse.files import atomic_write

GRADESCOPE_TOP_KEYS = ("score", "execution_time", "output", "visibility", "stdout_visibility")
GRADESCOPE_TEST_KEYS = ("score", "max_score", "status", "name", "number", "output", "tags", "visibility")


class Status(enum.StrEnum):
    """A submission's status word, as results.json, grades.csv and ``lmcourse check`` show it."""

    OK = "ok"  # graded; the score says how well
    GRADER_ERROR = "grader-error"  # the grader failed: not a grade, graded again on the next run
    # the file cannot be read as a notebook (`notebook.NotebookError`, `bounded`)
    SYMLINK = "symlink"
    UNREADABLE = "unreadable"
    EMPTY = "empty"
    NOT_JSON = "not-json"
    NOT_A_NOTEBOOK = "not-a-notebook"
    INVALID_NOTEBOOK = "invalid-notebook"
    OLD_NBFORMAT = "old-nbformat"
    TOO_LARGE = "too-large"
    # the notebook's cells (`notebook.Problem`)
    MISSING_CELL = "missing-cell"
    MODIFIED_CELL = "modified-cell"
    DUPLICATE_CELL = "duplicate-cell"
    RECOVERED_CELLS = "recovered-cells"
    SYNTAX_ERROR = "syntax-error"
    WRONG_ASSIGNMENT = "wrong-assignment"
    # the student's code (`kinds.STUDENT_KINDS`)
    MISSING = "missing"
    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REFUSED_OUTPUT = "refused-output"
    IMPORT_ERROR = "import-error"
    OUTPUT_TOO_LARGE = "output-too-large"
    MEMORY = "memory"
    # a Gradescope submission with no notebook in it (run_autograder)
    NO_NOTEBOOK = "no-notebook"

    @property
    def graded(self) -> bool:
        """Whether a result with this status is a grade (anything but ``grader-error``)."""
        return self is not Status.GRADER_ERROR


def hint_text(hint: dict) -> str:
    """One line a student reads for a `Result.hints` entry."""
    where = f" in `{hint['function']}`" if hint.get("function") else ""
    return f"Likely cause (a known mistake{where}): {hint.get('hint', '')}"


def clean_text(text: str) -> str:
    """Text that came from a submission, safe to write anywhere: valid UTF-8 (lone surrogates replaced)."""
    return str(text).encode("utf-8", "replace").decode("utf-8", "replace")


def _clean_tree(value):
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: _clean_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_tree(v) for v in value]
    return value


class _JsonView:
    """Read access by key to what `to_json` gives: ``result["score"]``, ``result.get("tests", [])``."""

    def to_json(self) -> dict:  # pragma: no cover (each class has its own)
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_json().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.to_json()

    def keys(self):
        return self.to_json().keys()

    def __iter__(self):
        return iter(self.to_json())


@dataclass
class CheckResult(_JsonView):
    """One check's outcome: one entry of results.json's ``tests`` (Gradescope's keys first)."""

    name: str
    score: float
    max_score: float
    status: str = "failed"  # Gradescope's word: "passed" or "failed"
    output: str = ""  # why it failed (the exception's message, never a traceback); "" when passed
    visibility: str = "visible"  # Gradescope's: "visible", or "after_published" for a hidden check
    number: str = ""  # its place in the run, from "1"
    tags: list[str] = field(default_factory=list)  # [the test cell it belongs to]
    cell: str | None = None  # the nbgrader test cell whose points it carries
    check: str = ""  # pytest's node id of the check
    function: str | None = None  # the first student function it called
    kind: str | None = None  # how it failed: a student kind, "assertion", "error", "structure", ...
    seconds: float = 0.0
    # what the check measured on the trusted side, by name (a graded training run's validation loss: the
    # grader-verified number `lmcourse leaderboard` ranks); None when it measured nothing
    measured: dict[str, float] | None = None

    ORDER = ("name", "number", "score", "max_score", "status", "output", "visibility", "tags", "cell", "check",
             "function", "kind", "seconds")  # results.json's order; then "measured", only where something was

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict:
        out = {k: list(self.tags) if k == "tags" else getattr(self, k) for k in self.ORDER}
        if self.measured is not None:  # most checks measure nothing: no key
            out["measured"] = dict(self.measured)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "CheckResult":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("score", 0.0)
        values.setdefault("max_score", 0.0)
        values["tags"] = list(values.get("tags") or [])
        return cls(**values)

    def to_gradescope(self) -> dict:
        data = self.to_json()
        test = {k: data[k] for k in GRADESCOPE_TEST_KEYS}
        test["extra_data"] = {k: v for k, v in data.items() if k not in GRADESCOPE_TEST_KEYS}
        return test


@dataclass
class Result(_JsonView):
    """A submission's grade and everything said about it; see the module docstring for its JSON."""

    score: float
    max_score: float
    status: Status
    message: str  # one line: "graded", or what went wrong first
    output: str  # what Gradescope shows on top: the points, the status, what is not written yet
    assignment: str
    tests: list[CheckResult] = field(default_factory=list)
    cells: dict[str, dict[str, float]] = field(default_factory=dict)  # test cell -> {"score", "max_score"}
    problems: list[dict] = field(default_factory=list)  # `notebook.Problem.as_dict` of each
    execution_time: float = 0.0
    visibility: str = "visible"
    stdout_visibility: str = "hidden"
    # Only for a submission that was graded at all (None: the key is left out of the JSON).
    not_run: int | None = None  # checks left out (visible_only, exclude)
    notebook: str | None = None  # the submission's file name
    tier: str | None = None
    isolation: str | None = None  # how the student's code was run
    captured_output: str | None = None  # the last of what the student's code printed
    warnings: list[str] | None = None  # the course's own inconsistencies (points that do not add up)
    readiness: dict | None = None  # {"missing": [[cell, name]...], "unimplemented": [...]}
    parts: dict[str, str] | None = None  # test cell -> its "Part N" heading
    hidden_points: float | None = None  # points of checks that `visible_only` left out
    test_cells: list[dict] | None = None  # the notebook's own test cells, run by `lmcourse check`
    # known mistakes the failures match exactly (`signatures.likely_causes`): {"function", "hint", "checks",
    # "visibility"}, shown as "likely cause"; a hidden-check match only once grades are released
    hints: list[dict] | None = None
    extra_data: dict | None = None  # the caller's: a batch's student id and key

    ORDER = ("score", "max_score", "status", "message", "output", "visibility", "stdout_visibility",
             "execution_time", "tests", "cells", "problems", "not_run", "assignment", "notebook", "tier",
             "isolation", "captured_output", "warnings", "readiness", "parts", "hidden_points", "test_cells",
             "hints", "extra_data")  # results.json's order
    OPTIONAL = frozenset(ORDER[ORDER.index("not_run"):]) - {"assignment"}

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def graded(self) -> bool:
        """A grade (``ok`` or the student's problem), not the grader's failure."""
        return self.status.graded

    @classmethod
    def failed(cls, assignment: str, status: Status | str, message: str) -> "Result":
        """A submission the grader could not grade at all: a grader error, a killed runner, no notebook."""
        status = Status(status)
        message = " ".join(str(message).split())
        return cls(score=0.0, max_score=0.0, status=status, message=message, output=f"{status}: {message}",
                   assignment=assignment)

    # ------------------------------------------------------------------ JSON

    def to_json(self) -> dict:
        """results.json's dict: lmcourse's keys, optional ones left out when unset."""
        out: dict[str, Any] = {}
        for key in self.ORDER:
            value = getattr(self, key)
            if value is None and key in self.OPTIONAL:
                continue
            if key == "tests":
                value = [t.to_json() for t in value]
            elif key == "status":
                value = value.value
            out[key] = value
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Result":
        """The result `to_json` (or an older results.json) gave; keys it does not know are ignored.

        Raises ValueError for what is not a result (an unknown status, no score).
        """
        if not isinstance(data, dict):
            raise ValueError(f"a result is a JSON object, not {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["tests"] = [CheckResult.from_json(t) for t in values.get("tests") or []]
            values.setdefault("message", "")
            values.setdefault("output", "")
            values.setdefault("assignment", "")
            values.setdefault("status", Status.OK)
            return cls(**values)
        except (TypeError, AttributeError) as err:
            raise ValueError(f"not a result: {err}") from None

    def to_gradescope(self) -> dict:
        """Gradescope's schema exactly; lmcourse's other keys move under ``extra_data``."""
        data = self.to_json()
        out = {k: data[k] for k in GRADESCOPE_TOP_KEYS}
        out["extra_data"] = {k: v for k, v in data.items() if k not in GRADESCOPE_TOP_KEYS and k != "tests"}
        out["tests"] = [t.to_gradescope() for t in self.tests]
        # Gradescope shows only outputs: a hint joins the top-level output when what it rests on is visible
        # (shown at once), else the output of the first hidden check it rests on (shown on release)
        for h in self.hints or []:
            text = hint_text(h)
            tests = [t for t in out["tests"] if t["name"] in h.get("checks", ()) and t["visibility"] != "visible"]
            if h.get("visibility") == "visible":
                out["output"] = f"{out['output']}\n\n{text}".strip()
            elif tests:  # (a hidden match resting on no hidden failure has nowhere to wait: left out)
                tests[0]["output"] = f"{tests[0]['output']}\n\n{text}".strip()
        return out

    def dumps(self, *, gradescope: bool = False, indent: int | None = 1) -> str:
        """JSON text, valid UTF-8 whatever the submission's text held (`indent=None`: one line, for a pipe)."""
        data = self.to_gradescope() if gradescope else self.to_json()
        return json.dumps(_clean_tree(data), indent=indent, default=str)

    @classmethod
    def loads(cls, text: str | bytes) -> "Result":
        """The result of `dumps` (not of its Gradescope form); ValueError for anything else."""
        return cls.from_json(json.loads(text))

    def write(self, path: Path | str, *, gradescope: bool = False) -> Path:
        """Write results.json atomically (`lmcourse.files.atomic_write`); return its path."""
        return atomic_write(path, self.dumps(gradescope=gradescope))

    @classmethod
    def read(cls, path: Path | str) -> "Result | None":
        """The result stored at ``path``; None when there is none or it cannot be read as one."""
        try:
            return cls.loads(Path(path).read_bytes())
        except (OSError, ValueError):
            return None
