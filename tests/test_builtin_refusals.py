"""The rules "written by hand": PyTorch's built-in attention (and recurrent layers) refused in the student's code.

Both halves of a rule, run in this process:

- the guard inside the worker (`probes.without_builtins`, the probes' keywords
  ``no_builtin_attention=True`` and ``no_builtin_rnn=True``): every way of
  reaching PyTorch's attention raises `BuiltinAttentionUsed` while it is
  active, a name the student's module bound at import time included, and
  works again afterwards; attention written with tensor operations runs;
  everything is put back when the student's code raises;
- the source scan outside it (`lmcourse.grading.rules`) and the plugin that
  applies it: each rule counts the findings about its own built-ins and
  every way around a guard, and 03-rnnlm's rule says what it always said.

tests/test_sandbox.py runs the attention guard through a real worker.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmcourse.grading import rules
from lmcourse.grading.plugin import GradingPlugin, StudentProxy
from lmcourse.grading.sandbox.inside import probes

STUDENT = '''
import math
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.functional import scaled_dot_product_attention as sdpa  # bound before any guard
from torch.nn.attention.flex_attention import flex_attention


def by_hand(q, k, v, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V, with tensor operations."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def heads(x):
    """(B, T, 8) -> (B, 2, T, 4): queries, keys and values all at once, for the calls below."""
    return x.view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2)


def through_F(x):
    h = heads(x)
    return F.scaled_dot_product_attention(h, h, h)


def through_the_full_path(x):
    h = heads(x)
    return torch.nn.functional.scaled_dot_product_attention(h, h, h)


def through_a_name_bound_at_import(x):
    h = heads(x)
    return sdpa(h, h, h)


def through_the_c_function(x):
    h = heads(x)
    return torch._C._nn.scaled_dot_product_attention(h, h, h)


def through_flex_attention(x):
    h = heads(x)
    return flex_attention(h, h, h)


class Layer(nn.Module):
    """One of PyTorch's attention layers on x (B, T, 8)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.layer = {
            "MultiheadAttention": lambda: nn.MultiheadAttention(8, 2, batch_first=True),
            "TransformerEncoderLayer": lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
            "TransformerDecoderLayer": lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
            "Transformer": lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True),
        }[kind]()

    def forward(self, x):
        if self.kind == "MultiheadAttention":
            return self.layer(x, x, x)[0]
        if self.kind == "TransformerEncoderLayer":
            return self.layer(x)
        return self.layer(x, x)


class ByHand(nn.Module):
    """Self-attention written by hand, beside a GRU (which Unit 4 allows)."""

    def __init__(self, recurrent=False):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.gru = nn.GRU(8, 8, batch_first=True) if recurrent else None

    def forward(self, x):
        if self.gru is not None:
            x = self.gru(x)[0]
        h = heads(self.proj(x))
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()
        return by_hand(h, h, h, causal)


class Raises(ByHand):
    def forward(self, x):
        super().forward(x)
        raise ValueError("the student's own mistake")


def train(steps=2):
    torch.manual_seed(0)
    model = Layer("MultiheadAttention")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = model(torch.randn(2, 3, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model
'''

FUNCTIONS = ["through_F", "through_the_full_path", "through_a_name_bound_at_import", "through_the_c_function",
             pytest.param("through_flex_attention",  # eager flex_attention says that it would rather be compiled
                          marks=pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile"))]
LAYERS = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer"]
X = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)


@pytest.fixture
def student():
    """The student's module, imported afresh: its import-time bindings hold PyTorch's own functions."""
    module = types.ModuleType("student")
    exec(compile(STUDENT, "student.py", "exec"), module.__dict__)
    return module


def everything_guarded(student) -> dict:
    """What every name a guard replaces holds now: PyTorch's owners' and the student's module's."""
    held = {}
    for keyword, refusal in probes.REFUSALS.items():
        for path in refusal.owners:
            owner = probes._owner(path)
            held.update({(path, name): vars(owner).get(name) for name in refusal.names})
    held.update({("student", name): value for name, value in vars(student).items()})
    return held


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


# --------------------------------------------------------------------------- the guard in the worker

@pytest.mark.parametrize("way", FUNCTIONS)
def test_each_way_to_call_builtin_attention_is_refused_then_works_again(student, way):
    x = torch.from_numpy(X)
    with probes.without_builtin_attention(module=student):
        with pytest.raises(probes.BuiltinAttentionUsed, match="asks for attention written with tensor operations"):
            getattr(student, way)(x)
    h = student.heads(x)
    torch.testing.assert_close(getattr(student, way)(x), student.by_hand(h, h, h), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("kind", LAYERS)
def test_each_builtin_attention_layer_is_refused_then_works_again(student, kind, grad):
    """Through the probe, as a check asks: in training, and in inference, where nn.MultiheadAttention and
    nn.TransformerEncoderLayer would take their fused kernels instead of F.multi_head_attention_forward. A
    module probe runs under the function mode, which turns their fast paths off (they take it only when no
    mode is active), so both go through F.multi_head_attention_forward; a training probe, without the mode,
    meets the fused kernels in the dispatcher (the message names the first one called: a decoder layer's
    self-attention, nn.Transformer's encoder)."""
    kw = dict(cls="Layer", init_kwargs={"kind": kind}, inputs=[X], grad=grad)
    with pytest.raises(probes.BuiltinAttentionUsed) as refused:
        probes.run_local("module_forward", student, no_builtin_attention=True, **kw)
    assert "torch's `multi_head_attention_forward`" in str(refused.value)
    assert probes.run_local("module_forward", student, **kw)["outputs"][0].shape == X.shape  # restored
    if not grad:
        fused = {"MultiheadAttention": "_native_multi_head_attention",
                 "TransformerDecoderLayer": "_native_multi_head_attention",
                 "TransformerEncoderLayer": "_transformer_encoder_layer_fwd",
                 "Transformer": "_transformer_encoder_layer_fwd"}
        layer = student.Layer(kind=kind).eval()
        with probes.without_builtins(probes.REFUSALS["no_builtin_attention"], module=student, functions=False):
            with pytest.raises(probes.BuiltinAttentionUsed) as refused, torch.no_grad():
                layer(torch.from_numpy(X))
        assert f"torch's `{fused[kind]}`" in str(refused.value)  # by the name PyTorch's layer looks up


def test_a_name_bound_at_import_time_is_refused_and_given_back(student):
    """``from torch.nn.functional import scaled_dot_product_attention as sdpa`` binds PyTorch's function in the
    student's module before any guard: the guard replaces that name too, and puts the very same object back."""
    original = F.scaled_dot_product_attention
    assert student.sdpa is original is torch._C._nn.scaled_dot_product_attention
    with probes.without_builtin_attention(module=student):
        assert student.sdpa is not original
        with pytest.raises(probes.BuiltinAttentionUsed, match="scaled_dot_product_attention"):
            student.through_a_name_bound_at_import(torch.from_numpy(X))
    assert student.sdpa is original is F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention
    # without the student's module, only PyTorch's names are replaced, and the bound name escapes them; the
    # function mode sees the call, and without it the dispatcher's refusal (`refused_operators`)
    with probes.without_builtin_attention():
        with pytest.raises(probes.BuiltinAttentionUsed, match="scaled_dot_product_attention"):
            student.through_a_name_bound_at_import(torch.from_numpy(X))
    with probes.without_builtins(probes.REFUSALS["no_builtin_attention"], functions=False):
        with pytest.raises(probes.BuiltinAttentionUsed, match="aten::scaled_dot_product_attention"):
            student.through_a_name_bound_at_import(torch.from_numpy(X))


def test_attention_written_with_tensor_operations_is_not_refused(student):
    x = torch.from_numpy(X)
    h = student.heads(x)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(h, h, h, attn_mask=causal)
    with probes.without_builtins(*probes.REFUSALS.values(), module=student):
        torch.testing.assert_close(student.by_hand(h, h, h, causal), expected, rtol=1e-5, atol=1e-6)
    out = probes.run_local("module_forward", student, cls="ByHand", inputs=[X], no_builtin_attention=True,
                           no_builtin_rnn=True)
    assert out["outputs"][0].shape == (2, 2, 5, 4) and out["param_grads"]["proj.weight"] is not None


def test_the_guard_is_put_back_when_the_students_code_raises(student):
    before = everything_guarded(student)
    with pytest.raises(ValueError, match="the student's own mistake"):
        probes.run_local("module_forward", student, cls="Raises", inputs=[X], no_builtin_attention=True,
                         no_builtin_rnn=True)
    with pytest.raises(ValueError):
        with probes.without_builtin_attention(module=student):
            raise ValueError("raised inside the guard")
    assert same(everything_guarded(student), before)
    assert not set(vars(torch._VF)) & set(probes.BUILTIN_RNN)  # torch._VF finds its kernels itself again
    assert student.through_F(torch.from_numpy(X)).shape == (2, 2, 5, 4)


def test_the_guards_nest_and_unwind(student):
    before = everything_guarded(student)
    with probes.without_builtin_attention(module=student):
        with probes.without_builtin_attention(module=student), probes.without_builtin_rnn(module=student):
            with pytest.raises(probes.BuiltinAttentionUsed):
                student.through_a_name_bound_at_import(torch.from_numpy(X))
        with pytest.raises(probes.BuiltinAttentionUsed):
            student.through_a_name_bound_at_import(torch.from_numpy(X))
    assert same(everything_guarded(student), before)


def test_each_rule_refuses_its_own_builtins_only(student):
    """03-rnnlm refuses recurrent layers; a unit that refuses attention may still allow nn.GRU (Unit 4's
    encoder), and the other way round."""
    gru = dict(cls="ByHand", init_kwargs={"recurrent": True}, inputs=[X], grad=False)
    assert probes.run_local("module_forward", student, no_builtin_attention=True, **gru)["outputs"]
    with pytest.raises(probes.BuiltinRNNUsed):
        probes.run_local("module_forward", student, no_builtin_rnn=True, **gru)
    with pytest.raises(probes.BuiltinRNNUsed):
        probes.run_local("module_forward", student, no_builtin_rnn=True, no_builtin_attention=True, **gru)
    mha = dict(cls="Layer", init_kwargs={"kind": "MultiheadAttention"}, inputs=[X], grad=False)
    assert probes.run_local("module_forward", student, no_builtin_rnn=True, **mha)["outputs"]
    assert issubclass(probes.BuiltinAttentionUsed, probes.BuiltinUsed)
    assert issubclass(probes.BuiltinRNNUsed, probes.BuiltinUsed) and issubclass(probes.BuiltinUsed, RuntimeError)


def test_the_recurrent_refusal_says_what_it_always_said():
    with probes.without_builtin_rnn():
        with pytest.raises(probes.BuiltinRNNUsed) as refused:
            torch.nn.LSTM(3, 4)(torch.ones(1, 2, 3))
        with pytest.raises(probes.BuiltinRNNUsed):
            torch.nn.GRUCell(3, 4)(torch.ones(2, 3))
    assert str(refused.value) == (
        "PyTorch's built-in recurrent layer was called (torch's `lstm` kernel, used by nn.RNN, nn.LSTM, nn.GRU and "
        "their cells); this assignment asks for the recurrence written with tensor operations")
    assert torch.nn.LSTM(3, 4)(torch.ones(1, 2, 3))[0].shape == (1, 2, 4)


def test_the_other_probes_refuse_too(student):
    """The training probes and the fake-device run keep the refusal (it is not one of their inconclusive ends)."""
    with pytest.raises(probes.BuiltinAttentionUsed):
        probes.run_local("train_and_keep", student, fn="train", no_builtin_attention=True)
    with pytest.raises(probes.BuiltinAttentionUsed):
        probes.run_local("train_and_trace", student, fn="train", cls="Layer", no_builtin_attention=True)
    with pytest.raises(probes.BuiltinAttentionUsed):
        probes.run_local("forward_on_other_device", student, cls="Layer", init_kwargs={"kind": "Transformer"},
                         inputs=[X], no_builtin_attention=True)
    assert probes.run_local("forward_on_other_device", student, cls="ByHand", inputs=[X],
                            no_builtin_attention=True)["ran"]


# --------------------------------------------------------------------------- the scan outside it

ATTENTION_CHEATS = [
    "from torch.nn.functional import scaled_dot_product_attention\n",
    "from torch.nn.functional import scaled_dot_product_attention as attend\n",
    "out = F.scaled_dot_product_attention(q, k, v)\n",
    "out = torch.nn.functional.scaled_dot_product_attention(q, k, v)\n",
    "out = F.multi_head_attention_forward(q, k, v)\n",
    "layer = nn.MultiheadAttention(8, 2)\n",
    "from torch.nn import MultiheadAttention as MHA\n",
    "layer = nn.TransformerEncoderLayer(8, 2)\n",
    "layer = nn.Transformer(8, 2)\n",
    "out = torch._native_multi_head_attention(q, k, v)\n",
    "from torch.nn.attention.flex_attention import flex_attention\n",
    "layer = getattr(nn, 'MultiheadAttention')(8, 2)\n",
]
GUARD_CHEATS = [
    "import sys\nsys.modules['lmc_inside.probes'].without_builtin_attention = None\n",
    "from lmc_inside.probes import REFUSALS\n",
    "guard = probes.REFUSALS\n",
    "BUILTIN_ATTENTION = ()\n",
    "except BuiltinAttentionUsed:\n    pass\n",
    "guard = without_builtins\n",
    "guard = 'without_builtins'\n",
]
PREFIX = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


@pytest.mark.parametrize("cheat", ATTENTION_CHEATS)
def test_the_scan_flags_builtin_attention_for_its_rule_only(cheat):
    found = rules.scan(PREFIX + cheat)
    assert rules.applying(found, "no_builtin_attention"), cheat
    assert rules.applying(found, "no_builtin_rnn") == {}, cheat  # 03-rnnlm never cared


@pytest.mark.parametrize("cheat", GUARD_CHEATS)
def test_the_scan_flags_the_guards_internal_names_for_every_rule(cheat):
    if cheat.startswith("except"):
        cheat = "try:\n    pass\n" + cheat
    found = rules.scan(PREFIX + cheat)
    assert rules.applying(found, "no_builtin_attention") and rules.applying(found, "no_builtin_rnn"), cheat


def test_the_students_own_attention_is_not_flagged():
    """The assignment's own names: a bare scaled_dot_product_attention, a MultiHeadAttention class, self.attn."""
    own = PREFIX + (
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
        "    return torch.softmax(scores, dim=-1) @ v, scores\n"
        "class MultiHeadAttention(nn.Module):\n"
        "    def __init__(self, d_model, n_heads):\n"
        "        super().__init__()\n"
        "        self.q_proj = nn.Linear(d_model, d_model)\n"
        "        self.encoder = nn.GRU(d_model, d_model, batch_first=True)\n"
        "    def forward(self, x, mask=None):\n"
        "        return scaled_dot_product_attention(self.q_proj(x), x, x, mask)\n")
    found = rules.scan(own)
    assert found == {".GRU": [11]}  # flagged, but it counts only where recurrent layers are refused
    assert rules.applying(found, "no_builtin_attention") == {}
    assert rules.applying(found, "no_builtin_rnn") == {".GRU": [11]}


def test_projections_made_in_a_loop_on_self_are_not_flagged():
    """`setattr(self, name, ...)` and `getattr(self, name)` with a computed name reach the student's own object:
    no built-in, no guard (issue #40: this loop voided 18 points as "built-in attention"). The same call on
    any other object, or on a `self` the code rebinds, is still flagged."""
    own = PREFIX + (
        "class MultiHeadAttention(nn.Module):\n"
        "    def __init__(self, d_model, n_heads):\n"
        "        super().__init__()\n"
        "        for name in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):\n"
        "            setattr(self, name, nn.Linear(d_model, d_model))\n"
        "    def forward(self, x):\n"
        "        q, k, v = (getattr(self, f'{p}_proj')(x) for p in 'qkv')\n"
        "        return self.out_proj(q + k + v)\n")
    assert rules.scan(own) == {}
    for other in ("setattr(F, name, None)\n", "getattr(torch, name)\n", "getattr(nn, 'Multihead' + 'Attention')\n",
                  "def f(self):\n    self = F\n    return getattr(self, name)\n"):
        found = rules.scan(PREFIX + "name = 'x'\n" + other)
        assert any("computed name" in what for what in found), other
        assert rules.applying(found, "no_builtin_attention"), other


def test_the_two_halves_of_each_rule_agree():
    """The same keywords; every function the guard refuses is a name the scan looks for; and the scan knows
    the names of everything the guard is made of."""
    assert set(probes.REFUSALS) == set(rules.RULES)
    unflagged = {"lstm", "gru"}  # torch.lstm, torch.gru: as attributes, names too common to flag (self.lstm)
    for keyword, refusal in probes.REFUSALS.items():
        assert set(refusal.names) - unflagged <= rules.RULES[keyword].names, keyword
        # a name may belong to several rules (nn.MultiheadAttention's kernel: built-in attention, and 06-bert's
        # ready-made layers); the scan must name this rule among them
        assert all(keyword in rules.families(f"torch.{name}") for name in set(refusal.names) - unflagged)
    guard = {name for name, value in vars(probes).items()
             if (isinstance(value, type) and issubclass(value, probes.BuiltinUsed))
             or value is probes.REFUSALS or any(value is r.names for r in probes.REFUSALS.values())
             or getattr(value, "__name__", "").startswith(("without_builtin", "refusing_builtin"))}
    assert len(guard) >= 10 and guard <= rules.GRADER_INTERNALS, guard - rules.GRADER_INTERNALS


# --------------------------------------------------------------------------- the plugin applies both halves

class _Worker:
    def __init__(self):
        self.asked = []

    def probe(self, name, *, timeout=None, **kwargs):
        self.asked.append(name)
        return "ran"


def _proxy(source: str) -> tuple[StudentProxy, _Worker, GradingPlugin]:
    findings = rules.scan_answers(source, [(1, source.count("\n") + 1, "answer")], {"answer"})
    worker = _Worker()
    plugin = GradingPlugin(worker=worker, reference=None, tier="cpu", assignment="04-attention", findings=findings)
    return StudentProxy(worker, plugin), worker, plugin


def test_the_plugin_refuses_a_probe_whose_rule_the_source_breaks():
    proxy, worker, plugin = _proxy(PREFIX + "out = F.scaled_dot_product_attention(q, k, v)\nrnn = nn.GRU(8, 8)\n")
    with pytest.raises(plugin.StudentError) as refused:
        proxy.probe("module_forward", cls="MultiHeadAttention", no_builtin_attention=True)
    assert worker.asked == []  # never sent to the worker
    message = refused.value.message
    assert message.startswith("`MultiHeadAttention` was not run: this assignment asks for attention written with "
                              "tensor operations, and your answer cells use `.scaled_dot_product_attention` "
                              "(line 4 of cell 'answer').")
    assert "Built-in attention (F.scaled_dot_product_attention, nn.MultiheadAttention" in message
    assert ".GRU" not in message  # allowed under this rule
    assert proxy.probe("module_forward", cls="Encoder") == "ran"  # no rule asked: nothing to verify
    with pytest.raises(plugin.StudentError, match="recurrence written with tensor operations"):
        proxy.probe("module_forward", cls="Encoder", no_builtin_rnn=True)


def test_the_recurrent_rules_message_is_unchanged():
    proxy, worker, plugin = _proxy(PREFIX + "cell = nn.LSTMCell(3, 4)\nattend = F.scaled_dot_product_attention\n")
    with pytest.raises(plugin.StudentError) as refused:
        proxy.probe("module_forward", cls="LSTM", no_builtin_rnn=True)
    assert refused.value.message == (
        "`LSTM` was not run: this assignment asks for the recurrence written with tensor operations, and your "
        "answer cells use `.LSTMCell` (line 4 of cell 'answer'). Built-in recurrent layers (nn.RNN, nn.LSTM, "
        "nn.GRU and their cells), torch's kernel tables, dynamic code (eval, exec, computed getattr) and the "
        "grader's own modules are not allowed in this assignment's answers")


def test_a_way_around_the_guard_breaks_every_rule():
    proxy, worker, plugin = _proxy(PREFIX + "import sys\nguard = sys.modules\n")
    for keyword in rules.RULES:
        with pytest.raises(plugin.StudentError, match="`sys.modules`"):
            proxy.probe("module_forward", cls="MultiHeadAttention", **{keyword: True})
    proxy, worker, plugin = _proxy(PREFIX + "def softmax(x):\n    return x.exp() / x.exp().sum(-1, keepdim=True)\n")
    assert proxy.probe("module_forward", cls="MultiHeadAttention", no_builtin_attention=True) == "ran"


# --------------------------------------------------------------------------- 07-gpt: tokenizer libraries

TOKENIZER_CHEATS = [
    "import tiktoken\n",
    "import tiktoken.load\n",
    "from tiktoken import Encoding\n",
    "from tiktoken._educational import bpe_train\n",
    "from tokenizers import Tokenizer, models\n",
    "import sentencepiece as spm\n",
    "from transformers import GPT2TokenizerFast\n",
    "from lmcourse.bpe import tiktoken_encoding\n",
    "from lmcourse import bpe\nids = bpe.tiktoken_encoding(merges).encode(text)\n",
    "from lmcourse.bpe import gpt2_encoding as g\n",
]


@pytest.mark.parametrize("cheat", TOKENIZER_CHEATS)
def test_the_scan_flags_tokenizer_libraries_for_their_rule_only(cheat):
    found = rules.scan(cheat)
    assert rules.applying(found, "no_tokenizer_library"), cheat
    assert rules.applying(found, "no_builtin_attention") == {}, cheat  # a tokenizer is no attention


def test_the_bpe_assignments_given_imports_are_not_flagged():
    """What 07-gpt's setup cell imports, and a student's own encode with its own names."""
    own = ("import regex\nfrom collections import Counter\nfrom lmcourse import bpe\n"
           "from lmcourse.bpe import ENDOFTEXT, GPT2_PATTERN, bytes_to_unicode, pretokenize, to_gpt2_ids\n"
           "def encode(text, merges, special_tokens=()):\n"
           "    tokenizer = {tuple(m): i for i, m in enumerate(merges)}\n"
           "    return [b for w in bpe.pretokenize(text) for b in w.encode('utf-8')]\n")
    assert rules.scan(own) == {}


def test_the_tokenizer_guard_refuses_tiktoken_and_the_course_builders_then_gives_them_back():
    import tiktoken

    from lmcourse import bpe

    module = types.ModuleType("student")
    module.Encoding = tiktoken.Encoding  # bound at import time: `from tiktoken import Encoding`
    refusal = probes.REFUSALS["no_tokenizer_library"]
    with probes.without_builtins(refusal, module=module):
        for make in (lambda: tiktoken.Encoding("x", pat_str=".", mergeable_ranks={b"a": 0}, special_tokens={}),
                     lambda: module.Encoding("x", pat_str=".", mergeable_ranks={b"a": 0}, special_tokens={}),
                     lambda: bpe.tiktoken_encoding([])):
            with pytest.raises(probes.BuiltinTokenizerUsed, match="byte-pair encoding written by hand"):
                make()
    assert bpe.tiktoken_encoding([(97, 98)]).encode("ab") == [256]  # given back
    assert module.Encoding is tiktoken.Encoding


# --------------------------------------------------------------------------- by what runs, not by name

KEPT = '''
import operator
import pkgutil
import torch
import torch.nn.functional as F
from torch import nn

# kept at import time, where no guard is yet, in places no name replacement looks
_KEPT = (operator.attrgetter("nn.functional.multi_head" + "_attention_forward")(torch),
         pkgutil.resolve_name("torch:layer" + "_norm"))


class KeptAttention(nn.Module):
    """nn.MultiheadAttention's computation, through a function kept since import (with the weights returned,
    so the computation has no fused operator of its own: only the function mode sees it)."""

    def __init__(self):
        super().__init__()
        self.inner = nn.MultiheadAttention(8, 2, batch_first=False)

    def forward(self, x):
        m = self.inner
        return _KEPT[0](x, x, x, 8, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
                        m.out_proj.weight, m.out_proj.bias, training=self.training, need_weights=True)[0]


class KeptNorm(nn.Module):
    def forward(self, x, _norm=_KEPT[1]):
        return _norm(x, x.shape[-1:])


def own_kernel():
    """Registers a Python kernel of its own for aten::layer_norm while the grader's refusal is active."""
    lib = torch.library.Library("aten", "IMPL")
    for key in ("CompositeImplicitAutograd", "CPU"):  # the grader's CPU kernel would win over a composite one
        lib.impl("layer_norm", lambda x, shape, w=None, b=None, eps=1e-5, cudnn=True:
                 (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True) + eps).sqrt(), key)
    own_kernel.kept = lib  # alive while the check runs
    return torch.ops.aten.layer_norm(torch.ones(2, 4), [4])  # the newest kernel answers: the student's


def pops_the_function_mode():
    from torch.overrides import _pop_mode
    _pop_mode()
    return torch.zeros(1)
'''


@pytest.fixture
def kept():
    module = types.ModuleType("kept")
    exec(compile(KEPT, "kept", "exec"), module.__dict__)
    yield module
    lib = getattr(module.own_kernel, "kept", None)
    if lib is not None:
        lib._destroy()


def test_a_python_function_kept_since_import_is_refused_by_the_function_mode(kept):
    """F.multi_head_attention_forward has no operator of its own: no dispatcher kernel can refuse it, no name
    replacement sees a copy kept in a tuple; the function mode of every module probe does."""
    x = np.random.default_rng(0).standard_normal((5, 2, 8)).astype(np.float32)
    with pytest.raises(probes.BuiltinAttentionUsed, match="multi_head_attention_forward"):
        probes.run_local("module_forward", kept, cls="KeptAttention", inputs=[x], no_builtin_attention=True)
    assert probes.run_local("module_forward", kept, cls="KeptAttention", inputs=[x])["outputs"][0].shape == x.shape
    with pytest.raises(probes.BuiltinNormUsed, match="layer_norm"):
        probes.run_local("module_forward", kept, cls="KeptNorm", inputs=[x], no_builtin_transformer=True)
    with probes.without_builtins(probes.REFUSALS["no_builtin_transformer"], module=kept, functions=False):
        with pytest.raises(probes.BuiltinNormUsed, match="aten::layer_norm"):  # the dispatcher alone
            kept.KeptNorm()(torch.from_numpy(x))


def test_a_kernel_registered_over_the_graders_is_caught(kept):
    with pytest.raises(probes.GuardRemoved, match="aten::layer_norm"):
        with probes.without_builtins(probes.REFUSALS["no_builtin_transformer"], module=kept, functions=False):
            kept.own_kernel()
    kept.own_kernel.kept._destroy()
    kept.own_kernel.kept = None
    assert torch.layer_norm(torch.ones(2, 4), (4,)).shape == (2, 4)  # the grader's kernels are gone too


def test_a_function_mode_taken_off_the_stack_is_caught(kept):
    with pytest.raises(probes.GuardRemoved, match="function mode"):
        with probes.without_builtins(probes.REFUSALS["no_builtin_transformer"], module=kept):
            kept.pops_the_function_mode()
    assert probes._function_modes() in ([], None)


def test_an_honest_gc_collect_or_simple_namespace_is_not_a_finding():
    """`import gc; gc.collect()` between training runs and `types.SimpleNamespace` records are honest code: a
    finding there would fail every check of a rule. What reaches the grader's objects stays flagged."""
    honest = "import gc\ngc.collect()\nimport types\nrecord = types.SimpleNamespace(loss=1.0)\n" \
             "from gc import collect\nfrom types import SimpleNamespace\n"
    assert rules.scan(honest) == {}
    assert set(rules.scan("import gc\ngc.get_objects()\nimport types\ntypes.FunctionType\n")) == {
        "gc.get_objects", "types.FunctionType"}
    assert "from gc import get_referrers" in rules.scan("from gc import get_referrers\n")


@pytest.mark.slow
def test_a_rule_finding_reaches_lmcourse_check(tmp_path):
    """A student sees a rule's finding before submitting (issue #40, class 6): `lmcourse check` runs the visible
    checks, and a visible check that needs the rule says which construct of which cell it found."""
    from pathlib import Path

    from lmcourse.grading import grade_notebook
    from lmcourse.instructor.testing import submission_from_solution

    root = Path(__file__).resolve().parent.parent
    cheat = {"scaled_dot_product_attention": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                                             "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None\n"}
    nb = submission_from_solution(root, "04-attention", tmp_path, replace=cheat)
    r = grade_notebook(root, "04-attention", nb, tier="cpu", visible_only=True, hints=[])
    named = [t["output"] for t in r["tests"] if t["visibility"] == "visible" and t["score"] == 0
             and "your answer cells use `.scaled_dot_product_attention` (line 2 of cell "
                 "'scaled_dot_product_attention')" in t.get("output", "")]
    assert named, [(t["name"], t.get("output", "")[:200]) for t in r["tests"]]
