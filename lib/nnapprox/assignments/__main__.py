"""``python -m nnapprox.assignments {list,build,grade}`` (see the package docstring)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .build import (BUILD, AssignmentError, autograder_zip, available, build_one, master_path, student_notebook,
                    use_masters, variants)
from .grade import grade


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnapprox.assignments", description=__doc__)
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
                         help="address-space limit per submission in MiB (default: 4096; 0: none)")
    p_grade.add_argument("--id-regex", default=None,
                         help="regular expression taking the student ID from the file name (group 'id' "
                              "or the first group); only each student's latest file is graded")
    p_grade.add_argument("--manual", type=Path, default=None,
                         help="filled manual-NAME.csv from collect-manual: adds the hand-graded points")
    p_grade.add_argument("--allow-stale", action="store_true",
                         help="grade even if the master changed since the autograder was built")
    p_grade.add_argument("--deadline", default=None,
                         help="ISO 8601 time (UTC unless an offset is given): fills the late_hours column")
    p_manual = sub.add_parser("collect-manual",
                              help="review pages and a points template for the hand-graded questions")
    p_manual.add_argument("name", metavar="NAME")
    p_manual.add_argument("folder", type=Path)
    p_manual.add_argument("--out", type=Path, default=None, help="output folder (default: <folder>/manual)")
    p_manual.add_argument("--anonymise", action="store_true", help="show submissions as S01, S02, ...")
    p_manual.add_argument("--id-regex", default=None, help="as for grade")
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
                built = build_one(name, args.out, check=not args.no_check, variant=args.variant)
                print(f"{name}: {student_notebook(built)}  {autograder_zip(built)}  "
                      f"({time.perf_counter() - start:.0f} s)")
        elif args.command == "collect-manual":
            from .manual import collect

            csv_path = collect(args.name, args.folder, args.out or Path(args.folder) / "manual",
                               anonymise=args.anonymise, id_regex=args.id_regex)
            print(f"review pages and the points template: {csv_path.parent} ({csv_path.name}); "
                  f"fill it in, then: grade {args.name} {args.folder} --manual {csv_path}")
        elif args.command == "grade":
            out = args.out or Path(args.folder) / f"scores-{args.name}.csv"
            rows = grade(args.name, args.folder, timeout=args.timeout, out=out, jobs=args.jobs,
                         build_dir=args.build_dir, progress=True, memory_mb=args.memory_mb or None,
                         id_regex=args.id_regex, deadline=args.deadline, allow_stale=args.allow_stale,
                         manual=args.manual)
            counts = {s: sum(r.status == s for r in rows) for s in ("ok", "error", "timeout")}
            print(f"{len(rows)} submissions graded ({counts['ok']} ok, {counts['error']} error, "
                  f"{counts['timeout']} timeout): {out}; feedback in {Path(out).parent / 'feedback'}")
            flagged = [r.submission for r in rows if r.flags]
            if flagged:
                print(f"flagged for a look: {', '.join(flagged)} (see the flags column)")
    except AssignmentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
