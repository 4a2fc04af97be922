"""The shared machinery of Unit 5: the dates task (`lmcourse.dates`), the given attention and the cost
formula (`lmcourse.transformer`), PyTorch's blocks behind the course's names (`lmcourse.grading.layers`),
the ``no_builtin_transformer`` rule, and the learning rates `train_and_trace` records."""

from __future__ import annotations

import datetime as dt
import doctest
import types

import numpy as np
import pytest
import torch
from torch import nn

from lmcourse import dates
from lmcourse.grading import rules
from lmcourse.grading.layers import TorchDecoderBlock, TorchEncoderBlock, TorchLayerNorm
from lmcourse.grading.sandbox.inside import probes
from lmcourse.seq2seq import PAD_ID, seq2seq_batch
from lmcourse.transformer import MultiHeadAttention, flops_per_token, parameter_count


def test_dates_doctests():
    failures, tried = doctest.testmod(dates)
    assert failures == 0 and tried >= 6


def test_every_format_parses_back_to_its_day_and_encodes():
    for day in dates.random_dates(500, rng=3) + [dates.FIRST_DAY, dates.LAST_DAY, dt.date(2000, 2, 29)]:
        for name in dates.FORMATS:
            text = dates.format_date(day, name)
            assert dates.parse_date(text) == day, (name, text)
            assert dates.decode(dates.encode(text)) == text
            assert len(text) <= dates.MAX_SOURCE_LEN
        assert len(dates.iso(day)) == dates.TARGET_LEN


def test_date_pairs_are_deterministic_cover_every_format_and_batch_with_the_course_ids():
    pairs = dates.date_pairs(700, rng=5)
    assert pairs == dates.date_pairs(700, rng=np.random.default_rng(5))
    assert pairs != dates.date_pairs(700, rng=6)
    sources = [dates.decode(s) for s, _ in pairs]
    for (s, t), text in zip(pairs, sources):
        assert dates.decode(t) == dates.iso(dates.parse_date(text))
    seen = set()
    for text in sources:
        for name in dates.FORMATS:
            try:
                if dates.format_date(dates.parse_date(text), name) == text:
                    seen.add(name)
            except ValueError:
                pass
    assert seen == set(dates.FORMATS)
    assert dates.PAD_ID == PAD_ID and dates.VOCAB.itos[:4] == ["<BOS>", "<EOS>", "<UNK>", "<PAD>"]
    batch = seq2seq_batch(pairs[:8])
    assert (batch.tgt_out != PAD_ID).sum(1).tolist() == [dates.TARGET_LEN + 1] * 8  # targets are never padded
    with pytest.raises(ValueError, match="not in the dates vocabulary"):
        dates.encode("3 Mär 2021")
    with pytest.raises(KeyError, match="unknown date format"):
        dates.date_pairs(2, rng=0, formats=["mm/dd/yyyy"])
    with pytest.raises(ValueError, match="not a date"):
        dates.parse_date("31/02/2021")


def test_the_given_attention_matches_nn_multihead_attention_and_keeps_weights_on_request():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    ref = nn.MultiheadAttention(16, 4, batch_first=True)
    ref.load_state_dict(mha.nn_multihead_state())
    x, memory = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    real = torch.arange(7) < torch.tensor([7, 4, 1])[:, None]  # (B, S)
    out = mha(x, memory, real[:, None, None, :])
    expected, weights = ref(x, memory, memory, key_padding_mask=~real, average_attn_weights=False)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    assert mha.weights is None
    mha.keep_weights = True
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    mha(x, mask=causal)
    assert mha.weights.shape == (3, 4, 5, 5) and torch.all(mha.weights.triu(1) == 0)
    torch.testing.assert_close(mha.weights.sum(-1), torch.ones(3, 4, 5))
    with pytest.raises(TypeError, match="boolean"):
        mha(x, mask=causal.float())
    with pytest.raises(ValueError, match="multiple"):
        MultiHeadAttention(10, 4)


def test_flops_per_token_counts_the_matrix_products():
    # one encoder layer only, S = T = 1, d = 1, d_ff = 1: projections 8, scores 4, feed-forward 4 = 16
    assert flops_per_token(1, 1, 1, 0, 1, 1, 1)["encoder"] == 16
    parts = flops_per_token(64, 256, 2, 2, 18, 11, 45)
    assert parts["total"] == pytest.approx(parts["encoder"] + parts["decoder"] + parts["unembedding"])
    assert parts["unembedding"] == 2 * 64 * 45
    assert parameter_count(nn.Linear(3, 2)) == 8


def _mapped(ours: nn.Module, theirs: nn.Module, pairs: dict) -> None:
    """Copy our (course-named) parameters into PyTorch's layer."""
    p = dict(ours.named_parameters())
    with torch.no_grad():
        for mine, torch_name in pairs.items():
            theirs.get_parameter(torch_name).copy_(p[mine])
        for ours_attn, their_attn in (("attn", "self_attn"), ("self_attn", "self_attn"), ("cross_attn", "multihead_attn")):
            if f"{ours_attn}.q_proj.weight" in p:
                for w in ("weight", "bias"):
                    theirs.get_parameter(f"{their_attn}.in_proj_{w}").copy_(
                        torch.cat([p[f"{ours_attn}.{n}_proj.{w}"] for n in "qkv"]))
                    theirs.get_parameter(f"{their_attn}.out_proj.{w}").copy_(p[f"{ours_attn}.out_proj.{w}"])


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_trusted_blocks_are_pytorchs_layers_under_the_course_names(norm_first):
    torch.manual_seed(1)
    common = {f"ff.ff{i}.{w}": f"linear{i}.{w}" for i in (1, 2) for w in ("weight", "bias")}
    enc = TorchEncoderBlock(16, 4, 32, norm_first)
    ref = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.3 * torch.randn_like(p))
    _mapped(enc, ref, {**common, **{f"ln{i}.{w}": f"norm{i}.{w}" for i in (1, 2) for w in ("weight", "bias")}})
    x = torch.randn(3, 6, 16)
    real = torch.arange(6) < torch.tensor([6, 3, 1])[:, None]
    torch.testing.assert_close(enc(x, real[:, None, None, :]), ref(x, src_mask=None, src_key_padding_mask=~real),
                               rtol=1e-5, atol=1e-5)
    dec = TorchDecoderBlock(16, 4, 32, norm_first)
    ref = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for p in dec.parameters():
            p.add_(0.3 * torch.randn_like(p))
    _mapped(dec, ref, {**common, **{f"ln{i}.{w}": f"norm{i}.{w}" for i in (1, 2, 3) for w in ("weight", "bias")}})
    y = torch.randn(3, 4, 16)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    torch.testing.assert_close(dec(y, x, causal, real[:, None, None, :]),
                               ref(y, x, tgt_mask=~causal, memory_key_padding_mask=~real), rtol=1e-5, atol=1e-5)
    assert dict(TorchLayerNorm(8, eps=1e-3).named_parameters()).keys() == {"weight", "bias"}


STUDENT = """
import torch
import torch.nn.functional as F
from torch import nn


class ByHand(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Builtin(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x)


def train(lr=0.1, warmup=2, steps=3):
    model = ByHand()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    for _ in range(steps):
        loss = model(torch.arange(8.0).reshape(2, 4)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model
"""


@pytest.fixture
def student():
    module = types.ModuleType("student_norms")
    exec(compile(STUDENT, "student_norms.py", "exec"), module.__dict__)
    return module


def test_the_transformer_rule_refuses_builtin_norms_at_run_time_and_in_the_source(student):
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    with pytest.raises(probes.BuiltinNormUsed, match="layer_norm"):
        probes.run_local("module_forward", student, cls="Builtin", inputs=[x], no_builtin_transformer=True)
    assert probes.run_local("module_forward", student, cls="Builtin", inputs=[x])["outputs"][0].shape == x.shape
    assert probes.run_local("module_forward", student, cls="ByHand", inputs=[x], no_builtin_transformer=True)
    found = rules.scan(STUDENT)
    assert rules.applying(found, "no_builtin_transformer") and not rules.applying(found, "no_builtin_rnn")
    assert not rules.scan(STUDENT.replace("nn.LayerNorm(d)", "LayerNorm(d)"))  # the student's own class
    for cheat in ("F.layer_norm(x, (4,))", "torch.group_norm(x, 1)", "nn.RMSNorm(4)", "nn.TransformerEncoderLayer(4, 1)"):
        assert rules.applying(rules.scan(f"import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
                                         f"y = {cheat}\n"), "no_builtin_transformer"), cheat


def test_train_and_trace_records_each_steps_learning_rate(student):
    out = probes.run_local("train_and_trace", student, fn="train", cls="ByHand", config={"lr": 0.1, "warmup": 2})
    assert [r[0] for r in out["rates"]] == pytest.approx([0.05, 0.1, 0.1])
    assert len(out["steps"]) == len(out["calls"]) == 3


# 06-bert: PyTorch's ready-made encoder layer refused, LayerNorm and the given attention allowed
ENCODER_STUDENT = """
import torch
from torch import nn
from lmcourse.transformer import MultiHeadAttention


class Ready(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class Parts(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = MultiHeadAttention(8, 2)
        self.ln = nn.LayerNorm(8, eps=1e-12)

    def forward(self, x):
        return self.ln(x + self.attn(x))


def draw(n, generator):
    return torch.rand(n, generator=generator)


def ignore(n, generator):
    return torch.rand(n)
"""


@pytest.fixture
def encoder_student():
    module = types.ModuleType("student_encoder")
    exec(compile(ENCODER_STUDENT, "student_encoder.py", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("grad", [True, False], ids=["training", "inference"])
def test_the_encoder_rule_refuses_the_ready_made_layer_and_keeps_layer_norm_and_the_given_attention(
        encoder_student, grad):
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    with pytest.raises(probes.BuiltinEncoderUsed, match="encoder layer written from its parts"):
        probes.run_local("module_forward", encoder_student, cls="Ready", inputs=[x], grad=grad, no_builtin_encoder=True)
    assert probes.run_local("module_forward", encoder_student, cls="Ready", inputs=[x], grad=grad)["outputs"]
    out = probes.run_local("module_forward", encoder_student, cls="Parts", inputs=[x], grad=grad, no_builtin_encoder=True)
    assert out["outputs"][0].shape == x.shape
    found = rules.scan(ENCODER_STUDENT)
    assert rules.applying(found, "no_builtin_encoder")
    assert not rules.applying(rules.scan(ENCODER_STUDENT.replace("nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)",
                                                                 "Parts()")), "no_builtin_encoder")
    for cheat in ("nn.MultiheadAttention(8, 2)", "F.multi_head_attention_forward", "torch._transformer_encoder_layer_fwd"):
        assert rules.applying(rules.scan(f"import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
                                         f"y = {cheat}\n"), "no_builtin_encoder"), cheat


def test_call_with_generators_gives_each_call_its_own_seeded_generator(encoder_student):
    same = probes.run_local("call_with_generators", encoder_student, fn="draw", args=[4], seeds=[7, 7, 8])
    assert np.array_equal(same[0], same[1]) and not np.array_equal(same[0], same[2])
    # torch's global generator is reset before every call: a function that ignores its generator repeats itself
    ignored = probes.run_local("call_with_generators", encoder_student, fn="ignore", args=[4], seeds=[7, 8])
    assert np.array_equal(ignored[0], ignored[1])
