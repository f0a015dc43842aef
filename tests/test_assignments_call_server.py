"""The submission's functions run in a process of their own (``_call_server``): what they do
there does not reach the process that runs the tests."""

from __future__ import annotations

import builtins
import math
import signal

import pytest
import torch

from nnapprox.assignments import _answers
from nnapprox.assignments._call_server import FORGED, CallServer
from nnapprox.assignments._snapshot import _on_alarm, _Timeout

SOURCES = ['''import builtins
import math
import nnapprox.composition as C


def double(x):
    return 2 * x


def patching(x):
    builtins.abs = lambda v: 0
    math.isclose = lambda *a, **k: True
    return abs(-3)


def refuses(x):
    raise ValueError(f"x must be positive, got {x}")


def stalls():
    while True:
        pass


def bound(K, eps, L):
    return float(C.error_bound(K, eps, L))


def module():
    return math


def hidden(K, eps, L, _helper=C.error_bound):
    return float(_helper(K, eps, L))


def draws(n, g):
    return torch.randn(n, generator=g)


def tensors(t):
    return {"sum": t.sum(), "rows": [t[0], t[1]], "shape": t.shape}
''']


@pytest.fixture()
def server(tmp_path):
    answers = tmp_path / "answers.json"
    import nnapprox.composition as C
    # the kernel's imports reach the grader as module names, like its plain values
    _answers.dump({"offset": 3, "C": C, "math": math, "builtins": builtins, "torch": torch}, answers)
    # "existed": the functions the notebook's kernel had (the answers file's list, in grading)
    job = {"answers": str(answers), "sources": SOURCES, "trusted": [],
           "existed": ["double", "patching", "refuses", "stalls", "bound", "module", "tensors", "draws", "hidden"]}
    s = CallServer(job, tmp_path)
    yield s
    s.close()


def test_calls_return_plain_data_and_errors_keep_their_type(server):
    assert set(server.defined) >= {"double", "patching", "refuses", "stalls", "bound", "tensors"}
    assert server.proxy("double")(21) == 42
    t = torch.arange(6.0).reshape(2, 3)
    out = server.proxy("tensors")(t)
    assert float(out["sum"]) == 15.0 and out["shape"] == torch.Size([2, 3])
    torch.testing.assert_close(out["rows"][1], t[1])
    with pytest.raises(ValueError, match="x must be positive, got -1"):
        server.proxy("refuses")(-1)
    with pytest.raises(TypeError, match="module\\(\\) returned a builtins.module"):
        server.proxy("module")()
    with pytest.raises(TypeError, match="cannot pass these arguments.*module"):
        server.proxy("double")(math)


def test_a_generator_argument_draws_there_and_advances_here(server):
    g, h = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    torch.testing.assert_close(server.proxy("draws")(3, g), torch.randn(3, generator=h))
    # the caller's generator has moved on as if the function had run here
    torch.testing.assert_close(torch.randn(2, generator=g), torch.randn(2, generator=h))


def test_patches_stay_in_the_submissions_process(server):
    real_abs, real_isclose = builtins.abs, math.isclose
    assert server.proxy("patching")(1) == 0  # builtins.abs patched *there*
    assert builtins.abs is real_abs and math.isclose is real_isclose and abs(-3) == 3


def test_forbidden_helpers_raise_only_during_their_question(server):
    assert server.proxy("bound")(2.0, 0.5, 1) == pytest.approx(0.5)
    server.set_forbidden(["nnapprox.composition.error_bound"])
    with pytest.raises(AssertionError, match="forbids nnapprox.composition.error_bound"):
        server.proxy("bound")(2.0, 0.5, 1)
    with pytest.raises(AssertionError, match="forbids"):  # held in a default argument too
        server.proxy("hidden")(2.0, 0.5, 1)
    server.set_forbidden([])
    assert server.proxy("bound")(2.0, 0.5, 1) == pytest.approx(0.5)
    assert server.proxy("hidden")(2.0, 0.5, 1) == pytest.approx(0.5)


def test_an_interrupted_call_gets_a_fresh_process(server):
    first = server.proc.pid
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(_Timeout):
            server.proxy("stalls")()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert server.proxy("double")(5) == 10  # answered by a new process
    assert server.proc.pid != first


def test_library_records_travel_as_their_fields(server):
    from nnapprox.sequential import bandits as Q

    p = Q.make_problem(2, 3, 4, 2, 0.5, torch.Generator().manual_seed(1))
    back = _answers._decode(_answers._encode(p))
    assert type(back) is Q.Problem and back.sigma == p.sigma
    torch.testing.assert_close(back.actions, p.actions)
    with pytest.raises(ValueError, match="not a library record"):
        _answers._decode({"t": "record", "module": "os", "name": "system", "v": []})


FITS = ['''import numpy as np
import scipy.stats
from numpy.linalg import lstsq


def by_lstsq(x, y):
    return float(np.linalg.lstsq(np.stack([np.ones_like(x), x], 1), y, rcond=None)[0][1])


def by_imported_lstsq(x, y):
    return float(lstsq(np.stack([np.ones_like(x), x], 1), y, rcond=None)[0][1])


def by_polyfit(x, y):
    return float(np.polyfit(x, y, 1)[0])


def by_polynomial(x, y):
    return float(np.polynomial.Polynomial.fit(x, y, 1).convert().coef[1])


def by_linregress(x, y):
    return float(scipy.stats.linregress(x, y).slope)


def honest(x, y):
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())
''']


@pytest.fixture()
def fits(tmp_path):
    import numpy as np
    import scipy.stats

    answers = tmp_path / "answers.json"
    # the kernel's imports reach the grader as module names (and a function imported by name as its own)
    _answers.dump({"np": np, "scipy": scipy, "lstsq": np.linalg.lstsq}, answers)
    job = {"answers": str(answers), "sources": FITS, "trusted": [],
           "existed": ["by_lstsq", "by_imported_lstsq", "by_polyfit", "by_polynomial", "by_linregress", "honest"]}
    s = CallServer(job, tmp_path)
    yield s
    s.close()


def test_forbidden_names_of_other_packages_raise_through_their_modules(fits):
    """``numpy.linalg.lstsq``, ``numpy.polyfit`` and ``scipy.stats.linregress`` (scaling q1)
    refuse however the submission reaches them: as a module's attribute, imported by name, or
    inside another numpy fit that calls them; honest arithmetic still answers."""
    import numpy as np

    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = 2.0 * x + 1.0
    names = ["by_lstsq", "by_imported_lstsq", "by_polyfit", "by_polynomial", "by_linregress", "honest"]
    for name in names:
        assert fits.proxy(name)(x, y) == pytest.approx(2.0), name
    fits.set_forbidden(["numpy.polyfit", "numpy.linalg.lstsq", "scipy.stats.linregress"])
    for name in names[:-1]:
        with pytest.raises(AssertionError, match="this question forbids"):
            fits.proxy(name)(x, y)
    assert fits.proxy("honest")(x, y) == pytest.approx(2.0)
    fits.set_forbidden([])  # the next question: all of them work again
    for name in names:
        assert fits.proxy(name)(x, y) == pytest.approx(2.0), name


# an independent instructor's third trial: a forbidden helper stashed in a class body (which
# runs when the code is defined, before a question's guard), the builtins patched through
# ``torch.__builtins__`` (``getattr`` made to hide the ``unroll_`` helpers from the guard),
# and a global that carries one question's inputs into the next
TRIAL = ['''import math
import operator
import functools
import torch
import numpy as np
import nnapprox.composition as cc
from nnapprox.composition import error_bound

_TOL = 0.0
eigs = functools.partial(torch.linalg.eigvals)
SEEN = []


class Stash:
    f = error_bound
    g = operator.attrgetter('error_' + 'bound')(cc)
    ls = operator.attrgetter('lst' + 'sq')(np.linalg)


def plain_stash(K, eps, L):
    return float(Stash.f(K, eps, L))


def hidden_stash(K, eps, L):
    return float(Stash.g(K, eps, L))


def lstsq_stash(x, y):
    return float(Stash.ls(np.stack([np.ones_like(x), x], 1), y, rcond=None)[0][1])


def honest(K, eps, L):
    return float(eps * sum(K ** j for j in range(L)) + _TOL)


def rate(A):
    return float(eigs(A).abs().max())


def hijack():
    b = operator.attrgetter('__bu' + 'iltins__')(torch)
    if not isinstance(b, dict):
        b = operator.attrgetter('__di' + 'ct__')(b)
    real = b['get' + 'attr']

    def fake(o, name, *d):
        return None if name.startswith('error_') else real(o, name, *d)

    operator.setitem(b, 'get' + 'attr', fake)
    operator.setitem(b, 'a' + 'bs', lambda x: 0)
    return abs(-5)


def absolute(x):
    return abs(x)


def remember(x):
    SEEN.append(x)
    return len(SEEN)
''']


@pytest.fixture()
def trial(tmp_path):
    import functools

    import numpy as np

    import nnapprox.composition as C

    answers = tmp_path / "answers.json"
    kernel = {"math": math, "torch": torch, "np": np, "cc": C, "error_bound": C.error_bound, "functools": functools, "operator": __import__("operator"),
              "_TOL": 0.0, "eigs": functools.partial(torch.linalg.eigvals), "SEEN": [], "_": 3.0, "_i4": "x",
              "Out": {}}
    _answers.dump(kernel, answers)
    names = ["Stash", "plain_stash", "hidden_stash", "lstsq_stash", "honest", "rate", "hijack", "absolute",
             "remember"]
    job = {"answers": str(answers), "sources": TRIAL, "trusted": [], "existed": names,
           "forbid": {"q1": ["nnapprox.composition.error_bound"], "q2": ["numpy.linalg.lstsq"]}}
    s = CallServer(job, tmp_path)
    yield s
    s.close()


def test_a_helper_stashed_in_a_class_body_is_the_guard(trial):
    import numpy as np

    x = np.array([1.0, 2.0, 3.0])
    trial.begin([])
    for name in ("plain_stash", "hidden_stash", "honest"):
        assert trial.proxy(name)(2.0, 0.5, 1) == pytest.approx(0.5), name
    assert trial.proxy("lstsq_stash")(x, 2 * x + 1) == pytest.approx(2.0)
    trial.begin(["nnapprox.composition.error_bound"])
    for name in ("plain_stash", "hidden_stash"):
        with pytest.raises(AssertionError, match="forbids nnapprox.composition.error_bound"):
            trial.proxy(name)(2.0, 0.5, 1)
    assert trial.proxy("honest")(2.0, 0.5, 1) == pytest.approx(0.5)
    assert trial.proxy("lstsq_stash")(x, 2 * x + 1) == pytest.approx(2.0)  # allowed in this question
    trial.begin(["numpy.linalg.lstsq"])
    with pytest.raises(AssertionError, match="forbids numpy.linalg.lstsq"):
        trial.proxy("lstsq_stash")(x, 2 * x + 1)
    assert trial.tampered == [] and trial.refused == ["numpy.linalg.lstsq"]


def test_a_builtins_patch_is_caught_after_the_call_and_undone(trial):
    trial.begin([])
    first = trial.proc.pid
    assert trial.proxy("hijack")() == 0  # the patch works inside the call ...
    assert {"builtins.getattr", "builtins.abs"} <= set(trial.tampered), trial.tampered
    assert trial.proxy("absolute")(-5) == 5  # ... and is undone after it
    # the next question gets a fresh process, and the hidden getattr cannot switch its guard off
    trial.begin(["nnapprox.composition.error_bound"])
    assert trial.proc.pid != first and trial.tampered == []
    trial.proxy("hijack")()
    with pytest.raises(AssertionError, match="forbids"):
        trial.proxy("hidden_stash")(2.0, 0.5, 1)


def test_nothing_carries_from_one_question_to_the_next(trial):
    trial.begin([])
    assert [trial.proxy("remember")(i) for i in range(3)] == [1, 2, 3]
    trial.begin([])
    assert trial.proxy("remember")(9) == 1


def test_private_names_and_helpers_that_are_not_plain_data_reach_the_functions(trial):
    """``_TOL = 0.0`` is exported like any value (only IPython's ``_``, ``_i4``, ``Out`` are
    not), and ``eigs = functools.partial(...)`` is re-made where the functions run."""
    trial.begin([])
    assert trial.proxy("honest")(2.0, 0.5, 1) == pytest.approx(0.5)
    A = torch.tensor([[0.5, 0.0], [0.0, -0.25]], dtype=torch.float64)
    assert trial.proxy("rate")(A) == pytest.approx(0.5)
    assert trial.missing == {} and trial.at_definition == []


def test_a_name_that_cannot_be_carried_is_named(tmp_path):
    answers = tmp_path / "answers.json"
    _answers.dump({"torch": torch, "gen": (i for i in range(3))}, answers)
    assert "gen" in _answers.load(answers)["skipped"]
    source = ["import torch\ngen = (i for i in range(3))\nfor _ in range(2):\n    next(gen)\n"
              "gen = undefined_here()\n\ndef first():\n    return next(gen)\n"]
    s = CallServer({"answers": str(answers), "sources": source, "trusted": [], "existed": ["first"]}, tmp_path)
    try:
        assert set(s.missing) == {"gen"} and "not plain data" in s.missing["gen"], s.missing
        with pytest.raises(NameError, match="could not carry the notebook's top-level gen over"):
            s.proxy("first")()
    finally:
        s.close()


def test_ipython_names_are_the_only_ones_left_out():
    assert all(_answers.ipython_name(n) for n in ("_", "__", "___", "_i", "_ii", "_iii", "_i12", "_7", "_oh", "_ih",
                                                   "_dh", "In", "Out", "exit", "quit", "get_ipython", "__name__"))
    assert not any(_answers.ipython_name(n) for n in ("_TOL", "_helper", "_x1", "i", "Output"))


# the fourth instructor trial: ways to a second, unguarded copy of a forbidden helper (its
# module's code run again, its source compiled, the garbage collector searched, the guard's
# closure opened), and honest helpers that are not top-level defs
COPIES = ['''import functools
import gc
import importlib
import operator
import runpy

import numpy as np


def X(x):
    return np.stack([np.ones_like(x), x], 1)


def by_runpy(x, y):
    return float(runpy.run_module("numpy.linalg._linalg")["lstsq"](X(x), y, rcond=None)[0][1])


def by_reload(x, y):
    m = importlib.reload(importlib.import_module("numpy.linalg._linalg"))
    return float(m.lstsq(X(x), y, rcond=None)[0][1])


def by_file(x, y):
    spec = importlib.util.spec_from_file_location("mine", np.linalg._linalg.__file__)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return float(m.lstsq(X(x), y, rcond=None)[0][1])


def by_copy(x, y):
    ns = {"__name__": "numpy.linalg._linalg", "__package__": "numpy.linalg"}
    exec(compile(open(np.linalg._linalg.__file__).read(), "elsewhere.py", "exec"), ns)
    return float(ns["lstsq"](X(x), y, rcond=None)[0][1])


def by_gc(x, y):
    found = [o for o in gc.get_objects() if getattr(o, "__name__", "") == "lstsq"]
    return float(found[0](X(x), y, rcond=None)[0][1])


def closure_kinds():
    return sorted(type(c.cell_contents).__name__ for c in operator.attrgetter("__clo" + "sure__")(np.linalg.lstsq))


def by_closure(x, y):
    for cell in operator.attrgetter("__clo" + "sure__")(np.linalg.lstsq) or ():
        value = cell.cell_contents
        if isinstance(value, set):
            value.clear()
        elif type(value).__name__ in ("function", "_ArrayFunctionDispatcher"):
            return float(value(X(x), y, rcond=None)[0][1])
    return float(np.linalg.lstsq(X(x), y, rcond=None)[0][1])


def honest(x, y):
    A = X(x)
    return float(np.linalg.solve(A.T @ A, A.T @ y)[1])


def make_scale(a):
    def scale(v):
        return a * v
    return scale


triple = make_scale(3.0)


def _(v):
    return v + 10.0


ten = functools.partial(_, 5.0)


@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


for _k in range(1):
    globals()["looped"] = make_scale(2.0)


def helpers(v):
    return [triple(v), ten(), fib(10)]


def uses_looped(v):
    return looped(v)
''']


@pytest.fixture()
def copies(tmp_path):
    s = _kernel_server(tmp_path, COPIES, COPIES[0], {"_": 4.0})  # _: IPython's last output
    yield s
    s.close()


def _kernel_server(tmp_path, sources: list[str], code: str, extra: dict | None = None) -> CallServer:
    """A call server for ``sources``, whose answers file comes from a kernel that ran ``code``
    (plus the values ``extra``), as grading's worker exports it."""
    answers = tmp_path / "answers.json"
    kernel: dict = {"__name__": "__main__"}
    exec(code, kernel)
    kernel.pop("__builtins__")
    kernel.update(extra or {})
    _answers.dump(kernel, answers)
    job = {"answers": str(answers), "sources": sources, "trusted": [],
           "existed": _answers.load(answers)["defined"]}
    return CallServer(job, tmp_path)


def test_a_second_copy_of_a_forbidden_helper_is_refused_and_voids(copies):
    import numpy as np

    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = 2.0 * x + 1.0
    expected = {"by_runpy": "runs the code of", "by_reload": "runs the code of", "by_file": "runs the code of",
                "by_copy": "compile", "by_gc": "garbage collector"}
    for name, why in expected.items():
        copies.begin(["numpy.linalg.lstsq"])
        with pytest.raises(PermissionError, match="grading refuses"):
            copies.proxy(name)(x, y)
        assert any(why in t for t in copies.tampered), (name, copies.tampered)
    # the guard holds no real function and no switch: its closure leads nowhere
    copies.begin(["numpy.linalg.lstsq"])
    with pytest.raises(AssertionError, match="forbids numpy.linalg.lstsq"):
        copies.proxy("by_closure")(x, y)
    assert copies.refused == ["numpy.linalg.lstsq"] and copies.tampered == []
    assert not {"function", "set", "_ArrayFunctionDispatcher"} & set(copies.proxy("closure_kinds")())
    assert copies.proxy("honest")(x, y) == pytest.approx(2.0)
    copies.begin([])  # a question that allows lstsq: the same code answers, untouched
    for name in ("by_runpy", "by_reload", "honest"):
        assert copies.proxy(name)(x, y) == pytest.approx(2.0), name
        assert copies.tampered == [], name


def test_helpers_made_by_closures_decorators_and_partials_reach_the_functions(copies):
    copies.begin([])
    assert {"triple", "fib", "_", "helpers"} <= set(copies.defined)
    assert copies.proxy("helpers")(2.0) == [6.0, 15.0, 55]
    assert copies.proxy("fib")(12) == 144 and copies.proxy("triple")(1.0) == 3.0
    # a function made by a loop is not re-made, and the message says why
    assert "does not re-run" in copies.missing["looped"], copies.missing
    with pytest.raises(NameError, match="could not carry the notebook's top-level looped over"):
        copies.proxy("uses_looped")(1.0)


# the fifth instructor trial: ways past the guards through another process (multiprocessing,
# subprocess fetched by unpickling), the interpreter's frames (the call server's own state)
# and code the submission builds; and honest helpers that return what a test would refuse
ESCAPES = ['''import numpy as np
import operator, functools, collections, pickle, sys

def X(x):
    return np.stack([np.ones_like(x), x], 1)

def by_spawn(x, y):
    import multiprocessing
    fn = operator.attrgetter("linalg.lst" + "sq")(np)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return float(pool.apply(fn, (X(x), y), {"rcond": None})[0][1])

def by_fork(x, y):
    import multiprocessing
    fn = operator.attrgetter("linalg.lst" + "sq")(np)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return float(pool.apply(fn, (X(x), y), {"rcond": None})[0][1])

def by_subprocess(x, y):
    run = pickle.loads(b"csubprocess\\ncheck_output\\n.")
    return float(run([sys.executable, "-c", "print(2.0)"]))

def by_frames(x, y):
    f = pickle.loads(b"csys\\n_getframe\\n.")(0)
    return 1.0

def by_getframe(x, y):
    f = operator.attrgetter("_get" + "frame")(sys)(0)
    return 1.0

def by_traceback(x, y):
    try:
        raise ValueError
    except ValueError as e:
        f = operator.attrgetter("tb_" + "frame")(e.__traceback__)
    return 1.0

def by_exec(x, y):
    b = operator.attrgetter("__buil" + "tins__")(np)
    ex = b["ex" + "ec"] if isinstance(b, dict) else getattr(b, "ex" + "ec")
    ns = {}
    ex("r = 2.0", ns)
    return ns["r"]

P = collections.namedtuple("P", "a b")

def _helper_fn(a):
    def step(v):
        return a * v
    return step

def _gen(n):
    return (i for i in range(n))

def honest(x, y):
    A = X(x)
    s = _helper_fn(1.0)
    p = P(1, 2)
    total = sum(_gen(3))
    return float(s(np.linalg.solve(A.T @ A, A.T @ y)[1]))
''', '''def also(v):
    return v + 1

grader.check("q1")''']


@pytest.fixture()
def escapes(tmp_path):
    s = _kernel_server(tmp_path, ESCAPES, ESCAPES[0] + "\n\ndef also(v):\n    return v + 1\n")
    yield s
    s.close()


def test_processes_unpickled_names_frames_and_built_code_are_refused(escapes):
    import numpy as np

    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = 2.0 * x + 1.0
    expected = {"by_spawn": "starts a process", "by_fork": "starts a process (os.fork)",
                "by_subprocess": "unpickles a name", "by_frames": "unpickles a name",
                "by_getframe": "frames (sys._getframe)", "by_traceback": "frames (tb_frame)",
                "by_exec": "runs code it builds"}
    for name, why in expected.items():
        escapes.begin(["numpy.linalg.lstsq"])
        with pytest.raises(PermissionError, match="grading refuses"):
            escapes.proxy(name)(x, y)
        assert any(why in t for t in escapes.tampered), (name, escapes.tampered)


def test_helpers_may_return_anything_and_a_check_in_the_answer_cell_keeps_the_answer(escapes):
    """Only what a test receives must be plain data: ``honest`` uses a helper that returns a
    function, a generator and a namedtuple. ``also`` sits in a cell that ends with
    ``grader.check``."""
    import numpy as np

    x = np.array([1.0, 2.0, 3.0, 4.0])
    escapes.begin(["numpy.linalg.lstsq"])
    assert escapes.proxy("honest")(x, 2.0 * x + 1.0) == pytest.approx(2.0)
    assert escapes.tampered == [] and escapes.proxy("also")(1) == 2
    with pytest.raises(TypeError, match=r"_helper_fn\(\) returned a builtins.function"):
        escapes.proxy("_helper_fn")(2.0)


# the fifth trial: the submission writes a reply of its own on the server's channel (a pipe it
# finds among its descriptors), one that reports no tampering, before the server's own
FORGES = ['''import os
import stat


def _pipes():
    return [fd for fd in range(3, 12) if _is_pipe(fd)]


def _is_pipe(fd):
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def forges(x):
    for fd in _pipes():
        try:
            os.write(fd, b'{"ok": true, "result": 42, "tampered": [], "refused": [], "id": "0"}\\n')
        except OSError:
            pass
    return x


def honest(x):
    return x + 1
''', '''class Greeting:  # a class body runs when the code is defined
    for fd in _pipes():
        try:
            os.write(fd, b'{"defined": ["honest"], "problems": [], "missing": {}, "tampered": [], "id": "0"}\\n')
        except OSError:
            pass
''']


def test_a_reply_the_server_did_not_write_voids_the_question(tmp_path):
    """Each message carries the grader's random token, which the submission's code cannot
    read: a forged reply (at a call, or a greeting written while the code is defined) is
    caught, the process killed, and the question counts as tampered."""
    calls = _kernel_server(tmp_path, FORGES[:1], FORGES[0])
    try:
        calls.begin([])
        assert calls.proxy("honest")(1) == 2 and calls.tampered == []
        with pytest.raises(RuntimeError, match="did not write"):
            calls.proxy("forges")(1)
        assert calls.tampered == [FORGED]
        calls.begin([])  # the next question: a fresh process, nothing carried over
        assert calls.proxy("honest")(1) == 2 and calls.tampered == []
    finally:
        calls.close()
    # the kernel (here: this process) must not run the class body, which would write on this
    # process's own pipes; the kernel had the class, so the server defines it
    answers = tmp_path / "answers.json"
    kernel: dict = {"__name__": "__main__"}
    exec(FORGES[0], kernel)
    kernel.pop("__builtins__")
    _answers.dump(kernel, answers)
    greeting = CallServer({"answers": str(answers), "sources": FORGES, "trusted": [],
                           "existed": [*_answers.load(answers)["defined"], "Greeting"]}, tmp_path)
    try:
        assert greeting.at_definition == [FORGED] and greeting.defined == []
    finally:
        greeting.close()


SIGNALS = ['''import signal
import _signal
from signal import signal as install


def by_signal(x):
    return signal.signal(signal.SIGUSR1, lambda number, frame: frame.f_back.f_locals)


def by_builtin(x):
    return _signal.signal(signal.SIGUSR1, print)


def by_name(x):
    return install(signal.SIGUSR1, print)


def honest(x):
    return x + 1
''']


def test_a_signal_handler_is_refused_and_voids(tmp_path):
    """A handler would be called with the interrupted frame, and ``f_back`` leads to the
    server's (the reply channel and the call's token): installing one is refused however the
    code reaches ``signal.signal``, and the question counts as tampered."""
    calls = _kernel_server(tmp_path, SIGNALS, SIGNALS[0])
    try:
        for name in ("by_signal", "by_builtin", "by_name"):
            calls.begin([])
            with pytest.raises(PermissionError, match="signal handler"):
                calls.proxy(name)(1)
            assert any("installs a signal handler" in t for t in calls.tampered), (name, calls.tampered)
        calls.begin([])
        assert calls.proxy("honest")(1) == 2 and calls.tampered == []
    finally:
        calls.close()


STACKS = ['''import asyncio


def by_task_stack(x):
    async def main():
        return len(asyncio.current_task().get_stack())

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def honest(x):
    return x + 1
''']


def test_a_coroutine_stack_from_asyncio_is_refused(tmp_path):
    """The sixth trial read the server's frames through ``asyncio.current_task().get_stack()``
    (asyncio reads ``cr_frame`` on the caller's behalf) and erased its refusals there."""
    calls = _kernel_server(tmp_path, STACKS, STACKS[0])
    try:
        calls.begin([])
        with pytest.raises(PermissionError, match="reading frames"):
            calls.proxy("by_task_stack")(1)
        assert any("frames (cr_frame)" in t for t in calls.tampered), calls.tampered
        calls.begin([])
        assert calls.proxy("honest")(1) == 2 and calls.tampered == []
    finally:
        calls.close()


# the eighth trial: a forbidden function reached where no name holds it (numpy's registry of
# overridable functions, a set), and a torch built-in called as a Tensor method by a computed
# name; also torch's operator registry and the switches that turn torch function modes off
EIGHTH = ['''import operator
import numpy as np
import torch
from numpy.testing import overrides


def X(x):
    return np.stack([np.ones_like(x), x], 1)


def by_registry(x, y):
    found = [f for f in overrides.get_overridable_numpy_array_functions() if f.__name__ == "pi" + "nv"]
    return float((found[0](X(x)) @ y)[1])


def by_method(x, y):
    A = torch.as_tensor(X(x))
    return float((operator.methodcaller("pinv" + "erse")(A) @ torch.as_tensor(y))[1])


def by_operator(x, y):
    A = torch.as_tensor(X(x))
    return float((operator.attrgetter("ops.aten.linalg_" + "pinv")(torch)(A) @ torch.as_tensor(y))[1])


def by_switch(x, y):
    with operator.attrgetter("_C.DisableTorch" + "Function")(torch)():
        return by_method(x, y)


def by_pop(x, y):
    operator.attrgetter("_C._pop_torch_" + "function_stack")(torch)()
    return by_method(x, y)


def honest(x, y):
    A = torch.as_tensor(X(x))
    return float(torch.linalg.solve(A.T @ A, A.T @ torch.as_tensor(y))[1])
''']


@pytest.fixture()
def eighth(tmp_path):
    s = _kernel_server(tmp_path, EIGHTH, EIGHTH[0])
    yield s
    s.close()


def test_a_forbidden_function_raises_however_it_is_reached(eighth):
    import numpy as np

    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = 2.0 * x + 1.0
    names = ["by_registry", "by_method", "by_operator", "by_switch", "by_pop", "honest"]
    for name in names:  # before the question: every route works (by_pop: there is no mode to pop)
        if name != "by_pop":
            assert eighth.proxy(name)(x, y) == pytest.approx(2.0), name
    forbid = ["numpy.linalg.pinv", "torch.pinverse", "torch.linalg.pinv"]
    for name in ["by_registry", "by_method", "by_operator"]:
        eighth.begin(forbid)
        with pytest.raises(AssertionError, match="this question forbids"):
            eighth.proxy(name)(x, y)
        assert eighth.refused, name
    for name in ["by_switch", "by_pop"]:
        eighth.begin(forbid)
        with pytest.raises(PermissionError, match="switching torch's function modes off"):
            eighth.proxy(name)(x, y)
        assert any("function modes off" in t for t in eighth.tampered), (name, eighth.tampered)
    eighth.begin(forbid)
    assert eighth.proxy("honest")(x, y) == pytest.approx(2.0)
    assert eighth.tampered == [] and eighth.refused == []


def test_the_eighth_trials_routes_are_flagged():
    from nnapprox.assignments import static

    found = static.flags(EIGHTH)
    for flag in ("reaches library functions without their names (numpy.testing.overrides)",
                 "names an attribute in computed text (operator.methodcaller)",
                 "names an attribute in computed text (operator.attrgetter)"):
        assert flag in found, found
    assert static.flags(["import operator\nf = operator.methodcaller('sum')\n"]) == []


def test_the_ninth_trials_file_readers_are_flagged_and_void():
    """With the sandbox off, numpy.memmap, numpy.loadtxt and torch.from_file read the instructor's
    files (ninth instructor trial); each, however imported, is a voiding flag."""
    from nnapprox.assignments import static

    cases = [
        "import numpy as np\ndef f(p):\n    return np.memmap(p, dtype=np.uint8, mode='r')\n",
        "import numpy as np\ndef f(p):\n    return np.loadtxt(p, dtype=str)\n",
        "import numpy\ndef f(p):\n    return numpy.lib.format.open_memmap(p)\n",
        "import torch\ndef f(p):\n    return torch.from_file(p, size=10, dtype=torch.uint8)\n",
        "import torch\ndef f(p):\n    return torch.UntypedStorage.from_file(p, False, 10)\n",
        "from numpy import genfromtxt\ndef f(p):\n    return genfromtxt(p)\n",
        "import torch as t\ndef f(p):\n    return t.load(p)\n",
        "import tokenize\ndef f(p):\n    return tokenize.open(p).read()\n",
        "import mmap\n",
        "import numpy as np\ndef f(p):\n    return np.lib.npyio.load(p)\n",
        "import numpy as np\nnp.save('leak.npy', np.zeros(3))\n",
    ]
    for code in cases:
        found = static.flags([code])
        assert static.voiding(found), (code, found)
    # ordinary numpy and torch code is not flagged
    assert static.flags(["import numpy as np\nimport torch\nx = np.linspace(0, 1, 5)\n"
                         "y = torch.tensor(x).sum()\n"]) == []
