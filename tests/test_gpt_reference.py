"""The reference GPT of 07-gpt (the trusted side of its module checks) against Hugging Face's GPT2LMHeadModel.

With the same weights (GPT-2's Conv1D layers hold the transposes of nn.Linear's, and one c_attn holds q, k and
v side by side) and GPT2Config's activation set to the exact GELU, the two give the same logits, the same
greedy continuation with the cache, and the same parameter count at GPT-2's four sizes: so the checks compare
students' models with a GPT that is GPT-2's architecture, not merely with the reference's opinion of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lmcourse.course import Course
from lmcourse.grading.compare import block_weights
from lmcourse.transformer import as_hf_gpt2

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
V, P, D, H, L = 50, 24, 32, 4, 3


@pytest.fixture(scope="module")
def reference():
    return Course(ROOT).assignment("07-gpt").reference_module()


def _hf(reference, weights):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=V, n_positions=P, n_embd=D, n_layer=L, n_head=H, activation_function="gelu",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5)
    hf = GPT2LMHeadModel(config).eval()
    w = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in weights.items()}
    state = as_hf_gpt2(w, L)
    hf = hf.double()
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and all("attn.bias" in k or "masked_bias" in k for k in missing), (missing, unexpected)
    return hf


@pytest.fixture(scope="module")
def pair(reference):
    weights = block_weights(reference.GPT, dict(vocab_size=V, block_size=P, d_model=D, n_heads=H, n_layers=L),
                            np.random.default_rng(0))
    ours = reference.GPT(V, P, D, H, L).double().eval()
    ours.load_state_dict({k: torch.as_tensor(v, dtype=torch.float64) for k, v in weights.items()})
    return ours, _hf(reference, weights)


def test_the_reference_gpt_gives_gpt2s_logits(pair):
    ours, hf = pair
    ids = torch.as_tensor(np.random.default_rng(1).integers(0, V, size=(3, P)))
    with torch.no_grad():
        mine, theirs = ours(ids), hf(ids).logits
    assert mine.shape == theirs.shape == (3, P, V)
    assert torch.allclose(mine, theirs, rtol=1e-9, atol=1e-9), (mine - theirs).abs().max()


def test_the_reference_cache_and_generate_give_gpt2s_greedy_continuation(reference, pair):
    ours, hf = pair
    prompt = torch.as_tensor(np.random.default_rng(2).integers(0, V, size=(2, 5)))
    mine = reference.generate(ours, prompt, P - 5, temperature=0, use_cache=True)
    theirs = hf.generate(prompt, max_new_tokens=P - 5, do_sample=False, use_cache=True, pad_token_id=0,
                         attention_mask=torch.ones_like(prompt))
    assert torch.equal(mine, theirs)
    assert torch.equal(mine, reference.generate(ours, prompt, P - 5, temperature=0, use_cache=False))


@pytest.mark.parametrize("d_model,n_layers,n_heads,millions", [(768, 12, 12, 124.4), (1024, 24, 16, 354.8),
                                                               (1280, 36, 20, 774.0), (1600, 48, 25, 1557.6)])
def test_count_parameters_is_gpt2s_at_its_four_sizes(reference, d_model, n_layers, n_heads, millions):
    """GPT-2's sizes (Radford et al., 2019: 117M, 345M, 762M, 1542M as the paper rounded them, 124M, 355M, 774M and
    1.5B as counted), built on the meta device: no memory, no time."""
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        hf = GPT2LMHeadModel(GPT2Config(n_embd=d_model, n_layer=n_layers, n_head=n_heads))
        ours = reference.GPT(50257, 1024, d_model, n_heads, n_layers)
    counted = reference.count_parameters(50257, 1024, d_model, n_layers)
    assert counted == sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in ours.parameters())
    assert round(counted / 1e6, 1) == millions
