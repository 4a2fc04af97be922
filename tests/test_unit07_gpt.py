"""Unit 7 (07-gpt): the solution earns every point, the release none, and each known-wrong implementation
loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py); autograder/07-gpt/mistakes.py
names the checks and holds the known-wrong variants: the bugs students really write in a byte-level BPE
tokenizer. Training: pairs counted without overlaps ("aaa" holding (a, a) once; minbpe#51), no
pre-tokenization (merges across words), ties broken by first occurrence (minbpe, tiktoken's teaching
trainer), by the smallest pair of byte strings or by the smallest pair of ids, the last merge missing,
special tokens counted as text or left out of vocab_size, special tokens matched shorter first. Encoding: the
most frequent pair of the word merged first instead of the earliest-learned, merges across pre-tokens,
special tokens encoded as text. Decoding token by token (a character cut between tokens breaks), or without
errors="replace". GPT-2's merge file read with every line that starts with '#' dropped (8 real merges lost).
The correct alternate (the straightforward trainer that recounts every pair after each merge, an encoder
driven by a priority queue, a special-token scan written by hand) must earn full marks, the trainer within
the speed check's budget."""

from __future__ import annotations

from pathlib import Path

from lmcourse.grading import training
from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names and the known mistakes live in the course: autograder/07-gpt/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "07-gpt")
SPLIT = _M.SPLIT
MERGES = _M.MERGES
MERGES_SPECIALS = _M.MERGES_SPECIALS
SPEED = _M.SPEED
ENCODE = _M.ENCODE
ENCODE_SPECIALS = _M.ENCODE_SPECIALS
DECODE = _M.DECODE
GPT2_MERGES = _M.GPT2_MERGES
GPT2_IDS = _M.GPT2_IDS
ATTENTION = _M.ATTENTION
ATTENTION_DEVICE = _M.ATTENTION_DEVICE
BLOCK = _M.BLOCK
GPT_MODEL = _M.GPT_MODEL
PARAMS = _M.PARAMS
TOP_K = _M.TOP_K
TOP_P = _M.TOP_P
SAMPLE = _M.SAMPLE
KV = _M.KV
TRAINING_STEPS = _M.TRAINING_STEPS
TRAINING = _M.TRAINING
GENERATE = _M.GENERATE
STRAIGHTFORWARD_TRAINER = _M.STRAIGHTFORWARD_TRAINER
HEAP_ENCODER = _M.HEAP_ENCODER
SCANNING_SPLIT = _M.SCANNING_SPLIT
_CHOICE = _M._CHOICE
VARIANTS = _M.VARIANTS


# name -> {function: definition or Edit(s)}: correct implementations that must earn full marks
ALTERNATES: dict[str, dict[str, str | Edit | list[Edit]]] = {
    "the straightforward trainer, a priority-queue encoder, a hand-written special-token scan": {
        "train_bpe": STRAIGHTFORWARD_TRAINER, "encode": HEAP_ENCODER, "split_special_tokens": SCANNING_SPLIT},
    "attention in einsum, inverse-CDF sampling with a uniform per row, top-p by searchsorted": {
        "CausalSelfAttention": Edit(
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, n_heads, T, T_all)\n",
            "        scores = torch.einsum('bhtd,bhsd->bhts', q, k) * self.d_head ** -0.5  # (B, n_heads, T, T_all)\n",
            why="einsum"),
        "sample_next": Edit(
            "    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)",
            "    u = torch.rand(probs.shape[0], 1, generator=generator)  # one uniform per row\n"
            "    return (probs.cumsum(dim=-1) < u).sum(dim=-1).clamp(max=probs.shape[-1] - 1)",
            why="inverse CDF"),
        "top_p_filter": Edit(
            "    drop = above >= p  # p was reached before this token: not needed\n",
            "    n_keep = torch.searchsorted(probs.cumsum(dim=-1), torch.full_like(probs[..., :1], p)) + 1\n"
            "    drop = torch.arange(probs.shape[-1]) >= n_keep  # the first n_keep sorted tokens stay\n",
            why="searchsorted"),
    },
    "attention head by head in a loop": {
        "CausalSelfAttention": Edit(
            "        weights = scores.masked_fill(~mask, float(\"-inf\")).softmax(dim=-1)\n"
            "        out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)  # heads joined back: (B, T, d_model)\n",
            "        outs = []\n"
            "        for head in range(self.n_heads):\n"
            "            w = scores[:, head].masked_fill(~mask, float('-inf')).softmax(dim=-1)  # (B, T, T_all)\n"
            "            outs.append(w @ v[:, head])  # (B, T, d_head)\n"
            "        out = torch.cat(outs, dim=-1)  # (B, T, d_model)\n",
            why="a loop over heads"),
    },
}


class TestUnit07Gpt(UnitContract):
    AID = "07-gpt"
    MAX_SCORE = 32
    STUDENT_FUNCTIONS = 17
    RELEASE_MUST_NOT_CONTAIN = ("where[pair].add(i)", 'errors="replace")', "rank.get(p, len(rank))",
                                "id_of[left + right]", "tril(diagonal=T_all - T)", "cache.length  # positions",
                                "above >= p", "self.lm_head.weight = self.tok_emb.weight")
    VARIANTS = VARIANTS
    EXPENSIVE = (TRAINING,)  # the CPU tier: about 100-150 s of a grade on one core
    # ... whose known-wrong trainers run with LMCOURSE_ALL_TRAINING=1 only (each proof trains for as long); the
    # solution's grade in every make test still runs the training check
    EXPENSIVE_OPT_IN = (TRAINING,)
    ALTERNATES = ALTERNATES
    SYMPTOMS = {"train_gpt with Adam's L2 weight decay, not AdamW's": "Adam's weight_decay adds the decay",
                "train_gpt with AdamW's default betas": "betas are (0.9, 0.999)",
                "train_gpt ignores its weight_decay argument": "weight_decay is 0.01",
                "train_gpt returns the model in training mode": "returned the model in training mode",
                "generate crops to the oldest block_size tokens": "expected the newest",
                "train_gpt draws its batches from torch's global generator": "draw every batch from that generator"}
    RUN_DEMOS = False  # the last demo is the CPU tier (about two minutes on one core)

    def test_the_training_run_records_its_verified_loss(self, solution_result):
        """The number `lmcourse leaderboard` ranks: the solution's grade holds the loss the grader computed from
        the reference GPT with the trained weights, in the CPU tier's calibrated range, and nothing else does."""
        measured = {t["name"]: t.get("measured") for t in solution_result["tests"] if t.get("measured")}
        assert list(measured) == [TRAINING]
        assert 1.9 < measured[TRAINING]["validation_loss"] <= 2.08
        assert measured[TRAINING].get("threshold") == 2.08  # shown on the leaderboard
        assert measured[TRAINING].get("protocol") == training.PROTOCOL  # weights read first: rankable


def test_an_encoder_built_on_tiktoken_earns_nothing(tmp_path):
    """Right ids by the wrong means: an `encode` that hands the merges to the course's tiktoken builder is refused
    (the rule no_tokenizer_library: the source scan, before anything runs), and says why."""
    from pathlib import Path

    from lmcourse.grading import grade_notebook
    from lmcourse.instructor.testing import submission_from_solution

    root = Path(__file__).resolve().parent.parent
    cheat = ("def encode(text, merges, special_tokens=()):\n"
             "    from lmcourse.bpe import tiktoken_encoding\n"
             "    return tiktoken_encoding(merges, special_tokens).encode(text, allowed_special='all')\n")
    nb = submission_from_solution(root, "07-gpt", tmp_path, replace={"encode": cheat})
    others = {SPLIT, MERGES, MERGES_SPECIALS, SPEED, DECODE, GPT2_MERGES, ATTENTION, ATTENTION_DEVICE, BLOCK, GPT_MODEL,
              PARAMS, TOP_K, TOP_P, SAMPLE, KV, GENERATE, TRAINING_STEPS, TRAINING}
    r = grade_notebook(root, "07-gpt", nb, tier="cpu", exclude=others)
    scores = {t["name"]: (t["score"], t.get("output", "")) for t in r["tests"]}
    assert r["status"] == "ok" and set(scores) == {ENCODE, ENCODE_SPECIALS, GPT2_IDS}
    for name, (score, output) in scores.items():
        assert score == 0 and "byte-pair encoding written by hand" in output, (name, output)
