"""Build the otter-grader assignments from their text masters.

A master is a jupytext MyST notebook ``chapters/assignments/<name>.md`` in otter-grader's
assign format (a ``# ASSIGNMENT CONFIG`` raw cell, ``# BEGIN QUESTION`` / ``# BEGIN SOLUTION``
/ ``# BEGIN TESTS`` raw cells, exception-based tests). :func:`build` converts it to ``.ipynb``
and runs ``otter assign``, which writes

- ``<out>/<name>/student/<name>.ipynb``: the notebook handed out (no solutions, public tests);
- ``<out>/<name>/autograder/<name>.ipynb``: the solutions notebook;
- ``<out>/<name>/autograder/<name>-autograder_<time>.zip``: the autograder (all tests);
- ``<out>/<name>/release.json``: the release manifest: the master's SHA-256, the repository
  commit and the build time. Its ``release`` id is also written into the student notebook's
  metadata (``nnapprox.release``), so a handed-out notebook names the autograder it belongs
  to; grading checks both (:func:`check_release`).

Students see each question's points (``show_question_points``).

Variants. A master may hold a raw cell ``# VARIANTS`` followed by a YAML mapping from variant
numbers to constants, e.g. ``0: {K: 1.5, seed: 0}``. :func:`build_one` with ``variant=K``
replaces that cell by a code cell ``VARIANT = {...}`` with variant ``K``'s constants (variant 0
when none is asked for); the master's cells and hidden tests read their constants from
``VARIANT``, so each variant's tests compute their references from its own parameters. The
variant is recorded in ``release.json`` and the student notebook's metadata.

A self-contained autograder. The zip names everything grading needs: :func:`build_one` puts a
wheel of this library (built from the checkout, with its package data) under ``files/`` and
adds the pinned runtime requirements (``RUNTIME``, the lock file's versions) and the wheel at
otter's container path ``/autograder/source/files/`` to the zip's ``environment.yml``, so
``otter grade`` (container, no network after the image is built) and Gradescope can import
``torch`` and ``nnapprox``.

Masters outside the repository. The public masters contain the solutions and hidden tests.
An instructor keeps private masters in a folder of their own and passes it to the command
line as ``--masters DIR`` (:func:`use_masters`).

The grading seed. A hidden test draws the inputs it calls the student's functions on from
``GRADING_SEED`` (``rng = np.random.default_rng(GRADING_SEED)``), a name the build replaces,
in hidden tests only, by an integer the students never see: a bank's ``grading_seed``
(``bank.json``, written by ``new-bank``) or, without one, a fresh random number per build.
Inputs written in a public master can be tabulated in advance with a forbidden helper; inputs
drawn from the grading seed cannot. The seed appears in the autograder zip and the solutions
notebook only; a master that uses the name anywhere but in a hidden test fails to build.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MASTERS = ROOT / "chapters" / "assignments"
BUILD = ROOT / "_build" / "assignments"


#: The library's runtime requirements, pinned to the lock file's versions in the autograder.
RUNTIME = ("torch", "numpy", "scipy", "matplotlib", "tqdm", "jaxtyping", "safetensors")
CONTAINER_SOURCE = "/autograder/source"  # where otter's containers unpack the autograder zip
PYTHON_VERSION = "3.11"  # the project's Python, also in the autograder's environment.yml
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class AssignmentError(ValueError):
    """An unknown assignment, a missing folder, a build that failed."""


GRADING_SEED = "GRADING_SEED"  # the placeholder a hidden test draws its inputs from
_SEED_NAME = re.compile(r"\bGRADING_SEED\b")


def bank_grading_seed() -> int | None:
    """The ``grading_seed`` of the masters folder's ``bank.json`` (``None`` without one)."""
    path = Path(MASTERS) / "bank.json"
    if not path.is_file():
        return None
    try:
        seed = json.loads(path.read_text()).get("grading_seed")
    except (ValueError, AttributeError) as e:
        raise AssignmentError(f"{path}: not a bank record ({e})") from e
    if seed is None:
        return None
    if type(seed) is not int or seed < 0:
        raise AssignmentError(f"{path}: grading_seed must be a non-negative integer, got {seed!r}")
    return seed


def _is_hidden_test(cell) -> bool:
    src = cell.source
    if cell.cell_type != "code" or "# BEGIN TEST CONFIG" not in src:
        return False
    config = src.partition("# BEGIN TEST CONFIG")[2].partition("# END TEST CONFIG")[0]
    return bool(re.search(r"^\s*hidden:\s*true\s*$", config, re.M))


def _apply_grading_seed(nb, name: str, seed: int) -> int:
    """Write ``seed`` for the placeholder ``GRADING_SEED`` into the hidden tests of ``nb``;
    return how many tests use it. The placeholder anywhere else fails the build (it would
    leave the name undefined, or tell the students the seed)."""
    used = 0
    for i, cell in enumerate(nb.cells):
        if not _SEED_NAME.search(cell.source):
            continue
        if not _is_hidden_test(cell):
            raise AssignmentError(f"{name}: cell {i} uses {GRADING_SEED}, which only hidden tests may use "
                                  f"(the students' notebook must not hold the seed): {cell.source[:80]!r}")
        cell.source = _SEED_NAME.sub(str(int(seed)), cell.source)
        used += 1
    return used


def use_masters(folder: Path | str) -> Path:
    """Read masters from ``folder`` instead of ``chapters/assignments`` (for this process)."""
    global MASTERS
    folder = Path(folder).resolve()
    if not folder.is_dir() or not any(folder.glob("*.md")):
        raise AssignmentError(f"--masters {folder}: not a folder holding assignment masters (*.md)")
    MASTERS = folder
    return folder


def variants(name: str) -> dict[int, dict]:
    """The variants a master declares in its ``# VARIANTS`` raw cell (empty if it has none)."""
    import yaml

    for cell in master_notebook(name).cells:
        if cell.cell_type == "raw" and cell.source.lstrip().startswith("# VARIANTS"):
            table = yaml.safe_load(cell.source.lstrip().partition("\n")[2]) or {}
            if not isinstance(table, dict) or not all(isinstance(k, int) and isinstance(v, dict)
                                                      for k, v in table.items()):
                raise AssignmentError(f"{name}: '# VARIANTS' must map variant numbers to dicts of constants")
            return table
    return {}


def forbidden(name: str, nb=None) -> dict[str, list[str]]:
    """Per question, the library functions it forbids: the master's ``# FORBIDDEN`` raw cell
    (a YAML mapping from question names to dotted names, ``q1: [nnapprox.depth.sawtooth]``),
    merged with every helper a test of that question forbids itself (:func:`test_forbids`):
    the student's functions run in a process of their own, where only this list is enforced,
    so a test's own ``forbid(...)`` would guard nothing.

    Every name must exist; the grader flags any reference to one (:mod:`.static`). ``nb``: the
    master notebook (default: :func:`master_notebook`, structural variants included).
    """
    import importlib

    nb = master_notebook(name) if nb is None else nb
    table = _forbidden_cell(name, nb)

    def resolve(full: str):
        module, _, attr = full.rpartition(".")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            raise AssignmentError(f"{name}: a test forbids {full!r}, which does not exist") from None

    for q, names in test_forbids(name, nb).items():
        listed = table.setdefault(q, [])
        have = [resolve(n) for n in listed]
        for full in names:
            obj = resolve(full)
            if not any(obj is h for h in have):  # the same function under another module's name counts
                listed.append(full)
                have.append(obj)
    return table


def _forbid_names(cell_source: str, where: str) -> list[str]:
    """The dotted names of the helpers a test cell passes to ``forbid(fns, helpers)``.

    The helpers must be spelled as a list of attributes of modules the test function imports
    (``import nnapprox.sequential as Q`` ... ``helpers = [Q.linucb, bandits._run]``), directly
    or through a variable assigned such a list; anything else stops the build."""
    import ast

    try:
        tree = ast.parse(cell_source)
    except SyntaxError:
        return []
    from . import static

    names: list[str] = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        aliases = static._aliases([fn])  # the test function's own imports
        lists: dict[str, ast.AST] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                lists[node.targets[0].id] = node.value

        def dotted(expr) -> str | None:
            parts = []
            while isinstance(expr, ast.Attribute):
                parts.append(expr.attr)
                expr = expr.value
            if isinstance(expr, ast.Name) and expr.id in aliases and parts:
                return ".".join([aliases[expr.id], *reversed(parts)])
            return None

        # the module a helper's name is looked up in: getattr(C, name) inside the test function
        lookup = [dotted(ast.Attribute(value=n.args[0], attr="_")) for n in ast.walk(fn)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
                  and len(n.args) == 2 and isinstance(n.args[0], ast.Name)]
        lookup = [m.rpartition(".")[0] for m in lookup if m]

        def from_list(value) -> list[str] | None:
            if isinstance(value, ast.Name):
                value = lists.get(value.id, value)
            if not isinstance(value, (ast.List, ast.Tuple)):
                return None
            out = []
            for elt in value.elts:
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str) and len(lookup) >= 1:
                    out.append(f"{lookup[0]}.{elt.value}")  # forbid(fn, ["maurey_constant"]): U.<name>
                else:
                    full = dotted(elt)
                    if full is None:
                        return None
                    out.append(full)
            return out

        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == "forbid"]
        if not calls and "originals" not in lists:  # a test that forbids helpers its own way
            continue
        found: list[str] = []
        for node in calls:
            for arg in node.args[1:]:
                got = from_list(arg)
                if got is not None:
                    found += got
        # forbid(*student_functions) over an ``originals`` table of the helpers
        table = lists.get("originals")
        if isinstance(table, ast.Dict):
            found += [d for d in map(dotted, table.values) if d]
        elif isinstance(table, ast.DictComp) and table.generators:
            found += from_list(table.generators[0].iter) or []
        one = lists.get("original")  # forbid(*student_functions) over one helper
        if one is not None and dotted(one):
            found.append(dotted(one))
        if not found:
            raise AssignmentError(f"{where}: the build cannot read which helpers {fn.name}'s forbid(...) forbids, "
                                  "so they would not be enforced (the student's functions run in a process of "
                                  "their own): pass them as a list of module attributes, forbid(fns, [Q.f, Q.g]), "
                                  "or list them in the '# FORBIDDEN' cell and drop the test's forbid")
        names += found
    return names


def test_forbids(name: str, nb=None) -> dict[str, list[str]]:
    """Per question, the helpers its test cells forbid with their own ``forbid(fns, helpers)``."""
    import yaml

    nb = master_notebook(name) if nb is None else nb
    found: dict[str, list[str]] = {}
    question = None
    for cell in nb.cells:
        text = cell.source.lstrip()
        if cell.cell_type == "raw" and text.startswith("# BEGIN QUESTION"):
            meta = yaml.safe_load(text.partition("\n")[2]) or {}
            question = str(meta.get("name")) if isinstance(meta, dict) else None
        elif cell.cell_type == "raw" and text.startswith("# END QUESTION"):
            question = None
        elif cell.cell_type == "code" and question and "forbid(" in cell.source:
            for full in _forbid_names(cell.source, f"{name} {question}"):
                found.setdefault(question, [])
                if full not in found[question]:
                    found[question].append(full)
    return found


def _forbidden_cell(name: str, nb) -> dict[str, list[str]]:
    import importlib

    import yaml

    for cell in nb.cells:
        if cell.cell_type == "raw" and cell.source.lstrip().startswith("# FORBIDDEN"):
            table = yaml.safe_load(cell.source.lstrip().partition("\n")[2]) or {}
            if not isinstance(table, dict) or not all(isinstance(v, list) and all(isinstance(n, str) for n in v)
                                                      for v in table.values()):
                raise AssignmentError(f"{name}: '# FORBIDDEN' must map question names to lists of dotted names")
            for q, names in table.items():
                for full in names:
                    module, _, attr = full.rpartition(".")
                    try:
                        ok = bool(module) and hasattr(importlib.import_module(module), attr)
                    except ImportError:
                        ok = False
                    if not ok:
                        raise AssignmentError(f"{name}: '# FORBIDDEN' names {full!r} for {q}, which does not exist "
                                              "(write module.function, e.g. nnapprox.depth.sawtooth)")
            return {str(q): list(v) for q, v in table.items()}
    return {}


def _drop_forbidden_cell(nb) -> None:
    nb.cells = [c for c in nb.cells if not (c.cell_type == "raw" and c.source.lstrip().startswith("# FORBIDDEN"))]


def _apply_variant(nb, name: str, variant: int | None) -> int | None:
    """Replace the ``# VARIANTS`` raw cell by ``VARIANT = {...}``; return the variant used."""
    import nbformat

    table = variants(name)
    if not table:
        if variant is not None:
            raise AssignmentError(f"assignment {name!r} has no variants (no '# VARIANTS' cell in its master)")
        return None
    chosen = min(table) if variant is None else variant
    if chosen not in table:
        raise AssignmentError(f"assignment {name!r} has variants {sorted(table)}, not {variant}")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "raw" and cell.source.lstrip().startswith("# VARIANTS"):
            nb.cells[i] = nbformat.v4.new_code_cell(
                f"# the constants of this version of the assignment (variant {chosen})\n"
                f"VARIANT = {table[chosen]!r}")
    return chosen


def _pinned_runtime() -> list[str]:
    """``name==version`` for each of :data:`RUNTIME`, from ``requirements-lock.txt``."""
    lock = ROOT / "requirements-lock.txt"
    if not lock.exists():
        raise AssignmentError(f"{lock} is missing: the autograder pins the lock file's versions")
    pins = {}
    for line in lock.read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[name.lower()] = version.split(";")[0].split()[0]
    missing = [n for n in RUNTIME if n not in pins]
    if missing:
        raise AssignmentError(f"requirements-lock.txt pins no version of {missing}")
    return [f"{n}=={pins[n]}" for n in RUNTIME]


def _library_wheel(dest: Path) -> Path:
    """A wheel of ``nnapprox`` (package data included) built from the checkout into ``dest``."""
    import sys

    if not (ROOT / "pyproject.toml").exists():
        raise AssignmentError(f"building an autograder needs the repository checkout ({ROOT} has no pyproject.toml)")
    src = Path(dest) / "nnapprox-src"  # a copy, so the build leaves nothing behind in the checkout
    shutil.copytree(ROOT / "lib", src / "lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "assignments-build"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(dest), str(src)], capture_output=True, text=True, timeout=600)
    shutil.rmtree(src, ignore_errors=True)
    wheels = sorted(Path(dest).glob("nnapprox-*.whl"))
    if done.returncode or not wheels:
        raise AssignmentError(f"could not build the nnapprox wheel for the autograder:\n{done.stderr[-2000:]}")
    return wheels[-1]


def _self_contained(nb, work: Path) -> None:
    """Make the master's autograder carry the library: a wheel in ``files/`` and pinned requirements."""
    import yaml

    wheel = _library_wheel(work)
    # CPU wheels of torch (the CUDA build is ~10 times larger and grading needs no GPU); the
    # lock's version matches the index's "+cpu" build
    lines = [f"--extra-index-url {TORCH_CPU_INDEX}"] + _pinned_runtime() + [f"{CONTAINER_SOURCE}/files/{wheel.name}"]
    (work / "requirements.txt").write_text("\n".join(lines) + "\n")
    for cell in nb.cells:
        if cell.cell_type == "raw" and cell.source.lstrip().startswith("# ASSIGNMENT CONFIG"):
            head, _, body = cell.source.partition("\n")
            config = yaml.safe_load(body) or {}
            config["requirements"] = "requirements.txt"
            config["python_version"] = PYTHON_VERSION
            config["files"] = list(config.get("files") or []) + [wheel.name]
            cell.source = head + "\n" + yaml.safe_dump(config, sort_keys=False)
            return
    raise AssignmentError("the master has no '# ASSIGNMENT CONFIG' raw cell")


def available() -> list[str]:
    """Names of the assignments: the stems of ``chapters/assignments/*.md``, sorted."""
    return sorted(p.stem for p in MASTERS.glob("*.md"))


def master_path(name: str) -> Path:
    """The text master of assignment ``name``; raises :class:`AssignmentError` naming the valid ones."""
    names = available()
    if name not in names:
        raise AssignmentError(
            f"unknown assignment {name!r}; valid assignments: {', '.join(names) or '(none)'}"
        )
    return MASTERS / f"{name}.md"


def master_notebook(name: str):
    """The master as an ``nbformat`` notebook (jupytext conversion from the text file)."""
    import jupytext

    return jupytext.read(master_path(name), fmt="md:myst")


def build_one(name: str, out: Path | str = BUILD, *, check: bool = True, quiet: bool = True,
              variant: int | None = None, grading_seed: int | None = None) -> Path:
    """Run ``otter assign`` on the master of ``name``; return ``<out>/<name>``.

    ``check=True`` lets otter run every test (public and hidden) against the solutions and
    fail the build if one fails. The output folder is replaced. ``variant`` picks the
    constants of the master's ``# VARIANTS`` cell (see the module docstring). ``grading_seed``
    is what the hidden tests draw their inputs from (default: the bank's, else a fresh random
    number). A build that fails removes ``<out>/<name>`` (it would hold the solutions).
    """
    master = master_path(name)
    if variant is not None and not isinstance(variant, int):
        raise AssignmentError(f"variant must be an integer, got {variant!r}")
    if grading_seed is not None and (type(grading_seed) is not int or grading_seed < 0):
        raise AssignmentError(f"grading_seed must be a non-negative integer, got {grading_seed!r}")
    variants(name)  # a malformed table fails before any work
    dest = Path(out).resolve() / name
    if dest.exists():
        shutil.rmtree(dest)
    try:
        return _build_into(dest, name, master, check=check, quiet=quiet, variant=variant,
                           grading_seed=grading_seed)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)  # a failed build leaves no solutions behind
        raise


def _build_into(dest: Path, name: str, master: Path, *, check: bool, quiet: bool, variant: int | None,
                grading_seed: int | None = None) -> Path:
    import nbformat
    from otter.assign import main as otter_assign

    work = dest / "master"
    work.mkdir(parents=True)
    nb = master_notebook(name)
    nb.metadata.pop("jupytext", None)
    chosen = _apply_variant(nb, name, variant)
    if grading_seed is None:
        grading_seed = bank_grading_seed()
    if grading_seed is None:
        grading_seed = secrets.randbelow(2**31)
    _apply_grading_seed(nb, name, grading_seed)
    banned = forbidden(name, nb)
    _drop_forbidden_cell(nb)
    _show_question_points(nb)
    _self_contained(nb, work)
    nbformat.write(nb, work / f"{name}.ipynb")

    sink = io.StringIO()
    redirect = (
        (contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink))
        if quiet
        else (contextlib.nullcontext(), contextlib.nullcontext())
    )
    cwd = os.getcwd()
    try:
        with redirect[0], redirect[1]:
            otter_assign(str(work / f"{name}.ipynb"), str(dest), no_pdfs=True, no_run_tests=not check)
    except Exception as e:  # otter raises bare exceptions; give the log with the cause
        raise AssignmentError(f"otter assign failed for {name} ({master}): {e}\n{sink.getvalue()}") from e
    finally:
        os.chdir(cwd)
    shutil.rmtree(work)
    if not autograder_zip(dest).exists():
        raise AssignmentError(f"otter assign wrote no autograder zip under {dest / 'autograder'}")
    manifest = release_manifest(name, chosen)
    (dest / "release.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (dest / "forbidden.json").write_text(json.dumps(banned, indent=1) + "\n")
    student = student_notebook(dest)
    snb = nbformat.read(student, as_version=4)
    snb.metadata["nnapprox"] = {"assignment": name, "release": manifest["release"], "variant": chosen}
    nbformat.write(snb, student)
    if check and banned:
        check_forbidden(dest, banned)
    return dest


def check_forbidden(built: Path, banned: dict[str, list[str]], timeout: float = 900.0) -> None:
    """Grade the reference solution with the project's grader and stop if a forbidden function
    answers a question: for each question with a ``# FORBIDDEN`` list, every call the tests
    make to the solution's functions is replayed on each forbidden function, and a function
    that returns the same results on all of them means the question can be answered by
    calling the library. Raises :class:`AssignmentError` naming the question, the answer and
    the library function; also when the solution does not score full marks here."""
    from .grade import grade_submission

    row = grade_submission(autograder_zip(built), solution_notebook(built), timeout,
                           handout=student_notebook(built), forbidden=banned)
    if row.status != "ok" or row.scores != row.possible:
        raise AssignmentError(f"the reference solution of {built.name} does not score full marks with the grader: "
                              f"{row.scores} of {row.possible} ({row.message or row.problems})")
    if row.answerable:
        found = "; ".join(f"{q}: {f}() equals {g}()" for q, pairs in sorted(row.answerable.items())
                          for f, g in pairs)
        raise AssignmentError(f"{built.name}: on the tests' inputs a forbidden library function gives the "
                              f"answer ({found}); change the question so that calling the library does not answer it")


def _show_question_points(nb) -> None:
    """Turn on otter's ``show_question_points`` in the master's ASSIGNMENT CONFIG cell."""
    import yaml

    for cell in nb.cells:
        if cell.cell_type == "raw" and cell.source.lstrip().startswith("# ASSIGNMENT CONFIG"):
            head, _, body = cell.source.partition("\n")
            config = yaml.safe_load(body) or {}
            config["show_question_points"] = True
            cell.source = head + "\n" + yaml.safe_dump(config, sort_keys=False)
            return
    raise AssignmentError("the master has no '# ASSIGNMENT CONFIG' raw cell")


def master_sha256(name: str) -> str:
    return hashlib.sha256(master_path(name).read_bytes()).hexdigest()


def release_manifest(name: str, variant: int | None = None) -> dict:
    """What ties a handed-out notebook to its autograder: master hash, variant, commit, build time.

    The release id is the master's hash for an assignment without variants, and a hash of the
    master and the variant number otherwise, so each variant has its own id."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        commit = None
    digest = master_sha256(name)
    release = digest[:12] if variant is None else hashlib.sha256(f"{digest}:{variant}".encode()).hexdigest()[:12]
    return {"assignment": name, "release": release, "master_sha256": digest, "variant": variant, "commit": commit,
            "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def check_release(built: Path, name: str) -> dict:
    """The build's release manifest, after checking that the master has not changed since.

    Raises :class:`AssignmentError` when the manifest is missing or the master changed (the
    students' notebooks and this autograder may then disagree): rebuild, or grade with the
    build that was handed out.
    """
    path = Path(built) / "release.json"
    if not path.exists():
        raise AssignmentError(f"{built} has no release.json: rebuild it with `python -m nnapprox.assignments build {name}`")
    manifest = json.loads(path.read_text())
    if manifest.get("master_sha256") != master_sha256(name):
        raise AssignmentError(
            f"the master {master_path(name)} changed after {built} was built (release {manifest.get('release')}): "
            f"grade with the build that was handed out, or pass allow_stale=True (--allow-stale) to grade anyway"
        )
    return manifest


def build(names: list[str] | None = None, out: Path | str = BUILD, *, check: bool = True) -> list[Path]:
    """Build the named assignments (all of them if ``names`` is empty)."""
    names = list(names or available())
    for name in names:
        master_path(name)  # validate every name before any work
    return [build_one(name, out, check=check) for name in names]


def autograder_zip(built: Path) -> Path:
    """The autograder zip of a built assignment folder (``<out>/<name>``)."""
    zips = sorted((Path(built) / "autograder").glob("*-autograder_*.zip"))
    if not zips:
        return Path(built) / "autograder" / "<missing>.zip"
    return zips[-1]


def student_notebook(built: Path) -> Path:
    """The student notebook of a built assignment folder."""
    built = Path(built)
    return built / "student" / f"{built.name}.ipynb"


def solution_notebook(built: Path) -> Path:
    """The solutions notebook of a built assignment folder (otter's autograder copy)."""
    built = Path(built)
    return built / "autograder" / f"{built.name}.ipynb"
