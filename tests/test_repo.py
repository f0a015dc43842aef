"""Repository invariants: the layout, the two commands, CI and workflows that can run."""

import re
import subprocess

import yaml

import harness

ROOT = harness.ROOT
ALLOWED_TOP = {"_config.yml", "_toc.yml", "book", "chapters", "lib", "tests", "environment.yml", "README.md",
               "Makefile", "pyproject.toml", "requirements-lock.txt", ".ci", ".github", ".gitignore"}


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z][\w-]*)\s*:(?!=)", text, flags=re.M))


def test_top_level_layout_is_the_designed_one():
    tops = {path.split("/")[0] for path in _tracked()}
    assert tops <= ALLOWED_TOP, f"unexpected top-level entries: {sorted(tops - ALLOWED_TOP)}"


def test_no_outputs_committed():
    tracked = _tracked()
    assert not [p for p in tracked if p.endswith(".ipynb")], "notebooks are kept as MyST text, without outputs"
    assert not [p for p in tracked if p.startswith("_build/")]


def test_readme_shows_the_two_commands_first():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make book" in first_block and "make test" in first_block


def test_ci_runs_make_test_strictly():
    script = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in script and "make test" in script


def test_workflows_parse_and_call_existing_targets():
    targets = _make_targets()
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert len(workflows) >= 2
    for wf in workflows:
        spec = yaml.safe_load(wf.read_text())
        assert spec.get("jobs"), wf.name
        for job in spec["jobs"].values():
            for step in job.get("steps", []):
                for target in re.findall(r"\bmake\s+([a-z][\w-]*)", step.get("run", "")):
                    assert target in targets, f"{wf.name} calls 'make {target}', which the Makefile lacks"


def test_gpu_workflow_runs_the_full_profile_and_publishes():
    spec = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu-book.yml").read_text())
    runs = " ".join(step.get("run", "") for job in spec["jobs"].values() for step in job.get("steps", []))
    uses = " ".join(step.get("uses", "") for job in spec["jobs"].values() for step in job.get("steps", []))
    assert "PROFILE=full" in runs and "deploy-pages" in uses


def test_gpu_workflow_executes_each_chapter_once_and_gates_the_publish():
    """The book job builds from the chapters job's executions (artifact, cache required) and
    runs only if every chapter's claims held; the chapters' reports are attached."""
    spec = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu-book.yml").read_text())
    jobs = spec["jobs"]
    chapters, book = jobs["chapters-full"], jobs["book"]
    assert book["needs"] == "chapters-full" and jobs["deploy"]["needs"] == "book"
    assert spec["env"]["NNAPPROX_PROFILE"] == "full"  # one execution key for both jobs
    assert book["env"]["NNAPPROX_REQUIRE_CACHE"] == "1"
    upload = next(s for s in chapters["steps"] if "upload-artifact" in s.get("uses", ""))
    paths = upload["with"]["path"]
    assert upload["with"]["include-hidden-files"] is True
    assert all(p in paths for p in ("_build/.jupyter_cache", "_build/.nnapprox-execution-key", "_build/reports"))
    download = next(s for s in book["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["name"] == upload["with"]["name"] and download["with"]["path"] == "_build"
    chapter_runs = [s["run"] for s in chapters["steps"] if "make chapters" in s.get("run", "")]
    assert chapter_runs and "|| true" not in chapter_runs[0]  # a failed claim fails the job
    assert not any("make chapters" in s.get("run", "") for s in book["steps"])


def test_seed_sweep_runs_weekly_not_on_pull_requests():
    spec = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    triggers = spec[True] if True in spec else spec["on"]  # YAML 1.1 reads the key `on` as True
    assert "schedule" in triggers
    seeds = spec["jobs"]["seeds"]
    assert "schedule" in seeds["if"] and "pull_request" not in seeds["if"]
    assert any("make seeds" in s.get("run", "") for s in seeds["steps"])


def test_lock_pins_torch_for_ci_and_pyproject_keeps_ranges():
    lock = (ROOT / "requirements-lock.txt").read_text().splitlines()
    assert "torch==2.13.0" in lock
    pins = [line for line in lock if line and not line.startswith("#")]
    assert all("==" in line for line in pins), "every lock line pins an exact version"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"torch>=' in pyproject and '"jupyter-book>=1.0.4,<2"' in pyproject


def test_environment_yml_installs_the_package_with_its_extras():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert any(line.startswith("-e .[") for line in pip)


def test_front_page_maps_every_chapter_before_any_code():
    """The root page is what a textbook's first page is: audience, thesis, map; no code."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    index = (ROOT / (toc["root"] + ".md")).read_text()
    assert "code-cell" not in index and "Who it is for" in index
    import harness

    for path in harness.toc_notebooks():
        target = path.relative_to(ROOT / "book").as_posix() if path.parent.name == "book" else \
            "../" + path.relative_to(ROOT).as_posix()
        assert "{doc}`" + target.removesuffix(".md") + "`" in index, f"the front page does not map {path.name}"


def test_chapter_code_lines_fit_the_page():
    """No code line of a chapter runs past 100 characters (the reader's first screen)."""
    import jupytext

    import harness

    long = []
    for path in harness.toc_notebooks():
        for cell in jupytext.read(path).cells:
            if cell.cell_type == "code":
                long += [f"{path.name}: {line[:60]}..." for line in cell.source.splitlines() if len(line) > 100]
    assert not long, f"{len(long)} code lines over 100 characters:\n" + "\n".join(long[:20])
