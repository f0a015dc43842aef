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


WITH_VARIANTS = [name for name in asg.available() if bank.structural_variants(name)]


@pytest.mark.parametrize("name", WITH_VARIANTS)
def test_public_solution_scores_zero_on_a_structural_variant(name, tmp_path, monkeypatch):
    """The bank ``new-bank`` makes swaps in a structural variant for every question that has
    one; on each of them the copied public solution scores zero, and on the others full marks.
    A question with several variants is checked once per variant (``--pick``)."""
    import importlib

    from nnapprox.assignments.__main__ import main

    b = importlib.import_module("nnapprox.assignments.build")
    public = asg.build_one(name, tmp_path / "public", check=False)
    monkeypatch.setattr(b, "MASTERS", b.MASTERS)  # restored after the test (the command switches it)
    available = bank.structural_variants(name)
    for pick in range(max(len(paths) for paths in available.values())):
        dest = tmp_path / f"bank{pick}"
        b.MASTERS = Path(b.ROOT) / "chapters" / "assignments"
        assert main(["new-bank", str(dest), "--pick", str(pick)]) == 0
        record = json.loads((dest / "bank.json").read_text())
        assert isinstance(record["grading_seed"], int)
        swapped = record["structural"][name]
        assert set(swapped) == set(available), "every question with a structural variant gets one"
        assert (dest / "README.txt").exists() and not (dest / "README.md").exists()
        asg.use_masters(dest)
        assert asg.master_path(name).read_text() != (b.ROOT / "chapters" / "assignments" / f"{name}.md").read_text()
        private = asg.build_one(name, tmp_path / f"private{pick}", check=True)  # otter checks the variants' tests
        subs = tmp_path / f"subs{pick}"
        subs.mkdir()
        (subs / "public_solution.ipynb").write_bytes(asg.solution_notebook(public).read_bytes())
        (subs / "variant_solution.ipynb").write_bytes(asg.solution_notebook(private).read_bytes())
        rows = {Path(r.submission).stem: r for r in asg.grade(name, subs, timeout=600, jobs=2,
                                                                 build_dir=private.parent)}
        own = rows["variant_solution"]
        assert own.scores == own.possible, own
        copied = rows["public_solution"]
        graded = [q for q in swapped if q in copied.possible]  # hand-graded questions are not scored here
        for q in graded:
            assert copied.scores[q] == 0.0, (q, copied.tests[q])
        others = {q: s for q, s in copied.scores.items() if q not in swapped}
        assert others == {q: p for q, p in copied.possible.items() if q not in swapped}


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


def test_grading_seed_reaches_hidden_tests_only():
    """``GRADING_SEED`` becomes the build's integer in hidden tests; anywhere else (a public
    test, a handed-out cell) the build stops, since the students' notebook would hold the seed."""
    import importlib

    import nbformat

    b = importlib.import_module("nnapprox.assignments.build")
    hidden = ('""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\n'
              "def test_h(f):\n    rng = np.random.default_rng(GRADING_SEED)\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(hidden),
                                         nbformat.v4.new_code_cell("x = 1  # MY_GRADING_SEED_X is another name")])
    assert b._apply_grading_seed(nb, "demo", 987654) == 1
    assert "default_rng(987654)" in nb.cells[0].source and "GRADING_SEED)" not in nb.cells[0].source
    public = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def test_p(f):\n    f(GRADING_SEED)\n")])
    with pytest.raises(asg.AssignmentError, match="only hidden tests may use"):
        b._apply_grading_seed(public, "demo", 1)
    with pytest.raises(asg.AssignmentError, match="grading_seed must be a non-negative integer"):
        asg.build_one("scaling", Path("/nonexistent"), grading_seed=-1)


def test_grading_seed_comes_from_the_bank(tmp_path, monkeypatch):
    import importlib

    b = importlib.import_module("nnapprox.assignments.build")
    monkeypatch.setattr(b, "MASTERS", tmp_path)
    assert b.bank_grading_seed() is None
    (tmp_path / "bank.json").write_text(json.dumps({"grading_seed": 42}))
    assert b.bank_grading_seed() == 42
    (tmp_path / "bank.json").write_text(json.dumps({"grading_seed": "42"}))
    with pytest.raises(asg.AssignmentError, match="non-negative integer"):
        b.bank_grading_seed()


def test_grading_seed_is_in_the_autograder_and_not_in_the_handout(tmp_path):
    import zipfile

    built = asg.build_one("scaling", tmp_path, check=False, grading_seed=8675309)
    assert "8675309" not in asg.student_notebook(built).read_text()
    assert "GRADING_SEED" not in asg.student_notebook(built).read_text()
    with zipfile.ZipFile(asg.autograder_zip(built)) as z:
        assert "default_rng(8675309)" in z.read("tests/q2.py").decode()
