"""Grade a folder of submissions, each in its own process with a time limit, into a CSV.

Grading without a container runs the student's code on this machine (``otter run``). Each
submission is graded by a fresh ``python -m nnapprox.assignments._worker`` process (which
starts its own Jupyter kernel); when it exceeds ``timeout`` seconds, that process and every
process it started are killed and the submission gets the status ``timeout``. A crash
(a cell that raises, a kernel that dies, a file that is not a notebook) gives ``error``.
Either way the batch goes on, and every submission gets its row.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .build import BUILD, AssignmentError, autograder_zip, build_one, master_path

STATUSES = ("ok", "error", "timeout")


@dataclass
class Row:
    """One graded submission: per-question scores, total, status and a message."""

    submission: str
    status: str
    scores: dict[str, float] = field(default_factory=dict)
    possible: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    message: str = ""

    @property
    def total(self) -> float:
        return sum(self.scores.values())

    @property
    def total_possible(self) -> float:
        return sum(self.possible.values())


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


def submissions_in(folder: Path | str) -> list[Path]:
    """The ``*.ipynb`` and ``*.zip`` files directly in ``folder``, sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AssignmentError(f"submissions folder not found: {folder}")
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".ipynb", ".zip"))
    if not found:
        raise AssignmentError(f"no submissions (*.ipynb or *.zip) in {folder}")
    return found


def _kill_tree(pid: int) -> None:
    """Kill ``pid`` and all its descendants (the Jupyter kernel runs in a session of its own)."""
    import psutil

    try:
        parent = psutil.Process(pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def grade_submission(zip_path: Path | str, submission: Path | str, timeout: float,
                     points: dict[str, float] | None = None) -> Row:
    """Grade one submission in a separate process with a wall-clock limit of ``timeout`` s."""
    points = points if points is not None else question_points(zip_path)
    submission = Path(submission)
    row = Row(submission.name, "error", {q: 0.0 for q in points}, dict(points))
    env = dict(os.environ)
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nnapprox-grade-") as tmp:
        result_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "log.txt"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "nnapprox.assignments._worker",
                 str(Path(zip_path).resolve()), str(submission.resolve()), str(result_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp, env=env,
                start_new_session=True,
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
            row.message = f"killed after {timeout:g} s without a result (infinite loop or too slow?)"
            return row
        if returncode != 0 or not result_path.exists():
            row.message = f"grading failed (exit code {returncode}): {_last_line(log_text)}"
            return row
        summary = json.loads(result_path.read_text())
    for name, (score, possible) in summary["questions"].items():
        row.scores[name] = score
        row.possible[name] = possible
    errors = summary["cell_errors"]
    if errors:
        row.status = "error"
        row.message = f"{len(errors)} cell(s) raised; first: {errors[0]}"
    else:
        row.status = "ok"
        row.message = ""
    return row


def write_csv(rows: list[Row], path: Path | str) -> Path:
    """One line per submission: submission, status, one column per question, total, possible, seconds, message."""
    questions = sorted({q for row in rows for q in row.possible})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "status", *questions, "total", "possible", "seconds", "message"])
        for row in rows:
            writer.writerow([
                row.submission, row.status, *(f"{row.scores.get(q, 0.0):g}" for q in questions),
                f"{row.total:g}", f"{row.total_possible:g}", f"{row.seconds:.1f}", row.message,
            ])
    return path


def grade(name: str, folder: Path | str, *, timeout: float = 300.0, out: Path | str | None = None,
          jobs: int = 1, build_dir: Path | str = BUILD, progress: bool = False) -> list[Row]:
    """Grade every submission in ``folder`` against assignment ``name``; write the CSV to ``out``.

    The autograder is taken from ``<build_dir>/<name>`` (built first if missing). ``jobs``
    submissions are graded at the same time, each in its own process.
    """
    master_path(name)  # unknown name: error listing the valid ones
    if timeout <= 0:
        raise AssignmentError(f"timeout must be positive, got {timeout}")
    if jobs < 1:
        raise AssignmentError(f"jobs must be >= 1, got {jobs}")
    subs = submissions_in(folder)
    built = Path(build_dir) / name
    zip_path = autograder_zip(built)
    if not zip_path.exists():
        built = build_one(name, build_dir)
        zip_path = autograder_zip(built)
    points = question_points(zip_path)

    def one(sub: Path) -> Row:
        row = grade_submission(zip_path, sub, timeout, points)
        if progress:
            print(f"{row.submission}: {row.status} {row.total:g}/{row.total_possible:g} "
                  f"({row.seconds:.1f} s) {row.message}", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(one, subs))
    if out is not None:
        write_csv(rows, out)
    return rows
