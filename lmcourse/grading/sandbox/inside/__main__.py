"""Entry point of the worker process (the grader starts it; nothing else should).

The sandbox copies this package into the worker's boot folder as
``lmc_inside`` and runs::

    python -I BOOT/lmc_inside/__main__.py CONFIG.json               # the worker
    python -I BOOT/lmc_inside/__main__.py --supervise CONFIG.json   # its supervisor

``-I`` puts no script folder on ``sys.path``, so this file makes the boot
folder importable and then imports the package by the name it was copied
under: every other module of the package uses relative imports, the same
ones the grader's side reads as ``lmcourse.grading.sandbox.inside``.
"""

import importlib
import os
import sys

if __name__ == "__main__":
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(_here))
    main = importlib.import_module(os.path.basename(_here) + ".main").main
    sys.exit(main(sys.argv))
