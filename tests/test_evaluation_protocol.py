"""The evaluation protocol of a graded training run: weights first, evaluation data second (issue 37, class 1).

A graded run used to be one probe: the student's training function ran, the
trained model was run on the evaluation batch, and *then* its weights were
read. Everything the student's code did between seeing the evaluation
inputs and the reading of its weights reached the score: a model that fits
itself to the batch inside its forward (test-time training on held-out
text), a training function that finds the evaluation batch in its caller's
frame, a classifier that guesses labels from the order of the rows. Now the
weights cross the boundary before any evaluation input exists in the worker
(`training.train_then_evaluate`), the trusted model scores *those* weights,
and the student's own logits only have to agree with them.

Each attack below earned the score under the old order (each test shows it:
the same attack scored with the weights read after the evaluation) and
earns nothing now, with a message that names the protocol. The attacks run
in a real worker (the probes as they run for a student), on tasks small
enough for CI; `LMCOURSE_ALL_TRAINING=1` adds the same attack on the real
07-gpt and 03-rnnlm training checks through the whole grader.
"""

from __future__ import annotations

import os
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading import grade_notebook, training
from lmcourse.grading.sandbox import Limits, Worker
from lmcourse.grading.sandbox.inside import probes
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent
V = 12

# A successor task: after id x comes (x + 1) % V. The training function below never learns it; what the
# evaluation batch shows is enough to.
STREAM = np.tile(np.arange(V), 300)[:3000]
EVAL_X, EVAL_Y = training.lanes_of(STREAM, 4)


def _loss(logits, targets):
    return float(torch.nn.functional.cross_entropy(torch.from_numpy(logits).flatten(0, 1),
                                                   torch.from_numpy(targets).flatten()))


class Table(nn.Module):
    """The prescribed architecture of the small task: a (V, V) table of next-token logits (the trusted model)."""

    def __init__(self, vocab_size=V):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(vocab_size, vocab_size))

    def forward(self, ids):
        return self.table[ids]


TRUSTED = training.TrustedModel(build=lambda: Table(V), name="Table(vocab_size)")
RUN = dict(fn="train", config=dict(vocab_size=V), vocab_size=V, train_ids=STREAM, eval_x=EVAL_X, eval_y=EVAL_Y,
           loss_fn=_loss, threshold=0.5, what="train(...)", trusted=TRUSTED)

HEADER = '''
import sys
import threading
import numpy as np
import torch
from torch import nn


class Table(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(vocab_size, vocab_size))

    def forward(self, ids):
        return self.table[ids]


def _fit(table, ids):
    """The most frequent successor of each id in `ids`, written into `table` (a causal model of that batch)."""
    counts = torch.zeros_like(table)
    counts.index_put_((ids[:, :-1].reshape(-1), ids[:, 1:].reshape(-1)), torch.ones(ids[:, 1:].numel()),
                      accumulate=True)
    with torch.no_grad():
        table.copy_(12.0 * nn.functional.one_hot(counts.argmax(1), table.shape[1]))
'''

# (a) test-time training: untrained weights; the forward fits them to whatever batch it is shown in eval mode.
FITS_IN_FORWARD = HEADER + '''
class Adaptive(Table):
    def forward(self, ids):
        if not self.training:
            _fit(self.table, ids)
        return super().forward(ids)


def train(train_ids, vocab_size):
    return Adaptive(vocab_size)
'''

# (b) the same through another entry point: a forward pre-hook, the model's forward itself untouched.
FITS_IN_A_HOOK = HEADER + '''
def train(train_ids, vocab_size):
    model = Table(vocab_size)
    model.register_forward_pre_hook(lambda m, args: _fit(m.table, args[0]) if not m.training else None)
    return model
'''

# (c) the training function reads the evaluation batch out of its caller's frame (the probe's arguments).
READS_THE_CALLER = HEADER + '''
def train(train_ids, vocab_size):
    model = Table(vocab_size)
    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("eval_inputs"), np.ndarray):
            _fit(model.table, torch.from_numpy(frame.f_locals["eval_inputs"]))
            break
        frame = frame.f_back
    return model
'''

# (d) a thread left running by the training function: it waits until the model is put in eval mode, then fits
# it to the first batch it is shown.
LEAVES_A_THREAD = HEADER + '''
class Watched(Table):
    seen = None

    def forward(self, ids):
        if not self.training:
            self.seen = ids
            self.done.wait(5)
        return super().forward(ids)


def train(train_ids, vocab_size):
    model = Watched(vocab_size)
    model.done = threading.Event()

    def watch():
        while model.seen is None:
            threading.Event().wait(0.001)
        _fit(model.table, model.seen)
        model.done.set()

    threading.Thread(target=watch, daemon=True).start()
    return model
'''

ATTACKS = {
    "(a) the forward fits the weights to the evaluation batch": FITS_IN_FORWARD,
    "(b) a forward pre-hook fits them": FITS_IN_A_HOOK,
    "(c) training reads the evaluation batch from its caller's frame": READS_THE_CALLER,
    "(d) a thread left running fits them once the model is evaluated": LEAVES_A_THREAD,
}


def _module(source: str) -> types.ModuleType:
    module = types.ModuleType("attack")
    exec(compile(source, "attack", "exec"), module.__dict__)
    return module


def _old_order(module, batch: training.EvalBatch) -> dict:
    """What the single probe used to do, in this process: train, run the model on the evaluation batch inside
    the same call (its arguments in the frame), then read the weights."""
    def probe(fn, eval_inputs):
        model = getattr(module, fn)(**RUN["config"], train_ids=STREAM)
        model.eval()
        with torch.no_grad():
            logits = model(torch.from_numpy(eval_inputs))
        return {"logits": logits.numpy(), "state_dict": {k: v.numpy().copy()
                                                          for k, v in nn.Module.state_dict(model).items()}}
    return probe("train", batch.inputs)


@pytest.fixture(scope="module")
def workers():
    made = {}
    try:
        for name, source in ATTACKS.items():
            made[name] = Worker(source, limits=Limits(call_timeout=60, import_timeout=90, total_timeout=300))
            assert made[name].import_error is None, made[name].import_error
        yield made
    finally:
        for w in made.values():
            w.close()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_attack_on_the_evaluation_scores_nothing(attack, workers):
    # The attack worked under the old order: the weights read after the evaluation give a near-perfect loss
    # through the trusted model, and the student's logits agree with them.
    batch = training.EvalBatch.build(EVAL_X, V)
    old = _old_order(_module(ATTACKS[attack]), batch)
    model = training.load_trusted(TRUSTED, old["state_dict"], what="old")
    trusted = training.trusted_logits(TRUSTED, model, EVAL_X)
    assert _loss(trusted, EVAL_Y) < 0.1 < RUN["threshold"]
    # Now: the weights are read before the batch exists in the worker.
    with pytest.raises(AssertionError) as failed:
        training.graded_lm_run(workers[attack], **RUN)
    message = str(failed.value)
    assert "not what its weights compute" in message or "validation loss is" in message, message
    assert "def " not in message and "_fit" not in message


def test_an_honest_model_keeps_its_score_through_the_two_halves():
    honest = HEADER + '''
def train(train_ids, vocab_size):
    model = Table(vocab_size)
    _fit(model.table, torch.from_numpy(np.asarray(train_ids)).reshape(1, -1))
    return model
'''
    with Worker(honest, limits=Limits(call_timeout=60, import_timeout=90, total_timeout=300)) as w:
        outcome = training.graded_lm_run(w, **RUN)
    assert outcome.trusted and outcome.loss < 0.01


def test_the_evaluation_rows_of_a_sequence_to_sequence_run_reach_the_model_after_its_weights():
    """(e) 04/05's shape of run: the decoder's inputs come as a keyword (teacher forcing); a model that copies
    them into its weights in eval mode is caught the same way, through `train_then_evaluate` directly."""
    source = HEADER + '''
class Copier(Table):
    def forward(self, src, tgt_in=None):
        if not self.training:
            _fit(self.table, tgt_in)
        return self.table[tgt_in]


def train(**settings):
    return Copier(12)
'''
    batch = training.EvalBatch.build(EVAL_X, V)
    with Worker(source, limits=Limits(call_timeout=60, import_timeout=90, total_timeout=300)) as w:
        out = training.train_then_evaluate(w, fn="train", config={}, eval_inputs=np.zeros((len(batch.inputs), 1)),
                                           eval_kwargs={"tgt_in": batch.inputs}, what="train()")
    assert not np.any(out["state_dict"]["table"])  # the weights the grader scores: untouched by the batch
    model = training.load_trusted(TRUSTED, out["state_dict"], what="train()")
    expected = training.trusted_logits(TRUSTED, model, EVAL_X)
    with pytest.raises(AssertionError, match="not what its weights compute"):
        training.check_match(batch.held_out(out["logits"]), expected, what="train()", name="Table")


def test_fine_tuning_rows_carry_no_label_in_their_order():
    """(f) 06-bert: the held-out examples alternate 0, 1, 0, 1; the evaluation rows are in a secret order, so a
    classifier that reads the label from a row's place guesses. A joint statistic over many grades: the
    accuracy of 'row index is odd' stays near one half, and the copies are not the last rows."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bert_training_checks", ROOT / "autograder/06-bert/test_training.py")
    checks = importlib.util.module_from_spec(spec)
    import sys
    sys.path.insert(0, str(ROOT / "autograder/06-bert"))
    try:
        spec.loader.exec_module(checks)
    finally:
        sys.path.remove(str(ROOT / "autograder/06-bert"))
    L, T = 200, 12
    labels = np.arange(L) % 2
    ids = np.full((L, T), checks.PAD_ID)
    ids[:, :6] = 7  # every row has padding, so any can be copied
    hits, tail_copies, grades = 0, 0, 200
    for g in range(grades):
        rows, mask, copies, originals = checks._with_padding_copies(ids, training.secret_rng())
        assert sorted(originals.tolist() + [c for c, _ in copies]) == list(range(L + checks.COPIES))
        hits += int(((originals % 2) == labels).sum())
        tail_copies += sum(c >= L for c, _ in copies)
        for copy, source in copies:
            assert np.array_equal(mask[copy], mask[source])
    accuracy = hits / (grades * L)
    assert abs(accuracy - 0.5) < 0.02, accuracy  # sd of the mean: 0.0025; the old order gave 1.0
    assert tail_copies < grades * checks.COPIES * 0.2  # the old order put all of them last


# --------------------------------------------------------------------------- the real checks (opt-in)

GPT_FITS_ON_EVALUATION = '''
class _Adaptive(GPT):
    def forward(self, idx, cache=None):
        if not self.training and not getattr(self, "_fitted", False):
            self._fitted = True
            with torch.enable_grad():
                self.train()
                opt = torch.optim.AdamW(self.parameters(), lr=3e-3)
                for _ in range(300):  # mini-batches of the validation windows it was shown
                    rows = idx[torch.randint(0, idx.shape[0], (32,))]
                    logits = super().forward(rows[:, :-1])
                    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                self.eval()
        return super().forward(idx)


def train_gpt(train_ids, vocab_size, block_size=64, d_model=128, n_heads=4, n_layers=4, device="cpu", **settings):
    return _Adaptive(vocab_size, block_size, d_model, n_heads, n_layers)
'''


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LMCOURSE_ALL_TRAINING"), reason="opt-in: LMCOURSE_ALL_TRAINING=1 "
                    "(the red team's attack on 07-gpt's training check, through the whole grader)")
def test_an_untrained_gpt_that_fits_itself_to_the_validation_text_scores_zero(tmp_path, mirror):
    import test_unit07_gpt as u7

    nb = submission_from_solution(ROOT, "07-gpt", tmp_path, replace={"train_gpt": GPT_FITS_ON_EVALUATION.strip()})
    names = {v for k, v in vars(u7).items() if k.isupper() and isinstance(v, str)}
    result = grade_notebook(ROOT, "07-gpt", nb, tier="cpu", exclude=names - {u7.TRAINING})
    check = next(t for t in result["tests"] if t["name"] == u7.TRAINING)
    assert check["score"] == 0, check
    assert "not what its weights compute" in check["output"], check["output"]
    assert not (check.get("measured") or {}).get("validation_loss")  # nothing for the leaderboard
