"""Autograded problem sets built from the chapters (otter-grader, no container).

Masters: ``chapters/assignments/<name>.md`` (one per chapter). Command line::

    python -m nnapprox.assignments list
    python -m nnapprox.assignments build [NAME ...]            # -> _build/assignments/<name>/
    python -m nnapprox.assignments grade NAME FOLDER [--timeout S] [--out scores.csv] [--jobs N]

See the instructor guide (``book/instructors.md``).
"""

from .build import (
    BUILD,
    MASTERS,
    AssignmentError,
    autograder_zip,
    available,
    build,
    build_one,
    forbidden,
    master_notebook,
    master_path,
    solution_notebook,
    student_notebook,
    use_masters,
    variants,
)
from .grade import STATUSES, Row, grade, grade_submission, question_points, submissions_in, write_csv

__all__ = [
    "BUILD",
    "MASTERS",
    "STATUSES",
    "AssignmentError",
    "Row",
    "autograder_zip",
    "available",
    "build",
    "build_one",
    "forbidden",
    "grade",
    "grade_submission",
    "master_notebook",
    "master_path",
    "question_points",
    "solution_notebook",
    "student_notebook",
    "use_masters",
    "variants",
    "submissions_in",
    "write_csv",
]
