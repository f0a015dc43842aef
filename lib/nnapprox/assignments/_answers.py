"""A student's answers as plain data: written in the student's kernel, read by the grader.

:func:`dump` runs in the kernel after the submission's cells: every global whose value is
plain data (numbers, strings, ``None``, lists, tuples and dicts of them, tensors, NumPy
arrays and scalars) is written to a JSON file, tensors as their bytes; a module is written
as its name (``D -> nnapprox.depth``) and a function imported from a library as its module
and qualified name. Only IPython's own names (:func:`ipython_name`) are left out: a name
with a leading underscore is the student's like any other. A value that is none of these
(``functools.partial(...)``, a model) is listed in ``skipped`` with the reason; the function
process re-runs the statement that made it (:func:`._clean_grade.define_student_code`). Functions and classes the notebook defines are exported by name only:
the grader takes their source from the submission itself, and defines only those that
existed in the kernel (a ``def`` in a cell that raised before reaching it does not count).

:func:`load` reads that file back without executing anything the file names (no pickle),
so whatever the student's kernel wrote, loading it cannot run the student's code.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import re
from pathlib import Path

#: IPython's own names in a notebook's namespace (its input and output history and helpers),
#: otter's ``grader`` and Python's module dunders: never the student's. Every other name is
#: exported, a leading underscore included (``_TOL = 0.0`` used by a graded function).
_SKIP = {"_", "__", "___", "_i", "_ii", "_iii", "_oh", "_ih", "_dh", "In", "Out", "exit", "quit", "get_ipython",
         "grader"}
_SKIP_RE = re.compile(r"_i?\d+|__\w+__")


def ipython_name(name: str) -> bool:
    """Whether ``name`` is one of IPython's own (``_``, ``_i3``, ``_7``, ``Out``, ...), not the student's."""
    return name in _SKIP or _SKIP_RE.fullmatch(name) is not None
_MAX_DEPTH = 8
_MAX_BYTES = 256 * 2**20  # answers larger than this in total are not exported


class _TooBig(Exception):
    pass


def _encode(value, depth: int = 0, budget: list[int] | None = None):
    """A JSON-able tagged form of ``value``; raises ``TypeError`` for anything not plain."""
    import numpy as np
    import torch

    budget = budget if budget is not None else [_MAX_BYTES]
    if depth > _MAX_DEPTH:
        raise TypeError("nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return {"t": kind.__name__ if value is not None else "none", "v": value}
    if kind is float:
        return {"t": "float", "v": repr(value)}
    if kind is complex:
        return {"t": "complex", "v": [repr(value.real), repr(value.imag)]}
    if kind is bytes:
        return {"t": "bytes", "b64": base64.b64encode(value).decode()}
    if kind.__module__ == "fractions" and kind.__name__ == "Fraction":
        return {"t": "fraction", "v": [str(value.numerator), str(value.denominator)]}
    if kind in (list, tuple):
        return {"t": kind.__name__, "v": [_encode(v, depth + 1, budget) for v in value]}
    if kind is dict:
        return {"t": "dict", "v": [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)]
                                   for k, v in value.items()]}
    if kind is torch.Size:
        return {"t": "size", "v": [int(v) for v in value]}
    if dataclasses.is_dataclass(value) and kind.__module__.split(".")[0] == "nnapprox":
        # one of the library's records (e.g. a bandit problem): its fields, rebuilt by the library
        return {"t": "record", "module": kind.__module__, "name": kind.__qualname__,
                "v": [[f.name, _encode(getattr(value, f.name), depth + 1, budget)]
                      for f in dataclasses.fields(value)]}
    if kind is torch.Generator:  # its state: a copy that draws the same numbers
        state = value.get_state().numpy().tobytes()
        return {"t": "generator", "device": str(value.device), "b64": base64.b64encode(state).decode()}
    if kind in (torch.Tensor, torch.nn.Parameter):
        t = value.detach().cpu().contiguous()
        budget[0] -= t.numel() * t.element_size()
        if budget[0] < 0:
            raise _TooBig
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {"t": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "b64": base64.b64encode(raw).decode()}
    if kind is np.ndarray and value.dtype.kind in "biufc":
        a = np.ascontiguousarray(value)
        budget[0] -= a.nbytes
        if budget[0] < 0:
            raise _TooBig
        return {"t": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape),
                "b64": base64.b64encode(a.tobytes()).decode()}
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and value.dtype.kind in "biufc":
        return {"t": "npscalar", "dtype": value.dtype.str, "b64": base64.b64encode(value.tobytes()).decode()}
    raise TypeError(f"not plain data: {kind.__module__}.{kind.__qualname__}")


def _decode(obj):
    import numpy as np
    import torch

    t = obj["t"]
    if t in ("none", "bool", "int", "str"):
        value = obj["v"]
        expected = {"none": type(None), "bool": bool, "int": int, "str": str}[t]
        if type(value) is not expected:
            raise ValueError(f"malformed answers file: {t} entry holds {type(value).__name__}")
        return value
    if t == "float":
        return float(obj["v"])
    if t == "complex":
        return complex(float(obj["v"][0]), float(obj["v"][1]))
    if t == "bytes":
        return base64.b64decode(obj["b64"])
    if t == "fraction":
        import fractions
        return fractions.Fraction(int(obj["v"][0]), int(obj["v"][1]))
    if t == "list":
        return [_decode(v) for v in obj["v"]]
    if t == "tuple":
        return tuple(_decode(v) for v in obj["v"])
    if t == "dict":
        return {_decode(k): _decode(v) for k, v in obj["v"]}
    if t == "size":
        return torch.Size([int(v) for v in obj["v"]])
    if t == "record":
        module = str(obj["module"])
        cls = importlib.import_module(module) if module.split(".")[0] == "nnapprox" else None
        for part in str(obj["name"]).split("."):
            cls = getattr(cls, part, None)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"malformed answers file: {module}.{obj['name']} is not a library record")
        return cls(**{str(k): _decode(v) for k, v in obj["v"]})
    if t == "generator":
        g = torch.Generator(device=str(obj["device"]))
        g.set_state(torch.frombuffer(bytearray(base64.b64decode(obj["b64"])), dtype=torch.uint8).clone())
        return g
    if t == "tensor":
        dtype = getattr(torch, obj["dtype"])
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"malformed answers file: {obj['dtype']!r} is not a torch dtype")
        raw = bytearray(base64.b64decode(obj["b64"]))
        flat = (torch.frombuffer(raw, dtype=torch.uint8).view(dtype) if raw
                else torch.empty(0, dtype=dtype))
        return flat.reshape(obj["shape"]).clone()
    if t == "ndarray":
        return np.frombuffer(base64.b64decode(obj["b64"]), dtype=np.dtype(obj["dtype"])).reshape(obj["shape"]).copy()
    if t == "npscalar":
        return np.frombuffer(base64.b64decode(obj["b64"]), dtype=np.dtype(obj["dtype"]))[0]
    raise ValueError(f"malformed answers file: unknown entry type {t!r}")


def dump(namespace: dict, path: str | Path) -> None:
    """Write the plain values, modules and library functions of ``namespace`` to ``path``."""
    import types

    values, modules, imported, skipped, defined = {}, {}, {}, {}, []
    budget = [_MAX_BYTES]
    for name, value in list(namespace.items()):
        if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == "__main__":
            defined.append(name)  # defined by the notebook (a leading underscore too): its source is read
            continue              # from the submission
        if ipython_name(name):
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
            continue
        module = getattr(value, "__module__", None)
        if (callable(value) and isinstance(module, str) and module != "__main__"
                and isinstance(getattr(value, "__qualname__", None), str)):
            imported[name] = [value.__module__, getattr(value, "__qualname__", name)]
            continue
        if isinstance(value, (types.FunctionType, type)):
            continue  # a function or class without a module: nothing to export
        try:
            values[name] = _encode(value, budget=budget)
        except _TooBig:
            skipped[name] = "too large"
        except (TypeError, ValueError, RuntimeError) as e:
            skipped[name] = str(e)[:200]
    Path(path).write_text(json.dumps({"values": values, "modules": modules, "imported": imported,
                                      "skipped": skipped, "defined": sorted(defined)}))


def load(path: str | Path) -> dict:
    """The answers file as ``{"values": {name: value}, "modules": {...}, "imported": {...},
    "skipped": {...}, "defined": [names of the functions and classes the notebook defined]}``."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError("malformed answers file")
    out = {"values": {}, "modules": {}, "imported": {}, "skipped": dict(data.get("skipped") or {}),
           "defined": [str(n) for n in data.get("defined") or []]}
    for name, obj in (data.get("values") or {}).items():
        try:
            out["values"][str(name)] = _decode(obj)
        except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as e:
            out["skipped"][str(name)] = f"could not be read back: {e}"[:200]
    out["modules"] = {str(k): str(v) for k, v in (data.get("modules") or {}).items()}
    out["imported"] = {str(k): [str(v[0]), str(v[1])] for k, v in (data.get("imported") or {}).items()
                       if isinstance(v, list) and len(v) == 2}
    return out
