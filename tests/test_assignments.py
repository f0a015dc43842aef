"""The otter-grader assignments (``chapters/assignments/*.md``) and their grading command.

For every assignment: the solutions score 100%, the untouched student notebook scores less on
every autograded question, a deliberately wrong solution fails the question it targets, and
the student notebook holds no solution code and no hidden test. For the batch grader: a folder
with a good, a wrong, a crashing, a looping, a memory-hungry and a patching submission gives
one row each with the right scores, statuses and flags within the time limit. Tampering has
its own tests (``test_assignments_integrity.py``), as have hand-graded questions
(``test_assignments_manual.py``) and the question bank (``test_assignments_bank.py``).

Cost: each assignment is built once (without otter's own test run) and three notebooks per
assignment are graded in one batch, two at a time; both on first use, so ``-k <name>`` checks
one assignment (plus ``intro`` for the batch-grader tests unless they are deselected).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import nbformat
import pytest

from nnapprox import assignments as asg
from nnapprox.assignments import roster

pytestmark = pytest.mark.assignments

NAMES = asg.available()

# One deliberately wrong solution per assignment: (question it targets, line of the reference
# solution, wrong replacement). The replacement must still run.
WRONG = {
    "intro": ("q1", "total += epss[j] * math.prod(Ks[j + 1:])", "total += epss[j] * math.prod(Ks[j:])"),
    "icl": ("q2", "return -(v_y * Q_x.T @ K_x + torch.outer(Q_x.T @ k_y, v))", "return -(v_y * Q_x.T @ K_x)"),
    "diffusion": ("q1", "return (lam[:, None] * m - z) / sigma2[:, None]", "return (m - z) / sigma2[:, None]"),
    "scaling": ("q3", "return -alpha * excess / (E + excess)", "return -alpha * excess / E"),
    "failures": ("q2", "low = grads[degree <= k]", "low = grads[degree < k]"),
    "universal": ("q2", "return (delta * total / (2**p * (p + 1))) ** (1.0 / p)",
                  "return (delta * total / (2**p * p)) ** (1.0 / p)"),
    "depth": ("q2", "F = ((-g + a) / (2 * a)).clamp(0.0, 1.0)", "F = ((-g + a) / a).clamp(0.0, 1.0)"),
    "sequential": ("q1", "return -torch.log2((own + alpha) / (t + m * alpha))",
                   "return -torch.log2((own + alpha) / (t + alpha))"),
    "algorithms": ("q2", "tau2.append(sigma2 + v * t / (v + t) / delta)",
                   "tau2.append(sigma2 + t / (1 + t) / delta)"),
}

GRADE_TIMEOUT = 300.0  # only reached when something is broken
LOOP_TIMEOUT = 120.0  # the non-terminating submission: a short limit (a good one needs ~10 s CPU, up to ~45 s on a busy machine)
CELL_TIMEOUT = 30.0  # the looping cell is stopped after this; the rest of the notebook still runs


def _write_variant(solution: Path, dest: Path, edit) -> Path:
    nb = nbformat.read(solution, as_version=4)
    edit(nb)
    nbformat.write(nb, dest)
    return dest


def _replace_line(old: str, new: str):
    def edit(nb):
        hits = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        assert len(hits) == 1, f"the wrong-solution line must occur in exactly one cell: {old!r}"
        hits[0].source = hits[0].source.replace(old, new)

    return edit


def _insert_code(index: int, source: str):
    def edit(nb):
        nb.cells.insert(index, nbformat.v4.new_code_cell(source))

    return edit


def _first_answer_cell(nb) -> int:
    tags = {"otter_answer_cell", "otter_assign_solution_cell"}
    return next(i for i, c in enumerate(nb.cells)
                if c.cell_type == "code" and tags & set(c.metadata.get("tags", [])))


class _Lazy(dict):
    """A dict that computes a missing entry on first access (so ``-k <name>`` builds one assignment)."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __missing__(self, name):
        self[name] = value = self._make(name)
        return value


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("assignments")
    return _Lazy(lambda name: asg.build_one(name, out, check=False))


@pytest.fixture(scope="session")
def graded(built, tmp_path_factory) -> dict[str, dict[str, asg.Row]]:
    """Solutions, untouched student notebook and the wrong solution of an assignment, graded."""

    def grade(name):
        folder = built[name]
        subs = tmp_path_factory.mktemp(f"subs-{name}")
        solution = asg.solution_notebook(folder)
        (subs / "solution.ipynb").write_bytes(solution.read_bytes())
        (subs / "student.ipynb").write_bytes(asg.student_notebook(folder).read_bytes())
        if name in WRONG:
            _, old, new = WRONG[name]
            _write_variant(solution, subs / "wrong.ipynb", _replace_line(old, new))
        rows = asg.grade(name, subs, timeout=GRADE_TIMEOUT, jobs=2, build_dir=folder.parent,
                         out=subs / "scores.csv")
        return {Path(r.submission).stem: r for r in rows}

    return _Lazy(grade)


def test_every_chapter_in_the_toc_has_an_assignment():
    """One assignment per notebook of ``_toc.yml`` (the introduction included): a chapter
    cannot ship without its problem set."""
    import harness

    stems = {p.stem for p in harness.toc_notebooks()}
    assert "intro" in stems
    missing = sorted(stems - set(NAMES))
    assert not missing, f"chapters without an assignment in chapters/assignments/: {missing}"


def _autograded_questions(text: str) -> list[tuple[str, object, str]]:
    """(name, points, test kinds) of each autograded question block: kinds 'P' public, 'H' hidden."""
    import yaml

    out = []
    for block in text.split("# BEGIN QUESTION\n")[1:]:
        header = yaml.safe_load(block.split("```")[0])
        if header.get("manual"):
            continue
        tests = block.split("# END TESTS")[0].partition("# BEGIN TESTS")[2]
        cells = [c for c in tests.split("```{code-cell} ipython3\n")[1:] if "def test_" in c]
        out.append((header["name"], header["points"], "".join("H" if "hidden: true" in c else "P" for c in cells)))
    return out


def test_public_tests_carry_a_quarter_of_every_question():
    """Every autograded question, in every master and structural variant, gives points per test:
    its public tests together a quarter of the question, its hidden tests three quarters, so a
    notebook that passes only what the student can see scores the same share everywhere."""
    folder = Path(__file__).resolve().parents[1] / "chapters" / "assignments"
    paths = sorted(folder.glob("*.md")) + sorted((folder / "structural").glob("*/*.md"))
    assert len(paths) >= 9
    seen = 0
    for path in paths:
        for name, points, kinds in _autograded_questions(path.read_text()):
            where = f"{path.name}/{name}"
            assert isinstance(points, list) and len(points) == len(kinds), f"{where}: one point value per test"
            assert "P" in kinds and "H" in kinds, f"{where}: needs public and hidden tests ({kinds})"
            public = sum(p for p, k in zip(points, kinds) if k == "P")
            assert public == pytest.approx(sum(points) / 4), f"{where}: public tests carry {public} of {sum(points)}"
            seen += 1
    assert seen >= 30


def _titles(chapter: Path) -> set[str]:
    """The chapter's title and section headings (outside code cells), numbering and markup removed."""
    out, in_code = set(), False
    for line in chapter.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"^(#{1,4}) (.+)$", line)
        if m:
            text = re.sub(r"^\d+\.\s*", "", m.group(2).strip())  # "3. Barron" -> "Barron"
            out.add(re.sub(r"[`*]", "", text).strip())
    return out


@pytest.mark.parametrize("name", NAMES)
def test_cited_chapter_and_sections_exist(name):
    """The opening paragraph cites the chapter and sections in italics; each must be a heading
    of the chapter (the title or a section), so renaming a section cannot leave a stale
    citation behind."""
    import harness

    root = Path(__file__).resolve().parents[1]
    text = (root / "chapters" / "assignments" / f"{name}.md").read_text()
    intro = text.split("This problem set accompanies", 1)[1].split("\n\n", 1)[0]
    intro = re.split(r"\.\s+[A-Z$]", intro, maxsplit=1)[0]  # the first sentence
    cited = [re.sub(r"\s+", " ", c).strip() for c in re.findall(r"\*([^*]+)\*", intro)]
    titles = _titles(harness.find_chapter(name))
    assert cited or "introduction" in intro, f"{name}: the opening paragraph cites no section"
    stale = [c for c in cited if c not in titles]
    assert not stale, f"{name}: cited but not a heading of its chapter: {stale}"


@pytest.mark.parametrize("name", NAMES)
def test_every_assignment_has_a_wrong_solution(name):
    assert name in WRONG, f"add a deliberately wrong solution for {name} to WRONG"


@pytest.mark.parametrize("name", NAMES)
def test_solutions_score_full_marks(graded, name):
    row = graded[name]["solution"]
    assert row.status == "ok", row.message
    assert len(row.possible) >= 3
    assert row.scores == row.possible, row
    assert row.flags == [], f"{name}: the reference solution is flagged: {row.flags}"


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_scores_less_on_every_question(graded, name):
    row = graded[name]["student"]
    assert row.possible == graded[name]["solution"].possible
    for question, possible in row.possible.items():
        assert row.scores[question] < possible, f"{name}/{question}: the tests pass without an answer"


@pytest.mark.parametrize("name", NAMES)
def test_wrong_solution_fails_its_question(graded, name):
    question, _, _ = WRONG[name]
    row = graded[name]["wrong"]
    assert row.scores[question] < row.possible[question], f"{name}/{question} accepts a wrong solution"
    others = {q: s for q, s in row.scores.items() if q != question}
    assert others == {q: p for q, p in row.possible.items() if q != question}


def _solution_lines(name: str) -> list[str]:
    """Distinctive lines of the reference solutions in the master (code and manual answers)."""
    nb = asg.master_notebook(name)
    lines, in_solution = [], False
    for cell in nb.cells:
        text = cell.source.strip()
        if cell.cell_type == "raw":
            if text.startswith("# BEGIN SOLUTION"):
                in_solution = True
            elif text.startswith("# END SOLUTION"):
                in_solution = False
            continue
        if not in_solution:
            continue
        if cell.cell_type == "markdown":
            lines += [line.strip() for line in cell.source.splitlines() if len(line.strip()) >= 30]
            continue
        block = False
        for line in cell.source.splitlines():
            stripped = line.strip()
            if re.match(r"#\s*BEGIN SOLUTION", stripped):
                block = True
            elif re.match(r"#\s*END SOLUTION", stripped):
                block = False
            elif block or stripped.endswith("# SOLUTION"):
                code = stripped.removesuffix("# SOLUTION").strip()
                if stripped.endswith("# SOLUTION") and re.match(r"[\w., \[\]]+=[^=]", code):
                    code = code.split("=", 1)[1].strip()  # the student keeps "name = ..."
                if len(code) >= 15:
                    lines.append(code)
    return lines


def _hidden_test_names(name: str) -> list[str]:
    nb = asg.master_notebook(name)
    return [m.group(1) for c in nb.cells if c.cell_type == "code" and re.search(r"hidden:\s*true", c.source)
            for m in [re.search(r"def (\w+)\(", c.source)] if m]


SCALING_FITS = {  # scaling q1 answered by a library fit (each exact): forbidden, so no hidden points
    "lstsq": ("u, v = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))\n"
              "    r = np.sqrt(np.ones_like(u) if w is None else np.asarray(w, dtype=float))\n"
              "    (c, s), *_ = np.linalg.lstsq(np.stack([r, r * u], 1), r * v, rcond=None)\n"
              "    return float(s), float(np.exp(c))"),
    "polyfit": ("s, c = np.polyfit(np.log(x), np.log(y), 1, w=None if w is None else np.sqrt(w))\n"
                "    return float(s), float(np.exp(c))"),
    "linregress": ("from scipy.stats import linregress\n"
                   "    if w is not None:\n"
                   "        u, v, r = np.log(x), np.log(y), np.asarray(w, dtype=float)\n"
                   "        ub, vb = (r * u).sum() / r.sum(), (r * v).sum() / r.sum()\n"
                   "        s = float((r * (u - ub) * (v - vb)).sum() / (r * (u - ub) ** 2).sum())\n"
                   "        return s, float(np.exp(vb - s * ub))\n"
                   "    fit = linregress(np.log(x), np.log(y))\n"
                   "    return float(fit.slope), float(np.exp(fit.intercept))"),
}


def test_library_fits_are_forbidden_in_scaling_q1(built, tmp_path):
    """np.linalg.lstsq, np.polyfit and scipy.stats.linregress answer scaling q1 (a weighted
    log-log fit) exactly; each is flagged and raises while q1's tests run (no points for q1,
    the hidden test's included) and costs nothing elsewhere; the honest reference solution
    scores every point, unflagged."""
    folder = built["scaling"]
    solution = asg.solution_notebook(folder)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "honest.ipynb").write_bytes(solution.read_bytes())

    def with_body(code):
        def edit(nb):
            (cell,) = [c for c in nb.cells if c.cell_type == "code" and "def loglog_fit" in c.source]
            head = cell.source.index('"""', cell.source.index('"""') + 3) + 3
            cell.source = cell.source[:head] + "\n    " + code + "\n"
        return edit

    for stem, code in SCALING_FITS.items():
        _write_variant(solution, subs / f"{stem}.ipynb", with_body(code))
    rows = {Path(r.submission).stem: r for r in asg.grade("scaling", subs, timeout=GRADE_TIMEOUT, jobs=2,
                                                           build_dir=folder.parent, out=subs / "scores.csv")}
    honest = rows["honest"]
    assert honest.status == "ok" and honest.scores == honest.possible and not honest.flags, honest
    names = {"lstsq": "numpy.linalg.lstsq", "polyfit": "numpy.polyfit", "linregress": "scipy.stats.linregress"}
    for stem, name in names.items():
        row = rows[stem]
        assert f"q1: refers to forbidden {name}" in row.flags, (stem, row.flags)
        # the forbidden functions raise during all of q1's tests (the public one as well)
        hidden = [t for t in row.tests["q1"] if t["hidden"]]
        assert hidden and not any(t["passed"] for t in row.tests["q1"]), (stem, row.tests["q1"])
        assert all("forbids" in t["message"] for t in row.tests["q1"]), (stem, row.tests["q1"])
        assert row.scores["q1"] == 0.0, (stem, row.scores)
        assert {q: v for q, v in row.scores.items() if q != "q1"} == \
            {q: v for q, v in honest.scores.items() if q != "q1"}, (stem, row.scores)


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_has_no_solutions(built, name):
    nb = nbformat.read(asg.student_notebook(built[name]), as_version=4)
    text = "\n".join(c.source for c in nb.cells) + json.dumps(nb.metadata)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "# SOLUTION", "# BEGIN TESTS", "# BEGIN QUESTION",
                   "ASSIGNMENT CONFIG", "Reference answer"):
        assert marker not in text, f"{name}: student notebook contains {marker!r}"
    lines = _solution_lines(name)
    assert len(lines) >= 3, f"{name}: could not extract the reference solutions"
    for line in lines:
        assert line not in text, f"{name}: student notebook contains a solution line: {line!r}"
    hidden = _hidden_test_names(name)
    assert hidden, f"{name}: no hidden tests"
    for test_name in hidden:
        assert test_name not in text, f"{name}: student notebook contains hidden test {test_name}"


def test_batch_grading_survives_crash_and_infinite_loop(built, tmp_path):
    """good / wrong / crashing / non-terminating / memory-hungry / patching: one row each, with
    the right scores, statuses and flags, in time, and a feedback file per submission."""
    folder = built["intro"]
    solution = asg.solution_notebook(folder)
    nb = nbformat.read(solution, as_version=4)
    first = _first_answer_cell(nb)
    question, old, new = WRONG["intro"]
    (tmp_path / "a_good.ipynb").write_bytes(solution.read_bytes())
    _write_variant(solution, tmp_path / "b_wrong.ipynb", _replace_line(old, new))
    # crashes in the first answer cell: that question is lost, the rest is still graded
    def crash(nb):
        nb.cells[first].source = 'raise RuntimeError("student bug")\n' + nb.cells[first].source

    _write_variant(solution, tmp_path / "c_crash.ipynb", crash)
    # never terminates (sleeps rather than spins, to spare the test machine's CPU)
    _write_variant(solution, tmp_path / "d_loop.ipynb",
                   _insert_code(first, "import time\nwhile True:\n    time.sleep(0.05)"))
    # asks for 8 GiB: stopped by the worker's memory limit, the rest still graded
    _write_variant(solution, tmp_path / "e_memory.ipynb",
                   _insert_code(first, "import torch\nhog = torch.ones(2**31)"))
    # fakes every allclose-based test in its own kernel and edits its VARIANT cell (the hidden
    # tests read their constants from it): graded, but flagged twice
    def patch(nb):
        _insert_code(first, "import torch\ntorch.allclose = lambda *a, **k: True")(nb)
        (cell,) = [c for c in nb.cells if c.source.lstrip().startswith(roster.VARIANT_HEADER)]
        cell.source += "\nVARIANT = dict(VARIANT)"

    _write_variant(solution, tmp_path / "f_patch.ipynb", patch)
    subs = tmp_path / "subs"
    subs.mkdir()
    for f in tmp_path.glob("*.ipynb"):
        f.rename(subs / f.name)
    out = tmp_path / "scores.csv"
    start = time.perf_counter()
    rows = asg.grade("intro", subs, timeout=LOOP_TIMEOUT, jobs=2, build_dir=folder.parent, out=out,
                     memory_mb=4096, cell_timeout=CELL_TIMEOUT)
    elapsed = time.perf_counter() - start

    by = {Path(r.submission).stem: r for r in rows}
    assert list(by) == ["a_good", "b_wrong", "c_crash", "d_loop", "e_memory", "f_patch"]
    assert by["e_memory"].status == "error" and "allocate" in by["e_memory"].message
    assert by["e_memory"].scores == by["a_good"].possible  # its own cell failed, the answers stand
    assert by["f_patch"].flags == ["reassigns torch.allclose",
                                   "VARIANT cell edited (graded with the handed-out constants)"]
    assert by["f_patch"].scores == by["a_good"].possible  # the patch stayed in its kernel
    assert not by["a_good"].flags
    feedback = json.loads((tmp_path / "feedback" / "instructor" / "b_wrong.json").read_text())
    tests = feedback["questions"][question]["tests"]
    assert tests and any(not t["passed"] for t in tests) and all("hidden" in t for t in tests)
    assert all(t["passed"] for q in feedback["questions"] if q != question
               for t in feedback["questions"][q]["tests"])
    # the student's copy: public tests with messages, hidden tests only counted
    mine = json.loads((tmp_path / "feedback" / "b_wrong.json").read_text())["questions"][question]
    hidden = [t for t in tests if t["hidden"]]
    assert hidden and mine["hidden_tests"] == len(hidden)
    assert all(t["test"] not in {h["test"] for h in hidden} for t in mine["public_tests"])
    page = (tmp_path / "feedback" / "b_wrong.html").read_text()
    assert "hidden test(s): results not shown" in page and not any(h["message"] in page for h in hidden
                                                                   if h["message"] != "passed")
    full = by["a_good"].possible
    assert (by["a_good"].status, by["a_good"].scores) == ("ok", full)
    assert by["b_wrong"].status == "ok"
    assert by["b_wrong"].scores == {**full, question: 0.0}
    assert by["c_crash"].status == "error" and "student bug" in by["c_crash"].message
    assert by["c_crash"].scores == {**full, question: 0.0}
    # the looping cell is stopped on its own; every answer is still graded
    assert by["d_loop"].status == "error" and "stopped at the cell time limit" in by["d_loop"].message
    assert by["d_loop"].scores == full
    assert by["d_loop"].seconds < LOOP_TIMEOUT + 20
    assert elapsed < 3 * LOOP_TIMEOUT + 60

    import csv

    table = list(csv.DictReader(out.open()))
    assert list(table[0])[:3] == ["submission", "student_id", "status"]
    assert list(table[0])[-8:] == ["total", "possible", "late_hours", "late_penalty", "flags", "superseded",
                                   "seconds", "message"]
    assert [r["status"] for r in table] == ["ok", "ok", "error", "error", "error", "ok"]
    assert table[5]["flags"].startswith("reassigns torch.allclose; VARIANT cell edited")


def test_dead_kernel_and_broken_file_are_errors(built, tmp_path):
    folder = built["intro"]
    solution = asg.solution_notebook(folder)
    _write_variant(solution, tmp_path / "dies.ipynb", _insert_code(1, "import os\nos._exit(3)"))
    (tmp_path / "garbage.ipynb").write_text("this is not a notebook")
    rows = asg.grade("intro", tmp_path, timeout=GRADE_TIMEOUT, jobs=2, build_dir=folder.parent)
    assert [(r.submission, r.status, r.total) for r in rows] == [("dies.ipynb", "error", 0.0),
                                                                  ("garbage.ipynb", "error", 0.0)]
    assert all(r.message for r in rows)


def test_submission_past_its_time_limit_is_killed(built, tmp_path):
    """A cell that loops longer than the whole submission's limit (the cell limit set above it):
    the worker and its kernel are killed, the row says ``timeout`` with every score zero."""
    folder = built["intro"]
    loop = _write_variant(asg.solution_notebook(folder), tmp_path / "loop.ipynb",
                          _insert_code(1, "import time\nwhile True:\n    time.sleep(0.05)"))
    row = asg.grade_submission(asg.autograder_zip(folder), loop, timeout=40.0, cell_timeout=600.0)
    assert row.status == "timeout" and "killed after 40 s" in row.message
    assert set(row.scores.values()) == {0.0} and row.seconds < 60


def test_cli_errors(tmp_path, capsys):
    from nnapprox.assignments.__main__ import main

    assert main(["grade", "no-such-assignment", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown assignment 'no-such-assignment'" in err and "intro" in err
    assert main(["grade", "intro", str(tmp_path / "missing")]) == 2
    assert "submissions folder not found" in capsys.readouterr().err
    assert main(["grade", "intro", str(tmp_path)]) == 2
    assert "no submissions" in capsys.readouterr().err
    assert main(["build", "nope"]) == 2
    assert main(["list"]) == 0
    assert "intro" in capsys.readouterr().out.split()


def test_a_second_run_into_the_same_folder_refuses_unless_overwrite(tmp_path, monkeypatch, capsys):
    """An earlier run's CSV and feedback stop a batch before anything is built or graded, with
    a message naming --overwrite; with it the files are replaced. (Grading itself is stubbed:
    only what happens to the output files is tested here.)"""
    import importlib

    from nnapprox.assignments.__main__ import main

    grade_mod = importlib.import_module("nnapprox.assignments.grade")  # the module, not the function
    subs = tmp_path / "subs"
    subs.mkdir()
    for stem in ("ann", "bob"):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), subs / f"{stem}.ipynb")
    zip_path = tmp_path / "autograder.zip"
    zip_path.write_bytes(b"")
    score = {"q1": 1.0}
    monkeypatch.setattr(grade_mod, "autograder_zip", lambda built: zip_path)
    monkeypatch.setattr(grade_mod, "_prepare", lambda name, built, stale: {
        "built": built, "zip": zip_path, "points": {"q1": 2.0}, "release": None, "handout": zip_path,
        "given": [], "variant_cell": None, "forbidden": {}})
    monkeypatch.setattr(grade_mod, "grade_submission", lambda zip_, sub, *a, **k: asg.Row(
        sub.name, "ok", dict(score), {"q1": 2.0}))
    out = tmp_path / "results" / "scores-intro.csv"
    asg.grade("intro", subs, out=out, sandbox="off", build_dir=tmp_path / "build")
    first = (out.parent / "feedback" / "ann.json").read_text()
    assert json.loads(first)["total"] == 1.0
    score["q1"] = 2.0  # the regrade (say after --accept) would give more
    with pytest.raises(asg.AssignmentError, match="earlier run's results would be overwritten.*--overwrite"):
        asg.grade("intro", subs, out=out, sandbox="off", build_dir=tmp_path / "build")
    assert (out.parent / "feedback" / "ann.json").read_text() == first  # untouched
    assert main(["grade", "intro", str(subs), "--out", str(out), "--sandbox", "off",
                 "--build-dir", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and "scores-intro.csv" in err
    # only the feedback of a submission of this batch counts: a fresh CSV name is not enough
    with pytest.raises(asg.AssignmentError, match="feedback.*ann.json"):
        asg.grade("intro", subs, out=out.with_name("scores-again.csv"), sandbox="off", build_dir=tmp_path / "build")
    assert main(["grade", "intro", str(subs), "--out", str(out), "--sandbox", "off", "--overwrite",
                 "--build-dir", str(tmp_path / "build")]) == 0
    assert json.loads((out.parent / "feedback" / "ann.json").read_text())["total"] == 2.0
    assert out.read_text().splitlines()[1].startswith("ann.ipynb,ann,ok,2,")
    # another folder keeps both runs apart
    other = tmp_path / "second" / "scores-intro.csv"
    asg.grade("intro", subs, out=other, sandbox="off", build_dir=tmp_path / "build")
    assert (other.parent / "feedback" / "bob.html").exists()


def test_release_ties_the_handed_out_notebook_to_its_autograder(built, tmp_path, monkeypatch):
    import importlib

    from nnapprox.assignments import roster

    asg_build = importlib.import_module("nnapprox.assignments.build")  # the module, not the function

    folder = built["intro"]
    manifest = asg_build.check_release(folder, "intro")
    assert manifest["master_sha256"] == asg_build.master_sha256("intro")
    assert roster.notebook_release(asg.student_notebook(folder)) == manifest["release"]
    student = nbformat.read(asg.student_notebook(folder), as_version=4)
    assert "show_question_points" not in json.dumps(student.metadata)
    # a notebook handed out with another release is graded but flagged
    student.metadata["nnapprox"]["release"] = "0123456789ab"
    nbformat.write(student, tmp_path / "old_release.ipynb")
    (row,) = asg.grade("intro", tmp_path, timeout=GRADE_TIMEOUT, build_dir=folder.parent)
    assert row.flags == [f"handed-out release 0123456789ab, graded with {manifest['release']}"]
    # a master edited after the build: grading stops with a message, unless told otherwise
    monkeypatch.setattr(asg_build, "master_sha256", lambda name: "f" * 64)
    with pytest.raises(asg.AssignmentError, match="changed after"):
        asg.grade("intro", tmp_path, timeout=GRADE_TIMEOUT, build_dir=folder.parent)


def test_hand_graded_questions_are_collected_and_their_points_merged(built, tmp_path):
    """collect-manual: one review page per hand-graded question with the reference answer and
    every (anonymised) answer, a points template; grade --manual adds the points."""
    from nnapprox.assignments import manual

    questions = manual.manual_questions("icl")
    assert [q.name for q in questions] == ["q4", "q7"] and "Reference answer" in questions[0].reference
    folder = built["icl"]
    subs = tmp_path / "subs"
    subs.mkdir()
    student = nbformat.read(asg.student_notebook(folder), as_version=4)
    answer = next(c for c in student.cells if c.cell_type == "markdown"
                  and "otter_answer_cell" in c.metadata.get("tags", []))
    answer.source = "One LSA layer is linear in the query and quadratic in the context."
    nbformat.write(student, subs / "s01_icl.ipynb")
    (subs / "s02_icl.ipynb").write_bytes(asg.student_notebook(folder).read_bytes())
    csv_path = manual.collect("icl", subs, tmp_path / "manual", anonymise=True, id_regex=r"^(s\d+)_")
    page = (tmp_path / "manual" / "manual-icl-q4.html").read_text()
    assert "Reference answer" in page and "quadratic in the context" in page and "S01" in page
    assert "s01_icl" not in page  # anonymised; the key is a separate file
    assert "s01_icl.ipynb,s01" in (tmp_path / "manual" / "manual-icl-key.csv").read_text()
    with pytest.raises(asg.AssignmentError, match="line 2, column q4: '' is not a number"):
        manual.read_points("icl", csv_path)
    # the labels are in a random order: which one is s01 the key says
    key = dict(line.split(",")[1::-1] for line in
               (tmp_path / "manual" / "manual-icl-key.csv").read_text().splitlines()[1:])
    first, second = key["s01_icl.ipynb"], key["s02_icl.ipynb"]
    text = csv_path.read_text()  # submission_file (empty), review_label, student_id, q4, q7, comment
    text = text.replace(f",{first},,,,", f",{first},,1.5,2,").replace(f",{second},,,,", f",{second},,3,0,")
    csv_path.write_text(text)
    with pytest.raises(asg.AssignmentError, match="3 is outside 0 to 2 points"):
        manual.read_points("icl", csv_path)
    csv_path.write_text(csv_path.read_text().replace(f",{second},,3,0,", f",{second},,0,0,"))
    assert manual.read_points("icl", csv_path) == {"s01_icl.ipynb": {"q4": 1.5, "q7": 2.0},
                                                   "s02_icl.ipynb": {"q4": 0.0, "q7": 0.0}}
    import csv

    filled = list(csv.DictReader(csv_path.open()))
    next(r for r in filled if r["review_label"] == first)["comment_q4"] = "Say why it is quadratic."
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(filled[0]))
        writer.writeheader()
        writer.writerows(filled)
    rows = asg.grade("icl", subs, timeout=GRADE_TIMEOUT, jobs=2, build_dir=folder.parent, manual=csv_path)
    by = {r.submission: r for r in rows}
    assert by["s01_icl.ipynb"].comments == {"q4": "Say why it is quadratic."}
    assert by["s01_icl.ipynb"].scores["q4"] == 1.5 and by["s01_icl.ipynb"].possible["q4"] == 2.0
    assert by["s01_icl.ipynb"].scores["q7"] == 2.0 and by["s02_icl.ipynb"].scores["q4"] == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_two_variants_differ_and_each_grades_its_own_solution_at_full_marks(name, tmp_path):
    """``build NAME --variant K``: the constants differ, and each variant's autograder gives its
    own reference solution every point (its hidden tests compute their references from the
    variant's constants). Every assignment has variants; otter's own check of the solution
    runs for the intro only (grading below checks the same thing for all)."""
    assert set(asg.variants(name)) >= {0, 1}, f"{name} has no variants 0 and 1"
    cells = {}
    for k in (0, 1):
        out = tmp_path / f"v{k}"
        folder = asg.build_one(name, out, check=name == "intro", variant=k)
        assert json.loads((folder / "release.json").read_text())["variant"] == k
        student = nbformat.read(asg.student_notebook(folder), as_version=4)
        assert student.metadata["nnapprox"]["variant"] == k
        cells[k] = [c.source for c in student.cells if c.source.lstrip().startswith("# the constants")]
        subs = tmp_path / f"subs{k}"
        subs.mkdir()
        (subs / "solution.ipynb").write_bytes(asg.solution_notebook(folder).read_bytes())
        (row,) = asg.grade(name, subs, timeout=GRADE_TIMEOUT, build_dir=out, out=subs / "scores.csv")
        assert row.status == "ok" and row.scores == row.possible, (name, k, row)
    assert len(cells[0]) == len(cells[1]) == 1 and cells[0] != cells[1]


def test_variant_and_masters_errors(tmp_path, capsys, monkeypatch):
    import importlib

    b = importlib.import_module("nnapprox.assignments.build")  # the module (the package's `build` is a function)

    with pytest.raises(asg.AssignmentError, match="has variants"):
        asg.build_one("intro", tmp_path, variant=99)
    # a master without a '# VARIANTS' cell: a copy of icl's with that cell removed, in a private folder
    masters = tmp_path / "private"
    masters.mkdir()
    text = (b.MASTERS / "icl.md").read_text()
    text, removed = re.subn(r"```\{raw-cell\}\n# VARIANTS\n.*?```\n", "", text, flags=re.S)
    assert removed == 1
    (masters / "icl.md").write_text(text)
    monkeypatch.setattr(b, "MASTERS", masters)
    assert asg.variants("icl") == {}
    with pytest.raises(asg.AssignmentError, match="has no variants"):
        asg.build_one("icl", tmp_path / "out", variant=1)
    from nnapprox.assignments.__main__ import main

    assert main(["--masters", str(tmp_path / "nowhere"), "list"]) == 2
    assert "not a folder holding assignment masters" in capsys.readouterr().err


def test_private_masters_folder(tmp_path, monkeypatch):
    """``--masters DIR`` reads the assignments from an instructor's own folder."""
    import importlib

    from nnapprox.assignments.__main__ import main

    b = importlib.import_module("nnapprox.assignments.build")  # the module (the package's `build` is a function)

    masters = tmp_path / "private"
    masters.mkdir()
    (masters / "mine.md").write_text((b.MASTERS / "intro.md").read_text())
    monkeypatch.setattr(b, "MASTERS", b.MASTERS)  # restored after the test
    assert main(["--masters", str(masters), "list"]) == 0
    assert asg.available() == ["mine"]


def test_autograder_zip_grades_in_a_fresh_environment(built, tmp_path):
    """The zip says what grading needs: a new virtual environment with only the pip packages
    of the zip's environment.yml (the library's wheel inside the zip, at otter's container path
    mapped to where the zip is unpacked) grades the reference solution at full marks with
    ``otter run``."""
    import subprocess
    import sys
    import zipfile

    import yaml

    folder = built["intro"]
    src = tmp_path / "autograder"
    with zipfile.ZipFile(asg.autograder_zip(folder)) as z:
        z.extractall(src)
    env = yaml.safe_load((src / "environment.yml").read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert any(p.startswith("torch==") for p in pip) and any(p.endswith(".whl") for p in pip)
    assert "python=3.11" in env["dependencies"], "the project's Python"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in pip, "CPU wheels of torch"
    # offline here: the index option is for otter's image build; the wheels come from the local cache
    pip = [p.replace("/autograder/source", str(src)) for p in pip if not p.startswith("--")]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *pip], capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([str(venv / "bin" / "otter"), "run", "-a", str(asg.autograder_zip(folder)), "-o", str(out),
                           str(asg.solution_notebook(folder))], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    scored = [t for t in results["tests"] if t.get("max_score")]
    assert scored and all(t["score"] == t["max_score"] for t in scored), scored


LOOPING_Q3 = '''import time


def heavy_ball_rate(A, eta, beta):
    while True:  # never returns
        time.sleep(0.01)
'''


def test_a_looping_function_costs_only_its_own_question(built, tmp_path):
    """With the default limits (derived from ``timeout``), a q3 function that never returns is
    stopped within q3's share of the time: q1, q2 and q4, graded before and after it, keep their
    points, and the CSV and the student's feedback say q3 was stopped (trial4's carol03)."""
    folder = built["intro"]
    subs = tmp_path / "subs"
    subs.mkdir()

    def loop_q3(nb):
        hit = [c for c in nb.cells if c.cell_type == "code" and "def heavy_ball_rate" in c.source]
        assert len(hit) == 1
        hit[0].source = LOOPING_Q3

    _write_variant(asg.solution_notebook(folder), subs / "loops.ipynb", loop_q3)
    out = tmp_path / "scores.csv"
    (row,) = asg.grade("intro", subs, timeout=LOOP_TIMEOUT, build_dir=folder.parent, out=out)
    assert row.status != "timeout" and row.seconds < LOOP_TIMEOUT, (row.status, row.seconds, row.message)
    assert row.scores["q3"] == 0.0
    assert {q: s for q, s in row.scores.items() if q != "q3"} == {q: p for q, p in row.possible.items()
                                                                  if q != "q3"}, row.scores
    assert any(f.startswith("q3 stopped at its time limit") for f in row.flags), row.flags
    assert "q3 stopped at its time limit" in out.read_text()
    mine = json.loads((tmp_path / "feedback" / "loops.json").read_text())
    assert any("q3 stopped" in f for f in mine["flags"]), mine["flags"]


def test_a_killed_submission_keeps_the_questions_graded_before(tmp_path):
    """The submission's own limit, if reached anyway: the questions graded before keep their
    scores and the message says what was running (no grading: the progress file as written)."""
    from nnapprox.assignments import submission

    progress = tmp_path / "progress.json"
    progress.write_text(json.dumps({"phase": "questions", "current": "q2", "questions": {"q1": [2.0, 2.0]},
                                    "tests": {"q1": []}, "stopped": {}}))
    row = asg.Row("s.ipynb", "timeout", {"q1": 0.0, "q2": 0.0, "q3": 0.0}, {"q1": 2.0, "q2": 2.0, "q3": 2.0})
    submission._partial(row, progress, 60.0)
    assert row.scores == {"q1": 2.0, "q2": 0.0, "q3": 0.0}
    assert "while grading q2" in row.message and "kept for q1" in row.message and "q2, q3 scored 0" in row.message
    progress.write_text(json.dumps({"phase": "cells", "cell": "cell 7: 'while True:'"}))
    row = asg.Row("s.ipynb", "timeout", {"q1": 0.0}, {"q1": 2.0})
    submission._partial(row, progress, 60.0)
    assert row.scores == {"q1": 0.0} and "cell 7" in row.message and "killed after 60 s" in row.message
