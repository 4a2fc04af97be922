"""The grader's stand-in for a GPU (`lmcourse.grading.sandbox.inside.elsewhere`): real numbers, a GPU's rules.

Each rule on a small function: what a GPU refuses (a CPU tensor with dimensions meeting a GPU one, a GPU tensor
to NumPy) stops with PyTorch's own words; what a GPU allows (a 0-d CPU tensor, CPU indices, ``new_zeros``,
``zeros_like``, a move with ``.to``, a packed sequence's lengths on the CPU) runs, with real numbers, so a loop
that stops on a value runs too. Then the probe `call_elsewhere` and the trusted side's `expect_runs_elsewhere`
on a module method, right and wrong. The known mistakes that use it (04's masks and greedy decoding, 05's greedy
decoding) are graded in the units' contracts.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from lmcourse.grading.compare import expect_runs_elsewhere
from lmcourse.grading.sandbox.inside import probes
from lmcourse.grading.sandbox.inside.elsewhere import DEVICE, DeviceMismatch, Elsewhere, mark, marked, place


def run(f, *args):
    """f(*args) with every tensor argument elsewhere; (outcome, the result or the error's words)."""
    args = [mark(a.clone()) if isinstance(a, torch.Tensor) else a for a in args]
    try:
        with Elsewhere():
            return "ran", f(*args)
    except DeviceMismatch as err:
        return "mismatch", str(err)


X = torch.arange(6.0).reshape(2, 3)
LENGTHS = torch.tensor([2, 3])


@pytest.mark.parametrize("what,f,arg", [
    ("a tensor made without a device", lambda x: x + torch.zeros(2, 3), X),
    ("positions made without a device", lambda n: torch.arange(3)[None, :] < n[:, None], LENGTHS),
    ("a <BOS> column made without a device", lambda x: torch.cat([torch.full((2, 1), 1.0), x], 1), X),
    ("a GPU tensor to NumPy", lambda x: x.numpy(), X),
    ("a tensor of one element with a dimension", lambda x: x * torch.tensor([2.0]), X),
])
def test_what_a_gpu_refuses_stops_with_pytorchs_words(what, f, arg):
    outcome, said = run(f, arg)
    assert outcome == "mismatch", what
    assert ("same device" in said and DEVICE in said) or "numpy" in said


@pytest.mark.parametrize("what,f,arg", [
    ("device=x.device", lambda x: x + torch.zeros(2, 3, device=x.device), X),
    ("new_zeros", lambda x: x + x.new_zeros(2, 3), X),
    ("zeros_like", lambda x: x + torch.zeros_like(x), X),
    ("a 0-d CPU tensor", lambda x: x * torch.tensor(2.0), X),
    ("CPU indices", lambda x: x[torch.tensor([1, 0])], X),
    (".to(x.device)", lambda x: torch.cat([x, torch.ones(2, 1).to(x.device)], 1), X),
    (".to(x)", lambda x: torch.cat([x, torch.ones(2, 1).to(x)], 1), X),
    (".cuda()", lambda x: torch.cat([x, torch.ones(2, 1).cuda()], 1), X),
])
def test_what_a_gpu_allows_runs_and_stays_there(what, f, arg):
    outcome, out = run(f, arg)
    assert outcome == "ran" and marked(out), what
    expected = torch.cat([arg, torch.ones(2, 1)], 1) if what == ".cuda()" else f(arg)  # (no CUDA here)
    assert torch.equal(out, expected), what  # real numbers: the CPU's


def test_values_are_real_so_data_dependent_code_runs():
    def count_down(x):
        steps = 0
        while x.sum().item() > 0:  # a greedy decoder's early stop reads a value like this
            x = x - 1
            steps += 1
        return steps, x.cpu()

    outcome, (steps, last) = run(count_down, torch.tensor([3.0, 1.0]))
    assert outcome == "ran" and steps == 2 and not marked(last)


def test_a_move_copies_and_leaves_the_original_where_it_was():
    y = torch.ones(3)
    outcome, moved = run(lambda x: y.to(x.device), X)
    assert outcome == "ran" and marked(moved) and moved is not y and not marked(y)
    outcome, back = run(lambda x: x.to("cpu"), X)
    assert outcome == "ran" and not marked(back)


def test_a_modules_parameters_go_with_it_and_a_packed_sequences_lengths_stay_on_the_cpu():
    torch.manual_seed(0)
    gru = torch.nn.GRU(3, 4, batch_first=True)
    place(gru)
    x = torch.randn(2, 5, 3)

    def encode(x, lengths):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h = gru(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0], h

    outcome, (out, h) = run(encode, x, LENGTHS)
    assert outcome == "ran" and marked(out) and marked(h)
    assert run(lambda x: torch.nn.Linear(3, 2)(x), X)[0] == "mismatch"  # a layer made inside, on the CPU


# ------------------------------------------------------------------ the probe and the check


SOURCE = '''
import torch
from torch import nn

class Decoder(nn.Module):
    def __init__(self, vocab=7, d=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.out = nn.Linear(d, vocab)

    def greedy(self, src, n):
        ys = torch.full((src.shape[0], 1), 1, dtype=torch.long, device=src.device)
        for _ in range(n):
            nxt = self.out(self.emb(ys).mean(1) + self.emb(src).mean(1)).argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], 1)
            if bool((nxt == 0).all()):
                break
        return ys[:, 1:]
'''


class _Student:
    """A check's view of a student's module (`probe`), run in this process."""

    def __init__(self, source: str):
        self.module = types.ModuleType("student")
        exec(compile(source, "student", "exec"), self.module.__dict__)

    def probe(self, name, **kwargs):
        return probes.run_local(name, self.module, **kwargs)


def _check(source: str) -> dict:
    return expect_runs_elsewhere(_Student(source), cls="Decoder", method="greedy",
                                 args=[np.array([[2, 3], [4, 5]]), 4], what="Decoder.greedy")


def test_a_method_that_makes_its_tensors_where_its_input_is_passes():
    found = _check(SOURCE)
    assert found["ran"] and found["same"] and found["outputs"][0]["device"] == DEVICE


@pytest.mark.parametrize("wrong,says", [
    ("device=src.device)", "stopped with PyTorch's error"),
    ("return ys[:, 1:]", "came back on cpu"),
    ("return ys[:, 1:]", "cannot become a NumPy array"),
])
def test_a_method_that_does_not_fails_naming_the_symptom(wrong, says):
    edit = {"stopped with PyTorch's error": ("device=src.device)", ")"),
            "came back on cpu": ("return ys[:, 1:]", "return ys[:, 1:].cpu()"),
            "cannot become a NumPy array": ("return ys[:, 1:]", "return torch.from_numpy(ys[:, 1:].numpy())")}[says]
    with pytest.raises(AssertionError, match=says):
        _check(SOURCE.replace(*edit))


def test_what_the_stand_in_cannot_do_is_no_ones_fault():
    """A generator on a CUDA device cannot be made on a CPU build: the run is inconclusive and passes."""
    source = SOURCE.replace("        return ys[:, 1:]", "        torch.Generator(device=src.device)\n        return ys[:, 1:]")
    found = _check(source)
    assert not found["ran"] and found["inconclusive"] and not found["mismatch"]
