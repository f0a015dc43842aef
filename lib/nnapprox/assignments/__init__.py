"""Autograded problem sets built from the chapters (otter-grader masters, our own grader).

Masters: ``chapters/assignments/<name>.md`` (one per chapter; public), or a private bank
(``--masters DIR``, made by ``new-bank``). Command line (``--help`` lists the options)::

    python -m nnapprox.assignments list
    python -m nnapprox.assignments build [NAME ...]            # -> _build/assignments/<name>/
    python -m nnapprox.assignments handout NAME ROSTER.csv --out DIR
    python -m nnapprox.assignments grade NAME FOLDER [--roster R] [--manual M] ...
    python -m nnapprox.assignments collect-manual NAME FOLDER [--anonymise]
    python -m nnapprox.assignments new-bank DIR

See the instructor guide (``book/instructors.md``).
"""

import warnings

from nbformat.warnings import MissingIDFieldWarning

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

# students' notebooks from older Jupyter versions lack cell ids: harmless, and nbformat would say
# so for every file of a batch (set once here, for the command line and every grading process)
warnings.filterwarnings("ignore", category=MissingIDFieldWarning)

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
