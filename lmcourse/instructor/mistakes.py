"""Known mistakes: the wrong implementations students really write, as course data.

Each assignment's ``autograder/<id>/mistakes.py`` lists them. A mistake is the
solution with one function or class swapped for a wrong version (usually a
small `Edit` of the solution's own definition), the checks written to catch
it, and a hint: advice a student can act on, never code. The file holds
fragments of the solution and names the hidden checks, so it lives beside them,
out of the student worker's sight and out of the student edition.

What the file defines (read by `load`):

    VARIANTS   name -> (function replaced, the wrong version, checks that must score 0)
    HINTS      name -> the advice shown when a submission's failures match the mistake
    LEAVE_OUT  checks a mistake's signature leaves out unless the mistake is written to fail
               them: the training runs and the checks that load real weights, too slow to
               run for every mistake

The course's tests grade every mistake and prove its checks catch it
(``tests/unit_contract.py``); the instructor notes' "Common mistakes" name
only mistakes listed here (`lmcourse.instructor.notes`).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from lmcourse.course import Assignment, Course
from lmcourse.instructor.testing import Edit

FILE = "mistakes.py"


@dataclass(frozen=True)
class Mistake:
    name: str
    function: str                             # the function or class the mistake replaces
    wrong: "str | Edit | tuple[Edit, ...]"    # a whole wrong definition, or edits of the solution's
    catches: tuple[str, ...]                  # the checks proven to fail on it
    hint: str                                 # advice for the student, never code


def path(root: Path, assignment_id: str) -> Path:
    return Assignment(Course(root), assignment_id).checks_dir / FILE


def module(root: Path, assignment_id: str) -> ModuleType:
    """``autograder/<id>/mistakes.py`` imported as a module (the tests read its check names and VARIANTS).

    Imported once per process and path: the unit tests and the catalogue share one copy."""
    file = path(root, assignment_id).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"{file} does not exist: {assignment_id} lists no known mistakes")
    name = "lmcourse_mistakes_" + re.sub(r"\W", "_", assignment_id) + "_" + format(abs(hash(str(file))), "x")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def load(root: Path, assignment_id: str) -> dict[str, Mistake]:
    """The assignment's known mistakes by name, in the file's order."""
    mod = module(root, assignment_id)
    hints = getattr(mod, "HINTS", {})
    out = {}
    for name, (function, wrong, catches) in mod.VARIANTS.items():
        out[name] = Mistake(name, function, tuple(wrong) if isinstance(wrong, list) else wrong, tuple(catches),
                            hints.get(name, ""))
    return out


def leave_out(root: Path, assignment_id: str) -> tuple[str, ...]:
    """The checks a mistake's signature leaves out unless it is written to fail them (see the module's docstring)."""
    return tuple(getattr(module(root, assignment_id), "LEAVE_OUT", ()))


# ------------------------------------------------------------------ grading the mistakes: their signatures


def grade(root: Path, assignment_id: str, mistake: Mistake, dest: Path, *, tier: str = "cpu",
          exclude=None, test_cells: bool = True):
    """Grade `mistake` as a submission (the solution with the mistake typed in), every check run but those
    of `leave_out` it is not written to fail (or but `exclude`, where given), and the notebook's test cells
    too (what ``lmcourse check`` shows a student) unless not `test_cells`. The `Result`."""
    from lmcourse.grading import grade_notebook
    from lmcourse.instructor.testing import submission_from_solution

    nb = submission_from_solution(root, assignment_id, dest, replace={mistake.function: mistake.wrong})
    skipped = set(leave_out(root, assignment_id)) - set(mistake.catches) if exclude is None else set(exclude)
    return grade_notebook(root, assignment_id, nb, tier=tier, exclude=skipped, test_cells=test_cells, hints=[])


def grade_all(root: Path, assignment_id: str, dest: Path, *, tier: str = "cpu", names=None,
              progress=None, exclude=None, test_cells: bool = True) -> dict[str, object]:
    """Grade every mistake (or those `names`), each in a folder of its own under `dest`: name -> its
    `Result`, or the exception that stopped its grade (a mistake whose edit no longer applies, say).
    exclude: a function of a `Mistake` giving the checks its grade leaves out (None: `grade`'s default)."""
    out: dict[str, object] = {}
    catalogue = load(root, assignment_id)
    for i, name in enumerate(names if names is not None else catalogue):
        if progress is not None:
            progress(f"{assignment_id}: mistake {i + 1}/{len(catalogue)}: {name}")
        try:
            out[name] = grade(root, assignment_id, catalogue[name], Path(dest) / f"m{i:03d}", tier=tier,
                              exclude=exclude(catalogue[name]) if exclude is not None else None,
                              test_cells=test_cells)
        except Exception as err:  # reported against this mistake; the others still run
            out[name] = err
    return out


def signatures_from(root: Path, assignment_id: str, graded: dict[str, object]):
    """The `signatures.Signature` of each graded mistake; `GraderError` naming each one whose grade failed
    (a catalogue with a hole would attribute its submissions to a neighbour)."""
    from lmcourse.errors import GraderError
    from lmcourse.grading.signatures import entries, signature

    catalogue = load(root, assignment_id)
    broken = {name: (r if isinstance(r, Exception) else r["message"]) for name, r in graded.items()
              if isinstance(r, Exception) or r["status"] == "grader-error"}
    if broken:
        raise GraderError(f"{assignment_id}: {len(broken)} known mistake(s) could not be graded: " +
                          "; ".join(f"{name!r}: {why}" for name, why in broken.items()))
    return [signature(name, entries(r), hint=catalogue[name].hint, function=catalogue[name].function)
            for name, r in graded.items()]


def _cache_dir() -> Path:
    import os

    return Path(os.environ.get("LMCOURSE_CACHE") or Path.home() / ".cache" / "lmcourse") / "mistakes"


def cache_key(root: Path, assignment_id: str, tier: str) -> str:
    """What the signatures depend on: the grade's inputs (`grader_fingerprint`: checks, source, release,
    tier), the catalogue itself and the grader's code."""
    import hashlib

    from lmcourse.grading.runner import grader_fingerprint

    h = hashlib.sha256(grader_fingerprint(root, assignment_id, tier).encode())
    h.update(path(root, assignment_id).read_bytes())
    package = Path(__file__).resolve().parents[1]
    for p in sorted((package / "grading").rglob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def signatures(root: Path, assignment_id: str, *, tier: str = "cpu", use_cache: bool = True, progress=None):
    """Every known mistake's signature, from the cache when the course has not changed since it was made
    (``$LMCOURSE_CACHE/mistakes/``), else by grading each mistake (about as long as grading that many
    submissions, training runs only where a mistake is written to fail one)."""
    import tempfile

    found = cached(root, assignment_id, tier=tier) if use_cache else None  # (a damaged cache is made again)
    if found is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="lmcourse-mistakes-") as tmp:
        found = signatures_from(root, assignment_id, grade_all(root, assignment_id, Path(tmp), tier=tier,
                                                                progress=progress))
    store(root, assignment_id, found, tier=tier)
    return found


def cache_file(root: Path, assignment_id: str, tier: str = "cpu") -> Path:
    """Where `signatures` keeps the signatures of the course as it is now."""
    return _cache_dir() / f"{assignment_id}-{cache_key(root, assignment_id, tier)[:24]}.json"


def store(root: Path, assignment_id: str, found, *, tier: str = "cpu") -> Path:
    """Cache `found` as the signatures of the course as it is now (`signatures` does; a test may too)."""
    import json

    from lmcourse.files import atomic_write

    path = cache_file(root, assignment_id, tier)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, json.dumps({"assignment": assignment_id, "key": cache_key(root, assignment_id, tier),
                                          "tier": tier, "signatures": [s.to_json() for s in found]}, indent=1))


def cached(root: Path, assignment_id: str, *, tier: str = "cpu"):
    """The signatures `signatures` made for the course as it is now, or None when there are none yet."""
    import json

    from lmcourse.grading.signatures import Signature

    key = cache_key(root, assignment_id, tier)
    try:
        data = json.loads(cache_file(root, assignment_id, tier).read_text())
        if data.get("key") == key:
            return [Signature.from_json(s) for s in data["signatures"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


# How the commands that write feedback (a batch, --collect, the Gradescope bundle, the student edition) get
# the signatures: "compute" (the default: from the cache, else by grading the mistakes), "cached" (only what
# the cache holds: the course's own tests, where every unit's mistakes would cost minutes), "off".
HINTS_ENV = "LMCOURSE_HINTS"


def for_feedback(root: Path, assignment_id: str, *, tier: str = "cpu", mode: str | None = None, log=print):
    """The signatures whose exact matches become the "likely cause" hints of feedback (see `HINTS_ENV`);
    [] when they are off or cannot be made, which `log` says (the grades do not depend on them)."""
    import os

    mode = mode or os.environ.get(HINTS_ENV) or "compute"
    if mode not in ("compute", "cached", "off"):
        raise ValueError(f"{HINTS_ENV}={mode!r}: expected compute, cached or off")
    if mode == "off" or not path(root, assignment_id).is_file():
        return []
    try:
        found = cached(root, assignment_id, tier=tier)
        if found is None and mode == "compute":
            n = len(load(root, assignment_id))
            log(f"{assignment_id}: grading its {n} known mistakes once (cached for later runs), for the likely-cause "
                "hints of the feedback")
            found = signatures(root, assignment_id, tier=tier, progress=log)
    except Exception as err:  # hints are advice on top of a grade: without them, the grades still stand
        log(f"{assignment_id}: no likely-cause hints in the feedback: {type(err).__name__}: {err}")
        return []
    if found is None:
        log(f"{assignment_id}: no likely-cause hints in the feedback ({HINTS_ENV}=cached, and none are cached: "
            f"`lmcourse mistakes {assignment_id}` makes them)")
        return []
    return found
