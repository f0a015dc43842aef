"""Runs that scale out: chapters, seed runs and checkpoint builds N at a time, or through submitit.

The fast tests check the arithmetic and the plumbing (threads per job, refused values, the
process pool, reports written by parallel workers, the manifest merged from jobs). The tests
marked ``chapter`` execute notebooks: the intro run side by side with another chapter gives
the same claims and outputs as the intro run alone, and an interrupted parallel seed sweep
resumes without repeating a finished run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading

import pytest

import harness
import seeds
from nnapprox import checkpoints, runtime

FIXTURES = harness.ROOT / "tests" / "fixtures"


# --------------------------------------------------------------------------- arithmetic and refusals
@pytest.mark.parametrize("jobs, cores, threads", [(1, 2, 2), (2, 2, 1), (3, 2, 1), (2, 16, 8), (3, 16, 5)])
def test_each_job_gets_cores_over_jobs_threads_and_at_least_one(jobs, cores, threads):
    assert runtime.threads_per_job(jobs, cores) == threads


@pytest.mark.parametrize("bad", [0, -1, "0", "x", "2.5", "", " ", None])
def test_jobs_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        runtime.check_jobs(bad)


def test_unknown_executor_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid executors are 'local', 'slurm', 'submitit-local'"):
        runtime.check_executor("foo")
    assert runtime.check_executor("slurm") == "slurm"


@pytest.mark.parametrize("field, value", [("time_min", 0), ("cpus", 0), ("gpus", -1)])
def test_cluster_resources_are_checked(field, value):
    with pytest.raises(ValueError, match=f"Cluster.{field}"):
        runtime.Cluster(**{field: value})


@pytest.mark.parametrize("script, argv, message", [
    (harness, ["intro", "--jobs", "0"], "jobs must be a positive integer"),
    (harness, ["intro", "--executor", "foo"], "valid executors are 'local', 'slurm', 'submitit-local'"),
    (harness, ["intro", "--executor", "slurm", "--time-min", "0"], "Cluster.time_min"),
    (harness, ["intro", "--executor", "slurm", "--sbatch", "account"], "--sbatch takes KEY=VALUE"),
    (harness, ["intro", "--device", "tpu"], "valid devices are"),
    (harness, ["--book", "intro"], "--book runs every chapter"),
    (seeds, ["--jobs", "two"], "jobs must be a positive integer"),
    (seeds, ["--executor", "cluster"], "valid executors are"),
])
def test_command_lines_refuse_bad_values_before_running_anything(script, argv, message, capsys, monkeypatch):
    monkeypatch.setattr(harness, "run_chapter", lambda *a, **k: pytest.fail("a chapter ran"))
    with pytest.raises(SystemExit) as stop:
        script.main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_the_checkpoint_builds_refuse_bad_values(capsys, monkeypatch):
    monkeypatch.setattr(checkpoints, "build", lambda *a, **k: pytest.fail("a checkpoint was built"))
    for argv, message in [(["build", "--jobs", "0"], "jobs must be a positive integer"),
                          (["build", "--executor", "foo"], "valid executors are")]:
        with pytest.raises(SystemExit) as stop:
            checkpoints.main(argv)
        assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("variable, message", [
    ("JOBS=0", "JOBS='0' is not valid: JOBS is how many run at once, a positive integer"),
    ("JOBS=two", "JOBS='two' is not valid"),
    ("EXECUTOR=foo", "EXECUTOR='foo' is not valid: use local (this machine), slurm"),
])
def test_make_refuses_bad_jobs_and_executors_before_any_work(variable, message):
    for target in ("book", "seeds", "chapters", "checkpoints"):
        proc = subprocess.run(["make", "-n", target, variable], cwd=harness.ROOT, capture_output=True, text=True)
        assert proc.returncode != 0 and message in proc.stderr, (target, proc.stderr)
        assert "pip install" not in proc.stdout  # stopped while reading the Makefile: nothing set up


def test_make_passes_jobs_executor_and_slurm_resources_through():
    proc = subprocess.run(["make", "-n", "chapters", "JOBS=3", "EXECUTOR=slurm", "SLURM_PARTITION=gpu",
                           "SLURM_TIME=90", "SLURM_GPUS=2", "SLURM_ARGS=account=lab qos=high", "DEVICE=cuda"],
                          cwd=harness.ROOT, capture_output=True, text=True, check=True)
    line = next(x for x in proc.stdout.splitlines() if "tests/harness.py" in x)
    for flag in ("--jobs 3", "--executor slurm", "--partition gpu", "--time-min 90", "--gpus 2",
                 "--sbatch account=lab", "--sbatch qos=high", "--device cuda"):
        assert flag in line, flag
    smoke = subprocess.run(["make", "-n", "cuda-smoke"], cwd=harness.ROOT, capture_output=True, text=True,
                           check=True).stdout
    line = next(x for x in smoke.splitlines() if "tests/harness.py" in x)
    assert "--device cuda" in line and "--jobs 1" in line and "--report cuda-smoke" in line  # one GPU: one at a time


# --------------------------------------------------------------------------- the process pool
def test_the_local_pool_returns_every_result_and_a_failed_job_as_its_error():
    calls = [dict(text="a\nb\n", prefix="> "), dict(text="c\n"), dict(text="d\n", prefix="- ")]
    results = dict(runtime.map_jobs("textwrap:indent", calls, jobs=2))
    assert results[0] == "> a\n> b\n" and results[2] == "- d\n"
    assert isinstance(results[1], TypeError) and "prefix" in str(results[1])  # the others went on


def test_reports_written_by_parallel_workers_keep_every_chapter(tmp_path, monkeypatch):
    """Workers of ``pytest -n`` merge their chapter into the same chapters.json: none is lost."""
    monkeypatch.setattr(harness, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(harness, "BUILD", tmp_path)
    stems = [f"chapter{i}" for i in range(12)]

    def write(stem):
        r = harness.ChapterResult(stem, f"{stem}.md", "quick", "cpu", 0, ok=True, wall_seconds=1.0,
                                  claims_passed=1, claims_total=1)
        harness.write_reports([r])

    threads = [threading.Thread(target=write, args=(s,)) for s in stems]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = json.loads((tmp_path / "reports" / "chapters.json").read_text())
    assert sorted(r["chapter"] for r in rows) == sorted(stems)
    assert (tmp_path / "reports" / "chapters.md").read_text().count("| ok |") == len(stems)


@pytest.mark.parametrize("error, kind", [
    ("failed claims: a; b", "claim"),
    ("ClaimError: 1 claim failed", "claim"),
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     "device"),
    ("RuntimeError: expected scalar type Float but found Double", "dtype"),
    ("RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float", "dtype"),
    ("timed out after 300 s (budget 150 s)", "timeout"),
    ("ValueError: unknown setting", "error"),
    ("", ""),
])
def test_failures_are_classified_for_the_cuda_smoke_report(error, kind):
    assert harness.failure_kind(error) == kind


def test_checkpoint_jobs_write_their_entries_into_one_manifest(tmp_path, monkeypatch):
    """Parallel builds do not each rewrite the manifest: the parent merges what the jobs return,
    keeps the entries already there, and a failed job leaves its old entry alone."""
    (tmp_path / "manifest.json").write_text(json.dumps({"old": {"sha256": "0"}, "b": {"sha256": "stale"}}))
    seen = {}

    def fake_map_jobs(target, calls, **options):
        seen.update(target=target, calls=calls, **options)
        yield 1, RuntimeError("the job was killed")
        yield 0, {"sha256": "a-new"}

    monkeypatch.setattr(runtime, "map_jobs", fake_map_jobs)
    outcomes = checkpoints.build_many(["a", "b"], directory=tmp_path, jobs=2)
    assert seen["target"] == "nnapprox.checkpoints:build_job" and seen["jobs"] == 2
    assert [c["name"] for c in seen["calls"]] == ["a", "b"]
    assert all(c["threads"] == runtime.threads_per_job(2) for c in seen["calls"])
    assert outcomes["a"] == {"sha256": "a-new"} and isinstance(outcomes["b"], RuntimeError)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest == {"a": {"sha256": "a-new"}, "b": {"sha256": "stale"}, "old": {"sha256": "0"}}


# --------------------------------------------------------------------------- executed notebooks
WALL_TIME = re.compile(r"(seed \d+, )[\d.]+ s\)")  # the claims table's header names the run's wall time


def _comparable(executed) -> list:
    """What a reader of the book sees of each code cell: its printed text (streams merged, as the
    book merges them; stderr, i.e. progress bars with their timings, is removed from the book),
    its text displays and a hash of each figure."""
    cells = json.loads(executed.read_text())["cells"]
    out = []
    for cell in cells:
        if cell["cell_type"] != "code" or "injected-parameters" in cell["metadata"].get("tags", []):
            continue
        printed = "".join("".join(o["text"]) for o in cell.get("outputs", [])
                          if o["output_type"] == "stream" and o["name"] == "stdout")
        shown = []
        for o in cell.get("outputs", []):
            if o["output_type"] in ("display_data", "execute_result"):
                data = o.get("data", {})
                shown += [("image", hashlib.sha256("".join(data[k]).encode()).hexdigest())
                          for k in sorted(data) if k.startswith("image/")]
                shown += [(k, WALL_TIME.sub(r"\1<wall time>)", "".join(data[k])))
                          for k in ("text/plain", "text/markdown", "text/html") if k in data]
        out.append((printed, shown))
    return out


def _claims(work_dir, stem):
    record = json.loads((work_dir / f"{stem}.json").read_text())
    return [(c["name"], c["value"], c["op"], c["threshold"], c["passed"]) for c in record["claims"]]


@pytest.mark.chapter
def test_a_chapter_run_beside_another_gives_the_claims_and_outputs_of_a_serial_run(tmp_path):
    intro = harness.find_chapter("intro")
    serial = harness.run_chapters([intro], jobs=1, work_dir=tmp_path / "serial", timeout=1200)
    parallel = harness.run_chapters([intro, FIXTURES / "false_claim.md"], jobs=2, work_dir=tmp_path / "parallel",
                                    timeout=1200)
    assert serial[0].ok, serial[0].error
    assert parallel[0].ok and parallel[0].chapter == "intro", parallel[0].error
    assert parallel[1].chapter == "false_claim" and harness.failure_kind(parallel[1].error) == "claim"
    assert _claims(tmp_path / "serial", "intro") == _claims(tmp_path / "parallel", "intro")
    assert _comparable(tmp_path / "serial" / "intro.ipynb") == _comparable(tmp_path / "parallel" / "intro.ipynb")
    assert serial[0].figures == parallel[0].figures > 0


@pytest.mark.chapter
def test_the_submitit_path_runs_each_chapter_as_a_job_and_collects_its_result(tmp_path):
    """The Slurm path (``EXECUTOR=slurm``) with submitit's local executor: one job per chapter,
    results in the order asked, each job's outcome what the serial harness reports."""
    paths = [FIXTURES / "false_claim.md", FIXTURES / "no_claims.md"]
    results = harness.run_chapters(paths, executor="submitit-local", work_dir=tmp_path, timeout=300)
    assert [r.chapter for r in results] == ["false_claim", "no_claims"]
    false_claim, no_claims = results
    assert (false_claim.claims_passed, false_claim.claims_total) == (0, 1) and "ClaimError" in false_claim.error
    assert not no_claims.ok and "recorded no claim" in no_claims.error
    assert (tmp_path / "false_claim.ipynb").exists() and (tmp_path / "no_claims.ipynb").exists()
    assert not false_claim.primed and not no_claims.primed  # never the book's run: nothing cached


@pytest.mark.chapter
def test_a_parallel_seed_sweep_resumes_and_reruns_only_a_timed_out_run(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_SWEEP_DIR", str(tmp_path))  # the pool's processes read it
    monkeypatch.setattr(seeds, "SWEEP", tmp_path)
    chapter = FIXTURES / "false_claim.md"
    first = seeds.run_many([(chapter, 0), (chapter, 1)], jobs=2)
    assert [(r["seed"], r["ok"]) for r in first] == [(0, False), (1, False)]
    assert all(len(r["claims"]) == 1 and r["key"] == seeds.source_key(chapter) for r in first)
    files = {s: tmp_path / "false_claim" / f"seed-{s}.json" for s in (0, 1)}
    stamps = {s: os.stat(f).st_mtime_ns for s, f in files.items()}
    again = seeds.run_many([(chapter, 0), (chapter, 1)], jobs=2)  # finished: taken as stored
    assert again == first and {s: os.stat(f).st_mtime_ns for s, f in files.items()} == stamps
    stored = json.loads(files[1].read_text())
    files[1].write_text(json.dumps({**stored, "error": "timed out after 300 s (budget 150 s)"}))
    third = seeds.run_many([(chapter, 0), (chapter, 1)], jobs=2)
    assert os.stat(files[0]).st_mtime_ns == stamps[0]  # not repeated
    assert "ClaimError" in third[1]["error"] and not seeds.timed_out(third[1])  # run again
    assert not list(tmp_path.glob("*/*.tmp"))  # written atomically


def test_the_cuda_smoke_report_fails_a_chapter_that_ran_on_another_device(tmp_path, monkeypatch):
    """``make cuda-smoke`` keeps its records apart from the book's and fails a chapter whose
    claims record says it ran elsewhere than asked, naming the kind of failure in its report."""
    import argparse

    monkeypatch.setattr(harness, "BUILD", tmp_path)
    monkeypatch.setattr(harness, "REPORTS", tmp_path / "reports")
    paths = [FIXTURES / "false_claim.md", FIXTURES / "no_claims.md"]

    def run_chapters(ps, **options):
        work = options["work_dir"]
        work.mkdir(parents=True, exist_ok=True)
        assert work == tmp_path / "cuda-smoke" and options["device"] == "cuda"
        for p, ran_on in zip(ps, ["cuda:0", "cpu"]):
            (work / f"{p.stem}.json").write_text(json.dumps({"device": ran_on, "claims": []}))
        return [harness.ChapterResult(p.stem, p.name, "quick", "cuda", 0, ok=True, claims_passed=1, claims_total=1)
                for p in ps]

    monkeypatch.setattr(harness, "run_chapters", run_chapters)
    args = argparse.Namespace(book=False, profile="quick", device="cuda", seed=0, timeout=None, cell_timeout=None,
                              report="cuda-smoke")
    assert harness.run_and_report(paths, args, jobs=1, executor="local", cluster=None) == 1
    rows = {r["chapter"]: r for r in json.loads((tmp_path / "reports" / "cuda-smoke.json").read_text())}
    assert rows["false_claim"]["ok"] and not rows["no_claims"]["ok"]
    assert rows["no_claims"]["failure"] == "device" and "claims record says 'cpu'" in rows["no_claims"]["error"]
    assert "FAILED (device)" in (tmp_path / "reports" / "cuda-smoke.md").read_text()
