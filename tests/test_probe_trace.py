"""The probes that look inside a student's training loop and call a function of a model
(`train_and_trace`, `call_with_module` in lmcourse.grading.sandbox.inside.probes), run in this
process: what they record (the gradients each optimiser step receives, and the weights each
forward pass found, included), and that they leave the student's class as they found it.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse.grading.sandbox.inside import probes


class Counter(nn.Module):
    """A tiny recurrent model: forward(ids, state=None) -> (scores, state)."""

    def __init__(self, d=3):
        super().__init__()
        self.embedding = nn.Embedding(5, d)
        self.output = nn.Linear(d, 5)

    def forward(self, ids, state=None):
        h = self.embedding(ids).sum(dim=1)
        if state is not None:
            h = h + state
        return self.output(h), h


class Inherits(Counter):  # forward comes from the parent class
    pass


TARGETS = torch.tensor([1, 2])


def _zero(model, optimizer, zeroing):
    """The ways a training loop drops the last step's gradients (all correct), or "never" (the bug)."""
    if zeroing == "zero_grad":
        optimizer.zero_grad()
    elif zeroing == "zeros":
        optimizer.zero_grad(set_to_none=False)
    elif zeroing == "model":
        model.zero_grad()
    elif zeroing == "none":
        for p in model.parameters():
            p.grad = None


def train(steps, detach=True, clip=None, model_cls="Counter", evaluate=False, zeroing="zero_grad"):
    torch.manual_seed(0)
    model = globals()[model_cls]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.arange(8).reshape(2, 4) % 5
    state = None
    for step in range(steps):
        if step == 2:
            state = None
        scores, state = model(ids, state=state)  # by keyword: recorded by the parameter's name
        loss = nn.functional.cross_entropy(scores, TARGETS)
        _zero(model, optimizer, zeroing)
        loss.backward(retain_graph=not detach)
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if detach:
            state = state.detach()
    if evaluate:
        with torch.no_grad():
            model(ids)  # not a training pass: not recorded
    return model


def _module():
    return types.SimpleNamespace(train=train, Counter=Counter, Inherits=Inherits)


def test_the_trace_records_each_training_pass_and_step():
    trace = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter",
                             config={"steps": 4, "evaluate": True})
    calls, steps = trace["calls"], trace["steps"]
    assert len(calls) == len(steps) == 4  # the evaluation under no_grad is not a training pass
    assert [c["args"]["state"] is None for c in calls] == [True, False, True, False]
    assert not any(c["attached"] for c in calls)  # detached
    np.testing.assert_array_equal(calls[0]["args"]["ids"], np.arange(8).reshape(2, 4) % 5)
    np.testing.assert_array_equal(calls[1]["args"]["state"], calls[0]["returned"][1])  # carried
    assert all(s > 0 for s in steps)
    assert Counter.forward is Counter.__dict__["forward"] and Counter.forward.__name__ == "forward"


def test_the_trace_shows_an_attached_state_and_the_norm_the_optimiser_sees():
    attached = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter",
                                config={"steps": 2, "detach": False})
    assert [c["attached"] for c in attached["calls"]] == [False, True]
    clipped = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter",
                               config={"steps": 3, "clip": 1e-3})
    assert all(s <= 1e-3 * (1 + 1e-6) for s in clipped["steps"])


def _gradient_of_the_step(call) -> dict:
    """The gradient of one step's loss alone, recomputed from the weights, ids and state the step's forward pass
    was given (what a check's trusted side does with the reference model)."""
    model = Counter()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in call["weights"].items()})
    state = call["args"]["state"]
    scores, _ = model(torch.from_numpy(call["args"]["ids"]), None if state is None else torch.from_numpy(state))
    nn.functional.cross_entropy(scores, TARGETS).backward()
    return {name: p.grad.numpy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("zeroing", ["zero_grad", "zeros", "model", "none"])
def test_the_trace_records_the_gradient_each_step_receives_and_the_weights_it_started_from(zeroing):
    trace = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter",
                             config={"steps": 4, "zeroing": zeroing}, gradients=True)
    calls, grads = trace["calls"], trace["gradients"]
    assert len(calls) == len(grads) == 4 and [c["step"] for c in calls] == [0, 1, 2, 3]
    assert set(grads[0]) == {"embedding.weight", "output.weight", "output.bias"}
    assert not np.array_equal(calls[0]["weights"]["output.weight"], calls[1]["weights"]["output.weight"])
    for call, received in zip(calls, grads):  # however the gradients are dropped, each step gets its own
        for name, g in _gradient_of_the_step(call).items():
            np.testing.assert_allclose(received[name], g, rtol=1e-5, atol=1e-7)


def test_gradients_never_dropped_reach_the_next_step_and_the_trace_shows_it():
    trace = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter",
                             config={"steps": 2, "zeroing": "never"}, gradients=True)
    first, second = (_gradient_of_the_step(c) for c in trace["calls"])
    np.testing.assert_allclose(trace["gradients"][0]["output.weight"], first["output.weight"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(trace["gradients"][1]["output.weight"],
                               first["output.weight"] + second["output.weight"], rtol=1e-5, atol=1e-6)
    assert not np.allclose(trace["gradients"][1]["output.weight"], second["output.weight"], rtol=1e-3)


def test_the_trace_records_weights_and_gradients_only_when_asked():
    trace = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter", config={"steps": 2})
    assert trace["gradients"] == [] and not any("weights" in c for c in trace["calls"])


def test_the_trace_restores_an_inherited_forward():
    trace = probes.run_local("train_and_trace", _module(), fn="train", cls="Inherits",
                             config={"steps": 1, "model_cls": "Inherits"})
    assert len(trace["calls"]) == 1
    assert "forward" not in Inherits.__dict__ and Inherits.forward is Counter.forward


def test_the_trace_needs_a_module_class():
    with pytest.raises(probes.WrongResult):
        probes.run_local("train_and_trace", types.SimpleNamespace(train=train, Counter=len), fn="train",
                         cls="Counter", config={"steps": 1})


def test_call_with_module_passes_the_model_with_its_weights():
    def scale_of(model, x, factor=1.0):
        return factor * model.output(x)

    module = types.SimpleNamespace(Counter=Counter, scale_of=scale_of)
    weights = {k: np.ones(v.shape, np.float32) for k, v in Counter().state_dict().items()}
    out = probes.run_local("call_with_module", module, fn="scale_of", cls="Counter", state_dict=weights,
                           args=[np.ones((1, 3), np.float32)], kwargs={"factor": 2.0})
    np.testing.assert_allclose(out.detach().numpy(), np.full((1, 5), 8.0))  # 2 * (3 + 1)


class Dropping(Counter):
    """Counter with a dropout of its own: random in training mode."""

    def forward(self, ids, state=None):
        scores, h = super().forward(ids, state)
        return nn.functional.dropout(scores, 0.5, self.training), h


def _returning(mode: str, model_cls: str = "Counter"):
    def fit(steps):
        model = train(steps, model_cls=model_cls)
        return model.eval() if mode == "eval" else model

    return types.SimpleNamespace(fit=fit, Counter=Counter, Dropping=Dropping)


def test_the_trace_records_the_optimiser_its_state_and_each_step_s_move():
    trace = probes.run_local("train_and_trace", _module(), fn="train", cls="Counter", config={"steps": 3},
                             gradients=True)
    opts = trace["optimizers"]
    assert [o["type"] for o in opts] == ["SGD"] * 3 and [o["object"] for o in opts] == [0, 0, 0]
    assert opts[0]["groups"][0]["lr"] == 0.1 and set(opts[0]["groups"][0]["params"]) == set(trace["gradients"][0])
    assert [o["state_step"] for o in opts] == [None, None, None]  # plain SGD keeps no step count
    for move, grads in zip(trace["moves"], trace["gradients"]):  # SGD: each step moves by -lr times its gradient
        for name, (before, after) in move.items():
            np.testing.assert_allclose(after - before, -0.1 * grads[name], rtol=1e-4, atol=1e-7)
    assert probes.run_local("train_and_trace", _module(), fn="train", cls="Counter",
                            config={"steps": 2})["moves"] == []  # only when asked


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_the_trace_records_the_mode_of_the_returned_model_and_whether_it_is_random(mode):
    steady = probes.run_local("train_and_trace", _returning(mode), fn="fit", cls="Counter", config={"steps": 2})
    assert steady["returned_training"] is (mode == "train") and steady["random_in_training"] is False
    dropping = _returning(mode, "Dropping")
    noisy = probes.run_local("train_and_trace", dropping, fn="fit", cls="Dropping", config={"steps": 2})
    assert noisy["random_in_training"] is True and noisy["returned_training"] is (mode == "train")
    nothing = probes.run_local("train_and_trace", types.SimpleNamespace(fit=lambda steps: None, Counter=Counter),
                               fn="fit", cls="Counter", config={"steps": 0})
    assert nothing["returned_training"] is None and nothing["random_in_training"] is None


def test_a_model_called_for_use_is_in_eval_mode():
    """call_method and call_with_module put a module in eval mode: a dropout a student added never reaches a
    check that decodes, generates or measures."""
    module = types.SimpleNamespace(Dropping=Dropping, mode=lambda model: model.training)
    assert probes.run_local("call_with_module", module, fn="mode", cls="Dropping") is False
    ids = np.arange(8).reshape(2, 4) % 5
    first, second = (probes.run_local("call_method", module, cls="Dropping", method="forward", args=[ids],
                                      tensors=True, seed=0)[0] for _ in range(2))
    assert torch.equal(first, second)  # the same weights (seed 0), and no dropout: in training mode they differ
    model = Dropping()
    assert not torch.equal(*(model(torch.from_numpy(ids))[0] for _ in range(2)))


def test_weights_that_do_not_fit_the_layout_are_named_not_a_runtime_error():
    """The grader's load of the instructions' weights into a student's module that names or shapes a layer
    otherwise is the student's layout, said in the instructions' words (issue #40, class 7), not PyTorch's
    RuntimeError from load_state_dict as if the student's code had raised it."""

    class Renamed(nn.Module):
        def __init__(self, d=3):
            super().__init__()
            self.embed = nn.Embedding(5, d)  # the layout's name is `embedding`
            self.output = nn.Linear(d, 4)  # the layout's shape is (5, d)

        def forward(self, ids):
            return self.output(self.embed(ids))

    module = types.SimpleNamespace(Renamed=Renamed)
    weights = {k: v.detach().numpy() for k, v in Counter().state_dict().items()}
    with pytest.raises(probes.WrongResult, match=r"your Renamed has embed.weight, which the layout does not; it has "
                                                 r"no embedding.weight; output.weight is \(4, 3\), expected \(5, 3\)"):
        probes.run_local("module_forward", module, cls="Renamed", state_dict=weights,
                         inputs=[np.zeros((1, 2), dtype=np.int64)])
