"""The protocol between the grader and its worker (`lmcourse.grading.sandbox.inside.protocol`).

Every kind of error the worker can send has the student's words on the
grader's side (or is the grader's own failure), errors cross as fields rather
than text to parse, and the worker names no kind, tag or operation outside the
protocol module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lmcourse.grading import rules
from lmcourse.grading.kinds import STUDENT_KINDS
from lmcourse.grading.sandbox import Limits, SandboxError, StudentError, Worker, messages, staging
from lmcourse.grading.sandbox.inside import protocol
from lmcourse.grading.sandbox.inside.protocol import Kind, Missing, error_reply

INSIDE = Path(protocol.__file__).parent
FAST = Limits(call_timeout=20, total_timeout=120)


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.PROBE_ERROR])
def test_every_worker_kind_becomes_a_students_error(kind):
    err = messages.from_error_reply(error_reply(kind, type="ValueError", message="bad", name="f"), "f", Limits())
    assert isinstance(err, StudentError) and err.kind in STUDENT_KINDS and err.message


def test_a_probe_used_wrongly_is_the_graders_failure():
    with pytest.raises(SandboxError, match="wrongly"):
        messages.from_error_reply(error_reply(Kind.PROBE_ERROR, message="unknown probe x"), "f", Limits())


@pytest.mark.parametrize("payload", [
    "missing", None, ["kind", "missing"],
    {"kind": "missing", "message": 3},               # a field that is not text
    {"kind": "no-such-kind", "message": ""},
    {"kind": "exception", "traceback": b"bytes"},
])
def test_a_reply_outside_the_protocol_is_garbled(payload):
    with pytest.raises(messages.GarbledReply):
        messages.from_error_reply(payload, "f", Limits())


def test_missing_reads_its_fields_not_its_message():
    undefined = messages.from_error_reply(
        error_reply(Kind.MISSING, name="Model.forward", reason=Missing.UNDEFINED, message="not callable: x"),
        "Model.forward", Limits())
    assert "does not define `Model.forward`" in undefined.message
    not_callable = messages.from_error_reply(
        error_reply(Kind.MISSING, name="softmax", reason=Missing.NOT_CALLABLE, type="int"), "softmax", Limits())
    assert "`softmax` is defined" in not_callable.message and "it is a int" in not_callable.message


def test_the_worker_names_no_kind_tag_or_operation_but_through_the_protocol():
    words = {m.value for e in (protocol.Kind, protocol.Tag, protocol.Op, protocol.Missing) for m in e}
    for path in (INSIDE / n for n in ("main.py", "supervisor.py", "confine.py", "__main__.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in words, f"{path.name}:{node.lineno} spells {node.value!r}"


def test_setup_exit_codes_are_the_protocols():
    for name in ("confine.py", "supervisor.py", "main.py"):
        source = (INSIDE / name).read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                assert node.value not in protocol.SETUP_EXIT_CODES, f"{name}:{node.lineno} a bare exit code"
    assert "EXIT_PRIVILEGES_KEPT" in (INSIDE / "confine.py").read_text()
    assert "EXIT_NO_NETWORK_NAMESPACE" in (INSIDE / "supervisor.py").read_text()


def test_the_rule_scan_knows_the_workers_package_name():
    assert rules.INSIDE_PACKAGE == staging.INSIDE_NAME
    assert rules.scan(f"import {staging.INSIDE_NAME}.probes\n")
    assert rules.scan(f"import sys\nguard = sys.modules['{staging.INSIDE_NAME}.probes']\n")


def test_the_worker_runs_the_staged_copy_of_inside():
    """The code that serves the requests is the copy in the worker's boot folder, and it is the
    same package the grader imports (one definition of the protocol on both sides)."""
    code = ("import sys\n"
            "def where():\n"
            f"    m = sys.modules['{staging.INSIDE_NAME}.protocol']\n"
            "    return m.__file__, sorted(k.value for k in m.Kind)\n")
    with Worker(code, limits=FAST, isolate=False) as w:
        path, kinds = w.call("where")
    assert path.endswith(f"/boot/{staging.INSIDE_NAME}/protocol.py")
    assert kinds == sorted(k.value for k in Kind)
