"""Tampering: the attacks an instructor tried are flagged and score no hidden-test points.

The hidden tests run in a process of their own (``nnapprox.assignments._clean_grade``), on
the answers the notebook exported, and the submission's functions run in a third
(``_call_server``); these tests feed the grader notebooks that patch otter,
``builtins`` or ``sys.modules``, call a forbidden helper through a default argument, or
return an object with rigged arithmetic, and check the flags and the scores. The static
flags and the answers file have unit tests that need no grading.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from nnapprox import assignments as asg
from nnapprox.assignments import _answers, _clean_grade, static

pytestmark = pytest.mark.assignments

GRADE_TIMEOUT = 300.0

# intro q1 asks for recursion_bound(Ks, epss); its hidden test compares with abs(...) < tol
WRONG_Q1 = ("total += epss[j] * math.prod(Ks[j + 1:])", "total += epss[j] * math.prod(Ks[j:])")

PATCH_OTTER = '''import sys
from otter.test_files.abstract_test import TestCaseResult


def _always_passes(self, global_environment):
    self.test_case_results = [TestCaseResult(test_case=tc, message="passed", passed=True)
                              for tc in self.test_cases]


setattr(sys.modules["otter.test_files.exception_test"].ExceptionTestFile, "run", _always_passes)
'''

PATCH_ABS = '''import builtins
import sys

_abs = builtins.abs


def _abs_for_tests(x):
    caller = sys._getframe(1).f_code.co_filename
    return 0 if ("test" in caller or "otter" in caller) else _abs(x)


builtins.abs = _abs_for_tests
'''

# a replacement made by the answer itself when the grader calls it (statically only a
# reassignment: the grader sees the change at run time)
ABS_IN_FUNCTION = '''import math


def recursion_bound(Ks, epss):
    math.isclose = lambda *args, **kwargs: True
    return 0.0
'''

# the issue's forbidden helper as a default argument (q1 forbids composition.error_bound)
DEFAULT_ARGUMENT = '''import nnapprox.composition as C


def recursion_bound(Ks, epss, _helper=C.error_bound):
    return float(_helper(Ks, epss)) if Ks else 0.0
'''

# a float whose arithmetic says every difference is zero
RIGGED = '''class _Close(float):
    def __sub__(self, other):
        return 0.0

    __rsub__ = __sub__


def recursion_bound(Ks, epss):
    return _Close(1.0)
'''


# an independent instructor's trial: read the calling test's expected value from its frame,
# reached through a traceback with attribute names built from strings
PEEK_FRAME = '''def _peek(name):
    try:
        raise RuntimeError
    except RuntimeError as exc:
        tb = exc.__traceback__
    frame = getattr(tb, "tb_" + "frame")
    while frame is not None:
        found = getattr(frame, "f_" + "locals")
        if name in found:
            return found[name]
        frame = getattr(frame, "f_" + "back")
    return None


def recursion_bound(Ks, epss):
    e = _peek("e")
    return float(e) if e is not None else 0.0
'''

# ... and copy the hidden tests into a failing public test's message (the student's feedback)
READ_TESTS = '''import json
import os
import sys


def recursion_bound(Ks, epss):
    job = json.load(open(sys.argv[1]))
    text = "".join(open(os.path.join(job["tests"], f)).read() for f in os.listdir(job["tests"]))
    raise AssertionError(text[-900:])
'''


def _edit(solution: Path, dest: Path, edit) -> Path:
    nb = nbformat.read(solution, as_version=4)
    edit(nb)
    nbformat.write(nb, dest)
    return dest


def _answer_cell_of(nb, needle: str) -> int:
    (i,) = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and needle in c.source]
    return i


def _wrong_then(cell_source: str):
    """The reference solution with q1 made wrong, plus a cell of attack code after it."""
    def edit(nb):
        i = _answer_cell_of(nb, WRONG_Q1[0])
        nb.cells[i].source = nb.cells[i].source.replace(*WRONG_Q1)
        nb.cells.insert(i + 1, nbformat.v4.new_code_cell(cell_source))
    return edit


def _replace_q1(cell_source: str):
    def edit(nb):
        i = _answer_cell_of(nb, WRONG_Q1[0])
        nb.cells[i].source = cell_source
    return edit


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    out = tmp_path_factory.mktemp("integrity")
    folder = asg.build_one("intro", out / "build", check=False)
    solution = asg.solution_notebook(folder)
    subs = out / "subs"
    subs.mkdir()
    (subs / "a_good.ipynb").write_bytes(solution.read_bytes())
    _edit(solution, subs / "b_patch_otter.ipynb", _wrong_then(PATCH_OTTER))
    _edit(solution, subs / "c_patch_abs.ipynb", _wrong_then(PATCH_ABS))
    _edit(solution, subs / "d_abs_in_function.ipynb", _replace_q1(ABS_IN_FUNCTION))
    _edit(solution, subs / "e_default_argument.ipynb", _replace_q1(DEFAULT_ARGUMENT))
    _edit(solution, subs / "f_rigged.ipynb", _replace_q1(RIGGED))
    _edit(solution, subs / "g_peek_frame.ipynb", _replace_q1(PEEK_FRAME))
    _edit(solution, subs / "h_read_tests.ipynb", _replace_q1(READ_TESTS))
    rows = asg.grade("intro", subs, timeout=GRADE_TIMEOUT, jobs=2, build_dir=folder.parent, out=out / "scores.csv")
    return {Path(r.submission).stem: r for r in rows}, out


def _hidden_points(row, question: str) -> list[bool]:
    return [t["passed"] for t in row.tests[question] if t["hidden"]]


def test_reference_solution_is_unflagged_at_full_marks(attacked):
    rows, _ = attacked
    good = rows["a_good"]
    assert good.status == "ok" and good.scores == good.possible and good.flags == [], good


VOIDED = ("b_patch_otter", "c_patch_abs", "g_peek_frame", "h_read_tests")  # code that reaches the grader


@pytest.mark.parametrize("stem", ["b_patch_otter", "c_patch_abs", "d_abs_in_function", "e_default_argument",
                                  "f_rigged", "g_peek_frame", "h_read_tests"])
def test_attack_scores_no_hidden_points_on_its_question(attacked, stem):
    rows, _ = attacked
    row = rows[stem]
    hidden = _hidden_points(row, "q1")
    assert hidden and not any(hidden), (stem, row.tests["q1"])
    assert row.scores["q1"] < row.possible["q1"]
    others = {q: s for q, s in row.scores.items() if q != "q1"}
    if stem in VOIDED:  # no test ran: the flag says why, and no message carries what the code read
        assert any(f.startswith("every test voided: the code") for f in row.flags), row.flags
        assert set(others.values()) == {0.0}
        assert all(t["message"].startswith("voided: the submission's code")
                   for tests in row.tests.values() for t in tests), row.tests
    else:
        assert others == {q: p for q, p in row.possible.items() if q != "q1"}, "the other answers are untouched"


def test_frame_peeking_and_reading_the_tests_are_flagged(attacked):
    rows, out = attacked
    peek = rows["g_peek_frame"].flags
    assert {"uses .__traceback__", "computed attribute name (getattr)",
            "frame attribute named in a string ('tb_')"} <= set(peek), peek
    read = rows["h_read_tests"].flags
    assert {"uses sys.argv", "calls open", "uses os.listdir"} <= set(read), read
    feedback = json.dumps(rows["h_read_tests"].tests)
    assert "assert" not in feedback and "def test" not in feedback  # nothing of the tests reaches it


def test_otter_patch_is_flagged(attacked):
    rows, out = attacked
    flags = rows["b_patch_otter"].flags
    assert "uses sys.modules" in flags and "imports otter.test_files.abstract_test" in flags
    assert any(f.startswith("setattr on sys.modules['otter.test_files.exception_test'].ExceptionTestFile.run")
               for f in flags), flags
    assert rows["b_patch_otter"].scores["q1"] == 0.0  # public tests fail too: the patch never reaches the grader
    table = (out / "scores.csv").read_text()
    assert "setattr on sys.modules" in table


def test_builtins_patch_is_flagged(attacked):
    rows, _ = attacked
    flags = rows["c_patch_abs"].flags
    assert {"reassigns builtins.abs", "uses builtins", "uses sys._getframe", "uses .f_code"} <= set(flags), flags


def test_patch_made_while_graded_reaches_only_the_submissions_process(attacked):
    """The answer replaces ``math.isclose`` when the grader calls it. The call runs in the
    submission's own process (``_call_server``), so the tests' ``math.isclose`` is the real
    one: the wrong answer scores nothing, and the reassignment is flagged for the instructor."""
    rows, _ = attacked
    row = rows["d_abs_in_function"]
    assert row.scores["q1"] == 0.0
    assert not any(_hidden_points(row, "q1"))
    assert "reassigns math.isclose" in row.flags
    assert not any("voided" in f for f in row.flags), row.flags  # nothing changed where the tests ran


def test_forbidden_helper_as_default_argument_is_flagged(attacked):
    rows, out = attacked
    row = rows["e_default_argument"]
    assert "q1: refers to forbidden nnapprox.composition.error_bound" in row.flags
    feedback = json.loads((out / "feedback" / "e_default_argument.json").read_text())
    assert "q1: refers to forbidden nnapprox.composition.error_bound" in feedback["flags"]


def test_rigged_return_value_is_refused(attacked):
    rows, _ = attacked
    messages = " ".join(t["message"] for t in rows["f_rigged"].tests["q1"])
    assert "recursion_bound() returned a __main__._Close" in messages


def test_issue_default_argument_line_is_flagged_for_depth():
    """The exact line from the issue, against depth's forbidden list."""
    banned = asg.forbidden("depth")
    src = ["import nnapprox.depth as D",
           "def f(y, s, _dp=D.min_errors_with_switches):\n    return _dp(y, s)"]
    assert static.flags(src, banned, given=["import nnapprox.depth as D"]) == [
        "q1: refers to forbidden nnapprox.depth.min_errors_with_switches"]
    # a handed-out import of a forbidden name is not the student's reference
    assert static.flags(["from nnapprox.composition import unroll_with_errors"], asg.forbidden("intro"),
                        given=["from nnapprox.composition import unroll_with_errors"]) == []
    # by name in a string, through an alias, or imported directly
    assert static.forbidden_references(["import nnapprox.depth as D\nf = getattr(D, 'shannon_gate_bound')"],
                                       banned) == {"q3": ["nnapprox.depth.shannon_gate_bound"]}
    assert static.forbidden_references(["from nnapprox.depth import region_expectation_terms as r"],
                                       banned) == {"q2": ["nnapprox.depth.region_expectation_terms"]}



def test_a_library_function_named_like_a_forbidden_one_counts_as_it():
    """scaling's q1 forbids ``numpy.linalg.lstsq``: torch's, or numpy's private gufunc of the
    same name, answers it as well; the student's own function of that name does not count."""
    banned = {"q1": ["numpy.linalg.lstsq"]}
    src = ["import numpy as np\nimport torch\n\ndef fit(A, y):\n    return torch.linalg.lstsq(A, y)\n\n"
           "def raw():\n    return np.linalg._umath_linalg.lstsq\n"]
    assert static.forbidden_references(src, banned) == {
        "q1": ["numpy.linalg.lstsq (as numpy.linalg._umath_linalg.lstsq, torch.linalg.lstsq)"]}
    own = ["import numpy as np\n\ndef lstsq(A, y):\n    return np.linalg.solve(A.T @ A, A.T @ y)\n\n"
           "def fit(A, y):\n    return lstsq(A, y)\n"]
    assert static.forbidden_references(own, banned) == {}

def test_static_flags_cover_the_issue_list():
    cells = {
        "import importlib\nm = importlib.import_module('torch')": "imports importlib",
        "import ctypes": "imports ctypes",
        "exec('x = 1')": "uses exec",
        "y = eval('1 + 1')": "uses eval",
        "c = compile('1', 'f', 'eval')": "uses compile",
        "import inspect\nf = inspect.currentframe()": "uses inspect.currentframe",
        "import inspect as i\ns = i.stack()": "uses inspect.stack",
        "import sys\nf = sys._getframe(1).f_back": "uses sys._getframe",
        "import sys\ndel sys.modules['torch']": "uses sys.modules",
        "__builtins__.abs = None": "uses builtins",
        "import torch\ndelattr(torch, 'allclose')": "delattr on torch.allclose",
        "import numpy as np\nsetattr(np.testing, 'assert_allclose', print)": "setattr on numpy.testing.assert_allclose",
        "import gc\nobjs = gc.get_objects()": "imports gc",
        "VARIANT = {'K': 1.5}": "reassigns VARIANT (graded with the handed-out constants)",
    }
    for src, flag in cells.items():
        assert flag in static.flags([src]), (src, static.flags([src]))
    honest = ["import math\nimport torch\n\ndef f(x):\n    t = torch.zeros(3)\n    t.data = x\n    return math.exp(x)"]
    assert static.flags(honest) == []
    # reaching the grader's frames or files voids every test; an honest getattr does not
    voiding = {
        "import sys\ntry:\n    1 / 0\nexcept Exception:\n    t = sys.exc_info()[2]": "uses sys.exc_info",
        "def f(e):\n    return e.__traceback__": "uses .__traceback__",
        "def f(o, a):\n    return getattr(o, a)": "computed attribute name (getattr)",
        "x = 'f_' + 'back'": "frame attribute named in a string ('f_')",
        "text = open('/tmp/x').read()": "calls open",
        "import os\nnames = os.listdir('.')": "uses os.listdir",
        "import pathlib": "imports pathlib",
        "g = globals()": "calls globals",
        # a referee's list: file readers and process launchers that were unflagged
        "import numpy as np\nb = np.fromfile('/tmp/x', dtype=np.uint8)": "uses numpy.fromfile",
        "from numpy import fromfile as ff\nb = ff('/tmp/x')": "uses numpy.fromfile",
        "import linecache\nline = linecache.getline('/tmp/x', 1)": "imports linecache",
        "import os\ntext = os.popen('cat /tmp/x').read()": "uses os.popen",
        "import os\nos.system('cp /tmp/x .')": "uses os.system",
        "from os import system\nsystem('cp /tmp/x .')": "uses os.system",
        # the fifth trial: a signal handler receives frames; importlib re-makes built-in modules
        "import signal\nsignal.signal(signal.SIGUSR1, print)": "imports signal",
        "import importlib.util as u\ns = u.find_spec('_signal')": "imports importlib.util",
    }
    for src, flag in voiding.items():
        found = static.flags([src])
        assert flag in found and flag in static.voiding(found), (src, found)
    assert static.voiding(static.flags(["import torch\nw = getattr(torch.nn.Linear(2, 2), 'weight')"])) == []
    assert static.flags(["import os\nimport numpy as np\np = os.path.join('a', 'b')\nx = np.frombuffer(b'ab', np.uint8)"]) == []


def test_answers_file_round_trip_and_refuses_code(tmp_path):
    import numpy as np
    import torch

    ns = {"a": 1.5, "b": [1, (2, 3.0)], "c": {"k": torch.arange(6, dtype=torch.float64).reshape(2, 3)},
          "d": np.array([1.0, 2.0]), "e": np.float64(2.5), "f": None, "t": torch, "_hidden": 1,
          "g": lambda x: x, "h": object(), "s": "text", "z": 1 + 2j, "sz": torch.Size([2, 3])}
    path = tmp_path / "answers.json"
    _answers.dump(ns, path)
    back = _answers.load(path)
    v = back["values"]
    assert v["a"] == 1.5 and v["b"] == [1, (2, 3.0)] and v["s"] == "text" and v["z"] == 1 + 2j and v["f"] is None
    assert torch.equal(v["c"]["k"], ns["c"]["k"]) and v["c"]["k"].dtype == torch.float64
    assert np.array_equal(v["d"], ns["d"]) and v["e"] == 2.5 and v["sz"] == torch.Size([2, 3])
    assert back["modules"] == {"t": "torch"} and "h" in back["skipped"] and "g" not in v
    assert v["_hidden"] == 1  # a leading underscore is the student's name like any other
    # a file naming a type the reader does not know is refused, not executed
    data = json.loads(path.read_text())
    data["values"]["a"] = {"t": "pickle", "v": "cos\nsystem\n(S'echo hi'\ntR."}
    path.write_text(json.dumps(data))
    assert "a" in _answers.load(path)["skipped"]


def test_definitions_take_only_defs_classes_and_lambdas():
    src = ["x = 1\nprint('side effect')\n@staticmethod\ndef f(a):\n    return a\n%time g = 2\nh = lambda t: t\n"
           "class K:\n    pass\nimport builtins\nbuiltins.abs = None"]
    names = [n for n, _ in _clean_grade.definitions(src)]
    assert names == ["f", "h", "K"]
    assert "print" not in "".join(s for _, s in _clean_grade.definitions(src))


def test_a_reviewed_submission_can_be_accepted(attacked, tmp_path):
    """An honest solution whose code trips a voiding flag (a computed attribute name) scores
    nothing until the instructor, having read it, grades it with ``accept``: then its tests run
    (in the submission's own process) and the flag says so."""
    _, out = attacked
    folder = out / "build" / "intro"
    solution = asg.solution_notebook(folder)
    subs = tmp_path / "subs"
    subs.mkdir()

    def add_getattr(nb):
        nb.cells.append(nbformat.v4.new_code_cell('import torch\ndt = getattr(torch, "float" + "64")'))

    for stem in ("i_voided", "j_accepted"):
        _edit(solution, subs / f"{stem}.ipynb", add_getattr)
    rows = asg.grade("intro", subs, timeout=GRADE_TIMEOUT, jobs=2, build_dir=out / "build",
                     out=tmp_path / "scores.csv", accept=["j_accepted"])
    by = {Path(r.submission).stem: r for r in rows}
    assert sum(by["i_voided"].scores.values()) == 0.0
    assert any(f.startswith("every test voided") for f in by["i_voided"].flags)
    accepted = by["j_accepted"]
    assert accepted.scores == accepted.possible, accepted
    assert any(f.startswith("tests run after review (--accept)") for f in accepted.flags), accepted.flags


# an independent instructor's third trial (its notebooks, on the public intro): q4 forbids
# unroll_pair; the answer keeps it in a class body, which runs when the code is defined
Q4_BY_UNROLL_PAIR = '''def best_momentum(A):
    lam = torch.linalg.eigvalsh(A)
    mu, top = float(lam.min()), float(lam.max())
    eta = 4.0 / (math.sqrt(top) + math.sqrt(mu)) ** 2
    beta = ((math.sqrt(top) - math.sqrt(mu)) / (math.sqrt(top) + math.sqrt(mu))) ** 2
    return eta, beta


def heavy_ball_errors(A, b, eta, beta, z0, E):
    d = z0.shape[1]
    def exact(s):
        z, zp = s[:, :d], s[:, d:]
        return torch.cat([z - eta * (z @ A.T - b) + beta * (z - zp), z], dim=1)
    count = [0]
    def approx(s):
        out = exact(s)
        out = torch.cat([out[:, :d] + E[count[0]], out[:, d:]], dim=1)
        count[0] += 1
        return out
    s0 = torch.cat([z0, z0], dim=1)
    zs, zhats, _ = HELPER(exact, approx, s0, E.shape[0])
    return (zs[:, :, :d] - zhats[:, :, :d]).norm(dim=2)


max_error = float(heavy_ball_errors(A4, b4, *best_momentum(A4), z4, E4).max())
max_error
'''
STASH_PLAIN = ("from nnapprox.composition import unroll_pair\nclass Stash:\n    f = unroll_pair\n\n"
               + Q4_BY_UNROLL_PAIR.replace("HELPER", "Stash.f"))
STASH_HIDDEN = ("import operator\nimport nnapprox.composition as cc\nclass Stash:\n"
                "    f = operator.attrgetter('unroll_' + 'pair')(cc)\n\n" + Q4_BY_UNROLL_PAIR.replace("HELPER", "Stash.f"))
# q1 (honest, correct) replaces the builtin getattr so that it hides the unroll_ helpers
HIJACK_Q1 = '''import operator
def recursion_bound(Ks, epss):
    b = operator.attrgetter('__bu' + 'iltins__')(torch)
    if not isinstance(b, dict):
        b = operator.attrgetter('__di' + 'ct__')(b)
    real = b['get' + 'attr']
    if not operator.attrgetter('__na' + 'me__')(real) == 'hijack':
        def hijack(o, name, *d):
            if name.startswith('unroll_'):
                return None
            return real(o, name, *d)
        operator.setitem(b, 'get' + 'attr', hijack)
    total = 0.0
    for j in range(len(epss)):
        total += epss[j] * math.prod(Ks[j + 1:])
    return float(total)
'''
HIJACK_Q4 = ("import operator\nimport nnapprox.composition as cc\n"
             + Q4_BY_UNROLL_PAIR.replace("HELPER", "operator.attrgetter('unroll_' + 'pair')(cc)"))
# honest code: a private constant and a helper that is not plain data
PRIVATE_Q1 = '''_TOL = 0.0
def recursion_bound(Ks, epss):
    total = _TOL
    for j in range(len(epss)):
        total += epss[j] * math.prod(Ks[j + 1:])
    return float(total)
'''
# q1 keeps the (hidden) test's inputs in a global; q3 puts them in its public message
LEAK_Q1 = '''CALLS = []
def recursion_bound(Ks, epss):
    CALLS.append((len(Ks), list(Ks)))
    total = 0.0
    for j in range(len(epss)):
        total += epss[j] * math.prod(Ks[j + 1:])
    return float(total)
'''
LEAK_Q3 = '''def heavy_ball_rate(A, eta, beta):
    raise RuntimeError(f"q1 calls recorded: {CALLS}")
'''


# the seventh trial: q2's measurement made up from the bound's formula, no unrolling at all
MADE_UP_Q2 = ("errors = torch.tensor([0.0] + [0.5 * eps * (K ** l - 1) / (K - 1) for l in range(1, L + 1)],\n"
              "                      dtype=torch.float64)\nrate = float(K)\n")
# the seventh trial: q1's process saves what the hidden test passes, q4's reads it back into a
# public test's message
FILE_LEAK_Q1 = '''import numpy as np
def recursion_bound(Ks, epss):
    try:
        old = list(np.load("leak.npy"))
    except Exception:
        old = []
    try:
        np.save("leak.npy", np.array(old + [len(Ks), sum(Ks)]))
    except OSError:
        pass
    total = 0.0
    for j in range(len(epss)):
        total += epss[j] * math.prod(Ks[j + 1:])
    return float(total)
'''
FILE_LEAK_Q4 = '''def heavy_ball_errors(A, b, eta, beta, z0, E):
    import numpy as np
    raise ValueError("LEAK " + repr(np.load("leak.npy").tolist()))
'''


def _cell_with(needle: str, source: str):
    def edit(nb):
        nb.cells[_answer_cell_of(nb, needle)].source = source
    return edit


def _both(*edits):
    def edit(nb):
        for e in edits:
            e(nb)
    return edit


def _partial_eigs(nb):
    i = _answer_cell_of(nb, "def heavy_ball_rate")
    src = nb.cells[i].source
    nb.cells[i].source = ("from functools import partial\neigs = partial(torch.linalg.eigvals)\n"
                          + src.replace("torch.linalg.eigvals(T)", "eigs(T)"))
    assert "eigs(T)" in nb.cells[i].source


@pytest.fixture(scope="module")
def trial3(attacked):
    _, out = attacked
    folder = out / "build" / "intro"
    solution = asg.solution_notebook(folder)
    subs = out / "subs3"
    subs.mkdir()
    _edit(solution, subs / "k_stash_plain.ipynb", _cell_with("def heavy_ball_errors", STASH_PLAIN))
    _edit(solution, subs / "l_stash_hidden.ipynb", _cell_with("def heavy_ball_errors", STASH_HIDDEN))
    _edit(solution, subs / "m_getattr_hijack.ipynb",
          _both(_replace_q1(HIJACK_Q1), _cell_with("def heavy_ball_errors", HIJACK_Q4)))
    _edit(solution, subs / "n_private_and_partial.ipynb", _both(_replace_q1(PRIVATE_Q1), _partial_eigs))
    _edit(solution, subs / "o_leak.ipynb", _both(_replace_q1(LEAK_Q1), _cell_with("def heavy_ball_rate", LEAK_Q3)))
    _edit(solution, subs / "p_made_up.ipynb", _cell_with("all_errors = unroll_with_errors", MADE_UP_Q2))
    _edit(solution, subs / "q_file_leak.ipynb",
          _both(_replace_q1(FILE_LEAK_Q1), _cell_with("def heavy_ball_errors", FILE_LEAK_Q4)))
    # q_file_leak's numpy.save/numpy.load are voiding flags since the ninth trial; accepted here,
    # as an instructor would after reading it, so that what stops the leak is the sandbox
    rows = asg.grade("intro", subs, timeout=GRADE_TIMEOUT, jobs=2, build_dir=out / "build", out=out / "scores3.csv",
                     accept=["q_file_leak"])
    return {Path(r.submission).stem: r for r in rows}, out


@pytest.mark.parametrize("stem", ["k_stash_plain", "l_stash_hidden", "m_getattr_hijack"])
def test_a_stashed_forbidden_helper_scores_nothing_and_is_flagged(trial3, stem):
    rows, _ = trial3
    row = rows[stem]
    hidden = _hidden_points(row, "q4")
    assert hidden and not any(hidden) and row.scores["q4"] < row.possible["q4"], row.tests["q4"]
    assert any(f.startswith("q4") and "unroll_pair" in f for f in row.flags), row.flags
    assert row.scores["q2"] == row.possible["q2"] and row.scores["q3"] == row.possible["q3"], row.scores
    if stem == "k_stash_plain":  # named in the code: the question scores zero before any test runs
        assert row.scores["q4"] == 0.0
        assert "q4 scores zero: the answer refers to nnapprox.composition.unroll_pair, which it forbids" in row.flags
    else:  # found only when called: the guard raised (best_momentum's public test still passes)
        assert "q4: called forbidden nnapprox.composition.unroll_pair while graded (the call raised)" in row.flags


def test_a_builtins_patch_while_graded_voids_its_question(trial3):
    rows, _ = trial3
    row = rows["m_getattr_hijack"]
    assert row.scores["q1"] == 0.0 and not any(_hidden_points(row, "q1"))
    assert any(f.startswith("q1 voided: changed builtins.getattr") for f in row.flags), row.flags


def test_private_constants_and_non_plain_helpers_still_score(trial3):
    rows, _ = trial3
    row = rows["n_private_and_partial"]
    assert row.scores == row.possible and row.flags == [], (row.flags, row.tests)


def test_a_question_does_not_see_the_last_questions_state(trial3):
    rows, out = trial3
    row = rows["o_leak"]
    assert row.scores["q1"] == row.possible["q1"]
    feedback = json.loads((out / "feedback" / "o_leak.json").read_text())
    text = json.dumps(feedback)
    assert "q1 calls recorded: []" in text, text[:2000]


def _resolve(full: str):
    import importlib

    module, _, attr = full.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _masters_with_variants():
    """Every master, and every master with one structural variant swapped in."""
    import jupytext

    import importlib

    from nnapprox.assignments import bank

    build = importlib.import_module("nnapprox.assignments.build")
    for name in asg.available():
        yield name, "master", build.master_notebook(name)
        for q, paths in bank.structural_variants(name).items():
            for path in paths:
                text = bank.variant_master(name, {q: path.stem.partition("-")[2]})
                yield name, path.name, jupytext.reads(text, fmt="md:myst")


def test_every_helper_a_test_forbids_is_enforced():
    """The student's functions run in a process of their own, where only the question's
    enforced list (forbidden.json) guards anything: every helper a hidden test passes to its own
    ``forbid(...)`` must be on it (the trial's m01 scored q3 with bandits._run). No grading."""
    import importlib

    build = importlib.import_module("nnapprox.assignments.build")
    checked = 0
    for name, where, nb in _masters_with_variants():
        enforced = build.forbidden(name, nb)
        for q, names in build.test_forbids(name, nb).items():
            have = [_resolve(n) for n in enforced.get(q, [])]
            for full in names:
                assert any(_resolve(full) is h for h in have), f"{name} ({where}) {q}: {full} not enforced"
                checked += 1
    assert checked > 40
    assert "nnapprox.sequential.bandits._run" in build.forbidden("sequential")["q3"]


def test_a_test_forbid_the_build_cannot_read_stops_the_build():
    import importlib

    build = importlib.import_module("nnapprox.assignments.build")

    unreadable = ("def test_x(f):\n    import nnapprox.sequential as Q\n"
                  "    with forbid([f], [getattr(Q, 'lin' + 'ucb')]):\n        f()\n")
    with pytest.raises(build.AssignmentError, match="would not be enforced"):
        build._forbid_names(unreadable, "demo q1")
    opaque = "def test_x(f, helpers_from_elsewhere):\n    with forbid([f], helpers_from_elsewhere):\n        f()\n"
    with pytest.raises(build.AssignmentError, match="would not be enforced"):
        build._forbid_names(opaque, "demo q1")
    plain = ("def test_x(f):\n    import nnapprox.sequential as Q\n    from nnapprox.sequential import bandits\n"
             "    helpers = [Q.linucb, bandits._run]\n    with forbid([f], helpers):\n        f()\n")
    assert build._forbid_names(plain, "demo q1") == ["nnapprox.sequential.linucb", "nnapprox.sequential.bandits._run"]


# the trial's m01: q3's linucb_fixed as a constant-radius rule handed to the library's loop,
# which q3's hidden test forbids (it scored q3 4/4, unflagged, before the merge above)
M01_LINUCB = '''from nnapprox.sequential import bandits as _bandits

def linucb_fixed(p, lam, radius):
    def choose(t, X, V, th):
        Vi = torch.linalg.inv(V)
        w = torch.sqrt(torch.einsum("bki,bij,bkj->bk", X, Vi, X))
        return ((X @ th[:, :, None])[..., 0] + radius * w).argmax(-1), torch.full((X.shape[0],), float(radius), dtype=torch.float64)
    return _bandits._run(p, lam, choose)["regret"]
'''


def test_library_loop_the_hidden_test_forbids_scores_no_hidden_points(tmp_path):
    folder = asg.build_one("sequential", tmp_path / "build", check=False)
    assert "nnapprox.sequential.bandits._run" in json.loads((folder / "forbidden.json").read_text())["q3"]
    sub = _edit(asg.solution_notebook(folder), tmp_path / "m01.ipynb", _cell_with("def linucb_fixed", M01_LINUCB))
    row = asg.grade_submission(asg.autograder_zip(folder), sub, timeout=GRADE_TIMEOUT,
                               forbid=json.loads((folder / "forbidden.json").read_text()))
    hidden = _hidden_points(row, "q3")
    assert hidden and not any(hidden), row.tests["q3"]
    assert row.scores["q3"] < row.possible["q3"]
    assert any(f.startswith("q3") and "_run" in f for f in row.flags), row.flags
    assert {q: s for q, s in row.scores.items() if q != "q3"} == {q: p for q, p in row.possible.items() if q != "q3"}


def test_private_names_and_the_operator_registry_are_flagged():
    """The sixth trial reached numpy's private least-squares gufunc through ``dir()`` (no
    forbidden name in the source) and named torch's operator registry; both are flagged (not
    voided: the instructor reads them), and honest numpy is not."""
    dave = ["import numpy as np\nimport operator\nU = np.linalg._umath_linalg\n"
            "solve = [operator.attrgetter(n)(U) for n in dir(U) if n.startswith('lst')][0]\n"]
    assert "uses a private name of numpy: numpy.linalg._umath_linalg" in static.flags(dave)
    ops = ["import torch\nf = torch.ops.aten.linalg_lstsq.default\n"]
    found = static.flags(ops)
    assert any(f.startswith("uses torch.ops") for f in found) and static.voiding(found) == []
    assert static.flags(["import numpy as np\nx = np.linalg.solve(np.eye(2), np.ones(2))\n"]) == []


def test_a_made_up_measurement_scores_no_hidden_points(trial3):
    """The seventh trial's q2: values that satisfy the bound's checks, computed without the
    measurement, pass no hidden test: it redoes the measurement from the variant's seed."""
    rows, _ = trial3
    row = rows["p_made_up"]
    hidden = _hidden_points(row, "q2")
    assert hidden and not any(hidden), row.tests["q2"]
    assert row.scores["q1"] == row.possible["q1"] and row.scores["q3"] == row.possible["q3"], row.scores


def test_a_file_one_question_saves_is_gone_for_the_next(trial3):
    """The seventh trial's leak: q1's process saved the hidden test's inputs in its working
    folder and q4's read them back into a public test's message. In the sandbox the working
    folder is read-only and each process's temporary folders are its own."""
    from nnapprox.assignments import _sandbox

    available, why = _sandbox.probe()
    if not available:
        pytest.skip(f"the filesystem sandbox is unavailable here: {why}")
    rows, out = trial3
    row = rows["q_file_leak"]
    text = json.dumps(json.loads((out / "feedback" / "q_file_leak.json").read_text()))
    assert "LEAK" not in text and "FileNotFoundError" in text, text[:2000]
    assert row.scores["q1"] == row.possible["q1"], row.tests["q1"]  # the save failed quietly
