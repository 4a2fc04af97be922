"""The lmcourse command: help, errors without tracebacks, the data report."""

import subprocess
import sys

import pytest

from lmcourse.cli import main


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "lmcourse.cli", *args], capture_output=True, text=True, **kw)


def test_help_lists_every_subcommand():
    out = run("--help")
    assert out.returncode == 0
    for name in ["book", "assign", "check", "grade", "gradescope", "data"]:
        assert name in out.stdout


@pytest.mark.parametrize("argv", [["frobnicate"], ["grade"], ["data", "--bogus"]])
def test_bad_usage_is_one_line_no_traceback(argv):
    out = run(*argv)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_data_reports_every_corpus(mirror, tmp_path, monkeypatch):
    env = {"LMCOURSE_DATA_MIRROR": str(mirror), "LMCOURSE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = run("data", "--offline", env=env)
    assert out.returncode == 0, out.stderr
    for name in ["tinyshakespeare", "google-analogies", "wordsim353", "simlex999"]:
        assert name in out.stdout
    assert str(tmp_path) in out.stdout


def test_data_missing_corpus_exits_nonzero_with_instructions(tmp_path):
    env = {"LMCOURSE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = run("data", "tinyshakespeare", "--offline", env=env)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "sha256" in out.stderr and "LMCOURSE_DATA_MIRROR" in out.stderr


def test_main_without_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out
