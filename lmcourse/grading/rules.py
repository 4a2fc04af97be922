"""Rules about *how* a student's code is written, verified outside the worker.

Some assignments ask for a thing written by hand: 03-rnnlm's recurrences are
to be written with tensor operations, not with PyTorch's ``nn.LSTM``, and
04-attention's attention without ``F.scaled_dot_product_attention`` or
``nn.MultiheadAttention``. Each such rule has a keyword that a check passes to
a probe (``no_builtin_rnn=True``, ``no_builtin_attention=True``; `RULES`).
Inside the worker a guard then makes PyTorch's built-ins raise while the probe
runs (`probes.without_builtins`), but the worker is the student's process: one
line of the student's code can switch any guard there off. So the rule is also
verified here, in the trusted process, from the submission's source (the
answer cells only; given code is the release's): a reference to one of the
rule's built-ins, or to anything that could reach past the guard (the
grader's own modules, torch's kernel tables, dynamic code and attribute
tricks), fails every check that relies on the rule, with a message that names
what was found and where. Both the runtime guard and this scan must hold.

One scan serves every rule (`scan`): it records all it finds, and `applying`
picks what counts against one rule. A finding that names one rule's built-ins
counts against that rule only (04-attention's students may use ``nn.GRU``
under ``no_builtin_attention``); a finding that names none of them (``sys``,
``eval``, the grader's internals) counts against every rule.

What this does not prove: a program can always hide its intent better than a
list of names can see (that is Rice's theorem, not a gap in the list). The
scan makes cheating a deliberate act that an instructor reading the flagged
cell recognises, and every number is still compared against the reference.

The summary is computed when the notebook is read (in `bounded`'s child, so
a huge submission costs the trusted process nothing) and passed around as
plain data: ``{name: [(cell grade_id, line in cell), ...]}``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """What one rule refuses, as the source shows it, and how its message says so.

    layers: torch's public names that the assignment's own code may share (its classes are also called
    LSTM and LSTMCell, its function scaled_dot_product_attention): flagged as an attribute
    (``nn.LSTM``, ``F.scaled_dot_product_attention``) or an import from torch, never as a bare name.
    kernels: torch's internal names for the same, flagged wherever they appear.
    asks_for, refused: the message's words for what the assignment asks for and what is not allowed.
    """

    layers: frozenset[str]
    kernels: frozenset[str]
    asks_for: str
    refused: str
    modules: frozenset[str] = frozenset()  # libraries whose import alone is flagged (07-gpt: tokenizer libraries)

    @property
    def names(self) -> frozenset[str]:
        return self.layers | self.kernels | self.modules


# The probes' keyword -> the rule. `probes.REFUSALS` has the same keys: the guard inside the worker.
RULES = {
    "no_builtin_rnn": Rule(
        layers=frozenset({"RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNNCellBase"}),
        kernels=frozenset({"rnn_tanh", "rnn_relu", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell",
                           "quantized_lstm", "_thnn_fused_lstm_cell"}),
        asks_for="the recurrence written with tensor operations",
        refused="Built-in recurrent layers (nn.RNN, nn.LSTM, nn.GRU and their cells)"),
    "no_builtin_attention": Rule(
        layers=frozenset({"scaled_dot_product_attention", "multi_head_attention_forward", "MultiheadAttention",
                          "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                          "TransformerDecoderLayer", "flex_attention"}),
        kernels=frozenset({"_native_multi_head_attention", "_transformer_encoder_layer_fwd",
                           "_scaled_dot_product_attention_math", "_scaled_dot_product_attention_math_for_mps",
                           "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                           "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                           "_fused_sdp_choice", "_triton_multi_head_attention", "_triton_scaled_dot_attention",
                           "_flash_attention_forward_no_dropout_inplace"}),
        asks_for="attention written with tensor operations",
        refused="Built-in attention (F.scaled_dot_product_attention, nn.MultiheadAttention, the nn.Transformer "
                "layers)"),
    # 05-transformer: the given MultiHeadAttention uses F.scaled_dot_product_attention, so attention stays
    # allowed; what the student writes is the normalisation and the blocks around it
    "no_builtin_transformer": Rule(
        layers=frozenset({"LayerNorm", "layer_norm", "GroupNorm", "group_norm", "RMSNorm", "rms_norm",
                          "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                          "TransformerDecoderLayer"}),
        kernels=frozenset({"native_layer_norm", "native_group_norm", "_fused_rms_norm"}),
        asks_for="layer normalisation and the transformer's blocks written with tensor operations",
        refused="Built-in normalisation layers and transformer layers (nn.LayerNorm, F.layer_norm, nn.GroupNorm, "
                "nn.RMSNorm, the nn.Transformer layers)"),
    # 06-bert: nn.LayerNorm and the given attention are allowed (Unit 5 graded both); what is refused is
    # PyTorch's ready-made encoder layer and its attention module, which would write BertLayer for the student
    "no_builtin_encoder": Rule(
        layers=frozenset({"MultiheadAttention", "multi_head_attention_forward", "Transformer", "TransformerEncoder",
                          "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer"}),
        kernels=frozenset({"_native_multi_head_attention", "_transformer_encoder_layer_fwd"}),
        asks_for="the encoder layer written from its parts (the given attention, linear layers, LayerNorm)",
        refused="Built-in transformer layers and attention modules (the nn.Transformer layers, "
                "nn.MultiheadAttention)"),
    # 07-gpt's byte-pair encoding: a tokenizer library, or the course's own tiktoken builder, would train, encode
    # or decode for the student. Importing one is flagged; the guard makes their entry points raise.
    "no_tokenizer_library": Rule(
        layers=frozenset({"Encoding", "SimpleBytePairEncoding", "bpe_train", "bpe_encode", "Tokenizer", "BpeTrainer",
                          "BPE", "ByteLevel", "tiktoken_encoding", "gpt2_encoding", "hf_tokenizer", "digits_apart"}),
        kernels=frozenset(),
        modules=frozenset({"tiktoken", "tiktoken_ext", "tokenizers", "sentencepiece", "transformers", "minbpe"}),
        asks_for="byte-pair encoding written by hand",
        refused="Tokenizer libraries (tiktoken, Hugging Face's tokenizers and transformers, sentencepiece) and the "
                "course's own reference tokenizers (lmcourse.bpe.tiktoken_encoding, gpt2_encoding, "
                "lmcourse.smollm.hf_tokenizer)"),
    # the capstone's chat template: a template engine rendering the GGUF's own Jinja template, or the course's
    # reference, would write SmolLM2's chat format for the student
    "no_template_library": Rule(
        layers=frozenset({"chat_prompt", "apply_chat_template", "Template", "Environment"}),
        kernels=frozenset(),
        modules=frozenset({"jinja2", "transformers", "mako", "chevron"}),
        asks_for="the chat format written with string operations",
        refused="Template engines (jinja2, transformers' apply_chat_template) and the course's reference chat "
                "template (lmcourse.smollm.chat_prompt)"),
}
# Every rule's layers, as the scan looks for them.
BUILTIN_LAYERS = frozenset().union(*(rule.layers for rule in RULES.values()))
# Every rule's libraries: importing one is a finding.
LIBRARIES = frozenset().union(*(rule.modules for rule in RULES.values()))
# torch's kernel tables (torch._VF.lstm_cell, torch._C, torch.ops.aten...), a way past any guard, and every
# rule's kernels.
TORCH_TABLES = frozenset({"_VF", "_VariableFunctions", "_C", "aten"})
TORCH_KERNELS = TORCH_TABLES.union(*(rule.kernels for rule in RULES.values()))
# The grader's own code inside the worker: the package the sandbox copies there (its name there is
# `lmcourse.grading.sandbox.staging.INSIDE_NAME`; a test keeps the two equal) and what the guards are made of.
INSIDE_PACKAGE = "lmc_inside"
GRADER_INTERNALS = frozenset({INSIDE_PACKAGE, "without_builtins", "refusing_builtins", "without_builtin_rnn",
                              "without_builtin_attention", "REFUSALS", "BUILTIN_RNN", "BUILTIN_ATTENTION", "BUILTIN_NORMS",
                              "BuiltinUsed", "BuiltinRNNUsed", "BuiltinAttentionUsed", "BuiltinNormUsed", "PROBES",
                              "BUILTIN_ENCODER", "BuiltinEncoderUsed", "BUILTIN_TOKENIZERS", "BuiltinTokenizerUsed",
                              "BUILTIN_TEMPLATES", "BuiltinTemplateUsed", "GuardRemoved", "refused_operators",
                              "_REFUSING", "RNN_OPS", "ATTENTION_OPS", "NORM_OPS", "ENCODER_OPS",
                              "_refusing_functions", "TRAINING_PROBES", "_put_back", "_function_modes"})
# Ways to run code or reach objects that no name in the source shows.
DYNAMIC_CALLS = frozenset({"eval", "exec", "compile", "__import__", "globals", "vars", "breakpoint"})
DUNDERS = frozenset({"__dict__", "__globals__", "__closure__", "__code__", "__builtins__", "__subclasses__",
                     "__import__", "__loader__", "__spec__", "__getattribute__", "__reduce__", "__reduce_ex__",
                     "__setstate__", "__func__", "__wrapped__", "__self__"})
MODULES = frozenset({"gc", "ctypes", "importlib", "inspect", "builtins", "pickle", "marshal", "dill", "cloudpickle",
                     "copyreg", "types", "code", "codeop", "runpy", "subprocess", "multiprocessing", "pty",
                     "sys", "os", "lmcourse"})
# Attributes of those modules (and of torch) that are fine to use.
ALLOWED_MODULE_ATTRS = {
    "sys": {"stdout", "stderr", "float_info", "maxsize", "version_info", "getrecursionlimit"},
    "os": {"path", "environ", "getenv", "cpu_count", "sep", "linesep", "makedirs", "listdir", "getcwd"},
    # an honest training loop frees memory (gc.collect()) and builds small records (types.SimpleNamespace);
    # what could reach the grader's objects (gc.get_objects, get_referrers, types.FunctionType) stays flagged
    "gc": {"collect", "enable", "disable", "isenabled"},
    "types": {"SimpleNamespace"},
    # minilm: the pretrained weights 06-bert loads; bpe: 07-gpt's pre-tokenizer (its reference builders are
    # flagged by name, with the tokenizer libraries); smollm: the capstone's GGUF reader (its reference chat
    # template and tokenizer flagged by name)
    "lmcourse": {"data", "device", "minilm", "plots", "bpe", "smollm"},
}
TORCH_RISKY_ATTRS = frozenset({"load", "jit", "hub", "package", "ops", "library", "_dynamo"})


def _record(found: dict, name: str, node: ast.AST) -> None:
    found.setdefault(name, []).append(getattr(node, "lineno", 0))


def scan(code: str) -> dict[str, list[int]]:
    """What in ``code`` could use a built-in that a rule refuses, or switch the grader's guards off.

    Returns ``{what: [line numbers]}`` (empty when nothing was found). ``code``
    that does not parse gives ``{}`` (its cell is left out of the module anyway).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, list[int]] = {}
    aliases: dict[str, str] = {}  # local name -> module it is bound to (import sys as s: s -> sys)
    # `self` and `cls` as a method receives them: the student's own object, whose attributes (set in a loop,
    # `setattr(self, name, nn.Linear(...))`) reach no built-in and no guard. Rebound anywhere, they could be
    # anything, and count like any other name.
    rebound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    own = {"self", "cls"} - rebound
    for node in ast.walk(tree):  # every binding first: a use may come before its import in the walk
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[(a.asname or a.name).split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in MODULES | {"torch"}:
            for a in node.names:
                aliases[a.asname or a.name] = f"{(node.module or '').split('.')[0]}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                aliases[(a.asname or a.name).split(".")[0]] = top
                if top in MODULES - set(ALLOWED_MODULE_ATTRS) | LIBRARIES or a.name.startswith("lmcourse.grading"):
                    _record(found, f"import {a.name}", node)
                if top in GRADER_INTERNALS or any(p in TORCH_KERNELS | GRADER_INTERNALS for p in a.name.split(".")[1:]):
                    _record(found, f"import {a.name}", node)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            top = module.split(".")[0]
            for a in node.names:
                bad = (top in MODULES - set(ALLOWED_MODULE_ATTRS) | LIBRARIES
                       or a.name in BUILTIN_LAYERS  # from tiktoken.core import Encoding, from lmcourse.bpe import ...
                       or (module in ALLOWED_MODULE_ATTRS and a.name not in ALLOWED_MODULE_ATTRS[module])
                       or module.startswith("lmcourse.grading")
                       or (top == "torch" and (a.name in BUILTIN_LAYERS | TORCH_KERNELS | TORCH_RISKY_ATTRS
                                               or a.name == "*"))
                       or top in GRADER_INTERNALS
                       or any(p in TORCH_KERNELS | GRADER_INTERNALS for p in module.split(".")[1:]))
                if bad:
                    _record(found, f"from {module} import {a.name}", node)
                if top in MODULES or top == "torch":
                    aliases[a.asname or a.name] = f"{top}.{a.name}"
        elif isinstance(node, ast.Attribute):
            attr = node.attr
            base = node.value.id if isinstance(node.value, ast.Name) else None
            module = aliases.get(base, "") if base else ""
            if attr in BUILTIN_LAYERS:
                # self.LSTM / obj.LSTM would be the student's own; a module's attribute is torch's layer
                if base not in ("self", "cls"):
                    _record(found, f".{attr}", node)
            elif attr in TORCH_KERNELS | GRADER_INTERNALS | DUNDERS:
                _record(found, f".{attr}", node)
            elif module in ALLOWED_MODULE_ATTRS and attr not in ALLOWED_MODULE_ATTRS[module]:
                _record(found, f"{module}.{attr}", node)
            elif module == "torch" and attr in TORCH_RISKY_ATTRS:
                _record(found, f"torch.{attr}", node)
        elif isinstance(node, ast.Name):
            if node.id in DYNAMIC_CALLS | DUNDERS | GRADER_INTERNALS:
                _record(found, node.id, node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            name, target = node.args[1], node.args[0]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                if not (isinstance(target, ast.Name) and target.id in own):
                    _record(found, f"{node.func.id} with a computed name", node)
            elif name.value in BUILTIN_LAYERS | TORCH_KERNELS | GRADER_INTERNALS | DUNDERS:
                _record(found, f"{node.func.id}(..., {name.value!r})", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if len(text) < 200 and (text.strip() in TORCH_KERNELS | GRADER_INTERNALS | DUNDERS
                                    or text.strip().startswith(INSIDE_PACKAGE)):
                _record(found, f"the string {text.strip()!r}", node)
    return found


def scan_answers(source: str, line_map, answer_cells) -> dict[str, list[list]]:
    """`scan` of the answer cells of an extracted module, located as ``[cell grade_id, line in cell]``.

    The whole module is scanned at once, so that a name bound in one cell (``import sys as s``)
    is known where another cell uses it (``s.modules``); only what stands in answer cells counts
    (the given cells are the release's own code).
    """
    cells = [(first, last, gid) for first, last, gid in line_map if gid in answer_cells]
    out: dict[str, list[list]] = {}
    for what, where in scan(source).items():
        for n in where:
            for first, last, gid in cells:
                if first <= n <= last:
                    out.setdefault(what, []).append([gid, n - first + 1])
    return out


def families(what: str) -> set[str]:
    """The rules (keywords) whose built-ins a finding names: ``".LSTMCell"`` -> {"no_builtin_rnn"};
    ``"sys.modules"`` -> set()."""
    words = set(re.findall(r"[A-Za-z_]\w*", what))
    return {keyword for keyword, rule in RULES.items() if words & rule.names}


def applying(found: dict, keyword: str) -> dict:
    """The findings that count against the rule `keyword`: those that name its built-ins, and those that
    name no rule's built-ins (what could switch any guard off). A finding about another rule's built-ins
    (``nn.GRU`` under ``no_builtin_attention``) does not count."""
    if keyword not in RULES:
        raise KeyError(f"no rule {keyword!r}: one of {sorted(RULES)}")
    return {what: where for what, where in found.items() if not families(what) or keyword in families(what)}


def describe(found: dict) -> str:
    """One line naming what was found and where (at most three things)."""
    parts = []
    for what, where in list(found.items())[:3]:
        gid, line = where[0]
        parts.append(f"`{what}` (line {line} of cell '{gid}')")
    more = len(found) - 3
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")
