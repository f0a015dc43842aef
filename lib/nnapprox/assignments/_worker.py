"""Grade ONE submission with ``otter run`` (no container) and write a JSON summary.

Run by :mod:`nnapprox.assignments.grade` in a process of its own, so that a crash or an
infinite loop in the student's notebook ends this process only:

    python -m nnapprox.assignments._worker AUTOGRADER.zip SUBMISSION RESULT.json

The JSON holds ``{"questions": {name: [score, possible]}, "cell_errors": [...], "tests":
{name: [{"test", "hidden", "passed", "points", "message"}, ...]}}``: the per-test results
that the instructor's feedback files are made of.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path


def _cell_errors(notebook) -> list[str]:
    errors = []
    for cell in getattr(notebook, "cells", None) or []:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                errors.append(f"{output.get('ename')}: {output.get('evalue')}"[:300])
    return errors


def _test_results(test_file) -> list[dict]:
    """Each test case of one question: public or hidden, passed, points, otter's message."""
    out = []
    for tcr in getattr(test_file, "test_case_results", None) or []:
        tc = tcr.test_case
        out.append({"test": tc.name, "hidden": bool(tc.hidden), "passed": bool(tcr.passed),
                    "points": None if tc.points is None else float(tc.points),
                    "message": (tcr.message or "").strip()[-1500:]})
    return out


def main(argv: list[str]) -> int:
    autograder, submission, result_path = argv
    from otter.run import main as otter_run

    # the notebook's own otter cells open "<assignment name>.ipynb": grade it under that name
    with zipfile.ZipFile(autograder) as zf:
        name = json.loads(zf.read("otter_config.json")).get("assignment_name")
    with tempfile.TemporaryDirectory() as tmp:
        if name and Path(submission).suffix == ".ipynb":
            submission = shutil.copy(submission, Path(tmp) / f"{name}.ipynb")
        with contextlib.redirect_stdout(sys.stderr):
            results = otter_run(submission, autograder=autograder, output_dir=None, no_logo=True)
    if results.catastrophic_error is not None:
        raise RuntimeError(f"otter could not grade the submission: {results.catastrophic_error}")
    summary = {
        "questions": {
            name: [float(tf.score), float(tf.possible)] for name, tf in sorted(results.results.items())
        },
        "cell_errors": _cell_errors(results.notebook),
        "tests": {name: _test_results(tf) for name, tf in sorted(results.results.items())},
    }
    with open(result_path, "w") as f:
        json.dump(summary, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
