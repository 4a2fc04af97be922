"""`lmcourse leaderboard`: the cohort's grader-verified training results, ranked, on one page.

The numbers come from results.json files as `lmcourse grade` writes them (built here with `Result` itself); the
real 07-gpt grade's record of its verified loss is tested with the unit's contract
(`tests/test_unit07_gpt.py::TestUnit07Gpt::test_the_training_run_records_its_verified_loss`).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from lmcourse.cli import main
from lmcourse.instructor import leaderboard as lb
from lmcourse.grading.result import CheckResult, Result, Status

ROOT = Path(__file__).resolve().parent.parent
TRAINING = "train_gpt: a GPT trained on TinyShakespeare's characters reaches the validation loss threshold"


def _result(loss: float | None, *, passed: bool = True, tier: str = "cpu", status: Status = Status.OK,
            assignment: str = "07-gpt", threshold: float | None = None, protocol: int = lb.PROTOCOL) -> Result:
    tests = [CheckResult(name="encode: ids", score=2.0, max_score=2.0, status="passed"),
             CheckResult(name=TRAINING, score=4.0 if passed else 0.0, max_score=4.0,
                         status="passed" if passed else "failed",
                         measured=None if loss is None else {"validation_loss": loss, "protocol": protocol, **(
                             {} if threshold is None else {"threshold": threshold})})]
    return Result(score=6.0 if passed else 2.0, max_score=6.0, status=status, message="graded", output="",
                  assignment=assignment, tests=tests, tier=tier)


def _grades(tmp_path: Path, results: dict[str, Result]) -> Path:
    out = tmp_path / "grades"
    for student, result in results.items():
        result.write(out / "students" / student / "results.json")
    return out


COHORT = {
    "ada": _result(1.991), "bo": _result(2.050), "cy": _result(1.991), "dee": _result(2.31, passed=False),
    "eve": _result(None, passed=False), "fay": _result(1.48, tier="gpu"), "gus": _result(1.52, tier="gpu"),
    "hal": _result(1.2, status=Status.GRADER_ERROR), "ivy": _result(1.5, assignment="06-bert"),
    "<b onmouseover=alert(1)>x": _result(2.07),
}


def test_measured_values_survive_results_json_and_are_absent_when_none():
    r = Result.loads(_result(1.9876).dumps())
    assert r.tests[1].measured == {"validation_loss": 1.9876, "protocol": lb.PROTOCOL}
    assert "measured" not in r.tests[0].to_json()  # most checks measure nothing: no key at all
    assert r.to_gradescope()["tests"][1]["extra_data"]["measured"] == {"validation_loss": 1.9876,
                                                                       "protocol": lb.PROTOCOL}


def test_the_board_ranks_verified_losses_per_tier_with_shared_ranks(tmp_path):
    entries, counts = lb.collect(_grades(tmp_path, COHORT), "07-gpt")
    board = lb.ranked(entries)
    assert list(board) == ["cpu", "gpu"]
    assert [(rank, e.student, e.value) for rank, e in board["cpu"]] == [
        (1, "ada", 1.991), (1, "cy", 1.991), (3, "bo", 2.05), (4, "<b onmouseover=alert(1)>x", 2.07),
        (5, "dee", 2.31)]
    assert [(rank, e.student) for rank, e in board["gpu"]] == [(1, "fay"), (2, "gus")]
    assert [e.passed for _, e in board["cpu"]] == [True, True, True, True, False]
    # 06-bert's result is another assignment's; the grader error is not a grade; eve has no verified loss
    assert counts == {"results": 9, "ranked": 7, "no_value": 1, "stale": 0, "grader_error": 1, "unreadable": 0}


def test_a_loss_measured_before_the_weights_were_read_first_is_not_ranked(tmp_path):
    """A result of the old contract (no ``protocol``, or an older one: the model saw the evaluation batch before
    its weights were read, so an untrained model could fit itself to it and rank first) is stale: not on the
    board, counted, and the page says to grade it again."""
    cohort = {"ada": _result(1.99), "old": _result(1.60, protocol=1), "older": _result(1.55)}
    cohort["older"].tests[1].measured.pop("protocol")
    grades = _grades(tmp_path, cohort)
    entries, counts = lb.collect(grades, "07-gpt")
    assert [e.student for e in entries] == ["ada"] and counts["stale"] == 2 and counts["ranked"] == 1
    page = lb.build(grades, "07-gpt", show="student")[0].read_text()
    assert ">old<" not in page and ">older<" not in page and "2 results graded by an older version" in page


def test_the_page_escapes_names_loads_nothing_and_marks_runs_above_the_threshold(tmp_path):
    grades = _grades(tmp_path, COHORT)
    path, _ = lb.build(grades, "07-gpt", show="student")
    page = path.read_text()
    assert path == grades / "leaderboard.html"
    assert "<b onmouseover" not in page and "&lt;b onmouseover=alert(1)&gt;x" in page and "<script" not in page
    assert not re.search(r"(src|href)=", page)  # self-contained: nothing fetched
    assert page.count("<table>") == 2 and "CPU tier (5 students)" in page and "GPU tier (2 students)" in page
    assert page.index(">ada<") < page.index(">bo<") < page.index(">dee<")
    assert "2.3100" in page and "above it" in page
    assert "1 graded submission without a verified result" in page
    assert "hal" not in page and "ivy" not in page


def test_the_page_names_the_threshold_a_check_recorded(tmp_path):
    grades = _grades(tmp_path, {"ada": _result(1.991, threshold=2.08),
                                "dee": _result(2.31, passed=False, threshold=2.08)})
    page = lb.build(grades, "07-gpt", show="student")[0].read_text()
    assert "passed (at most 2.08)" in page and "above 2.08" in page and "above it" not in page


def test_pseudonyms_are_stable_keyed_and_private_and_names_override_them(tmp_path):
    grades = _grades(tmp_path, COHORT)
    first = lb.build(grades, "07-gpt")[0].read_text()
    key = grades / lb.KEY_FILE
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert lb.build(grades, "07-gpt")[0].read_text() == first  # same key: same pseudonyms
    shown = re.findall(r"anon-[0-9a-f]{8}", first)
    assert len(shown) == len(set(shown)) == 7 and "ada" not in first
    other = lb.pseudonym("ada", b"another key")
    assert other not in first  # without the key, a pseudonym cannot be recomputed from the id
    names = tmp_path / "names.csv"
    names.write_text("student,shown\nada,Lovelace\nnobody,Ghost\n")
    page = lb.build(grades, "07-gpt", names=names)[0].read_text()
    assert "Lovelace" in page and "Ghost" not in page and len(re.findall(r"anon-[0-9a-f]{8}", page)) == 6


def test_the_command_writes_the_page_and_says_what_it_ranked(tmp_path, capsys):
    grades = _grades(tmp_path, COHORT)
    out = tmp_path / "board.html"
    assert main(["leaderboard", "07-gpt", str(grades), "--out", str(out), "--course", str(ROOT)]) == 0
    said = capsys.readouterr().out
    assert out.exists() and "7 of 9 results ranked (1 no value, 1 grader error)" in said
    assert main(["leaderboard", "07-gpt", str(tmp_path / "nowhere"), "--course", str(ROOT)]) == 1
    assert "holds no students/ folder" in capsys.readouterr().err
    assert main(["leaderboard", "99-nothing", str(grades), "--course", str(ROOT)]) == 1


def test_an_empty_cohort_gets_a_page_that_says_so(tmp_path):
    grades = tmp_path / "grades"
    (grades / "students").mkdir(parents=True)
    path, counts = lb.build(grades, "07-gpt")
    assert counts["ranked"] == 0 and "No verified result yet." in path.read_text()


@pytest.mark.parametrize("show", ["nickname", ""])
def test_an_unknown_show_mode_is_refused(tmp_path, show):
    with pytest.raises(ValueError, match="show must be one of"):
        lb.build(_grades(tmp_path, COHORT), "07-gpt", show=show)
