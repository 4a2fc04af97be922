"""lmcourse.data: lookup order, verification, atomic writes, clear errors."""

from __future__ import annotations

import doctest
import hashlib
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from lmcourse import data
from lmcourse.data import BOS, EOS, UNK, Corpus, DataError, Vocab


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(data.CACHE_ENV, str(d))
    return d


def test_doctests():
    failures, tried = doctest.testmod(data)
    assert tried > 0 and failures == 0


def test_mirror_copy_lands_in_cache_and_is_verified(cache, mirror, monkeypatch):
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    path = data.fetch("tinyshakespeare", download=False)
    assert path == cache / "tinyshakespeare.txt"
    assert path.stat().st_size == 1_115_394
    assert hashlib.sha256(path.read_bytes()).hexdigest() == data.CORPORA["tinyshakespeare"].sha256
    assert not list(cache.glob("*.tmp")), "no temporary file may be left behind"


def test_cache_hit_needs_no_mirror(cache, mirror, monkeypatch):
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    data.fetch("tinyshakespeare", download=False)
    monkeypatch.delenv(data.MIRROR_ENV)
    assert data.load_text("tinyshakespeare").startswith("First Citizen:")


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupted_cache_is_replaced_never_used(cache, mirror, monkeypatch, damage):
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    path = data.fetch("tinyshakespeare", download=False)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:
        raw[1000] ^= 0xFF
    path.write_bytes(bytes(raw))
    again = data.fetch("tinyshakespeare", download=False)
    assert data.verify(again, data.CORPORA["tinyshakespeare"]) is None


def test_corrupted_mirror_is_rejected(cache, tmp_path, monkeypatch):
    bad_mirror = tmp_path / "mirror"
    bad_mirror.mkdir()
    (bad_mirror / "tinyshakespeare.txt").write_text("not shakespeare")
    monkeypatch.setenv(data.MIRROR_ENV, str(bad_mirror))
    with pytest.raises(DataError) as err:
        data.fetch("tinyshakespeare", download=False)
    assert "expected 1,115,394" in str(err.value)
    assert not (cache / "tinyshakespeare.txt").exists()


def test_offline_without_mirror_explains_how_to_fix(cache, monkeypatch):
    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    # An address that refuses at once stands in for "no internet".
    fake = Corpus(
        name="tinyshakespeare",
        filename="tinyshakespeare.txt",
        url="http://127.0.0.1:9/input.txt",
        sha256=data.CORPORA["tinyshakespeare"].sha256,
        size=1_115_394,
        description="test",
    )
    monkeypatch.setitem(data.CORPORA, "tinyshakespeare", fake)
    with pytest.raises(DataError) as err:
        data.fetch("tinyshakespeare")
    msg = str(err.value)
    for needle in ["tinyshakespeare.txt", fake.url, fake.sha256, str(cache), data.MIRROR_ENV]:
        assert needle in msg


def _serve(directory: Path):
    handler = partial(SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a, **k: None  # type: ignore[assignment]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_download_path_verified_by_checksum(cache, mirror, tmp_path, monkeypatch):
    """The real download code runs against a loopback server holding the mirror."""
    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    server = _serve(mirror)
    try:
        url = f"http://127.0.0.1:{server.server_port}/tinyshakespeare.txt"
        real = data.CORPORA["tinyshakespeare"]
        monkeypatch.setitem(data.CORPORA, "tinyshakespeare", Corpus(**{**real.__dict__, "url": url}))
        path = data.fetch("tinyshakespeare")
        assert data.verify(path, real) is None
    finally:
        server.shutdown()


def test_download_of_wrong_bytes_is_discarded(cache, tmp_path, monkeypatch):
    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    site = tmp_path / "site"
    site.mkdir()
    (site / "input.txt").write_text("corrupted download")
    server = _serve(site)
    try:
        real = data.CORPORA["tinyshakespeare"]
        url = f"http://127.0.0.1:{server.server_port}/input.txt"
        monkeypatch.setitem(data.CORPORA, "tinyshakespeare", Corpus(**{**real.__dict__, "url": url}))
        with pytest.raises(DataError, match="sha256|bytes"):
            data.fetch("tinyshakespeare")
        assert not (cache / "tinyshakespeare.txt").exists()
        assert not list(cache.glob("*.tmp"))
    finally:
        server.shutdown()


def test_unknown_corpus():
    with pytest.raises(DataError, match="unknown corpus"):
        data.fetch("no-such-corpus")


def test_train_val_split_is_first_90_last_10(cache, mirror, monkeypatch):
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    text = data.load_text()
    train, val = data.train_val_split(text)
    assert len(train) == 1_003_854 and len(val) == 111_540
    assert train + val == text
    with pytest.raises(ValueError):
        data.train_val_split(text, 1.0)


def test_word_tokenize_and_sentences():
    assert data.word_tokenize("I'll go, Sir!") == ["i'll", "go", ",", "sir", "!"]
    assert data.word_sentences("a b\n\n  \nc\n") == [["a", "b"], ["c"]]


def test_vocab_specials_frequency_order_and_unk():
    v = Vocab.from_tokens("the cat the dog the cat".split(), min_count=2)
    assert v.itos[:3] == [BOS, EOS, UNK]
    assert v.itos[3:] == ["the", "cat"]
    assert v.encode(["the", "dog"], add_bos=True, add_eos=True) == [0, 3, 2, 1]
    assert v.decode([3, 4], skip_specials=True) == "thecat"
    w = Vocab.words("The cat.\nThe dog.")
    assert w.decode(w.encode(["the", "cat"])) == "the cat"
    assert "dog" in w and "horse" not in w


def test_char_vocab_roundtrip_on_corpus(cache, mirror, monkeypatch):
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    text = data.load_text()
    v = Vocab.chars(text)
    assert len(v) == 65 + 3
    assert v.decode(v.encode(text[:500])) == text[:500]


def test_get_batch_targets_are_shifted_inputs():
    stream = torch.arange(100)
    g = torch.Generator().manual_seed(0)
    x, y = data.get_batch(stream, batch_size=4, block_size=8, generator=g)
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)
    g2 = torch.Generator().manual_seed(0)
    x2, _ = data.get_batch(stream, 4, 8, generator=g2)
    assert torch.equal(x, x2), "same seed, same batch"
    with pytest.raises(ValueError):
        data.get_batch(torch.arange(5), 2, 8)


def test_sequential_batches_continue_each_lane():
    stream = torch.arange(101)
    batches = list(data.sequential_batches(stream, batch_size=4, block_size=5))
    assert len(batches) == 5
    for x, y in batches:
        assert x.shape == (4, 5) and torch.equal(y, x + 1)
    # row b of batch k+1 starts where row b of batch k stopped
    assert torch.equal(batches[1][0][:, 0], batches[0][0][:, -1] + 1)


def test_evaluation_sets_from_gensim():
    sections = data.analogy_questions()
    assert sum(len(q) for q in sections.values()) == 19544
    assert ("athens", "greece", "baghdad", "iraq") in sections["capital-common-countries"]
    ws = data.wordsim353()
    assert len(ws) == 353 and ("tiger", "cat", 7.35) in ws
    assert len(data.simlex999()) == 999


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv(data.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert data.cache_dir() == tmp_path / "lmcourse"
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "x"))
    assert data.cache_dir() == tmp_path / "x"
