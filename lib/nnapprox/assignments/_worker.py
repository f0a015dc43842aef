"""Grade ONE submission and write a JSON summary; run by :mod:`.grade` in a process of its own.

    python -m nnapprox.assignments._worker JOB.json

Two steps, in processes that share only data:

1. the submission runs, top to bottom, in a fresh Jupyter kernel (``nbclient``; a cell that
   raises or runs past ``cell_timeout`` is stopped and the next one runs); a last cell, added
   here, writes the kernel's plain values to an answers file (:mod:`._answers`);
2. a new Python process (:mod:`._clean_grade`) rebuilds the namespace from that file and the
   handed-out notebook, and runs every test, public and hidden; the submission's functions,
   defined from their *source*, run in a third process (:mod:`._call_server`) that the tests
   call by message. Whatever the notebook patched in its kernel (``sys.modules``, otter's
   classes, ``builtins``) does not exist in the tests' process, and neither does anything
   the functions patch when called.

JOB names ``autograder`` (the zip), ``submission``, ``handout`` (the student notebook as
handed out), ``result`` (where the summary goes), ``cell_timeout`` and ``question_timeout``.
The summary holds ``{"questions": {name: [score, possible]}, "cell_errors": [...], "tests":
{name: [{"test", "hidden", "passed", "points", "message"}, ...]}, "tampered": {name: [...]},
"problems": [...]}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

EXPORT = ('__import__("nnapprox.assignments._answers", fromlist=["dump"]).dump(globals(), {path!r})')
_OTTER_CELLS = ("otter.Notebook(", "grader.check(", "grader.export(", "grader.check_all(")


def read_submission(path: Path):
    """The notebook of a submission (an ``.ipynb`` file, or the one inside otter's export zip)."""
    import nbformat

    path = Path(path)
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith(".ipynb") and not n.startswith("__MACOSX")]
            if not names:
                raise ValueError(f"{path.name}: the zip holds no notebook")
            return nbformat.reads(zf.read(names[0]).decode(), as_version=4)
    return nbformat.read(path, as_version=4)


def trusted_cells(handout) -> list[str]:
    """The handed-out notebook's own code cells (imports, constants, data), without otter's."""
    return [c.source for c in handout.cells if c.cell_type == "code"
            and "otter_answer_cell" not in c.metadata.get("tags", [])
            and not any(k in c.source for k in _OTTER_CELLS)]


def _cell_errors(notebook) -> list[str]:
    errors = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                name = output.get("ename")
                text = ("stopped at the cell time limit" if name == "KeyboardInterrupt"
                        else f"{name}: {output.get('evalue')}")
                errors.append(text[:300])
    return errors


def execute(nb, name: str, workdir: Path, answers: Path, cell_timeout: float) -> list[str]:
    """Run the submission in a fresh kernel in ``workdir``; the last cell writes ``answers``."""
    import nbformat
    from nbclient import NotebookClient

    run = nbformat.v4.new_notebook(metadata=nb.metadata)
    for cell in nb.cells:
        if cell.cell_type == "code" and any(k in cell.source for k in _OTTER_CELLS[1:]):
            continue  # checks and the export cell: only for the student
        run.cells.append(cell)
    run.cells.append(nbformat.v4.new_code_cell(EXPORT.format(path=str(answers))))
    nbformat.write(run, workdir / f"{name}.ipynb")
    client = NotebookClient(run, timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                            kernel_name="python3", resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return _cell_errors(run)


def main(argv: list[str]) -> int:
    import nbformat

    (job_path,) = argv
    job = json.loads(Path(job_path).read_text())
    with zipfile.ZipFile(job["autograder"]) as zf:
        name = json.loads(zf.read("otter_config.json")).get("assignment_name") or "submission"
        with tempfile.TemporaryDirectory(prefix="nnapprox-tests-") as tmp:
            tmp = Path(tmp)
            for member in zf.namelist():
                if member.startswith("tests/") and member.endswith(".py"):
                    zf.extract(member, tmp)
            nb = read_submission(Path(job["submission"]))
            handout = nbformat.read(job["handout"], as_version=4)
            kernel_dir, clean_dir = tmp / "kernel", tmp / "clean"
            kernel_dir.mkdir()
            clean_dir.mkdir()
            answers = tmp / "answers.json"
            errors = execute(nb, name, kernel_dir, answers, float(job.get("cell_timeout", 120)))
            if not answers.exists():
                raise RuntimeError("the notebook's answers could not be read after it ran "
                                   f"({errors[-1] if errors else 'no error shown'})")
            grade_job = {"answers": str(answers), "tests": str(tmp / "tests"),
                         "sources": [c.source for c in nb.cells if c.cell_type == "code"],
                         "trusted": trusted_cells(handout),
                         "question_timeout": float(job.get("question_timeout", 120)),
                         "forbidden": job.get("forbidden") or {}, "forbid": job.get("forbid") or {},
                         "accept_voided": bool(job.get("accept_voided"))}
            (clean_dir / "job.json").write_text(json.dumps(grade_job))
            result = clean_dir / "result.json"
            env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_"))}
            done = subprocess.run([sys.executable, "-P", "-m", "nnapprox.assignments._clean_grade",
                                   str(clean_dir / "job.json"), str(result)],
                                  cwd=clean_dir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0 or not result.exists():
                raise RuntimeError(f"grading the exported answers failed: {done.stderr.strip()[-1500:]}")
            summary = json.loads(result.read_text())
    summary["cell_errors"] = errors
    Path(job["result"]).write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
