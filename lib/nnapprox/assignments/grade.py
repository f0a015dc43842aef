"""Grade a folder of submissions, each in its own processes with time limits, into a CSV.

Each submission is graded by a fresh ``python -m nnapprox.assignments._worker`` process
(:mod:`._worker`): the notebook runs in its own Jupyter kernel and exports its answers as
plain data, and a second, fresh Python process runs every test on them (:mod:`._clean_grade`),
out of reach of anything the notebook patched. When the worker exceeds ``timeout`` seconds,
it and every process it started are killed and the submission gets the status ``timeout``;
a cell past ``cell_timeout`` or a question past ``question_timeout`` fails on its own. A
crash (a cell that raises, a kernel that dies, a file that is not a notebook) gives
``error``. Either way the batch goes on, and every submission gets its row.

The worker's address space is limited (``memory_mb``, default 4 GiB; the kernel and the
grading process inherit the limit), so a submission that allocates without bound fails with
a memory error instead of taking the machine down. Each row also says who submitted
(``--id-regex``, or a per-student notebook's metadata), whether the file superseded others
of the same student, how many hours late it was and the late penalty (``--deadline``,
``--timestamps``, ``--late-policy``), and what its code does that an honest answer never
needs (flags: :mod:`.static`). With ``--roster`` each student is graded against their own
variant. Next to the CSV, ``feedback/<submission>.{html,json}`` are for the student (hidden
tests counted, never shown) and ``feedback/instructor/<submission>.json`` lists every test
with its message.
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
from .build import variants

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
    comments: dict[str, str] = field(default_factory=dict)  # "" for the whole submission
    penalty: float = 0.0  # points taken off for lateness (the total includes it)
    answerable: dict[str, list[list[str]]] = field(default_factory=dict)  # build check: [function, forbidden]

    @property
    def total(self) -> float:
        return max(0.0, sum(self.scores.values()) - self.penalty)

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
                     question_timeout: float | None = None, forbidden: dict[str, list[str]] | None = None) -> Row:
    """Grade one submission in a separate process with a wall-clock limit of ``timeout`` s
    and an address-space limit of ``memory_mb`` MiB (``None``: no limit).

    ``handout`` is the student notebook as handed out (default: the one next to the
    autograder zip): its own cells are re-run when the answers are graded. A cell that runs
    longer than ``cell_timeout`` s, or a question whose tests run longer than
    ``question_timeout`` s, is stopped on its own (default: a third of ``timeout`` each).
    With ``forbidden`` (question -> dotted names), the row's ``answerable`` lists the
    questions whose answer functions a forbidden function reproduces on the tests' inputs
    (the build's check, :func:`.build.check_forbidden`).
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
                                   "cell_timeout": cell_timeout, "question_timeout": question_timeout,
                                   "forbidden": forbidden or {}}))
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
    row.answerable = summary.get("answerable", {})
    errors = summary["cell_errors"]
    if errors:
        row.status = "error"
        row.message = f"{len(errors)} cell(s) raised; first: {errors[0]}"
    else:
        row.status = "ok"
        row.message = ""
    return row


COLUMNS_BEFORE = ["submission", "student_id", "status"]
COLUMNS_AFTER = ["total", "possible", "late_hours", "late_penalty", "flags", "superseded", "seconds", "message"]


def write_csv(rows: list[Row], path: Path | str) -> Path:
    """One line per graded submission: who, status, one column per question, total (after any
    late penalty), possible, hours late, the late penalty, flags, the other copies it
    superseded, seconds, message."""
    questions = sorted({q for row in rows for q in row.possible})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS_BEFORE, *questions, *COLUMNS_AFTER])
        for row in rows:
            writer.writerow([
                row.submission, row.student_id, row.status, *(f"{row.scores.get(q, 0.0):g}" for q in questions),
                f"{row.total:g}", f"{row.total_possible:g}", f"{row.late_hours:.2f}", f"{row.penalty:g}", "; ".join(row.flags),
                "; ".join(row.superseded), f"{row.seconds:.1f}", row.message,
            ])
    return path


def _student_view(row: Row) -> dict:
    """What a student may see: scores, public tests with their messages, and of the hidden
    tests only how many there are (otter's ``visibility: hidden``: no names, sources or results)."""
    questions = {}
    for q, p in sorted(row.possible.items()):
        tests = row.tests.get(q, [])
        questions[q] = {
            "score": row.scores.get(q, 0.0), "possible": p,
            "public_tests": [{"test": t["test"], "passed": t["passed"], "message": t["message"]}
                             for t in tests if not t.get("hidden")],
            "hidden_tests": sum(bool(t.get("hidden")) for t in tests),
        }
        if q in row.comments:
            questions[q]["comment"] = row.comments[q]
    return {"submission": row.submission, "student_id": row.student_id, "status": row.status,
            "message": row.message, "flags": row.flags, "late_hours": row.late_hours,
            "late_penalty": row.penalty, "total": row.total, "possible": row.total_possible,
            "comment": row.comments.get("", ""), "questions": questions}


def _feedback_html(view: dict, assignment: str) -> str:
    import html

    esc = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>{esc(assignment)}: feedback</title>",
             "<style>body{font-family:sans-serif;max-width:50em;margin:auto;padding:1em}"
             "td,th{padding:.2em .6em;text-align:left}pre{white-space:pre-wrap;background:#f4f4f4}</style>",
             f"<h1>{esc(assignment)}: {esc(view['student_id'] or view['submission'])}</h1>",
             f"<p>Total: <b>{view['total']:g}</b> of {view['possible']:g} points"
             + (f" (late penalty {view['late_penalty']:g} included)" if view["late_penalty"] else "") + "</p>"]
    if view["message"]:
        parts.append(f"<p>Note: {esc(view['message'])}</p>")
    if view["flags"]:
        parts.append("<p>Flagged for the instructor's attention:</p><ul>"
                     + "".join(f"<li>{esc(f)}</li>" for f in view["flags"]) + "</ul>")
    if view["comment"]:
        parts.append(f"<p>Comment: {esc(view['comment'])}</p>")
    for q, info in view["questions"].items():
        parts.append(f"<h2>{esc(q)}: {info['score']:g} / {info['possible']:g}</h2>")
        if info.get("comment"):
            parts.append(f"<p>Comment: {esc(info['comment'])}</p>")
        for t in info["public_tests"]:
            mark = "passed" if t["passed"] else "failed"
            parts.append(f"<p>{esc(t['test'])}: {mark}</p>"
                         + ("" if t["passed"] else f"<pre>{esc(t['message'])}</pre>"))
        if info["hidden_tests"]:
            parts.append(f"<p>{info['hidden_tests']} hidden test(s): results not shown; they are part of the score.</p>")
    return "".join(parts)


def write_feedback(rows: list[Row], folder: Path | str, assignment: str = "") -> Path:
    """Feedback files under ``folder``: per submission, for the student ``<stem>.json`` and
    ``<stem>.html`` (hidden tests counted, never shown), and for the instructor
    ``instructor/<stem>.json`` (every test, hidden ones included, with its message)."""
    folder = Path(folder)
    (folder / "instructor").mkdir(parents=True, exist_ok=True)
    for row in rows:
        stem = Path(row.submission).stem
        view = _student_view(row)
        (folder / f"{stem}.json").write_text(json.dumps(view, indent=1) + "\n")
        (folder / f"{stem}.html").write_text(_feedback_html(view, assignment))
        (folder / "instructor" / f"{stem}.json").write_text(json.dumps({
            "submission": row.submission, "student_id": row.student_id, "status": row.status,
            "message": row.message, "flags": row.flags, "late_hours": row.late_hours, "late_penalty": row.penalty,
            "problems": row.problems, "comments": row.comments,
            "questions": {q: {"score": row.scores.get(q, 0.0), "possible": p, "tests": row.tests.get(q, [])}
                          for q, p in sorted(row.possible.items())},
        }, indent=1) + "\n")
    return folder


def _prepare(name: str, built: Path, allow_stale: bool) -> dict:
    """What grading with one build needs: zip, points, release, handed-out cells, forbidden names."""
    if allow_stale:
        release = (json.loads((built / "release.json").read_text()).get("release")
                   if (built / "release.json").exists() else None)
    else:
        release = check_release(built, name)["release"]
    zip_path = autograder_zip(built)
    handout = student_notebook(built)
    return {
        "built": built, "zip": zip_path, "points": question_points(zip_path), "release": release,
        "handout": handout, "given": roster.notebook_sources(handout),
        # an edited VARIANT cell changes nothing (the grader re-runs the handed-out one) but is worth a look
        "variant_cell": roster.variant_cell(roster.notebook_sources(handout)),
        "forbidden": (json.loads((built / "forbidden.json").read_text()) if (built / "forbidden.json").exists()
                      else build_forbidden(name)),
    }


def variant_build_dir(build_dir: Path | str, variant: int) -> Path:
    """Where the build of one variant lives for per-student grading: ``<build_dir>/variant-<k>``."""
    return Path(build_dir) / f"variant-{variant}"


def grade(name: str, folder: Path | str, *, timeout: float = 300.0, out: Path | str | None = None,
          jobs: int = 1, build_dir: Path | str = BUILD, progress: bool = False,
          memory_mb: float | None = 4096.0, id_regex: str | None = None,
          deadline: str | None = None, allow_stale: bool = False,
          manual: Path | str | None = None, roster_csv: Path | str | None = None,
          timestamps: Path | str | None = None, late_policy: str | None = None,
          cell_timeout: float | None = None, question_timeout: float | None = None) -> list[Row]:
    """Grade the submissions in ``folder`` against assignment ``name``; write the CSV to ``out``
    and the feedback files to ``<out's folder>/feedback/``.

    The autograder is taken from ``<build_dir>/<name>`` (built first if missing). ``jobs``
    submissions are graded at the same time, each in its own process. With ``id_regex`` only
    each student's latest file is graded (the others are listed in its row); ``deadline`` (ISO
    8601, UTC unless an offset is given) fills the ``late_hours`` column, from the file names
    and times or from ``timestamps`` (a CSV, see :func:`.roster.read_timestamps`);
    ``late_policy`` is ``latest``, ``on-time`` or ``per-hour:X`` (:func:`.roster.parse_late_policy`).
    ``manual`` is a filled ``manual-NAME.csv`` (:mod:`.manual`): its points and comments are
    added to each row.

    With ``roster_csv`` every student has their own variant (:func:`.roster.variant_for`, as
    the ``handout`` command assigned them): each submission is graded with the build of its
    variant, ``<build_dir>/variant-<k>/<name>`` (built when missing), and its handed-out cells
    (the ``VARIANT`` constants included) come from that build, never from the submission.
    """
    master_path(name)  # unknown name: error listing the valid ones
    if timeout <= 0:
        raise AssignmentError(f"timeout must be positive, got {timeout}")
    if jobs < 1:
        raise AssignmentError(f"jobs must be >= 1, got {jobs}")
    if memory_mb is not None and memory_mb < 512:
        raise AssignmentError(f"memory_mb must be at least 512 (MiB) or None for no limit, got {memory_mb}")
    for label, value in (("cell_timeout", cell_timeout), ("question_timeout", question_timeout)):
        if value is not None and value <= 0:
            raise AssignmentError(f"{label} must be positive, got {value}")
    try:
        regex = roster.compile_id_regex(id_regex)
        when = roster.parse_deadline(deadline)
        policy, per_hour = roster.parse_late_policy(late_policy)
        times = roster.read_timestamps(timestamps) if timestamps is not None else None
        students = roster.read_roster(roster_csv) if roster_csv is not None else None
    except ValueError as e:
        raise AssignmentError(str(e)) from None
    if policy != "latest" and when is None:
        raise AssignmentError(f"--late-policy {late_policy} needs --deadline")
    subs, superseded = roster.latest_per_student(submissions_in(folder), regex, times,
                                                 on_time_before=when if policy == "on-time" else None)
    hand: dict[str, dict[str, float]] = {}
    hand_possible: dict[str, float] = {}
    comments: dict[str, str] = {}
    if manual is not None:
        from .manual import manual_questions, read_comments, read_points

        hand = read_points(name, manual)
        comments = read_comments(name, manual)
        hand_possible = {q.name: q.points for q in manual_questions(name)}
        ungraded = [s.name for s in subs if s.name not in hand]
        if ungraded:
            raise AssignmentError(f"{manual} has no points for {', '.join(ungraded)}: "
                                  f"run collect-manual again or add their rows")

    def ready(build_root: Path, variant: int | None) -> dict:
        built = build_root / name
        if not autograder_zip(built).exists():
            built = build_one(name, build_root, variant=variant)
        return _prepare(name, built, allow_stale)

    def who(sub: Path) -> str:
        """The student: from the file name with --id-regex, else from a per-student handout's
        metadata, else (without --id-regex) the file's stem."""
        if regex is not None:
            return roster.student_id(sub.name, regex) or roster.notebook_student(sub) or ""
        return roster.notebook_student(sub) or Path(sub.name).stem

    setups: dict[int | None, dict] = {}
    choice: dict[Path, int | None] = {}
    if students is None:
        setups[None] = ready(Path(build_dir), None)
        choice = {sub: None for sub in subs}
    else:
        table = sorted(variants(name))
        if not table:
            raise AssignmentError(f"assignment {name!r} has no variants: grade it without --roster")
        known = set(students)
        for sub in subs:
            sid = who(sub)
            choice[sub] = roster.variant_for(sid, name, table) if sid in known else None
        for k in sorted({k for k in choice.values() if k is not None}):
            setups[k] = ready(variant_build_dir(build_dir, k), k)

    def one(sub: Path) -> Row:
        setup = setups.get(choice[sub])
        sid = who(sub)
        if setup is None:  # per-student variants, and this file's student is not on the roster
            any_setup = next(iter(setups.values()), None)
            points = any_setup["points"] if any_setup else {}
            row = Row(sub.name, "error", {q: 0.0 for q in points}, dict(points))
            row.message = (f"student ID {sid!r} is not on the roster: its variant is unknown" if sid
                           else "no student ID in the file name: its variant is unknown")
        else:
            row = grade_submission(setup["zip"], sub, timeout, setup["points"], memory_mb, handout=setup["handout"],
                                   cell_timeout=cell_timeout, question_timeout=question_timeout)
        for q, top in hand_possible.items():
            row.scores[q] = hand.get(sub.name, {}).get(q, 0.0)
            row.possible[q] = top
        row.student_id = sid
        if sub.name in comments:
            row.comments[""] = comments[sub.name]
        row.late_hours = roster.hours_late(sub, when, times)
        if policy == "per-hour":
            row.penalty = round(min(sum(row.scores.values()), per_hour * row.late_hours), 4)
        row.superseded = [p.name for p in superseded.get(sub, [])]
        if setup is not None:
            sources = roster.notebook_sources(sub)
            row.flags = static.flags(sources, setup["forbidden"], setup["given"]) + row.flags
            if setup["variant_cell"] is not None:
                got = roster.variant_cell(sources)
                if got != setup["variant_cell"]:
                    row.flags.append("VARIANT cell " + ("missing" if got is None else "edited")
                                     + " (graded with the handed-out constants)")
            handed_out = roster.notebook_release(sub)
            if setup["release"] and handed_out and handed_out != setup["release"]:
                row.flags.append(f"handed-out release {handed_out}, graded with {setup['release']}")
        if regex is not None and not roster.student_id(sub.name, regex):
            row.flags.append("file name does not match --id-regex"
                             + (" (ID taken from the notebook)" if row.student_id else ""))
        in_notebook = roster.notebook_student(sub)
        if in_notebook and row.student_id and in_notebook != row.student_id:
            row.flags.append(f"notebook handed out to {in_notebook}, submitted as {row.student_id}")
        if progress:
            print(f"{row.submission}: {row.status} {row.total:g}/{row.total_possible:g} "
                  f"({row.seconds:.1f} s) {row.message}", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(one, subs))
    if out is not None:
        write_csv(rows, out)
        write_feedback(rows, Path(out).parent / "feedback", name)
    return rows
