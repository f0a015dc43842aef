"""Grade a folder of submissions, each in its own processes with time limits, into a CSV.

Each submission is graded by a fresh ``python -m nnapprox.assignments._worker`` process
(:mod:`._worker`): the notebook runs in its own Jupyter kernel and exports its answers as
plain data, and a second, fresh Python process runs every test on them (:mod:`._clean_grade`),
out of reach of anything the notebook patched. When the worker exceeds ``timeout`` seconds,
it and every process it started are killed and the submission gets the status ``timeout``
(the questions graded before keep their scores; the message names the cell or question that
was running); a cell past ``cell_timeout`` or a question past ``question_timeout`` (or past an
even share of what is left of ``timeout``, so one loop costs one question) fails on its own. A
crash (a cell that raises, a kernel that dies, a file that is not a notebook) gives
``error``. Either way the batch goes on, and every submission gets its row.

The worker's address space is limited (``memory_mb``, default 4 GiB; the kernel and the
process that runs the student's functions inherit the limit, each process its own, so a
submission can hold up to three times it), so a submission that allocates without bound fails with
a memory error instead of taking the machine down. Each row also says who submitted
(``--id-regex``, or a per-student notebook's metadata), whether the file superseded others
of the same student, how many hours late it was and the late penalty (``--deadline``,
``--timestamps``, ``--late-policy``), and what its code does that an honest answer never
needs (flags: :mod:`.static`). With ``--roster`` each student is graded against their own
variant. Next to the CSV, ``feedback/<submission>.{html,json}`` are for the student (hidden
tests counted, never shown) and ``feedback/instructor/<submission>.json`` lists every test
with its message. A batch refuses to start when the CSV or any of those files already exists
(an earlier run's results, which it would overwrite), unless ``overwrite`` (``--overwrite``).

With ``sandbox`` (``auto``, the default, or ``on``) the submission's kernel and its
functions' process run in a filesystem sandbox (:mod:`._sandbox`, Linux user and mount
namespaces): the builds (solutions, autograder zips), the masters, the submissions folder,
the output folder, the roster, timestamp and manual files, the temporary folders (the hidden
tests, the other submissions' folders) and a few credential folders of the home directory
are empty there, and other processes are out of sight. ``auto`` grades without it where it
cannot be set up and says so in the batch's notes; ``on`` then refuses to start.
"""

from __future__ import annotations

import importlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import _sandbox, roster, static
from ._worker import read_submission, trusted_cells
from .rows import STATUSES, Row, write_csv, write_feedback  # noqa: F401 - re-exported
from .submission import grade_submission, question_points  # noqa: F401 - re-exported
from .build import (BUILD, AssignmentError, autograder_zip, build_one, check_release, master_path,
                    student_notebook)
from .build import forbidden as build_forbidden
from .build import variants


def submissions_in(folder: Path | str) -> list[Path]:
    """The ``*.ipynb`` and ``*.zip`` files directly in ``folder``, sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AssignmentError(f"submissions folder not found: {folder}")
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".ipynb", ".zip"))
    if not found:
        raise AssignmentError(f"no submissions (*.ipynb or *.zip) in {folder}")
    return found


def _prepare(name: str, built: Path, allow_stale: bool) -> dict:
    """What grading with one build needs: zip, points, release, handed-out cells, forbidden names."""
    if allow_stale:
        release = (json.loads((built / "release.json").read_text()).get("release")
                   if (built / "release.json").exists() else None)
    else:
        release = check_release(built, name)["release"]
    zip_path = autograder_zip(built)
    handout = student_notebook(built)
    nb = read_submission(handout)  # read once: its code cells, the VARIANT cell, the trusted cells
    given = [c.source for c in nb.cells if c.cell_type == "code"]
    return {
        "built": built, "zip": zip_path, "points": question_points(zip_path), "release": release,
        "handout": handout, "given": given,
        # an edited VARIANT cell changes nothing (the grader re-runs the handed-out one) but is worth a look
        "variant_cell": roster.variant_cell(given),
        # so is any other handed-out cell (data, constants, imports) edited or removed
        "handed_out": [s for s in trusted_cells(nb) if not s.lstrip().startswith(roster.VARIANT_HEADER)],
        "forbidden": (json.loads((built / "forbidden.json").read_text()) if (built / "forbidden.json").exists()
                      else build_forbidden(name)),
    }


def variant_build_dir(build_dir: Path | str, variant: int) -> Path:
    """Where the build of one variant lives for per-student grading: ``<build_dir>/variant-<k>``."""
    return Path(build_dir) / f"variant-{variant}"


SANDBOX_MODES = ("auto", "on", "off")

#: credentials and the like in the home directory, hidden from the students' code as well
HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".git-credentials", ".pypirc",
                ".config/gh", ".config/gcloud", ".bash_history", ".zsh_history", ".python_history")


def sandbox_hides(paths: list[Path | str | None]) -> list[str]:
    """What the sandbox hides: ``paths`` (the batch's folders and files), the whole home
    directory (what the code needs there, a Python environment or packages on ``sys.path``, is
    put back read-only: ``_worker._box``), its :data:`HOME_SECRETS` again (should a kept
    folder hold them) and Jupyter's runtime folder (the other kernels' connection files),
    those that exist, without duplicates."""
    found = [Path(p) for p in paths if p is not None]
    home = Path.home()
    found += [home] + [home / s for s in HOME_SECRETS]
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        found.append(Path(jupyter_runtime_dir()))
    except ImportError:
        pass
    return list(dict.fromkeys(str(p.resolve()) for p in found if p.exists()))


def feedback_paths(out: Path | str, subs: list[Path]) -> list[Path]:
    """The files a batch writes for ``subs`` with the CSV ``out``: the CSV, and per submission
    ``feedback/<stem>.json``, ``.html`` and ``feedback/instructor/<stem>.json`` next to it."""
    out = Path(out)
    folder = out.parent / "feedback"
    found = [out]
    for sub in subs:
        stem = Path(sub.name).stem
        found += [folder / f"{stem}.json", folder / f"{stem}.html", folder / "instructor" / f"{stem}.json"]
    return found


def earlier_results(out: Path | str, subs: list[Path]) -> list[Path]:
    """Those of :func:`feedback_paths` that exist already (an earlier run wrote them)."""
    return [p for p in feedback_paths(out, subs) if p.exists()]


def notes_path(out: Path | str) -> Path:
    """The batch's notes next to the CSV: ``scores-intro.csv`` -> ``scores-intro-notes.txt``."""
    out = Path(out)
    return out.with_name(f"{out.stem}-notes.txt")


def grade(name: str, folder: Path | str, *, timeout: float = 300.0, out: Path | str | None = None,
          jobs: int = 1, build_dir: Path | str = BUILD, progress: bool = False,
          memory_mb: float | None = 4096.0, id_regex: str | None = None,
          deadline: str | None = None, allow_stale: bool = False,
          manual: Path | str | None = None, roster_csv: Path | str | None = None,
          timestamps: Path | str | None = None, late_policy: str | None = None,
          cell_timeout: float | None = None, question_timeout: float | None = None,
          accept: list[str] | None = None, sandbox: str = "auto",
          notes: list[str] | None = None, overwrite: bool = False) -> list[Row]:
    """Grade the submissions in ``folder`` against assignment ``name``; write the CSV to ``out``
    and the feedback files to ``<out's folder>/feedback/``.

    The autograder is taken from ``<build_dir>/<name>`` (built first if missing). ``jobs``
    submissions are graded at the same time, each in its own process. With ``id_regex`` only
    each student's latest file is graded (the others are listed in its row); ``deadline`` (ISO
    8601, UTC unless an offset is given) fills the ``late_hours`` column, from the file names
    and times or from ``timestamps`` (a CSV, see :func:`.roster.read_timestamps`);
    ``late_policy`` is ``latest``, ``on-time`` or ``per-hour:X`` (:func:`.roster.parse_late_policy`).
    ``manual`` is a filled ``manual-NAME.csv`` (:mod:`.manual`): its points and comments are
    added to each row.

    With ``roster_csv`` every student has their own variant (:func:`.roster.variant_for`, as
    the ``handout`` command assigned them): each submission is graded with the build of its
    variant, ``<build_dir>/variant-<k>/<name>`` (built when missing), and its handed-out cells
    (the ``VARIANT`` constants included) come from that build, never from the submission.

    ``accept`` lists students (IDs or file names) whose submissions the instructor has reviewed:
    their tests run even where the code's static flags would void every test (flagged as such).

    With ``out``, an earlier run's CSV or feedback files for these submissions stop the batch
    before anything is built or graded (:func:`earlier_results`); ``overwrite`` replaces them
    (the feedback of submissions not in this batch stays).

    ``sandbox`` is ``auto``, ``on`` or ``off`` (see the module's text); a note for the whole
    batch (the sandbox was unavailable) is printed, appended to ``notes`` when given, and
    written next to the CSV (:func:`notes_path`).
    """
    if sandbox not in SANDBOX_MODES:
        raise AssignmentError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, got {sandbox!r}")
    master_path(name)  # unknown name: error listing the valid ones
    if timeout <= 0:
        raise AssignmentError(f"timeout must be positive, got {timeout}")
    if jobs < 1:
        raise AssignmentError(f"jobs must be >= 1, got {jobs}")
    if memory_mb is not None and memory_mb < 512:
        raise AssignmentError(f"memory_mb must be at least 512 (MiB) or None for no limit, got {memory_mb}")
    for label, value in (("cell_timeout", cell_timeout), ("question_timeout", question_timeout)):
        if value is not None and value <= 0:
            raise AssignmentError(f"{label} must be positive, got {value}")
    try:
        regex = roster.compile_id_regex(id_regex)
        when = roster.parse_deadline(deadline)
        policy, per_hour = roster.parse_late_policy(late_policy)
        times = roster.read_timestamps(timestamps) if timestamps is not None else None
        students = roster.read_roster(roster_csv) if roster_csv is not None else None
    except ValueError as e:
        raise AssignmentError(str(e)) from None
    if policy != "latest" and when is None:
        raise AssignmentError(f"--late-policy {late_policy} needs --deadline")
    subs, superseded = roster.latest_per_student(submissions_in(folder), regex, times,
                                                 on_time_before=when if policy == "on-time" else None)
    if students is None:  # per-student handouts graded as one variant: every score would be wrong
        handed = [(s.name, roster.notebook_student(s)) for s in subs]
        handed = [(f, sid) for f, sid in handed if sid]
        if handed and len(variants(name)) > 1:
            raise AssignmentError(f"{handed[0][0]} is a per-student handout (for {handed[0][1]}"
                                  f"{f', and {len(handed) - 1} more' if len(handed) > 1 else ''}), each "
                                  f"student with a variant of their own: grade with --roster ROSTER.csv and "
                                  f"--build-dir DIR/builds, as the handout command printed")
    if out is not None and not overwrite:
        earlier = earlier_results(out, subs)
        if earlier:
            shown = ", ".join(str(p) for p in earlier[:3]) + (f" and {len(earlier) - 3} more" if len(earlier) > 3 else "")
            raise AssignmentError(f"an earlier run's results would be overwritten: {shown}. Pass --overwrite "
                                  f"(overwrite=True) to replace them, or --out a CSV in another folder to keep "
                                  f"both runs (the feedback goes next to the CSV)")
    batch_notes: list[str] = []
    boxed = False
    if sandbox != "off":  # probed once for the batch, before anything is built or graded
        boxed, why = _sandbox.probe()
        if not boxed and sandbox == "on":
            raise AssignmentError(f"--sandbox on: the filesystem sandbox cannot be set up here: {why}. "
                                  f"Use --sandbox auto (grade without it, noted in the batch's output) or off; "
                                  f"valid values: {', '.join(SANDBOX_MODES)}")
        if not boxed:
            batch_notes.append(f"the filesystem sandbox was unavailable ({why}): the students' code ran "
                               f"with your user's file access (it could read the solutions and hidden tests)")
            print(f"note: {batch_notes[-1]}", file=sys.stderr, flush=True)
    hand: dict[str, dict[str, float]] = {}
    hand_possible: dict[str, float] = {}
    comments: dict[str, str] = {}
    per_question: dict[str, dict[str, str]] = {}
    if manual is not None:
        from .manual import manual_questions, read_comments, read_points, read_question_comments

        hand = read_points(name, manual)
        comments = read_comments(name, manual)
        per_question = read_question_comments(name, manual)
        hand_possible = {q.name: q.points for q in manual_questions(name)}
        ungraded = [s.name for s in subs if s.name not in hand]
        if ungraded:
            raise AssignmentError(f"{manual} has no points for {', '.join(ungraded)}: "
                                  f"run collect-manual again or add their rows")
    pending: dict[str, float] = {}  # without --manual: the hand-graded questions, not graded yet
    if manual is None:
        from .manual import manual_questions

        pending = {q.name: q.points for q in manual_questions(name)}
        if pending:
            batch_notes.append(f"graded without --manual: the hand-graded {', '.join(pending)} "
                               f"({sum(pending.values()):g} points) are left out of the totals and their "
                               f"columns are empty (collect-manual, then grade again with --manual)")
            print(f"note: {batch_notes[-1]}", file=sys.stderr, flush=True)

    def ready(build_root: Path, variant: int | None) -> dict:
        built = build_root / name
        if not autograder_zip(built).exists():
            built = build_one(name, build_root, variant=variant)
        return _prepare(name, built, allow_stale)

    def who(sub: Path) -> str:
        """The student: from the file name with --id-regex, else from a per-student handout's
        metadata, else (without --id-regex) the file's stem."""
        return roster.submission_student(sub, regex)

    setups: dict[int | None, dict] = {}
    choice: dict[Path, int | None] = {}
    if students is None:
        setups[None] = ready(Path(build_dir), None)
        choice = {sub: None for sub in subs}
    else:
        table = sorted(variants(name))
        if not table:
            raise AssignmentError(f"assignment {name!r} has no variants: grade it without --roster")
        known = set(students)
        for sub in subs:
            sid = who(sub)
            choice[sub] = roster.variant_for(sid, name, table) if sid in known else None
        for k in sorted({k for k in choice.values() if k is not None}):
            setups[k] = ready(variant_build_dir(build_dir, k), k)

    hide = None
    if boxed:
        masters = importlib.import_module(".build", __package__).MASTERS  # as --masters set it
        hide = sandbox_hides([build_dir, folder, masters, Path(out).parent if out is not None else None,
                              roster_csv, timestamps, manual]
                             + [p for st in setups.values() for p in (st["built"], Path(st["zip"]).parent,
                                                                       Path(st["handout"]).parent)])

    def one(sub: Path) -> Row:
        setup = setups.get(choice[sub])
        sid = who(sub)
        if setup is None:  # per-student variants, and this file's student is not on the roster
            any_setup = next(iter(setups.values()), None)
            points = any_setup["points"] if any_setup else {}
            row = Row(sub.name, "error", {q: 0.0 for q in points}, dict(points))
            row.message = (f"student ID {sid!r} is not on the roster: its variant is unknown" if sid
                           else "no student ID in the file name: its variant is unknown")
        else:
            row = grade_submission(setup["zip"], sub, timeout, setup["points"], memory_mb, handout=setup["handout"],
                                   cell_timeout=cell_timeout, question_timeout=question_timeout,
                                   forbid=setup["forbidden"],
                                   accept_voided=bool(accept) and (sid in accept or sub.name in accept),
                                   sandbox=hide)
        for q, top in hand_possible.items():
            row.scores[q] = hand.get(sub.name, {}).get(q, 0.0)
            row.possible[q] = top
        row.student_id = sid
        if sub.name in comments:
            row.comments[""] = comments[sub.name]
        row.comments.update(per_question.get(sub.name, {}))
        row.pending = {q: top for q, top in pending.items() if q not in row.possible}
        row.late_hours = roster.hours_late(sub, when, times)
        if policy == "per-hour":
            row.penalty = round(min(sum(row.scores.values()), per_hour * row.late_hours), 4)
        row.superseded = [p.name for p in superseded.get(sub, [])]
        if setup is not None:
            sources = roster.notebook_sources(sub)
            row.flags = static.flags(sources, setup["forbidden"], setup["given"]) + row.flags
            if setup["variant_cell"] is not None:
                got = roster.variant_cell(sources)
                if got != setup["variant_cell"]:
                    # the edited cell itself also reassigns VARIANT: one flag says it
                    row.flags = [f for f in row.flags if not f.startswith("reassigns VARIANT")]
                    row.flags.append("VARIANT cell " + ("missing" if got is None else "edited")
                                     + " (graded with the handed-out constants)")
            changed = roster.edited_cells(sources, setup.get("handed_out", []))
            if changed:
                row.flags.append(f"{len(changed)} handed-out cell(s) edited or removed (graded with the "
                                 f"handed-out ones): " + "; ".join(changed[:3]))
            handed_out = roster.notebook_release(sub)
            if setup["release"] and handed_out and handed_out != setup["release"]:
                row.flags.append(f"handed-out release {handed_out}, graded with {setup['release']}")
        if regex is not None and not roster.student_id(sub.name, regex):
            row.flags.append("file name does not match --id-regex"
                             + (" (ID taken from the notebook)" if row.student_id else ""))
        in_notebook = roster.notebook_student(sub)
        if in_notebook and row.student_id and in_notebook != row.student_id:
            row.flags.append(f"notebook handed out to {in_notebook}, submitted as {row.student_id}")
        if progress:
            print(f"{row.submission}: {row.status} {row.total:g}/{row.total_possible:g} "
                  f"({row.seconds:.1f} s) {row.message}", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(one, subs))
    graded = rows
    if students is not None:  # a row for every student on the roster, a submission or not
        handed_in = {r.student_id for r in rows}
        possible = next((dict(r.possible) for r in rows if r.possible), {})
        missing = [Row(submission="", status="missing", student_id=sid,
                       scores={q: 0.0 for q in possible}, possible=dict(possible),
                       message="no submission from this student on the roster",
                       pending={q: top for q, top in pending.items() if q not in possible})
                   for sid in students if sid not in handed_in]
        for row in missing:
            print(f"{row.student_id}: missing (no submission)", file=sys.stderr, flush=True)
        rows = rows + missing
    if out is not None:
        write_csv(rows, out)
        write_feedback(graded, Path(out).parent / "feedback", name)
        kept = notes_path(out)
        if batch_notes:
            kept.write_text("".join(f"note: {n}\n" for n in batch_notes))
        elif kept.exists():
            kept.unlink()  # an earlier batch's notes
    if notes is not None:
        notes.extend(batch_notes)
    return rows
