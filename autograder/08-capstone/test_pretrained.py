"""Checks for Part 2 with SmolLM2's real weights: the student's Llama, built at SmolLM2's size and loaded by the
student's load_gguf_weights (inside the worker, once per grade: probe `pretrained`), against the reference's Llama
holding the same weights (the trusted side, held to transformers' LlamaForCausalLM by the project's tests).

Hidden prompts: chat conversations (the format the model was tuned on), code, a number-heavy sentence and a
sentence in French. Logits are compared over every position, to 2e-3 of their largest magnitude (float32 on both
sides; the reference and transformers differ by about 7e-5 of 38). A transposed square matrix (q or o), the output
layer left untied or random, the gate and up projections swapped, RoPE on halves or with the wrong base, a missing
layer: each moves the logits by whole units.

Generation, on a small random Llama (`test_generate_small`: seconds): how the model is driven, checked directly from
its calls (a forward pre-hook in the probe): with the cache, the prompt once and then one token per call, the cache
passed each time; without it, the whole sequence at every step (a generate that ignores use_cache gives the right
tokens and fails there); greedy tokens the argmax of the reference's logits with the same weights, teacher-forced
over the student's own tokens, the same with the cache and without; a stop right after eos_id; and sampling
(`_expect_sampling`): the generator given decides the draws, and 1,000 first tokens follow
softmax(logits / temperature). Then with SmolLM2 (`test_generate`): greedy tokens, with and without the cache, each
the argmax of the reference's logits at its step (a margin of 1e-3 for float rounding between two near-equal
logits), the two the same, and an answer that stops early ends on eos_id.
"""

from __future__ import annotations

import numpy as np

from conftest import EOS, MODULE_RULES, SMOLLM2, encoded_prompt, llama_weights, trusted_logits, trusted_smollm
from lmcourse.grading.checks import check, expect_close

PROMPTS = (
    [{"role": "user", "content": "Which planet is known as the red planet?"}],
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "What colour is the sky?"}],
)
TEXTS = ("def fibonacci(n):\n    if n < 2:\n        return n\n    return", "In 1969, 3 astronauts flew 384,400 km to",
         "La tour Eiffel se trouve à")


def _ids(tokens):
    return np.asarray([tokens], dtype=np.int64)


def _student_logits(student, ids, chunks=None):
    found = student.probe("pretrained", cls="Llama", init_kwargs=SMOLLM2, ids=ids, chunks=chunks, **MODULE_RULES)
    if not isinstance(found, dict) or "logits" not in found:
        raise AssertionError("Llama with SmolLM2's weights: the grader could not read its logits")
    return found["logits"]


def _close(found, expected, what):
    scale = float(np.abs(expected).max())
    expect_close(found, expected, what=what, rtol=0.0, atol=2e-3 * scale)


def _hidden_token_lists():
    from lmcourse import smollm

    tok = smollm.hf_tokenizer()
    return [encoded_prompt(m) for m in PROMPTS] + [tok.encode(t).ids for t in TEXTS]


@check(points=2, cell="test_load_gguf", name="SmolLM2's weights loaded by load_gguf_weights into your Llama: the "
                                             "logits equal the reference's on hidden prompts (chat, code, numbers, "
                                             "French)")
def test_real_logits(student, reference):
    for tokens in _hidden_token_lists():
        ids = _ids(tokens)
        expected = trusted_logits(reference, ids)  # the trusted side first: its failure is the grader's, never a 0
        _close(_student_logits(student, ids), expected,
               what=f"Llama(**SMOLLM2) with SmolLM2's weights on a hidden prompt of {len(tokens)} tokens: the logits "
                    "(1, T, 49152)")


# The loader's own contract, on a small random Llama of two blocks (its tensors under GGUF names, shapes from the
# configuration): a complete set loads each tensor into its parameter; a set with one tensor missing, one too many
# or one of the wrong shape is a ValueError naming that tensor (its GGUF name or its parameter's). A loader that
# copies without checking loads the wrong set silently, or fails on copy_'s own RuntimeError.
LOADER = dict(vocab_size=24, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, rope_base=50.0, eps=1e-5)


def _gguf_tensors(config, rng) -> dict:
    """Random tensors for every GGUF name of a Llama of `config`, each of the shape its parameter has."""
    from lmcourse import smollm

    d, kv = config["d_model"], config["d_model"] // config["n_heads"] * config["n_kv_heads"]
    shapes = {"token_embd": (config["vocab_size"], d), "output_norm": (d,), "attn_norm": (d,), "attn_q": (d, d),
              "attn_k": (kv, d), "attn_v": (kv, d), "attn_output": (d, d), "ffn_norm": (d,),
              "ffn_gate": (config["d_ff"], d), "ffn_up": (config["d_ff"], d), "ffn_down": (d, config["d_ff"])}
    return {name: rng.normal(size=shapes[name.split(".")[-2]]).astype(np.float32)
            for name in smollm.tensor_names(config["n_layers"])}


def _trusted_load(reference, tensors) -> dict:
    """The reference's Llama(**LOADER) after the reference's loader: parameter name -> array."""
    import torch

    model = reference.Llama(**LOADER)
    with torch.no_grad():
        reference.load_gguf_weights(model, {k: torch.from_numpy(v) for k, v in tensors.items()})
    return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}


@check(points=1, cell="test_load_gguf", name="load_gguf_weights: a complete set of tensors loads each into its "
                                             "parameter; a tensor missing, one too many or one of the wrong shape "
                                             "is a ValueError naming it")
def test_loader_contract(student, reference, rng):
    tensors = _gguf_tensors(LOADER, rng)
    expected = _trusted_load(reference, tensors)  # the trusted side first: its failure is the grader's, never a 0
    what = f"load_gguf_weights(Llama({', '.join(f'{k}={v}' for k, v in LOADER.items())}), tensors)"

    def load(given):
        found = student.probe("load_named_tensors", fn="load_gguf_weights", cls="Llama", init_kwargs=LOADER,
                              tensors=given, **MODULE_RULES)
        if not isinstance(found, dict) or not isinstance(found.get("state"), dict):
            raise AssertionError(f"{what}: the grader could not read the model after the call")
        return found

    found = load(tensors)
    if found["raised"] is not None:
        raise AssertionError(f"{what} with every tensor of the model, each of its parameter's shape: raised "
                             f"{found['raised']}: {found['message']}")
    if not found["returned_model"]:
        raise AssertionError(f"{what}: return the model you were given, with its weights loaded")
    for name, value in expected.items():
        got = found["state"].get(name)
        if not isinstance(got, np.ndarray) or got.shape != value.shape or not np.array_equal(got, value):
            raise AssertionError(f"{what} with every tensor of the model: the parameter {name} does not hold its "
                                 "tensor afterwards")
    param = {"blk.1.ffn_up.weight": "blocks.1.ffn.up.weight", "blk.0.attn_k.weight": "blocks.0.attn.k_proj.weight",
             "blk.2.attn_q.weight": "blocks.2.attn.q_proj.weight"}
    d = LOADER["d_model"]
    wrong = {
        "blk.1.ffn_up.weight": ("without blk.1.ffn_up.weight", {k: v for k, v in tensors.items()
                                                                  if k != "blk.1.ffn_up.weight"}),
        "blk.2.attn_q.weight": ("with an extra blk.2.attn_q.weight (a third block the model does not have)",
                                dict(tensors, **{"blk.2.attn_q.weight": rng.normal(size=(d, d)).astype(np.float32)})),
        "blk.0.attn_k.weight": (f"with blk.0.attn_k.weight of shape ({d}, {tensors['blk.0.attn_k.weight'].shape[0]})"
                                " (transposed)", dict(tensors, **{"blk.0.attn_k.weight":
                                                                  tensors["blk.0.attn_k.weight"].T.copy()})),
    }
    for culprit, (how, given) in wrong.items():
        found = load(given)
        if found["raised"] != "ValueError":
            raise AssertionError(f"{what} {how}: expected a ValueError, "
                                 + (f"it raised {found['raised']}: {found['message']}" if found["raised"] else
                                    "it returned without one")
                                 + "; check the names and shapes before copying anything")
        text = found["message"] or ""
        if culprit not in text and param[culprit] not in text:
            raise AssertionError(f"{what} {how}: the ValueError must name the tensor ({culprit} or "
                                 f"{param[culprit]}); its message was: {text[:200]}")


@check(points=1, cell="test_load_gguf", name="SmolLM2 in your Llama with a KVCache: a prompt, then single tokens, then "
                                             "a chunk give the logits of the whole sequence")
def test_real_cache(student, reference):
    tokens = encoded_prompt(PROMPTS[0]) + [504, 3575, 282, 4649, 314, 7042]  # ... "The capital of France is Paris"
    ids = _ids(tokens)
    n = len(tokens)
    chunks = (n - 6, 1, 1, 4)
    expected = trusted_logits(reference, ids)
    _close(_student_logits(student, ids, chunks=chunks), expected,
           what=f"Llama(**SMOLLM2) with SmolLM2's weights, {n} tokens fed in chunks of {list(chunks)} through one "
                "KVCache, against the reference's whole forward")


def _prompt_then_tokens(tokens, ids, what):
    """`tokens`, untrusted, as generate's (1, T + k) ids that begin with the prompt `ids`."""
    if not isinstance(tokens, np.ndarray) or tokens.ndim != 2 or tokens.shape[0] != 1 or tokens.dtype.kind not in "iu":
        raise AssertionError(f"{what}: expected a (1, T + n) tensor of token ids; found "
                             f"{getattr(tokens, 'shape', type(tokens).__name__)}")
    if tokens.shape[1] < ids.shape[1] or not np.array_equal(tokens[:, :ids.shape[1]], ids):
        raise AssertionError(f"{what}: the output must begin with the prompt")
    return tokens


def _generated(student, ids, n, calls=None, **kwargs):
    """The tokens of the student's generate on SmolLM2; `calls`, a list, receives the model's calls meanwhile."""
    found = student.probe("pretrained", cls="Llama", init_kwargs=SMOLLM2, ids=ids, generate_fn="generate",
                          generate_kwargs=dict(max_new_tokens=n, **kwargs), **MODULE_RULES)
    tokens = _prompt_then_tokens(found.get("tokens") if isinstance(found, dict) else None, ids,
                                 f"generate(model, prompt (1, {ids.shape[1]}), {n}, ...)")
    if calls is not None:
        calls.extend(found.get("calls") or [])
    return tokens


def _expect_greedy(reference, tokens, start, what):
    logits = trusted_logits(reference, tokens[:, :-1])[0]  # logits[t] predicts token t + 1
    scale = float(np.abs(logits).max())
    for t in range(start, tokens.shape[1]):
        row = logits[t - 1]
        chosen = int(tokens[0, t])
        if not 0 <= chosen < row.shape[0] or row[chosen] < row.max() - 1e-3 * scale:
            raise AssertionError(f"{what}: new token {t - start + 1} is {chosen}, not the most probable token after "
                                 f"the tokens before it (greedy decoding takes the argmax of the last position's "
                                 f"logits)")


# Sampling, on a small random Llama (thousands of draws of SmolLM2 would take minutes): the first new token's
# distribution at temperature 0.5 against softmax(logits / 0.5) of the reference with the same weights (a temperature applied after the
# softmax, so of no effect: chi-square p = 0 at a total variation of 0.34, 2,000 draws).
SAMPLER = dict(vocab_size=24, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=24, rope_base=50.0, eps=1e-5)
TEMPERATURE = 0.5
DRAWS = 1000
P_FAIL = 1e-6  # a chi-square p-value below it fails: a correct sampler fails once in a million grades
MIN_GAP = 0.15  # total variation between the right distribution and the temperature-ignored one, at least


def _probabilities(reference, w, ids, temperature):
    import torch

    model = reference.Llama(**SAMPLER)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
    with torch.no_grad():
        last = model.eval()(torch.from_numpy(ids))[0, -1].double()
    return torch.softmax(last / temperature, dim=-1).numpy()


def _own_logits(student, w, ids, reference=None):
    """The student's own Llama(**SAMPLER) with weights w on ids (1, T): its logits (T, V). What generate is checked
    against, so that a fault of the model (graded by the module checks) is never reported as one of generate; but
    only once they equal the reference's (a stub model's constant logits would let any generate pass)."""
    out = student.probe("module_forward", cls="Llama", init_kwargs=SAMPLER, state_dict=w, inputs=[ids], grad=False,
                        **MODULE_RULES)
    logits = out.get("outputs", [None])[0] if isinstance(out, dict) and out.get("outputs") else None
    if not isinstance(logits, np.ndarray) or logits.shape != (1, ids.shape[1], SAMPLER["vocab_size"]) or \
            not np.isfinite(logits).all():
        raise AssertionError(f"Llama({', '.join(f'{k}={v}' for k, v in SAMPLER.items())}) on a prompt of "
                             f"{ids.shape[1]} tokens: expected finite logits (1, {ids.shape[1]}, "
                             f"{SAMPLER['vocab_size']}); found {getattr(logits, 'shape', type(logits).__name__)}")
    if reference is not None:
        import torch

        trusted = reference.Llama(**SAMPLER)
        trusted.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
        with torch.no_grad():
            expected = trusted.eval()(torch.from_numpy(ids))[0].numpy()
        if not np.allclose(logits[0], expected, rtol=0.0, atol=1e-3 * max(1.0, float(np.abs(expected).max()))):
            raise AssertionError("generate is checked on a small random Llama, and your Llama's logits there differ "
                                 "from the reference's with the same weights: fix Llama first (its own check says "
                                 "where); this check then grades generate")
    return logits[0].astype(np.float64)


def _softmax(x):
    z = np.exp(x - x.max())
    return z / z.sum()


def _expect_sampling(student, reference, rng):
    """generate(..., temperature=0.5, generator=g) on a small random Llama: the generator decides (the same seed
    draws the same tokens, another seed others, whatever torch's global seed), and 1,000 first tokens follow
    softmax(logits / temperature) of the student's own model with those weights (its faults are the module checks'
    to grade; chi-square on the tokens expected at least 5 times, the rest pooled). The
    prompt and weights are drawn until the temperature moves the distribution by a total variation of at least
    0.15, so a temperature applied after the softmax (no effect) or ignored cannot pass by luck."""
    from scipy import stats

    for _ in range(50):
        w = llama_weights("Llama", SAMPLER, rng, reference)
        ids = rng.integers(0, SAMPLER["vocab_size"], size=(1, 5)).astype(np.int64)
        expected = _probabilities(reference, w, ids, TEMPERATURE)
        if 0.5 * np.abs(expected - _probabilities(reference, w, ids, 1.0)).sum() >= MIN_GAP and expected.max() < 0.9:
            break
    expected = _softmax(_own_logits(student, w, ids, reference)[-1] / TEMPERATURE)  # your model's distribution
    what = (f"generate(a random Llama(vocab_size={SAMPLER['vocab_size']}, ...), a prompt of 5 tokens, 1, "
            f"temperature={TEMPERATURE}, generator=...)")
    kw = dict(fn="generate", cls="Llama", init_kwargs=SAMPLER, state_dict=w, args=[ids, 1],
              kwargs={"temperature": TEMPERATURE}, timeout=120, **MODULE_RULES)
    runs = student.probe("call_with_generators", seeds=[7, 7, 8], repeat=40, **kw)
    first = []
    for run in runs if isinstance(runs, list) and len(runs) == 3 else []:
        tokens = [np.asarray(t) for t in run] if isinstance(run, list) else []
        if len(tokens) != 40 or any(t.shape != (1, 6) or t.dtype.kind not in "iu" for t in tokens):
            break
        first.append([int(t[0, -1]) for t in tokens])
    if len(first) != 3:
        raise AssertionError(f"{what}: expected a (1, 6) tensor of token ids from each call")
    if first[0] != first[1]:
        raise AssertionError(f"{what}: two runs with generators of the same seed drew different tokens; draw every "
                             "random number from the generator given (torch.multinomial(..., generator=generator))")
    if first[0] == first[2]:
        raise AssertionError(f"{what}: generators of two different seeds drew the same 40 tokens; draw every random "
                             "number from the generator given, not from torch's global one")
    runs = student.probe("call_with_generators", seeds=[11], repeat=DRAWS, **kw)
    drawn = np.array([int(np.asarray(t)[0, -1]) for t in runs[0]]) if isinstance(runs, list) and runs and \
        isinstance(runs[0], list) and len(runs[0]) == DRAWS else None
    if drawn is None or drawn.min() < 0 or drawn.max() >= SAMPLER["vocab_size"]:
        raise AssertionError(f"{what}: the grader could not read {DRAWS} draws of token ids")
    counts = np.bincount(drawn, minlength=SAMPLER["vocab_size"]).astype(np.float64)
    common = DRAWS * expected >= 5
    observed = np.append(counts[common], counts[~common].sum())
    wanted = np.append(DRAWS * expected[common], DRAWS * expected[~common].sum())
    keep = wanted > 0
    p_value = stats.chisquare(observed[keep], wanted[keep]).pvalue
    if p_value < P_FAIL:
        tv = 0.5 * np.abs(counts / DRAWS - expected).sum()
        raise AssertionError(f"{what}: {DRAWS} first tokens do not follow softmax(logits / temperature) (chi-square p = "
                             f"{p_value:.1e}, total variation {tv:.3f}); divide the last position's logits by the "
                             "temperature, then take the softmax, then draw")


def _small_generate(student, w, ids, n, **kwargs):
    """generate on the small Llama with weights w: (tokens (1, T + k), [[positions fed, cache passed] per call])."""
    what = (f"generate(a random Llama(vocab_size={SAMPLER['vocab_size']}, ...), a prompt of {ids.shape[1]} tokens, "
            f"{n}" + "".join(f", {k}={v}" for k, v in kwargs.items()) + ")")
    out = student.probe("call_with_module", fn="generate", cls="Llama", init_kwargs=SAMPLER, state_dict=w,
                        args=[ids, n], kwargs=kwargs, record_inputs=True, timeout=60, **MODULE_RULES)
    tokens = _prompt_then_tokens(out.get("result") if isinstance(out, dict) else None, ids, what)
    inputs, cached = out.get("inputs") or [], out.get("cached") or []
    calls = [[int(x.shape[-1]) if isinstance(x, np.ndarray) else -1, bool(c)] for x, c in zip(inputs, cached)]
    return tokens, calls, what


def _calls_as_specified(calls, T, n, use_cache, what):
    """With the cache, the prompt once, then one token per call, the cache passed every time; without it, the whole
    sequence at every step, no cache."""
    expected = [[T, True]] + [[1, True]] * (n - 1) if use_cache else [[T + k, False] for k in range(n)]
    if calls != expected:
        shown = ", ".join(f"{c[0]} position(s){' with a cache' if c[1] else ''}" for c in calls[:4])
        more = ", ..." if len(calls) > 4 else ""
        wanted = ("the prompt once through a KVCache, then one new token per call with the same cache" if use_cache
                  else "the whole sequence at every step, without a cache")
        raise AssertionError(f"{what}: the model was called {len(calls)} times ({shown}{more}); expected {wanted}")


@check(points=1, cell="test_generate", name="generate on a small random Llama: the model driven as use_cache says, "
                                            "greedy tokens the argmax at every step and the same both ways, a stop "
                                            "after eos_id; sampling follows softmax(logits / temperature), drawn "
                                            "with the generator given")
def test_generate_small(student, reference, rng):
    """Everything generate does but on SmolLM2's own weights, on a small random Llama (seconds, not the minute of
    loading SmolLM2): how it drives the model (a forward pre-hook in the probe), greedy decoding teacher-forced
    against the student's own model with the same weights (the model itself is graded by the module checks), eos_id,
    and sampling (`_expect_sampling`)."""
    w = llama_weights("Llama", SAMPLER, rng, reference)
    ids = rng.integers(0, SAMPLER["vocab_size"], size=(1, 6)).astype(np.int64)
    T, n = ids.shape[1], 8
    runs = {}
    for use_cache in (True, False):
        tokens, calls, what = _small_generate(student, w, ids, n, temperature=0.0, use_cache=use_cache)
        _calls_as_specified(calls, T, n, use_cache, what)
        if tokens.shape[1] != T + n:
            raise AssertionError(f"{what}: expected {n} new tokens (no eos_id given); found {tokens.shape[1] - T}")
        logits = _own_logits(student, w, tokens[:, :-1], reference)  # your model's logits[t] predict token t + 1
        for t in range(T, tokens.shape[1]):
            row, chosen = logits[t - 1], int(tokens[0, t])
            if not 0 <= chosen < row.shape[0] or row[chosen] < row.max() - 1e-4 * max(1.0, float(np.abs(row).max())):
                raise AssertionError(f"{what}: new token {t - T + 1} is {chosen}, not the token your model finds "
                                     "most probable after the tokens before it (greedy decoding takes the argmax of "
                                     "the last position's logits)")
        runs[use_cache] = tokens
    if not np.array_equal(runs[True], runs[False]):
        raise AssertionError(f"generate(..., temperature=0.0): the tokens with the cache {runs[True][0, T:].tolist()} "
                             f"differ from those without it {runs[False][0, T:].tolist()}")
    new = runs[True][0, T:]
    stop_at = int(new[2])
    first = int(np.argmax(new == stop_at)) + 1  # new tokens up to the first stop_at
    stopped, _, what = _small_generate(student, w, ids, n, temperature=0.0, eos_id=stop_at)
    if stopped.shape[1] != T + first:
        raise AssertionError(f"{what} (a token the greedy answer reaches at step {first}): expected generation to stop "
                             f"right after it, {first} new tokens; found {stopped.shape[1] - T}")
    _expect_sampling(student, reference, rng)


@check(points=1, cell="test_generate", name="generate with SmolLM2: greedy tokens are the argmax at every step, the "
                                            "same with the cache and without, and an answer ends on eos_id")
def test_generate(student, reference, rng):
    trusted_smollm(reference)  # the trusted side first: its failure is the grader's, never a 0
    ids = _ids(encoded_prompt(PROMPTS[0]))
    n, T = 10, ids.shape[1]
    calls_cached, calls_full = [], []
    cached = _generated(student, ids, n, calls_cached, temperature=0.0, use_cache=True)
    full = _generated(student, ids, n, calls_full, temperature=0.0, use_cache=False)
    what = f"generate(SmolLM2, a chat prompt of {T} tokens, {n}, temperature=0.0"
    for use_cache, calls in ((True, calls_cached), (False, calls_full)):
        _calls_as_specified([list(c) for c in calls], T, n, use_cache, f"{what}, use_cache={use_cache})")
    for tokens, cache in ((cached, True), (full, False)):
        if tokens.shape[1] != ids.shape[1] + n:
            raise AssertionError(f"{what}, use_cache={cache}): expected {n} new tokens (no eos_id given); found "
                                 f"{tokens.shape[1] - ids.shape[1]}")
        _expect_greedy(reference, tokens, ids.shape[1], f"{what}, use_cache={cache})")
    if not np.array_equal(cached, full):
        raise AssertionError(f"{what}): the tokens with the cache {cached[0, ids.shape[1]:].tolist()} differ from those "
                             f"without it {full[0, ids.shape[1]:].tolist()}")
    answer = _generated(student, ids, 40, temperature=0.0, eos_id=EOS)
    if answer.shape[1] < ids.shape[1] + 40 and int(answer[0, -1]) != EOS:
        raise AssertionError(f"generate(..., eos_id={EOS}): it stopped before 40 tokens without ending on eos_id")
