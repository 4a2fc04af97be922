"""Record the long runs of Unit 7's chapter: book/units/runs/07-char-gpt.json and 07-decoding.json.

    LMCOURSE_DATA_MIRROR=../shared/data .venv/bin/python tools/record_07_runs.py

The chapter (book/units/07-gpt.md) trains its GPT for 200 steps when the book is built and reads the
rest from these two files: three seeds of the 600-step recipe and one run of 2,400 steps, evaluated on
the whole validation text (07-char-gpt.json), and what the 600-step model of seed 0 writes under each
decoding strategy (07-decoding.json). The code that produces them is the chapter's own: this script
executes the chapter, as the book build does, with LMCOURSE_RECORD_RUNS=1, which makes its recording
cells train the models and overwrite the files. It takes about fifteen minutes on one core (the script
pins one thread, as the book build does) and then prints what the files now hold. Commit the two files
with the chapter change that made them necessary.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "book" / "units" / "07-gpt.md"
RUNS = [CHAPTER.parent / "runs" / "07-char-gpt.json", CHAPTER.parent / "runs" / "07-decoding.json"]


def main() -> None:
    import jupytext
    import nbclient

    os.environ["LMCOURSE_RECORD_RUNS"] = "1"  # the kernel inherits it
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mirror = ROOT.parent / "shared" / "data"
    if "LMCOURSE_DATA_MIRROR" not in os.environ and (mirror / "SHA256SUMS").exists():
        os.environ["LMCOURSE_DATA_MIRROR"] = str(mirror)
    notebook = jupytext.read(CHAPTER)
    client = nbclient.NotebookClient(notebook, timeout=3600, kernel_name="python3",
                                     resources={"metadata": {"path": str(CHAPTER.parent)}})
    started = time.time()
    print(f"executing {CHAPTER.relative_to(ROOT)} with LMCOURSE_RECORD_RUNS=1 (about fifteen minutes)", flush=True)
    client.execute()
    print(f"done in {(time.time() - started) / 60:.1f} minutes")
    for path in RUNS:
        record = json.loads(path.read_text())
        print(f"{path.relative_to(ROOT)}: recorded {record['recorded']} on {record['device']}, torch {record['torch']}")


if __name__ == "__main__":
    sys.exit(main())
