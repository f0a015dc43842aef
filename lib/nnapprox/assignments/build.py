"""Build the otter-grader assignments from their text masters.

A master is a jupytext MyST notebook ``chapters/assignments/<name>.md`` in otter-grader's
assign format (a ``# ASSIGNMENT CONFIG`` raw cell, ``# BEGIN QUESTION`` / ``# BEGIN SOLUTION``
/ ``# BEGIN TESTS`` raw cells, exception-based tests). :func:`build` converts it to ``.ipynb``
and runs ``otter assign``, which writes

- ``<out>/<name>/student/<name>.ipynb``: the notebook handed out (no solutions, public tests);
- ``<out>/<name>/autograder/<name>.ipynb``: the solutions notebook;
- ``<out>/<name>/autograder/<name>-autograder_<time>.zip``: the autograder (all tests).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
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
    return dest


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
