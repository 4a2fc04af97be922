"""The capstone (08-capstone): the solution earns every point, the release none, and each known-wrong
implementation loses the points of the checks written to catch it.

The tests are the shared unit contract (tests/unit_contract.py); autograder/08-capstone/mistakes.py names the
checks and holds the known-wrong variants, the bugs students write when they turn a GPT into a LLaMA-style
decoder: RoPE rotating the two halves where the GGUF's weights want adjacent pairs, its position not advanced
past the cache, key/value heads repeated in the wrong order, RMSNorm that subtracts the mean or adds epsilon
outside the square root, SwiGLU's gate and up projections swapped, the output layer not tied, the matrices
transposed when loaded, the chat template without the assistant's turn or the default system message, SmolLM2's
digit rule forgotten (or kept to 0-9), generation that ignores its cache or never stops. The correct alternates
(RoPE with complex numbers, grouped attention without repeating the keys, a loader through load_state_dict,
RMSNorm with rsqrt) must earn full marks."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

# The checks' names and the known mistakes live in the course: autograder/08-capstone/mistakes.py
_M = mistakes.module(Path(__file__).resolve().parent.parent, "08-capstone")
RMSNORM = _M.RMSNORM
ROPE = _M.ROPE
SWIGLU = _M.SWIGLU
ATTENTION = _M.ATTENTION
ATTENTION_CACHE = _M.ATTENTION_CACHE
LLAMA = _M.LLAMA
REAL_LOGITS = _M.REAL_LOGITS
REAL_CACHE = _M.REAL_CACHE
GENERATE = _M.GENERATE
CHAT = _M.CHAT
PRETOKENIZE = _M.PRETOKENIZE
ENCODE = _M.ENCODE
_PAIRS = _M._PAIRS
_RMS = _M._RMS
_REPEAT = _M._REPEAT
VARIANTS = _M.VARIANTS


# One alternate holding all four (each full grade costs about 30 s of CI): every one must keep full marks.
ALTERNATES = {
    "RoPE with complex numbers, grouped attention without repeating the keys, a loader through load_state_dict, "
    "RMSNorm with rsqrt": {
        "apply_rope": Edit(
            _PAIRS,
            "    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())  # pairs as a + ib\n"
            "    turn = torch.polar(torch.ones_like(angles), angles).to(z.dtype)  # e^(i m theta): (T, d_head/2)\n"
            "    return torch.view_as_real(z * turn).flatten(-2)", why="complex"),
        "GroupedQueryAttention": Edit(
            _REPEAT + "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, n_heads, T, T_all)\n"
            "        visible = torch.ones(T, T_all, dtype=torch.bool, device=x.device).tril(diagonal=start)  "
            "# t sees <= start + t\n"
            "        weights = scores.masked_fill(~visible, float(\"-inf\")).softmax(dim=-1)\n"
            "        out = (weights @ v).transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)  # heads joined\n",
            "        qg = q.reshape(B, self.n_kv_heads, group, T, self.d_head)  # the query heads of each key/value head\n"
            "        scores = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(self.d_head)  # (B, kv, group, T, T_all)\n"
            "        visible = torch.ones(T, T_all, dtype=torch.bool, device=x.device).tril(diagonal=start)\n"
            "        weights = scores.masked_fill(~visible, float(\"-inf\")).softmax(dim=-1)\n"
            "        out = (weights @ v[:, :, None]).reshape(B, self.n_heads, T, self.d_head)\n"
            "        out = out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)\n", why="grouped queries"),
        "load_gguf_weights": '''
def load_gguf_weights(model, tensors):
    """Rename every GGUF tensor to its parameter and load them all at once."""
    state = {}
    for name, tensor in tensors.items():
        m = regex.fullmatch(r"blk\\.(\\d+)\\.(\\w+)\\.weight", name)
        if m:
            part = {"attn_q": "attn.q_proj", "attn_k": "attn.k_proj", "attn_v": "attn.v_proj", "attn_output":
                    "attn.o_proj", "ffn_gate": "ffn.gate", "ffn_up": "ffn.up", "ffn_down": "ffn.down"}.get(
                m.group(2), m.group(2))  # attn_norm and ffn_norm keep their names
            state[f"blocks.{m.group(1)}.{part}.weight"] = tensor
        else:
            state[{"token_embd.weight": "tok_emb.weight", "output_norm.weight": "norm.weight"}[name]] = tensor
    if "tok_emb.weight" in state:
        state["lm_head.weight"] = state["tok_emb.weight"]  # the tied head holds the same matrix
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ValueError(f"load_gguf_weights: {err}") from None
    return model
''',
        "RMSNorm": Edit(_RMS + "        return x / rms * self.weight",
                        "        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                        why="rsqrt"),
    },
}


class TestUnit08Capstone(UnitContract):
    AID = "08-capstone"
    MAX_SCORE = 21
    STUDENT_FUNCTIONS = 16
    RELEASE_MUST_NOT_CONTAIN = ("x[..., 0::2], x[..., 1::2]", "repeat_interleave(group", "tril(diagonal=start)",
                                "F.silu(self.gate(x)) * self.up(x)", "x.pow(2).mean(dim=-1, keepdim=True) + self.eps",
                                '"<|im_start|>assistant\\n"', 'regex.split(r"(\\p{N})", text)')
    VARIANTS = VARIANTS
    ALTERNATES = ALTERNATES
    SYMPTOMS = {"generate samples with torch's global generator, not the one given": "draw every random number",
                "generate applies the temperature after the softmax": "do not follow softmax(logits / temperature)",
                "RMSNorm's gain left uninitialised (torch.empty)": "gain as built",
                "Llama's final norm built without the model's eps": "eps=0.1",
                "GPT-2's pattern first, then the digits split out": "smollm_pretokenize('a  2')",
                "chat_prompt strips each message": "indented question?  ",
                "load_gguf_weights checks nothing (copies whatever it is given)": "expected a ValueError, it returned",
                "load_gguf_weights skips tensors it has no parameter for": "extra blk.2.attn_q.weight",
                "load_gguf_weights leaves the shapes to copy_": "expected a ValueError, it raised RuntimeError"}


def test_answers_built_on_the_course_references_earn_nothing(tmp_path):
    """Right answers by the wrong means: a chat template that calls the course's reference (or renders the file's
    Jinja template), an encoder that hands the text to the course's rebuilt tokenizer, an RMSNorm that is PyTorch's:
    each is refused by its rule (the source scan, before anything runs), and the message says why."""
    from pathlib import Path

    from lmcourse.grading import grade_notebook
    from lmcourse.instructor.testing import check_infos, submission_from_solution

    root = Path(__file__).resolve().parent.parent
    cheats = {
        "chat_prompt": "def chat_prompt(messages):\n    return smollm.chat_prompt(messages)\n",
        "smollm_encode": ("def smollm_encode(text, merges, special_tokens=()):\n"
                          "    return smollm.from_vocab_ids(smollm.hf_tokenizer().encode(text).ids)\n"),
        "RMSNorm": ("class RMSNorm(nn.RMSNorm):\n"
                    "    def __init__(self, d_model, eps=1e-5):\n"
                    "        super().__init__(d_model, eps=eps)\n"),
    }
    expected = {CHAT: "the chat format written with string operations", ENCODE: "byte-pair encoding written by hand",
                RMSNORM: "layer normalisation and the transformer's blocks written with tensor operations"}
    nb = submission_from_solution(root, "08-capstone", tmp_path, replace=cheats)
    everything = {c.name for c in check_infos(root, "08-capstone")}
    r = grade_notebook(root, "08-capstone", nb, tier="cpu", exclude=everything - set(expected))
    scores = {t["name"]: (t["score"], t.get("output", "")) for t in r["tests"]}
    assert r["status"] == "ok" and set(scores) == set(expected)
    for name, (score, output) in scores.items():
        assert score == 0 and expected[name] in output, (name, output)

    jinja = ("def chat_prompt(messages):\n    import jinja2\n"
             "    return jinja2.Template(smollm.smollm2().chat_template).render(messages=messages, "
             "add_generation_prompt=True)\n")
    nb = submission_from_solution(root, "08-capstone", tmp_path / "jinja", replace={"chat_prompt": jinja})
    r = grade_notebook(root, "08-capstone", nb, tier="cpu", exclude=everything - {CHAT})
    (only,) = r["tests"]
    assert only["score"] == 0 and expected[CHAT] in only["output"], only

