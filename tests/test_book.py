"""Build the HTML book with warnings as errors, then check what the build wrote.

Every chapter prints a progress line; MathJax is served from the book itself; no page shows
TeX outside math (checked on the HTML before MathJax runs); each chapter page links its
executed notebook for download and for Colab; a second build with nothing changed comes from
the cache within 60 s. The pages in a browser are checked by ``tests/test_browser.py``, which
runs after this module under ``make test`` and checks the book it built.

``NNAPPROX_USE_BUILT_BOOK=1`` runs the checks of the HTML on the book already in
``_build/html`` instead of building it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import browser as browser_checks
import harness

ROOT = harness.ROOT
HTML = ROOT / "_build" / "html"
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


def _pages() -> list[str]:
    """Every page of the table of contents, as a path relative to _build/html."""
    return [str(p.relative_to(ROOT).with_suffix(".html")) for p in harness.toc_files()]


def test_every_chapter_prints_a_progress_line(built_book):
    for path in harness.toc_notebooks():
        assert f"[nnapprox] chapter {path.stem}" in built_book["log"], path.stem


def test_math_is_served_locally(site_html):
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").exists()
    page = (HTML / "book" / "intro.html").read_text()
    assert "_static/mathjax/tex-chtml.js" in page
    assert not re.search(r'<script[^>]+src="https?://[^"]*mathjax', page, flags=re.I), "MathJax from a CDN"
    assert "require.min.js" not in page and "html-manager" not in page, "widget JavaScript from a CDN"


@pytest.fixture(scope="module")
def site_html(request) -> Path:
    """The built site: this module's strict build, or with ``NNAPPROX_USE_BUILT_BOOK=1`` the
    book already in ``_build/html`` (to rerun the checks on the HTML without rebuilding)."""
    if os.environ.get("NNAPPROX_USE_BUILT_BOOK", "0") not in ("", "0"):
        if not (HTML / "index.html").exists():
            pytest.fail("NNAPPROX_USE_BUILT_BOOK is set but _build/html has no book")
        return HTML
    request.getfixturevalue("built_book")
    return HTML


def test_no_tex_outside_math_in_the_built_html(site_html):
    """The HTML as written, before MathJax: no TeX outside math elements, no literal
    ``{prf:ref}`` (``tests/browser.py`` has the rule; the browser tests check it again after
    MathJax). Every page is checked and every snippet reported."""
    problems = []
    for page_path in _pages():
        found = browser_checks.tex_outside_math_html((site_html / page_path).read_text())
        problems += [f"{page_path}: {snippet}" for snippet in dict.fromkeys(found)]
    assert not problems, f"{len(problems)} TeX snippets outside math:\n" + "\n".join(problems)


def _links(page_html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', page_html)


def test_chapter_notebook_links_give_the_executed_notebook(site_html):
    """Each chapter page's download link and Colab button point at ``_notebooks/<stem>.ipynb``
    in the site: a valid notebook with the install cell first and the outputs of the run."""
    import nbformat

    branch = "gh-pages"
    config = (ROOT / "_config.yml").read_text()
    repo = re.search(r"url:\s*https://github.com/(\S+)", config).group(1)
    for path in harness.toc_notebooks():
        page_path = str(path.relative_to(ROOT).with_suffix(".html"))
        links = _links((site_html / page_path).read_text())
        download = [h for h in links if h.endswith(f"_notebooks/{path.stem}.ipynb")
                    and not h.startswith("http")]
        colab = [h for h in links if h.startswith("https://colab.research.google.com/")]
        assert download, f"{page_path}: no download link to the executed notebook"
        assert colab, f"{page_path}: no Colab link"
        target = (site_html / page_path).parent / download[0]
        assert target.resolve().is_file(), f"{page_path}: {download[0]} is not in the build"
        prefix = f"https://colab.research.google.com/github/{repo}/blob/{branch}/"
        assert colab[0].startswith(prefix), f"{page_path}: Colab link {colab[0]}"
        assert (site_html / colab[0].removeprefix(prefix)).resolve() == target.resolve(), \
            f"{page_path}: the Colab link {colab[0]} is not the download's notebook"
        notebook = nbformat.read(target, as_version=4)
        nbformat.validate(notebook)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        tags = code[0].metadata.get("tags", [])
        assert "colab-install" in tags, f"{target.name}: the first cell does not install nnapprox"
        outputs = [o for c in code for o in c.get("outputs", [])]
        figures = [o for o in outputs if {"image/png", "image/svg+xml"} & set(o.get("data", {}))]
        assert outputs and figures, f"{target.name}: no outputs or no figures (not executed)"


def test_how_to_use_clone_command_names_the_repository():
    url = re.search(r"url:\s*(https://github.com/\S+)", (ROOT / "_config.yml").read_text()).group(1)
    text = (ROOT / "book" / "how-to-use.md").read_text()
    assert f"git clone {url}" in text and "<this repository>" not in text


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


def test_chapter_graph_links_every_chapter_and_its_edges_name_chapters():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import nnapprox_book

    stems = [p.stem for p in harness.toc_notebooks()]
    assert {s for edge in nnapprox_book.CHAPTER_EDGES for s in edge} <= set(stems)
    svg = nnapprox_book.chapter_graph_svg("book/how-to-use")
    for path in harness.toc_notebooks():
        href = "../" + str(path.relative_to(ROOT).with_suffix(".html"))
        assert f'href="{href}"' in svg, f"the chapter graph has no box for {path.stem}"
    assert svg.count("<path d=") == len(nnapprox_book.CHAPTER_EDGES) + 1  # + the arrow head
