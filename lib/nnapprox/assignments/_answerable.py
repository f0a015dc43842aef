"""Which calls of the tests could a forbidden library function have answered?

Part of the clean grading process (:mod:`._clean_grade`): :class:`Recorder` spies on the calls
the tests make to the submission's functions; :func:`answerable` replays them through the
forbidden library functions and reports those that give the same outputs.
"""

from __future__ import annotations

import signal

from ._snapshot import _import, _on_alarm, _Timeout

_SPY = '''
def __nnapprox_spy__(function, record):
    import functools

    @functools.wraps(function)
    def spied(*args, **kwargs):
        return record(function, args, kwargs)

    return spied
'''


class Recorder:
    """Records the calls the tests make to the submission's functions (arguments copied before
    the call, and the result), to compare them with forbidden library functions afterwards.
    The spies are defined in the namespace itself, so ``f.__globals__`` is still the notebook's."""

    LIMIT = 40  # calls kept per function and question

    def __init__(self, ns: dict, names: list[str]):
        self.calls: dict[str, list[tuple]] = {}
        self.originals: dict[str, object] = {}
        exec(_SPY, ns)
        factory = ns.pop("__nnapprox_spy__")
        for name in sorted(set(names)):
            f = ns.get(name)
            if callable(f) and not isinstance(f, type):
                self.originals[name] = f
                ns[name] = factory(f, self._recorder(name))

    def _recorder(self, name: str):
        import copy

        def record(function, args, kwargs):
            try:
                saved = (copy.deepcopy(args), copy.deepcopy(kwargs))
            except Exception:  # noqa: BLE001 - arguments that cannot be copied are not recorded
                saved = None
            result = function(*args, **kwargs)
            kept = self.calls.setdefault(name, [])
            if saved is not None and len(kept) < self.LIMIT:
                kept.append((*saved, result))
            return result

        return record

    def restore(self, ns: dict) -> None:
        ns.update(self.originals)


def same(a, b, rtol: float = 1e-9) -> bool:
    """Whether two answers agree: numbers to ``rtol``, tensors and arrays elementwise, containers item by item."""
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        try:
            ta, tb = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return False
        return ta.shape == tb.shape and bool(torch.allclose(ta, tb, rtol=rtol, atol=1e-12, equal_nan=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return np.shape(a) == np.shape(b) and bool(np.allclose(a, b, rtol=rtol, atol=1e-12, equal_nan=True))
        except (TypeError, ValueError):
            return False
    if isinstance(a, (bool, int, float, np.number)) and isinstance(b, (bool, int, float, np.number)):
        return bool(np.isclose(float(a), float(b), rtol=rtol, atol=1e-12))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol) for k in a)
    if hasattr(b, "_asdict"):  # a library function's named tuple against a plain tuple
        return same(a, tuple(b), rtol)
    return a == b if type(a) is type(b) else False


def _entry(index: int):
    def project(out):
        return out[index]
    return project


_PROJECTIONS = (lambda out: out, _entry(-1), _entry(0))


def _agrees(records, outputs, project) -> bool:
    try:
        return all(same(result, project(out)) for (_, _, result), out in zip(records, outputs))
    except Exception:  # noqa: BLE001 - the projection does not apply (a number has no last entry)
        return False


def answerable(calls: dict[str, list[tuple]], banned: list[str], timeout: float = 20.0) -> list[list[str]]:
    """``[function, forbidden]`` pairs where the forbidden library function gives the same
    result as the answer on every recorded call (of at least one)."""
    import copy

    found = []
    for full in banned:
        module, _, attr = full.rpartition(".")
        target = _import(module)
        target = getattr(target, attr, None) if target is not None else None
        if not callable(target):
            continue
        for name, records in calls.items():
            if not records:
                continue
            old = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                outputs = [target(*copy.deepcopy(args), **copy.deepcopy(kwargs)) for args, kwargs, _ in records]
                # the output itself, or its first or last entry ("q1 is the library function up to one line")
                agree = any(_agrees(records, outputs, project) for project in _PROJECTIONS)
            except _Timeout:
                agree = False
            except Exception:  # noqa: BLE001 - another signature, an error: not the same
                agree = False
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
            if agree:
                found.append([name, full])
    return found
