"""Checks for Part 5: the graded training runs, pretraining by masked language modelling and fine-tuning.

Both runs follow the contract of every graded training run (`lmcourse.grading.training`):

1. **Secret relabelling.** Every grade draws a fresh permutation of the tiny vocabulary's ordinary ids
   (the five special ids keep theirs: the assignment fixes them) from `secrets`, and relabels the
   pretraining lines, the labelled examples and the held-out data with it. Nothing written in advance
   about particular ids lines up; an honest model's losses and accuracies do not change in distribution
   (a permutation only decides which embedding row belongs to which word). The pretrained encoder and its
   fine-tuning see the same relabelling.
2. **Perturbation, in the same batch.** An encoder reads both directions, so "no prediction reads a later
   token" is not its property; its property is that padding is not data. Each evaluation batch holds
   copies of some rows whose padding positions hold other ids (the attention mask unchanged): the
   student's outputs at real positions (MLM) or the row's logits (classifier) must not move. The rows are in a
   secret order: neither a copy nor a label (the labelled examples alternate 0, 1) can be told by its place.
3. **The score from what the grader controls.** The trained model's state_dict is taken before any
   evaluation row reaches the worker (`training.train_then_evaluate`); the
   grader loads it into the reference `BertForMLM` / `BertClassifier`, requires the student's outputs on
   the evaluation batch to match the reference's with those weights (`check_match`), and computes the
   score with the reference: the masked-LM loss of held-out lines masked here by the reference's
   `mask_tokens` with a secret generator (the student never sees the held-out masks), and the accuracy on
   held-out labelled examples whose lines no model trained on (`lmcourse.bert_tasks`: the "test" split).
4. **Finite values**: outputs finite as float32, weights finite; a NaN never passes.

What it does not stop (as the contract says): weights trained elsewhere and carried in the notebook score
like honestly trained ones (here they would have to be trained for a permutation drawn at grading time).

The fine-tuning check calls the student's `fine_tune` with the student's pretrained encoder
(``bert_state``) and requires an accuracy that the same recipe from scratch does not reach: the threshold
is calibrated above every from-scratch accuracy measured with the reference (the margin below), so a
`fine_tune` that ignores ``bert_state`` (from scratch, whatever it is given) fails, and an honest one
passes with room. The scratch runs are measured at calibration, not at every grade: running the student's
own from-scratch arm would cost every grade another fine-tuning and prove less (a `fine_tune` that
trained less from scratch than from a pretrained encoder would widen its own gap). The pretraining comes
from the MLM check of the same grade when it ran (its weights and relabelling kept for this process),
else the fine-tuning check pretrains itself.

Tiers. cpu: the reference solution through this file's own computation (`_pretrain`, `_mlm_loss`,
`_accuracy`), five secret relabellings, the grader's seed 0, one thread on a loaded 2-core machine
(2026-11-23): held-out masked-LM loss 4.99, 4.85, 5.04, 5.02, 5.06 (every word by its frequency: 5.94;
threshold 5.50, 0.44 above the worst); fine-tuned from the pretrained encoder 0.627, 0.678, 0.670, 0.653,
0.633, and the same recipe from scratch 0.523, 0.531, 0.539, 0.528, 0.546 (five more seeds in the
experiment that chose the task, without relabelling: pretrained 0.645-0.669, scratch 0.515-0.551). The
threshold 0.58 sits 0.034 above the best from-scratch run and 0.047 below the worst pretrained one.
75-85 s of CPU for the pretraining, 15-19 s for a fine-tuning. gpu: 4,000 pretraining steps and 5,000
labels. No GPU has been lent to a session that worked on this unit, so the tier was measured on a CPU by the
experiment that chose the task (its own code of the same recipe, three seeds, no relabelling, 122-142 s of
CPU per pretraining): held-out masked-LM loss 4.49, 4.45, 4.49 (threshold 4.80); fine-tuned with 5,000
labels 0.740, 0.849, 0.738, and from scratch 0.518, 0.570, 0.533 (threshold 0.68). The first run on a GPU
should confirm the margins (tests/test_gpu_tiers.py prints the values).
"""

from __future__ import annotations

import numpy as np
import torch

from lmcourse.bert_tasks import MASK_ID, PAD_ID, SPECIALS, compact_vocab, labelled_task, mlm_ids, pad_batch
from lmcourse.grading import training
from lmcourse.grading.checks import check
from lmcourse.grading.compare import one_thread
from lmcourse.grading.optimizer import OptimizerSpec, check_optimizer, check_trains_every_parameter

N_SPECIAL = len(SPECIALS)
MAX_LEN = 32
CPU = dict(pretrain=dict(steps=1500, batch_size=64, lr=2e-3, warmup=50, d_model=64, n_heads=4, d_ff=256,
                         n_layers=2, max_len=MAX_LEN, seed=0, device="cpu"),
           fine_tune=dict(steps=600, batch_size=32, lr=5e-4, head_lr=3e-3, warmup=30, d_model=64, n_heads=4,
                          d_ff=256, n_layers=2, max_len=MAX_LEN, seed=0, device="cpu"),
           mlm_threshold=5.50, accuracy_threshold=0.58, labels=2000)
# the GPU tier: the same model, a longer pretraining and more labels (a GPU runs this in well under a minute)
GPU = dict(pretrain=dict(CPU["pretrain"], steps=4000, device="cuda"), fine_tune=dict(CPU["fine_tune"], device="cuda"),
           mlm_threshold=4.80, accuracy_threshold=0.68, labels=5000)
HELD_OUT = 2000  # labelled test examples
MLM_ROWS = 24  # held-out rows the student's own model is asked for (the loss itself is computed here)
COPIES = 6

_PRETRAINED: dict = {}  # tier -> (relabelling, the student's BertForMLM state_dict): one pretraining per grade


def _settings(config: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())


def _relabelling(V: int) -> training.Relabelling:
    """A secret permutation of the ordinary ids; the special ids 0..4 stay where the assignment puts them."""
    perm = np.concatenate([np.arange(N_SPECIAL), N_SPECIAL + training.secret_rng().permutation(V - N_SPECIAL)])
    return training.Relabelling(perm.astype(np.int64))


def _with_padding_copies(ids: np.ndarray, rng, copies: int = COPIES):
    """(rows, attention mask, copies, originals): `ids` (L, T) plus `copies` copies of rows that have padding, with
    other ids at their padding positions, all rows in a secret order (`rng` is the grade's secret generator): row
    ``originals[i]`` is ``ids[i]``, and copies[j] = (row of the copy, row of its source). Nothing about a row's
    place tells what it is: not whether it is a copy, and not its label (the labelled examples alternate)."""
    V = len(compact_vocab())
    am = (ids != PAD_ID).astype(np.int64)
    padded = [i for i in range(len(ids)) if (am[i] == 0).any()]
    sources = rng.choice(padded, size=copies, replace=len(padded) < copies)
    extra = ids[sources].copy()
    holes = am[sources] == 0
    extra[holes] = rng.integers(N_SPECIAL, V, size=int(holes.sum()))
    order = rng.permutation(len(ids) + copies)  # order[i]: where item i (originals first, then copies) goes
    rows, mask = np.empty((len(order), ids.shape[1]), ids.dtype), np.empty((len(order), ids.shape[1]), am.dtype)
    rows[order] = np.concatenate([ids, extra])
    mask[order] = np.concatenate([am, am[sources]])
    return rows, mask, [(int(order[len(ids) + j]), int(order[s])) for j, s in enumerate(sources)], order[:len(ids)]


def _probe_model(student, fn, config, rows, mask, rules, timeout, what):
    return training.train_then_evaluate(student, fn=fn, config=config, eval_inputs=rows,
                                        eval_kwargs={"attention_mask": mask}, timeout=timeout, what=what, **rules)


def _trusted(reference, cls: str, extra: dict, config: dict, mask: np.ndarray, out: dict, rows: np.ndarray, *,
             what: str):
    """(the reference's `cls` with the student's trained weights, its outputs on `rows` with attention mask
    `mask`), computed here: the contract's trusted model (`training.load_trusted` checks the layout)."""
    shape = dict(extra, vocab_size=len(compact_vocab()), **{k: config[k] for k in ("d_model", "n_heads", "d_ff",
                                                                                  "n_layers", "max_len")})
    am = torch.from_numpy(mask)
    trusted = training.TrustedModel(build=lambda: getattr(reference, cls)(**shape), name=f"{cls}({_settings(shape)})",
                                    forward=lambda model, x: model(x, attention_mask=am))
    model = training.load_trusted(trusted, out.get("state_dict"), what=what)
    return model, training.trusted_logits(trusted, model, rows)


def _pretrain(student, reference, tier, rules, config, relabel):
    """The student's pretrain_mlm under the contract: returns (its state_dict, the trusted model, shown)."""
    V = len(compact_vocab())
    lines = [relabel(line).tolist() for line in mlm_ids("train")]
    valid = [relabel(line).tolist() for line in mlm_ids("valid")]
    rng = training.secret_rng()
    sample = pad_batch([valid[i] for i in rng.choice(len(valid), size=MLM_ROWS, replace=False)], MAX_LEN).numpy()
    rows, mask, copies, _ = _with_padding_copies(sample, rng)
    shown = f"pretrain_mlm(lines, vocab_size={V}, {_settings(config)})"
    out = _probe_model(student, "pretrain_mlm", {"lines": lines, "vocab_size": V, **config}, rows, mask, rules,
                       timeout=900 if tier == "gpu" else 400, what=shown)
    logits = training.finite_logits(out["logits"], (len(rows), MAX_LEN, V), what=f"{shown}: the logits")
    real = mask.astype(bool)
    for copy, source in copies:
        moved = np.abs(training.log_softmax(logits[copy]) - training.log_softmax(logits[source]))[real[source]].max()
        if not moved <= training.CAUSAL_TOL:
            raise AssertionError(f"{shown}, then the model on held-out rows and copies whose padding holds other ids: "
                                 f"the log-probabilities at real tokens moved by up to {moved:.3g}; padding is not "
                                 "data (mask it in attention)")
    model, expected = _trusted(reference, "BertForMLM", {}, config, mask, out, rows, what=shown)
    training.check_match(logits, expected, what=f"{shown}, then the model on {len(rows)} held-out rows",
                         name="the reference BertForMLM")
    return out["state_dict"], model, shown, valid


def _mlm_loss(reference, model, valid) -> float:
    """The masked-LM loss of the held-out lines, masked here by the reference's mask_tokens with a secret
    generator, computed with the reference model (the student's weights): mean nats per selected token."""
    V = len(compact_vocab())
    generator = torch.Generator().manual_seed(int(training.secret_rng().integers(1 << 62)))
    total, count = 0.0, 0
    with one_thread(), torch.no_grad():
        for start in range(0, len(valid), 256):
            ids = pad_batch(valid[start:start + 256], MAX_LEN)
            inputs, labels = reference.mask_tokens(ids, list(range(N_SPECIAL)), MASK_ID, V, generator)
            h = model.bert(inputs, attention_mask=ids != PAD_ID)
            selected = labels != -100
            logits = model.head(h[selected]).float()
            total += float(torch.nn.functional.cross_entropy(logits, labels[selected], reduction="sum"))
            count += int(selected.sum())
    return total / count


@check(points=2, cell="test_training", name="pretrain_mlm: the pretrained model's masked-LM loss on held-out lines "
                                           "(masked by the grader) is low enough")
def test_pretraining_run(student, reference, tier, rules):
    settings = GPU if tier == "gpu" else CPU
    V = len(compact_vocab())
    relabel = _relabelling(V)
    state, model, shown, valid = _pretrain(student, reference, tier, rules, settings["pretrain"], relabel)
    _PRETRAINED[tier] = (relabel, state)
    loss = _mlm_loss(reference, model, valid)
    training.check_loss(
        loss, settings["mlm_threshold"], what=f"{shown}: the grader loaded your model's weights into the reference "
        f"BertForMLM and masked {len(valid):,} held-out lines itself", unit="nats per masked token",
        hint="Check that the loss is taken at the selected positions against the original ids, the padding is "
             "masked, the warm-up and decay, and the order zero_grad, backward, clip, step")


def _accuracy(student, reference, tier, rules, config, examples, labels, test_x, test_y, bert_state, what):
    rng = training.secret_rng()
    rows, mask, copies, originals = _with_padding_copies(pad_batch(test_x, MAX_LEN).numpy(), rng)
    cfg = {"examples": examples, "labels": labels, "vocab_size": len(compact_vocab()), "bert_state": bert_state,
           **config}
    out = _probe_model(student, "fine_tune", cfg, rows, mask, rules, timeout=600 if tier == "gpu" else 200,
                       what=what)
    logits = training.finite_logits(out["logits"], (len(rows), 2), what=f"{what}: the logits")
    for copy, source in copies:
        moved = np.abs(training.log_softmax(logits[copy]) - training.log_softmax(logits[source])).max()
        if not moved <= training.CAUSAL_TOL:
            raise AssertionError(f"{what}, then the classifier on held-out rows and copies whose padding holds other "
                                 f"ids: the log-probabilities moved by up to {moved:.3g}; padding is not data")
    model, expected = _trusted(reference, "BertClassifier", {"n_classes": 2}, config, mask, out, rows, what=what)
    training.check_match(logits[:, None, :], expected[:, None, :], what=f"{what}, then the classifier on {len(rows)} "
                         "held-out rows", name="the reference BertClassifier")
    return float(np.mean(expected[originals].argmax(-1) == np.asarray(test_y)))


@check(points=2, cell="test_training", name="fine_tune: the pretrained encoder, fine-tuned, tells real lines from "
                                           "shuffled ones more accurately than the same recipe from scratch can")
def test_fine_tuning_run(student, reference, tier, rules):
    settings = GPU if tier == "gpu" else CPU
    V = len(compact_vocab())
    if tier in _PRETRAINED:
        relabel, state = _PRETRAINED[tier]
    else:
        relabel = _relabelling(V)
        state, _, _, _ = _pretrain(student, reference, tier, rules, settings["pretrain"], relabel)
    encoder = {k[len("bert."):]: v for k, v in state.items() if k.startswith("bert.")}
    secret = int(training.secret_rng().integers(1 << 30))
    x, y = labelled_task("train", settings["labels"], seed=secret)
    tx, ty = labelled_task("test", HELD_OUT, seed=secret)
    examples, test_x = relabel.sentences(x), relabel.sentences(tx)
    labels = np.asarray(y, dtype=np.int64)
    config = settings["fine_tune"]
    shown = f"fine_tune(examples ({len(examples)} labelled lines), labels, vocab_size={V}, bert_state={{}}, " \
            f"{_settings(config)})"
    pretrained = _accuracy(student, reference, tier, rules, config, examples, labels, test_x, ty, encoder,
                           shown.format("your pretrained encoder"))
    training.check_at_least(pretrained, settings["accuracy_threshold"], failure=(
        f"{shown.format('your pretrained encoder')}: the grader loaded the fine-tuned classifier into the reference "
        f"BertClassifier and measured it on {HELD_OUT:,} held-out examples: {pretrained:.3f} right. Fine-tuned from "
        f"a pretrained encoder, a correct implementation reaches at least {settings['accuracy_threshold']:.2f}, "
        "more than the same recipe from scratch ever does. Check that bert_state is loaded into the classifier's "
        "bert before training, the two learning rates, and the warm-up and decay"))


# Step by step (`train_and_trace`, a tiny BERT, a few steps): what the instructions fix about each loop and a final
# loss or accuracy cannot see. The padding masked in every training forward (the encoder's attention_mask is
# exactly ids != PAD_ID: a mask passed positionally lands in token_type_ids), AdamW with weight_decay=0.01 and
# the warm-up then linear decay of every step, one optimiser state, every update AdamW's from the gradients the
# step received (`lmcourse.grading.optimizer`), gradients clipped to a global norm of 1, the model returned in
# eval mode. Fine-tuning also: the encoder starts from bert_state, the encoder's parameters at lr and the head's at
# head_lr (two groups), and every parameter trains (a frozen encoder is not fine-tuning). The rates differ from the
# defaults, so a loop that ignores its arguments shows.
TRACE = dict(batch_size=6, warmup=2, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=12, seed=0, device="cpu")
PRE_TRACE = dict(TRACE, steps=4, lr=3e-3)
FT_TRACE = dict(TRACE, steps=4, lr=1e-3, head_lr=6e-3)
TRACE_LINES = 40
CLIP = 1.0


def _schedule(lr: float, warmup: int, steps: int):
    """The instructions' learning rate at step s (from 0): a linear warm-up, then a linear decay towards 0."""
    return lambda s: lr * min(1.0, (s + 1) / warmup) * (1 - s / steps)


def _padding_masked(calls, steps: int, what: str, model: str) -> None:
    """Every training forward of `model` got attention_mask == (ids != PAD_ID), one forward per step."""
    calls = [c for c in calls if isinstance(c, dict) and isinstance(c.get("args"), dict)]
    if len(calls) != steps:
        raise AssertionError(f"{what}: expected one forward pass of {model} with gradients per step, {steps} in "
                             f"all; found {len(calls)}")
    for s, call in enumerate(calls):
        args = call["args"]
        ids = next(iter(args.values()), None)
        mask = args.get("attention_mask")
        if not isinstance(ids, np.ndarray) or ids.ndim != 2:
            raise AssertionError(f"{what}: step {s}: the grader could not read the ids {model} was given")
        if not isinstance(mask, np.ndarray) or mask.shape != ids.shape:
            raise AssertionError(f"{what}: step {s}: {model} was called without an attention_mask "
                                 f"({'None' if mask is None else getattr(mask, 'shape', type(mask).__name__)}); "
                                 "padding is not data: pass attention_mask=(ids != PAD_ID) by name")
        if not np.array_equal(mask.astype(bool), ids != PAD_ID):
            raise AssertionError(f"{what}: step {s}: the attention_mask {model} was given is not ids != PAD_ID "
                                 "(True at every real token, [CLS] and [SEP] included, False at padding)")


def _clipped(out, what: str) -> None:
    for s, norm in enumerate(out.get("steps") or []):
        if not (0 < norm <= CLIP * (1 + 1e-4)):
            raise AssertionError(f"{what}: step {s} received gradients of global norm {norm:.3g}; clip the global "
                                 f"norm to {CLIP:g} after backward and before the step")


def _traced(student, fn, cls, config, rules, what):
    out = student.probe("train_and_trace", fn=fn, cls=cls, config=config, seed=0, gradients=True, timeout=180,
                        **rules)
    if not (isinstance(out, dict) and isinstance(out.get("steps"), list) and isinstance(out.get("calls"), list)):
        raise AssertionError(f"{what}: the grader could not read what your training loop did")
    if len(out["steps"]) != config["steps"]:
        raise AssertionError(f"{what}: expected {config['steps']} optimiser steps; found {len(out['steps'])}")
    return out


@check(points=1, cell="test_training", name="pretrain_mlm, step by step: the padding masked in every forward, "
                                           "AdamW (weight decay 0.01) with the warm-up and decay of every step "
                                           "updating the weights, gradients clipped to 1, the model returned in "
                                           "eval mode")
def test_pretraining_steps(student, rules):
    V = len(compact_vocab())
    lines = [list(line) for line in mlm_ids("train")[:TRACE_LINES]]
    config = dict(lines=lines, vocab_size=V, **PRE_TRACE)
    what = f"pretrain_mlm({TRACE_LINES} lines, vocab_size={V}, {_settings(PRE_TRACE)})"
    out = _traced(student, "pretrain_mlm", "BertModel", config, rules, what)
    _padding_masked(out["calls"], PRE_TRACE["steps"], what, "the encoder (BertModel)")
    spec = OptimizerSpec(kind="AdamW", weight_decay=0.01,
                         rate=_schedule(PRE_TRACE["lr"], PRE_TRACE["warmup"], PRE_TRACE["steps"]),
                         rate_rule="lr with the warm-up and linear decay",
                         said="torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)")
    check_optimizer(out, spec, steps=PRE_TRACE["steps"], what=what)
    _clipped(out, what)
    training.check_returned_for_use(out, what=what, fn="pretrain_mlm")


_FT_STEPS, _FT_WARMUP = FT_TRACE["steps"], FT_TRACE["warmup"]
FT_SPEC = OptimizerSpec(kind="AdamW", weight_decay=0.01, rate=_schedule(FT_TRACE["lr"], _FT_WARMUP, _FT_STEPS),
                        groups=(("bert.", _schedule(FT_TRACE["lr"], _FT_WARMUP, _FT_STEPS),
                                 "lr (warmed up, then decayed) for the encoder"),
                                ("head.", _schedule(FT_TRACE["head_lr"], _FT_WARMUP, _FT_STEPS),
                                 "head_lr (warmed up, then decayed) for the head")),
                        said="torch.optim.AdamW with two parameter groups, the encoder at lr and the head at head_lr, "
                             "weight_decay=0.01")


def fine_tune_trace(reference, rng) -> tuple[dict, list[str]]:
    """(fine_tune's configuration for the step-by-step check, the names of the classifier's parameters): 30
    labelled lines and a bert_state of the reference BertModel's layout with weights of its own (PyTorch's
    initialisation, not bert_init's, so that loading it shows)."""
    V = len(compact_vocab())
    shape = dict(vocab_size=V, **{k: FT_TRACE[k] for k in ("d_model", "n_heads", "d_ff", "n_layers", "max_len")})
    torch.manual_seed(int(rng.integers(1 << 30)))
    bert_state = {k: v.detach().numpy().copy() for k, v in reference.BertModel(**shape).state_dict().items()}
    examples, labels = labelled_task("train", 30, seed=int(rng.integers(1 << 30)))
    names = [n for n, _ in reference.BertClassifier(2, **shape).named_parameters()]  # the layout's parameters
    return dict(examples=examples, labels=np.asarray(labels, dtype=np.int64), vocab_size=V, bert_state=bert_state,
                **FT_TRACE), names


@check(points=1, cell="test_training", name="fine_tune, step by step: the encoder starts from bert_state, the "
                                           "padding masked, AdamW (weight decay 0.01) with the encoder at lr and the "
                                           "head at head_lr, every parameter trained, gradients clipped to 1, the "
                                           "model returned in eval mode")
def test_fine_tuning_steps(student, reference, rng, rules):
    config, names = fine_tune_trace(reference, rng)
    what = f"fine_tune(30 labelled lines, labels, vocab_size={config['vocab_size']}, bert_state={{...}}, " \
           f"{_settings(FT_TRACE)})"
    out = _traced(student, "fine_tune", "BertClassifier", config, rules, what)
    first = out["calls"][0].get("weights") if out["calls"] and isinstance(out["calls"][0], dict) else None
    if not isinstance(first, dict):
        raise AssertionError(f"{what}: the grader could not read the classifier's weights")
    for name, value in config["bert_state"].items():
        found = first.get(f"bert.{name}")
        if not isinstance(found, np.ndarray) or found.shape != value.shape or \
                not np.allclose(found, value, rtol=1e-6, atol=1e-7):
            raise AssertionError(f"{what}: at the first training step the classifier's bert.{name} is not "
                                 "bert_state's; load bert_state into the classifier's bert before training (that is "
                                 "what makes it fine-tuning)")
    _padding_masked(out["calls"], FT_TRACE["steps"], what, "the classifier")
    check_trains_every_parameter(out, names, steps=FT_TRACE["steps"], what=what)
    check_optimizer(out, FT_SPEC, steps=FT_TRACE["steps"], what=what)
    _clipped(out, what)
    training.check_returned_for_use(out, what=what, fn="fine_tune")
