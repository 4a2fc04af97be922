"""Known mistakes of 08-capstone: the wrong implementations students really write, each with the checks
proven to catch it and a hint for the student.

Course data, instructors only (see `lmcourse.instructor.mistakes`): each mistake edits the solution and
names the checks proven to catch it (tests/unit_contract.py grades every one, and proves that its grade is
attributed to it), and HINTS holds the advice a student reads when their failures match it. It lives beside
the hidden checks, out of the student worker's sight and out of the student edition.
"""

from __future__ import annotations

from lmcourse.instructor.testing import Edit

# The checks' names, as the student sees them.
RMSNORM = ("RMSNorm: outputs and gradients match the reference (epsilon inside the square root, no mean subtracted; "
           "float32 and float64, another device), its gain starting at ones")
ROPE = ("apply_rope: the same rotation as the reference (adjacent pairs, the angles positions x base^(-2i/d_head); "
        "float32 and float64; where x is)")
SWIGLU = "SwiGLU: outputs and gradients match the reference with the same weights (SiLU on gate, times up, then down; float32 and float64)"
ATTENTION = ("GroupedQueryAttention: outputs and gradients match the reference with the same weights (RoPE, heads "
             "shared in groups, causal, scaled; float32 and float64)")
ATTENTION_CACHE = ("GroupedQueryAttention with a KVCache: a prompt, single positions and chunks give the full "
                   "forward's outputs; runs where its input is")
LLAMA = ("Llama: logits and gradients match the reference with the same weights (pre-norm blocks, final RMSNorm, "
         "tied output layer, the model's eps in every norm; float32, float64, with a KVCache)")
REAL_LOGITS = ("SmolLM2's weights loaded by load_gguf_weights into your Llama: the logits equal the reference's on "
               "hidden prompts (chat, code, numbers, French)")
LOADER_CONTRACT = ("load_gguf_weights: a complete set of tensors loads each into its parameter; a tensor missing, one "
                   "too many or one of the wrong shape is a ValueError naming it")
REAL_CACHE = ("SmolLM2 in your Llama with a KVCache: a prompt, then single tokens, then a chunk give the logits of the "
              "whole sequence")
GENERATE_SMALL = ("generate on a small random Llama: the model driven as use_cache says, greedy tokens the argmax at "
                  "every step and the same both ways, a stop after eos_id; sampling follows softmax(logits / "
                  "temperature), drawn with the generator given")
GENERATE = ("generate with SmolLM2: greedy tokens are the argmax at every step, the same with the cache and without, "
            "and an answer ends on eos_id")
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
    # what every check left at its default (issue #40, class 8)
    "RMSNorm's gain left uninitialised (torch.empty)": ("RMSNorm", Edit(
        "nn.Parameter(torch.ones(d_model))", "nn.Parameter(torch.empty(d_model))",
        why="whatever the memory held: a model built from scratch starts with random scales"),
        (RMSNORM,)),
    "Llama's final norm built without the model's eps": ("Llama", Edit(
        "        self.norm = RMSNorm(d_model, eps)", "        self.norm = RMSNorm(d_model)",
        why="the default 1e-5 wherever the model asks for another"),
        (LLAMA,)),
    "output layer not tied to the token embedding": ("Llama", Edit(
        "        self.lm_head.weight = self.tok_emb.weight  # tied: one (vocab_size, d_model) matrix reads and writes "
        "tokens\n", "", why="untied"),
        (LLAMA, LOADER_CONTRACT, REAL_LOGITS)),
    "load_gguf_weights transposes the square matrices": ("load_gguf_weights", Edit(
        "            param.copy_(tensor)\n",
        "            param.copy_(tensor.T if tensor.ndim == 2 and tensor.shape[0] == tensor.shape[1] else tensor)\n",
        why="(in, out)"),
        (LOADER_CONTRACT, REAL_LOGITS)),
    # the loader's own errors, graded on a small model (issue #40, class 8)
    "load_gguf_weights checks nothing (copies whatever it is given)": ("load_gguf_weights", [
        Edit("    unknown = sorted(set(tensors) - set(ours))\n"
             "    missing = sorted(set(params) - {ours[n] for n in tensors if n in ours})\n"
             "    if unknown or missing:\n"
             "        raise ValueError(f\"load_gguf_weights: tensors with no parameter {unknown[:5]}, parameters with no "
             "tensor \"\n"
             "                         f\"{missing[:5]}\")\n", "", why="no names compared"),
        Edit("            if tuple(tensor.shape) != tuple(param.shape):\n"
             "                raise ValueError(f\"load_gguf_weights: {gguf_name} is {tuple(tensor.shape)}, \"\n"
             "                                 f\"{ours[gguf_name]} is {tuple(param.shape)}\")\n", "",
             why="no shapes compared")],
        (LOADER_CONTRACT,)),
    "load_gguf_weights skips tensors it has no parameter for": ("load_gguf_weights", [
        Edit("    if unknown or missing:\n", "    if missing:  # a name the model does not know is passed over\n",
             why="extra tensors ignored"),
        Edit("            param = params[ours[gguf_name]]\n",
             "            if gguf_name not in ours:\n                continue\n"
             "            param = params[ours[gguf_name]]\n",
             why="extra tensors ignored")],
        (LOADER_CONTRACT,)),
    "load_gguf_weights leaves the shapes to copy_": ("load_gguf_weights", Edit(
        "            if tuple(tensor.shape) != tuple(param.shape):\n"
        "                raise ValueError(f\"load_gguf_weights: {gguf_name} is {tuple(tensor.shape)}, \"\n"
        "                                 f\"{ours[gguf_name]} is {tuple(param.shape)}\")\n", "",
        why="copy_ raises a RuntimeError, or broadcasts"),
        (LOADER_CONTRACT,)),
    "generate ignores use_cache (the whole sequence at every step)": ("generate", Edit(
        "        logits = model(step_input, cache) if use_cache else model(idx)\n",
        "        logits = model(idx)  # the right tokens, without the cache's saving\n", why="no cache"),
        (GENERATE_SMALL, GENERATE)),
    # sampling, graded at a temperature above 0 (issue #40, class 8)
    "generate samples with torch's global generator, not the one given": ("generate", Edit(
        "torch.multinomial(F.softmax(last / temperature, dim=-1), 1, generator=generator)",
        "torch.multinomial(F.softmax(last / temperature, dim=-1), 1)",
        why="the generator argument is ignored: a seeded run cannot be repeated"),
        (GENERATE_SMALL,)),
    "generate applies the temperature after the softmax": ("generate", Edit(
        "torch.multinomial(F.softmax(last / temperature, dim=-1), 1, generator=generator)",
        "torch.multinomial(F.softmax(last, dim=-1) / temperature, 1, generator=generator)",
        why="multinomial renormalises: the temperature has no effect"),
        (GENERATE_SMALL,)),
    "generate never stops at eos_id": ("generate", Edit(
        "        if eos_id is not None and next_id.item() == eos_id:\n            break\n", "", why="no stop"),
        (GENERATE_SMALL,)),
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
    # inputs that exercise the bug (issue #40, class 10)
    "GPT-2's pattern first, then the digits split out": ("smollm_pretokenize", Edit(
        '    pieces = regex.split(r"(\\p{N})", text)  # odd places: one numeric character each\n'
        '    return [token for k, piece in enumerate(pieces) if piece\n'
        '            for token in ([piece] if k % 2 else pretokenize(piece))]',
        '    return [part for token in pretokenize(text) for part in regex.split(r"(\\p{N})", token) if part]',
        why="a whitespace run before a digit is cut as GPT-2 cuts it, one space short"),
        (PRETOKENIZE, ENCODE)),
    "chat_prompt strips each message": ("chat_prompt", Edit(
        "\\n{m['content']}<|im_end|>", "\\n{m['content'].strip()}<|im_end|>",
        why="leading and trailing whitespace lost: the model was tuned on the text as written"),
        (CHAT,)),
    "only the digits 0-9 split apart (not every numeric character)": ("smollm_pretokenize", Edit(
        'regex.split(r"(\\p{N})", text)', 'regex.split(r"([0-9])", text)', why="ASCII digits"),
        (PRETOKENIZE, ENCODE)),
    # the device (issue #40, class 1): right on a laptop, an error on a GPU
    "apply_rope's frequencies made on the CPU": ("apply_rope", Edit(
        "torch.arange(0, d_head, 2, device=x.device, dtype=torch.float32)", "torch.arange(0, d_head, 2, dtype=torch.float32)",
        why="the angles meet x on the GPU"),
        (ROPE,)),
    "apply_rope's frequencies from a Python list": ("apply_rope", Edit(
        "    theta = base ** (-torch.arange(0, d_head, 2, device=x.device, dtype=torch.float32) / d_head)  # (d_head/2,)\n",
        "    theta = torch.tensor([base ** (-i / d_head) for i in range(0, d_head, 2)], dtype=torch.float32)\n",
        why="torch.tensor of a list is made on the CPU"),
        (ROPE,)),
}

# Checks a mistake's grade leaves out unless the mistake is written to fail them: those that load SmolLM2's
# real weights or its tokenizer's 49,000 merges (5-11 s each on one core).
LEAVE_OUT: tuple[str, ...] = (REAL_LOGITS, REAL_CACHE, GENERATE, CHAT, ENCODE)

# What a student whose failing checks match the mistake reads: advice, never code.
HINTS: dict[str, str] = {
    "RoPE rotates the two halves (Hugging Face's layout), not adjacent pairs":
        "Check which features your rotation pairs up: this course's layout, the GGUF file's, rotates adjacent "
        "pairs of features, not the first half against the second.",
    "RoPE positions restart at 0 with a cache":
        "Check the positions you rotate new tokens by when a cache holds earlier ones: they continue after "
        "the cached positions.",
    "key/value heads repeated in the wrong order (repeat, not repeat_interleave)":
        "Check which key and value head each query head reads: consecutive query heads share one key and "
        "value head, so each is repeated in place, not the whole set tiled.",
    "attention scaled by 1/sqrt(d_model), not 1/sqrt(d_head)":
        "Check the scale of your attention scores: divide by the square root of one head's width, not the "
        "model's.",
    "GroupedQueryAttention ignores rope_base (always apply_rope's default)":
        "Check that your attention passes its own RoPE base on to the rotation: SmolLM2's base is not the "
        "default.",
    "RMSNorm subtracts the mean (LayerNorm without a bias)":
        "Check what RMSNorm computes: it divides by the root mean square of the features and never subtracts "
        "their mean.",
    "RMSNorm adds epsilon outside the square root":
        "Check where epsilon goes: it is added to the mean square, inside the square root.",
    "SwiGLU with gate and up swapped":
        "Check which projection goes through the SiLU: the gate's, which then multiplies the up projection.",
    "RMSNorm's gain left uninitialised (torch.empty)":
        "Check how your norm's gain starts: as ones, so that a freshly built model only rescales its vectors, "
        "while an uninitialised tensor holds whatever was in memory.",
    "Llama's final norm built without the model's eps":
        "Check that every norm in your model receives the epsilon the model was built with, the final one "
        "included, rather than its own default.",
    "output layer not tied to the token embedding":
        "Check the output layer: SmolLM2 reuses the token embedding matrix for its logits, tied.",
    "load_gguf_weights transposes the square matrices":
        "Check the orientation of each matrix you load: compare its shape with your layer's weight, and do "
        "not transpose a matrix whose layout already matches, even when it is square.",
    "load_gguf_weights checks nothing (copies whatever it is given)":
        "Before copying anything, compare the names you were given with your model's parameters: a tensor with "
        "no parameter, a parameter with no tensor or a shape that differs is a ValueError naming it.",
    "load_gguf_weights skips tensors it has no parameter for":
        "A tensor whose name matches none of your parameters is as wrong as a missing one: the file does not "
        "describe the model you built. Raise a ValueError naming it rather than passing over it.",
    "load_gguf_weights leaves the shapes to copy_":
        "Compare each tensor's shape with its parameter's before copying: copy_ raises its own RuntimeError, or "
        "silently broadcasts a smaller tensor. Raise a ValueError naming the tensor instead.",
    "generate ignores use_cache (the whole sequence at every step)":
        "Check what `generate` feeds the model when the cache is on: only the new token after the prompt.",
    "generate samples with torch's global generator, not the one given":
        "Check where your sampling draws its random numbers: the function is given a generator so that a seeded "
        "run can be repeated exactly, and every draw should come from it.",
    "generate applies the temperature after the softmax":
        "Check where the temperature enters: it rescales the logits before the softmax, while scaling the "
        "probabilities afterwards changes nothing once the draw renormalises them.",
    "generate never stops at eos_id":
        "Check that generation stops once the end-of-sequence token has been produced.",
    "chat template without the assistant's turn opened":
        "Check the end of your prompt: it opens the assistant's turn, so that the model writes the reply.",
    "chat template without the default system message":
        "Check a conversation that has no system message: SmolLM2's template adds its default one first.",
    "SmolLM2's digit rule forgotten (GPT-2's pre-tokenizer alone)":
        "Check how numbers are split before the merges: SmolLM2 puts each digit in a pre-token of its own, "
        "before GPT-2's pattern runs on the rest.",
    "GPT-2's pattern first, then the digits split out":
        "Check the order of your pre-tokenizer's two steps: the numeric characters are split out first, and "
        "GPT-2's pattern then runs on the text between them, which keeps a run of spaces before a number whole.",
    "chat_prompt strips each message":
        "Check that every message goes into the template exactly as written: its leading and trailing "
        "whitespace is part of the conversation the model sees.",
    "only the digits 0-9 split apart (not every numeric character)":
        "Check which characters count as digits for the split: every numeric character in Unicode, not only "
        "the ten ASCII ones.",
    "apply_rope's frequencies made on the CPU":
        "Check where your rotation frequencies are made: a new tensor lands on the CPU unless you ask for the "
        "device of x, and on a GPU the angles then cannot meet x.",
    "apply_rope's frequencies from a Python list":
        "Check how you build the rotation frequencies: a tensor made from a Python list lives on the CPU, so on "
        "a GPU it cannot meet x. Build it with torch on the device of x instead.",
}
