"""Grade ONE submission and write a JSON summary; run by :mod:`.grade` in a process of its own.

    python -m nnapprox.assignments._worker JOB.json

Two steps, in processes that share only data:

1. the submission runs, top to bottom, in a fresh Jupyter kernel (``nbclient``; a cell that
   raises or runs past ``cell_timeout`` is stopped and the next one runs); a last cell, added
   here, writes the kernel's plain values to an answers file (:mod:`._answers`);
2. a new Python process (:mod:`._clean_grade`) rebuilds the namespace from that file and the
   handed-out notebook, and runs every test, public and hidden; the submission's functions,
   defined from their *source*, run in a third process (:mod:`._call_server`) that the tests
   call by message, a new one for each question. Whatever the notebook patched in its kernel
   (``sys.modules``, otter's classes, ``builtins``) does not exist in the tests' process, and
   neither does anything the functions patch when called (a patch of what the server itself
   relies on voids the question, and nothing carries to the next question).

JOB names ``autograder`` (the zip), ``submission``, ``handout`` (the student notebook as
handed out), ``result`` (where the summary goes), ``cell_timeout`` and ``question_timeout``,
and ``sandbox`` (``{"hide": [paths]}``, or ``None``): when given, the kernel and the call server
run in the filesystem sandbox (:mod:`._sandbox`), each seeing only its own folder. The hidden
tests are unpacked only after the kernel has ended (and every process it left is killed),
into a new folder the kernel never had a path to.
The summary holds ``{"questions": {name: [score, possible]}, "cell_errors": [...], "tests":
{name: [{"test", "hidden", "passed", "points", "message"}, ...]}, "tampered": {name: [...]},
"problems": [...]}``.
"""

from __future__ import annotations

import json
import os
import shutil
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


def _cell_label(number: int, cell) -> str:
    first = next((line.strip() for line in cell.get("source", "").splitlines() if line.strip()), "")
    return f"cell {number}: {first[:60]!r}" if first else f"cell {number}"


def _cell_errors(notebook) -> list[str]:
    errors = []
    for number, cell in enumerate(notebook.cells, 1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                name = output.get("ename")
                text = (f"stopped at the cell time limit ({_cell_label(number, cell)})" if name == "KeyboardInterrupt"
                        else f"{name}: {output.get('evalue')}")
                errors.append(text[:300])
    return errors


def execute(nb, name: str, workdir: Path, answers: Path, cell_timeout: float,
            sandbox: list[str] | None = None, progress: str | None = None) -> list[str]:
    """Run the submission in a fresh kernel in ``workdir``; the last cell writes ``answers``.
    With ``sandbox`` (a :func:`._sandbox.command` prefix) the kernel runs inside it, and its
    connection file and IPython profile live in ``workdir``'s parent, not in the user's folders."""
    import nbformat
    from nbclient import NotebookClient

    run = nbformat.v4.new_notebook(metadata=nb.metadata)
    from ._clean_grade import without_checks

    for cell in nb.cells:
        if cell.cell_type == "code" and any(k in cell.source for k in _OTTER_CELLS[1:]):
            # checks and the export cell are only for the student; the rest of the cell runs
            cell = nbformat.from_dict({**cell, "source": without_checks(cell.source)})
            if not cell.source.strip():
                continue
        run.cells.append(cell)
    run.cells.append(nbformat.v4.new_code_cell(EXPORT.format(path=str(answers))))
    nbformat.write(run, workdir / f"{name}.ipynb")
    options = {}
    if sandbox:
        os.environ["IPYTHONDIR"] = str(workdir.parent / "ipython")  # no startup files of the user's profile
        options["kernel_manager_class"] = _sandboxed_manager(sandbox, workdir.parent / "kernel.json")
    if progress:  # which cell runs now: said if the whole submission is killed during it
        def limit(cell):
            number = next((i for i, c in enumerate(run.cells, 1) if c is cell), 0)
            Path(progress + ".tmp").write_text(json.dumps({"phase": "cells", "cell": _cell_label(number, cell)}))
            Path(progress + ".tmp").replace(progress)
            return cell_timeout

        options["timeout_func"] = limit
    # the kernel's own warnings (a TCP connection without encryption, on every start) are noise
    # in a batch of sixty; its errors still show
    client = NotebookClient(run, timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                            kernel_name="python3", resources={"metadata": {"path": str(workdir)}},
                            extra_arguments=["--IPKernelApp.log_level=ERROR"], **options)
    client.execute()
    return _cell_errors(run)


def _sandboxed_manager(prefix: list[str], connection_file: Path):
    """A kernel manager whose kernel command starts with ``prefix`` (the sandbox wrapper) and
    whose connection file is ``connection_file`` (the kernel can read it: it must)."""
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.connection_file = str(connection_file)

        def format_kernel_cmd(self, extra_arguments=None):
            return list(prefix) + super().format_kernel_cmd(extra_arguments)

    return SandboxedKernelManager


def _subreaper() -> None:
    """Make this process adopt its descendants' orphans (Linux), so that :func:`_end_leftovers`
    finds a process the notebook left running in the background."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _end_leftovers() -> None:
    """Kill every process still running below this one (what the notebook started)."""
    import psutil

    from .submission import kill_all

    kill_all(psutil.Process().children(recursive=True))


def _box(spec: dict, hide: list[Path], keep: list[Path] = (), keep_ro: list[Path] = ()) -> list[str]:
    """The wrapper (:mod:`._sandbox`) of a process that runs the submission's code.

    It hides ``spec["hide"]`` (the batch's builds, masters, submissions and output) and
    ``hide``; gives the process empty temporary folders of its own (where the other
    submissions' folders are); shows the Python environment and the library read-only; and
    puts back only ``keep`` (read-write) and ``keep_ro``."""
    from . import _sandbox

    env = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parents[2])]
    # what Python imports from (a user's site-packages under the hidden home), never the home
    # folder itself or a folder above it
    home = Path.home().resolve()
    env += [p for p in dict.fromkeys(str(Path(e).resolve()) for e in sys.path if e and os.path.isdir(e))
            if not (home == Path(p) or home.is_relative_to(p))]
    temps = [p for p in dict.fromkeys([tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]) if os.path.isdir(p)]
    return _sandbox.command(hide=[str(p) for p in list(spec.get("hide") or []) + list(hide)], private=temps,
                            keep=[str(p) for p in keep], keep_ro=env + [str(p) for p in keep_ro])


def main(argv: list[str]) -> int:
    import nbformat

    (job_path,) = argv
    job = json.loads(Path(job_path).read_text())
    _subreaper()
    spec = job.get("sandbox")
    with zipfile.ZipFile(job["autograder"]) as zf:
        name = json.loads(zf.read("otter_config.json")).get("assignment_name") or "submission"
        members = [m for m in zf.namelist() if m.startswith("tests/") and m.endswith(".py")]
    nb = read_submission(Path(job["submission"]))
    handout = nbformat.read(job["handout"], as_version=4)
    # three folders: the kernel's (its working folder and the answers it writes), the grading
    # process's, and the hidden tests', made only when the kernel has ended: the notebook never
    # had a path to them (and, in the sandbox, sees neither of the others)
    with tempfile.TemporaryDirectory(prefix="nnapprox-run-") as run_dir, \
            tempfile.TemporaryDirectory(prefix="nnapprox-clean-") as clean_dir:
        run_dir, clean_dir = Path(run_dir), Path(clean_dir)
        kernel_dir = run_dir / "kernel"
        kernel_dir.mkdir()
        answers = run_dir / "answers.json"
        kernel_box = _box(spec, hide=[clean_dir], keep=[run_dir]) if spec is not None else None
        errors = execute(nb, name, kernel_dir, answers, float(job.get("cell_timeout", 120)), kernel_box,
                         job.get("progress"))
        _end_leftovers()
        if not answers.exists():
            raise RuntimeError("the notebook's answers could not be read after it ran "
                               f"({errors[-1] if errors else 'no error shown'})")
        tests_root = Path(tempfile.mkdtemp(prefix="nnapprox-tests-"))
        try:
            # the call server sees its own folder and the answers, read-only, and not the tests
            server_box = (_box(spec, hide=[tests_root, run_dir], keep_ro=[clean_dir, answers])
                          if spec is not None else None)
            with zipfile.ZipFile(job["autograder"]) as zf:
                for member in members:
                    zf.extract(member, tests_root)
            grade_job = {"answers": str(answers), "tests": str(tests_root / "tests"),
                         "sources": [c.source for c in nb.cells if c.cell_type == "code"],
                         "trusted": trusted_cells(handout),
                         "given": [c.source for c in handout.cells if c.cell_type == "code"],
                         "question_timeout": float(job.get("question_timeout", 120)),
                         "deadline": job.get("deadline"), "progress": job.get("progress"),
                         "forbidden": job.get("forbidden") or {}, "forbid": job.get("forbid") or {},
                         "accept_voided": bool(job.get("accept_voided")), "sandbox_cmd": server_box}
            (clean_dir / "job.json").write_text(json.dumps(grade_job))
            result = clean_dir / "result.json"
            env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_", "IPYTHONDIR"))}
            done = subprocess.run([sys.executable, "-P", "-m", "nnapprox.assignments._clean_grade",
                                   str(clean_dir / "job.json"), str(result)],
                                  cwd=clean_dir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0 or not result.exists():
                raise RuntimeError(f"grading the exported answers failed: {done.stderr.strip()[-1500:]}")
            summary = json.loads(result.read_text())
        finally:
            shutil.rmtree(tests_root, ignore_errors=True)
    summary["cell_errors"] = errors
    Path(job["result"]).write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
