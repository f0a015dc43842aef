"""A private question bank: masters kept outside the public repository, with structural variants.

The public masters (``chapters/assignments/<name>.md``) hold reference solutions and hidden
tests that any student can read. For graded work an instructor keeps a *bank*: a folder (or
a private git repository) of masters outside this repository, which every command reads with
``--masters DIR``.

``python -m nnapprox.assignments new-bank DIR`` scaffolds one: it copies every public
master into ``DIR`` and swaps in a *structural variant* for each question that has one. A
structural variant (``chapters/assignments/structural/<name>/<q>-<tag>.md``) is a whole
question block, ``# BEGIN QUESTION`` to ``# END QUESTION``, that asks for a different
quantity, function or proof under the same name, with its own solution and tests, so a
copied public reference solution fails it. ``bank.json`` in ``DIR`` records which variant
each question got. The shipped variants are public too (they live in this repository): they
defeat copying the public solution, not a student who reads this folder; the bank's README
says how to write new ones that exist only in the bank.
"""

from __future__ import annotations

import importlib
import json
import re
import secrets
import shutil
from pathlib import Path

from .build import ROOT, AssignmentError

_build = importlib.import_module(__package__ + ".build")  # the module (the package re-exports a function `build`)

_BLOCK = re.compile(r"```\{raw-cell\}\n# BEGIN QUESTION\nname: (?P<name>\w+)\n.*?```\{raw-cell\}\n# END QUESTION\n```\n",
                    re.S)


def structural_folder() -> Path:
    return Path(_build.MASTERS) / "structural"


def structural_variants(name: str) -> dict[str, list[Path]]:
    """Per question of assignment ``name``, its structural variant files (sorted)."""
    _build.master_path(name)
    folder = structural_folder() / name
    out: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        q, sep, tag = path.stem.partition("-")
        if not sep or not tag:
            raise AssignmentError(f"{path}: a structural variant is named <question>-<tag>.md, e.g. q1-relative.md")
        out.setdefault(q, []).append(path)
    return out


def question_blocks(text: str) -> dict[str, tuple[int, int]]:
    """Question name -> (start, end) of its block in a master's text."""
    return {m.group("name"): (m.start(), m.end()) for m in _BLOCK.finditer(text)}


def apply_structural(text: str, fragment: str, where: str = "variant") -> str:
    """``text`` with the question block that ``fragment`` holds swapped in for the block of the same name."""
    blocks = question_blocks(fragment)
    if len(blocks) != 1:
        raise AssignmentError(f"{where}: a structural variant holds exactly one question block "
                              f"(# BEGIN QUESTION ... # END QUESTION), found {len(blocks)}")
    (q, (a, b)), = blocks.items()
    targets = question_blocks(text)
    if q not in targets:
        raise AssignmentError(f"{where}: the master has no question {q!r}; its questions: {', '.join(targets)}")
    start, end = targets[q]
    return text[:start] + fragment[a:b] + text[end:]


def variant_master(name: str, choice: dict[str, str]) -> str:
    """The master of ``name`` with the structural variants ``{question: tag}`` swapped in."""
    text = _build.master_path(name).read_text()
    available = structural_variants(name)
    for q, tag in choice.items():
        paths = {p.stem.partition("-")[2]: p for p in available.get(q, [])}
        if tag not in paths:
            raise AssignmentError(f"{name}: no structural variant {tag!r} of {q}; available: "
                                  + (", ".join(f"{k}-{t}" for k, ps in available.items()
                                               for t in (p.stem.partition('-')[2] for p in ps)) or "(none)"))
        text = apply_structural(text, paths[tag].read_text(), str(paths[tag]))
    return text


README = """# Private question bank

Masters of the assignments, made by `python -m nnapprox.assignments new-bank` from the public
ones, with structural variants swapped in (`bank.json` says which). Keep this folder out of
the public repository: it holds reference solutions and hidden tests.

- Make it a private git repository (`git init`, push to a private remote), or keep it in a
  private folder; never inside a clone of the book's public repository.
- Point every command at it: `python -m nnapprox.assignments --masters DIR build ...`.
- `structural/` holds the variant blocks this bank was made from (all of them also exist in the
  public repository). For questions students cannot look up anywhere, write new blocks here:
  copy a question block of a master, from `# BEGIN QUESTION` to `# END QUESTION`, change what
  it asks (another quantity, function or proof), its solution and its tests, and run the
  build, which checks every test against the new solution.
"""


def new_bank(dest: Path | str, *, names: list[str] | None = None, pick: int = 0) -> dict[str, dict[str, str]]:
    """Write a bank to ``dest``; return, per assignment, the structural variant of each question.

    ``pick`` chooses, for a question with several variants, the one at that position (modulo
    their number). ``dest`` must not exist or be empty, and must lie outside the repository.
    """
    dest = Path(dest).expanduser().resolve()
    if dest == ROOT or ROOT in dest.parents:
        raise AssignmentError(f"{dest} is inside the public repository {ROOT}: a question bank holds the "
                              "solutions, keep it outside (for example ~/nnapprox-bank)")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise AssignmentError(f"{dest} exists and is not an empty folder: choose a new one")
    names = list(names or _build.available())
    for name in names:
        _build.master_path(name)
    dest.mkdir(parents=True, exist_ok=True)
    record: dict[str, dict[str, str]] = {}
    for name in names:
        choice = {q: paths[pick % len(paths)].stem.partition("-")[2]
                  for q, paths in structural_variants(name).items()}
        (dest / f"{name}.md").write_text(variant_master(name, choice))
        record[name] = choice
        if choice:
            shutil.copytree(structural_folder() / name, dest / "structural" / name)
    # the hidden tests draw their inputs from this (see build.py); the students never see it
    seed = secrets.randbelow(2**31)
    (dest / "bank.json").write_text(json.dumps({"from": str(_build.MASTERS), "grading_seed": seed,
                                                "structural": record}, indent=1) + "\n")
    (dest / "README.txt").write_text(README)  # not *.md: every *.md here is a master
    return record
