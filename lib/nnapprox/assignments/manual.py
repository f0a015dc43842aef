"""Hand-graded (free-response) questions: collect the answers, merge the points.

``python -m nnapprox.assignments collect-manual NAME SUBMISSIONS/`` writes, per hand-graded
question of assignment ``NAME`` (``manual: true`` in its master), one HTML page with the
question, the reference answer and every submission's answer below it (optionally
anonymised: submissions are then shown as ``S01, S02, ...`` and the key is written to a
separate file), plus ``manual-NAME.csv``: one row per submission, one empty column per
hand-graded question, and a comment column. The grader fills in the points;
``python -m nnapprox.assignments grade NAME SUBMISSIONS/ --manual manual-NAME.csv`` adds them
to the totals.

Answers are found the way otter lays out a student notebook: each hand-graded question sits
between ``<!-- BEGIN QUESTION -->`` and ``<!-- END QUESTION -->`` Markdown cells, in the order
of the master.
"""

from __future__ import annotations

import csv
import html
from dataclasses import dataclass
from pathlib import Path

from . import roster
from .build import AssignmentError, master_notebook


@dataclass
class ManualQuestion:
    name: str
    points: float
    prompt: str
    reference: str


def manual_questions(name: str) -> list[ManualQuestion]:
    """The hand-graded questions of an assignment's master, in order, with their reference answers."""
    import yaml

    out: list[ManualQuestion] = []
    current, prompt, reference, in_solution = None, [], [], False
    for cell in master_notebook(name).cells:
        text = cell.source.strip()
        if cell.cell_type == "raw" and text.startswith("# BEGIN QUESTION"):
            config = yaml.safe_load(text.partition("\n")[2]) or {}
            current = config if config.get("manual") else None
            prompt, reference = [], []
        elif cell.cell_type == "raw" and text.startswith("# BEGIN SOLUTION"):
            in_solution = True
        elif cell.cell_type == "raw" and text.startswith("# END SOLUTION"):
            in_solution = False
        elif cell.cell_type == "raw" and text.startswith("# END QUESTION"):
            if current is not None:
                out.append(ManualQuestion(str(current["name"]), float(current.get("points", 1)),
                                          "\n\n".join(prompt), "\n\n".join(reference)))
            current = None
        elif current is not None and cell.cell_type == "markdown":
            (reference if in_solution else prompt).append(cell.source)
    return out


def answers(path: Path, n_questions: int) -> list[str]:
    """The answer text of each hand-graded question in a submission (empty when missing)."""
    try:
        nb = roster._read_notebook(path)
    except Exception:  # noqa: BLE001 - an unreadable submission has no answers
        nb = None
    found: list[str] = []
    inside, current = False, []
    for cell in getattr(nb, "cells", None) or []:
        src = cell.source
        if cell.cell_type == "markdown" and "<!-- BEGIN QUESTION -->" in src:
            inside, current = True, []
            continue
        if cell.cell_type == "markdown" and "<!-- END QUESTION -->" in src:
            if inside:
                found.append("\n\n".join(current).strip())
            inside = False
            continue
        if inside and "otter_answer_cell" in cell.metadata.get("tags", []):
            current.append(src)
    found += [""] * (n_questions - len(found))
    return found[:n_questions]


def collect(name: str, folder: Path | str, out: Path | str, *, anonymise: bool = False,
            id_regex: str | None = None) -> Path:
    """Write the review pages and the ``manual-NAME.csv`` template; return the CSV's path."""
    from .grade import submissions_in

    questions = manual_questions(name)
    if not questions:
        raise AssignmentError(f"assignment {name!r} has no hand-graded question (manual: true)")
    try:
        regex = roster.compile_id_regex(id_regex)
    except ValueError as e:
        raise AssignmentError(str(e)) from None
    subs, _ = roster.latest_per_student(submissions_in(folder), regex)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels = {s: (f"S{i + 1:02d}" if anonymise else s.name) for i, s in enumerate(subs)}
    texts = {s: answers(s, len(questions)) for s in subs}
    for k, q in enumerate(questions):
        blocks = "".join(
            f"<section><h2>{html.escape(labels[s])}</h2><pre style='white-space: pre-wrap'>"
            f"{html.escape(texts[s][k] or '(no answer)')}</pre></section>" for s in subs)
        (out / f"manual-{name}-{q.name}.html").write_text(
            f"<!doctype html><meta charset='utf-8'><title>{html.escape(name)} {q.name}</title>"
            f"<h1>{html.escape(name)}, {q.name} ({q.points:g} points)</h1>"
            f"<h2>Question</h2><pre style='white-space: pre-wrap'>{html.escape(q.prompt)}</pre>"
            f"<h2>Reference answer and rubric</h2><pre style='white-space: pre-wrap'>{html.escape(q.reference)}</pre>"
            f"<p>Full marks for an answer with the reference's key points; partial credit in "
            f"proportion to the points it makes correctly; none for restating the question.</p>"
            f"<hr>{blocks}")
    csv_path = out / f"manual-{name}.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "label", "student_id", *(q.name for q in questions), "comment"])
        for s in subs:
            sid = "" if anonymise else roster.student_id(s.name, regex)
            writer.writerow([s.name, labels[s], sid, *([""] * len(questions)), ""])
    if anonymise:
        key = out / f"manual-{name}-key.csv"
        with open(key, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["label", "submission", "student_id"])
            for s in subs:
                writer.writerow([labels[s], s.name, roster.student_id(s.name, regex)])
    return csv_path


def read_points(name: str, path: Path | str) -> dict[str, dict[str, float]]:
    """Points per submission file name and hand-graded question from a filled ``manual-NAME.csv``.

    Every cell must hold a number between 0 and the question's points; anything else is an
    error naming the row and column, raised before any grading starts.
    """
    questions = {q.name: q.points for q in manual_questions(name)}
    path = Path(path)
    if not path.exists():
        raise AssignmentError(f"manual points file not found: {path}")
    points: dict[str, dict[str, float]] = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("submission", *questions) if c not in (reader.fieldnames or [])]
        if missing:
            raise AssignmentError(f"{path} needs the columns submission, {', '.join(questions)} "
                                  f"(as collect-manual writes them); missing: {', '.join(missing)}")
        for i, row in enumerate(reader, start=2):
            entry = {}
            for q, top in questions.items():
                raw = (row.get(q) or "").strip()
                try:
                    value = float(raw)
                except ValueError:
                    raise AssignmentError(f"{path}, line {i}, column {q}: {raw!r} is not a number "
                                          f"(0 to {top:g} points)") from None
                if not 0 <= value <= top:
                    raise AssignmentError(f"{path}, line {i}, column {q}: {value:g} is outside 0 to {top:g} points")
                entry[q] = value
            points[row["submission"]] = entry
    return points
