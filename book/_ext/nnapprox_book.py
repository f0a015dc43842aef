"""Sphinx extension for the nnapprox book (loaded through ``_config.yml``'s local_extensions).

It does what Jupyter Book 1 does not do by itself:

1. **Library-aware execution cache.** myst-nb's cache keys on a notebook's code cells only,
   so editing ``lib/`` would not re-execute anything. We fold a hash of every file under
   ``lib/nnapprox`` (plus the requested profile) into a config value ``nnapprox_execution_key``:
   when it changes, Sphinx re-reads every page and the stale jupyter-cache is cleared, so
   every chapter re-executes.
2. **A progress line per chapter** (name, seconds, claims passed) as the book executes, and
   a non-zero exit status when a chapter failed to execute.
3. **The status page**: the ``{nnapprox-status}`` directive becomes one section per chapter
   (in reading order; real headings, so they are in the page's contents), each with the
   chapter's run and its claims collapsed under a one-line summary, then the seed sweep and
   the prose budget; filled from ``_build/reports/`` when the pages are written.
4. **Offline MathJax**: MathJax 3 is copied from the ``django-static-mathjax`` wheel into
   ``_static/mathjax`` so the book renders math with no CDN.
5. **Executed notebooks**: each chapter's notebook with the outputs of its execution, with
   a first cell that installs the library, is published under ``_notebooks/``; the download
   button and the Colab button of chapter pages point at it (Colab through the branch
   ``nnapprox_notebooks_branch`` of the repository, which must hold the published site).
6. **The chapter graph**: ``{nnapprox-chapter-graph}`` draws the chapters of ``_toc.yml`` and
   what each builds on (:data:`CHAPTER_EDGES`) as an inline SVG figure; its content is the
   caption.
7. **Which runs a reader sees**: ``{nnapprox-profile}`` becomes one paragraph naming the
   profile and device every chapter of this build ran at (from the claims records), with a
   link to the status page.
"""

from __future__ import annotations

import hashlib
import itertools
import html
import json
import os
import shutil
import sys
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
    cache = _cache_dir(app)
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
    """Filled when the page is written: ``part`` is "seeds", "prose" or a chapter stem."""


class StatusDirective(SphinxDirective):
    """``{nnapprox-status}``: one section per chapter in reading order, plus the seed sweep
    and the prose budget. The headings exist when the page is read (so they are real
    ``<h2>`` sections in the page's table of contents); their content is filled in when the
    page is written, after every chapter has executed."""

    has_content = False

    def _section(self, key: str, title: str, part: str) -> nodes.section:
        section = nodes.section(ids=[f"status-{key}"], names=[f"status-{key}"])
        section += nodes.title(text=title)
        section += status_placeholder(part=part)
        return section

    def run(self):
        sections = []
        for path in toc_notebook_paths():
            sections.append(self._section(path.stem, f"{chapter_title(path)} ({path.stem})",
                                          path.stem))
        sections.append(self._section("seeds", "Seed sweep", "seeds"))
        sections.append(self._section("prose", "Prose budget", "prose"))
        return sections


def chapter_title(path: Path) -> str:
    """The first level-1 heading of a chapter's source."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def _toc_order() -> list[str]:
    """Chapter stems in the order of ``_toc.yml`` (the reading order)."""
    return [p.stem for p in toc_notebook_paths()]


def _claims_records() -> dict[str, dict]:
    records = {}
    for path in CLAIMS.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        records[record.get("chapter", path.stem)] = record
    return records


def _chapter_status_html(stem: str, record: dict | None, test: dict | None) -> str:
    """One chapter: the run's line, and its claims table collapsed under a one-line summary.

    The table is whatever ``nnapprox.claims.claims_html`` returns, wrapped, not parsed."""
    from nnapprox.claims import claims_html, summary

    if record is None:
        return ("<p>No claims record: this chapter has not run on this machine "
                f"(<code>make chapter NAME={html.escape(stem)}</code>).</p>")
    claims = record.get("claims", [])
    test_line = (
        f"; test harness: {test['wall_seconds']:.1f} s wall on "
        f"{test['profile']}/{test['device']}, {'passed' if test['ok'] else 'FAILED'}"
        if test else ""
    )
    failing = any(not c.get("passed") for c in claims)
    return (
        f"<p>Profile <b>{html.escape(str(record.get('profile', '?')))}</b>, "
        f"device <b>{html.escape(str(record.get('device', '?')))}</b>, "
        f"seed {html.escape(str(record.get('seed', '?')))}, "
        f"{float(record.get('seconds', 0)):.1f} s of execution "
        f"(finished {html.escape(str(record.get('finished', '?')))})"
        f"{html.escape(test_line)}.</p>"
        f'<details class="nnapprox-status-claims"{" open" if failing else ""}>'
        f"<summary>Claims: {html.escape(summary(claims))}</summary>"
        f'<div class="nnapprox-scroll">{claims_html(claims)}</div></details>'
    )


def _status_part(part: str) -> nodes.Node:
    if part == "seeds":
        html_text = _seeds_html(_toc_order())
    elif part == "prose":
        html_text = _prose_html()
    else:
        harness = {}
        if (REPORTS / "chapters.json").exists():
            rows = json.loads((REPORTS / "chapters.json").read_text())
            harness = {r["chapter"]: r for r in rows}
        html_text = _chapter_status_html(part, _claims_records().get(part), harness.get(part))
    return nodes.raw("", html_text, format="html")


def _prose_html() -> str:
    """The prose meter's table (``make prose``), or a sentence saying how to produce it."""
    path = REPORTS / "prose.json"
    if not path.exists():
        return ("<p>No prose report in this build: <code>make prose</code> counts each "
                "chapter's main-text words and the share of them about checking.</p>")
    data = json.loads(path.read_text())
    budget = data.get("budget", {})
    words, share = budget.get("words", 5000), budget.get("checking_share", 0.05)
    rows = []
    for c in data.get("chapters", []):
        over = "; ".join(c.get("over_budget", [])) or "within"
        cls = "nnapprox-fail" if c.get("over_budget") else "nnapprox-pass"
        rows.append(
            f"<tr><td>{html.escape(c['chapter'])}</td><td>{c['words']:,}</td>"
            f"<td>{c['checking_share']:.1%}</td><td>{c.get('unglued_decimals', '')}</td>"
            f'<td class="{cls}">{html.escape(over)}</td></tr>'
        )
    return (
        f"<p>Main-text words per chapter (budget {words:,}) and the share of them in sentences "
        f"about checking (budget {share:.0%}), written {html.escape(data.get('written', '?'))} "
        "by <code>make prose</code>; the rules are in <code>tests/prose.py</code>.</p>"
        '<div class="nnapprox-scroll"><table class="table nnapprox-status"><thead><tr>'
        "<th>chapter</th><th>words</th><th>checking share</th><th>unglued decimals</th>"
        f"<th>budget</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _seeds_html(order: list[str]) -> str:
    """The seed sweep's table (``make seeds``), or a sentence saying how to produce it."""
    path = REPORTS / "seeds.json"
    if not path.exists():
        return ("<p>No seed sweep on this machine yet: <code>make seeds</code> runs "
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
            details.append(f"<li>{html.escape(stem)}: {html.escape(c['name'])} held on "
                           f"{c['passed']}/{c['runs']} seeds (failed on "
                           f"{', '.join(map(str, c['failed_seeds']))})</li>")
    fails = f"<p>Claims that failed on some seed:</p><ul>{''.join(details)}</ul>" if details else (
        "<p>Every claim held on every seed of the sweep.</p>")
    return (
        f"<p>Quick profile on the CPU, written {html.escape(sweep.get('written', '?'))}; "
        "per claim pass rates and worst margins are in <code>_build/reports/seeds.md</code>.</p>"
        '<div class="nnapprox-scroll"><table class="table nnapprox-status"><thead><tr>'
        "<th>chapter</th><th>seeds</th><th>all claims hold on</th><th>slowest run (s)</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{fails}"
    )


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}" if x == 0 or 1e-3 <= abs(x) < 1e5 else f"{x:.3e}"
    return str(x)


def _on_doctree_resolved(app: Sphinx, doctree, docname: str) -> None:
    for node in list(doctree.findall(status_placeholder)):
        node.replace_self(_status_part(node["part"]))
    for node in list(doctree.findall(profile_placeholder)):
        status_uri = app.builder.get_relative_uri(docname, node["status"]) if app.builder.format == "html" else ""
        node.replace_self(profile_paragraph(_claims_records(), _toc_order(), status_uri))
    for node in list(doctree.findall(graph_placeholder)):
        node.replace_self(nodes.raw("", chapter_graph_svg(docname), format="html"))


def _on_env_get_outdated(app, env, added, changed, removed):
    # the status page and the front page reflect the latest run: re-read and re-write them on every build
    return [d for d in env.found_docs if d.endswith("status") or d == app.config.root_doc] if env.found_docs else []


# --------------------------------------------------------------------------- 7. the profile readers see
class profile_placeholder(nodes.General, nodes.Element):
    """Filled when the page is written, from the claims records of the chapters."""


class ProfileDirective(SphinxDirective):
    """``{nnapprox-profile}``: which profile and device the chapters of this build ran at."""

    def run(self):
        return [profile_placeholder(status=_status_docname(self.env))]


def _status_docname(env) -> str:
    return next((d for d in sorted(env.found_docs) if d.endswith("status")), "status")


def profile_paragraph(records: dict[str, dict], order: list[str], status_uri: str = "") -> nodes.paragraph:
    """One paragraph: the profile and device of each chapter's run, grouped, and the status link."""
    runs: dict[tuple[str, str], list[str]] = {}
    for stem in order:
        record = records.get(stem)
        if record is not None:
            runs.setdefault((str(record.get("profile", "?")), str(record.get("device", "?"))), []).append(stem)
    para = nodes.paragraph(classes=["nnapprox-profile"])
    para += nodes.strong(text="Which runs you are reading. ")
    if not runs:
        para += nodes.Text("No chapter of this copy has run yet, so it shows no results.")
    elif len(runs) == 1:
        (profile, device), stems = next(iter(runs.items()))
        every = "every chapter" if len(stems) == len(order) else f"{len(stems)} of {len(order)} chapters"
        scale = {"quick": " (scaled down to run on a CPU in minutes, so its numbers are smaller than the papers')",
                 "full": " (the papers' scale where affordable)"}.get(profile.split(" ")[0], "")
        para += nodes.Text(f"This copy shows {every} run at the {profile} profile on {device}{scale}. ")
    else:
        parts = [f"{profile} on {device}: {', '.join(stems)}" for (profile, device), stems in runs.items()]
        para += nodes.Text("The chapters of this copy ran at different profiles (" + "; ".join(parts) + "). ")
    if runs:
        para += nodes.Text("Whether each chapter's claims hold is on the ")
        para += nodes.reference("", "status page", refuri=status_uri or "status.html")
        para += nodes.Text(".")
    return para


# --------------------------------------------------------------------------- 5. chapter graph
# Which chapter builds on which (hand-written; the nodes and their order come from _toc.yml).
# An edge (a, b) means: read a before b.
CHAPTER_EDGES = [
    ("intro", "universal"), ("intro", "icl"), ("intro", "diffusion"),
    ("universal", "depth"), ("universal", "scaling"), ("depth", "failures"),
    ("icl", "sequential"), ("scaling", "sequential"),
    ("depth", "algorithms"), ("icl", "algorithms"), ("failures", "algorithms"),
]
CHAPTER_LABELS = {
    "intro": "Introduction", "universal": "Universality", "depth": "Depth",
    "icl": "In-context learning", "diffusion": "Diffusion as VI",
    "sequential": "Sequential decisions", "scaling": "Scaling laws", "failures": "When GD fails",
    "algorithms": "Functions vs algorithms",
}
PART_COLOURS = ("#dbe9f6", "#e3f1de", "#fbe9d4", "#efe2f3", "#f5f0c8")


class graph_placeholder(nodes.General, nodes.Element):
    pass


class ChapterGraphDirective(SphinxDirective):
    """``{nnapprox-chapter-graph}``: a figure of the chapters and what each builds on, drawn
    as inline SVG when the page is written; the directive's content is the caption."""

    has_content = True

    def run(self):
        figure = nodes.figure(classes=["nnapprox-chapter-graph"])
        figure += graph_placeholder()
        if self.content:
            holder = nodes.Element()
            self.state.nested_parse(self.content, self.content_offset, holder)
            first = holder.children[0] if holder.children else None
            if isinstance(first, nodes.paragraph):
                figure += nodes.caption(first.rawsource, "", *first.children)
        return [figure]


def _toc_parts(root: Path = ROOT) -> dict[str, int]:
    """Chapter stem -> index of its part in ``_toc.yml``."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text()) or {}
    parts = {}
    for i, part in enumerate(toc.get("parts", [])):
        for entry in part.get("chapters", []) or []:
            if "file" in entry:
                parts[Path(entry["file"]).name] = i
    return parts


def chapter_graph_svg(docname: str, edges=None) -> str:
    """The chapters of ``_toc.yml`` in layers (a chapter sits one row below the lowest
    chapter it builds on), with an arrow for every edge and a link to every chapter."""
    paths = {p.stem: p for p in toc_notebook_paths()}
    order = list(paths)
    edges = [(a, b) for a, b in (edges or CHAPTER_EDGES) if a in paths and b in paths]
    layer = {stem: 0 for stem in order}
    for _ in order:  # longest path from a chapter that builds on none
        for a, b in edges:
            layer[b] = max(layer[b], layer[a] + 1)
    rows: dict[int, list[str]] = {}
    for stem in order:
        rows.setdefault(layer[stem], []).append(stem)
    part_of = _toc_parts()
    n_cols = max(len(stems) for stems in rows.values())
    width, box_w, box_h, gap_y = 200 * n_cols, 164, 40, 40
    col_x = [width * (c + 0.5) / n_cols for c in range(n_cols)]
    pos: dict[str, tuple[float, float]] = {}
    for r in sorted(rows):
        def wish(s):  # the mean position of the chapters it builds on
            xs = [pos[a][0] for a, b in edges if b == s and a in pos]
            return sum(xs) / len(xs) if xs else width / 2
        stems = sorted(rows[r], key=lambda s: (wish(s), order.index(s)))
        cols = min(itertools.combinations(range(n_cols), len(stems)),
                   key=lambda cs: sum(abs(col_x[c] - wish(s)) for c, s in zip(cs, stems)))
        for c, stem in zip(cols, stems):
            pos[stem] = (col_x[c], 12 + r * (box_h + gap_y))
    height = 12 + len(rows) * (box_h + gap_y) - gap_y + 12
    prefix = "../" * docname.count("/")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        'class="nnapprox-graph" aria-label="Chapters and what each builds on">',
        '<defs><marker id="nnapprox-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
    ]

    def crosses(points, a, b):
        if any(not 0 <= px <= width for px, _ in points):
            return True
        return any(abs(px - x) < box_w / 2 + 4 and y - 4 < py < y + box_h + 4
                   for s, (x, y) in pos.items() if s not in (a, b) for px, py in points)

    def bezier(p0, p1, p2, p3, n=24):
        return [tuple((1 - t) ** 3 * u0 + 3 * (1 - t) ** 2 * t * u1 + 3 * (1 - t) * t ** 2 * u2
                      + t ** 3 * u3 for u0, u1, u2, u3 in zip(p0, p1, p2, p3))
                for t in (i / n for i in range(n + 1))]

    for a, b in edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        start, end = (xa, ya + box_h), (xb, yb - 2)
        path = f"M {start[0]:.1f} {start[1]:.1f} L {end[0]:.1f} {end[1]:.1f}"
        if crosses(bezier(start, start, end, end), a, b):  # bow into the gap between columns
            for bow in (width / n_cols / 2, -width / n_cols / 2, width / n_cols, -width / n_cols):
                c1 = (start[0] + bow, start[1] + (end[1] - start[1]) / 3)
                c2 = (end[0] + bow, end[1] - (end[1] - start[1]) / 3)
                if not crosses(bezier(start, c1, c2, end), a, b):
                    break
            path = (f"M {start[0]:.1f} {start[1]:.1f} C {c1[0]:.1f} {c1[1]:.1f} "
                    f"{c2[0]:.1f} {c2[1]:.1f} {end[0]:.1f} {end[1]:.1f}")
        out.append(f'<path d="{path}" fill="none" stroke="#555" stroke-width="1.4" '
                   'marker-end="url(#nnapprox-arrow)"/>')
    for stem in order:
        x, y = pos[stem]
        colour = PART_COLOURS[part_of.get(stem, 0) % len(PART_COLOURS)]
        href = prefix + paths[stem].relative_to(ROOT).with_suffix(".html").as_posix()
        label = html.escape(CHAPTER_LABELS.get(stem, stem))
        out.append(
            f'<a href="{href}"><title>{html.escape(chapter_title(paths[stem]))}</title>'
            f'<rect x="{x - box_w / 2:.1f}" y="{y:.1f}" width="{box_w}" height="{box_h}" '
            f'rx="7" fill="{colour}" stroke="#444"/>'
            f'<text x="{x:.1f}" y="{y + box_h / 2 + 5:.1f}" text-anchor="middle" '
            f'font-size="15" font-family="sans-serif" fill="#111">{label}</text></a>'
        )
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------- 4. static assets
def _copy_mathjax(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    import mathjax  # the django-static-mathjax wheel: MathJax 3.2.2 under static/mathjax/es5

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(app.outdir) / "_static" / "mathjax"
    if not (target / "tex-chtml.js").exists():
        shutil.copytree(source, target, dirs_exist_ok=True)


def _cache_dir(app: Sphinx) -> Path:
    cache = Path(app.config.nb_execution_cache_path or (Path(app.outdir).parent / ".jupyter_cache"))
    return cache if cache.is_absolute() else Path(app.confdir) / cache


def executed_notebook(app: Sphinx, path: Path):
    """The chapter with the outputs of its execution in the book's jupyter-cache, or ``None``.

    (myst-nb's own copy under ``_build/jupyter_execute`` lacks the outputs when they come
    from the cache: it writes the notebook it read, not the merged one.)"""
    import jupytext
    from jupyter_cache import get_cache

    cache = _cache_dir(app)
    if not cache.exists():
        return None
    try:
        _, merged = get_cache(str(cache)).merge_match_into_notebook(jupytext.read(path))
    except KeyError:
        return None
    return merged


def publish_notebook(notebook, target: Path, repository_url: str) -> Path:
    """Write an executed notebook, outputs included, with the install cell first."""
    import nbformat

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from export_notebooks import install_cell

    notebook.metadata.pop("jupytext", None)
    notebook.cells.insert(0, install_cell(repository_url))
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def _publish_notebooks(app: Sphinx) -> None:
    """Put each chapter's executed notebook (with outputs and the install cell) under the
    site's ``_notebooks/``, where the download link and the Colab button point. A chapter
    with no execution in the cache falls back on the plain export of ``make notebooks``
    (no outputs)."""
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / "_notebooks"
    repository_url = _repository_url(app)
    for path in toc_notebook_paths():
        notebook = executed_notebook(app, path)
        if notebook is not None:
            publish_notebook(notebook, target / f"{path.stem}.ipynb", repository_url)
        elif (NOTEBOOKS / f"{path.stem}.ipynb").exists():
            target.mkdir(exist_ok=True)
            shutil.copy2(NOTEBOOKS / f"{path.stem}.ipynb", target / f"{path.stem}.ipynb")
            logger.info(f"[nnapprox] {path.stem}: no execution in the cache, the download has "
                        "no outputs")


def _repository_url(app: Sphinx) -> str:
    return app.config.html_theme_options.get("repository_url", "") or ""


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
    """Point a download button and the Colab button of chapter pages at the executed
    notebook that ``_publish_notebooks`` puts under ``_notebooks/``."""
    _dedupe_scripts(context)
    stem = Path(pagename).name
    if pagename not in _notebook_docnames():
        return
    rel = "../" * pagename.count("/") + f"_notebooks/{stem}.ipynb"
    buttons = context.get("header_buttons")
    if buttons is None:
        return
    repo = _repository_url(app).replace("https://github.com/", "").rstrip("/")
    branch = app.config.nnapprox_notebooks_branch
    ours = {"type": "link", "url": rel, "text": ".ipynb",
            "tooltip": "Download the executed notebook (runs anywhere: its first cell installs "
                       "nnapprox)", "icon": "fas fa-code", "label": "download-notebook-button"}
    for group in buttons:
        if group.get("label") == "Download this page" or group.get("type") == "group" and any(
            "download" in str(b.get("label", "")).lower() for b in group.get("buttons", [])
        ):
            # one notebook download: ours replaces the theme's (no install cell) where it is
            items = group.setdefault("buttons", [])
            at = next((i for i, b in enumerate(items)
                       if b.get("label") == "download-notebook-button"), None)
            if at is None:
                items.insert(0, ours)
            else:
                items[at] = {**items[at], **ours}
        for b in group.get("buttons", []):
            if "colab" in str(b.get("label", "")).lower() or "colab" in str(b.get("url", "")).lower():
                b["url"] = (f"https://colab.research.google.com/github/{repo}/blob/{branch}/"
                            f"_notebooks/{stem}.ipynb")


def _notebook_docnames() -> set[str]:
    return {p.relative_to(ROOT).with_suffix("").as_posix() for p in toc_notebook_paths()}


def _add_static(app: Sphinx) -> None:
    app.config.html_static_path.append(str(Path(__file__).resolve().parent / "static"))


def setup(app: Sphinx):
    app.add_config_value("nnapprox_execution_key", "", "env")
    # the branch of the repository that holds the published site (_notebooks/ for Colab)
    app.add_config_value("nnapprox_notebooks_branch", "gh-pages", "html")
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
    app.add_node(graph_placeholder, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("nnapprox-chapter-graph", ChapterGraphDirective)
    app.add_node(profile_placeholder, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("nnapprox-profile", ProfileDirective)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
