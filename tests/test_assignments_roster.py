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
