"""Find a Chromium for the browser tests, installing one if there is none.

``make test`` runs ``python tests/browser.py`` before any test, so that a machine without a
browser either gets one or stops at once with one message, instead of failing the browser
tests twenty minutes later. The order:

1. ``$NNAPPROX_CHROMIUM`` (an executable path);
2. a system Chromium or Chrome on ``PATH`` (``chromium``, ``chromium-browser``,
   ``google-chrome``, ``google-chrome-stable``);
3. Playwright's own Chromium, if ``playwright install chromium`` has been run;
4. otherwise install one: ``apt-get install chromium`` when running as root on Debian or
   Ubuntu, else ``python -m playwright install chromium`` where Playwright's download works.

``find_browser()`` (steps 1-3, nothing installed) is what the browser tests call.

The second half of this module is what the browser tests check on every page of the built
book (``tests/test_browser.py``); ``python tests/browser.py check [page ...]`` runs the same
checks on ``_build/html`` as it is and writes the reports without pytest:

- **TeX outside math**: text a reader sees that is not typeset by MathJax but contains TeX
  (``\\frac``, ``\\mathbb``, a stray ``$``, ``\\(``, ``x_{i}``) or a cross-reference role
  left as text (``{prf:ref}``, ``prf:ref``). Code blocks and cell inputs are not prose and
  are skipped. :func:`tex_outside_math_html` applies the same rule to the HTML before
  MathJax runs (no browser needed).
- **Sideways scrolling on a phone**: at 390 px the page must not scroll horizontally
  (``document.scrollingElement.scrollWidth > innerWidth + 1``); wide equations, tables and
  outputs scroll inside their own boxes. The outermost elements that stick out are named.
- **Figures without a caption**: every image in a chapter's cell output must sit in a
  ``<figure>`` with a non-empty ``<figcaption>``. myst-nb renders the cell metadata
  ``mystnb: figure: caption:`` (and ``{glue:figure}`` with a caption) exactly so; a plain
  ``plt.show()`` gives a bare ``<img>``.
- **Code's share of the page**: at 1280 px, the height of code cells (input and output,
  less the figures and their captions inside them) over the height of the article, per
  chapter, written to ``_build/reports/page-height.json``.
- plus what every page needs: no console error, no request to another host (the book works
  offline), every math element typeset by MathJax without error. A screenshot of the first
  screen at each width goes to ``_build/reports/screenshots/``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HELP = (
    "No Chromium or Chrome was found and none could be installed. Install one and run "
    "`make test` again: on Debian/Ubuntu `sudo apt-get install chromium` "
    "(Ubuntu: `chromium-browser`), on macOS `brew install --cask chromium`, or point "
    "NNAPPROX_CHROMIUM at a Chromium/Chrome executable."
)


def _playwright_chromium() -> str | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:  # noqa: BLE001 - a broken Playwright install counts as none
        return None
    return path if path and Path(path).is_file() else None


def find_browser() -> str | None:
    """The first usable browser executable in the order of the module docstring, or ``None``."""
    forced = os.environ.get("NNAPPROX_CHROMIUM")
    if forced:
        if not (Path(forced).is_file() and os.access(forced, os.X_OK)):
            raise SystemExit(f"NNAPPROX_CHROMIUM={forced!r} is not an executable file. {HELP}")
        return forced
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return _playwright_chromium()


def _run(cmd: list[str], timeout: float) -> bool:
    print("browser: running " + " ".join(cmd), flush=True)
    try:
        return subprocess.run(cmd, timeout=timeout, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                              stdout=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def install_browser() -> None:
    """Try the installers of the module docstring, quietly; never raises."""
    debian = Path("/etc/debian_version").exists()
    if debian and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        for package in ("chromium", "chromium-browser"):
            if _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package], 900):
                return
        if _run(["apt-get", "update", "-qq"], 600):
            for package in ("chromium", "chromium-browser"):
                if _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package], 900):
                    return
    _run([sys.executable, "-m", "playwright", "install", "chromium"], 600)


# --------------------------------------------------------------------------- page checks
ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
REPORTS = ROOT / "_build" / "reports"
SCREENSHOTS = REPORTS / "screenshots"
WIDTHS = (1280, 390)
PHONE = 390
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
CODE_SHARE_MAX = 0.25  # intro only, for now (issue 36)

# TeX a reader should never see as text (a JavaScript-compatible regular expression)
TEX_PATTERN = (r"\\[A-Za-z]{2,}|\\[()\[\]{}|,;!]|\$|[_^]\{|\{(?:prf:ref|cite(?::\w+)?|doc|ref|"
               r"numref|eq|math|glue(?::\w+)?)\}|prf:ref")
TEX_RE = re.compile(TEX_PATTERN)
# where TeX-like text is not prose: code, cell inputs, MathJax's own output
NOT_PROSE = ("mjx-container, script, style, pre, code, .highlight, .cell_input, "
             "mjx-assistive-mml, .headerlink, .MathJax, textarea")


def tex_outside_math_html(page_html: str) -> list[str]:
    """Snippets of TeX in the text of a built page outside math elements (before MathJax)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page_html, "html.parser")
    root = soup.select_one("article.bd-article") or soup.select_one("main") or soup.body or soup
    for element in root.select(NOT_PROSE + ", .math, span.math, div.math"):
        element.decompose()
    found = []
    for text in root.find_all(string=True):
        for match in TEX_RE.finditer(text):
            found.append(_snippet(str(text), match.start(), match.end()))
    return found


def _snippet(text: str, start: int, end: int, width: int = 40) -> str:
    return re.sub(r"\s+", " ", text[max(0, start - width):end + width]).strip()


PROBE_JS = r"""
({texSource, notProse, width, phone}) => {
  const root = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  const sectionOf = (el) => {
    const sec = el.closest('section');
    const h = sec && sec.querySelector('h1, h2, h3, h4');
    return h ? h.textContent.replace(/[#¶]/g, '').trim().slice(0, 80) : '';
  };
  const out = {innerWidth: window.innerWidth,
               scrollWidth: document.scrollingElement.scrollWidth};
  // TeX outside math
  const tex = new RegExp(texSource, 'g');
  out.tex = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    if (!el || el.closest(notProse)) continue;
    const text = node.textContent;
    tex.lastIndex = 0;
    let m;
    while ((m = tex.exec(text)) !== null && out.tex.length < 300) {
      const ctx = text.slice(Math.max(0, m.index - 40), m.index + m[0].length + 40);
      out.tex.push({match: m[0], context: ctx.replace(/\s+/g, ' ').trim(),
                    section: sectionOf(el)});
    }
  }
  // images in cell outputs without a caption
  const cells = [...root.querySelectorAll('div.cell')];
  out.images = 0;
  out.uncaptioned = [];
  out.brokenImages = 0;
  for (const img of root.querySelectorAll('.cell_output img')) {
    out.images += 1;
    if (img.complete && img.naturalWidth === 0) out.brokenImages += 1;
    const fig = img.closest('figure');
    const cap = fig && fig.querySelector('figcaption');
    if (!(cap && cap.textContent.trim())) {
      const cell = img.closest('div.cell');
      out.uncaptioned.push({section: sectionOf(img), cell: cells.indexOf(cell) + 1});
    }
  }
  // what sticks out sideways (outermost elements not inside a scrolling or clipping box)
  out.overflow = [];
  if (width <= phone && out.scrollWidth > out.innerWidth + 1) {
    const wide = [];
    for (const el of document.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.right <= out.innerWidth + 1) continue;
      // fixed elements (off-canvas drawers) do not widen the page; clipped ones do not show
      let a = el, clipped = false;
      while (a && a !== document.body) {
        const st = getComputedStyle(a);
        if (st.position === 'fixed' || (a !== el && st.overflowX !== 'visible')) {
          clipped = true;
          break;
        }
        a = a.parentElement;
      }
      if (!clipped) wide.push(el);
    }
    const set = new Set(wide);
    for (const el of wide.filter(e => !set.has(e.parentElement)).slice(0, 12)) {
      const cls = typeof el.className === 'string' && el.className
        ? '.' + el.className.trim().split(/\s+/).join('.') : '';
      out.overflow.push({element: el.tagName.toLowerCase() + cls,
                         right: Math.round(el.getBoundingClientRect().right),
                         text: (el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60),
                         section: sectionOf(el)});
    }
  }
  // height of code cells (inputs and outputs, less figures and captions) over the article
  let code = 0, figures = 0;
  for (const cell of cells) {
    const h = cell.getBoundingClientRect().height;
    let f = 0;
    for (const x of cell.querySelectorAll('figure, img')) {
      if (x.tagName === 'IMG' && x.closest('figure')) continue;
      f += x.getBoundingClientRect().height;
    }
    code += Math.max(0, h - f);
    figures += f;
  }
  out.articlePx = root.getBoundingClientRect().height;
  out.pagePx = document.scrollingElement.scrollHeight;
  out.codePx = code;
  out.figurePx = figures;
  out.mathElements = document.querySelectorAll('.math').length;
  out.mathRendered = document.querySelectorAll('mjx-container').length;
  out.mathErrors = document.querySelectorAll('mjx-merror').length;
  out.theorems = root.querySelectorAll(
    "div.proof, div.theorem, .prf-theorem, div[class*='theorem']").length;
  out.exercises = root.querySelectorAll("div.exercise, div[class*='exercise']").length;
  out.claimsTables = root.querySelectorAll('table.nnapprox-claims').length;
  out.statusSections = [...root.querySelectorAll('section[id^="status-"] > h2')]
    .map(h => h.parentElement.id);
  return out;
}
"""


@contextmanager
def serve(directory: Path = HTML):
    """Serve ``directory`` on 127.0.0.1 (a free port); yields the base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@contextmanager
def chromium():
    """A headless Chromium driven by Playwright (the browser :func:`find_browser` finds)."""
    from playwright.sync_api import sync_playwright

    path = find_browser()
    if path is None:
        raise RuntimeError(HELP)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def check_page(browser, base_url: str, page_path: str, width: int,
               screenshots: Path | None = SCREENSHOTS) -> dict:
    """Load one page at one width, wait for MathJax, and measure it (:data:`PROBE_JS`)."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    external: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

    def route(r):
        if r.request.url.startswith(base_url) or r.request.url.startswith("data:"):
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    response = page.goto(f"{base_url}/{page_path}", wait_until="load")
    result = {"page": page_path, "width": width,
              "status": response.status if response is not None else None}
    if page.locator(".math").count():
        try:
            page.wait_for_function("() => window.MathJax && MathJax.startup "
                                   "&& MathJax.startup.promise", timeout=20000)
            page.evaluate("() => MathJax.startup.promise")
            page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0",
                                   timeout=20000)
        except Exception as exc:  # noqa: BLE001 - reported as a failure of the page
            errors.append(f"MathJax did not finish: {exc}")
    result.update(page.evaluate(PROBE_JS, {"texSource": TEX_PATTERN, "notProse": NOT_PROSE,
                                           "width": width, "phone": PHONE}))
    if screenshots is not None:
        screenshots.mkdir(parents=True, exist_ok=True)
        name = page_path.replace("/", "__").replace(".html", f"@{width}.png")
        page.screenshot(path=str(screenshots / name), full_page=False)
    result["consoleErrors"] = errors
    result["external"] = external
    context.close()
    return result


def toc_pages(root: Path = ROOT) -> tuple[list[str], list[str]]:
    """Every page of ``_toc.yml`` and the chapter pages, as paths relative to the site."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import harness

    html = lambda p: str(p.relative_to(root).with_suffix(".html"))  # noqa: E731
    pages = [html(p) for p in harness.toc_files(root)]
    return pages, [html(p) for p in harness.toc_notebooks(root)]


def check_site(pages: list[str] | None = None, html_dir: Path = HTML,
               reports: Path = REPORTS) -> dict[str, dict[int, dict]]:
    """Every page at every width of :data:`WIDTHS`; writes ``page-height.json`` (chapters)
    and ``browser-checks.json`` / ``.md`` under ``reports``."""
    all_pages, chapters = toc_pages()
    pages = pages or all_pages
    results: dict[str, dict[int, dict]] = {}
    with serve(html_dir) as base, chromium() as browser:
        for page_path in pages:
            results[page_path] = {w: check_page(browser, base, page_path, w,
                                                reports / "screenshots") for w in WIDTHS}
    write_reports(results, chapters, reports)
    return results


def code_share(result: dict) -> float:
    return result["codePx"] / result["articlePx"] if result.get("articlePx") else 0.0


def write_reports(results: dict[str, dict[int, dict]], chapters: list[str], reports: Path) -> None:
    reports.mkdir(parents=True, exist_ok=True)
    heights = {}
    for page_path in chapters:
        if page_path not in results:
            continue
        desk, phone = results[page_path][1280], results[page_path][PHONE]
        heights[Path(page_path).stem] = {
            "page": page_path,
            "code_share": round(code_share(desk), 4),
            "figure_share": round(desk["figurePx"] / desk["articlePx"], 4)
            if desk["articlePx"] else 0.0,
            "article_px": round(desk["articlePx"]),
            "screens_1280": round(desk["pagePx"] / 900, 1),
            "screens_390": round(phone["pagePx"] / 900, 1),
        }
    (reports / "page-height.json").write_text(json.dumps(heights, indent=1) + "\n")
    (reports / "browser-checks.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["# Browser checks", "",
             "| page | TeX outside math | uncaptioned figures | sideways at 390 px | "
             "code share (1280 px) | console errors |", "|---|---|---|---|---|---|"]
    for page_path, by_width in results.items():
        desk, phone = by_width[1280], by_width[PHONE]
        tex = len({(t["match"], t["context"]) for w in by_width.values() for t in w["tex"]})
        sideways = (f"{phone['scrollWidth']} px" if phone["scrollWidth"] > phone["innerWidth"] + 1
                    else "no")
        share = f"{code_share(desk):.0%}" if page_path in chapters else ""
        errors = sum(len(w["consoleErrors"]) for w in by_width.values())
        lines.append(f"| {page_path} | {tex} | {len(desk['uncaptioned'])} | {sideways} | {share} "
                     f"| {errors} |")
    (reports / "browser-checks.md").write_text("\n".join(lines) + "\n")


def _check_main(pages: list[str]) -> int:
    results = check_site(pages or None)
    print((REPORTS / "browser-checks.md").read_text())
    for page_path, by_width in results.items():
        for width, r in by_width.items():
            for t in r["tex"] if width == 1280 else []:
                print(f"TeX   {page_path}: {t['match']!r} in '{t['context']}' ({t['section']})")
            for u in r["uncaptioned"] if width == 1280 else []:
                print(f"fig   {page_path}: cell {u['cell']} ({u['section']}) has no caption")
            for o in r["overflow"]:
                print(f"wide  {page_path} @{width}: {o['element']} to {o['right']} px "
                      f"'{o['text']}' ({o['section']})")
    return 0


def main() -> int:
    path = find_browser()
    if path is None:
        install_browser()
        path = find_browser()
    if path is None:
        print(HELP, file=sys.stderr)
        return 1
    print(f"browser: {path}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"]:
        sys.exit(_check_main(sys.argv[2:]))
    sys.exit(main())
