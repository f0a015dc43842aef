"""Autograded assignments: build, hand out, grade, hand-grade, keep a private bank.

Commands (``python -m nnapprox.assignments COMMAND --help`` for each one's options):

  list            the assignments
  build           student notebooks and autograder zips (one variant)
  handout         one notebook per student on a roster, each with its own variant
  grade           grade a folder of submissions into a CSV and feedback pages
  collect-manual  review pages and a points template for the hand-graded questions
  new-bank        scaffold a private question bank (masters outside the public repository)

See the instructor guide (book/instructors.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .build import (BUILD, AssignmentError, autograder_zip, available, build_one, master_path, student_notebook,
                    use_masters, variants)
from .grade import grade, notes_path


def _options(args: argparse.Namespace, names: tuple[str, ...]) -> str:
    """The options of ``names`` that were given, as a command line would repeat them."""
    import shlex

    return "".join(f" --{n.replace('_', '-')} {shlex.quote(str(getattr(args, n)))}" for n in names
                   if getattr(args, n, None) is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnapprox.assignments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--masters", type=Path, default=None,
                        help="folder of private assignment masters (default: chapters/assignments)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the assignments")
    p_build = sub.add_parser("build", help="build student notebooks and autograder zips")
    p_build.add_argument("names", nargs="*", metavar="NAME", help="assignments to build (default: all)")
    p_build.add_argument("--out", type=Path, default=BUILD, help=f"output folder (default: {BUILD})")
    p_build.add_argument("--no-check", action="store_true",
                         help="skip otter's check of every test against the solutions")
    p_build.add_argument("--variant", type=int, default=None,
                         help="the constants of this variant of the master's '# VARIANTS' cell (default: 0)")
    p_build.add_argument("--grading-seed", type=int, default=None,
                         help="what the hidden tests draw their inputs from (default: the bank's grading_seed, "
                              "else a fresh random number); students never see it")
    p_grade = sub.add_parser("grade", help="grade a folder of submissions (*.ipynb, *.zip) into a CSV")
    p_grade.add_argument("name", metavar="NAME")
    p_grade.add_argument("folder", type=Path)
    p_grade.add_argument("--timeout", type=float, default=300.0,
                         help="wall-clock limit per submission in seconds (default: 300)")
    p_grade.add_argument("--out", type=Path, default=None,
                         help="CSV file (default: <folder>/scores-<name>.csv)")
    p_grade.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default: 1)")
    p_grade.add_argument("--build-dir", type=Path, default=BUILD, help=f"built assignments (default: {BUILD})")
    p_grade.add_argument("--memory-mb", type=float, default=4096.0,
                         help="address-space limit in MiB of each of a submission's three processes (its kernel, "
                              "its grading process, the one running its functions; default: 4096; 0: none)")
    p_grade.add_argument("--id-regex", default=None,
                         help="regular expression taking the student ID from the file name (group 'id' "
                              "or the first group); only each student's latest file is graded")
    p_grade.add_argument("--manual", type=Path, default=None,
                         help="filled manual-NAME.csv from collect-manual: adds the hand-graded points")
    p_grade.add_argument("--allow-stale", action="store_true",
                         help="grade even if the master changed since the autograder was built")
    p_grade.add_argument("--deadline", default=None,
                         help="ISO 8601 time (UTC unless an offset is given): fills the late_hours column")
    p_grade.add_argument("--timestamps", type=Path, default=None,
                         help="CSV of submission times (columns submission, submitted), as an LMS exports "
                              "them; used instead of file times")
    p_grade.add_argument("--late-policy", default=None,
                         help="latest (default), on-time (grade the last file submitted by --deadline) "
                              "or per-hour:X (X points off per hour late)")
    p_grade.add_argument("--roster", type=Path, default=None,
                         help="roster CSV (column student_id): grade each student against their own "
                              "variant, as the handout command assigned them")
    p_grade.add_argument("--cell-timeout", type=float, default=None,
                         help="seconds one cell may run before it is stopped (default: a third of --timeout)")
    p_grade.add_argument("--accept", action="append", default=[], metavar="ID",
                         help="a student (ID or file name) whose flagged code you reviewed: its tests run even "
                              "where the static flags would void them (repeat for several)")
    p_grade.add_argument("--question-timeout", type=float, default=None,
                         help="seconds one question's tests may run (default: a third of --timeout)")
    p_grade.add_argument("--sandbox", choices=("auto", "on", "off"), default="auto",
                         help="run the students' code (kernel and functions) in a filesystem sandbox that hides "
                              "the builds, masters, submissions, output and temporary folders (Linux user "
                              "namespaces). auto (default): when it works, else grade without it and say so; "
                              "on: refuse to grade without it; off: never")
    p_grade.add_argument("--overwrite", action="store_true",
                         help="replace an earlier run's CSV and feedback files (without it, grading refuses "
                              "to start when they exist)")
    p_manual = sub.add_parser("collect-manual",
                              help="review pages and a points template for the hand-graded questions")
    p_manual.add_argument("name", metavar="NAME")
    p_manual.add_argument("folder", type=Path)
    p_manual.add_argument("--out", type=Path, default=None, help="output folder (default: <folder>/manual)")
    p_manual.add_argument("--anonymise", action="store_true", help="show submissions as S01, S02, ...")
    p_manual.add_argument("--id-regex", default=None, help="as for grade")
    p_manual.add_argument("--timestamps", type=Path, default=None, help="as for grade (the same file)")
    p_manual.add_argument("--deadline", default=None, help="as for grade (with --late-policy on-time)")
    p_manual.add_argument("--late-policy", default=None, help="as for grade")
    p_handout = sub.add_parser("handout", help="one notebook per student on a roster, each with its own variant")
    p_handout.add_argument("name", metavar="NAME")
    p_handout.add_argument("roster", type=Path, help="CSV with a column student_id")
    p_handout.add_argument("--out", type=Path, required=True,
                           help="output folder: students/<id>/NAME.ipynb, builds/, handout-NAME.csv")
    p_handout.add_argument("--no-check", action="store_true", help="as for build")
    p_bank = sub.add_parser("new-bank", help="scaffold a private question bank outside the public repository")
    p_bank.add_argument("folder", type=Path, help="a new (or empty) folder outside this repository")
    p_bank.add_argument("--pick", type=int, default=0,
                        help="which structural variant of a question with several (default: 0)")
    args = parser.parse_args(argv)

    try:
        if args.masters is not None:
            use_masters(args.masters)
        if args.command == "list":
            for name in available():
                print(name)
        elif args.command == "build":
            names = args.names or available()
            for name in names:
                master_path(name)
                if args.variant is not None and not variants(name):
                    raise AssignmentError(f"assignment {name!r} has no variants; --variant needs a master "
                                          "with a '# VARIANTS' cell")
            for name in names:
                start = time.perf_counter()
                built = build_one(name, args.out, check=not args.no_check, variant=args.variant,
                                  grading_seed=args.grading_seed)
                print(f"{name}: {student_notebook(built)}  {autograder_zip(built)}  "
                      f"({time.perf_counter() - start:.0f} s)")
        elif args.command == "collect-manual":
            from .manual import collect

            csv_path = collect(args.name, args.folder, args.out or Path(args.folder) / "manual",
                               anonymise=args.anonymise, id_regex=args.id_regex, timestamps=args.timestamps,
                               deadline=args.deadline, late_policy=args.late_policy)
            same = _options(args, ("id_regex", "timestamps", "deadline", "late_policy"))
            print(f"review pages and the points template: {csv_path.parent} ({csv_path.name}); "
                  f"fill it in, then: python -m nnapprox.assignments{_options(args, ('masters',))} "
                  f"grade {args.name} {args.folder} "
                  f"--manual {csv_path}{same} --sandbox on (and, for per-student handouts, the --roster "
                  f"and --build-dir the handout command printed)")
        elif args.command == "handout":
            from .handout import handout

            csv_path = handout(args.name, args.roster, args.out, check=not args.no_check)
            print(f"one notebook per student under {args.out / 'students'}; who got which variant: {csv_path}; "
                  f"grade with: python -m nnapprox.assignments{_options(args, ('masters',))} grade {args.name} SUBMISSIONS "
                  f"--roster {args.roster} "
                  f"--build-dir {args.out / 'builds'} --sandbox on")
        elif args.command == "new-bank":
            from .bank import new_bank

            record = new_bank(args.folder, pick=args.pick)
            swapped = sum(len(v) for v in record.values())
            print(f"question bank in {args.folder}: {len(record)} masters, {swapped} questions replaced by a "
                  f"structural variant (see bank.json); use it with --masters {args.folder}")
        elif args.command == "grade":
            out = args.out or Path(args.folder) / f"scores-{args.name}.csv"
            notes: list[str] = []
            rows = grade(args.name, args.folder, timeout=args.timeout, out=out, jobs=args.jobs,
                         build_dir=args.build_dir, progress=True, memory_mb=args.memory_mb or None,
                         id_regex=args.id_regex, deadline=args.deadline, allow_stale=args.allow_stale,
                         manual=args.manual, roster_csv=args.roster, timestamps=args.timestamps,
                         late_policy=args.late_policy, cell_timeout=args.cell_timeout,
                         question_timeout=args.question_timeout, accept=args.accept, sandbox=args.sandbox,
                         notes=notes, overwrite=args.overwrite)
            counts = {s: sum(r.status == s for r in rows) for s in ("ok", "error", "timeout")}
            print(f"{len(rows)} submissions graded ({counts['ok']} ok, {counts['error']} error, "
                  f"{counts['timeout']} timeout): {out}; feedback in {Path(out).parent / 'feedback'}")
            flagged = [r.submission for r in rows if r.flags]
            if flagged:
                print(f"flagged for a look: {', '.join(flagged)} (see the flags column)")
            zeros = [f"{r.submission} ({', '.join(q for q, v in sorted(r.scores.items()) if v == 0 and r.possible.get(q))})"
                     for r in rows if not r.flags and r.status == "ok"
                     and any(v == 0 and r.possible.get(q) for q, v in r.scores.items())]
            if zeros:
                print(f"zero on a question without a flag (the tests' messages say why): {'; '.join(zeros)}")
            for note in notes:
                print(f"note: {note} (also in {notes_path(out)})")
    except AssignmentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
