"""The private question bank: ``new-bank`` scaffolds masters outside the repository, with
structural variants that a copied public reference solution fails.

For every structural variant shipped in ``chapters/assignments/structural/``: the bank's
master builds with otter's own check (every test passes on the variant's solution), the
variant's solution scores full marks, and the public reference solution scores zero on the
replaced question while keeping every other question's points.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnapprox import assignments as asg
from nnapprox.assignments import bank

pytestmark = pytest.mark.assignments

STRUCTURAL = [(name, q, p.stem.partition("-")[2]) for name in asg.available()
              for q, paths in bank.structural_variants(name).items() for p in paths]


def test_some_structural_variants_exist():
    assert STRUCTURAL, "no structural variant under chapters/assignments/structural/"


def test_new_bank_refuses_the_repository_and_a_full_folder(tmp_path):
    with pytest.raises(asg.AssignmentError, match="inside the public repository"):
        bank.new_bank(asg.MASTERS / "bank")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("x")
    with pytest.raises(asg.AssignmentError, match="not an empty folder"):
        bank.new_bank(tmp_path / "full")


def test_structural_variant_errors_name_what_is_valid(tmp_path):
    with pytest.raises(asg.AssignmentError, match="no structural variant 'nope' of q1"):
        bank.variant_master("intro", {"q1": "nope"})
    with pytest.raises(asg.AssignmentError, match="exactly one question block"):
        bank.apply_structural(asg.master_path("intro").read_text(), "no block here")


@pytest.mark.parametrize("name,question,tag", STRUCTURAL)
def test_public_solution_scores_zero_on_a_structural_variant(name, question, tag, tmp_path, monkeypatch):
    import importlib

    from nnapprox.assignments.__main__ import main

    b = importlib.import_module("nnapprox.assignments.build")
    public = asg.build_one(name, tmp_path / "public", check=False)
    monkeypatch.setattr(b, "MASTERS", b.MASTERS)  # restored after the test (the command switches it)
    dest = tmp_path / "bank"
    assert main(["new-bank", str(dest), "--pick", "0"]) == 0
    record = json.loads((dest / "bank.json").read_text())["structural"]
    assert (dest / "README.txt").exists() and not (dest / "README.md").exists()
    if record[name].get(question) != tag:  # another variant of the same question was picked: pick this one
        (dest / f"{name}.md").write_text(bank.variant_master(name, {question: tag}))
    asg.use_masters(dest)
    assert asg.master_path(name).read_text() != (Path(b.ROOT) / "chapters" / "assignments" / f"{name}.md").read_text()
    private = asg.build_one(name, tmp_path / "private", check=True)  # otter checks the variant's own tests
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "public_solution.ipynb").write_bytes(asg.solution_notebook(public).read_bytes())
    (subs / "variant_solution.ipynb").write_bytes(asg.solution_notebook(private).read_bytes())
    rows = {Path(r.submission).stem: r for r in asg.grade(name, subs, timeout=300, jobs=2,
                                                             build_dir=private.parent)}
    own = rows["variant_solution"]
    assert own.scores == own.possible, own
    copied = rows["public_solution"]
    assert copied.scores[question] == 0.0, copied.tests[question]
    others = {q: s for q, s in copied.scores.items() if q != question}
    assert others == {q: p for q, p in copied.possible.items() if q != question}


def test_failed_build_leaves_no_solutions(tmp_path, monkeypatch):
    """A master whose build fails (here: its '# FORBIDDEN' cell names a function that does not
    exist) stops with a message naming the problem and leaves no output folder behind."""
    import importlib

    b = importlib.import_module("nnapprox.assignments.build")
    masters = tmp_path / "private"
    masters.mkdir()
    text = (b.MASTERS / "intro.md").read_text().replace("# FORBIDDEN\nq1: [", "# FORBIDDEN\nq1: [nnapprox.no_such_function, ", 1)
    (masters / "intro.md").write_text(text)
    monkeypatch.setattr(b, "MASTERS", masters)
    out = tmp_path / "out"
    (out / "intro" / "master").mkdir(parents=True)  # an earlier build's leftovers are replaced too
    with pytest.raises(asg.AssignmentError, match="names 'nnapprox.no_such_function' for q1, which does not exist"):
        asg.build_one("intro", out, check=False)
    assert not (out / "intro").exists()


def test_help_lists_every_command(capsys):
    from nnapprox.assignments.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("list", "build", "handout", "grade", "collect-manual", "new-bank"):
        assert f"\n  {command} " in text, f"--help does not describe {command}"
