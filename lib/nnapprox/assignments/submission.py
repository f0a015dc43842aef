"""Grade one submission in processes of its own, with time and memory limits. Part of :mod:`.grade`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from .build import student_notebook
from .rows import Row

def question_points(zip_path: Path | str) -> dict[str, float]:
    """Autograded questions of an autograder zip and their points (from its test files)."""
    from otter.test_files import create_test_file

    points = {}
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(zip_path) as zf:
        for member in zf.namelist():
            if member.startswith("tests/") and member.endswith(".py"):
                zf.extract(member, tmp)
                test_file = create_test_file(os.path.join(tmp, member), None)
                points[Path(member).stem] = float(test_file.possible)
    return dict(sorted(points.items()))


def _kill_tree(pid: int) -> None:
    """Kill ``pid`` and all its descendants (the Jupyter kernel runs in a session of its own)."""
    import psutil

    try:
        parent = psutil.Process(pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    kill_all(family)


def kill_all(family: list) -> None:
    """Kill every ``psutil.Process`` of ``family`` and wait for them (10 s at most)."""
    import psutil

    for proc in family:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _limit_memory(memory_mb: float):
    """A ``preexec_fn`` that caps the address space of the worker and everything it starts."""
    def apply():
        import resource

        limit = int(memory_mb * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _partial(row: Row, progress: Path, timeout: float) -> None:
    """A submission killed at ``timeout``: keep the questions graded before (``progress``, written
    as grading went), and say what was running."""
    try:
        done = json.loads(progress.read_text())
    except (OSError, ValueError):
        done = {}
    graded = done.get("questions", {})
    for q, (score, possible) in graded.items():
        row.scores[q] = score
        row.possible[q] = possible
    row.tests = dict(done.get("tests", {}))
    if done.get("phase") == "cells":
        where = f"while the notebook ran, in {done.get('cell') or 'a cell'}; no question was graded"
    elif done.get("phase") == "questions":
        rest = [q for q in row.scores if q not in graded]
        where = (f"while grading {done.get('current') or 'the questions'}"
                 + (f"; scores kept for {', '.join(graded)}" if graded else "")
                 + (f"; {', '.join(rest)} scored 0 (not graded)" if rest else ""))
    else:
        where = "before the notebook ran"
    row.message = f"killed after {timeout:g} s without a full result {where} (infinite loop or too slow?)"
    for q, limit in sorted(done.get("stopped", {}).items()):
        row.flags.append(f"{q} stopped at its time limit ({limit:g} s): the tests still running scored 0 "
                         "(an infinite loop or a very slow function?)")


def grade_submission(zip_path: Path | str, submission: Path | str, timeout: float,
                     points: dict[str, float] | None = None, memory_mb: float | None = 4096.0, *,
                     handout: Path | str | None = None, cell_timeout: float | None = None,
                     question_timeout: float | None = None, forbidden: dict[str, list[str]] | None = None,
                     forbid: dict[str, list[str]] | None = None, accept_voided: bool = False,
                     sandbox: list[str] | None = None) -> Row:
    """Grade one submission in a separate process with a wall-clock limit of ``timeout`` s
    and an address-space limit of ``memory_mb`` MiB (``None``: no limit).

    ``handout`` is the student notebook as handed out (default: the one next to the
    autograder zip): its own cells are re-run when the answers are graded. A cell that runs
    longer than ``cell_timeout`` s, or a question whose tests run longer than
    ``question_timeout`` s (shared by its test cases, and never more than an even share of what is
    left of ``timeout`` among the questions still to grade), is stopped on its own (default: a
    third of ``timeout`` each) and flagged. Killed at ``timeout`` anyway, the row keeps the
    scores of the questions graded before and its message says what was running.
    With ``forbidden`` (question -> dotted names), the row's ``answerable`` lists the
    questions whose answer functions a forbidden function reproduces on the tests' inputs
    (the build's check, :func:`.build.check_forbidden`). With ``forbid`` (the same form), those
    library functions raise while the question's tests call the submission's functions.
    ``accept_voided``: run the tests even where the code's static flags would void them (the
    instructor has reviewed the submission).
    ``sandbox``: the folders and files to hide from the submission's code; given (even empty),
    its kernel and its functions' process run in the filesystem sandbox (:mod:`._sandbox`,
    which also hides this grading's temporary folders); ``None``: no sandbox.
    """
    points = points if points is not None else question_points(zip_path)
    handout = Path(handout) if handout is not None else student_notebook(Path(zip_path).resolve().parents[1])
    cell_timeout = cell_timeout or timeout / 3
    question_timeout = question_timeout or timeout / 3
    submission = Path(submission)
    row = Row(submission.name, "error", {q: 0.0 for q in points}, dict(points))
    env = dict(os.environ)
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nnapprox-grade-") as tmp:
        result_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "log.txt"
        job = Path(tmp) / "job.json"
        progress = Path(tmp) / "progress.json"
        # the questions share what is left of ``timeout`` (less a margin to write the result), so
        # that one looping function costs its own question, not the questions after it
        deadline = time.time() + timeout - min(15.0, 0.1 * timeout)
        job.write_text(json.dumps({"autograder": str(Path(zip_path).resolve()), "submission": str(submission.resolve()),
                                   "deadline": deadline, "progress": str(progress),
                                   "handout": str(handout.resolve()), "result": str(result_path),
                                   "cell_timeout": cell_timeout, "question_timeout": question_timeout,
                                   "forbidden": forbidden or {}, "forbid": forbid or forbidden or {},
                                   "accept_voided": bool(accept_voided),
                                   "sandbox": None if sandbox is None else {"hide": [*map(str, sandbox), tmp]}}))
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "nnapprox.assignments._worker", str(job)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp, env=env,
                start_new_session=True, preexec_fn=_limit_memory(memory_mb) if memory_mb else None,
            )
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_tree(proc.pid)
                proc.wait()
                returncode = None
        row.seconds = round(time.perf_counter() - start, 2)
        log_text = log_path.read_text(errors="replace")
        if returncode is None:
            row.status = "timeout"
            _partial(row, progress, timeout)
            return row
        if returncode != 0 or not result_path.exists():
            memory = "MemoryError" in log_text or "can't allocate memory" in log_text
            row.message = (f"grading failed (exit code {returncode})"
                           f"{f' (memory limit {memory_mb:g} MiB?)' if memory and memory_mb else ''}: "
                           f"{_last_line(log_text)}")
            return row
        summary = json.loads(result_path.read_text())
    for name, (score, possible) in summary["questions"].items():
        row.scores[name] = score
        row.possible[name] = possible
    row.tests = summary.get("tests", {})
    for q, changed in sorted(summary.get("tampered", {}).items()):
        # a changed name (builtins.getattr) or what the audit hook refused (reads the garbage ...)
        said = [c if " " in c.split(" (")[0] else f"changed {c}" for c in changed[:3]]
        row.flags.append(f"{q} voided: {', '.join(said)}{' ...' if len(changed) > 3 else ''} while graded")
    if summary.get("voided"):
        row.flags.append("every test voided: the code " + "; ".join(summary["voided"][:3]))
    if summary.get("voided_accepted"):
        row.flags.append("tests run after review (--accept), although the code "
                         + "; ".join(summary["voided_accepted"][:3]))
    for name, why in sorted(summary.get("missing", {}).items()):
        row.flags.append(f"top-level {name} not carried over to grading ({why}): "
                         f"the functions that use it fail with NameError")
    for q, names in sorted(summary.get("forbidden_used", {}).items()):
        row.flags.append(f"{q} scores zero: the answer refers to {', '.join(names)}, which it forbids")
    for q, names in sorted(summary.get("forbidden_called", {}).items()):
        row.flags.append(f"{q}: called forbidden {', '.join(names)} while graded (the call raised)")
    for q, limit in sorted(summary.get("stopped", {}).items()):
        row.flags.append(f"{q} stopped at its time limit ({limit:g} s): the tests still running scored 0 "
                         "(an infinite loop or a very slow function?)")
    row.problems = summary.get("problems", [])
    row.answerable = summary.get("answerable", {})
    errors = summary["cell_errors"]
    if errors:
        row.status = "error"
        row.message = f"{len(errors)} cell(s) raised; first: {errors[0]}"
    else:
        row.status = "ok"
        row.message = ""
    return row
