"""Per-student variants: one notebook per student on the roster, each with its own variant.

``python -m nnapprox.assignments handout NAME ROSTER.csv --out DIR`` gives every student the
variant :func:`.roster.variant_for` picks from a stable hash of the assignment and the ID,
builds each variant that is needed once (``DIR/builds/variant-<k>/NAME``, the autograder and
solutions: keep them), and writes

- ``DIR/students/<id>/NAME.ipynb``: the notebook to give that student (its metadata names the
  student, the variant and the variant's release);
- ``DIR/handout-NAME.csv``: student ID, variant, release, notebook.

Grade with ``grade NAME SUBMISSIONS --roster ROSTER.csv --build-dir DIR/builds``: each
submission is graded against its student's variant, whatever its ``VARIANT`` cell says.
"""

from __future__ import annotations

import csv
from pathlib import Path

from . import roster
from .build import AssignmentError, build_one, student_notebook, variants
from .grade import variant_build_dir


def handout(name: str, roster_csv: Path | str, out: Path | str, *, check: bool = True) -> Path:
    """Build the variants the roster needs and write one notebook per student; return the CSV."""
    import json

    import nbformat

    try:
        students = roster.read_roster(roster_csv)
    except ValueError as e:
        raise AssignmentError(str(e)) from None
    table = sorted(variants(name))
    if not table:
        raise AssignmentError(f"assignment {name!r} has no variants (no '# VARIANTS' cell): hand out "
                              f"_build/assignments/{name}/student/{name}.ipynb to everyone")
    if not students:
        raise AssignmentError(f"{roster_csv} lists no students")
    out = Path(out)
    builds = out / "builds"
    chosen = {sid: roster.variant_for(sid, name, table) for sid in students}
    built = {k: build_one(name, variant_build_dir(builds, k), check=check, variant=k)
             for k in sorted(set(chosen.values()))}
    releases = {k: json.loads((b / "release.json").read_text())["release"] for k, b in built.items()}
    path = out / f"handout-{name}.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student_id", "variant", "release", "notebook"])
        for sid in students:
            k = chosen[sid]
            nb = nbformat.read(student_notebook(built[k]), as_version=4)
            nb.metadata.setdefault("nnapprox", {})["student_id"] = sid
            target = out / "students" / _safe(sid) / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            writer.writerow([sid, k, releases[k], str(target.relative_to(out))])
    return path


def _safe(student_id: str) -> str:
    """A folder name for an ID (letters, digits, ``-``, ``_``, ``.``; others become ``_``)."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in student_id).strip(".")
    if not cleaned:
        raise AssignmentError(f"student ID {student_id!r} cannot name a folder")
    return cleaned
