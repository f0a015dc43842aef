"""What grading relies on, recorded before the student's code runs (:class:`Snapshot`), and
the check that a student's function returns plain data (:func:`plain`), and the time limit.

Part of the clean grading process (:mod:`._clean_grade`).
"""

from __future__ import annotations

import importlib
import sys

_WATCHED_ROOTS = ("builtins", "sys", "torch", "numpy", "scipy", "math", "cmath", "nnapprox", "otter", "inspect",
                  "functools", "operator", "types", "gc", "importlib", "fractions", "statistics", "itertools",
                  "contextlib", "json", "random", "re", "abc", "collections", "typing")


class Snapshot:
    """The dictionaries grading relies on, by identity, to find what changed and put it back."""

    def __init__(self, extra: list[object] = ()):
        self.modules = dict(sys.modules)
        self.spaces: list[tuple[str, dict, dict]] = []
        for key, module in self.modules.items():
            if module is not None and key.split(".")[0] in _WATCHED_ROOTS:
                space = getattr(module, "__dict__", None)
                if isinstance(space, dict):
                    self.spaces.append((key, space, dict(space)))
        self.classes: list[tuple[str, type, dict]] = [
            (f"{c.__module__}.{c.__qualname__}", c, dict(vars(c))) for c in extra if isinstance(c, type)]

    def changes(self) -> list[str]:
        changed = []
        for key, module in self.modules.items():
            if sys.modules.get(key) is not module:
                changed.append(f"sys.modules[{key!r}]")
        for key, space, before in self.spaces:
            for name, value in before.items():
                if name in ("__loader__", "__spec__", "__warningregistry__"):
                    continue
                if space.get(name, _MISSING) is not value:
                    changed.append(f"{'builtins' if key == 'builtins' else key}.{name}")
        for key, cls, before in self.classes:
            now = vars(cls)
            for name in set(before) | set(now):
                if now.get(name, _MISSING) is not before.get(name, _MISSING):
                    changed.append(f"{key}.{name}")
        return sorted(set(changed))

    def restore(self) -> None:
        for key, module in self.modules.items():
            sys.modules[key] = module
        for _, space, before in self.spaces:
            for name, value in before.items():
                if space.get(name, _MISSING) is not value:
                    space[name] = value
        for _, cls, before in self.classes:
            for name in list(vars(cls)):
                if name not in before:
                    try:
                        delattr(cls, name)
                    except (AttributeError, TypeError):
                        pass
            for name, value in before.items():
                if vars(cls).get(name, _MISSING) is not value:
                    try:
                        setattr(cls, name, value)
                    except (AttributeError, TypeError):
                        pass


_MISSING = object()


def plain(value, where: str, depth: int = 0):
    """``value`` if it is plain data (copied where mutable), else ``TypeError`` naming its type."""
    import fractions

    import numpy as np
    import torch

    kind = type(value)
    if depth > 8:
        raise TypeError(f"{where} returned data nested too deeply")
    if value is None or kind in (bool, int, float, complex, str, bytes, fractions.Fraction):
        return value
    if kind in (list, tuple):
        return kind(plain(v, where, depth + 1) for v in value)
    if kind is dict:
        return {plain(k, where, depth + 1): plain(v, where, depth + 1) for k, v in value.items()}
    if kind is torch.Size:
        return value
    if kind in (torch.Tensor, torch.nn.Parameter):
        return value.detach().clone()
    if kind is np.ndarray and value.dtype.kind in "biufc":
        return value.copy()
    if isinstance(value, np.generic) and kind.__module__ == "numpy" and value.dtype.kind in "biufc":
        return value
    raise TypeError(f"{where} returned a {kind.__module__}.{kind.__qualname__}; answers must be numbers, "
                    f"strings, lists, tuples, dicts, tensors or arrays")


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that ``except Exception`` in student code lets it through."""


def _on_alarm(signum, frame):
    raise _Timeout


def _import(module: str):
    if module.split(".")[0] == "otter" or module == "__main__":
        return None
    try:
        return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - a module this environment does not have: left out
        return None
