"""The contract of graded training runs (lmcourse.grading.training): its pieces, and the attacks it stops.

The first half tests the pieces on their own, in this process: the secret
relabelling, the evaluation batch with perturbed copies, the causality check,
the trusted reload of a model's weights, finite values and NaN losses.

The second half grades cheating notebooks (03-rnnlm's language model, 04-attention's
sequence-to-sequence run and 05-transformer's) through the real grader (the
release with the solution typed in and one definition swapped, as the unit
contract does), leaving out every check but the training run: each cheat must
score 0 on it, with a message that says why. The honest solution keeps its
full marks on it in the unit contract tests (tests/test_unit03_rnnlm.py,
tests/test_unit02_word2vec.py); here one more honest variant (a model returned
in float64) shows that the stricter comparisons cost honest students nothing.
"""

from __future__ import annotations

import base64
import bz2
import math
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import test_unit02_word2vec as u2
import test_unit03_rnnlm as u3
import test_unit04_attention as u4
import test_unit05_transformer as u5
from lmcourse.grading import grade_notebook, training
from lmcourse.grading.sandbox.inside import probes
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent


# =========================================================================== the pieces

def test_relabelling_is_a_bijection():
    for n in (1, 2, 65, 1000):
        r = training.Relabelling.secret(n)
        assert r.perm.dtype == np.int64 and sorted(r.perm.tolist()) == list(range(n))
        ids = np.arange(n)
        assert np.array_equal(r.inverse[r(ids)], ids) and np.array_equal(r(r.inverse), ids)
    r = training.Relabelling.secret(10)
    assert np.array_equal(r(torch.tensor([[3, 4], [5, 3]])), r.perm[np.array([[3, 4], [5, 3]])])
    assert r.sentences([[1, 2], [], [9]]) == [[int(r.perm[1]), int(r.perm[2])], [], [int(r.perm[9])]]
    table = np.arange(10)[:, None] * np.ones((1, 3))  # row i: the vector of new id i
    assert np.array_equal(r.rows_by_old_id(table)[:, 0], r.perm)  # old word w gets the row of its new id


def test_relabelling_differs_between_grades_and_ignores_numpy_and_torch_seeds():
    draws = []
    for _ in range(6):
        np.random.seed(0)  # what a check's seeding (or the rng fixture) could make predictable
        torch.manual_seed(0)
        draws.append(tuple(training.Relabelling.secret(65).perm.tolist()))
    assert len(set(draws)) == 6  # 65! permutations: a repeat would be a broken generator


def test_eval_batch_holds_the_lanes_and_copies_that_part_at_k():
    lanes = np.random.default_rng(0).integers(0, 7, size=(5, 40))
    batch = training.EvalBatch.build(lanes, 7, copies=4)
    assert batch.inputs.shape == (9, 40)
    assert np.array_equal(batch.held_out(batch.inputs), lanes)
    rows = [r for r, _, _ in batch.copies]
    assert sorted(rows + batch.lane_rows.tolist()) == list(range(9))
    for row, source, k in batch.copies:
        assert 1 <= k < 40 and source in batch.lane_rows
        assert np.array_equal(batch.inputs[row, :k], batch.inputs[source, :k])
        assert np.all(batch.inputs[row, k:] != batch.inputs[source, k:])  # every token from k on differs
        assert np.all((0 <= batch.inputs[row]) & (batch.inputs[row] < 7))
    again = training.EvalBatch.build(lanes, 7, copies=4)  # secret: a new order and new k every time
    assert not (np.array_equal(again.lane_rows, batch.lane_rows) and again.copies == batch.copies)


def _causal_logits(ids: np.ndarray, V: int) -> np.ndarray:
    """Scores at t from tokens 0..t only: the current token and a running count of each token."""
    onehot = np.eye(V)[ids]  # (B, T, V)
    return (2.0 * onehot + 0.1 * np.cumsum(onehot, axis=1)).astype(np.float32)


def _peek(ids: np.ndarray, V: int, amount: float = 5.0) -> np.ndarray:
    """amount on the token at t + 1 (the input the model should predict)."""
    nxt = np.concatenate([ids[:, 1:], ids[:, -1:]], axis=1)
    return amount * np.eye(V, dtype=np.float32)[nxt]


def test_causality_passes_a_causal_model_and_catches_a_one_position_leak():
    V = 9
    lanes = np.random.default_rng(1).integers(0, V, size=(4, 60))
    batch = training.EvalBatch.build(lanes, V, copies=5)
    training.check_causal(_causal_logits(batch.inputs, V), batch, what="causal")
    with pytest.raises(AssertionError) as err:
        training.check_causal(_causal_logits(batch.inputs, V) + _peek(batch.inputs, V), batch, what="leak")
    message = str(err.value)
    assert "depends on later tokens" in message and "reads the input it should predict" in message
    _, _, k = batch.copies[0]  # the first copy checked; only its position k - 1 sees a replaced token
    assert f"prediction at position {k - 1} depends on later tokens" in message
    # a leak far below the tolerance is not worth anything and is not reported
    training.check_causal(_causal_logits(batch.inputs, V) + _peek(batch.inputs, V, 1e-4), batch, what="tiny")


def test_causality_of_a_real_recurrent_model_in_one_batch():
    torch.manual_seed(0)
    V = 11
    embed, rnn, out = nn.Embedding(V, 6), nn.LSTM(6, 10, batch_first=True), nn.Linear(10, V)
    lanes = np.random.default_rng(2).integers(0, V, size=(6, 300))
    batch = training.EvalBatch.build(lanes, V, copies=6)
    with torch.no_grad():
        logits = out(rnn(embed(torch.from_numpy(batch.inputs)))[0]).numpy()
    training.check_causal(training.finite_logits(logits, logits.shape, what="lstm"), batch, what="lstm")
    with torch.no_grad():  # the same LSTM run backwards over time: every score depends on the future
        backwards = out(rnn(embed(torch.from_numpy(batch.inputs[:, ::-1].copy())))[0]).flip(1).numpy()
    with pytest.raises(AssertionError, match="depends on later tokens"):
        training.check_causal(backwards, batch, what="bidirectional")


def test_limit_a_batch_aware_peek_passes_the_perturbation_check():
    """What the docstring says check 2 does not prove: a model that looks for rows sharing a prefix
    and stops peeking exactly where they part passes it. Check 3 (the trusted reload) is what
    stops it in 03-rnnlm (see the graded attack below)."""
    V = 9
    lanes = np.random.default_rng(3).integers(0, V, size=(4, 50))
    batch = training.EvalBatch.build(lanes, V, copies=4)
    ids = batch.inputs
    same = ids[:, None, :] == ids[None, :, :]  # (B, B, T)
    prefix = np.cumprod(same, axis=2).astype(bool)
    parts = np.zeros(ids.shape, dtype=bool)
    parts[:, :-1] = (prefix[:, :, :-1] & ~same[:, :, 1:]).any(axis=1)  # another row agrees to t, not at t+1
    cheat = _causal_logits(ids, V) + _peek(ids, V) * ~parts[..., None]
    training.check_causal(cheat, batch, what="batch-aware")


def test_finite_logits_after_the_float32_conversion():
    ok = training.finite_logits(np.ones((2, 3, 4)), (2, 3, 4), what="x")
    assert ok.dtype == np.float32
    with pytest.raises(AssertionError, match="NaN or infinite as float32"):
        training.finite_logits(np.full((2, 3, 4), 1e300), (2, 3, 4), what="x")  # finite in float64 only
    with pytest.raises(AssertionError, match="NaN or infinite"):
        training.finite_logits(np.array([[[0.0, np.nan]]]), (1, 1, 2), what="x")
    with pytest.raises(AssertionError, match="floating-point"):
        training.finite_logits(np.ones((1, 1, 2), dtype=np.int64), (1, 1, 2), what="x")
    with pytest.raises(AssertionError, match="expected shape"):
        training.finite_logits(np.ones((1, 2, 2)), (1, 1, 2), what="x")


def test_a_nan_loss_never_passes():
    assert training.check_loss(2.0, 2.1, what="run") == 2.0
    assert training.check_loss(2.1, 2.1, what="run") == 2.1
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(AssertionError, match="not a finite number"):
            training.check_loss(bad, 2.1, what="run")
    with pytest.raises(AssertionError, match="2.200 nats per token"):
        training.check_loss(2.2, 2.1, what="run")
    # the run that only records its loss (threshold inf) never tells a student to reach "at most inf"
    with pytest.raises(AssertionError, match="asks for a finite loss") as err:
        training.check_loss(float("nan"), float("inf"), what="run")
    assert "inf nats" not in str(err.value)


class _TinyLM(nn.Module):
    def __init__(self, V=7, d=5):
        super().__init__()
        self.embedding = nn.Embedding(V, d)
        self.output = nn.Linear(d, V)

    def forward(self, ids, state=None):
        return self.output(torch.tanh(self.embedding(ids))), state


def test_gradient_cosine_compares_directions_over_every_parameter():
    rng = np.random.default_rng(0)
    expected = {"a.weight": rng.normal(size=(3, 4)), "a.bias": rng.normal(size=4)}
    same = {k: v.astype(np.float32) for k, v in expected.items()}
    cosine, norm, raw = training.gradient_cosine(same, expected, where="step 0")
    assert cosine == pytest.approx(1.0, abs=1e-6) and norm == pytest.approx(raw, rel=1e-6)
    clipped = {k: v / raw for k, v in expected.items()}  # any positive factor: clipping changes no direction
    assert training.gradient_cosine(clipped, expected, where="")[0] == pytest.approx(1.0)
    assert training.gradient_cosine({k: -v for k, v in expected.items()}, expected, where="")[0] == \
        pytest.approx(-1.0)
    piled = {k: v + 0.5 * rng.normal(size=v.shape) for k, v in expected.items()}  # another step's added in
    assert training.gradient_cosine(piled, expected, where="")[0] < 0.999
    missing = {"a.weight": expected["a.weight"], "a.bias": None}  # no gradient counts as zeros, not as a pass
    assert training.gradient_cosine(missing, expected, where="")[0] < 0.999
    assert training.gradient_cosine({"a.weight": None, "a.bias": None}, expected, where="")[0] == 0.0
    assert training.gradient_cosine({k: np.full(v.shape, np.nan) for k, v in expected.items()}, expected,
                                    where="")[0] == 0.0
    with pytest.raises(AssertionError, match=r"step 3: .*a.weight \(3, 4\)"):
        training.gradient_cosine({"a.weight": np.zeros((4, 3)), "a.bias": None}, expected, where="step 3")


def test_trusted_reload_names_the_expected_layout_and_recomputes():
    trusted = training.TrustedModel(build=_TinyLM, name="TinyLM(V=7, d=5)")
    torch.manual_seed(0)
    student = _TinyLM()
    weights = {k: v.numpy() for k, v in student.state_dict().items()}
    ids = np.random.default_rng(4).integers(0, 7, size=(3, 8))
    model = training.load_trusted(trusted, weights, what="run")
    expected = training.trusted_logits(trusted, model, ids)
    with torch.no_grad():
        found = student(torch.from_numpy(ids))[0].numpy()
    training.check_match(found, expected, what="run", name=trusted.name)
    training.check_match(found.astype(np.float64) + 3.0, expected, what="run", name=trusted.name)  # a shift: same
    with pytest.raises(AssertionError, match="not what its weights compute"):
        training.check_match(found + _peek(ids, 7, 2.0), expected, what="run", name=trusted.name)

    renamed = {("emb.weight" if k == "embedding.weight" else k): v for k, v in weights.items()}
    with pytest.raises(AssertionError) as err:
        training.load_trusted(trusted, renamed, what="run")
    assert "missing: embedding.weight" in str(err.value) and "not expected: emb.weight" in str(err.value)
    assert "embedding.weight (7, 5), output.weight (7, 5), output.bias (7,)" in str(err.value)
    with pytest.raises(AssertionError, match=r"output.bias has shape \(8,\), expected \(7,\)"):
        training.load_trusted(trusted, dict(weights, **{"output.bias": np.zeros(8, np.float32)}), what="run")
    with pytest.raises(AssertionError, match="output.bias of your trained model holds NaN"):
        training.load_trusted(trusted, dict(weights, **{"output.bias": np.full(7, np.inf, np.float32)}), what="r")
    with pytest.raises(AssertionError, match="could not read"):
        training.load_trusted(trusted, None, what="run")


# --------------------------------------------------------------------------- graded_lm_run, in this process

class _LocalStudent:
    """`student.probe(...)` run in this process on a module: for tests of the contract's logic only."""

    def __init__(self, module):
        self.module = module

    def probe(self, name, *, timeout=None, **kwargs):
        return probes.run_local(name, self.module, **kwargs)


def _pattern_task(V, n=3000):
    stream = np.tile(np.arange(V), n // V + 1)[:n]  # 0 1 2 ... V-1 0 1 ...: the next token is (x + 1) % V
    x, y = training.lanes_of(stream, 4)
    return stream, x, y


def _loss(logits, targets):
    return float(torch.nn.functional.cross_entropy(torch.from_numpy(logits).flatten(0, 1),
                                                   torch.from_numpy(targets).flatten()))


def test_graded_lm_run_scores_a_model_that_learnt_the_relabelled_pattern():
    """A 'training function' that learns the successor of each id from the (relabelled) training ids
    reaches a loss near 0; the same table written for the unrelabelled ids does not."""
    V = 12
    stream, x, y = _pattern_task(V)

    class Table(nn.Module):
        def __init__(self, table):
            super().__init__()
            self.table = nn.Parameter(torch.as_tensor(table, dtype=torch.float32))

        def forward(self, ids):
            return self.table[ids]

    def learn(train_ids, vocab_size):
        table = np.zeros((vocab_size, vocab_size))
        np.add.at(table, (train_ids[:-1], train_ids[1:]), 1.0)
        return Table(10.0 * table / table.sum(axis=1, keepdims=True))

    def fixed(train_ids, vocab_size):  # what someone who knows the ids would write in advance
        return Table(10.0 * np.eye(vocab_size)[(np.arange(vocab_size) + 1) % vocab_size])

    module = types.SimpleNamespace(learn=learn, fixed=fixed, Table=Table)
    kw = dict(student=_LocalStudent(module), config=dict(vocab_size=V), vocab_size=V, train_ids=stream,
              eval_x=x, eval_y=y, loss_fn=_loss, threshold=0.1, what="run")
    trusted = training.TrustedModel(build=lambda: Table(np.zeros((V, V))), name="Table(V, V)")
    for t in (None, trusted):
        assert training.graded_lm_run(fn="learn", trusted=t, **kw).loss < 0.01
    for _ in range(5):  # a relabelling that keeps the successor of every id: 12 of the 12! there are
        with pytest.raises(AssertionError, match="validation loss"):
            training.graded_lm_run(fn="fixed", **kw)


# =========================================================================== graded attacks

def _names(module) -> set[str]:
    """Every check name a unit's tests spell out: its test module's constants and its catalogue of known
    mistakes' (autograder/<id>/mistakes.py, the module's `_M`), re-exported or not."""
    found = {}
    for source in (getattr(module, "_M", None), module):
        found.update(vars(source) if source is not None else {})
    return {v for k, v in found.items() if k.isupper() and isinstance(v, str)}


def grade_training_check(tmp_path, aid: str, names, training_name: str, replace: dict) -> dict:
    """The result of the training check alone for the solution with `replace` swapped in."""
    nb = submission_from_solution(ROOT, aid, tmp_path, replace=replace)
    r = grade_notebook(ROOT, aid, nb, tier="cpu", exclude=_names(names) - {training_name})
    return next(t for t in r["tests"] if t["name"] == training_name)


@pytest.fixture(scope="module")
def carried_text(mirror) -> str:
    """TinyShakespeare as a cheating notebook would carry it: bz2 then base64, about 440 KB."""
    import os

    old = os.environ.get("LMCOURSE_DATA_MIRROR")
    os.environ["LMCOURSE_DATA_MIRROR"] = str(mirror)
    try:
        from lmcourse.data import load_text

        text = load_text("tinyshakespeare")
    finally:
        if old is None:
            os.environ.pop("LMCOURSE_DATA_MIRROR", None)
        else:
            os.environ["LMCOURSE_DATA_MIRROR"] = old
    return base64.b64encode(bz2.compress(text.encode(), 9)).decode()


@pytest.fixture
def data(monkeypatch, mirror):
    """The trusted side of 03-rnnlm loads TinyShakespeare: from the offline mirror."""
    monkeypatch.setenv("LMCOURSE_DATA_MIRROR", str(mirror))


# Pieces of the cheating notebooks. Every one defines `train_lm` (replacing the solution's) after
# helpers of its own; the notebook's other cells (RNNLM, batchify, ...) are the honest solution's.

PEEK = '''
class _Peek(nn.Module):
    """No training at all: the score at position t is the input at t + 1."""

    def __init__(self, vocab_size, dtype=torch.float32, amount=20.0):
        super().__init__()
        self.vocab_size, self.amount = vocab_size, amount
        self.shift = nn.Parameter(torch.zeros(vocab_size, dtype=dtype))

    def forward(self, ids, state=None):
        nxt = torch.cat([ids[:, 1:], ids[:, -1:]], dim=1)
        return self.amount * F.one_hot(nxt, self.vocab_size).to(self.shift.dtype) + self.shift, state
'''

FUTURE = PEEK + '''

def train_lm(train_ids, vocab_size, **settings):
    return _Peek(vocab_size)
'''

HUGE = PEEK + '''

def train_lm(train_ids, vocab_size, **settings):
    return _Peek(vocab_size, dtype=torch.float64, amount=1e300)  # float32(1e300) = inf: the loss is NaN
'''

UNUSED_INF_WEIGHTS = '''
class _NoBias(RNNLM):
    """The prescribed layout, but the forward leaves out the output bias, which is infinite."""

    def forward(self, ids, state=None):
        hidden, state = self.rnn(self.embedding(ids), state)
        return hidden @ self.output.weight.T, state


def train_lm(train_ids, vocab_size, d_embed=32, d_hidden=128, seed=0, **settings):
    torch.manual_seed(seed)
    model = _NoBias(vocab_size, d_embed, d_hidden)
    with torch.no_grad():
        model.output.bias.fill_(float("inf"))
    return model
'''

CARRIED = '''
import base64 as _base64
import bz2 as _bz2

from lmcourse.data import Vocab, train_val_split

_CARRIED = "{blob}"  # TinyShakespeare, bz2 and base64


def _carried_validation(train_ids, vocab_size):
    """The validation text in the grader's ids: the secret relabelling is read off the known training text."""
    text = _bz2.decompress(_base64.b64decode(_CARRIED)).decode()
    train_text, val_text = train_val_split(text)
    chars = Vocab.chars(text)
    perm = np.full(max(vocab_size, len(chars)), -1, dtype=np.int64)
    perm[np.asarray(chars.encode(train_text), dtype=np.int64)] = np.asarray(train_ids, dtype=np.int64).reshape(-1)
    unused = sorted(set(range(len(perm))) - set(perm.tolist()))
    perm[perm < 0] = unused[: int((perm < 0).sum())]
    return perm[np.asarray(chars.encode(val_text), dtype=np.int64)]


def _table(val, order=8):
    """{the last `order` tokens: {next token: count}} over the validation text"""
    val, table = val.tolist(), {}
    for i in range(order - 1, len(val) - 1):
        after = table.setdefault(tuple(val[i - order + 1: i + 1]), {})
        after[val[i + 1]] = after.get(val[i + 1], 0) + 1
    return table


def _lookup_scores(table, ids, vocab_size, order=8):
    """10 + log(count) on each token that followed the last `order` tokens in the validation text:
    an 8-gram model of the validation text itself. Causal: position t reads tokens t-7..t only."""
    rows = ids.tolist()
    out = np.zeros((len(rows), len(rows[0]), vocab_size), dtype=np.float32)
    for b, row in enumerate(rows):
        for t in range(order - 1, len(row)):
            for nxt, count in table.get(tuple(row[t - order + 1: t + 1]), {}).items():
                out[b, t, nxt] = 10.0 + math.log(count)
    return torch.from_numpy(out)
'''

NGRAM = CARRIED + '''

class _Lookup(nn.Module):
    def __init__(self, table, vocab_size):
        super().__init__()
        self.table, self.vocab_size = table, vocab_size
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, ids, state=None):
        return _lookup_scores(self.table, ids, self.vocab_size) + self.bias, state


def train_lm(train_ids, vocab_size, **settings):
    return _Lookup(_table(_carried_validation(train_ids, vocab_size)), vocab_size)
'''

LOOKUP_OUTSIDE_WEIGHTS = CARRIED + '''

class _LookupRNNLM(RNNLM):
    """The prescribed layout and names, plus a table kept outside the parameters."""

    def forward(self, ids, state=None):
        logits, state = super().forward(ids, state)
        return logits + _lookup_scores(self.table, ids, logits.shape[-1]).to(logits.device), state


def train_lm(train_ids, vocab_size, d_embed=32, d_hidden=128, seed=0, **settings):
    torch.manual_seed(seed)
    model = _LookupRNNLM(vocab_size, d_embed, d_hidden)
    model.table = _table(_carried_validation(train_ids, vocab_size))  # a plain attribute: not in state_dict
    return model
'''

BATCH_AWARE_PEEK = '''
class _BatchAwarePeek(RNNLM):
    """Reads the input at t + 1, except where another row of the batch shares the text up to t and
    parts from it at t + 1 (the grader's perturbed copies): it passes the perturbation check."""

    def forward(self, ids, state=None):
        logits, state = super().forward(ids, state)
        same = ids[:, None, :] == ids[None, :, :]  # (B, B, T)
        prefix = torch.cumprod(same.long(), dim=2).bool()
        parts = torch.zeros_like(ids, dtype=torch.bool)
        parts[:, :-1] = (prefix[:, :, :-1] & ~same[:, :, 1:]).any(dim=1)
        nxt = torch.cat([ids[:, 1:], ids[:, -1:]], dim=1)
        peek = 20.0 * F.one_hot(nxt, logits.shape[-1]).to(logits.dtype)
        return logits + peek * (~parts)[..., None], state


def train_lm(train_ids, vocab_size, d_embed=32, d_hidden=128, seed=0, **settings):
    torch.manual_seed(seed)
    return _BatchAwarePeek(vocab_size, d_embed, d_hidden)
'''

HONEST_FLOAT64 = '''
def train_lm(train_ids, vocab_size, d_embed=32, d_hidden=128, batch_size=32, block_size=32, steps=300,
             lr=6e-3, clip=1.0, seed=0, device="cpu"):
    torch.manual_seed(seed)
    model = RNNLM(vocab_size, d_embed, d_hidden, cell="lstm").to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    inputs, targets = batchify(train_ids, batch_size, block_size)
    state = None
    for step in range(steps):
        k = step % len(inputs)
        if k == 0:
            state = None
        logits, state = model(inputs[k].to(device), state)
        loss = lm_loss(logits, targets[k].to(device))
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), clip)
        optimizer.step()
        state = tuple(s.detach() for s in state)
    return model.double()  # honest, only unusual: the grader gets float64 logits and weights
'''

ATTACKS = {
    # name: (train_lm source, a fragment of the message the training check must give)
    "(a) no training; the score at t is the input at t + 1": (FUTURE, "depends on later tokens"),
    "(b) float64 logits of 1e300 (a NaN loss)": (HUGE, "NaN or infinite as float32"),
    "(b) the prescribed layout with an infinite weight its forward leaves out": (
        UNUSED_INF_WEIGHTS, "output.bias of your trained model holds NaN or infinite"),
    "(c) a causal 8-gram lookup of the carried validation text": (
        NGRAM, "Expected exactly the parameters embedding.weight ("),
    "(e) the prescribed layout plus a lookup table outside the parameters": (
        LOOKUP_OUTSIDE_WEIGHTS, "not what its weights compute"),
    "(f) reading ahead except where the perturbed copies part": (BATCH_AWARE_PEEK, "not what its weights compute"),
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_training_cheat_scores_zero(attack, tmp_path, data, carried_text):
    source, fragment = ATTACKS[attack]
    source = source.replace("{blob}", carried_text)
    result = grade_training_check(tmp_path, "03-rnnlm", u3, u3.TRAINING, {"train_lm": source.strip("\n")})
    assert result["score"] == 0, result
    assert fragment in result["output"], result["output"]
    assert "def " not in result["output"] and "_CARRIED" not in result["output"]


@pytest.mark.slow
def test_the_carried_text_cheat_would_pass_without_the_trusted_reload(data, carried_text):
    """The limit the module docstring states: under points 1, 2 and 4 alone (a free architecture), the
    carried-text lookup recovers the relabelling by alignment and passes. Run in this process (the
    contract's logic, the real probe) without `trusted`; with it, the same run fails."""
    from lmcourse.data import Vocab, train_val_split
    from lmcourse.grading.runner import reference_module

    reference = reference_module(ROOT, "03-rnnlm")
    namespace = dict(math=math, np=np, torch=torch, nn=nn, F=torch.nn.functional, Vocab=Vocab,
                     train_val_split=train_val_split, RNNLM=reference.RNNLM)
    exec(NGRAM.replace("{blob}", carried_text), namespace)
    chars, train_ids, val_ids = reference.shakespeare_characters()
    V = len(chars)
    x, y = training.lanes_of(val_ids, 16)
    kw = dict(student=_LocalStudent(types.SimpleNamespace(**namespace)), fn="train_lm",
              config=dict(vocab_size=V), vocab_size=V, train_ids=train_ids, eval_x=x, eval_y=y,
              loss_fn=lambda lg, tg: float(reference.lm_loss(torch.from_numpy(lg), torch.from_numpy(tg))),
              threshold=2.10, what="train_lm")
    outcome = training.graded_lm_run(**kw)
    assert outcome.loss < 0.5  # far below any honest model (about 1.96): relabelling alone does not stop it
    trusted = training.TrustedModel(build=lambda: reference.RNNLM(V, 32, 128), name="RNNLM(...)")
    with pytest.raises(AssertionError, match="Expected exactly the parameters"):
        training.graded_lm_run(trusted=trusted, **kw)


@pytest.mark.slow
def test_honest_model_returned_in_float64_keeps_full_marks(tmp_path, data):
    result = grade_training_check(tmp_path, "03-rnnlm", u3, u3.TRAINING, {"train_lm": HONEST_FLOAT64.strip("\n")})
    assert result["score"] == result["max_score"] == 4, result


ONE_HOT_CLUSTERS = '''
def train_sgns(sentences, vocab_size, dim=100, window=5, negatives=5, epochs=5, sample=1e-3,
               lr=0.025, batch_size=1024, seed=0):
    """No training: planted_clusters puts word w in cluster w // 5, so one-hot clusters."""
    E = np.full((vocab_size, dim), 0.01)
    E[np.arange(vocab_size), (np.arange(vocab_size) // 5) % dim] = 1.0
    return E
'''


@pytest.mark.slow
def test_word2vec_one_hot_cluster_cheat_scores_zero(tmp_path):
    result = grade_training_check(tmp_path, "02-word2vec", u2, u2.TRAINING, {"train_sgns": ONE_HOT_CLUSTERS.strip()})
    assert result["score"] == 0, result
    assert "expected a mean cosine >= 0.7" in result["output"]


# 04-attention: the graded run is scored by exact match, after the grader reloads the weights into the
# reference AttentionSeq2Seq and decodes with its own code. Each cheat replaces `train_reverser`.

REVERSER = '''
def _reverse_scores(src, tgt_in, vocab_size, amount=20.0):
    """The answer written by hand: at step t, the source digit S-1-t (S the real length), then <EOS>."""
    B, T = tgt_in.shape
    lengths = (src != PAD_ID).sum(dim=1)  # (B,)
    t = torch.arange(T, device=src.device)[None, :]  # (1, T)
    where = (lengths[:, None] - 1 - t).clamp(min=0)  # (B, T): the source position step t copies
    answer = torch.where(t < lengths[:, None], src.gather(1, where.clamp(max=src.shape[1] - 1)),
                         torch.full_like(where, EOS_ID))
    return amount * F.one_hot(answer, vocab_size).float()  # (B, T, V): causal, it reads src only
'''

TF_PEEK = '''
class _Peek(nn.Module):
    """No training: the score at step t is the decoder's input at t + 1 (under teacher forcing, the answer)."""

    def __init__(self):
        super().__init__()
        self.shift = nn.Parameter(torch.zeros(VOCAB_SIZE))

    def forward(self, src, tgt_in):
        nxt = torch.cat([tgt_in[:, 1:], tgt_in[:, -1:]], dim=1)
        return 20.0 * F.one_hot(nxt, VOCAB_SIZE).float() + self.shift, None


def train_reverser(**settings):
    return _Peek()
'''

HAND_WRITTEN = REVERSER + '''

class _HandWritten(nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = nn.Parameter(torch.zeros(VOCAB_SIZE))

    def forward(self, src, tgt_in):
        return _reverse_scores(src, tgt_in, VOCAB_SIZE) + self.shift, None


def train_reverser(**settings):
    return _HandWritten()
'''

HAND_WRITTEN_OUTSIDE_WEIGHTS = REVERSER + '''

class _Helped(AttentionSeq2Seq):
    """The prescribed layout, untrained, with the hand-written answer added to its logits."""

    def forward(self, src, tgt_in):
        logits, weights = super().forward(src, tgt_in)
        return logits + _reverse_scores(src, tgt_in, logits.shape[-1]).to(logits.dtype), weights


def train_reverser(d_emb=32, d_hidden=128, seed=0, **settings):
    torch.manual_seed(seed)
    return _Helped(VOCAB_SIZE, d_emb, d_hidden).eval()
'''

SEQ2SEQ_UNUSED_INF = '''
class _LinearNoBias(nn.Linear):
    """Holds a bias (so the layout is the prescribed one) that its forward leaves out."""

    def forward(self, x):
        return F.linear(x, self.weight)


def train_reverser(d_emb=32, d_hidden=128, seed=0, **settings):
    torch.manual_seed(seed)
    model = AttentionSeq2Seq(VOCAB_SIZE, d_emb, d_hidden)
    model.output.__class__ = _LinearNoBias
    with torch.no_grad():
        model.output.bias.fill_(float("inf"))
    return model.eval()
'''

SEQ2SEQ_BATCH_AWARE_PEEK = '''
class _BatchAwarePeek(AttentionSeq2Seq):
    """Reads the decoder's input at t + 1, except where another row shares the source and the decoder's
    inputs up to t and parts from it at t + 1 (the grader's perturbed copies)."""

    def forward(self, src, tgt_in):
        logits, weights = super().forward(src, tgt_in)
        same_src = (src[:, None, :] == src[None, :, :]).all(dim=-1)  # (B, B)
        same = (tgt_in[:, None, :] == tgt_in[None, :, :]) & same_src[..., None]  # (B, B, T)
        prefix = torch.cumprod(same.long(), dim=2).bool()
        parts = torch.zeros_like(tgt_in, dtype=torch.bool)
        parts[:, :-1] = (prefix[:, :, :-1] & ~same[:, :, 1:]).any(dim=1)
        nxt = torch.cat([tgt_in[:, 1:], tgt_in[:, -1:]], dim=1)
        peek = 20.0 * F.one_hot(nxt, logits.shape[-1]).to(logits.dtype)
        return logits + peek * (~parts)[..., None], weights


def train_reverser(d_emb=32, d_hidden=128, seed=0, **settings):
    torch.manual_seed(seed)
    return _BatchAwarePeek(VOCAB_SIZE, d_emb, d_hidden).eval()
'''

SEQ2SEQ_ATTACKS = {
    # name: (train_reverser source, a fragment of the message the training check must give)
    "(a) no training; the score at t is the decoder's input at t + 1": (TF_PEEK, "depends on later tokens"),
    "(b) the prescribed layout with an infinite weight its forward leaves out": (
        SEQ2SEQ_UNUSED_INF, "output.bias of your trained model holds NaN or infinite"),
    "(c) the reversal written by hand, no learnt weights": (HAND_WRITTEN, "Expected exactly the parameters"),
    "(e) the prescribed layout plus the hand-written answer outside the weights": (
        HAND_WRITTEN_OUTSIDE_WEIGHTS, "not what its weights compute"),
    "(f) reading ahead except where the perturbed copies part": (
        SEQ2SEQ_BATCH_AWARE_PEEK, "not what its weights compute"),
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(SEQ2SEQ_ATTACKS))
def test_seq2seq_training_cheat_scores_zero(attack, tmp_path):
    source, fragment = SEQ2SEQ_ATTACKS[attack]
    result = grade_training_check(tmp_path, "04-attention", u4, u4.TRAINING, {"train_reverser": source.strip("\n")})
    assert result["score"] == 0, result
    assert fragment in result["output"], result["output"]
    assert "def " not in result["output"] and "_reverse_scores" not in result["output"]


def test_the_hand_written_reverser_is_right_and_causal():
    """The cheats above are only worth stopping if they would score: the hand-written answer reverses every
    held-out string under the reference's greedy decoding, and reads no later decoder input."""
    from lmcourse.seq2seq import EOS_ID, PAD_ID, VOCAB_SIZE, pad_batch, reversal_pairs_by_length, trim

    namespace = dict(torch=torch, F=torch.nn.functional, PAD_ID=PAD_ID, EOS_ID=EOS_ID)
    exec(REVERSER, namespace)
    pairs = reversal_pairs_by_length(range(15, 21), 10, np.random.default_rng(0))
    src, _ = pad_batch([s for s, _ in pairs])
    from lmcourse.seq2seq import BOS_ID
    ys = torch.full((len(pairs), 1), BOS_ID)
    for _ in range(src.shape[1] + 1):
        scores = namespace["_reverse_scores"](src, ys, VOCAB_SIZE)
        ys = torch.cat([ys, scores[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert all(trim(y) == t for y, (_, t) in zip(ys[:, 1:].tolist(), pairs))


# 05-transformer: scored like 04 (exact match after the trusted reload, greedy decoding by the reference), on
# dates. Each cheat replaces `train_transformer`; the transformer returns logits alone, not a tuple.

ISO_BY_HAND = '''
from lmcourse.dates import encode as _encode, iso as _iso, parse_date as _parse


def _iso_scores(src, tgt_in, vocab_size, amount=20.0):
    """The answer written by hand: at step t, character t of the source's date in ISO form, then <EOS>."""
    B, T = tgt_in.shape
    answers = []
    for row in src.tolist():
        try:
            target = _encode(_iso(_parse(decode(row))))
        except ValueError:
            target = []
        answers.append((target + [EOS_ID] * T)[:T])
    answer = torch.tensor(answers, device=src.device)  # (B, T): causal, it reads src only
    return amount * F.one_hot(answer, vocab_size).float()
'''

# The same cheats as 04's, on 05's interface: train_transformer, the Transformer's constructor and its
# unembedding, logits without attention weights, the ISO date written by hand instead of the reversal.
FOR_TRANSFORMER = (
    ("def train_reverser(d_emb=32, d_hidden=128, seed=0, **settings):",
     "def train_transformer(d_model=64, n_heads=4, d_ff=256, n_layers=2, seed=0, **settings):"),
    ("def train_reverser(**settings):", "def train_transformer(**settings):"),
    ("(VOCAB_SIZE, d_emb, d_hidden)", "(VOCAB_SIZE, VOCAB_SIZE, d_model, n_heads, d_ff, n_layers, n_layers)"),
    ("logits, weights = super().forward(src, tgt_in)", "logits = super().forward(src, tgt_in)"),
    (", weights\n", "\n"), (", None\n", "\n"),
    ("AttentionSeq2Seq", "Transformer"), ("model.output", "model.unembed"), ("_reverse_scores(", "_iso_scores("),
)


def for_transformer(source: str) -> str:
    """A 04 cheat (a train_reverser source) rewritten for 05; fails if a piece it names is not there."""
    if source.startswith(REVERSER):
        source = ISO_BY_HAND + source[len(REVERSER):]
    for old, new in FOR_TRANSFORMER:
        source = source.replace(old, new)
    assert "reverser" not in source and "AttentionSeq2Seq" not in source and "weights\n" not in source, source
    return source


TRANSFORMER_ATTACKS = {
    # name: (train_transformer source, a fragment of the message the training check must give)
    "(a) no training; the score at t is the decoder's input at t + 1": (for_transformer(TF_PEEK),
                                                                          "depends on later tokens"),
    "(b) the prescribed layout with an infinite weight its forward leaves out": (
        for_transformer(SEQ2SEQ_UNUSED_INF), "unembed.bias of your trained model holds NaN or infinite"),
    "(c) the ISO date written by hand, no learnt weights": (for_transformer(HAND_WRITTEN),
                                                             "Expected exactly the parameters"),
    "(e) the prescribed layout plus the hand-written answer outside the weights": (
        for_transformer(HAND_WRITTEN_OUTSIDE_WEIGHTS), "not what its weights compute"),
    "(f) reading ahead except where the perturbed copies part": (
        for_transformer(SEQ2SEQ_BATCH_AWARE_PEEK), "not what its weights compute"),
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(TRANSFORMER_ATTACKS))
def test_transformer_training_cheat_scores_zero(attack, tmp_path):
    source, fragment = TRANSFORMER_ATTACKS[attack]
    result = grade_training_check(tmp_path, "05-transformer", u5, u5.TRAINING,
                                  {"train_transformer": source.strip("\n")})
    assert result["score"] == 0, result
    assert fragment in result["output"], result["output"]
    assert "def " not in result["output"] and "_iso_scores" not in result["output"]


def test_the_hand_written_iso_answer_is_right_and_causal():
    """Worth stopping only if it would score: under greedy decoding the hand-written answer converts every
    held-out date, in every format, and it reads no decoder input at all."""
    from lmcourse.dates import EOS_ID, VOCAB_SIZE, date_pairs, decode
    from lmcourse.seq2seq import BOS_ID, pad_batch, trim

    namespace = dict(torch=torch, F=torch.nn.functional, EOS_ID=EOS_ID, decode=decode)
    exec(ISO_BY_HAND, namespace)
    pairs = date_pairs(300, np.random.default_rng(0))
    src, _ = pad_batch([s for s, _ in pairs])
    ys = torch.full((len(pairs), 1), BOS_ID)
    for _ in range(11):
        scores = namespace["_iso_scores"](src, ys, VOCAB_SIZE)
        ys = torch.cat([ys, scores[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert all(trim(y) == t for y, (_, t) in zip(ys[:, 1:].tolist(), pairs))


# 07-gpt: a language model, graded by graded_lm_run with the trusted reload into the reference GPT, on windows of
# the validation text. Each cheat replaces `train_gpt` and trains nothing; the GPT class is the honest solution's.

GPT_PEEK = '''
class _Peek(GPT):
    """The prescribed model, plus a score for the input at t + 1: no mask can hide what forward adds."""

    def forward(self, idx, cache=None):
        logits = super().forward(idx, cache)
        following = torch.cat([idx[:, 1:], idx[:, -1:]], dim=1)
        return logits + 20.0 * F.one_hot(following, logits.shape[-1]).to(logits.dtype)


def train_gpt(train_ids, vocab_size, block_size=64, d_model=128, n_heads=4, n_layers=4, seed=0, **settings):
    torch.manual_seed(seed)
    return _Peek(vocab_size, block_size, d_model, n_heads, n_layers).eval()
'''

GPT_UNUSED_INF = '''
class _NoFinalNorm(GPT):
    def forward(self, idx, cache=None):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        return self.lm_head(x)  # ln_f left out, so its infinite bias never shows in these logits


def train_gpt(train_ids, vocab_size, block_size=64, d_model=128, n_heads=4, n_layers=4, seed=0, **settings):
    torch.manual_seed(seed)
    model = _NoFinalNorm(vocab_size, block_size, d_model, n_heads, n_layers)
    with torch.no_grad():
        model.ln_f.bias.fill_(float("inf"))
    return model.eval()
'''

GPT_BATCH_AWARE_PEEK = '''
class _BatchAwarePeek(GPT):
    """Reads the input at t + 1, except where another row of the batch shares the text up to t and parts from it
    at t + 1 (the grader's perturbed copies): it passes the perturbation check."""

    def forward(self, idx, cache=None):
        logits = super().forward(idx, cache)
        same = idx[:, None, :] == idx[None, :, :]  # (B, B, T)
        prefix = torch.cumprod(same.long(), dim=2).bool()
        parts = torch.zeros_like(idx, dtype=torch.bool)
        parts[:, :-1] = (prefix[:, :, :-1] & ~same[:, :, 1:]).any(dim=1)
        following = torch.cat([idx[:, 1:], idx[:, -1:]], dim=1)
        peek = 20.0 * F.one_hot(following, logits.shape[-1]).to(logits.dtype)
        return logits + peek * (~parts)[..., None]


def train_gpt(train_ids, vocab_size, block_size=64, d_model=128, n_heads=4, n_layers=4, seed=0, **settings):
    torch.manual_seed(seed)
    return _BatchAwarePeek(vocab_size, block_size, d_model, n_heads, n_layers).eval()
'''

GPT_ATTACKS = {
    # name: (train_gpt source, a fragment of the message the training check must give)
    "(a) no training; the score at t is the input at t + 1": (GPT_PEEK, "depends on later tokens"),
    "(b) the prescribed layout with an infinite weight its forward leaves out": (
        GPT_UNUSED_INF, "ln_f.bias of your trained model holds NaN or infinite"),
    "(f) reading ahead except where the perturbed copies part": (GPT_BATCH_AWARE_PEEK, "not what its weights compute"),
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(GPT_ATTACKS))
def test_gpt_training_cheat_scores_zero(attack, tmp_path, data):
    import test_unit07_gpt as u7

    source, fragment = GPT_ATTACKS[attack]
    result = grade_training_check(tmp_path, "07-gpt", u7, u7.TRAINING, {"train_gpt": source.strip("\n")})
    assert result["score"] == 0, result
    assert fragment in result["output"], result["output"]
    assert "def " not in result["output"] and "_Peek" not in result["output"]
