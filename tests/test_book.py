"""Build the HTML book with warnings as errors, then check every page in a real browser.

The browser is the one ``tests/browser.py`` finds (``$NNAPPROX_CHROMIUM``, a system
Chromium/Chrome, or Playwright's own Chromium; ``make test`` installs one first if there is
none), driven by Playwright's Python package. Pages are served on 127.0.0.1 and
every request to another host is blocked and counted as a failure, so the book must work
offline: MathJax is served from the book itself. A screenshot of every page is saved under
``_build/reports/screenshots/``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import harness
from browser import HELP as BROWSER_HELP
from browser import find_browser

ROOT = harness.ROOT
HTML = ROOT / "_build" / "html"
SCREENSHOTS = harness.REPORTS / "screenshots"
CHROMIUM = find_browser()
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"

pytestmark = pytest.mark.book


def _build(*extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "NNAPPROX_CLAIMS_DIR": str(harness.CLAIMS), "NNAPPROX_STATIC": "1",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    start = time.perf_counter()
    proc = subprocess.run([str(JUPYTER_BOOK), "build", str(ROOT), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600)
    return proc, time.perf_counter() - start


@pytest.fixture(scope="module")
def built_book():
    """One strict build (``-W -n --keep-going``) shared by the tests of this module."""
    proc, seconds = _build("-W", "-n", "--keep-going")
    log = proc.stdout + proc.stderr
    (harness.REPORTS).mkdir(parents=True, exist_ok=True)
    (harness.REPORTS / "book-build.log").write_text(log)
    assert proc.returncode == 0, "book build failed (see _build/reports/book-build.log):\n" + "\n".join(
        line for line in log.splitlines() if "WARNING" in line or "ERROR" in line or "FAILED" in line
    )[-6000:]
    return {"log": log, "seconds": seconds}


@pytest.fixture(scope="module")
def server(built_book):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _pages() -> list[str]:
    """Every page of the table of contents, as a path relative to _build/html."""
    return [str(p.relative_to(ROOT).with_suffix(".html")) for p in harness.toc_files()]


def test_every_chapter_prints_a_progress_line(built_book):
    for path in harness.toc_notebooks():
        assert f"[nnapprox] chapter {path.stem}" in built_book["log"], path.stem


def test_math_is_served_locally():
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").exists()
    page = (HTML / "book" / "intro.html").read_text()
    assert "_static/mathjax/tex-chtml.js" in page
    assert not re.search(r'<script[^>]+src="https?://[^"]*mathjax', page, flags=re.I), "MathJax from a CDN"
    assert "require.min.js" not in page and "html-manager" not in page, "widget JavaScript from a CDN"


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.fail(f"no browser for the browser tests: {BROWSER_HELP}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield browser
        browser.close()


@pytest.mark.parametrize("page_path", _pages())
def test_page_in_browser(page_path, server, browser):
    chapters = {str(p.relative_to(ROOT).with_suffix(".html")) for p in harness.toc_notebooks()}
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    external: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

    def route(r):
        if r.request.url.startswith(server) or r.request.url.startswith("data:"):
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    response = page.goto(f"{server}/{page_path}", wait_until="load")
    assert response is not None and response.ok, f"{page_path}: HTTP {response and response.status}"
    n_math = page.locator(".math").count()
    if n_math:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000)
        page.evaluate("() => MathJax.startup.promise")
        page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0", timeout=20000)
    rendered = page.locator("mjx-container").count()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / (page_path.replace("/", "__").replace(".html", ".png"))), full_page=False)

    assert not errors, f"{page_path}: console errors: {errors}"
    assert not external, f"{page_path}: requests to other hosts (no network in CI): {external[:5]}"
    if n_math:
        assert rendered >= n_math, f"{page_path}: {n_math} math elements but {rendered} rendered by MathJax"
        assert page.locator("mjx-merror").count() == 0, f"{page_path}: MathJax reported TeX errors"
    if page_path in chapters:
        images = page.locator(".cell_output img")
        assert images.count() > 0, f"{page_path}: a chapter page without figures"
        widths = images.evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
        assert all(w > 0 for w in widths), f"{page_path}: a figure failed to load"
        assert page.locator("div.proof, div.theorem, .prf-theorem, div[class*='theorem']").count() > 0, \
            f"{page_path}: no theorem box"
        assert page.locator("div.exercise, div[class*='exercise']").count() > 0, f"{page_path}: no exercise box"
        assert page.locator("table.nnapprox-claims").count() == 1, f"{page_path}: no claims table"
    context.close()


def test_status_page_lists_every_chapter(server, browser):
    page = browser.new_page()
    page.goto(f"{server}/book/status.html")
    text = page.inner_text("body")
    for path in harness.toc_notebooks():
        assert path.stem in text, f"status page does not list {path.stem}"
    assert page.locator("table.nnapprox-status").count() >= len(harness.toc_notebooks())
    page.close()


def test_second_build_is_cached_and_fast(built_book):
    """Nothing changed: no chapter re-executes and the build takes at most 60 s."""
    proc, seconds = _build()
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Executing notebook" not in log, "a chapter re-executed although nothing changed"
    print(f"second build: {seconds:.1f} s")
    report = harness.REPORTS / "book-timing.json"
    report.write_text(json.dumps({"first_build_s": round(built_book["seconds"], 1),
                                  "second_build_s": round(seconds, 1)}) + "\n")
    assert seconds <= 60, f"second build took {seconds:.0f} s (budget 60 s)"
