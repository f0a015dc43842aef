"""The submission's functions run in a process of their own (``_call_server``): what they do
there does not reach the process that runs the tests."""

from __future__ import annotations

import builtins
import math
import signal

import pytest
import torch

from nnapprox.assignments import _answers
from nnapprox.assignments._call_server import CallServer
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
