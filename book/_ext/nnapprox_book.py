"""Sphinx extension for the nnapprox book (loaded through ``_config.yml``'s local_extensions).

It does four things Jupyter Book 1 does not do by itself:

1. **Library-aware execution cache.** myst-nb's cache keys on a notebook's code cells only,
   so editing ``lib/`` would not re-execute anything. We fold a hash of every file under
   ``lib/nnapprox`` (plus the requested profile) into a config value ``nnapprox_execution_key``:
   when it changes, Sphinx re-reads every page and the stale jupyter-cache is cleared, so
   every chapter re-executes.
2. **A progress line per chapter** (name, seconds, claims passed) as the book executes, and
   a non-zero exit status when a chapter failed to execute.
3. **The status page**: the ``{nnapprox-status}`` directive becomes a table of every
   chapter's claims, read from ``_build/reports/claims/*.json`` when the pages are written.
4. **Offline MathJax**: MathJax 3 is copied from the ``django-static-mathjax`` wheel into
   ``_static/mathjax`` so the book renders math with no CDN. It also publishes the
   ``.ipynb`` exports of the chapters (``make notebooks``) next to the pages and points a
   download button and the Colab launch button at them.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import time
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib" / "nnapprox"
REPORTS = ROOT / "_build" / "reports"
CLAIMS = REPORTS / "claims"
NOTEBOOKS = ROOT / "_build" / "notebooks"


# --------------------------------------------------------------------------- 1. cache key
def library_hash(lib: Path = LIB) -> str:
    """SHA-256 over the relative paths and contents of every source file of the library."""
    digest = hashlib.sha256()
    for path in sorted(p for p in lib.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(lib)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def execution_key() -> str:
    """What decides re-execution besides the code cells: the library and the profile."""
    profile = os.environ.get("NNAPPROX_PROFILE", "auto")
    return f"lib-{library_hash()[:16]}-profile-{profile}"


def sync_execution_cache(cache: Path, key: str | None = None) -> str:
    """Clear the jupyter-cache at ``cache`` unless it was filled under the current key.

    The key is stored next to the cache (``.nnapprox-execution-key``). Used by the book
    build and by the test harness, which fills the same cache with the notebooks it executed.
    """
    key = key or execution_key()
    stamp = cache.parent / ".nnapprox-execution-key"
    if cache.exists() and (not stamp.exists() or stamp.read_text() != key):
        logger.info(f"[nnapprox] library or profile changed ({key}): clearing the execution cache {cache}")
        shutil.rmtree(cache)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key)
    return key


def _on_config_inited(app: Sphinx, config) -> None:
    key = execution_key()
    config.nnapprox_execution_key = key
    cache = Path(config.nb_execution_cache_path or (Path(app.outdir).parent / ".jupyter_cache"))
    if not cache.is_absolute():
        cache = Path(app.confdir) / cache
    sync_execution_cache(cache, key)
    if os.environ.get("NNAPPROX_REQUIRE_CACHE", "0") not in ("", "0"):
        missing = uncached_notebooks(cache, toc_notebook_paths())
        if missing:
            from sphinx.errors import ExtensionError

            raise ExtensionError(
                "NNAPPROX_REQUIRE_CACHE is set, so the book must be built from executions made "
                f"beforehand, but these chapters have none in {cache} for the current library and profile "
                f"({key}): {', '.join(p.stem for p in missing)}. Run them first, e.g. "
                "`NNAPPROX_PROFILE=full make chapters PROFILE=full DEVICE=cuda`."
            )
        logger.info(f"[nnapprox] every chapter comes from executions made beforehand ({cache})")
    app.nnapprox_started = time.time()


def toc_notebook_paths(root: Path = ROOT) -> list[Path]:
    """The notebooks (Markdown files with a kernelspec) listed in ``_toc.yml``, in order."""
    import yaml

    files: list[str] = []

    def walk(entries):
        for entry in entries or []:
            if isinstance(entry, dict):
                if "file" in entry:
                    files.append(entry["file"])
                for key in ("chapters", "sections", "parts"):
                    walk(entry.get(key))

    toc = yaml.safe_load((root / "_toc.yml").read_text()) or {}
    if "root" in toc:
        files.insert(0, toc["root"])
    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    paths = [root / (f if f.endswith((".md", ".ipynb")) else f + ".md") for f in files]
    return [p for p in paths if p.exists() and _is_notebook(p)]


def _is_notebook(path: Path) -> bool:
    """An ``.ipynb``, or a Markdown file whose front matter declares a kernel."""
    if path.suffix == ".ipynb":
        return True
    text = path.read_text()
    return text.startswith("---") and "kernelspec:" in text.split("---", 2)[1]


def uncached_notebooks(cache: Path, paths: list[Path]) -> list[Path]:
    """Those of ``paths`` whose code cells have no execution in the jupyter-cache at ``cache``."""
    import jupytext
    from jupyter_cache import get_cache

    if not cache.exists():
        return list(paths)
    jc = get_cache(str(cache))
    missing = []
    for path in paths:
        try:
            jc.match_cache_notebook(jupytext.read(path))
        except KeyError:
            missing.append(path)
    return missing


# --------------------------------------------------------------------------- 2. progress
def _on_doctree_read(app: Sphinx, doctree) -> None:
    docname = app.env.docname
    exec_data = getattr(app.env, "nb_metadata", {}).get(docname, {}).get("exec_data")
    if not exec_data:
        return
    stem = Path(docname).name
    record_path = CLAIMS / f"{stem}.json"
    claims = "no claims record"
    if record_path.exists():
        record = json.loads(record_path.read_text())
        n_pass = sum(bool(c.get("passed")) for c in record.get("claims", []))
        claims = f"claims {n_pass}/{len(record.get('claims', []))}"
    method = exec_data.get("method", "?")
    seconds = exec_data.get("runtime")
    secs = f"{seconds:7.1f} s" if isinstance(seconds, (int, float)) else "      -  "
    status = "ok" if exec_data.get("succeeded") else "FAILED"
    logger.info(f"[nnapprox] chapter {stem:<12} {secs}  {claims:<14} ({method}) {status}", color="green")
    if not exec_data.get("succeeded"):
        app.nnapprox_failed.append(stem)


def _on_build_finished(app: Sphinx, exception) -> None:
    if exception is not None:
        return
    _copy_mathjax(app)
    _publish_notebooks(app)
    if app.nnapprox_failed:
        logger.error(f"[nnapprox] chapters that failed to execute: {', '.join(app.nnapprox_failed)}")
        app.statuscode = 1


# --------------------------------------------------------------------------- 3. status page
class status_placeholder(nodes.General, nodes.Element):
    pass


class StatusDirective(SphinxDirective):
    """``{nnapprox-status}``: replaced by the claims table when the page is written."""

    has_content = False

    def run(self):
        return [status_placeholder()]


def _toc_order() -> list[str]:
    """Chapter stems in the order of ``_toc.yml`` (the reading order)."""
    return [p.stem for p in toc_notebook_paths()]


def _status_table() -> nodes.Node:
    from nnapprox.claims import claims_html, summary

    order = _toc_order()
    records = []
    for path in CLAIMS.glob("*.json"):
        try:
            records.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            continue
    records.sort(key=lambda r: order.index(r["chapter"]) if r["chapter"] in order else len(order))
    harness = {}
    if (REPORTS / "chapters.json").exists():
        harness = {r["chapter"]: r for r in json.loads((REPORTS / "chapters.json").read_text())}
    if not records:
        return nodes.paragraph(text="No chapter has been executed yet: run `make book` or `make test`.")
    parts = [_seeds_html(order)]
    for rec in records:
        claims = rec.get("claims", [])
        test = harness.get(rec["chapter"])
        test_line = (
            f"; test harness: {test['wall_seconds']:.1f} s wall on {test['profile']}/{test['device']}, "
            f"{'passed' if test['ok'] else 'FAILED'}" if test else ""
        )
        parts.append(
            f"<h2>{html.escape(rec['chapter'])}: {html.escape(summary(claims))}</h2>"
            f"<p>profile <b>{html.escape(rec['profile'])}</b>, "
            f"device <b>{html.escape(rec['device'])}</b>, seed {rec['seed']}, "
            f"{rec['seconds']:.1f} s of execution "
            f"(finished {html.escape(str(rec.get('finished', '?')))}){html.escape(test_line)}.</p>"
        )
        parts.append(claims_html(claims).replace('class="nnapprox-claims"', 'class="table nnapprox-status"'))
    return nodes.raw("", "\n".join(parts), format="html")


def _seeds_html(order: list[str]) -> str:
    """The seed sweep's table (``make seeds``), or a sentence saying how to produce it."""
    path = REPORTS / "seeds.json"
    if not path.exists():
        return ("<h2>Seed sweep</h2><p>No seed sweep on this machine yet: <code>make seeds</code> runs "
                "every chapter at the quick profile on seeds 0&#8211;9.</p>")
    sweep = json.loads(path.read_text())
    rows, details = [], []
    chapters = sorted(sweep.get("chapters", {}).items(),
                      key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    for stem, ch in chapters:
        n, ok = len(ch["seeds"]), len(ch["seeds_ok"])
        rows.append(f"<tr><td>{html.escape(stem)}</td><td>{n}</td>"
                    f'<td class="{"nnapprox-pass" if ok == n else "nnapprox-fail"}">{ok}/{n}</td>'
                    f"<td>{ch['wall_seconds_max']:.0f}</td></tr>")
        shaky = [c for c in ch["claims"] if c["passed"] < c["runs"]]
        for c in shaky:
            details.append(f"<li>{html.escape(stem)}: {html.escape(c['name'])} held on {c['passed']}/{c['runs']} "
                           f"seeds (failed on {', '.join(map(str, c['failed_seeds']))})</li>")
    fails = f"<p>Claims that failed on some seed:</p><ul>{''.join(details)}</ul>" if details else (
        "<p>Every claim held on every seed of the sweep.</p>")
    return (
        f"<h2>Seed sweep</h2><p>Quick profile on the CPU, written {html.escape(sweep.get('written', '?'))}; "
        "per claim pass rates and worst margins are in <code>_build/reports/seeds.md</code>.</p>"
        '<table class="table nnapprox-status"><thead><tr><th>chapter</th><th>seeds</th>'
        "<th>all claims hold on</th><th>slowest run (s)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{fails}"
    )


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}" if x == 0 or 1e-3 <= abs(x) < 1e5 else f"{x:.3e}"
    return str(x)


def _on_doctree_resolved(app: Sphinx, doctree, docname: str) -> None:
    for node in doctree.findall(status_placeholder):
        node.replace_self(_status_table())


def _on_env_get_outdated(app, env, added, changed, removed):
    # the status page reflects the latest run: re-read and re-write it on every build
    return [d for d in env.found_docs if d.endswith("status")] if env.found_docs else []


# --------------------------------------------------------------------------- 4. static assets
def _copy_mathjax(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    import mathjax  # the django-static-mathjax wheel: MathJax 3.2.2 under static/mathjax/es5

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(app.outdir) / "_static" / "mathjax"
    if not (target / "tex-chtml.js").exists():
        shutil.copytree(source, target, dirs_exist_ok=True)


def _publish_notebooks(app: Sphinx) -> None:
    """Copy ``_build/notebooks/*.ipynb`` (``make notebooks``) into the site's ``_notebooks/``."""
    if app.builder.format != "html" or not NOTEBOOKS.exists():
        return
    target = Path(app.outdir) / "_notebooks"
    target.mkdir(exist_ok=True)
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy2(nb, target / nb.name)


def _dedupe_scripts(context) -> None:
    """Drop repeated script entries (sphinx-thebe registers its inline config once per read
    pass, and a second copy redeclares a ``const``, which is a console error)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        key = (str(getattr(js, "filename", js) or ""), str(getattr(js, "attributes", {}).get("body", "")))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def _on_html_page_context(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Point a download button and the Colab button of chapter pages at the .ipynb export."""
    _dedupe_scripts(context)
    stem = Path(pagename).name
    if not (NOTEBOOKS / f"{stem}.ipynb").exists():
        return
    depth = pagename.count("/")
    rel = "../" * depth + f"_notebooks/{stem}.ipynb"
    buttons = context.get("header_buttons")
    if buttons is None:
        return
    for group in buttons:
        if group.get("label") == "Download this page" or group.get("type") == "group" and any(
            "download" in str(b.get("label", "")).lower() for b in group.get("buttons", [])
        ):
            group.setdefault("buttons", []).insert(0, {
                "type": "link", "url": rel, "text": ".ipynb (runnable)", "tooltip": "Download the notebook",
                "icon": "fas fa-code", "label": "download-ipynb-button",
            })
        for b in group.get("buttons", []):
            if "colab" in str(b.get("label", "")).lower() or "colab" in str(b.get("url", "")).lower():
                repo = app.config.html_theme_options.get("repository_url", "").replace("https://github.com/", "")
                b["url"] = f"https://colab.research.google.com/github/{repo}/blob/gh-pages/_notebooks/{stem}.ipynb"


def _add_static(app: Sphinx) -> None:
    app.config.html_static_path.append(str(Path(__file__).resolve().parent / "static"))


def setup(app: Sphinx):
    app.add_config_value("nnapprox_execution_key", "", "env")
    app.connect("builder-inited", _add_static)
    app.add_css_file("nnapprox.css")
    app.nnapprox_failed = []
    app.connect("config-inited", _on_config_inited)
    app.connect("doctree-read", _on_doctree_read)
    app.connect("doctree-resolved", _on_doctree_resolved)
    app.connect("env-get-outdated", _on_env_get_outdated)
    app.connect("html-page-context", _on_html_page_context, priority=900)
    app.connect("build-finished", _on_build_finished)
    app.add_node(status_placeholder, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("nnapprox-status", StatusDirective)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
