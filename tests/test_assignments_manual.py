"""Hand-graded questions of every assignment: each answer lands under its own question.

Otter writes the end marker of one hand-graded question and the begin marker of the next in
one cell when the questions are adjacent (depth and sequential: q4 and q5); the collector
must still give each answer to its question. Checked for every assignment with hand-graded
questions, with a cell the student added, math, an image, anonymised labels and comments.
"""

from __future__ import annotations

import base64
import os
import csv
from pathlib import Path

import nbformat
import pytest

from nnapprox import assignments as asg
from nnapprox.assignments import manual

pytestmark = pytest.mark.assignments

NAMES = [n for n in asg.available() if manual.manual_questions(n)]
# a 1x1 PNG
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")).decode()


def _answer_cells(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
            and "otter_answer_cell" in c.metadata.get("tags", [])]


@pytest.fixture(scope="module")
def students(tmp_path_factory):
    out = tmp_path_factory.mktemp("manual-build")
    return {name: asg.student_notebook(asg.build_one(name, out, check=False)) for name in NAMES}


def test_some_assignments_have_adjacent_hand_graded_questions(students):
    """The case of the issue exists (otherwise the test below would not cover it)."""
    adjacent = [name for name, path in students.items()
                if any(manual.END in c.source and manual.BEGIN in c.source
                       for c in nbformat.read(path, as_version=4).cells)]
    assert {"depth", "sequential"} <= set(adjacent), adjacent


@pytest.mark.parametrize("name", NAMES)
def test_each_answer_is_collected_under_its_own_question(students, name, tmp_path):
    questions = manual.manual_questions(name)
    nb = nbformat.read(students[name], as_version=4)
    cells = _answer_cells(nb)
    assert len(cells) == len(questions), f"{name}: one Markdown answer cell per hand-graded question"
    for k, i in enumerate(cells):
        nb.cells[i].source = f"Answer to {questions[k].name}: $x_{k} = \\frac{{1}}{{2}}$ and <b>bold</b>."
    # the student adds a cell of text and a cell with a figure under the last question
    extra_text = nbformat.v4.new_markdown_cell(f"More on {questions[-1].name}.")
    figure = nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": PIXEL, "text/plain": "<Figure>"})])
    nb.cells[cells[-1] + 1:cells[-1] + 1] = [extra_text, figure]
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(nb, subs / "s01.ipynb")
    (subs / "s02.ipynb").write_bytes(students[name].read_bytes())

    texts = manual.answers(subs / "s01.ipynb", len(questions), [q.prompt for q in questions])
    for k, q in enumerate(questions[:-1]):
        assert texts[k] == f"Answer to {q.name}: $x_{k} = \\frac{{1}}{{2}}$ and <b>bold</b>.", (name, k, texts)
    last = texts[-1]
    assert last.startswith(f"Answer to {questions[-1].name}") and f"More on {questions[-1].name}." in last
    assert manual.answers(subs / "s02.ipynb", len(questions)) == [""] * len(questions)

    csv_path = manual.collect(name, subs, tmp_path / "manual", anonymise=True)
    for k, q in enumerate(questions):
        page = (tmp_path / "manual" / f"manual-{name}-{q.name}.html").read_text()
        assert f"Answer to {q.name}:" in page and "S01" in page and "s01.ipynb" not in page
        assert "&lt;b&gt;bold&lt;/b&gt;" in page, "the student's HTML is shown, not run"
        assert "x_" in page and "mathjax/tex-chtml.js" in page
        others = [p.name for p in questions if p.name != q.name]
        assert not any(f"Answer to {o}:" in page for o in others), f"{name}/{q.name} shows another answer"
    last_page = (tmp_path / "manual" / f"manual-{name}-{questions[-1].name}.html").read_text()
    assert f"data:image/png;base64,{PIXEL}" in last_page
    assert (tmp_path / "manual" / "mathjax" / "tex-chtml.js").exists()
    # the template is keyed by label only (no file, no student); the key maps back to the files
    rows = list(csv.DictReader(csv_path.open()))
    assert list(rows[0])[:3] == ["submission_file", "review_label", "student_id"]
    assert [r["review_label"] for r in rows] == ["S01", "S02"]
    assert all(not r["student_id"] and not r["submission_file"] for r in rows)
    for r in rows:
        for q in questions:
            r[q.name] = str(q.points / 2)
    rows[0]["comment"] = "Clear argument."
    assert [c for c in rows[0] if c.startswith("comment_")] == [f"comment_{q.name}" for q in questions]
    rows[1][f"comment_{questions[0].name}"] = "Name the hypothesis you use."
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    points = manual.read_points(name, csv_path)
    assert set(points) == {"s01.ipynb", "s02.ipynb"}
    key = {r["review_label"]: r["submission_file"]
           for r in csv.DictReader((tmp_path / "manual" / f"manual-{name}-key.csv").open())}
    assert manual.read_comments(name, csv_path) == {key["S01"]: "Clear argument."}
    assert manual.read_question_comments(name, csv_path) == {
        key["S02"]: {questions[0].name: "Name the hypothesis you use."}}


def test_collect_chooses_files_as_grade_does(students, tmp_path):
    """A timestamps CSV decides which copy is a student's latest (file times lie after an LMS
    download), and without --id-regex a per-student handout's metadata names the student."""
    name = NAMES[0]
    nb = nbformat.read(students[name], as_version=4)
    nb.metadata.setdefault("nnapprox", {})["student_id"] = "bob02"
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(nb, subs / "bob02_first.ipynb")
    nbformat.write(nb, subs / "bob02_final.ipynb")
    os.utime(subs / "bob02_first.ipynb", (2e9, 2e9))  # the early upload has the newer file time
    os.utime(subs / "bob02_final.ipynb", (1e9, 1e9))
    times = tmp_path / "times.csv"
    times.write_text("submission,submitted\nbob02_first.ipynb,2026-12-01T09:00\n"
                     "bob02_final.ipynb,2026-12-01T18:00\n")
    csv_path = manual.collect(name, subs, tmp_path / "manual", timestamps=times)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["submission_file"], r["review_label"], r["student_id"]) for r in rows] == [
        ("bob02_final.ipynb", "bob02_final.ipynb", "bob02")]
    with pytest.raises(asg.AssignmentError, match="needs --deadline"):
        manual.collect(name, subs, tmp_path / "m2", late_policy="on-time")


def test_points_files_round_trip_by_file_or_label_and_read_the_old_columns(tmp_path):
    """``submission_file`` names the student's file, ``review_label`` the name on the review
    pages: a filled template is read back by file (plain) or through the key (anonymised), and
    a template written before the columns were renamed (``submission``, ``label``) still reads."""
    name = NAMES[0]
    questions = manual.manual_questions(name)
    qs = [q.name for q in questions]
    half = [f"{q.points / 2:g}" for q in questions]
    want = {q.name: q.points / 2 for q in questions}

    def write(path, header, rows):
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
        return path

    plain = tmp_path / "plain"
    plain.mkdir()
    csv_path = write(plain / f"manual-{name}.csv", [*manual.COLUMNS, *qs, "comment"],
                     [["ann_x.ipynb", "ann_x.ipynb", "ann", *half, "Good."]])
    assert manual.read_points(name, csv_path) == {"ann_x.ipynb": want}
    assert manual.read_comments(name, csv_path) == {"ann_x.ipynb": "Good."}
    anon = tmp_path / "anon"
    anon.mkdir()
    write(anon / f"manual-{name}-key.csv", list(manual.KEY_COLUMNS), [["S01", "ann_x.ipynb", "ann"]])
    csv_path = write(anon / f"manual-{name}.csv", [*manual.COLUMNS, *qs, "comment"], [["", "S01", "", *half, ""]])
    assert manual.read_points(name, csv_path) == {"ann_x.ipynb": want}
    old = tmp_path / "old"
    old.mkdir()
    write(old / f"manual-{name}-key.csv", ["label", "submission", "student_id"], [["S01", "ann_x.ipynb", "ann"]])
    csv_path = write(old / f"manual-{name}.csv", ["submission", "label", "student_id", *qs, "comment"],
                     [["S01", "S01", "", *half, "Old."]])
    assert manual.read_points(name, csv_path) == {"ann_x.ipynb": want}
    assert manual.read_comments(name, csv_path) == {"ann_x.ipynb": "Old."}
    bad = write(tmp_path / f"manual-{name}.csv", ["file", *qs], [["x", *half]])
    with pytest.raises(asg.AssignmentError, match="needs the columns submission_file, review_label"):
        manual.read_points(name, bad)


def test_anonymised_labels_do_not_follow_the_file_names():
    from pathlib import Path

    subs = [Path(f"{c}{i:02d}_intro.ipynb") for i, c in enumerate("abcdefghijkl")]
    order = manual._shuffled("intro", subs)
    assert sorted(order) == sorted(subs) and order != sorted(subs, key=lambda p: p.name)
    assert manual._shuffled("intro", list(reversed(subs))) == order  # stable for the batch
