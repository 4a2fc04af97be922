"""06-bert's reference solution against the real thing: Hugging Face's tokenizer and BertModel.

The hidden checks of 06-bert compare a student's WordPiece ids and MiniLM hidden states with the reference
solution's (the grader does not need `transformers`). These tests hold the reference itself to the real
implementations, offline, on the package's files: the ids of `tokenizers` (MiniLM's tokenizer.json, padding
and truncation off) on the checks' own texts (none of which writes a special token's name, such as "[MASK]", as
text: the real tokenizer matches those before WordPiece runs, which the assignment does not ask for), thousands of lines of TinyShakespeare and random strings; and
`transformers.BertModel`'s hidden states on the checks' padded batch of sentences and pairs.
"""

from __future__ import annotations

import numpy as np
import pytest

from lmcourse import data, minilm
from lmcourse.course import Course

from unit_contract import ROOT


@pytest.fixture(scope="module")
def reference():
    return Course(ROOT).assignment("06-bert").reference_module()


@pytest.fixture(scope="module")
def checks():
    """06-bert's conftest and WordPiece checks, as modules (their texts and batches)."""
    assignment = Course(ROOT).assignment("06-bert")
    return assignment.checks_module("conftest"), assignment.checks_module("test_wordpiece")


@pytest.fixture(scope="module")
def tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(data.fetch("minilm-tokenizer")))
    tok.no_padding()  # the file pads every encoding to 128
    tok.no_truncation()
    return tok


def test_wordpiece_ids_equal_the_real_tokenizers(reference, checks, tokenizer):
    _, wordpiece_checks = checks
    vocab = minilm.piece_ids()
    lines = [line for line in data.load_text("tinyshakespeare").split("\n") if line.strip()]
    rng = np.random.default_rng(0)
    randoms = ["".join(rng.choice(wordpiece_checks.POOL, size=int(rng.integers(1, 60)))) for _ in range(2000)]
    texts = list(wordpiece_checks.FIXED) + lines[:3000] + randoms
    wrong = []
    for text in texts:
        theirs = tokenizer.encode(text, add_special_tokens=False).ids
        if reference.wordpiece_tokenize(text, vocab) != theirs:
            wrong.append(text)
    assert not wrong, f"{len(wrong)} of {len(texts)} texts differ, e.g. {wrong[:3]}"


def test_minilm_hidden_states_equal_transformers(reference, checks):
    transformers = pytest.importorskip("transformers")
    import torch

    conftest, _ = checks
    ids, types, am = conftest.wordpiece_batch(reference)
    hf = transformers.BertModel.from_pretrained(str(data.fetch("minilm-config").parent), local_files_only=True,
                                                add_pooling_layer=False).eval()
    ours = reference.BertModel(len(minilm.vocab()))
    ours.load_state_dict(minilm.state_dict(as_torch=True))
    ours.eval()
    x = [torch.from_numpy(a) for a in (ids, types, am)]
    with torch.no_grad():
        theirs = hf(input_ids=x[0], token_type_ids=x[1], attention_mask=x[2]).last_hidden_state
        found = ours(*x)
    real = x[2].bool()
    difference = (found - theirs)[real].abs().max().item()
    assert difference < 1e-5, f"the reference's hidden states differ from transformers' by {difference:.2e}"
    pooled = reference.mean_pool(found, x[2])
    expected = (theirs * x[2][..., None]).sum(1) / x[2].sum(1, keepdim=True)
    assert torch.allclose(pooled, expected, atol=1e-5)
