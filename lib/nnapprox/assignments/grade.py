"""Grade a folder of submissions, each in its own process with a time limit, into a CSV.

Grading without a container runs the student's code on this machine (``otter run``). Each
submission is graded by a fresh ``python -m nnapprox.assignments._worker`` process (which
starts its own Jupyter kernel); when it exceeds ``timeout`` seconds, that process and every
process it started are killed and the submission gets the status ``timeout``. A crash
(a cell that raises, a kernel that dies, a file that is not a notebook) gives ``error``.
Either way the batch goes on, and every submission gets its row.

The worker's address space is limited (``memory_mb``, default 4 GiB; the kernel inherits the
limit), so a submission that allocates without bound fails with a memory error instead of
taking the machine down. Each row also says who submitted (``--id-regex``), whether the file
superseded older ones of the same student (only the latest is graded), how many hours late it
was (``--deadline``), whether its ``VARIANT`` cell differs from the handed-out one, and which
protected attributes its code reassigns (flags: see
:mod:`.roster`). Next to the CSV, ``feedback/<submission>.json`` lists every test of every
question, public or hidden, with its result and otter's message.
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

from . import roster, static
from .build import (BUILD, AssignmentError, autograder_zip, build_one, check_release, master_path,
                    student_notebook)
from .build import forbidden as build_forbidden

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
    student_id: str = ""
    late_hours: float = 0.0
    flags: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    tests: dict[str, list[dict]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

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


def _limit_memory(memory_mb: float):
    """A ``preexec_fn`` that caps the address space of the worker and everything it starts."""
    def apply():
        import resource

        limit = int(memory_mb * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def grade_submission(zip_path: Path | str, submission: Path | str, timeout: float,
                     points: dict[str, float] | None = None, memory_mb: float | None = 4096.0, *,
                     handout: Path | str | None = None, cell_timeout: float | None = None,
                     question_timeout: float | None = None) -> Row:
    """Grade one submission in a separate process with a wall-clock limit of ``timeout`` s
    and an address-space limit of ``memory_mb`` MiB (``None``: no limit).

    ``handout`` is the student notebook as handed out (default: the one next to the
    autograder zip): its own cells are re-run when the answers are graded. A cell that runs
    longer than ``cell_timeout`` s, or a question whose tests run longer than
    ``question_timeout`` s, is stopped on its own (default: a third of ``timeout`` each).
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
        job.write_text(json.dumps({"autograder": str(Path(zip_path).resolve()), "submission": str(submission.resolve()),
                                   "handout": str(handout.resolve()), "result": str(result_path),
                                   "cell_timeout": cell_timeout, "question_timeout": question_timeout}))
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
            row.message = f"killed after {timeout:g} s without a result (infinite loop or too slow?)"
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
        row.flags.append(f"{q} voided: changed {', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''} "
                         f"while graded")
    row.problems = summary.get("problems", [])
    errors = summary["cell_errors"]
    if errors:
        row.status = "error"
        row.message = f"{len(errors)} cell(s) raised; first: {errors[0]}"
    else:
        row.status = "ok"
        row.message = ""
    return row


COLUMNS_BEFORE = ["submission", "student_id", "status"]
COLUMNS_AFTER = ["total", "possible", "late_hours", "flags", "superseded", "seconds", "message"]


def write_csv(rows: list[Row], path: Path | str) -> Path:
    """One line per graded submission: who, status, one column per question, total, possible,
    hours late, flags, the older copies it superseded, seconds, message."""
    questions = sorted({q for row in rows for q in row.possible})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS_BEFORE, *questions, *COLUMNS_AFTER])
        for row in rows:
            writer.writerow([
                row.submission, row.student_id, row.status, *(f"{row.scores.get(q, 0.0):g}" for q in questions),
                f"{row.total:g}", f"{row.total_possible:g}", f"{row.late_hours:.2f}", "; ".join(row.flags),
                "; ".join(row.superseded), f"{row.seconds:.1f}", row.message,
            ])
    return path


def write_feedback(rows: list[Row], folder: Path | str) -> Path:
    """``<folder>/<submission stem>.json`` per row: status, scores, and every test's result."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        (folder / f"{Path(row.submission).stem}.json").write_text(json.dumps({
            "submission": row.submission, "student_id": row.student_id, "status": row.status,
            "message": row.message, "flags": row.flags, "late_hours": row.late_hours,
            "questions": {q: {"score": row.scores.get(q, 0.0), "possible": p, "tests": row.tests.get(q, [])}
                          for q, p in sorted(row.possible.items())},
        }, indent=1) + "\n")
    return folder


def grade(name: str, folder: Path | str, *, timeout: float = 300.0, out: Path | str | None = None,
          jobs: int = 1, build_dir: Path | str = BUILD, progress: bool = False,
          memory_mb: float | None = 4096.0, id_regex: str | None = None,
          deadline: str | None = None, allow_stale: bool = False,
          manual: Path | str | None = None) -> list[Row]:
    """Grade the submissions in ``folder`` against assignment ``name``; write the CSV to ``out``
    and the feedback files to ``<out's folder>/feedback/``.

    The autograder is taken from ``<build_dir>/<name>`` (built first if missing). ``jobs``
    submissions are graded at the same time, each in its own process. With ``id_regex`` only
    each student's latest file is graded (the others are listed in its row); ``deadline`` (ISO
    8601, UTC unless an offset is given) fills the ``late_hours`` column. ``manual`` is a filled
    ``manual-NAME.csv`` (:mod:`.manual`): its points are added to each row.
    """
    master_path(name)  # unknown name: error listing the valid ones
    if timeout <= 0:
        raise AssignmentError(f"timeout must be positive, got {timeout}")
    if jobs < 1:
        raise AssignmentError(f"jobs must be >= 1, got {jobs}")
    if memory_mb is not None and memory_mb < 512:
        raise AssignmentError(f"memory_mb must be at least 512 (MiB) or None for no limit, got {memory_mb}")
    try:
        regex = roster.compile_id_regex(id_regex)
        when = roster.parse_deadline(deadline)
    except ValueError as e:
        raise AssignmentError(str(e)) from None
    subs, superseded = roster.latest_per_student(submissions_in(folder), regex)
    hand: dict[str, dict[str, float]] = {}
    hand_possible: dict[str, float] = {}
    if manual is not None:
        from .manual import manual_questions, read_points

        hand = read_points(name, manual)
        hand_possible = {q.name: q.points for q in manual_questions(name)}
        ungraded = [s.name for s in subs if s.name not in hand]
        if ungraded:
            raise AssignmentError(f"{manual} has no points for {', '.join(ungraded)}: "
                                  f"run collect-manual again or add their rows")
    built = Path(build_dir) / name
    zip_path = autograder_zip(built)
    if not zip_path.exists():
        built = build_one(name, build_dir)
        zip_path = autograder_zip(built)
    if allow_stale:
        release = json.loads((built / "release.json").read_text()).get("release") if (built / "release.json").exists() else None
    else:
        release = check_release(built, name)["release"]
    points = question_points(zip_path)
    # hidden tests read their references from the notebook's VARIANT cell: a submission whose
    # cell differs from the handed-out one is graded on constants it chose, so it is flagged
    expected_variant = roster.variant_cell(roster.notebook_sources(student_notebook(built)))
    banned = (json.loads((built / "forbidden.json").read_text()) if (built / "forbidden.json").exists()
              else build_forbidden(name))
    given = roster.notebook_sources(student_notebook(built))

    def one(sub: Path) -> Row:
        row = grade_submission(zip_path, sub, timeout, points, memory_mb, handout=student_notebook(built))
        for q, top in hand_possible.items():
            row.scores[q] = hand.get(sub.name, {}).get(q, 0.0)
            row.possible[q] = top
        row.student_id = roster.student_id(sub.name, regex)
        row.late_hours = roster.hours_late(sub, when)
        row.superseded = [p.name for p in superseded.get(sub, [])]
        row.flags = static.flags(roster.notebook_sources(sub), banned, given) + row.flags
        if expected_variant is not None:
            got = roster.variant_cell(roster.notebook_sources(sub))
            if got != expected_variant:
                row.flags.append("VARIANT cell " + ("missing" if got is None else "edited")
                                 + " (the hidden tests read their constants from it)")
        handed_out = roster.notebook_release(sub)
        if release and handed_out and handed_out != release:
            row.flags.append(f"handed-out release {handed_out}, graded with {release}")
        if regex is not None and not row.student_id:
            row.flags.append("file name does not match --id-regex")
        if progress:
            print(f"{row.submission}: {row.status} {row.total:g}/{row.total_possible:g} "
                  f"({row.seconds:.1f} s) {row.message}", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(one, subs))
    if out is not None:
        write_csv(rows, out)
        write_feedback(rows, Path(out).parent / "feedback")
    return rows
