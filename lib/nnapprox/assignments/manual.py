"""Hand-graded (free-response) questions: collect the answers, merge the points.

``python -m nnapprox.assignments collect-manual NAME SUBMISSIONS/`` writes, per hand-graded
question of assignment ``NAME`` (``manual: true`` in its master), one HTML page with the
question, the reference answer and every submission's answer below it (optionally
anonymised: submissions are then shown as ``S01, S02, ...`` and the key is written to a
separate file), plus ``manual-NAME.csv``: one row per submission (:data:`COLUMNS`: the
student's file, the label the pages show, the student), one empty column per hand-graded
question, and a comment column. The grader fills in the points;
``python -m nnapprox.assignments grade NAME SUBMISSIONS/ --manual manual-NAME.csv`` adds them
to the totals.

Answers are found the way otter lays out a student notebook: each hand-graded question sits
between ``<!-- BEGIN QUESTION -->`` and ``<!-- END QUESTION -->`` Markdown cells, in the order
of the master.
"""

from __future__ import annotations

import csv
import html
import re
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


#: the first columns of ``manual-NAME.csv``: ``submission_file`` is the student's file as
#: handed in (``alice_intro.ipynb``; empty with ``--anonymise``, where only the key file names
#: it), ``review_label`` the name the review pages show that submission under (``S01`` with
#: ``--anonymise``, else the file name again), ``student_id`` the student (empty with
#: ``--anonymise``). The question columns and ``comment`` follow.
COLUMNS = ("submission_file", "review_label", "student_id")
#: the columns of ``manual-NAME-key.csv`` (written with ``--anonymise``): label to file and student
KEY_COLUMNS = ("review_label", "submission_file", "student_id")

BEGIN, END = "<!-- BEGIN QUESTION -->", "<!-- END QUESTION -->"
PLACEHOLDER = "_Type your answer here, replacing this text._"


def answer_cells(path: Path, n_questions: int, prompts: list[str] = ()) -> list[list[dict]]:
    """Per hand-graded question, the cells of the student's answer, in order.

    Everything between a question's ``<!-- BEGIN QUESTION -->`` marker and its ``<!-- END
    QUESTION -->`` marker counts (cells the student added included; a marker may share a cell
    with the previous question's end marker, as otter writes adjacent questions), except the
    question's own prompt (the text after the begin marker in its cell, and any cell that is
    part of ``prompts``, the questions' text in the master). Each cell is ``{"type":
    "markdown" | "code", "source", "outputs", "attachments"}``.
    """
    try:
        nb = roster._read_notebook(path)
    except Exception:  # noqa: BLE001 - an unreadable submission has no answers
        nb = None
    known = {" ".join(p.split()) for prompt in prompts for p in prompt.split("\n\n") if p.strip()}
    found: list[list[dict]] = []
    current: list[dict] | None = None
    for cell in getattr(nb, "cells", None) or []:
        src = cell.source
        if cell.cell_type == "markdown" and (BEGIN in src or END in src):
            # walk the markers of this cell in order: END closes, BEGIN opens (its text is the prompt)
            for marker in re.findall(re.escape(BEGIN) + "|" + re.escape(END), src):
                if marker == END and current is not None:
                    found.append(current)
                    current = None
                elif marker == BEGIN:
                    if current is not None:  # a BEGIN without END: close the previous one
                        found.append(current)
                    current = []
            continue
        if current is None:
            continue
        tagged = "otter_answer_cell" in cell.metadata.get("tags", [])
        if not tagged and " ".join(src.split()) in known:
            continue  # part of the question's text
        if cell.cell_type == "markdown" and src.strip() == PLACEHOLDER:
            continue  # otter's placeholder, left as it was
        current.append({"type": cell.cell_type, "source": src, "outputs": list(cell.get("outputs", [])),
                        "attachments": dict(cell.get("attachments") or {})})
    if current is not None:
        found.append(current)
    found += [[] for _ in range(n_questions - len(found))]
    return found[:n_questions]


def answers(path: Path, n_questions: int, prompts: list[str] = ()) -> list[str]:
    """The answer text of each hand-graded question in a submission (empty when missing)."""
    return ["\n\n".join(c["source"] for c in cells).strip()
            for cells in answer_cells(path, n_questions, prompts)]


_MATH = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<![\\$])\$[^$\n]+?\$", re.S)


def render_markdown(text: str, attachments: dict | None = None) -> str:
    """Markdown to HTML with the student's raw HTML escaped, math left for MathJax, and
    ``attachment:`` images inlined."""
    from markdown_it import MarkdownIt

    maths: list[str] = []

    def hold(m):
        maths.append(m.group(0))
        return f"@@MATH{len(maths) - 1}@@"

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(_MATH.sub(hold, text))
    body = re.sub(r"@@MATH(\d+)@@", lambda m: html.escape(maths[int(m.group(1))]), body)
    for name, bundle in (attachments or {}).items():
        for mime, data in bundle.items():
            if mime.startswith("image/") and mime != "image/svg+xml":
                body = body.replace(f'src="attachment:{html.escape(name)}"', f'src="data:{mime};base64,{data}"')
    return body


def render_cells(cells: list[dict]) -> str:
    """One answer's cells as HTML: Markdown rendered, code with its text and image outputs."""
    if not cells or all(not c["source"].strip() and not c["outputs"] for c in cells):
        return "<p><em>(no answer)</em></p>"
    parts = []
    for c in cells:
        if c["type"] == "markdown":
            parts.append(f"<div class='md'>{render_markdown(c['source'], c['attachments'])}</div>")
            continue
        if c["type"] != "code":
            parts.append(f"<pre>{html.escape(c['source'])}</pre>")
            continue
        parts.append(f"<pre class='code'>{html.escape(c['source'])}</pre>")
        for out in c["outputs"]:
            data = out.get("data", {})
            if "image/png" in data or "image/jpeg" in data:
                mime = "image/png" if "image/png" in data else "image/jpeg"
                parts.append(f"<img alt='output' src='data:{mime};base64,{''.join(data[mime]).strip()}'>")
            elif out.get("output_type") == "stream":
                parts.append(f"<pre class='out'>{html.escape(''.join(out.get('text', '')))}</pre>")
            elif "text/plain" in data:
                parts.append(f"<pre class='out'>{html.escape(''.join(data['text/plain']))}</pre>")
            elif out.get("output_type") == "error":
                parts.append(f"<pre class='out'>{html.escape(str(out.get('ename')))}: "
                             f"{html.escape(str(out.get('evalue')))}</pre>")
    return "".join(parts)


_STYLE = ("<style>body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}"
          "section{border-top:1px solid #ccc;margin-top:1em}pre{white-space:pre-wrap}"
          "pre.code{background:#f4f4f4;padding:.4em}pre.out{color:#333;border-left:3px solid #ccc;padding-left:.5em}"
          "img{max-width:100%}</style>")


def _copy_mathjax(out: Path) -> str:
    """MathJax copied next to the pages (offline, as in the book); the script tag, or '' without it."""
    import shutil

    try:
        import mathjax
    except ImportError:
        return ""
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = out / "mathjax"
    if not (target / "tex-chtml.js").exists():
        (target / "output" / "chtml" / "fonts").mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / "tex-chtml.js", target / "tex-chtml.js")
        shutil.copytree(source / "output" / "chtml" / "fonts" / "woff-v2",
                        target / "output" / "chtml" / "fonts" / "woff-v2", dirs_exist_ok=True)
    if not (target / "ui" / "safe.js").exists():  # the student's math may not carry javascript: links
        (target / "ui").mkdir(exist_ok=True)
        shutil.copy2(source / "ui" / "safe.js", target / "ui" / "safe.js")
    # no \\href, \\class or \\style (the html extension is not loaded: they show as errors, and the
    # rest of the page's math still renders); the safe extension filters what is left
    return ("<script>window.MathJax={loader:{load:['ui/safe']},"
            "tex:{autoload:{html:[]},inlineMath:[['$','$'],['\\\\(','\\\\)']]}};</script>"
            "<script defer src='mathjax/tex-chtml.js'></script>")


def _shuffled(name: str, subs: list[Path]) -> list[Path]:
    """``subs`` in a random order seeded by the assignment and the batch's file names: the same
    on every run of the same batch, unrelated to the names' order."""
    import hashlib
    import random

    seed = hashlib.sha256("\n".join([name, *sorted(s.name for s in subs)]).encode()).digest()
    order = sorted(subs, key=lambda s: s.name)
    random.Random(seed).shuffle(order)
    return order


def collect(name: str, folder: Path | str, out: Path | str, *, anonymise: bool = False,
            id_regex: str | None = None, timestamps: Path | str | None = None,
            deadline: str | None = None, late_policy: str | None = None) -> Path:
    """Write the review pages and the ``manual-NAME.csv`` template; return the CSV's path.

    Each student's file is chosen as ``grade`` chooses it, from the same ``id_regex``,
    ``timestamps`` CSV, ``deadline`` and ``late_policy``: pass the same options to both.

    The template's columns are :data:`COLUMNS`, one per question, ``comment`` (for the whole
    submission) and ``comment_qN`` per question. With
    ``anonymise`` the pages and the template show labels ``S01, S02, ...`` only, given in a
    random order (seeded by the batch's file names, so stable from run to run). The
    template's ``submission_file`` and ``student_id`` are then empty, its ``review_label``
    holds the label, and the key from labels to files and IDs is ``manual-NAME-key.csv``
    (:data:`KEY_COLUMNS`), which :func:`read_points` reads back.
    """
    from .grade import submissions_in

    questions = manual_questions(name)
    if not questions:
        raise AssignmentError(f"assignment {name!r} has no hand-graded question (manual: true)")
    try:
        regex = roster.compile_id_regex(id_regex)
        times = roster.read_timestamps(timestamps) if timestamps is not None else None
        when = roster.parse_deadline(deadline)
        policy, _ = roster.parse_late_policy(late_policy)
    except ValueError as e:
        raise AssignmentError(str(e)) from None
    if policy != "latest" and when is None:
        raise AssignmentError(f"--late-policy {late_policy} needs --deadline")
    subs, _ = roster.latest_per_student(submissions_in(folder), regex, times,
                                        on_time_before=when if policy == "on-time" else None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if anonymise:  # labels in an order that does not follow the file names (alice01 is not S01)
        subs = _shuffled(name, subs)
    labels = {s: (f"S{i + 1:02d}" if anonymise else s.name) for i, s in enumerate(subs)}
    cells = {s: answer_cells(s, len(questions), [q.prompt for q in questions]) for s in subs}
    script = _copy_mathjax(out)
    for k, q in enumerate(questions):
        blocks = "".join(
            f"<section><h2>{html.escape(labels[s])}</h2>{render_cells(cells[s][k])}</section>" for s in subs)
        (out / f"manual-{name}-{q.name}.html").write_text(
            f"<!doctype html><meta charset='utf-8'><title>{html.escape(name)} {q.name}</title>{_STYLE}{script}"
            f"<h1>{html.escape(name)}, {q.name} ({q.points:g} points)</h1>"
            f"<h2>Question</h2>{render_markdown(q.prompt)}"
            f"<h2>Reference answer and rubric</h2>{render_markdown(q.reference)}"
            f"<p>Full marks for an answer with the reference's key points; partial credit in "
            f"proportion to the points it makes correctly; none for restating the question.</p>"
            f"<hr>{blocks}")
    csv_path = out / f"manual-{name}.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS, *(q.name for q in questions), "comment", *(f"comment_{q.name}" for q in questions)])
        for s in subs:
            sid = "" if anonymise else roster.submission_student(s, regex)
            writer.writerow(["" if anonymise else s.name, labels[s], sid, *([""] * len(questions)), "",
                             *([""] * len(questions))])
    key = out / f"manual-{name}-key.csv"
    if anonymise:
        with open(key, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(list(KEY_COLUMNS))
            for s in subs:
                writer.writerow([labels[s], s.name, roster.submission_student(s, regex)])
    elif key.exists():
        key.unlink()  # a key from an earlier anonymised run would relabel this template
    return csv_path


def _key(path: Path, name: str) -> dict[str, str]:
    """Label -> submission file from ``manual-NAME-key.csv`` next to the points file (empty
    without one); the columns ``label, submission`` of earlier versions are read too."""
    key = path.parent / f"manual-{name}-key.csv"
    if not key.exists():
        return {}
    with open(key, newline="") as f:
        return {row.get("review_label", row.get("label", "")): row.get("submission_file", row.get("submission", ""))
                for row in csv.DictReader(f)}


def _file_of(row: dict, key: dict[str, str]) -> str:
    """The submission file a row of ``manual-NAME.csv`` grades: its ``submission_file``, else
    (anonymised) the file its ``review_label`` stands for in the key. A template of earlier
    versions (columns ``submission``, ``label``) is read as it was written."""
    if (row.get("submission_file") or "").strip():
        return row["submission_file"].strip()
    label = (row.get("review_label") if "review_label" in row else row.get("submission")) or ""
    return key.get(label.strip(), label.strip())


def read_comments(name: str, path: Path | str) -> dict[str, str]:
    """The grader's comment per submission file from a filled ``manual-NAME.csv`` (empty ones left out)."""
    path = Path(path)
    key = _key(path, name)
    with open(path, newline="") as f:
        return {_file_of(row, key): row["comment"].strip()
                for row in csv.DictReader(f) if (row.get("comment") or "").strip()}


def read_question_comments(name: str, path: Path | str) -> dict[str, dict[str, str]]:
    """The grader's comments per submission file and question (the ``comment_qN`` columns of a
    filled ``manual-NAME.csv``; empty ones left out)."""
    path = Path(path)
    key = _key(path, name)
    out: dict[str, dict[str, str]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            found = {c[len("comment_"):]: (v or "").strip() for c, v in row.items()
                     if c and c.startswith("comment_") and (v or "").strip()}
            if found:
                out[_file_of(row, key)] = found
    return out


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
    key = _key(path, name)
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        named = [c for c in ("submission_file", "review_label", "submission") if c in fields]
        missing = ([] if named else ["submission_file (or review_label)"]) + [q for q in questions if q not in fields]
        if missing:
            raise AssignmentError(f"{path} needs the columns {', '.join(COLUMNS)}, {', '.join(questions)} "
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
            points[_file_of(row, key)] = entry
    return points
