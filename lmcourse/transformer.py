"""The multi-head attention that Unit 5 gives its students, and the transformer's cost in numbers.

Unit 4 had students write attention by hand; Unit 5 builds the transformer
*around* attention, so it hands them a trusted one. A bug left over from
Unit 4 then costs no Unit 5 points, and the grader can compare a student's
blocks with PyTorch's (`nn.TransformerEncoderLayer`) number for number.

:class:`MultiHeadAttention` keeps the parameter names of the course
(``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``; see the Unit 4 chapter)
and the course's mask convention: a boolean mask, ``True`` where a query may
attend to a key, broadcast against ``(B, n_heads, T_q, T_k)``. The attention
itself is PyTorch's fused ``F.scaled_dot_product_attention``, which is
exact (it computes the same softmax) and fast on every device. It returns
no weights; a module asked to (``keep_weights = True``) also computes them
the slow way and keeps the last ones in ``.weights`` for a figure.

:func:`parameter_count` and :func:`flops_per_token` give the sizes the book
quotes for the models it trains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["AttentionProjections", "KVCache", "MultiHeadAttention", "as_nn_multihead", "bert_init",
           "flops_per_token", "parameter_count"]


class AttentionProjections(nn.Module):
    """The parameters of multi-head attention in the course's layout (Unit 4): ``q_proj``, ``k_proj``,
    ``v_proj`` and ``out_proj``, each an ``nn.Linear(d_model, d_model)``. Every attention module that must
    load a student's weights (the given one below, the grader's PyTorch-backed twin) derives from it, so
    their state_dicts cannot drift apart."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        self.d_model, self.n_heads = d_model, n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def nn_multihead_state(self) -> dict[str, torch.Tensor]:
        """These weights as ``nn.MultiheadAttention`` names them (:func:`as_nn_multihead`); its
        ``load_state_dict`` takes them as they are."""
        return as_nn_multihead(dict(self.named_parameters()))


def as_nn_multihead(params: Mapping[str, torch.Tensor], prefix: str = "", theirs: str = "") -> dict[str, torch.Tensor]:
    """A course attention's four projections (``{prefix}.q_proj.weight`` ... in `params`) under
    ``nn.MultiheadAttention``'s names (``{theirs}.in_proj_weight`` ...): the query, key and value projections
    stacked into one ``in_proj_weight`` (3 d_model, d_model) and ``in_proj_bias``. Differentiable, so a
    forward may run PyTorch's attention on the course's parameters."""
    ours = f"{prefix}." if prefix else ""
    out = f"{theirs}." if theirs else ""
    return {
        f"{out}in_proj_weight": torch.cat([params[f"{ours}{n}_proj.weight"] for n in "qkv"]),
        f"{out}in_proj_bias": torch.cat([params[f"{ours}{n}_proj.bias"] for n in "qkv"]),
        f"{out}out_proj.weight": params[f"{ours}out_proj.weight"],
        f"{out}out_proj.bias": params[f"{ours}out_proj.bias"],
    }


class MultiHeadAttention(AttentionProjections):
    """``n_heads`` attentions of ``d_k = d_model / n_heads`` features each, side by side (given in Unit 5).

    ``forward(x (B, T_q, d_model), kv=None (B, T_k, d_model), mask=None) -> (B, T_q, d_model)``.
    Self-attention when ``kv`` is None (keys and values from ``x``), cross-attention otherwise.
    ``mask``: boolean, True = may attend, broadcastable to ``(B, n_heads, T_q, T_k)``: ``(T_q, T_k)`` for a
    causal mask, ``(B, 1, 1, T_k)`` for padding. Every query must be allowed at least one key.
    """

    def __init__(self, d_model: int, n_heads: int):
        super().__init__(d_model, n_heads)
        self.keep_weights = False  # set True to keep each call's attention weights in .weights (for figures)
        self.weights: torch.Tensor | None = None

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, d_model) -> (B, n_heads, T, d_k): head i owns features i*d_k .. (i+1)*d_k - 1
        return x.unflatten(-1, (self.n_heads, self.d_model // self.n_heads)).transpose(1, 2)

    def forward(self, x: torch.Tensor, kv: torch.Tensor | None = None, mask: torch.Tensor | None = None):
        kv = x if kv is None else kv
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"the mask must be boolean (True = may attend), not {mask.dtype}")
        q, k, v = self._heads(self.q_proj(x)), self._heads(self.k_proj(kv)), self._heads(self.v_proj(kv))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, T_q, d_k)
        if self.keep_weights:
            with torch.no_grad():
                scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T_q, T_k)
                if mask is not None:
                    scores = scores.masked_fill(~mask, float("-inf"))
                self.weights = scores.softmax(dim=-1)
        return self.out_proj(out.transpose(1, 2).flatten(2))  # (B, T_q, h, d_k) -> (B, T_q, d_model)


class KVCache:
    """Each layer's keys and values of the positions seen so far, for generation one token at a time.

    Given to students in Unit 7 (their GPT) and the capstone (their LLaMA-style decoder, where the keys and values
    have the key/value heads' count: the memory grouped-query attention saves).
    """

    def __init__(self, n_layers):
        self.k = [None] * n_layers  # k[i]: (B, n_heads, T_seen, d_head), layer i's keys
        self.v = [None] * n_layers

    def append(self, layer, k, v):
        """Append the new positions' keys and values (B, n_heads, T_new, d_head) to `layer`'s, and return all of
        that layer's keys and values so far, (B, n_heads, T_seen + T_new, d_head) each."""
        if self.k[layer] is not None:
            k, v = torch.cat([self.k[layer], k], dim=2), torch.cat([self.v[layer], v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v

    @property
    def length(self):
        """How many positions the cache holds (what every layer holds between two calls of the model)."""
        return 0 if self.k[-1] is None else self.k[-1].shape[2]


def bert_init(model: nn.Module, std: float = 0.02) -> nn.Module:
    """BERT's initialisation (Devlin et al., 2019; ``initializer_range`` 0.02 in its config): every linear and
    embedding weight drawn from N(0, std^2), every linear bias zero; LayerNorms keep gain 1 and bias 0.

    PyTorch's defaults (embeddings N(0, 1), linear weights uniform in +-1/sqrt(fan_in)) make a tiny BERT's
    embeddings tower over its position and segment vectors and start its masked-LM softmax far from
    uniform; with std 0.02 the masked-LM loss starts near ln V, a uniform guess. Returns the model.
    """
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
    return model


def gpt2_init(model: nn.Module, n_layers: int, std: float = 0.02) -> nn.Module:
    """GPT-2's initialisation (Radford et al., 2019): every linear and embedding weight from N(0, std^2), every
    linear bias zero, LayerNorms at gain 1 and bias 0; and the two projections that write into the residual
    stream in each block (attention's ``out_proj``, the feed-forward's ``ff2``) scaled down by sqrt(2 n_layers).

    Each block adds two of those outputs to the residual stream, 2 n_layers in all; scaling each by
    1 / sqrt(2 n_layers) keeps the variance they add together the same whatever the depth (GPT-2's paper,
    section 2.3, "to account for the accumulation on the residual path"). Returns the model.
    """
    bert_init(model, std)
    for name, param in model.named_parameters():
        if name.endswith(("out_proj.weight", "ff2.weight")):
            nn.init.normal_(param, std=std / math.sqrt(2 * n_layers))
    return model


def as_hf_gpt2(state: Mapping[str, torch.Tensor], n_layers: int) -> dict[str, torch.Tensor]:
    """A GPT's weights in the course's names (Unit 7: ``tok_emb``, ``pos_emb``, ``blocks.{i}.ln1``,
    ``attn.{q,k,v,out}_proj``, ``ln2``, ``ff1``, ``ff2``, ``ln_f``; ``lm_head`` tied) under the names of Hugging
    Face's ``GPT2LMHeadModel``, for comparing the two models with the same weights.

    GPT-2's ``Conv1D`` layers compute ``x @ weight + bias``, so their weights are ``nn.Linear``'s transposed, and
    its ``c_attn`` holds the query, key and value projections side by side.
    """
    out = {"transformer.wte.weight": state["tok_emb.weight"], "transformer.wpe.weight": state["pos_emb.weight"],
           "transformer.ln_f.weight": state["ln_f.weight"], "transformer.ln_f.bias": state["ln_f.bias"],
           "lm_head.weight": state["tok_emb.weight"]}
    for i in range(n_layers):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        out.update({
            theirs + "ln_1.weight": state[ours + "ln1.weight"], theirs + "ln_1.bias": state[ours + "ln1.bias"],
            theirs + "ln_2.weight": state[ours + "ln2.weight"], theirs + "ln_2.bias": state[ours + "ln2.bias"],
            theirs + "attn.c_attn.weight": torch.cat([state[ours + f"attn.{n}_proj.weight"] for n in "qkv"]).T,
            theirs + "attn.c_attn.bias": torch.cat([state[ours + f"attn.{n}_proj.bias"] for n in "qkv"]),
            theirs + "attn.c_proj.weight": state[ours + "attn.out_proj.weight"].T,
            theirs + "attn.c_proj.bias": state[ours + "attn.out_proj.bias"],
            theirs + "mlp.c_fc.weight": state[ours + "ff1.weight"].T, theirs + "mlp.c_fc.bias": state[ours + "ff1.bias"],
            theirs + "mlp.c_proj.weight": state[ours + "ff2.weight"].T,
            theirs + "mlp.c_proj.bias": state[ours + "ff2.bias"],
        })
    return out


def parameter_count(model: nn.Module) -> int:
    """How many numbers the model learns (buffers such as a sinusoidal table not included)."""
    return sum(p.numel() for p in model.parameters())


def flops_per_token(d_model: int, d_ff: int, n_enc: int, n_dec: int, S: int, T: int, vocab: int) -> dict[str, float]:
    """Floating-point operations of one forward pass, per target token, of an encoder–decoder transformer.

    Counts the matrix products only (the usual convention: they are almost all of the work; 1 multiply-add
    = 2 operations), for one source of S tokens and one target of T tokens. A linear layer ``d_in -> d_out``
    costs ``2 d_in d_out`` per token it is applied to; attention's two products (``Q K^T`` and ``weights
    V``) cost ``2 * 2 * T_k * d_model`` per query (a causal mask's skipped half still counted, as the
    kernels compute it). The encoder's work and the cross-attention's keys and values are computed once
    per source and shared by its T target tokens, so they are divided by T.
    """
    d = d_model
    encoder = n_enc * S * (2 * 4 * d * d + 2 * 2 * S * d + 2 * 2 * d * d_ff)  # per source
    cross_kv = n_dec * S * 2 * 2 * d * d  # per source: the encoder states projected to keys and values
    decoder = n_dec * T * (2 * 4 * d * d + 2 * 2 * T * d  # masked self-attention
                           + 2 * 2 * d * d + 2 * 2 * S * d  # cross-attention: queries, output, products
                           + 2 * 2 * d * d_ff)  # feed-forward
    parts = {"encoder": encoder / T, "decoder": (cross_kv + decoder) / T, "unembedding": 2 * d * vocab}
    parts["total"] = sum(parts.values())
    return parts
