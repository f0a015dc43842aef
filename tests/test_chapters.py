"""Every notebook listed in ``_toc.yml`` is executed with papermill as a test.

Quick profile, CPU, in a fresh kernel with a timeout. A chapter fails on any error, on a
failed claim, when it records no claim, and when it shows no figure. Wall time per chapter
is measured and reported in ``_build/reports/chapters.{json,md}`` against the 150 s quick
budget.

The seed is each chapter's default (0) so that the executions also fill the book's cache
and the book test does not run every chapter a second time; ``NNAPPROX_TEST_SEED=3 make
test`` checks the claims under another seed (the book then executes with its own).
"""

import json
import os
import subprocess
import sys
import time

import pytest

import harness
import lock

SEED = int(os.environ.get("NNAPPROX_TEST_SEED", "0"))
CHAPTERS = harness.toc_notebooks()
FIXTURES = harness.ROOT / "tests" / "fixtures"


@pytest.mark.chapter
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter(path):
    result = harness.run_chapter(path, profile="quick", device="cpu", seed=SEED)
    harness.write_reports([result])
    print(harness.progress_line(result))
    if result.wall_seconds > result.budget:
        print(f"WARNING: {result.chapter} took {result.wall_seconds:.0f} s, over its {result.budget:.0f} s budget")
    assert result.ok, f"{path.name}: {result.error}"
    assert result.claims_total > 0 and result.claims_passed == result.claims_total
    assert result.figures > 0, f"{path.name}: the executed chapter contains no figure"
    record = json.loads((harness.CLAIMS / f"{path.stem}.json").read_text())
    lock.assert_matches(path.stem, record)  # the claims are the frozen design of book/claims.lock


def test_toc_lists_the_introduction_and_chapters():
    stems = [p.stem for p in CHAPTERS]
    assert "intro" in stems
    assert all(harness.is_notebook(p) for p in CHAPTERS)


@pytest.mark.chapter
@pytest.mark.parametrize(
    "params, message",
    [({"profile": "fast"}, "valid profiles are 'auto', 'quick', 'full'"),
     ({"device": "tpu"}, "valid devices are 'auto', 'cpu', 'cuda', 'mps'"),
     ({"seed": -3}, "seed must be a non-negative integer")],
)
def test_invalid_parameters_fail_fast_with_a_clear_message(params, message, tmp_path):
    """Bad parameters injected by papermill stop the chapter in its setup cell, before any work."""
    intro = harness.find_chapter("intro")
    start = time.perf_counter()
    result = harness.run_chapter(intro, **{"profile": "quick", "device": "cpu", "seed": 0, **params}, work_dir=tmp_path)
    elapsed = time.perf_counter() - start
    assert not result.ok
    assert "ValueError" in result.error and message in result.error
    assert result.claims_total == 0
    assert elapsed < 60, f"failing fast took {elapsed:.0f} s"


@pytest.mark.chapter
def test_a_false_claim_fails_the_chapter_and_a_true_one_passes(tmp_path):
    bad = harness.run_chapter(FIXTURES / "false_claim.md", seed=0, work_dir=tmp_path)
    assert not bad.ok and "ClaimError" in bad.error
    assert (bad.claims_passed, bad.claims_total) == (0, 1)
    good = harness.run_chapter(FIXTURES / "false_claim.md", seed=0, parameters={"claim_holds": True}, work_dir=tmp_path)
    assert good.ok, good.error
    assert (good.claims_passed, good.claims_total) == (1, 1)
    # every code cell of the run is timed (parameters, papermill's injected cell, the two below)
    assert len(good.slowest_cells) == 4 and not any(c["running"] for c in good.slowest_cells)
    assert all(c["seconds"] >= 0 for c in good.slowest_cells)
    assert {c["section"] for c in good.slowest_cells} == {"A chapter with a deliberately false claim (test fixture)"}


@pytest.mark.chapter
def test_a_timed_out_chapter_names_the_cell_that_was_running(tmp_path):
    start = time.perf_counter()
    result = harness.run_chapter(FIXTURES / "slow_cell.md", seed=0, timeout=25, work_dir=tmp_path)
    assert time.perf_counter() - start < 60  # the kernel is killed with papermill, not waited for
    assert not result.ok and "timed out after 25 s" in result.error
    slowest = result.slowest_cells[0]
    assert slowest["running"] and slowest["section"] == "The slow section"
    assert 5 < slowest["seconds"] <= 26
    assert "The slow section (cell" in harness.format_cells(result.slowest_cells)


@pytest.mark.chapter
def test_a_chapter_without_claims_fails(tmp_path):
    result = harness.run_chapter(FIXTURES / "no_claims.md", seed=0, work_dir=tmp_path)
    assert not result.ok and "recorded no claim" in result.error


@pytest.mark.chapter
def test_a_hanging_cell_fails_quickly_and_is_named(tmp_path):
    start = time.perf_counter()
    result = harness.run_chapter(FIXTURES / "slow_cell.md", seed=0, timeout=300, cell_timeout=6, work_dir=tmp_path)
    assert time.perf_counter() - start < 60
    assert not result.ok and "per-cell timeout of 6 s: The slow section (cell" in result.error


def test_cell_timings_read_papermill_metadata_and_the_running_cell():
    from datetime import datetime, timezone

    md = lambda text: {"cell_type": "markdown", "source": text, "metadata": {}}
    code = lambda meta: {"cell_type": "code", "source": "x = 1", "metadata": {"papermill": meta}}
    cells = [code({"duration": 0.5, "status": "completed"}),
             md("## 1. Fast\nsome text"), code({"duration": 2.0, "status": "completed"}),
             md("text without a heading"), code({"duration": 7.25, "status": "completed"}),
             md("# Part\n## 2. Slow"), code({"status": "running", "start_time": "2026-01-01T00:00:00.000000Z"}),
             code({"status": "pending"})]
    rows = harness.cell_timings(cells, now=datetime(2026, 1, 1, 0, 1, 40, tzinfo=timezone.utc))
    assert [(r["cell"], r["section"], r["seconds"], r["running"]) for r in rows] == [
        (6, "2. Slow", 100.0, True), (4, "1. Fast", 7.25, False), (2, "1. Fast", 2.0, False),
        (0, "(before the first heading)", 0.5, False)]
    assert harness.format_cells(rows, limit=2) == "2. Slow (cell 6, still running) 100 s; 1. Fast (cell 4) 7 s"


@pytest.mark.chapter
def test_an_explorer_under_plain_papermill_is_drawn_once_and_never_waits(tmp_path):
    """Run as a reader would, with papermill and no NNAPPROX_STATIC: the explorer must not
    start a live ``interact`` (nobody answers it) but draw its figure once, quickly."""
    import jupytext

    source, out = tmp_path / "explorer.ipynb", tmp_path / "explorer.out.ipynb"
    jupytext.write(jupytext.read(FIXTURES / "explorer.md"), source, fmt="ipynb")
    env = {k: v for k, v in os.environ.items() if k != "NNAPPROX_STATIC"}
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", str(source), str(out), "--kernel", "python3",
         "--no-progress-bar", "--execution-timeout", "60"],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.perf_counter() - start < 120
    outputs = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])]
    text = "".join("".join(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
    assert "drawn with k=2, static=True" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
