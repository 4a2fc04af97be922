"""The built book, shared by test_book.py, test_browser.py and test_leaks.py.

The book is built once per test run (the first pytest-xdist worker to need
it builds it under a file lock; the others read its verdict): `lmcourse book
--no-assign --check` into the standard book/_build/, so that `make test`
after `make book` (or the other way round) re-executes no chapter.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "book" / "_build"
HTML = BUILD / "html"


@dataclass(frozen=True)
class BuiltBook:
    returncode: int
    log: str  # stdout + stderr of the build
    seconds: float
    html: Path = HTML

    def pages(self) -> list[Path]:
        """Every HTML page a reader can reach (not Sphinx's search and index stubs)."""
        skip = {"search.html", "genindex.html", "index.html"}  # index.html only redirects to intro
        return sorted(p for p in self.html.rglob("*.html")
                      if p.name not in skip and "_static" not in p.parts and "_sources" not in p.parts)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.splitlines()[-lines:])


def mirror_env() -> dict[str, str]:
    """This environment, with the offline corpus mirror and the venv's tools, as `make test` sets them."""
    env = dict(os.environ)
    mirror = ROOT.parent / "shared" / "data"
    if "LMCOURSE_DATA_MIRROR" not in env and (mirror / "SHA256SUMS").exists():
        env["LMCOURSE_DATA_MIRROR"] = str(mirror)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@cache
def built_book() -> BuiltBook:
    """Build the book (checked mode: every warning fails) and remember the result."""
    BUILD.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "lmcourse.cli", "book", "--no-assign", "--check"]
    # pytest-xdist gives every worker of one run the same id: the first worker's build serves them all
    # (a second build, chapters from the execution cache, still cost a CI core 75 s of Sphinx).
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = BUILD / f".test-build-{run}.json" if run else None
    with open(BUILD / ".test-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time across xdist workers
        if shared is not None and shared.exists():
            return BuiltBook(**json.loads(shared.read_text()))
        for stale in BUILD.glob(".test-build-*.json"):  # earlier runs' verdicts
            stale.unlink()
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=mirror_env(), capture_output=True, text=True)
        seconds = time.perf_counter() - start
        log = proc.stdout + proc.stderr
        (BUILD / "test-build.log").write_text(log)
        if shared is not None:
            shared.write_text(json.dumps({"returncode": proc.returncode, "log": log, "seconds": seconds}))
    return BuiltBook(proc.returncode, log, seconds)


@contextlib.contextmanager
def serve(directory: Path):
    """A folder over HTTP on a free loopback port, as a reader's browser gets the site; yields the base URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest's output for failures
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def loopback_only(context) -> list[str]:
    """Make a Playwright browser context refuse every request that would leave 127.0.0.1 (the site must
    work offline); returns the list the refused URLs are appended to."""
    import urllib.parse

    outside: list[str] = []

    def route(r):
        if urllib.parse.urlsplit(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return outside


def watch(page) -> list[str]:
    """What a reader's browser would complain about on `page`: console errors, uncaught exceptions and HTTP
    errors, appended to the returned list as they happen."""
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return errors
