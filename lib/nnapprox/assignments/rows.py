"""A graded submission's row (:class:`Row`), and what is written from the rows: the CSV and
the feedback files for students and instructor. Part of :mod:`.grade`.
"""

from __future__ import annotations

import csv
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

STATUSES = ("ok", "error", "timeout", "missing")  # missing: on the roster, no submission


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
    pending: dict[str, float] = field(default_factory=dict)  # hand-graded, not graded yet (no --manual)

    @property
    def total(self) -> float:
        return max(0.0, sum(self.scores.values()) - self.penalty)

    @property
    def total_possible(self) -> float:
        return sum(self.possible.values())


COLUMNS_BEFORE = ["submission", "student_id", "status"]
COLUMNS_AFTER = ["total", "possible", "late_hours", "late_penalty", "flags", "superseded", "seconds", "message"]


def write_csv(rows: list[Row], path: Path | str) -> Path:
    """One line per graded submission: who, status, one column per question, total (after any
    late penalty), possible, hours late, the late penalty, flags, the other copies it
    superseded, seconds, message. A hand-graded question not graded yet (``pending``) has an
    empty cell and is not in the total or possible."""
    questions = sorted({q for row in rows for q in [*row.possible, *row.pending]})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS_BEFORE, *questions, *COLUMNS_AFTER])
        for row in rows:
            writer.writerow([
                row.submission, row.student_id, row.status, *("" if q in row.pending else f"{row.scores.get(q, 0.0):g}" for q in questions),
                f"{row.total:g}", f"{row.total_possible:g}", f"{row.late_hours:.2f}", f"{row.penalty:g}", "; ".join(row.flags),
                "; ".join(row.superseded), f"{row.seconds:.1f}", row.message,
            ])
    return path


def _for_student(flag: str) -> str:
    """A flag as its student reads it: another student's ID, and what the grader matched in the
    code to void the tests, stay in the instructor's files."""
    if flag.startswith("notebook handed out to "):
        return "notebook handed out to another student"
    if flag.startswith("every test voided"):
        return "every test voided: the instructor reviews this submission by hand"
    question, sep, _ = flag.partition(" voided: ")
    if sep and " " not in question:  # what the code did, and how it was caught, stay with the instructor
        return f"{question} voided: the instructor reviews this question by hand"
    return flag


def _message_for_student(message: str) -> str:
    """A test's message as its student reads it: what voided it (what the checker matched in the
    code) stays in the instructor's files, or the feedback would teach how to route around it."""
    if str(message).startswith("voided: "):
        return "voided: the instructor reviews this question by hand"
    return message


def _student_view(row: Row) -> dict:
    """What a student may see: scores, public tests with their messages, and of the hidden
    tests only how many there are (otter's ``visibility: hidden``: no names, sources or results)."""
    questions = {}
    for q, p in sorted(row.possible.items()):
        tests = row.tests.get(q, [])
        questions[q] = {
            "score": row.scores.get(q, 0.0), "possible": p,
            "public_tests": [{"test": t["test"], "passed": t["passed"], "message": _message_for_student(t["message"])}
                             for t in tests if not t.get("hidden")],
            "hidden_tests": sum(bool(t.get("hidden")) for t in tests),
        }
        if q in row.comments:
            questions[q]["comment"] = row.comments[q]
    flags = row.flags
    if any(f.startswith("every test voided") for f in flags):  # what voided it stays with the instructor
        from .static import voiding

        flags = [f for f in flags if not voiding([f])]
    return {"submission": row.submission, "student_id": row.student_id, "status": row.status,
            "message": row.message, "flags": [_for_student(f) for f in flags], "late_hours": row.late_hours,
            "late_penalty": row.penalty, "total": row.total, "possible": row.total_possible,
            "comment": row.comments.get("", ""), "questions": questions, "pending": dict(row.pending)}


def _feedback_html(view: dict, assignment: str) -> str:

    esc = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>{esc(assignment)}: feedback</title>",
             "<style>body{font-family:sans-serif;max-width:50em;margin:auto;padding:1em}"
             "td,th{padding:.2em .6em;text-align:left}pre{white-space:pre-wrap;background:#f4f4f4}</style>",
             f"<h1>{esc(assignment)}: {esc(view['student_id'] or view['submission'])}</h1>",
             f"<p>Total: <b>{view['total']:g}</b> of {view['possible']:g} points"
             + (f" (late penalty {view['late_penalty']:g} included)" if view["late_penalty"] else "")
             + (f", graded so far: {view['possible'] + sum(view['pending'].values()):g} in all, with "
                f"{esc(', '.join(view['pending']))} not graded yet" if view.get("pending") else "") + "</p>"]
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
    for q, top in view.get("pending", {}).items():
        parts.append(f"<h2>{esc(q)}: not graded yet</h2><p>Hand-graded ({top:g} points), not in the total above.</p>")
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
