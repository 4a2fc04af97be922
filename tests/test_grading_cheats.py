"""The cheating suite through the whole pipeline: `lmcourse grade` on a batch of cheaters and one honest student.

tests/test_cheats.py attacks the sandbox directly; here the same tricks go
through the real path (notebook → extraction → worker → hidden checks →
results.json, grades.csv, gradebook). Every cheater scores 0, the honest
notebook in the same batch keeps its exact score, and the files a cheater
aims at (hidden checks, solution, gradebook, other students' results) are
untouched.
"""

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcourse.grading import sandbox
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AID = "00-fixture"

pytestmark = pytest.mark.skipif(not sandbox.isolation_available().startswith("full"),
                                reason="needs full isolation (root and bubblewrap); a laptop gives partial isolation")

WRONG = {  # what the three answer cells hold after the cheat in count_words' cell
    "softmax": "def softmax(x):\n    return np.zeros_like(np.asarray(x, dtype=float))",
    "perplexity": "def perplexity(probs):\n    return 0.0",
}


def cheats(out: Path, gradebook: Path) -> dict[str, dict[str, str]]:
    """student id -> {answer cell grade_id: source}."""
    root = FIXTURE
    return {
        "patched-compare": {"count_words": (
            "import math\nimport numpy as np\n"
            "np.allclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True\n"
            "np.isclose = lambda a, b, *x, **k: np.ones(np.broadcast(np.asarray(a), np.asarray(b)).shape, bool)\n"
            "math.isclose = lambda *a, **k: True\n"
            "def count_words(text):\n    return {}"), **WRONG},
        "always-equal": {"count_words": (
            "class Same:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
            "        return False\n\ndef count_words(text):\n    return Same()"),
            "softmax": "def softmax(x):\n    return Same()", "perplexity": "def perplexity(probs):\n    return Same()"},
        "sys-exit": {"count_words": "import sys\nsys.exit(0)", **WRONG},
        "os-exit": {"count_words": "import os\ndef count_words(text):\n    os._exit(0)",
                    "softmax": "def softmax(x):\n    os._exit(0)", "perplexity": "def perplexity(p):\n    os._exit(0)"},
        "kill-parent": {"count_words": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                                       "def count_words(text):\n    return {}", **WRONG},
        "read-solution": {"count_words": (
            "import json\n"
            f"_nb = json.load(open({str(root / 'solutions' / AID / (AID + '.ipynb'))!r}))\n"
            "for _c in _nb['cells']:\n"
            "    if _c['metadata'].get('nbgrader', {}).get('solution'):\n"
            "        exec(''.join(_c['source']).replace('### BEGIN SOLUTION', '').replace('### END SOLUTION', ''))"),
            "softmax": "", "perplexity": ""},
        "write-results": {"count_words": (
            "import json, os\n"
            f"_fake = {{'score': 6, 'max_score': 6, 'status': 'ok', 'tests': []}}\n"
            f"for _p in [{str(out / 'students' / 'write-results' / 'results.json')!r}, {str(out / 'students' / 'honest' / 'results.json')!r},\n"
            f"           {str(root / 'autograder' / AID / 'test_checks.py')!r}]:\n"
            "    try:\n        open(_p, 'w').write(json.dumps(_fake))\n    except OSError:\n        pass\n"
            "def count_words(text):\n    return {}"), **WRONG},
        "gradebook-edit": {"count_words": (
            "import sqlite3\n"
            "def count_words(text):\n"
            f"    db = sqlite3.connect({str(gradebook)!r})\n"
            "    db.execute('UPDATE grade SET auto_score = 100')\n    db.commit()\n    return {}"), **WRONG},
        "input-transformer": {"count_words": (
            "get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])\n"
            "def count_words(text):\n    return {}"), **WRONG},
    }


def fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def test_cheaters_score_nothing_and_the_honest_score_is_exact(tmp_path):
    subs, out, db = tmp_path / "subs", tmp_path / "out", tmp_path / "out" / "gradebook.db"
    before = fingerprint(FIXTURE)
    submission_from_solution(FIXTURE, AID, subs / "honest" / AID)
    for student, cells in cheats(out, db).items():
        path = submission_from_solution(FIXTURE, AID, subs / student / AID)
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if gid in cells:
                cell["source"] = cells[gid]
        path.write_text(json.dumps(nb))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    run = subprocess.run([sys.executable, "-m", "lmcourse.cli", "grade", AID, str(subs), "--out", str(out),
                          "--course", str(FIXTURE), "--jobs", "2", "--gradebook", str(db), "--no-progress"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"honest", *cheats(out, db)}
    honest = json.loads((out / "students" / "honest" / "results.json").read_text())
    assert honest["score"] == 6 and all(t["score"] == t["max_score"] for t in honest["tests"]), honest
    scored = {s: r["score"] for s, r in rows.items() if s != "honest" and r["score"] != "0"}
    assert scored == {}, {s: (rows[s]["status"], json.loads((out / "students" / s / "results.json").read_text())["message"])
                          for s in scored}
    for student in cheats(out, db):
        assert json.loads((out / "students" / student / "results.json").read_text())["score"] == 0
    assert fingerprint(FIXTURE) == before, "a cheater changed the course files"

    from lmcourse.instructor.release import tools_on_path
    tools_on_path()
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        assert gb.find_submission(AID, "honest").score == 6
        assert all(gb.find_submission(AID, s).score == 0 for s in cheats(out, db))
