"""Rules about *how* a student's code is written, verified outside the worker.

Some assignments ask for a thing written by hand: 03-rnnlm's recurrences are
to be written with tensor operations, not with PyTorch's ``nn.LSTM``. Inside
the worker a guard makes PyTorch's recurrent kernels raise while the checks
run (`probes.without_builtin_rnn`), but the worker is the student's process:
one line of the student's code can switch any guard there off. So the rule is
also verified here, in the trusted process, from the submission's source (the
answer cells only; given code is the release's): a reference to a built-in
recurrent layer, or to anything that could reach past the guard (the grader's
own modules, torch's kernel tables, dynamic code and attribute tricks), fails
every check that relies on the rule, with a message that names what was found
and where. Both the runtime guard and this scan must hold.

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

# PyTorch's recurrent layers as attributes (nn.LSTM, torch.nn.modules.rnn.LSTMCell, ...) and as
# names imported from torch. (The assignment's own classes are also called LSTM and LSTMCell, so a
# bare name is the student's own; only an attribute or an import from torch is the built-in.)
BUILTIN_RNN_LAYERS = frozenset({"RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNNCellBase"})
# torch's recurrent kernels and the tables that hold them (torch._VF.lstm_cell, torch._C, torch.ops.aten...).
TORCH_KERNELS = frozenset({"_VF", "_VariableFunctions", "_C", "aten", "rnn_tanh", "rnn_relu", "rnn_tanh_cell",
                           "rnn_relu_cell", "lstm_cell", "gru_cell", "quantized_lstm", "_thnn_fused_lstm_cell"})
# The grader's own code inside the worker: the package the sandbox copies there (its name there is
# `lmcourse.grading.sandbox.staging.INSIDE_NAME`; a test keeps the two equal) and what the guard is made of.
INSIDE_PACKAGE = "lmc_inside"
GRADER_INTERNALS = frozenset({INSIDE_PACKAGE, "without_builtin_rnn", "refusing_builtin_rnn",
                              "BUILTIN_RNN", "BuiltinRNNUsed", "PROBES"})
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
    "lmcourse": {"data", "device", "plots"},
}
TORCH_RISKY_ATTRS = frozenset({"load", "jit", "hub", "package", "ops", "library", "_dynamo"})


def _record(found: dict, name: str, node: ast.AST) -> None:
    found.setdefault(name, []).append(getattr(node, "lineno", 0))


def scan(code: str) -> dict[str, list[int]]:
    """What in ``code`` could use a built-in recurrent layer or switch the grader's guard off.

    Returns ``{what: [line numbers]}`` (empty when nothing was found). ``code``
    that does not parse gives ``{}`` (its cell is left out of the module anyway).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, list[int]] = {}
    aliases: dict[str, str] = {}  # local name -> module it is bound to (import sys as s: s -> sys)
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
                if top in MODULES - set(ALLOWED_MODULE_ATTRS) or a.name.startswith("lmcourse.grading"):
                    _record(found, f"import {a.name}", node)
                if top in GRADER_INTERNALS or any(p in TORCH_KERNELS | GRADER_INTERNALS for p in a.name.split(".")[1:]):
                    _record(found, f"import {a.name}", node)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            top = module.split(".")[0]
            for a in node.names:
                bad = (top in MODULES - set(ALLOWED_MODULE_ATTRS)
                       or (module in ALLOWED_MODULE_ATTRS and a.name not in ALLOWED_MODULE_ATTRS[module])
                       or module.startswith("lmcourse.grading")
                       or (top == "torch" and (a.name in BUILTIN_RNN_LAYERS | TORCH_KERNELS | TORCH_RISKY_ATTRS
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
            if attr in BUILTIN_RNN_LAYERS:
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
            name = node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                _record(found, f"{node.func.id} with a computed name", node)
            elif name.value in BUILTIN_RNN_LAYERS | TORCH_KERNELS | GRADER_INTERNALS | DUNDERS:
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


def describe(found: dict) -> str:
    """One line naming what was found and where (at most three things)."""
    parts = []
    for what, where in list(found.items())[:3]:
        gid, line = where[0]
        parts.append(f"`{what}` (line {line} of cell '{gid}')")
    more = len(found) - 3
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")
