"""The GPU tier of every graded training run, on a machine with CUDA (skipped where there is none).

The grader picks the GPU tier when it finds CUDA (`lmcourse grade --tier
auto`, the default). A tier is only trustworthy once it has been seen to give
an honest submission full marks *and* to fail the known-wrong trainers on a
real GPU, so this file grades, through the real grader (sandboxed worker with
the GPU exposed, hidden checks, training contract), the solution and the
known-wrong variants that the training check is written to catch, with
``tier="gpu"``. Each run prints the value the check measured (a loss, an accuracy) and its
threshold, the numbers a calibration note quotes.

Units with a GPU tier: 03-rnnlm (`train_lm`: a 256-unit LSTM, 1,000 steps; a validation loss, at most the
threshold), 04-attention (`train_reverser`: a 256-unit GRU encoder-decoder with attention, 2,000 steps;
an exact-match accuracy, at least the threshold) and 05-transformer (`train_transformer`: a 2+2-layer
pre-norm transformer of width 128, 1,000 steps; an exact-match accuracy on dates) and 06-bert (`pretrain_mlm`:
the CPU tier's BERT of width 64, 4,000 steps; a held-out masked-LM loss, at most the threshold; its fine-tuning
check, graded in the same way, is left out here: this file holds one training check per unit) and 07-gpt
(`train_gpt`: a 6-layer GPT of width 384 on Shakespeare's characters, 2,000 steps with bfloat16 autocast; a
validation loss, at most the threshold).
02-word2vec's seven training checks are short planted-cluster runs with no
tier of their own; 01-ngrams trains nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

import test_unit03_rnnlm as u3
import test_unit04_attention as u4
import test_unit05_transformer as u5
import test_unit06_bert as u6
import test_unit07_gpt as u7
from lmcourse.grading import grade_notebook, training
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the GPU tier of a training "
                                 "check runs only where the grader finds a GPU")]

# The GPU thresholds of the hidden checks, repeated here: the solution's test fails unless the grade applied
# exactly this value, so the two cannot drift apart unnoticed.
GPU_THRESHOLD_04 = 0.50
GPU_THRESHOLD_05 = 0.90
GPU_THRESHOLD_06 = 4.80
GPU_THRESHOLD_07 = 1.65

# unit -> (the training check's name, its GPU threshold, the known-wrong variants it must fail)
TIERS = {
    "03-rnnlm": (u3.TRAINING, 1.68, {name: v for name, v in u3.VARIANTS.items() if u3.TRAINING in v[2]
                                     and v[0] in ("train_lm", "batchify")}),
    "04-attention": (u4.TRAINING, GPU_THRESHOLD_04, {name: v for name, v in u4.VARIANTS.items()
                                                     if u4.TRAINING in v[2]}),
    "05-transformer": (u5.TRAINING, GPU_THRESHOLD_05, {name: v for name, v in u5.VARIANTS.items()
                                                       if u5.TRAINING in v[2]}),
    "06-bert": (u6.PRETRAIN, GPU_THRESHOLD_06, {name: v for name, v in u6.VARIANTS.items() if u6.PRETRAIN in v[2]}),
    "07-gpt": (u7.TRAINING, GPU_THRESHOLD_07, {name: v for name, v in u7.VARIANTS.items()
                                               if u7.TRAINING in v[2] and v[0] == "train_gpt"}),
}


@pytest.fixture
def measured(monkeypatch):
    """The (value, threshold) pairs that `training.check_loss` (a loss) and `training.check_at_least` (an
    accuracy) judged during the test."""
    seen: list[tuple[float, float]] = []
    for name in ("check_loss", "check_at_least"):
        real = getattr(training, name)

        def record(value, threshold, *, _real=real, **kwargs):
            seen.append((float(value), float(threshold)))
            return _real(value, threshold, **kwargs)

        monkeypatch.setattr(training, name, record)
    return seen


def _only_training(aid: str, result_names: set[str]) -> set[str]:
    return result_names - {TIERS[aid][0]}


@pytest.fixture(scope="module")
def check_names():
    """Every check's name per unit, from a CPU-tier grade of the release (fast: every check fails at once)."""
    from lmcourse.instructor.testing import released_notebook
    import tempfile
    names = {}
    for aid in TIERS:
        with tempfile.TemporaryDirectory() as tmp:
            r = grade_notebook(ROOT, aid, released_notebook(ROOT, aid, Path(tmp)), tier="cpu")
        names[aid] = {t["name"] for t in r["tests"]}
    return names


@pytest.mark.parametrize("aid", list(TIERS))
def test_solution_earns_full_marks_on_the_gpu_tier(aid, tmp_path, measured):
    name, threshold, _ = TIERS[aid]
    nb = submission_from_solution(ROOT, aid, tmp_path)
    start = time.perf_counter()
    r = grade_notebook(ROOT, aid, nb, tier="gpu")
    seconds = time.perf_counter() - start
    print(f"\n{aid} solution, GPU tier ({torch.cuda.get_device_name(0)}): {r['score']}/{r['max_score']} in "
          f"{seconds:.1f} s; measured {measured} (value, threshold)")
    failed = {t["name"]: t.get("output", "") for t in r["tests"] if t["score"] < t["max_score"]}
    assert not failed, failed
    assert r["status"] == "ok" and r["score"] == r["max_score"]
    assert [t for t in measured if t[1] == threshold], "the GPU tier's threshold was never applied"


@pytest.mark.parametrize("aid,variant", [(aid, v) for aid, (_, _, vs) in TIERS.items() for v in vs])
def test_known_wrong_trainer_fails_the_gpu_tier(aid, variant, tmp_path, measured, check_names):
    name, threshold, variants = TIERS[aid]
    function, source, _ = variants[variant]
    nb = submission_from_solution(ROOT, aid, tmp_path, replace={function: source})
    start = time.perf_counter()
    r = grade_notebook(ROOT, aid, nb, tier="gpu", exclude=_only_training(aid, check_names[aid]))
    seconds = time.perf_counter() - start
    (test,) = [t for t in r["tests"] if t["name"] == name]
    print(f"\n{aid} variant {variant!r}, GPU tier: {test['score']}/{test['max_score']} in {seconds:.1f} s; "
          f"measured {measured} (value, threshold); message: {test.get('output', '')[-300:]}")
    assert r["status"] == "ok" and test["score"] == 0
