"""What the checks of 08-capstone share: the rules (attention and normalisation by hand; no tokenizer or template
library, none of lmcourse.smollm's reference helpers), SmolLM2's configuration, random weights in which every
RMSNorm gain matters, and the trusted SmolLM2: the reference solution's Llama holding the real weights.

The trusted side of every module comparison is the reference solution's class with the same random weights
(`lmcourse.grading.compare`); the reference's decoder with SmolLM2's weights is held to transformers'
LlamaForCausalLM reading the same GGUF file, and its tokenizer and chat template to the file's own
(`tests/test_smollm.py`, `tests/test_unit08_capstone.py`).
"""

from __future__ import annotations

import functools

import numpy as np

from lmcourse import smollm
from lmcourse.grading.compare import block_weights, comparison_fixtures

MODULE_RULES = dict(no_builtin_attention=True, no_builtin_transformer=True)  # Parts 1-2
TOKENIZER_RULES = dict(no_tokenizer_library=True)  # Part 3, the tokenizer
TEMPLATE_RULES = dict(no_template_library=True)  # Part 3, the chat template

_CONFIG = smollm.LlamaConfig()
SMOLLM2 = dict(vocab_size=_CONFIG.vocab_size, d_model=_CONFIG.d_model, n_layers=_CONFIG.n_layers,
               n_heads=_CONFIG.n_heads, n_kv_heads=_CONFIG.n_kv_heads, d_ff=_CONFIG.d_ff, rope_base=_CONFIG.rope_base,
               eps=_CONFIG.norm_eps)
EOS = 2  # <|im_end|>: the end of an assistant's turn


def llama_weights(cls: str, init_kwargs: dict, rng, reference) -> dict:
    """Random weights of the reference's `cls` (`block_weights`: linear and embedding weights x 1.5) with every
    RMSNorm gain (a parameter ``...norm.weight``, or a lone ``weight``) drawn as 1 + 0.5 N(0, 1): with gains of
    ones a norm in the wrong place, or two swapped, would not show."""
    out = block_weights(cls, init_kwargs, rng, trusted=reference)
    for name in out:
        if name == "weight" or name.endswith("norm.weight"):
            out[name] = (1.0 + 0.5 * rng.normal(size=out[name].shape)).astype(np.float32)
    return out


@functools.lru_cache(maxsize=1)
def trusted_smollm(reference):
    """The reference solution's Llama with SmolLM2's weights, in eval mode: built once per reference module."""
    model = reference.Llama(**SMOLLM2)
    reference.load_gguf_weights(model, dict(smollm.torch_tensors()))
    return model.eval()


def trusted_logits(reference, ids) -> np.ndarray:
    import torch

    with torch.no_grad():
        return trusted_smollm(reference)(torch.as_tensor(np.asarray(ids), dtype=torch.long)).numpy()


def encoded_prompt(messages) -> list[int]:
    """A conversation as SmolLM2's ids: the file's template rendered, the real tokenizer (both trusted)."""
    return smollm.hf_tokenizer().encode(smollm.chat_prompt(messages)).ids


rules, compare, both, weights = comparison_fixtures(MODULE_RULES)
