"""The CI workflows: valid workflow files (checked offline against the vendored GitHub
Actions schema), the seed sweep as a matrix merged into one report, the CUDA smoke test
before the full-profile runs, and a CPU publish path for while no GPU runner exists."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

import harness

WORKFLOWS = harness.ROOT / ".github" / "workflows"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def _load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job.get("steps", []))


def _uses(job: dict) -> list[str]:
    return [step.get("uses", "") for step in job.get("steps", [])]


def test_every_workflow_file_is_valid_against_the_github_actions_schema():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert files
    proc = subprocess.run([str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: true\n"
                      "        timeout-minutes: soon\n")
    proc = subprocess.run([str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(broken)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Schema validation errors" in proc.stdout


def test_the_seed_sweep_is_a_matrix_of_every_chapter_and_the_design_seeds_merged_into_one_report():
    jobs = _load("ci.yml")["jobs"]
    matrix = jobs["seeds"]["strategy"]["matrix"]
    assert matrix["chapter"] == [p.stem for p in harness.toc_notebooks()]
    blocks = [int(s) for block in matrix["block"] for s in block.split()]
    assert sorted(blocks) == list(range(10)) and len(blocks) == len(set(blocks))  # seeds 0-9, each once
    assert jobs["seeds"]["strategy"]["fail-fast"] is False  # one failing seed does not cancel the others
    assert "make seeds NAME=${{ matrix.chapter }}" in _runs(jobs["seeds"])
    report = jobs["seeds-report"]
    assert report["needs"] == "seeds" and report["if"].startswith("always()")
    assert "make seeds-report MERGE=" in _runs(report)
    download = next(s for s in report["steps"] if "download-artifact" in s.get("uses", ""))
    upload = next(s for s in jobs["seeds"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["name"].startswith("seeds-") and download["with"]["pattern"] == "seeds-*"
    assert download["with"]["path"] in _runs(report)


def test_the_quick_book_is_published_from_main_only_while_there_is_no_gpu_runner():
    spec = _load("ci.yml")
    jobs = spec["jobs"]
    condition = "github.ref == 'refs/heads/main' && vars.NNAPPROX_GPU_RUNNER != 'true'"
    publish = jobs["publish-quick"]
    assert publish["needs"] == "test" and condition in publish["if"] and "push" in publish["if"]
    assert any("deploy-pages" in u for u in _uses(publish))
    assert publish["permissions"] == {"pages": "write", "id-token": "write"}
    keep = next(s for s in jobs["test"]["steps"] if "upload-pages-artifact" in s.get("uses", ""))
    assert condition in keep["if"] and keep["with"]["path"] == "_build/html"
    gpu = _load("gpu-book.yml")
    assert "vars.NNAPPROX_GPU_RUNNER == 'true'" in gpu["jobs"]["chapters-full"]["if"]
    assert publish["concurrency"]["group"] == gpu["concurrency"]["group"] == "pages"


def test_the_gpu_workflow_runs_the_cuda_smoke_test_before_the_full_profile():
    steps = [s.get("run", "") for s in _load("gpu-book.yml")["jobs"]["chapters-full"]["steps"]]
    smoke = next(i for i, r in enumerate(steps) if "make cuda-smoke" in r)
    full = next(i for i, r in enumerate(steps) if "make chapters PROFILE=full DEVICE=cuda" in r)
    assert smoke < full and "|| true" not in steps[smoke]
