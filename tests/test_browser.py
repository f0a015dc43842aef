"""How `make test` finds its browser; what the browser checks find; every page of the book.

The page tests (marked ``book``) render every page of ``_build/html`` at 1280 and 390 px in
headless Chromium (``tests/browser.py`` says what each check looks for) and fail, per page, on
console errors, requests to other hosts, math left to MathJax errors, TeX outside math,
sideways scrolling on a phone, chapter figures without a caption, and on the intro's code
taking a quarter of its page or more. Reports: ``_build/reports/browser-checks.md`` and
``.json``, ``page-height.json``, screenshots under ``_build/reports/screenshots/``.
"""

import json
from pathlib import Path

import pytest

import browser
from browser import find_browser


def test_forced_path_must_be_an_executable(monkeypatch, tmp_path):
    monkeypatch.setenv("NNAPPROX_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(SystemExit, match="not an executable file.*apt-get install chromium"):
        browser.find_browser()
    exe = tmp_path / "chromium"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("NNAPPROX_CHROMIUM", str(exe))
    assert browser.find_browser() == str(exe)


def test_system_browser_before_playwright(monkeypatch, tmp_path):
    monkeypatch.delenv("NNAPPROX_CHROMIUM", raising=False)
    exe = tmp_path / "google-chrome"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(browser, "_playwright_chromium", lambda: "/playwright/chrome")
    assert browser.find_browser() == str(exe)
    exe.unlink()
    assert browser.find_browser() == "/playwright/chrome"


def test_no_browser_stops_with_one_message(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(browser, "find_browser", lambda: None)
    monkeypatch.setattr(browser, "install_browser", lambda: calls.append("install"))
    assert browser.main() == 1
    assert calls == ["install"]  # it tried to install one first
    err = capsys.readouterr().err
    assert "No Chromium or Chrome was found" in err and "NNAPPROX_CHROMIUM" in err


# --------------------------------------------------------------------------- the checks
def test_tex_outside_math_is_found_in_html_and_math_is_not():
    page = ('<article class="bd-article"><p>so \\frac{a}{b} leaks, <span class="math">'
            '\\(x_{i}\\)</span> is typeset, see {prf:ref}`thm-a` and a stray $ sign</p>'
            '<pre>\\mathbb{R} in code</pre><div class="math">\\[\\sum_i x_i\\]</div></article>')
    found = browser.tex_outside_math_html(page)
    assert any("\\frac{a}{b}" in s for s in found)
    assert any("{prf:ref}" in s for s in found) and any("stray $" in s for s in found)
    assert not any("in code" in s or "\\sum" in s or "x_{i}" in s for s in found)


SYNTHETIC_PAGE = """<!doctype html><html><head><meta name="viewport"
content="width=device-width, initial-scale=1"></head><body><main><article class="bd-article">
<section><h1>Page</h1>
<p>Raw TeX: \\mathbb{R} shows.</p>
<div class="cell"><div class="cell_input"><pre>plt.show()  # \\frac in code is fine</pre></div>
<div class="cell_output"><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="200"
height="100"></div></div>
<div class="cell"><div class="cell_output"><figure><img
src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="200" height="100">
<figcaption><p>What to see.</p></figcaption></figure></div></div>
<div style="width: 900px">a wide block</div>
</section></article></main></body></html>"""


@pytest.mark.book
def test_probe_finds_tex_uncaptioned_figures_and_sideways_scroll(tmp_path):
    (tmp_path / "page.html").write_text(SYNTHETIC_PAGE)
    with browser.serve(tmp_path) as base, browser.chromium() as chromium:
        phone = browser.check_page(chromium, base, "page.html", 390, screenshots=None)
        desk = browser.check_page(chromium, base, "page.html", 1280, screenshots=None)
    assert [t["match"] for t in phone["tex"]] == ["\\mathbb"]  # not the cell input
    assert phone["images"] == 2 and len(phone["uncaptioned"]) == 1
    assert phone["uncaptioned"][0]["cell"] == 1
    assert phone["scrollWidth"] > 391 and phone["overflow"][0]["element"] == "div"
    assert desk["overflow"] == [] and 0 < browser.code_share(desk) < 1


def test_review_page_math_makes_no_link_and_still_renders(tmp_path):
    """The seventh instructor trial: a student's $\\href{javascript:...}{x}$ on a hand-grading
    review page must not become a link, and the page's other math must still render."""
    from nnapprox.assignments.manual import _copy_mathjax

    script = _copy_mathjax(tmp_path)
    assert script, "MathJax is part of the environment"
    (tmp_path / "review.html").write_text(
        f"<html><head>{script}</head><body><p>$\\href{{javascript:alert(1)}}{{x}}$ and "
        "$\\frac{1}{2}$ and $x^2$</p></body></html>")
    with browser.serve(tmp_path) as base, browser.chromium() as chromium:
        page = chromium.new_page()
        page.goto(f"{base}/review.html")
        page.wait_for_function("document.querySelectorAll('mjx-container').length >= 3", timeout=20_000)
        links = page.eval_on_selector_all("a", "els => els.map(e => e.getAttribute('href'))")
        clickable = page.evaluate("[...document.querySelectorAll('[href]')].map(e => e.getAttribute('href'))")
        page.close()
    assert links == [] and not any("javascript" in (h or "") for h in clickable), (links, clickable)


# --------------------------------------------------------------------------- the built book
PAGES, CHAPTERS = browser.toc_pages()


@pytest.fixture(scope="module")
def site():
    """Every page of ``_build/html`` at 1280 and 390 px, measured once (``make test`` builds
    the book in ``tests/test_book.py`` first; alone, this checks the book as last built)."""
    if not (browser.HTML / "index.html").exists():
        pytest.fail("no built book in _build/html: run tests/test_book.py or `make book` first")
    if find_browser() is None:
        pytest.fail(f"no browser for the browser tests: {browser.HELP}")
    return browser.check_site()


def _tex(site, page_path):
    seen, found = set(), []
    for result in site[page_path].values():
        for t in result["tex"]:
            if (t["match"], t["context"]) not in seen:
                seen.add((t["match"], t["context"]))
                found.append(f"{t['match']!r} in '{t['context']}' (section: {t['section']})")
    return found


book = pytest.mark.book


@book
@pytest.mark.parametrize("page_path", PAGES)
def test_page_loads_offline_without_errors(site, page_path):
    for width, r in site[page_path].items():
        assert r["status"] == 200, f"{page_path}: HTTP {r['status']}"
        errors = r["consoleErrors"]
        assert not errors, f"{page_path} @{width}px: console errors: {errors}"
        assert not r["external"], f"{page_path}: requests to other hosts: {r['external'][:5]}"
        assert r["mathRendered"] >= r["mathElements"], \
            f"{page_path}: {r['mathElements']} math elements, {r['mathRendered']} typeset"
        assert r["mathErrors"] == 0, f"{page_path}: MathJax reported TeX errors"


@book
@pytest.mark.parametrize("page_path", PAGES)
def test_no_tex_outside_math(site, page_path):
    found = _tex(site, page_path)
    assert not found, f"{page_path}: {len(found)} TeX snippets outside math:\n" + "\n".join(found)


@book
@pytest.mark.parametrize("page_path", PAGES)
def test_page_does_not_scroll_sideways_on_a_phone(site, page_path):
    r = site[page_path][browser.PHONE]
    wide = "\n".join(f"{o['element']} reaches {o['right']} px: '{o['text']}' ({o['section']})"
                     for o in r["overflow"])
    assert r["scrollWidth"] <= r["innerWidth"] + 1, (
        f"{page_path} scrolls sideways at {browser.PHONE} px ({r['scrollWidth']} px wide):\n{wide}")


@book
@pytest.mark.parametrize("page_path", CHAPTERS)
def test_chapter_figures_have_captions(site, page_path):
    r = site[page_path][1280]
    assert r["images"] > 0, f"{page_path}: a chapter page without figures"
    assert r["brokenImages"] == 0, f"{page_path}: a figure failed to load"
    missing = [f"cell {u['cell']} (section: {u['section']})" for u in r["uncaptioned"]]
    assert not missing, (f"{page_path}: {len(missing)} of {r['images']} figures without a "
                         "caption (mystnb: figure: caption: in the cell metadata):\n"
                         + "\n".join(missing))


@book
@pytest.mark.parametrize("page_path", CHAPTERS)
def test_chapter_has_theorems_exercises_and_claims(site, page_path):
    r = site[page_path][1280]
    assert r["theorems"] > 0, f"{page_path}: no theorem box"
    assert r["exercises"] > 0, f"{page_path}: no exercise box"
    assert r["claimsTables"] >= 1, f"{page_path}: no claims table"


@book
def test_intro_code_takes_under_a_quarter_of_the_page(site):
    """Issue 36: the intro's code cells (inputs and outputs, figures excluded) take less than
    25 % of its height at 1280 px. The other chapters are measured and reported
    (``_build/reports/page-height.json``), not yet held to it."""
    heights = json.loads((browser.REPORTS / "page-height.json").read_text())
    assert set(heights) == {Path(p).stem for p in CHAPTERS}
    share = heights["intro"]["code_share"]
    assert share < browser.CODE_SHARE_MAX, f"intro: code takes {share:.0%} of the page at 1280 px"


@book
def test_status_page_has_a_section_per_chapter_in_reading_order(site):
    r = site["book/status.html"][1280]
    stems = [Path(p).stem for p in CHAPTERS]
    chapters = [s.removeprefix("status-") for s in r["statusSections"] if
                s.removeprefix("status-") in stems]
    assert chapters == stems, f"status page sections {r['statusSections']}"
