"""Per-student variants end to end: ``handout`` gives each student on a roster the variant a
stable hash of their ID picks, and ``grade --roster`` grades each submission against that
variant, whatever the submission's ``VARIANT`` cell says, with lateness from a timestamps CSV."""

from __future__ import annotations

import csv
from pathlib import Path

import nbformat
import pytest

from nnapprox import assignments as asg
from nnapprox.assignments import roster
from nnapprox.assignments.__main__ import main
from nnapprox.assignments.grade import variant_build_dir

pytestmark = pytest.mark.assignments


def test_handout_and_grading_against_each_students_variant(tmp_path):
    table = sorted(asg.variants("intro"))
    pool = [f"s{i:02d}" for i in range(20)]
    a = pool[0]
    b = next(i for i in pool if roster.variant_for(i, "intro", table) != roster.variant_for(a, "intro", table))
    va, vb = roster.variant_for(a, "intro", table), roster.variant_for(b, "intro", table)
    c = next(i for i in pool if i not in (a, b))  # on the roster, hands in nothing
    (tmp_path / "roster.csv").write_text(f"student_id\n{a}\n{b}\n{c}\n")
    out = tmp_path / "course"
    assert main(["handout", "intro", str(tmp_path / "roster.csv"), "--out", str(out), "--no-check"]) == 0
    given = {r["student_id"]: r for r in csv.DictReader((out / "handout-intro.csv").open())}
    assert {k: int(r["variant"]) for k, r in given.items() if k != c} == {a: va, b: vb}
    assert given[a]["release"] != given[b]["release"], "each variant has its own release id"
    nb_a = nbformat.read(out / given[a]["notebook"], as_version=4)
    assert nb_a.metadata["nnapprox"] == {"assignment": "intro", "release": given[a]["release"], "variant": va,
                                         "student_id": a}
    assert not list((out / "students").rglob("*.whl")), "per-student folders do not carry the wheel"

    builds = out / "builds"
    subs = tmp_path / "subs"
    subs.mkdir()

    def solution_of(variant: int, student: str, dest: Path):
        built = variant_build_dir(builds, variant) / "intro"
        nb = nbformat.read(asg.solution_notebook(built), as_version=4)
        handed = nbformat.read(asg.student_notebook(built), as_version=4)
        nb.metadata["nnapprox"] = dict(handed.metadata["nnapprox"], student_id=student)
        nbformat.write(nb, dest)

    solution_of(va, a, subs / f"{a}_intro.ipynb")  # a: the solution of a's own variant
    solution_of(va, a, subs / f"{b}_intro.ipynb")  # b: a's notebook, handed in as b's
    (tmp_path / "times.csv").write_text(f"submission,submitted\n{a}_intro.ipynb,2026-12-02T01:59:00+00:00\n"
                                        f"{b}_intro.ipynb,2026-12-01T10:00:00+00:00\n")
    rows = {r.student_id: r for r in asg.grade(
        "intro", subs, timeout=300, jobs=2, build_dir=builds, roster_csv=tmp_path / "roster.csv",
        id_regex=r"^(?P<id>s\d+)_", deadline="2026-12-01T23:59", timestamps=tmp_path / "times.csv",
        late_policy="per-hour:0.25", out=tmp_path / "scores.csv")}
    own = rows[a]
    assert own.scores == own.possible and own.late_hours == pytest.approx(2.0) and own.penalty == pytest.approx(0.5)
    assert own.total == pytest.approx(own.total_possible - 0.5)
    copied = rows[b]
    assert copied.late_hours == 0.0 and copied.total < copied.total_possible, \
        "graded with b's variant: the measurements of a's variant do not pass"
    assert "VARIANT cell edited (graded with the handed-out constants)" in copied.flags
    assert any(f.startswith("handed-out release") for f in copied.flags)
    assert f"notebook handed out to {a}, submitted as {b}" in copied.flags
    table_rows = list(csv.DictReader((tmp_path / "scores.csv").open()))
    assert [r["late_penalty"] for r in table_rows] == ["0.5", "0", "0"]
    # the student who handed in nothing has a row of zeros, and no feedback page
    assert rows[c].status == "missing" and rows[c].total == 0 and rows[c].possible == own.possible
    assert table_rows[2]["student_id"] == c and table_rows[2]["status"] == "missing"
    assert own.pending and rows[c].pending == own.pending  # hand-graded: empty, as for the others
    assert all(table_rows[2][q] == "" for q in own.pending)
    assert not list((tmp_path / "feedback").glob(f"{c}*"))


def test_roster_errors(tmp_path):
    (tmp_path / "roster.csv").write_text("student_id\ns01\n")
    (tmp_path / "x.ipynb").write_text("{}")
    with pytest.raises(asg.AssignmentError, match="needs --deadline"):
        asg.grade("intro", tmp_path, late_policy="on-time")
    with pytest.raises(asg.AssignmentError, match="roster not found"):
        asg.grade("intro", tmp_path, roster_csv=tmp_path / "nope.csv")


def test_per_student_handouts_without_the_roster_are_refused_before_any_work(tmp_path):
    """The sixth trial graded per-student handouts with the command collect-manual printed (no
    --roster): every student was graded against variant 0 and flagged for an edited VARIANT
    cell. Such a batch now stops before anything is built, and says what to pass."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["nnapprox"] = {"student_id": "alice01"}
    nbformat.write(nb, tmp_path / "alice01_intro.ipynb")
    with pytest.raises(asg.AssignmentError, match="per-student handout.*--roster"):
        asg.grade("intro", tmp_path, build_dir=tmp_path / "never-built")
    assert not (tmp_path / "never-built").exists()
