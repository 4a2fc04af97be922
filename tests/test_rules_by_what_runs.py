"""Rules enforced by what runs, not by what the source spells (issue 37, classes 2 and 3).

Class 2: a rule that refuses a PyTorch built-in used to be a replaced name inside the worker plus a scan of
the source. ``operator.attrgetter``, ``pkgutil.resolve_name`` and a function kept in a default argument since
import time reach the same C function without the name; each attack below scored full marks that way. Now the
built-in's ATen operator is refused in PyTorch's dispatcher while the check runs (`probes.refused_operators`).

Class 3: libraries. The worker's site-packages holds only what the course allows (numpy, torch, matplotlib,
tqdm, regex and what they need) plus what an assignment's given code needs (`runner.LIBRARIES`,
``autograder/<id>/libraries.json``); tiktoken, tokenizers, transformers, jinja2, gensim are not there, so no
spelling of an import reaches them, and neither do the course's own helpers that wrap them.

Every attack is graded by the real grader (the solution with one definition swapped, only the checks it is
about), must earn 0, and its message must name the rule or say the library is not there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import test_unit02_word2vec as u2
import test_unit05_transformer as u5
import test_unit06_bert as u6
import test_unit07_gpt as u7
import test_unit08_capstone as u8
from lmcourse.grading import grade_notebook
from lmcourse.grading.runner import LIBRARIES, libraries
from lmcourse.grading.sandbox import Limits, StudentError, Worker
from lmcourse.grading.sandbox import libraries as sandbox_libraries
from lmcourse.instructor.testing import submission_from_solution

ROOT = Path(__file__).resolve().parent.parent


def _names(module) -> set[str]:
    """Every check a unit's tests name: the constants of its test module and of its catalogue of known
    mistakes (autograder/<id>/mistakes.py, the test module's `_M`), whether re-exported or not."""
    found = {}
    for source in (getattr(module, "_M", None), module):
        found.update(vars(source) if source is not None else {})
    return {v for k, v in found.items() if k.isupper() and isinstance(v, str)}


def _grade(tmp_path, aid: str, unit, keep: set[str], replace: dict) -> dict:
    nb = submission_from_solution(ROOT, aid, tmp_path, replace=replace)
    result = grade_notebook(ROOT, aid, nb, tier="cpu", exclude=_names(unit) - keep)
    assert result["status"] in ("ok", "import-error"), result
    return {t["name"]: t for t in result["tests"]}


def _earns_nothing(tmp_path, aid: str, unit, keep: set[str], replace: dict, pattern: str) -> None:
    """Each check in `keep` scores 0 and its message matches `pattern` (the rule, or the missing library)."""
    checks = _grade(tmp_path, aid, unit, keep, replace)
    for name in keep:
        assert checks[name]["score"] == 0, checks[name]
        assert re.search(pattern, checks[name]["output"]), checks[name]["output"]


# --------------------------------------------------------------------------- class 2: built-ins by what runs

LAYER_NORM_BY_ATTRGETTER = '''
import operator as _op

_KEPT = (_op.attrgetter("layer" + "_norm")(torch),)  # at import time, in a tuple: no module name holds it


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return _KEPT[0](x, x.shape[-1:], self.weight, self.bias, self.eps)
'''

RMS_NORM_KEPT_SINCE_IMPORT = '''
import operator as _op


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x, _norm=_op.attrgetter("rms" + "_norm")(torch)):
        return _norm(x, x.shape[-1:], self.weight, self.eps)
'''

ATTENTION_BY_RESOLVE_NAME = '''
import pkgutil

_ATTEND = [pkgutil.resolve_name("torch.nn.functional:scaled_dot" + "_product_attention")]


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None, layer=0):
        B, T, d_model = x.shape
        def heads(t):
            return t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if cache is not None:
            k, v = cache.append(layer, k, v)
        past = k.shape[2] - T
        mask = torch.ones(T, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=past)
        out = _ATTEND[0](q, k, v, attn_mask=mask)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, d_model))
'''

BUILTIN_ATTACKS = {
    "05 LayerNorm through operator.attrgetter at import time": (
        "05-transformer", u5, {u5.LAYER_NORM}, {"LayerNorm": LAYER_NORM_BY_ATTRGETTER},
        r"PyTorch's built-in normalisation was called \(torch's `(aten::)?layer_norm`"),
    "08 RMSNorm through a function kept in a default argument since import": (
        "08-capstone", u8, {u8.RMSNORM}, {"RMSNorm": RMS_NORM_KEPT_SINCE_IMPORT},
        r"PyTorch's built-in normalisation was called \(torch's `(aten::)?rms_norm`"),
    "07 attention through pkgutil.resolve_name at import time": (
        "07-gpt", u7, {u7.ATTENTION}, {"CausalSelfAttention": ATTENTION_BY_RESOLVE_NAME},
        r"PyTorch's built-in attention was called \(torch's `(aten::)?scaled_dot_product_attention`"),
}


@pytest.mark.parametrize("attack", list(BUILTIN_ATTACKS))
def test_a_builtin_reached_without_its_name_earns_nothing(attack, tmp_path, mirror):
    _earns_nothing(tmp_path, *BUILTIN_ATTACKS[attack])


# --------------------------------------------------------------------------- class 3: libraries by what exists

GENSIM_WORD2VEC = '''
def train_sgns(sentences, vocab_size, dim=100, window=5, negatives=5, epochs=5, sample=1e-3, lr=0.025,
               batch_size=1024, seed=0):
    import pkgutil
    Word2Vec = pkgutil.resolve_name("gensim.models:Word2Vec")
    model = Word2Vec([[str(w) for w in s] for s in sentences], vector_size=dim, window=window, negative=negatives,
                     sample=sample, epochs=epochs, min_count=1, sg=1, seed=seed, workers=1)
    return np.stack([model.wv[str(w)] if str(w) in model.wv else np.zeros(dim) for w in range(vocab_size)])
'''

ENCODE_THROUGH_THE_COURSES_TIKTOKEN = '''
import operator as _op
import lmcourse.bpe as _bpe

_BUILD = (_op.attrgetter("tiktoken" + "_encoding")(_bpe),)  # kept at import time, before any guard


def encode(text, merges, special_tokens=()):
    return _BUILD[0](merges, special_tokens).encode(text, allowed_special="all")
'''

CHAT_THROUGH_THE_COURSES_JINJA = '''
import operator as _op
import lmcourse.smollm as _smollm

_RENDER = (_op.attrgetter("chat" + "_prompt")(_smollm),)  # kept at import time, before any guard


def chat_prompt(messages):
    return _RENDER[0](messages)
'''

WORDPIECE_BY_HUGGING_FACE = '''
def wordpiece_tokenize(text, vocab):
    import pkgutil
    tokenizer = pkgutil.resolve_name("tokenizers:BertWordPieceTokenizer")(dict(vocab), lowercase=True)
    return tokenizer.encode(text, add_special_tokens=False).ids
'''

LIBRARY_ATTACKS = {
    "02 word2vec trained by gensim, reached by pkgutil.resolve_name": (
        "02-word2vec", u2, {u2.TRAINING}, {"train_sgns": GENSIM_WORD2VEC}, "does not have gensim"),
    "07 encode by the course's tiktoken wrapper, kept since import": (
        "07-gpt", u7, {u7.ENCODE}, {"encode": ENCODE_THROUGH_THE_COURSES_TIKTOKEN}, "does not have tiktoken"),
    "08 chat template rendered by the course's jinja2 helper, kept since import": (
        "08-capstone", u8, {u8.CHAT}, {"chat_prompt": CHAT_THROUGH_THE_COURSES_JINJA}, "does not have jinja2"),
    "06 WordPiece by Hugging Face's tokenizers (no rule of its own: the library is simply not there)": (
        "06-bert", u6, {u6.WORDPIECE}, {"wordpiece_tokenize": WORDPIECE_BY_HUGGING_FACE}, "does not have tokenizers"),
}


@pytest.mark.parametrize("attack", list(LIBRARY_ATTACKS))
def test_a_library_the_assignment_leaves_out_is_not_there(attack, tmp_path, mirror):
    aid, unit, keep, replace, fragment = LIBRARY_ATTACKS[attack]
    _earns_nothing(tmp_path, aid, unit, keep, replace, re.escape(fragment))


PROBE = '''
import os
import importlib


def look(name):
    try:
        importlib.import_module(name)
        imported = "imported"
    except ImportError as exc:
        imported = str(exc)
    import site
    on_disk = any(os.path.exists(os.path.join(p, name)) for p in site.getsitepackages())
    return [imported, on_disk]


def load(name):
    importlib.import_module(name)
'''


def test_left_out_libraries_are_absent_from_the_view_not_only_refused():
    """Under bubblewrap the library's folder does not exist in the worker; the import hook only words the
    message. transformers is left out of every assignment (it would write a Llama, a BERT or a tokenizer)."""
    if not sandbox_libraries.site_dirs():
        pytest.skip("no site-packages")
    libs = libraries(ROOT, "08-capstone")
    assert {"transformers", "tokenizers", "tiktoken", "jinja2", "gensim"} <= set(sandbox_libraries.absent(libs))
    with Worker(PROBE, limits=Limits(call_timeout=60), libraries=libs) as w:
        if "bubblewrap" not in w.isolation and "bwrap" not in w.isolation:
            pytest.skip(f"no bubblewrap here: {w.isolation}")
        for name in ("transformers", "tokenizers", "jinja2"):
            imported, on_disk = w.call("look", name)
            assert not on_disk and imported == f"No module named '{name}'", (name, imported)
            with pytest.raises(StudentError) as failed:  # what the student reads, worded on the grader's side
                w.call("load", name)
            assert f"No module named '{name}': the grader's sandbox for this assignment does not have {name}" \
                in failed.value.message and "standard library, numpy, scipy, torch" in failed.value.message
        with pytest.raises(StudentError) as failed:  # a module that does not exist anywhere: left as it is
            w.call("load", "no_such_library")
        assert "No module named 'no_such_library'" in failed.value.message and "sandbox" not in failed.value.message
        assert w.call("look", "torch") == ["imported", True]
        assert w.call("look", "gguf")[0] == "imported"  # the capstone's GGUF reader needs it
    with Worker(PROBE, limits=Limits(call_timeout=60), libraries=libraries(ROOT, "07-gpt")) as w:
        assert w.call("look", "gguf")[0].startswith("No module named 'gguf'")  # only where it is needed


def test_without_bubblewrap_an_import_hook_refuses_them_and_says_so():
    libs = libraries(ROOT, "07-gpt")
    with Worker(PROBE, limits=Limits(call_timeout=60), libraries=libs, isolate=False) as w:
        imported, _ = w.call("look", "tiktoken")
        assert imported.startswith("No module named 'tiktoken'")
        assert "refused by an import hook only" in w.isolation


def test_every_allowed_library_is_installed_and_the_policy_is_per_assignment():
    installed = sandbox_libraries.installed()
    assert LIBRARIES - {"pylab"} <= installed | {"lmcourse"}, LIBRARIES - installed
    assert "safetensors" in libraries(ROOT, "06-bert").allowed and "safetensors" not in libraries(ROOT, "07-gpt").allowed
    assert not ({"transformers", "tokenizers", "tiktoken", "sentencepiece", "jinja2", "gensim"}
                & set().union(*(libraries(ROOT, a).allowed for a in
                                ("01-ngrams", "02-word2vec", "03-rnnlm", "04-attention", "05-transformer", "06-bert",
                                 "07-gpt", "08-capstone"))))
