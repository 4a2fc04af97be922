"""The prose: its claims are recorded where the build computes their numbers, and its sources are clean text.

The claims themselves are checked on the built book in test_book.py; here, without a build, that the mechanism
records a verdict a test can read back (and reports a contradicted one with its numbers), and that no teaching
source carries a control character (a "\\t" typed into a Python string became a tab and ate the "\\t" of
"\\text" and "\\times" in a chapter's maths once: the page showed "ext{rate}").
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from lmcourse import claims

ROOT = Path(__file__).resolve().parent.parent


def _notebook_with_claims(tmp_path: Path) -> Path:
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import numpy as np\nfrom lmcourse.claims import claim\nloss = np.float32(0.4)"),
        nbformat.v4.new_code_cell('claim("x-low", "the loss is below one", holds=loss < 1, loss=loss)'),
        nbformat.v4.new_code_cell('claim("x-tiny", "the loss is a few hundredths", holds=loss < 0.1, loss=loss, '
                                  'by_seed={0: np.array([0.4, 0.5])})'),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    path = tmp_path / "09-example.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_claim_is_recorded_in_the_executed_notebook_and_a_contradiction_reported(tmp_path):
    path = _notebook_with_claims(tmp_path)
    found = claims.from_notebook(path)
    assert [(c.key, c.holds, c.chapter) for c in found] == [("x-low", True, "09-example"), ("x-tiny", False, "09-example")]
    assert found[1].numbers == {"loss": pytest.approx(0.4), "by_seed": {"0": [0.4, 0.5]}}
    assert claims.collect(tmp_path) == found
    report = claims.report(found)
    assert "x-tiny" in report and "a few hundredths" in report and "0.4" in report and "x-low" not in report
    assert claims.report(found[:1]) == ""


def test_a_claim_needs_its_sentence_and_stores_plain_numbers():
    with pytest.raises(ValueError, match="key and the sentence"):
        claims.claim("", "some prose", holds=True)
    with pytest.raises(ValueError, match="key and the sentence"):
        claims.claim("k", "", holds=True)
    assert claims._plain(torch.tensor(0.123456789)) == pytest.approx(0.123457)
    assert claims._plain(np.array([1, 2])) == [1, 2]
    assert math.isnan(claims._plain(float("nan")))  # kept as NaN, not turned into a string
    json.dumps(claims._plain({"a": np.float64(1.5), "b": (torch.ones(2), None)}))


def _teaching_sources() -> list[tuple[Path, str]]:
    """(path, text) of every source a student or an instructor reads: chapters, decks, quizzes, notes, notebooks."""
    out = []
    for pattern in ("book/*.md", "book/units/*.md", "book/course/*.md", "book/slides/*.md", "book/quizzes/*.yaml",
                    "instructors/*.md", "README.md"):
        out += [(p, p.read_text()) for p in sorted(ROOT.glob(pattern))]
    for pattern in ("solutions/*/*.ipynb", "assignments/*/*.ipynb"):
        for p in sorted(ROOT.glob(pattern)):
            out.append((p, "\n".join(cell.source for cell in nbformat.read(p, as_version=4).cells)))
    return out


CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]|\t")


def test_teaching_sources_hold_no_control_characters():
    sources = _teaching_sources()
    assert len(sources) > 40
    bad = [f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()!r} in "
           f"{text[max(0, m.start() - 30):m.end() + 30]!r}"
           for p, text in sources for m in CONTROL.finditer(text)]
    assert not bad, "control characters (a backslash escape eaten by a Python string?):\n" + "\n".join(bad[:20])


def test_the_control_character_check_sees_an_eaten_backslash():
    eaten = "$\\text{rate}$ and $2 \times$"  # the second \t is a tab: what the bug wrote
    assert [m.group() for m in CONTROL.finditer(eaten)] == ["\t"]
