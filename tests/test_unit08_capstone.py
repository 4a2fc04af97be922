"""The capstone (08-capstone): the solution earns every point, the release none, and each known-wrong
implementation loses the points of the checks written to catch it.

The tests are the shared unit contract (tests/unit_contract.py); this file names the checks and holds the
known-wrong variants, the bugs students write when they turn a GPT into a LLaMA-style decoder: RoPE rotating the
two halves where the GGUF's weights want adjacent pairs, its position not advanced past the cache, key/value heads
repeated in the wrong order, RMSNorm that subtracts the mean or adds epsilon outside the square root, SwiGLU's gate
and up projections swapped, the output layer not tied, the matrices transposed when loaded, the chat template
without the assistant's turn or the default system message, SmolLM2's digit rule forgotten (or kept to 0-9),
generation that ignores its cache or never stops. The correct alternates (RoPE with complex numbers, grouped attention without
repeating the keys, a loader through load_state_dict, RMSNorm with rsqrt) must earn full marks.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

RMSNORM = ("RMSNorm: outputs and gradients match the reference (epsilon inside the square root, no mean subtracted; "
           "float32 and float64, another device)")
ROPE = ("apply_rope: the same rotation as the reference (adjacent pairs, the angles positions x base^(-2i/d_head); "
        "float32 and float64)")
SWIGLU = "SwiGLU: outputs and gradients match the reference with the same weights (SiLU on gate, times up, then down; float32 and float64)"
ATTENTION = ("GroupedQueryAttention: outputs and gradients match the reference with the same weights (RoPE, heads "
             "shared in groups, causal, scaled; float32 and float64)")
ATTENTION_CACHE = ("GroupedQueryAttention with a KVCache: a prompt, single positions and chunks give the full "
                   "forward's outputs; runs where its input is")
LLAMA = ("Llama: logits and gradients match the reference with the same weights (pre-norm blocks, final RMSNorm, "
         "tied output layer; float32, float64, with a KVCache)")
REAL_LOGITS = ("SmolLM2's weights loaded by load_gguf_weights into your Llama: the logits equal the reference's on "
               "hidden prompts (chat, code, numbers, French)")
REAL_CACHE = ("SmolLM2 in your Llama with a KVCache: a prompt, then single tokens, then a chunk give the logits of the "
              "whole sequence")
GENERATE = ("generate with SmolLM2: greedy tokens are the argmax at every step, the same with the cache and without, "
            "and generation stops after eos_id")
CHAT = ("chat_prompt: SmolLM2's own chat format on hidden conversations (the default system message, every turn, the "
        "assistant's turn opened)")
PRETOKENIZE = "smollm_pretokenize: each numeric character alone, GPT-2's pattern on the text between"
ENCODE = ("smollm_encode with SmolLM2's merges and special tokens: the real tokenizer's ids on varied text (numbers, "
          "code, scripts, emoji, chat tokens)")

_PAIRS = ("    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2): the two features of each pair\n"
          "    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, d_head/2, 2)\n"
          "    return rotated.flatten(-2)  # pairs back in place: (..., T, d_head)")  # the definition's last line
_RMS = "        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)\n"
_REPEAT = "        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, n_heads, T_all, d_head)\n"

VARIANTS: dict[str, tuple[str, str | Edit | list[Edit], tuple[str, ...]]] = {
    "RoPE rotates the two halves (Hugging Face's layout), not adjacent pairs": ("apply_rope", Edit(
        _PAIRS,
        "    a, b = x[..., : d_head // 2], x[..., d_head // 2:]  # the two halves\n"
        "    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)", why="halves"),
        (ROPE, REAL_LOGITS)),
    "RoPE positions restart at 0 with a cache": ("GroupedQueryAttention", Edit(
        "        positions = torch.arange(start, start + T, device=x.device)\n",
        "        positions = torch.arange(T, device=x.device)  # the new positions, from 0 at every call\n",
        why="positions not advanced"),
        (ATTENTION_CACHE, LLAMA, REAL_CACHE, GENERATE)),
    "key/value heads repeated in the wrong order (repeat, not repeat_interleave)": ("GroupedQueryAttention", Edit(
        _REPEAT, "        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # (B, n_heads, T_all, d_head)\n",
        why="head j reads key/value head j % n_kv_heads"),
        (ATTENTION, REAL_LOGITS)),
    "attention scaled by 1/sqrt(d_model), not 1/sqrt(d_head)": ("GroupedQueryAttention", Edit(
        "/ math.sqrt(self.d_head)", "/ math.sqrt(self.n_heads * self.d_head)", why="d_model"),
        (ATTENTION, REAL_LOGITS)),
    "GroupedQueryAttention ignores rope_base (always apply_rope's default)": ("GroupedQueryAttention", Edit(
        "        q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)\n",
        "        q, k = apply_rope(q, positions), apply_rope(k, positions)\n", why="the default base"),
        (ATTENTION,)),
    "RMSNorm subtracts the mean (LayerNorm without a bias)": ("RMSNorm", Edit(
        _RMS, "        x = x - x.mean(dim=-1, keepdim=True)\n" + _RMS, why="centred"),
        (RMSNORM,)),
    "RMSNorm adds epsilon outside the square root": ("RMSNorm", Edit(
        _RMS, "        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + self.eps  # (..., 1)\n",
        why="eps outside"),
        (RMSNORM,)),
    "SwiGLU with gate and up swapped": ("SwiGLU", Edit(
        "self.down(F.silu(self.gate(x)) * self.up(x))", "self.down(F.silu(self.up(x)) * self.gate(x))",
        why="the SiLU on up"),
        (SWIGLU, REAL_LOGITS)),
    "output layer not tied to the token embedding": ("Llama", Edit(
        "        self.lm_head.weight = self.tok_emb.weight  # tied: one (vocab_size, d_model) matrix reads and writes "
        "tokens\n", "", why="untied"),
        (LLAMA, REAL_LOGITS)),
    "load_gguf_weights transposes the square matrices": ("load_gguf_weights", Edit(
        "            param.copy_(tensor)\n",
        "            param.copy_(tensor.T if tensor.ndim == 2 and tensor.shape[0] == tensor.shape[1] else tensor)\n",
        why="(in, out)"),
        (REAL_LOGITS,)),
    "generate ignores use_cache (the whole sequence at every step)": ("generate", Edit(
        "        logits = model(step_input, cache) if use_cache else model(idx)\n",
        "        logits = model(idx)  # the right tokens, without the cache's saving\n", why="no cache"),
        (GENERATE,)),
    "generate never stops at eos_id": ("generate", Edit(
        "        if eos_id is not None and next_id.item() == eos_id:\n            break\n", "", why="no stop"),
        (GENERATE,)),
    "chat template without the assistant's turn opened": ("chat_prompt", Edit(
        '    return turns + "<|im_start|>assistant\\n"', "    return turns", why="no generation prompt"),
        (CHAT,)),
    "chat template without the default system message": ("chat_prompt", Edit(
        '    if not messages or messages[0]["role"] != "system":\n'
        '        default = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"\n'
        '        messages = [{"role": "system", "content": default}] + list(messages)\n', "",
        why="no default system message"),
        (CHAT,)),
    "SmolLM2's digit rule forgotten (GPT-2's pre-tokenizer alone)": ("smollm_pretokenize", Edit(
        '    pieces = regex.split(r"(\\p{N})", text)  # odd places: one numeric character each\n',
        "    pieces = [text]\n", why="no digit split"),
        (PRETOKENIZE, ENCODE)),
    "only the digits 0-9 split apart (not every numeric character)": ("smollm_pretokenize", Edit(
        'regex.split(r"(\\p{N})", text)', 'regex.split(r"([0-9])", text)', why="ASCII digits"),
        (PRETOKENIZE, ENCODE)),
}

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


def test_answers_built_on_the_course_references_earn_nothing(tmp_path):
    """Right answers by the wrong means: a chat template that calls the course's reference (or renders the file's
    Jinja template), an encoder that hands the text to the course's rebuilt tokenizer, an RMSNorm that is PyTorch's:
    each is refused by its rule (the source scan, before anything runs), and the message says why."""
    from pathlib import Path

    from lmcourse.grading import grade_notebook
    from lmcourse.instructor.testing import submission_from_solution

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
    everything = {RMSNORM, ROPE, SWIGLU, ATTENTION, ATTENTION_CACHE, LLAMA, REAL_LOGITS, REAL_CACHE, GENERATE, CHAT,
                  PRETOKENIZE, ENCODE}
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

