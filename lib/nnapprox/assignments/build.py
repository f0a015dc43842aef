"""Build the otter-grader assignments from their text masters.

A master is a jupytext MyST notebook ``chapters/assignments/<name>.md`` in otter-grader's
assign format (a ``# ASSIGNMENT CONFIG`` raw cell, ``# BEGIN QUESTION`` / ``# BEGIN SOLUTION``
/ ``# BEGIN TESTS`` raw cells, exception-based tests). :func:`build` converts it to ``.ipynb``
and runs ``otter assign``, which writes

- ``<out>/<name>/student/<name>.ipynb``: the notebook handed out (no solutions, public tests);
- ``<out>/<name>/autograder/<name>.ipynb``: the solutions notebook;
- ``<out>/<name>/autograder/<name>-autograder_<time>.zip``: the autograder (all tests);
- ``<out>/<name>/release.json``: the release manifest: the master's SHA-256, the repository
  commit and the build time. Its ``release`` id is also written into the student notebook's
  metadata (``nnapprox.release``), so a handed-out notebook names the autograder it belongs
  to; grading checks both (:func:`check_release`).

Students see each question's points (``show_question_points``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MASTERS = ROOT / "chapters" / "assignments"
BUILD = ROOT / "_build" / "assignments"


class AssignmentError(ValueError):
    """An unknown assignment, a missing folder, a build that failed."""


def available() -> list[str]:
    """Names of the assignments: the stems of ``chapters/assignments/*.md``, sorted."""
    return sorted(p.stem for p in MASTERS.glob("*.md"))


def master_path(name: str) -> Path:
    """The text master of assignment ``name``; raises :class:`AssignmentError` naming the valid ones."""
    names = available()
    if name not in names:
        raise AssignmentError(
            f"unknown assignment {name!r}; valid assignments: {', '.join(names) or '(none)'}"
        )
    return MASTERS / f"{name}.md"


def master_notebook(name: str):
    """The master as an ``nbformat`` notebook (jupytext conversion from the text file)."""
    import jupytext

    return jupytext.read(master_path(name), fmt="md:myst")


def build_one(name: str, out: Path | str = BUILD, *, check: bool = True, quiet: bool = True) -> Path:
    """Run ``otter assign`` on the master of ``name``; return ``<out>/<name>``.

    ``check=True`` lets otter run every test (public and hidden) against the solutions and
    fail the build if one fails. The output folder is replaced.
    """
    import nbformat
    from otter.assign import main as otter_assign

    master = master_path(name)
    dest = Path(out).resolve() / name
    if dest.exists():
        shutil.rmtree(dest)
    work = dest / "master"
    work.mkdir(parents=True)
    nb = master_notebook(name)
    nb.metadata.pop("jupytext", None)
    _show_question_points(nb)
    nbformat.write(nb, work / f"{name}.ipynb")

    sink = io.StringIO()
    redirect = (
        (contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink))
        if quiet
        else (contextlib.nullcontext(), contextlib.nullcontext())
    )
    cwd = os.getcwd()
    try:
        with redirect[0], redirect[1]:
            otter_assign(str(work / f"{name}.ipynb"), str(dest), no_pdfs=True, no_run_tests=not check)
    except Exception as e:  # otter raises bare exceptions; give the log with the cause
        raise AssignmentError(f"otter assign failed for {name} ({master}): {e}\n{sink.getvalue()}") from e
    finally:
        os.chdir(cwd)
    shutil.rmtree(work)
    if not autograder_zip(dest).exists():
        raise AssignmentError(f"otter assign wrote no autograder zip under {dest / 'autograder'}")
    manifest = release_manifest(name)
    (dest / "release.json").write_text(json.dumps(manifest, indent=1) + "\n")
    student = student_notebook(dest)
    snb = nbformat.read(student, as_version=4)
    snb.metadata["nnapprox"] = {"assignment": name, "release": manifest["release"]}
    nbformat.write(snb, student)
    return dest


def _show_question_points(nb) -> None:
    """Turn on otter's ``show_question_points`` in the master's ASSIGNMENT CONFIG cell."""
    import yaml

    for cell in nb.cells:
        if cell.cell_type == "raw" and cell.source.lstrip().startswith("# ASSIGNMENT CONFIG"):
            head, _, body = cell.source.partition("\n")
            config = yaml.safe_load(body) or {}
            config["show_question_points"] = True
            cell.source = head + "\n" + yaml.safe_dump(config, sort_keys=False)
            return
    raise AssignmentError("the master has no '# ASSIGNMENT CONFIG' raw cell")


def master_sha256(name: str) -> str:
    return hashlib.sha256(master_path(name).read_bytes()).hexdigest()


def release_manifest(name: str) -> dict:
    """What ties a handed-out notebook to its autograder: master hash, commit, build time."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        commit = None
    digest = master_sha256(name)
    return {"assignment": name, "release": digest[:12], "master_sha256": digest, "commit": commit,
            "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def check_release(built: Path, name: str) -> dict:
    """The build's release manifest, after checking that the master has not changed since.

    Raises :class:`AssignmentError` when the manifest is missing or the master changed (the
    students' notebooks and this autograder may then disagree): rebuild, or grade with the
    build that was handed out.
    """
    path = Path(built) / "release.json"
    if not path.exists():
        raise AssignmentError(f"{built} has no release.json: rebuild it with `python -m nnapprox.assignments build {name}`")
    manifest = json.loads(path.read_text())
    if manifest.get("master_sha256") != master_sha256(name):
        raise AssignmentError(
            f"the master {master_path(name)} changed after {built} was built (release {manifest.get('release')}): "
            f"grade with the build that was handed out, or pass allow_stale=True (--allow-stale) to grade anyway"
        )
    return manifest


def build(names: list[str] | None = None, out: Path | str = BUILD, *, check: bool = True) -> list[Path]:
    """Build the named assignments (all of them if ``names`` is empty)."""
    names = list(names or available())
    for name in names:
        master_path(name)  # validate every name before any work
    return [build_one(name, out, check=check) for name in names]


def autograder_zip(built: Path) -> Path:
    """The autograder zip of a built assignment folder (``<out>/<name>``)."""
    zips = sorted((Path(built) / "autograder").glob("*-autograder_*.zip"))
    if not zips:
        return Path(built) / "autograder" / "<missing>.zip"
    return zips[-1]


def student_notebook(built: Path) -> Path:
    """The student notebook of a built assignment folder."""
    built = Path(built)
    return built / "student" / f"{built.name}.ipynb"


def solution_notebook(built: Path) -> Path:
    """The solutions notebook of a built assignment folder (otter's autograder copy)."""
    built = Path(built)
    return built / "autograder" / f"{built.name}.ipynb"
