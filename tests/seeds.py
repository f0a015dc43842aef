"""Seed sweep: every chapter of ``_toc.yml`` at the quick profile on several seeds.

``make seeds SEEDS="0 1 2 3 4 5 6 7 8 9"`` (the default) runs each chapter once per seed,
through the same papermill harness as the tests, and writes

* ``_build/seeds/<chapter>/seed-<s>.json``: one run (its claims record and wall time);
* ``_build/reports/seeds.json`` and ``seeds.md``: per chapter, the share of seeds on which
  every claim held; per claim, its kind, pass rate and *worst margin* over the seeds.

The margin says how far a value sits from its threshold, in units of the threshold, positive
when the claim holds: ``(t - v)/|t|`` for ``<``/``<=``, ``(v - t)/|t|`` for ``>``/``>=``
(absolute differences when ``t = 0``), ``min(v - lo, hi - v)/(hi - lo)`` for ``in``, and
``1 - |v - t|/tol`` for ``==`` with a tolerance. Boolean and exact-equality claims have none.

A run is reused (unless it ended at a time limit) when the chapter's source and the library modules it imports (directly or
through other ``nnapprox`` modules, found statically from the import statements, plus every
data file under the packages it uses) are unchanged since it ran (``--force`` re-runs), so a
sweep interrupted by the end of a session resumes where it stopped, and a change to one
chapter's subpackage does not invalidate the runs of the others. Every empirical claim must hold on every seed: a claim that fails on some seed is a
defect of the claim or of the experiment, never a reason to choose the seed.

On many machines (the weekly CI matrix: one job per chapter and seed block), each job runs its
part and keeps its ``seed-*.json``; ``--merge DIR --report-only`` files them all into
``_build/seeds`` and writes the one report, as if one machine had run them.

``--jobs N`` runs N chapter × seed runs at a time (each with ``OMP_NUM_THREADS`` = cores / N);
``--executor slurm`` submits one Slurm job per run through submitit (the options of
``tests/harness.py``). Each run is written as it ends (atomically), so an interrupted
sweep of either kind resumes where it stopped; the report is the same as a serial sweep's.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import harness
import lock as claims_lock

SWEEP = Path(os.environ.get("NNAPPROX_SWEEP_DIR") or harness.BUILD / "seeds")  # runs kept per chapter and seed
DEFAULT_SEEDS = tuple(range(10))


LIB = harness.ROOT / "lib"


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` (``nnapprox.icl.tasks``) under ``lib/``, if any."""
    base = LIB.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of the ``nnapprox`` modules that ``source`` imports (relative ones resolved)."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "nnapprox"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] != "nnapprox":
                continue
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}  # submodules imported by name
    return found


def chapter_dependencies(path: Path) -> list[Path]:
    """Library files a chapter depends on: the modules it imports, transitively, their packages'
    ``__init__`` files, and the data files (non-Python) of those packages."""
    import jupytext

    code = "\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "code")
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    todo = _imports(code, "__chapter__", False) | {"nnapprox"}
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
            prefix = ".".join(parts[:i])
            file = _module_file(prefix)
            if file is None or prefix in seen:
                continue
            seen[prefix] = file
            todo |= _imports(file.read_text(), prefix, file.name == "__init__.py")
    files = set(seen.values())

    def data(folder: Path, recursive: bool) -> set[Path]:
        found = folder.rglob("*") if recursive else folder.iterdir()
        return {p for p in found if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}

    for name, file in seen.items():
        if file.name == "__init__.py":  # a package's own data (not its subpackages' for the top level)
            files |= data(file.parent, recursive=name != "nnapprox")
        elif file.with_suffix("").is_dir():  # a module's data folder, e.g. checkpoints.py + checkpoints/
            files |= data(file.with_suffix(""), recursive=True)
    return sorted(files)


def source_key(path: Path) -> str:
    """What decides whether a stored run is still valid: the chapter's text and its library files."""
    digest = hashlib.sha256(path.read_bytes())
    for dep in chapter_dependencies(path):
        digest.update(str(dep.relative_to(LIB)).encode())
        digest.update(dep.read_bytes())
    return digest.hexdigest()[:20]


def margin(claim: dict) -> float | None:
    """How far the claim's value is from its threshold (see the module docstring); ``None`` if undefined."""
    value, op, thr = claim.get("value"), claim.get("op"), claim.get("threshold")
    if isinstance(value, bool) or isinstance(thr, bool) or value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(value):
        return -math.inf
    if op == "in":
        lo, hi = (float(x) for x in thr)
        return min(value - lo, hi - value) / (hi - lo) if hi > lo else None
    thr = float(thr)
    scale = abs(thr) if thr != 0 else 1.0
    if op in ("<", "<="):
        return (thr - value) / scale
    if op in (">", ">="):
        return (value - thr) / scale
    tol = claim.get("tol")
    return 1.0 - abs(value - thr) / tol if tol else None


def timed_out(stored: dict) -> bool:
    """Whether a stored run ended at a time limit (chapter or cell) rather than on its claims.

    Such a run says the machine was busy or slow, not that a claim failed, so it is not reused:
    the next sweep runs it again. It still counts as a failing seed in the report it was part of.
    """
    error = stored.get("error") or ""
    return error.startswith(("timed out after", "a cell ran past the per-cell timeout"))


def never_started(run: dict) -> bool:
    """Whether a run ended before its kernel answered (nbclient's start-up time limit on a busy
    machine): no cell of the chapter ran and no claim was computed, so it is no result at all.
    It is not reused, and a validation block runs it again instead of recording it."""
    return not run.get("claims") and "Kernel didn't respond in" in (run.get("error") or "")


def stored_run(path: Path, seed: int, key: str | None = None) -> dict | None:
    """The stored run of ``path`` at ``seed`` if it is still valid: same sources, not timed out."""
    out = SWEEP / path.stem / f"seed-{seed}.json"
    if not out.exists():
        return None
    try:
        stored = json.loads(out.read_text())
    except json.JSONDecodeError:  # cut short by a crash before the atomic write existed
        return None
    if stored.get("key") == (key or source_key(path)) and not timed_out(stored) and not never_started(stored):
        return stored
    return None


def run_one(path: Path, seed: int, *, force: bool = False, threads: int | None = None) -> dict:
    """One chapter at one seed, reused from ``_build/seeds`` when still valid."""
    out = SWEEP / path.stem / f"seed-{seed}.json"
    key = source_key(path)
    if not force and (stored := stored_run(path, seed, key)) is not None:
        return stored
    work = SWEEP / path.stem / f"work-{seed}"
    result = harness.run_chapter(path, profile="quick", device="cpu", seed=seed, work_dir=work,
                                 prime_book_cache=False, threads=threads)
    record_path = work / f"{path.stem}.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {"claims": []}
    stored = {"chapter": path.stem, "seed": seed, "key": key, "ok": result.ok, "error": result.error,
              "wall_seconds": round(result.wall_seconds, 1), "claims": record.get("claims", []),
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(stored, indent=1) + "\n")
    partial.replace(out)  # a run killed mid-write leaves no half-written record
    return stored


def run_one_job(source: str, seed: int, force: bool = False, threads: int | None = None) -> dict:
    """:func:`run_one` as an executor's job (the chapter by its path)."""
    return run_one(Path(source), seed, force=force, threads=threads)


def run_many(pairs: list[tuple[Path, int]], *, force: bool = False, jobs: int = 1, executor: str = "local",
             cluster=None, on_result=None) -> list[dict]:
    """Every ``(chapter, seed)`` of ``pairs``, ``jobs`` at a time or one Slurm job each; stored
    runs that are still valid are taken as they are, without a job. Results in ``pairs`` order."""
    from nnapprox import runtime

    runtime.check_executor(executor)
    jobs = runtime.check_jobs(jobs)
    cluster = cluster or runtime.Cluster()
    threads = runtime.threads_per_job(jobs) if executor == "local" else cluster.cpus
    results: list[dict | None] = [None] * len(pairs)
    todo = []
    for i, (path, seed) in enumerate(pairs):
        stored = None if force else stored_run(path, seed)
        if stored is not None:
            results[i] = stored
            if on_result:
                on_result(stored)
        else:
            todo.append(i)
    if executor == "local" and jobs == 1:
        stream = ((i, run_one(pairs[i][0], pairs[i][1], force=force, threads=threads)) for i in todo)
    else:
        calls = [dict(source=str(pairs[i][0]), seed=pairs[i][1], force=force, threads=threads) for i in todo]
        stream = ((todo[j], r) for j, r in runtime.map_jobs(
            "seeds:run_one_job", calls, executor=executor, jobs=jobs, folder=harness.BUILD / "submitit" / "seeds",
            cluster=cluster, name="nnapprox-seeds", path=[str(harness.ROOT / "tests")]))
    for i, r in stream:
        path, seed = pairs[i]
        if isinstance(r, BaseException):  # the job itself failed (not the chapter): nothing stored, rerun next time
            r = {"chapter": path.stem, "seed": seed, "key": None, "ok": False, "claims": [], "wall_seconds": 0.0,
                 "error": f"the job failed: {harness._last_lines(r)}"}
        results[i] = r
        if on_result:
            on_result(r)
    return results


def _print_run(r: dict) -> None:
    n_ok = sum(bool(c.get("passed")) for c in r["claims"])
    print(f"{r['chapter']:<12} seed {r['seed']:<3} {r['wall_seconds']:7.1f} s   claims {n_ok}/{len(r['claims'])}   "
          f"{'ok' if r['ok'] else 'FAILED: ' + r['error'].splitlines()[0][:150]}", flush=True)


def summarise(runs: list[dict], order: list[str]) -> dict:
    """Per chapter and per claim pass rates and worst margins of a list of runs."""
    chapters = {}
    for stem in order:
        mine = [r for r in runs if r["chapter"] == stem]
        if not mine:
            continue
        claims: dict[str, dict] = {}
        for r in mine:
            for c in r["claims"]:
                entry = claims.setdefault(c["name"], {"name": c["name"], "kind": c.get("kind", "unclassified"),
                                                      "basis": c.get("basis"), "runs": 0, "passed": 0,
                                                      "worst_margin": None, "worst_value": None,
                                                      "worst_seed": None, "threshold": c.get("threshold"),
                                                      "op": c.get("op"), "failed_seeds": []})
                entry["runs"] += 1
                entry["passed"] += bool(c.get("passed"))
                if not c.get("passed"):
                    entry["failed_seeds"].append(r["seed"])
                m = margin(c)
                if m is not None and (entry["worst_margin"] is None or m < entry["worst_margin"]):
                    entry["worst_margin"], entry["worst_value"], entry["worst_seed"] = m, c.get("value"), r["seed"]
        chapters[stem] = {
            "seeds": sorted(r["seed"] for r in mine),
            "seeds_ok": sorted(r["seed"] for r in mine if r["ok"]),
            "errors": {str(r["seed"]): r["error"].splitlines()[0][:200] for r in mine if r["error"]},
            "wall_seconds_max": max(r["wall_seconds"] for r in mine),
            "claims": list(claims.values()),
        }
    return {"profile": "quick", "device": "cpu", "chapters": chapters,
            "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def markdown(summary: dict) -> str:
    lines = ["# Seed sweep (quick profile, CPU)", "",
             "| chapter | seeds | all claims hold on | slowest run (s) |", "|---|---|---|---|"]
    for stem, ch in summary["chapters"].items():
        lines.append(f"| {stem} | {len(ch['seeds'])} | {len(ch['seeds_ok'])}/{len(ch['seeds'])} | "
                     f"{ch['wall_seconds_max']:.0f} |")
    for stem, ch in summary["chapters"].items():
        lines += ["", f"## {stem}", "", "| claim | kind | passed | worst margin (seed) | failed on seeds |",
                  "|---|---|---|---|---|"]
        for c in ch["claims"]:
            worst = "" if c["worst_margin"] is None else f"{c['worst_margin']:+.3g} ({c['worst_seed']})"
            kind = c["kind"] + (f" ({c['basis']})" if c.get("basis") else "")
            lines.append(f"| {c['name'].replace('|', '/')} | {kind} | {c['passed']}/{c['runs']} | {worst} | "
                         f"{', '.join(map(str, c['failed_seeds']))} |")
        for seed, err in ch["errors"].items():
            lines.append(f"\nseed {seed}: {err}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapter stems (default: every notebook in _toc.yml)")
    parser.add_argument("--seeds", default=" ".join(map(str, DEFAULT_SEEDS)),
                        help='seeds, separated by spaces or commas (default "0 1 ... 9"), or '
                             '"validation": the next fresh block of each chapter, once per locked revision')
    parser.add_argument("--force", action="store_true", help="re-run even where a valid run is stored")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: write the report from the stored runs (after --merge)")
    parser.add_argument("--merge", metavar="DIR",
                        help="first file every seed-*.json found under DIR (e.g. the runs of a CI matrix's jobs) "
                             "into _build/seeds by its chapter and seed")
    harness.add_executor_arguments(parser)
    args = parser.parse_args(argv)
    jobs, executor, cluster = harness.executor_settings(parser, args)
    if args.merge and not Path(args.merge).is_dir():
        parser.error(f"--merge takes a folder of seed-*.json runs, got {args.merge!r}")
    if args.merge:
        print(f"merged {merge(Path(args.merge))} runs from {args.merge} into {SWEEP}")
    if args.report_only:
        paths = [harness.find_chapter(n) for n in args.names] if args.names else harness.toc_notebooks()
        order = [p.stem for p in harness.toc_notebooks()]
        return write_report(paths, order + [p.stem for p in paths if p.stem not in order])
    if args.seeds.strip() == "validation":
        if args.force:
            parser.error("--force does not apply to validation seeds: each revision runs once")
        paths = [harness.find_chapter(n) for n in args.names] if args.names else harness.toc_notebooks()
        return validate(paths, jobs=jobs, executor=executor, cluster=cluster)
    try:
        seeds = [int(s) for s in args.seeds.replace(",", " ").split()]
    except ValueError:
        parser.error(f"--seeds takes non-negative integers separated by spaces, got {args.seeds!r}")
    if not seeds or any(s < 0 for s in seeds):
        parser.error(f"--seeds takes non-negative integers separated by spaces, got {args.seeds!r}")
    paths = [harness.find_chapter(n) for n in args.names] if args.names else harness.toc_notebooks()
    order = [p.stem for p in harness.toc_notebooks()]
    order += [p.stem for p in paths if p.stem not in order]
    run_many([(path, seed) for path in paths for seed in seeds], force=args.force, jobs=jobs, executor=executor,
             cluster=cluster, on_result=_print_run)
    return write_report(paths, order)


def merge(folder: Path) -> int:
    """File every run record under ``folder`` as ``_build/seeds/<chapter>/seed-<seed>.json``."""
    count = 0
    for source in sorted(folder.rglob("seed-*.json")):
        run = json.loads(source.read_text())
        if not isinstance(run, dict) or not {"chapter", "seed", "key", "claims"} <= set(run):
            raise SystemExit(f"{source}: not a seed run record (it needs chapter, seed, key and claims)")
        out = SWEEP / str(run["chapter"]) / f"seed-{int(run['seed'])}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(run, indent=1) + "\n")
        count += 1
    return count


def write_report(paths: list[Path], order: list[str]) -> int:
    """``seeds.{json,md}`` from every stored run of the current sources; 1 if a chapter failed a seed."""
    runs = [json.loads(p.read_text()) for p in sorted(SWEEP.glob("*/seed-*.json"))]
    keys = {p.stem: source_key(p) for p in harness.toc_notebooks() + paths}
    runs = [r for r in runs if keys.get(r["chapter"]) == r.get("key")]  # only runs of the current sources
    summary = summarise(runs, order)
    harness.REPORTS.mkdir(parents=True, exist_ok=True)
    (harness.REPORTS / "seeds.json").write_text(json.dumps(summary, indent=1) + "\n")
    (harness.REPORTS / "seeds.md").write_text(markdown(summary))
    print(f"reports: {harness.REPORTS / 'seeds.md'}")
    failed = [f"{stem} (seeds {', '.join(str(s) for s in ch['seeds'] if s not in ch['seeds_ok'])})"
              for stem, ch in summary["chapters"].items() if ch["seeds_ok"] != ch["seeds"]]
    if failed:
        print("chapters with a failing seed: " + "; ".join(failed))
    return 1 if failed else 0


def validate(paths: list[Path], *, jobs: int = 1, executor: str = "local", cluster=None) -> int:
    """Run each chapter once on its next fresh seed block and record the outcome in the lock.

    A chapter whose locked revision was validated already is not rerun (its outcome is
    printed); a chapter whose runs record claims that differ from the lock stops the block
    (freeze the design first). Returns 1 if any chapter failed its block.
    """
    lock = claims_lock.load()
    claims_lock.check_history(lock)
    failed = []
    for path in paths:
        chapter = path.stem
        if chapter not in lock["chapters"]:
            raise SystemExit(f"{chapter}: not in the lock; freeze its design first (tests/lock.py write)")
        # first: a chapter edited since its lock is not the validated revision, whatever
        # the lock says of that revision
        locked_source = lock["chapters"][chapter].get("source")
        current = source_key(path) if locked_source is not None else None
        if current != locked_source:
            raise SystemExit(f"{chapter}: the chapter or its library changed since its design was frozen "
                             f"(source {current}, locked {locked_source}); rerun the design seeds "
                             f"and freeze it again (tests/lock.py write) before validating")
        done = claims_lock.validated(lock, chapter)
        if done is not None:
            print(f"{chapter:<12} revision {done['revision']} was validated on seeds {done['seeds'][0]}-"
                  f"{done['seeds'][-1]} ({done['date']}): "
                  f"{'held on every seed' if done['held_on_every_seed'] else 'FAILED'}; not rerun")
            failed += [] if done["held_on_every_seed"] else [chapter]
            continue
        block = claims_lock.next_block(lock, chapter)
        runs = []
        results = run_many([(path, seed) for seed in block], jobs=jobs, executor=executor, cluster=cluster)
        # a seed whose kernel never started computed nothing: the same seed runs again, once
        again = [i for i, r in enumerate(results) if never_started(r)]
        if again:
            print(f"{chapter}: the kernel did not start on seed(s) {', '.join(str(block[i]) for i in again)};"
                  " running them again", flush=True)
            for i, r in zip(again, run_many([(path, block[i]) for i in again], jobs=jobs, executor=executor,
                                            cluster=cluster)):
                results[i] = r
        for seed, r in zip(block, results):
            if never_started(r):
                raise SystemExit(f"{chapter} seed {seed}: the kernel did not start twice ({r['error'].splitlines()[-1]});"
                                 " nothing recorded; run the block again on a less busy machine")
            if r.get("key") is None:
                raise SystemExit(f"{chapter} seed {seed}: {r['error']}\nnothing recorded; run the block again")
            diff = claims_lock.differences(lock["chapters"][chapter], r) if r["claims"] else []
            if diff:
                raise SystemExit(f"{chapter} seed {seed}: the claims differ from the lock, so this is not "
                                 f"the locked design; nothing recorded:\n  " + "\n  ".join(diff[:10]))
            n_ok = sum(bool(c.get("passed")) for c in r["claims"])
            print(f"{chapter:<12} seed {seed:<3} {r['wall_seconds']:7.1f} s   claims {n_ok}/{len(r['claims'])}"
                  f"   {'ok' if r['ok'] else 'FAILED: ' + r['error'].splitlines()[0][:150]}", flush=True)
            runs.append(r)
        # re-read the lock: another chapter may have been frozen or validated while this block ran
        fresh = claims_lock.load()
        if claims_lock.revision(fresh["chapters"][chapter]) != claims_lock.revision(lock["chapters"][chapter]):
            raise SystemExit(f"{chapter}: its lock entry changed while the block ran; nothing recorded")
        lock = fresh
        event = claims_lock.record_validation(lock, chapter, block, runs)
        claims_lock.save(lock)
        print(f"{chapter}: validation block {block[0]}-{block[-1]} "
              f"{'held on every seed' if event['held_on_every_seed'] else 'FAILED: ' + '; '.join(event['failures'])}"
              f" (recorded in {claims_lock.LOCK.name})")
        failed += [] if event["held_on_every_seed"] else [chapter]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
