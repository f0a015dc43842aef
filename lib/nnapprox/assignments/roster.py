"""Gradebook logistics for a folder of submissions: who, when, which copy, and what to flag.

Pure functions on file names, times and notebooks, used by :mod:`.grade`:

- :func:`submission_time`: when a file was submitted: the timestamp otter's export puts in
  its zip name (``<assignment>_<YYYY_MM_DDTHH_MM_SS_ffffff>.zip``), else the file's mtime;
- :func:`student_id`: the student ID from the file name through ``--id-regex`` (its named
  group ``id``, or its first group, or the whole match);
- :func:`latest_per_student`: keeps each student's latest submission and reports the others;
- :func:`hours_late`: hours past ``--deadline`` (0 when on time);
- :func:`patched_attributes`: answer cells that reassign attributes of ``torch``, ``numpy``,
  ``nnapprox`` or otter (``torch.allclose = lambda *a, **k: True`` would fake any test that
  runs in the student's kernel); such submissions are flagged in the CSV, not silently scored.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
import zipfile
from pathlib import Path

PROTECTED = ("torch", "numpy", "nnapprox", "otter", "grader", "scipy", "math")
_OTTER_STAMP = re.compile(r"_(\d{4})_(\d{2})_(\d{2})T(\d{2})_(\d{2})_(\d{2})(?:_(\d{1,6}))?\.zip$")


def submission_time(path: Path | str) -> dt.datetime:
    """The submission time (UTC): otter's export timestamp in the name, else the file's mtime."""
    path = Path(path)
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


def latest_per_student(paths: list[Path], regex: re.Pattern | None) -> tuple[list[Path], dict[Path, list[Path]]]:
    """Each student's latest submission, and for each kept file the older ones it supersedes.

    Files whose name does not match ``regex`` are kept (with an empty ID) and reported by
    the caller; without a regex every file is its own student.
    """
    groups: dict[str, list[Path]] = {}
    unmatched = []
    for p in paths:
        sid = student_id(p.name, regex)
        if regex is not None and not sid:
            unmatched.append(p)
            continue
        groups.setdefault(sid, []).append(p)
    kept, superseded = [], {}
    for files in groups.values():
        files = sorted(files, key=lambda p: (submission_time(p), p.name))
        kept.append(files[-1])
        superseded[files[-1]] = files[:-1]
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


def hours_late(path: Path, deadline: dt.datetime | None) -> float:
    """Hours between the deadline and the submission time; 0 when on time or without deadline."""
    if deadline is None:
        return 0.0
    return max(0.0, (submission_time(path) - deadline).total_seconds() / 3600.0)


def _read_notebook(path: Path):
    import nbformat

    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            name = next((n for n in zf.namelist() if n.endswith(".ipynb")), None)
            return None if name is None else nbformat.reads(zf.read(name).decode(), as_version=4)
    return nbformat.read(path, as_version=4)


def notebook_release(path: Path) -> str | None:
    """The release id a handed-out notebook carries (``metadata.nnapprox.release``), if any."""
    try:
        nb = _read_notebook(path)
    except Exception:  # noqa: BLE001 - unreadable: graded (and reported) as an error
        return None
    return ((nb.metadata.get("nnapprox") or {}).get("release")) if nb is not None else None


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


def patched_attributes(sources: list[str]) -> list[str]:
    """``module.attr`` names that the code assigns, deletes or ``setattr``s on a protected module.

    Aliases from ``import torch as t`` and ``from torch import testing as tt`` are followed;
    a cell that does not parse is skipped (it fails when graded anyway).
    """
    found: list[str] = []
    aliases = {name: name for name in PROTECTED}
    aliases["np"] = "numpy"
    for src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
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


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None
