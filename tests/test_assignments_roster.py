"""Gradebook logistics of the grader: IDs, latest copies, lateness, flagged patches (no grading)."""

import datetime as dt
import os

import pytest

from nnapprox.assignments import roster


def test_patched_attributes_follow_aliases_and_setattr():
    cells = [
        "import torch\ntorch.allclose = lambda *a, **k: True",
        "import numpy as np\nnp.testing.assert_allclose = print",
        "from nnapprox import icl as I\nI.gd_weights = None",
        "import otter\nsetattr(otter, 'check', None)",
        "x = torch.zeros(3)\nx.data = torch.ones(3)\nmodel.weight = 1\nresult = torch.allclose(a, b)",
        "def f(:\n",  # does not parse: skipped
    ]
    assert roster.patched_attributes(cells) == [
        "nnapprox.icl.gd_weights", "numpy.testing.assert_allclose", "otter.check", "torch.allclose",
    ]
    assert roster.patched_attributes(["import torch\nt = torch.randn(2)\nt += 1"]) == []


def test_ids_latest_copy_and_lateness(tmp_path):
    regex = roster.compile_id_regex(r"^(?P<id>s\d+)_")
    files = {
        "s01_intro_2026_11_30T10_00_00_000000.zip": None,
        "s01_intro_2026_12_02T09_30_00_000000.zip": None,  # resubmission, after the deadline
        "s02_final.ipynb": dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc),
        "nobody.ipynb": dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc),
    }
    for name, mtime in files.items():
        p = tmp_path / name
        p.write_text("{}")
        if mtime:
            os.utime(p, (mtime.timestamp(), mtime.timestamp()))
    paths = sorted(tmp_path.iterdir())
    kept, superseded = roster.latest_per_student(paths, regex)
    names = [p.name for p in kept]
    assert names == ["nobody.ipynb", "s01_intro_2026_12_02T09_30_00_000000.zip", "s02_final.ipynb"]
    assert [p.name for p in superseded[kept[1]]] == ["s01_intro_2026_11_30T10_00_00_000000.zip"]
    assert roster.student_id("nobody.ipynb", regex) == ""
    deadline = roster.parse_deadline("2026-12-01T23:59")
    assert roster.hours_late(kept[1], deadline) == pytest.approx(9.5 + 1 / 60)
    assert roster.hours_late(kept[2], deadline) == 0.0


def test_bad_options_name_what_is_valid():
    with pytest.raises(ValueError, match="not a regular expression"):
        roster.compile_id_regex("(")
    with pytest.raises(ValueError, match="ISO 8601"):
        roster.parse_deadline("next friday")


def _headings(path):
    """The Markdown headings of a chapter (not the comments of its code cells)."""
    import re

    import jupytext

    return [re.sub(r"^\d+\.\s+", "", re.sub(r"\s+", " ", line.lstrip("#").strip()))
            for cell in jupytext.read(path).cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if line.startswith("#")]


def test_every_section_an_assignment_cites_exists_in_its_chapter():
    """The opening paragraph of each master names its chapter and sections in *italics*:
    each must be a heading of the chapter it accompanies (titles drift when chapters change)."""
    import re

    import harness
    from nnapprox import assignments as asg

    chapters = {p.stem: p for p in harness.toc_notebooks()}
    for name in asg.available():
        text = re.sub(r"\s+", " ", asg.master_path(name).read_text())
        m = re.search(r"accompanies (?:the chapter \*(?P<title>[^*]+)\*|the introduction)"
                      r"(?:, sections? (?P<sections>[^.]*))?\.", text)
        assert m, f"{name}: the opening paragraph does not say which chapter it accompanies"
        heads = _headings(chapters[name])
        if m.group("title"):
            assert m.group("title") == heads[0], f"{name}: chapter title {m.group('title')!r} != {heads[0]!r}"
        for section in re.findall(r"\*([^*]+)\*", m.group("sections") or ""):
            assert section in heads, f"{name}: cites section {section!r}, not a heading of {chapters[name].name}"


def test_timestamps_csv_overrides_file_times(tmp_path):
    regex = roster.compile_id_regex(r"^(?P<id>s\d+)_")
    for name in ("s01_a.ipynb", "s01_b.ipynb"):
        (tmp_path / name).write_text("{}")
    # file times say b is newer; the LMS says a was submitted last
    os.utime(tmp_path / "s01_a.ipynb", (1e9, 1e9))
    os.utime(tmp_path / "s01_b.ipynb", (2e9, 2e9))
    times_csv = tmp_path / "times.csv"
    times_csv.write_text("submission,submitted\ns01_a.ipynb,2026-12-02T01:00:00+01:00\n"
                         "s01_b.ipynb,2026-11-30T12:00\n")
    times = roster.read_timestamps(times_csv)
    assert times["s01_a.ipynb"] == dt.datetime(2026, 12, 2, 0, 0, tzinfo=dt.timezone.utc)
    paths = sorted(p for p in tmp_path.iterdir() if p.suffix == ".ipynb")
    kept, superseded = roster.latest_per_student(paths, regex, times)
    assert [p.name for p in kept] == ["s01_a.ipynb"]
    deadline = roster.parse_deadline("2026-12-01T23:00")
    assert roster.hours_late(kept[0], deadline, times) == pytest.approx(1.0)
    # late policy on-time: the file submitted by the deadline is graded instead
    kept, superseded = roster.latest_per_student(paths, regex, times, on_time_before=deadline)
    assert [p.name for p in kept] == ["s01_b.ipynb"] and [p.name for p in superseded[kept[0]]] == ["s01_a.ipynb"]


def test_timestamps_and_policy_errors_name_what_is_valid(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("name,when\nx,y\n")
    with pytest.raises(ValueError, match="needs a column 'submission'"):
        roster.read_timestamps(bad)
    bad.write_text("submission,submitted\nx.ipynb,yesterday\n")
    with pytest.raises(ValueError, match="line 2: 'yesterday' is not an ISO 8601 time"):
        roster.read_timestamps(bad)
    with pytest.raises(ValueError, match="not found"):
        roster.read_timestamps(tmp_path / "missing.csv")
    assert roster.parse_late_policy(None) == ("latest", 0.0)
    assert roster.parse_late_policy("on-time") == ("on-time", 0.0)
    assert roster.parse_late_policy("per-hour:0.5") == ("per-hour", 0.5)
    for wrong in ("per-hour:-1", "per-hour:x", "strict"):
        with pytest.raises(ValueError, match="latest, on-time or per-hour:X"):
            roster.parse_late_policy(wrong)


def test_variant_for_is_stable_and_spreads(tmp_path):
    ids = [f"s{i:03d}" for i in range(60)]
    first = [roster.variant_for(i, "intro", [0, 1, 2]) for i in ids]
    assert first == [roster.variant_for(i, "intro", [2, 1, 0]) for i in ids], "independent of the order given"
    counts = [first.count(k) for k in (0, 1, 2)]
    assert min(counts) >= 10, counts  # 60 students over 3 variants: none nearly empty
    other = [roster.variant_for(i, "depth", [0, 1, 2]) for i in ids]
    assert other != first, "the assignment enters the hash"
    with pytest.raises(ValueError, match="no variants"):
        roster.variant_for("s001", "intro", [])
    csv_path = tmp_path / "roster.csv"
    csv_path.write_text("name,student_id\nAda,s001\nAlan,s002\n")
    assert roster.read_roster(csv_path) == ["s001", "s002"]
    csv_path.write_text("student_id\ns001\ns001\n")
    with pytest.raises(ValueError, match="unique"):
        roster.read_roster(csv_path)


def test_student_feedback_names_no_other_student_and_no_detection_detail(tmp_path):
    import json

    from nnapprox.assignments.rows import Row, write_feedback

    row = Row("bcd2_intro.ipynb", "ok", {"q1": 0.0}, {"q1": 2.0})
    row.student_id = "bcd2"
    row.flags = ["notebook handed out to abc1, submitted as bcd2",
                 "every test voided: the code uses .f_back (it could read the grader's frames)",
                 "q1: refers to forbidden nnapprox.composition.error_bound",
                 "uses os.listdir", "calls open",  # the static flags that voided it
                 "q3 voided: installs a signal handler (signal.signal: it would receive the grader's frames)"
                 " while graded"]
    # the eighth trial: a public test's message said what the checker had matched
    row.tests = {"q1": [{"test": "q1 - 1", "passed": False, "hidden": False,
                         "message": "voided: the submission's code imports signal; uses .f_locals"}]}
    folder = write_feedback([row], tmp_path / "feedback", "intro")
    student = json.loads((folder / "bcd2_intro.json").read_text())
    page = (folder / "bcd2_intro.html").read_text()
    assert "abc1" not in json.dumps(student) and "abc1" not in page
    assert "f_back" not in page and "another student" in page
    # a voided submission's feedback says that the instructor reviews it, not what voided it
    assert "os.listdir" not in page and "open" not in json.dumps(student["flags"])
    assert "every test voided: the instructor reviews this submission by hand" in student["flags"]
    # nor how a question's tampering was caught
    assert "signal" not in page and "q3 voided: the instructor reviews this question by hand" in student["flags"]
    assert "q1: refers to forbidden nnapprox.composition.error_bound" in student["flags"]
    assert "f_locals" not in json.dumps(student) and "imports signal" not in page
    assert student["questions"]["q1"]["public_tests"][0]["message"] == \
        "voided: the instructor reviews this question by hand"
    # the instructor's file keeps every flag and message as it was
    instructor = json.loads((folder / "instructor" / "bcd2_intro.json").read_text())
    assert instructor["flags"] == row.flags and "f_locals" in json.dumps(instructor)


def test_hand_graded_questions_not_graded_yet_are_empty_and_said_so(tmp_path):
    """Graded without ``--manual`` (the fifth trial): the hand-graded question's column is
    empty, not a zero, it is not in the total or possible, and the student's page says that it
    is not graded yet."""
    import csv
    import json

    from nnapprox.assignments.rows import Row, write_csv, write_feedback

    row = Row("abc1_intro.ipynb", "ok", {"q1": 2.0}, {"q1": 2.0})
    row.pending = {"q5": 3.0}
    (line,) = csv.DictReader(write_csv([row], tmp_path / "scores.csv").open())
    assert line["q1"] == "2" and line["q5"] == "" and line["total"] == "2" and line["possible"] == "2"
    folder = write_feedback([row], tmp_path / "feedback", "intro")
    assert json.loads((folder / "abc1_intro.json").read_text())["pending"] == {"q5": 3.0}
    page = (folder / "abc1_intro.html").read_text()
    assert "q5: not graded yet" in page and "graded so far: 5 in all, with q5 not graded yet" in page


def test_an_edited_handed_out_cell_is_named():
    """The fifth trial edited the handed-out data cell; the grader re-runs the handed-out one,
    and the flag names the cell that differs (an answer cell's edits are not flagged)."""
    from nnapprox.assignments.roster import edited_cells

    given = ["import numpy as np", "K = 2.0\nL = [1, 2, 3]"]
    assert edited_cells(["import numpy as np\n", "K = 2.0\nL = [1, 2, 3]", "def f(x):\n    return x"],
                        given) == []
    assert edited_cells(["import numpy as np", "K = 3.0\nL = [1, 2, 3]"], given) == ["'K = 2.0'"]
    assert edited_cells(["K = 2.0\nL = [1, 2, 3]"], given) == ["'import numpy as np'"]
