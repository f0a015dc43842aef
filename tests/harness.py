"""Chapter test harness: execute chapters with papermill and collect their claims.

Used by ``tests/test_chapters.py`` (one test per notebook in ``_toc.yml``) and by
``make chapter NAME=... PROFILE=...``. From the repository root::

    python tests/harness.py                       # every chapter, quick profile, CPU
    python tests/harness.py intro --profile full --device cuda
    python tests/harness.py icl --profile full --set gpt_steps=30 --set relu_steps=60   # smoke run
    python tests/harness.py --jobs 2                  # two chapters at a time, one thread each
    python tests/harness.py --book --jobs 2           # what the book executes, into its cache
    python tests/harness.py --profile full --device cuda --executor slurm --gpus 1 --time-min 60

Each chapter (a MyST-Markdown notebook) is converted to ``.ipynb`` with jupytext, executed
by papermill in a fresh kernel with the parameters ``profile``, ``device`` and ``seed``,
and must write its claims record ``_build/reports/claims/<stem>.json``. The executed
notebooks are kept in ``_build/executed/``; a summary goes to
``_build/reports/chapters.json`` and ``_build/reports/chapters.md``.

When a run uses exactly the parameters the book would use on this machine (the chapter's
defaults: ``profile="auto"`` and ``device="auto"`` resolved here, its default ``seed``), the
executed notebook is also stored in the book's execution cache, so a following
``jupyter-book build`` does not execute that chapter again (see :func:`prime_cache`).

Several chapters run at once with ``--jobs N`` (each gets ``OMP_NUM_THREADS`` = cores / N),
or as one Slurm job each with ``--executor slurm`` (through submitit; the repository must be
on a file system the cluster's nodes share). Either way the process that started them
collects the results, stores the book's runs in the execution cache and writes the reports,
exactly as a serial run does.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
EXECUTED = BUILD / "executed"
REPORTS = BUILD / "reports"
CLAIMS = REPORTS / "claims"
SMOKE = BUILD / "smoke"  # runs with changed settings (--set): kept apart from the book's records
QUICK_BUDGET_S = 150.0  # per chapter, quick profile, 2-core CPU (DEVELOPERS.md)
FULL_BUDGET_S = 600.0  # per chapter, full profile, one H100


@dataclass
class ChapterResult:
    chapter: str
    source: str
    profile: str
    device: str
    seed: int
    ok: bool = False
    wall_seconds: float = 0.0
    claims_passed: int = 0
    claims_total: int = 0
    error: str = ""
    failed_claims: list[str] = field(default_factory=list)
    figures: int = 0
    changed: dict = field(default_factory=dict)
    primed: bool = False
    executed: str = ""
    slowest_cells: list[dict] = field(default_factory=list)
    book_run: bool = False  # the run the book would make on the machine that ran it (see prime_cache)

    @property
    def budget(self) -> float:
        return QUICK_BUDGET_S if self.profile == "quick" else FULL_BUDGET_S


# --------------------------------------------------------------------------- toc
def _toc_files(entries: list) -> list[str]:
    files: list[str] = []
    for entry in entries or []:
        if "file" in entry:
            files.append(entry["file"])
        for key in ("parts", "chapters", "sections"):
            files.extend(_toc_files(entry.get(key, [])))
    return files


def toc_files(root: Path = ROOT) -> list[Path]:
    """Every file listed in ``_toc.yml``, in book order, as a path with its suffix."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [toc["root"], *_toc_files(toc.get("parts", [])), *_toc_files(toc.get("chapters", []))]
    paths = []
    for name in names:
        candidates = [root / name] if Path(name).suffix else [root / f"{name}{s}" for s in (".md", ".ipynb")]
        found = [p for p in candidates if p.exists()]
        if not found:
            raise FileNotFoundError(f"_toc.yml lists {name!r} but no such file exists")
        paths.append(found[0])
    return paths


def is_notebook(path: Path) -> bool:
    """An ``.ipynb``, or a Markdown file whose front matter declares a kernel (jupytext/MyST-NB)."""
    if path.suffix == ".ipynb":
        return True
    text = path.read_text()
    if not text.startswith("---"):
        return False
    front = yaml.safe_load(text.split("---", 2)[1]) or {}
    return "kernelspec" in front


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    return [p for p in toc_files(root) if is_notebook(p)]


def find_chapter(name: str, root: Path = ROOT) -> Path:
    """A chapter of ``_toc.yml`` by stem or path, or a notebook file given by its path (a draft)."""
    direct = (root / name).resolve()
    if direct.is_file() and is_notebook(direct):
        return direct
    for path in toc_notebooks(root):
        if name in (path.stem, str(path.relative_to(root)), str(path.relative_to(root).with_suffix(""))):
            return path
    valid = ", ".join(p.stem for p in toc_notebooks(root))
    raise SystemExit(f"unknown chapter {name!r}: chapters in _toc.yml are {valid}")


# --------------------------------------------------------------------------- run
def sharing(threads: int | None = None) -> int:
    """How many runs share the cores: xdist's workers, or cores / ``threads`` (at least 1).

    The quick budget is measured with the machine to one chapter; a chapter that shares it
    is slower by about this factor, so its hang guard (the default timeout) grows with it.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    by_threads = (os.cpu_count() or 1) // max(1, int(threads)) if threads else 1
    return max(1, workers, by_threads)


def run_chapter(
    path: Path,
    *,
    profile: str = "quick",
    device: str = "cpu",
    seed: int = 0,
    timeout: float | None = None,
    cell_timeout: float | None = None,
    parameters: dict | None = None,
    settings: dict | None = None,
    work_dir: Path | None = None,
    prime_book_cache: bool = True,
    threads: int | None = None,
) -> ChapterResult:
    """Execute one chapter in a fresh kernel and read back its claims record.

    ``settings`` replaces settings of the chosen profile (through ``NNAPPROX_SETTINGS``, see
    :mod:`nnapprox.runtime`): a smoke run, e.g. the full profile with its step counts cut to
    exercise its code paths on a CPU. It never primes the book's cache, and the command line
    puts its notebook and claims record in ``_build/smoke`` instead of the book's reports.

    ``timeout`` bounds the whole chapter (default twice the profile's budget, times the number
    of runs sharing the machine's cores: pytest-xdist's workers, or cores / ``threads``) and
    ``cell_timeout`` each cell (default: the chapter's timeout): a cell that hangs, e.g. a
    widget waiting for a front end, fails the run within that time, and the error names it.

    Executed notebooks go to ``_build/executed`` and claims to ``_build/reports/claims``,
    or both to ``work_dir`` when given (tests of failure modes use a temporary one so the
    book's records are not overwritten).

    ``threads`` sets ``OMP_NUM_THREADS`` (and MKL's) for the chapter's kernel, so that
    chapters running side by side do not oversubscribe the cores.
    """
    import jupytext

    stem = path.stem
    result = ChapterResult(stem, str(path.relative_to(ROOT)), profile, device, seed, changed=dict(settings or {}))
    executed = Path(work_dir) if work_dir else EXECUTED
    claims_dir = Path(work_dir) if work_dir else CLAIMS
    executed.mkdir(parents=True, exist_ok=True)
    claims_dir.mkdir(parents=True, exist_ok=True)
    source_nb = executed / f"{stem}.input.ipynb"
    out_nb = executed / f"{stem}.ipynb"
    record_path = claims_dir / f"{stem}.json"
    record_path.unlink(missing_ok=True)
    out_nb.unlink(missing_ok=True)  # figures and cell times must come from this run only

    notebook = jupytext.read(path)
    if not any("parameters" in c.metadata.get("tags", []) for c in notebook.cells if c.cell_type == "code"):
        result.error = "no code cell is tagged 'parameters': papermill could not set profile/device/seed"
        return result
    notebook.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    jupytext.write(notebook, source_nb, fmt="ipynb")

    params = {"profile": profile, "device": device, "seed": seed, **(parameters or {})}
    limit = timeout if timeout is not None else 2 * result.budget * sharing(threads)
    cell_limit = cell_timeout if cell_timeout is not None else limit
    cmd = [sys.executable, "-m", "papermill", str(source_nb), str(out_nb), "--cwd", str(path.parent),
           "--kernel", "python3", "--no-progress-bar", "--start-timeout", "180",  # busy machines
           "--execution-timeout", str(int(cell_limit)), "--log-output" if os.environ.get("NNAPPROX_LOG_OUTPUT") else "--no-log-output"]
    for key, value in params.items():
        cmd += ["-y", json.dumps({key: value})]
    env = {**os.environ, "NNAPPROX_CLAIMS_DIR": str(claims_dir), "NNAPPROX_STATIC": "1",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline",  # figures into the notebook
           "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "ignore::DeprecationWarning")}
    env.pop("NNAPPROX_SETTINGS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(int(threads))
    if settings:
        env["NNAPPROX_SETTINGS"] = json.dumps(settings)
    start = time.perf_counter()
    # papermill runs in its own process group, so that a timeout (or Ctrl-C) also stops its
    # kernel: killing papermill alone would leave the kernel computing in the background.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=limit)
        result.wall_seconds = time.perf_counter() - start
        if proc.returncode != 0:
            result.error = _papermill_error(stderr, out_nb)
            if "timed out" in stderr and out_nb.exists():
                cells = json.loads(out_nb.read_text()).get("cells", [])
                failed = {i for i, c in enumerate(cells)
                          if any(o.get("output_type") == "error" for o in c.get("outputs", []))}
                where = [r for r in cell_timings(cells) if r["running"] or r["cell"] in failed]
                result.error = (f"a cell ran past the per-cell timeout of {cell_limit:.0f} s: "
                                f"{format_cells(where, 1) if where else 'see the executed notebook'}")
    except subprocess.TimeoutExpired:
        result.wall_seconds = time.perf_counter() - start
        result.error = f"timed out after {limit:.0f} s (budget {result.budget:.0f} s)"
    finally:
        if proc.poll() is None or result.error:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
    result.executed = str(out_nb) if out_nb.exists() else ""
    if out_nb.exists():
        cells = json.loads(out_nb.read_text()).get("cells", [])
        result.figures = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        result.slowest_cells = cell_timings(cells)[:SLOWEST_CELLS]

    if record_path.exists():
        record = json.loads(record_path.read_text())
        claims = record.get("claims", [])
        result.claims_total = len(claims)
        result.claims_passed = sum(bool(c.get("passed")) for c in claims)
        result.failed_claims = [c["name"] for c in claims if not c.get("passed")]
    elif not result.error:
        result.error = f"the chapter wrote no claims record ({record_path.name}): it must call run.report()"
    if not result.error and result.claims_total == 0:
        result.error = "the chapter recorded no claim"
    if not result.error and result.failed_claims:
        result.error = "failed claims: " + "; ".join(result.failed_claims)
    result.ok = not result.error
    if result.ok and work_dir is None and not parameters and not settings:
        result.book_run = is_book_run(path, profile=profile, device=device, seed=seed)
        if prime_book_cache and result.book_run:
            result.primed = store_in_cache(path, out_nb, seconds=result.wall_seconds)
    return result


def run_chapter_job(source: str, **kwargs) -> dict:
    """:func:`run_chapter` as an executor's job: the chapter by its path, the result as a dict.

    The job never writes the book's execution cache (one SQLite database, which jobs on other
    machines must not write at once): the process that collects the results stores them.
    """
    return asdict(run_chapter(Path(source), prime_book_cache=False, **kwargs))


def run_chapters(
    paths: list[Path],
    *,
    profile: str = "quick",
    device: str = "cpu",
    seed: int = 0,
    seeds: dict[str, int] | None = None,
    jobs: int = 1,
    executor: str = "local",
    cluster=None,
    timeout: float | None = None,
    cell_timeout: float | None = None,
    work_dir: Path | None = None,
    on_result=None,
) -> list[ChapterResult]:
    """Run ``paths`` ``jobs`` at a time (or as Slurm jobs); results in the order of ``paths``.

    Each chapter gets ``OMP_NUM_THREADS`` = cores // jobs locally, or the job's CPUs on a
    cluster. ``seeds`` gives a chapter's own seed by stem (default ``seed``). The book's runs
    are stored in the execution cache here, one at a time, as they finish; ``on_result`` is
    called with each result as it arrives (progress lines).
    """
    from nnapprox import runtime

    runtime.check_executor(executor)
    jobs = runtime.check_jobs(jobs)
    cluster = cluster or runtime.Cluster()
    threads = runtime.threads_per_job(jobs) if executor == "local" else cluster.cpus
    results: list[ChapterResult | None] = [None] * len(paths)
    if not paths:
        return []
    if executor == "local" and jobs == 1:  # the serial path: no pool, same code as before
        stream = ((i, asdict(run_chapter(p, profile=profile, device=device, seed=(seeds or {}).get(p.stem, seed),
                                         timeout=timeout, cell_timeout=cell_timeout, work_dir=work_dir,
                                         prime_book_cache=False, threads=threads)))
                  for i, p in enumerate(paths))
    else:
        calls = [dict(source=str(p), profile=profile, device=device, seed=(seeds or {}).get(p.stem, seed),
                      timeout=timeout, cell_timeout=cell_timeout, threads=threads,
                      work_dir=str(work_dir) if work_dir else None) for p in paths]
        stream = runtime.map_jobs("harness:run_chapter_job", calls, executor=executor, jobs=jobs,
                                  folder=BUILD / "submitit" / "chapters", cluster=cluster, name="nnapprox-chapters",
                                  path=[str(ROOT / "tests")])
    for i, outcome in stream:
        path = paths[i]
        if isinstance(outcome, BaseException):
            r = ChapterResult(path.stem, str(path.relative_to(ROOT)), profile, device,
                              (seeds or {}).get(path.stem, seed), error=f"the job failed: {_last_lines(outcome)}")
        else:
            r = ChapterResult(**{k: v for k, v in outcome.items() if k in ChapterResult.__dataclass_fields__})
        if r.ok and r.book_run and r.executed:
            r.primed = store_in_cache(path, Path(r.executed), seconds=r.wall_seconds)
        results[i] = r
        if on_result:
            on_result(r)
    return results


def _last_lines(error: BaseException, n: int = 6) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return "\n".join(lines[-n:]) or type(error).__name__


@contextlib.contextmanager
def locked(name: str):
    """An exclusive lock on ``_build/.lock-<name>`` for the block: parallel test workers and the
    harness take turns writing the shared reports and the execution cache."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / f".lock-{name}", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- book cache
def _book_extension():
    import importlib.util

    spec = importlib.util.spec_from_file_location("nnapprox_book", ROOT / "book" / "_ext" / "nnapprox_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def default_parameters(path: Path) -> dict:
    """The literal assignments of a chapter's ``parameters`` cell."""
    import ast

    import jupytext

    for cell in jupytext.read(path).cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            values = {}
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    values[node.targets[0].id] = ast.literal_eval(node.value)
            return values
    return {}


def is_book_run(path: Path, *, profile: str, device: str, seed: int) -> bool:
    """Whether a run with these parameters is the run the book makes of ``path`` on this machine.

    The book executes each chapter with its default parameters (``profile="auto"``,
    ``device="auto"``, ``seed`` as written): the run is the same if they resolve to exactly
    ``profile``, ``device`` and ``seed`` here. Evaluated where the chapter ran (a GPU node).
    """
    import nnapprox

    defaults = default_parameters(path)
    try:
        return (nnapprox.resolve_profile(defaults.get("profile", "auto")) == profile
                and str(nnapprox.resolve_device(defaults.get("device", "auto"))) == device
                and defaults.get("seed", 0) == seed)
    except ValueError:
        return False


def book_parameters(path: Path) -> dict:
    """The chapter's default parameters resolved on this machine: what the book runs."""
    import nnapprox

    defaults = default_parameters(path)
    return {"profile": nnapprox.resolve_profile(defaults.get("profile", "auto")),
            "device": str(nnapprox.resolve_device(defaults.get("device", "auto"))),
            "seed": defaults.get("seed", 0)}


def prime_cache(path: Path, executed: Path, *, profile: str, device: str, seed: int, seconds: float) -> bool:
    """Store a papermill execution in the book's execution cache, when it is the same run.

    If this run's parameters are the book's on this machine (:func:`is_book_run`), the
    executed notebook (minus papermill's injected cell) is what the book build would compute,
    so ``jupyter-book build`` can take it from the cache instead of executing the chapter a
    second time. Returns whether the cache was primed.
    """
    if not is_book_run(path, profile=profile, device=device, seed=seed):
        return False
    return store_in_cache(path, executed, seconds=seconds)


def store_in_cache(path: Path, executed: Path, *, seconds: float) -> bool:
    """Put the outputs of the executed notebook into the book's execution cache under the
    chapter's own source (papermill's injected cell left out); ``False`` if the cells differ
    or the book stack is not installed. One writer at a time (:func:`locked`)."""
    import jupytext
    import nbformat

    try:
        from jupyter_cache import get_cache
        from jupyter_cache.base import CacheBundleIn
    except ImportError:  # chapters only (no book stack installed, e.g. a bare GPU box): nothing to prime
        return False

    executed_nb = nbformat.read(executed, as_version=4)
    ran = [c for c in executed_nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    notebook = jupytext.read(path)
    if len(ran) != len(notebook.cells) or any(a.source != b.source for a, b in zip(notebook.cells, ran)):
        return False
    for cell, done in zip(notebook.cells, ran):
        if cell.cell_type == "code":
            cell.outputs = done.get("outputs", [])
            cell.execution_count = done.get("execution_count")
    cache_dir = BUILD / ".jupyter_cache"
    with locked("jupyter-cache"):
        _book_extension().sync_execution_cache(cache_dir)
        cache = get_cache(str(cache_dir))
        cache.cache_notebook_bundle(CacheBundleIn(notebook, str(path), data={"execution_seconds": seconds}),
                                    check_validity=False, overwrite=True)
    return True


def uncached_for_book(paths: list[Path]) -> list[Path]:
    """Those of ``paths`` without an execution in the book's cache for the current library and profile."""
    ext = _book_extension()
    cache_dir = BUILD / ".jupyter_cache"
    with locked("jupyter-cache"):
        ext.sync_execution_cache(cache_dir)
        return ext.uncached_notebooks(cache_dir, paths)


SLOWEST_CELLS = 5


def cell_timings(cells: list[dict], now: datetime | None = None) -> list[dict]:
    """Seconds per code cell of an executed notebook, slowest first, from papermill's metadata.

    Papermill saves the notebook when each cell starts and ends, so even after a timeout
    the notebook says which cell was running and since when: that cell is reported with
    ``"running": True`` and its time up to ``now`` (default: the current time). Each entry:
    ``cell`` (index in the notebook), ``section`` (the last Markdown heading above it),
    ``seconds``, ``running``. This is what tells a GPU run over its budget where to cut.
    """
    now = now or datetime.now(timezone.utc)
    section, rows = "(before the first heading)", []
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "markdown":
            source = "".join(cell.get("source", ""))
            headings = [line.lstrip("#").strip() for line in source.splitlines() if line.startswith("#")]
            section = headings[-1] if headings else section
            continue
        meta = cell.get("metadata", {}).get("papermill", {})
        if meta.get("duration") is not None:
            rows.append({"cell": index, "section": section, "seconds": float(meta["duration"]), "running": False})
        elif meta.get("status") == "running" and meta.get("start_time"):
            started = datetime.fromisoformat(meta["start_time"].replace("Z", "+00:00"))
            if started.tzinfo is None:
                started = started.replace(tzinfo=timezone.utc)
            rows.append({"cell": index, "section": section, "seconds": (now - started).total_seconds(), "running": True})
    return sorted(rows, key=lambda r: -r["seconds"])


def format_cells(rows: list[dict], limit: int = 3) -> str:
    """``"Radial functions (cell 31) 210 s; ..."`` for reports; a running cell says so."""
    return "; ".join(f"{r['section'][:40]} (cell {r['cell']}{', still running' if r['running'] else ''}) "
                     f"{r['seconds']:.0f} s" for r in rows[:limit])


def _papermill_error(stderr: str, out_nb: Path) -> str:
    """The chapter's exception, read from the executed notebook if papermill got that far."""
    if out_nb.exists():
        nb = json.loads(out_nb.read_text())
        for cell in nb.get("cells", []):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    return f"{output.get('ename')}: {output.get('evalue')}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return "\n".join(lines[-15:]) or "papermill failed without a message"


# --------------------------------------------------------------------------- reports
def failure_kind(error: str) -> str:
    """What kind of failure an error message describes: ``claim``, ``device``, ``dtype``,
    ``timeout`` or ``error`` (anything else); ``""`` for no error. The CUDA smoke report
    counts them, since a device or dtype error is a defect of the library, not of a claim."""
    text = error.lower()
    if not text:
        return ""
    if text.startswith("failed claims") or "claimerror" in text:
        return "claim"
    if text.startswith(("timed out after", "a cell ran past")):
        return "timeout"
    if ("same device" in text or "device mismatch" in text or "device type" in text
            or ("cuda" in text and "cpu" in text and "tensor" in text)):
        return "device"
    if "dtype" in text or "scalar type" in text or ("found double" in text or "found float" in text):
        return "dtype"
    return "error"


def write_reports(results: list[ChapterResult], name: str = "chapters") -> None:
    """Merge ``results`` into ``_build/reports/<name>.{json,md}`` (keyed by chapter).

    Parallel test workers each merge their own chapter: the read, merge and write happen
    under a lock, so no result is lost."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    path = REPORTS / f"{name}.json"
    with locked(f"report-{name}"):
        merged: dict[str, dict] = {}
        if path.exists():
            merged = {r["chapter"]: r for r in json.loads(path.read_text())}
        for r in results:
            merged[r.chapter] = {**asdict(r), "budget_seconds": r.budget, "failure": failure_kind(r.error)}
        order = [p.stem for p in toc_notebooks()]
        rows = sorted(merged.values(), key=lambda r: order.index(r["chapter"]) if r["chapter"] in order else 99)
        path.write_text(json.dumps(rows, indent=1) + "\n")
        lines = ["| chapter | profile | device | seed | seconds | budget | claims passed | status | slowest cells |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            over = " (over budget)" if r["wall_seconds"] > r["budget_seconds"] else ""
            kind = r.get("failure") or failure_kind(r["error"])
            status = "ok" if r["ok"] else f"FAILED ({kind}): " + r["error"].splitlines()[0][:120].replace("|", "/")
            profile = r["profile"] + (" (changed: " + ", ".join(f"{k}={v}" for k, v in r.get("changed", {}).items())
                                      + ")" if r.get("changed") else "")
            lines.append(f"| {r['chapter']} | {profile} | {r['device']} | {r['seed']} | "
                         f"{r['wall_seconds']:.1f}{over} | {r['budget_seconds']:.0f} | "
                         f"{r['claims_passed']}/{r['claims_total']} | {status} | "
                         f"{format_cells(r.get('slowest_cells', [])).replace('|', '/')} |")
        (REPORTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def progress_line(r: ChapterResult) -> str:
    status = "ok" if r.ok else "FAILED"
    changed = "".join(f", {k}={v}" for k, v in r.changed.items())
    return (f"{r.chapter:<12} {r.wall_seconds:7.1f} s   claims {r.claims_passed}/{r.claims_total}   "
            f"[{r.profile}{changed}, {r.device}, seed {r.seed}]   {status}")


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    from nnapprox import runtime

    runtime.add_executor_arguments(parser)


def executor_settings(parser: argparse.ArgumentParser, args, device: str = "cpu"):
    from nnapprox import runtime

    return runtime.executor_settings(parser, args, device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapter stems (default: every notebook in _toc.yml)")
    parser.add_argument("--profile", default="quick", help="auto, quick or full (default quick)")
    parser.add_argument("--device", default="cpu", help="auto, cpu, cuda or mps (default cpu)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per chapter (default: 2x budget)")
    parser.add_argument("--cell-timeout", type=float, default=None,
                        help="seconds per cell (default: the chapter's timeout)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="replace one setting of the profile (VALUE read as JSON, else as a string); "
                             "repeatable; a smoke run, e.g. --profile full --set n_steps=50")
    parser.add_argument("--book", action="store_true",
                        help="run what the book executes (each chapter's default parameters resolved here) "
                             "for the chapters without a current execution in the book's cache, and store them")
    parser.add_argument("--report", default="chapters", metavar="NAME",
                        help="write _build/reports/NAME.{json,md}; a name other than 'chapters' keeps its "
                             "executed notebooks and claims in _build/NAME (e.g. cuda-smoke)")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    jobs, executor, cluster = executor_settings(parser, args, args.device)
    if executor != "slurm":  # chapters run here: the device must exist here (a cluster's nodes are checked there)
        import nnapprox

        try:
            nnapprox.resolve_device(args.device)
        except ValueError as error:
            parser.error(str(error))
    if not args.report.replace("-", "").replace("_", "").isalnum():
        parser.error(f"--report takes a plain name such as cuda-smoke, got {args.report!r}")
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--set takes KEY=VALUE, got {item!r}")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    if args.book and (settings or args.report != "chapters" or args.names):
        parser.error("--book runs every chapter with the book's parameters: it takes no chapter names, "
                     "--set or --report")
    paths = [find_chapter(n) for n in args.names] if args.names else toc_notebooks()
    if settings:  # a smoke run: serial, as before, and out of the book's records
        results = []
        for path in paths:
            r = run_chapter(path, profile=args.profile, device=args.device, seed=args.seed, timeout=args.timeout,
                            cell_timeout=args.cell_timeout, settings=settings, work_dir=SMOKE)
            _print_result(r, args.profile)
            results.append(r)
        print(f"smoke run: executed notebooks and claims records in {SMOKE}")
        return 0 if all(r.ok for r in results) else 1
    return run_and_report(paths, args, jobs=jobs, executor=executor, cluster=cluster)


def run_and_report(paths: list[Path], args, *, jobs: int, executor: str, cluster) -> int:
    """The command line's runs (after its checks): ``--book`` or the given profile, then the reports."""
    profile, device, seeds = args.profile, args.device, None
    if args.book:
        require = os.environ.get("NNAPPROX_REQUIRE_CACHE", "0") not in ("", "0")
        params = {p.stem: book_parameters(p) for p in paths}
        kinds = {(v["profile"], v["device"]) for v in params.values()}
        if len(kinds) != 1:
            raise SystemExit(f"the chapters' default profiles/devices differ ({sorted(kinds)}): run them by hand")
        (profile, device), seeds = kinds.pop(), {stem: v["seed"] for stem, v in params.items()}
        cached = set(paths) - set(missing := uncached_for_book(paths))
        if cached:
            print(f"from the book's execution cache (library and sources unchanged): "
                  f"{', '.join(p.stem for p in paths if p in cached)}")
        if missing and require:
            raise SystemExit("NNAPPROX_REQUIRE_CACHE is set, so nothing is executed here, but these chapters have no "
                             f"execution in the cache: {', '.join(p.stem for p in missing)}")
        paths = missing
        if not paths:
            return 0
        print(f"executing for the book ({profile}, {device}), {jobs} at a time: {', '.join(p.stem for p in paths)}",
              flush=True)
    work_dir = None if args.report == "chapters" else BUILD / args.report
    results = run_chapters(paths, profile=profile, device=device, seed=args.seed, seeds=seeds, jobs=jobs,
                           executor=executor, cluster=cluster, timeout=args.timeout, cell_timeout=args.cell_timeout,
                           work_dir=work_dir, on_result=lambda r: _print_result(r, profile))
    if work_dir is not None:  # e.g. the CUDA smoke test: its own records, beside the book's
        for r in results:
            if r.ok and device != "auto":
                ran_on = json.loads((work_dir / f"{r.chapter}.json").read_text()).get("device", "")
                if ran_on.split(":")[0] != device.split(":")[0]:
                    r.ok, r.error = False, f"device mismatch: asked for {device}, the claims record says {ran_on!r}"
    write_reports(results, args.report)
    print(f"reports: {REPORTS / (args.report + '.md')}; executed notebooks: {work_dir or EXECUTED}")
    if args.book and any(r.ok and not r.primed for r in results):
        print("note: not stored in the execution cache (the book will execute these itself): "
              + ", ".join(r.chapter for r in results if r.ok and not r.primed))
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"{len(failed)} of {len(results)} chapters failed: "
              + "; ".join(f"{r.chapter} ({failure_kind(r.error)})" for r in failed))
    return 0 if not failed else 1


def _print_result(r: ChapterResult, profile: str) -> None:
    print(progress_line(r), flush=True)
    if r.error:
        print("    " + r.error.replace("\n", "\n    "), flush=True)
    if r.slowest_cells and (r.error or r.wall_seconds > r.budget or profile != "quick"):
        print("    slowest cells: " + format_cells(r.slowest_cells), flush=True)


if __name__ == "__main__":
    sys.exit(main())
