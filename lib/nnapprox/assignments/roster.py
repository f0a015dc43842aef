"""Gradebook logistics for a folder of submissions: who, when, which copy, and what to flag.

Pure functions on file names, times and notebooks, used by :mod:`.grade`:

- :func:`submission_time`: when a file was submitted: the timestamp otter's export puts in
  its zip name (``<assignment>_<YYYY_MM_DDTHH_MM_SS_ffffff>.zip``), else the file's mtime;
- :func:`student_id`: the student ID from the file name through ``--id-regex`` (its named
  group ``id``, or its first group, or the whole match);
- :func:`latest_per_student`: keeps each student's latest submission and reports the others;
- :func:`hours_late`: hours past ``--deadline`` (0 when on time);
- :func:`read_timestamps`, :func:`parse_late_policy`: submission times from an LMS export, and
  what to do with late files;
- :func:`read_roster`, :func:`variant_for`: the class list, and each student's variant from a
  stable hash of the assignment and their ID;
- :func:`patched_attributes`: answer cells that reassign attributes of ``torch``, ``numpy``,
  ``nnapprox`` or otter (the grader's flags now come from :mod:`.static`, which covers this
  and more).
"""

from __future__ import annotations

import ast
import datetime as dt
import re
import zipfile
from pathlib import Path

from ._clean_grade import parse_source  # parsing under the grader's lock (threads)
from .static import _dotted  # one reading of dotted names (static's also reads sys.modules[...])

PROTECTED = ("torch", "numpy", "nnapprox", "otter", "grader", "scipy", "math")
_OTTER_STAMP = re.compile(r"_(\d{4})_(\d{2})_(\d{2})T(\d{2})_(\d{2})_(\d{2})(?:_(\d{1,6}))?\.zip$")


def read_timestamps(path: Path | str) -> dict[str, dt.datetime]:
    """Submission times from a CSV, as an LMS exports them: a column ``submission`` (or
    ``file``) with the file name and a column ``submitted`` (or ``timestamp``) with an ISO 8601
    time (UTC unless it has an offset). File modification times are unreliable after a bulk
    download; these take precedence."""
    import csv

    path = Path(path)
    if not path.exists():
        raise ValueError(f"timestamps file not found: {path}")
    out = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        file_col = next((c for c in ("submission", "file") if c in cols), None)
        time_col = next((c for c in ("submitted", "timestamp") if c in cols), None)
        if not file_col or not time_col:
            raise ValueError(f"{path} needs a column 'submission' (or 'file') and a column 'submitted' "
                             f"(or 'timestamp'); it has {', '.join(cols) or 'none'}")
        for i, row in enumerate(reader, start=2):
            try:
                when = dt.datetime.fromisoformat(row[time_col].strip())
            except ValueError:
                raise ValueError(f"{path}, line {i}: {row[time_col]!r} is not an ISO 8601 time "
                                 "such as 2026-12-01T23:59:00+01:00") from None
            out[row[file_col].strip()] = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
    return out


def submission_time(path: Path | str, times: dict[str, dt.datetime] | None = None) -> dt.datetime:
    """The submission time (UTC): from ``times`` (a timestamps CSV) if it names the file, else
    otter's export timestamp in the name, else the file's mtime."""
    path = Path(path)
    if times and path.name in times:
        return times[path.name]
    m = _OTTER_STAMP.search(path.name)
    if m:
        y, mo, d, h, mi, s, us = m.groups()
        return dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int((us or "0").ljust(6, "0")),
                           tzinfo=dt.timezone.utc)
    return dt.datetime.fromtimestamp(path.stat().st_mtime, tz=dt.timezone.utc)


def compile_id_regex(pattern: str | None) -> re.Pattern | None:
    """Compile ``--id-regex``; a bad pattern is an error naming the problem."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"--id-regex {pattern!r} is not a regular expression: {e}") from None


def student_id(name: str, regex: re.Pattern | None) -> str:
    """The ID in ``name``: the group ``id``, else the first group, else the match; else the stem."""
    if regex is None:
        return Path(name).stem
    m = regex.search(name)
    if not m:
        return ""
    if "id" in regex.groupindex:
        return m.group("id")
    return m.group(1) if regex.groups else m.group(0)


def submission_student(path: Path, regex: re.Pattern | None) -> str:
    """Whose file this is: the ``--id-regex`` match in its name, else the student ID a
    per-student handout carries in its metadata, else (without a regex) the file's stem."""
    if regex is not None:
        return student_id(path.name, regex) or notebook_student(path) or ""
    return notebook_student(path) or Path(path.name).stem


def latest_per_student(paths: list[Path], regex: re.Pattern | None, times: dict[str, dt.datetime] | None = None,
                       on_time_before: dt.datetime | None = None) -> tuple[list[Path], dict[Path, list[Path]]]:
    """Each student's latest submission, and for each kept file the others it supersedes.

    Files are grouped by :func:`submission_student`; files with no ID (no match of ``regex``
    and no handout metadata) are kept and reported by the caller. With ``on_time_before`` (the
    late policy ``on-time``) a student's latest file submitted by then is kept when there is
    one, else their latest.
    """
    groups: dict[str, list[Path]] = {}
    unmatched = []
    for p in paths:
        sid = submission_student(p, regex)
        if not sid:
            unmatched.append(p)
            continue
        groups.setdefault(sid, []).append(p)
    kept, superseded = [], {}
    for files in groups.values():
        files = sorted(files, key=lambda p: (submission_time(p, times), p.name))
        keep = files[-1]
        if on_time_before is not None:
            on_time = [p for p in files if submission_time(p, times) <= on_time_before]
            keep = on_time[-1] if on_time else keep
        kept.append(keep)
        superseded[keep] = [p for p in files if p != keep]
    kept += unmatched
    for p in unmatched:
        superseded[p] = []
    return sorted(kept, key=lambda p: p.name), superseded


def parse_deadline(text: str | None) -> dt.datetime | None:
    """``--deadline`` as an ISO 8601 time (``2026-12-01T23:59``, UTC unless an offset is given)."""
    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--deadline takes an ISO 8601 time such as 2026-12-01T23:59, got {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def hours_late(path: Path, deadline: dt.datetime | None, times: dict[str, dt.datetime] | None = None) -> float:
    """Hours between the deadline and the submission time; 0 when on time or without deadline."""
    if deadline is None:
        return 0.0
    return max(0.0, (submission_time(path, times) - deadline).total_seconds() / 3600.0)


def parse_late_policy(text: str | None) -> tuple[str, float]:
    """``--late-policy``: ``latest`` (default: grade the latest file, no penalty), ``on-time``
    (grade a student's latest file submitted by the deadline when there is one) or
    ``per-hour:X`` (grade the latest file, minus X points per hour late, pro rata)."""
    if text in (None, "latest"):
        return "latest", 0.0
    if text == "on-time":
        return "on-time", 0.0
    if text.startswith("per-hour:"):
        try:
            rate = float(text.partition(":")[2])
        except ValueError:
            rate = -1.0
        if rate >= 0:
            return "per-hour", rate
    raise ValueError(f"--late-policy takes latest, on-time or per-hour:X (points per hour late, X >= 0), got {text!r}")


def read_roster(path: Path | str) -> list[str]:
    """Student IDs from a roster CSV (column ``student_id``, else ``id``, else the first column)."""
    import csv

    path = Path(path)
    if not path.exists():
        raise ValueError(f"roster not found: {path}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        if not cols:
            raise ValueError(f"{path} is empty: a roster is a CSV with a column student_id")
        col = next((c for c in ("student_id", "id") if c in cols), cols[0])
        ids = [row[col].strip() for row in reader if (row.get(col) or "").strip()]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: student IDs must be unique")
    return ids


def variant_for(student_id: str, assignment: str, choices: list[int]) -> int:
    """The variant a student gets: a stable hash of the assignment and the ID picks one of
    ``choices`` (the same every time, on every machine)."""
    import hashlib

    if not choices:
        raise ValueError(f"assignment {assignment!r} has no variants to assign")
    digest = hashlib.sha256(f"{assignment}\0{student_id}".encode()).digest()
    return sorted(choices)[int.from_bytes(digest[:8], "big") % len(choices)]


def _read_notebook(path: Path):
    import nbformat

    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            name = next((n for n in zf.namelist() if n.endswith(".ipynb")), None)
            return None if name is None else nbformat.reads(zf.read(name).decode(), as_version=4)
    return nbformat.read(path, as_version=4)


def _handout_metadata(path: Path, key: str) -> str | None:
    """``metadata.nnapprox[key]`` of a handed-out notebook, or None if absent or unreadable."""
    try:
        nb = _read_notebook(path)
    except Exception:  # noqa: BLE001 - unreadable: graded (and reported) as an error
        return None
    return ((nb.metadata.get("nnapprox") or {}).get(key)) if nb is not None else None


def notebook_release(path: Path) -> str | None:
    """The release id a handed-out notebook carries (``metadata.nnapprox.release``), if any."""
    return _handout_metadata(path, "release")


def notebook_student(path: Path) -> str | None:
    """The student ID a per-student handout carries (``metadata.nnapprox.student_id``), if any."""
    return _handout_metadata(path, "student_id")


def notebook_sources(path: Path) -> list[str]:
    """The code cells of a submission (``.ipynb``, or the notebook inside otter's ``.zip``)."""
    try:
        nb = _read_notebook(path)
    except Exception:  # noqa: BLE001 - an unreadable file is graded (and reported) as an error
        return []
    return [] if nb is None else [c.source for c in nb.cells if c.cell_type == "code"]


VARIANT_HEADER = "# the constants of this version of the assignment"
"""First line of the code cell that ``build --variant`` writes in place of ``# VARIANTS``."""


def variant_cell(sources: list[str]) -> str | None:
    """The ``VARIANT = {...}`` cell among a notebook's code cells (stripped), or ``None``."""
    hits = [s.strip() for s in sources if s.lstrip().startswith(VARIANT_HEADER)]
    return hits[0] if hits else None


def edited_cells(sources: list[str], handed_out: list[str]) -> list[str]:
    """The first lines (quoted) of the handed-out cells (``handed_out``, stripped) that are not
    among a submission's code cells ``sources``: edited or removed. The grader re-runs the
    handed-out cells, so an edit changes nothing, but it is worth a look."""
    kept = {s.strip() for s in sources}
    return [repr(s.splitlines()[0][:50]) for s in handed_out if s.strip() and s.strip() not in kept]


def patched_attributes(sources: list[str]) -> list[str]:
    """``module.attr`` names that the code assigns, deletes or ``setattr``s on a protected module.

    Aliases from ``import torch as t`` and ``from torch import testing as tt`` are followed;
    a cell that does not parse is skipped (it fails when graded anyway).
    """
    found: list[str] = []
    aliases = {name: name for name in PROTECTED}
    aliases["np"] = "numpy"
    for src in sources:
        tree = parse_source(src)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    root = a.name.split(".")[0]
                    if root in PROTECTED:
                        aliases[a.asname or root] = a.name if a.asname else root
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROTECTED:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                dotted = _dotted(t)
                if dotted and isinstance(t, ast.Attribute) and dotted.split(".")[0] in aliases:
                    head, _, rest = dotted.partition(".")
                    found.append(f"{aliases[head]}.{rest}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                    and node.args):
                dotted = _dotted(node.args[0])
                if dotted and dotted.split(".")[0] in aliases:
                    head, _, rest = dotted.partition(".")
                    attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else "?"
                    found.append(".".join(x for x in (aliases[head], rest, str(attr)) if x))
    return sorted(set(found))

