"""Device audit: every public function that takes a ``device`` or ``dtype`` keeps to it.

A CUDA run fails where a tensor made on the host meets one on the GPU, and silently loses
precision where a float32 tensor meets the run's float64. No GPU is needed to find those
places: each public function of the library with a ``device`` or ``dtype`` parameter is
called on small arguments under a :class:`~torch.overrides.TorchFunctionMode` that follows
every tensor. The run's device is ``cpu:0``, which computes on the CPU but is not the
``cpu`` that tensors get by default, that CPU generators live on, or that ``.cpu()`` moves
to. A tensor is *on the run's device* when it was made with ``device=`` the run's device
(or ``x.device`` of such a tensor: the mode reports ``cpu:0`` for them), moved there with
``.to(...)``, handed in by the caller, or computed from such a tensor; every other tensor is
a host tensor. The audit fails a function when

* an operation mixes a tensor on the run's device with a host tensor of one element or more
  (CUDA refuses it; a 0-d host tensor is allowed there, so it is here),
* a tensor on the run's device goes to NumPy without ``.cpu()`` first,
* an operation mixes floating tensors of the run's dtype and of another one, or
* a floating tensor it returns (also inside a tuple, list, dict, dataclass or module) is not
  of the run's dtype, or not on the run's device when the function takes one.

Host tensors that never meet the run's device are fine: that is how the library draws its
random numbers from CPU generators and then moves them; so is a result moved to the host on
purpose with ``.cpu()``. What the audit cannot see: an operation that CUDA would refuse for
another reason (a kernel missing for a dtype), and code paths that the small arguments do
not reach.

Functions it cannot call with generated arguments are listed in :data:`NOT_AUDITED`, each with
its reason; known defects are marked ``xfail`` with theirs (:data:`KNOWN`).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import numpy as np
import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode, resolve_name

SUBPACKAGES = ["nnapprox", "nnapprox.composition", "nnapprox.ista", "nnapprox.rng", "nnapprox.universal",
               "nnapprox.depth", "nnapprox.icl", "nnapprox.diffusion", "nnapprox.scaling", "nnapprox.failures",
               "nnapprox.sequential", "nnapprox.checkpoints"]
DTYPE = torch.float64  # not torch's default, so a tensor made without the run's dtype shows
RUN_DEVICE = torch.device("cpu", 0)  # computes on the CPU, but is not the default "cpu"
TAG = "_nnapprox_on_run_device"  # True: on the run's device; "host": moved to the host on purpose

FACTORIES = {"torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange", "torch.linspace",
             "torch.logspace", "torch.eye", "torch.rand", "torch.randn", "torch.randint", "torch.randperm",
             "torch.normal", "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.empty_strided",
             "torch.bernoulli", "torch.poisson", "torch.tril_indices", "torch.triu_indices"}
# operations that may take a host tensor beside a device tensor on CUDA as well
MIXING_ALLOWED = {"torch.Tensor.copy_", "torch.Tensor.__getitem__", "torch.Tensor.__setitem__", "torch.Tensor.to",
                  "torch.Tensor.cpu", "torch.Tensor.cuda", "torch.Tensor.data.__set__", "torch.Tensor.set_",
                  "torch.Tensor.__repr__", "torch.Tensor.__format__", "torch.Tensor.item", "torch.Tensor.tolist",
                  "torch.Tensor.__bool__", "torch.Tensor.__len__", "torch.Tensor.size", "torch.Tensor.dim",
                  "torch.Tensor.numel", "torch.Tensor.shape.__get__", "torch.Tensor.dtype.__get__",
                  "torch.Tensor.device.__get__", "torch.Tensor.is_floating_point",
                  "_has_compatible_shallow_copy_type"}


def _tensors(obj, depth=0):
    """Every tensor inside ``obj`` (arguments and results: tuples, lists, dicts, dataclasses, modules)."""
    if depth > 4:
        return
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _tensors(getattr(obj, f.name), depth + 1)


def _unwrapped(t: torch.Tensor) -> torch.Tensor:
    """The tensor inside ``torch.func`` wrappers (vmap, grad), which carries the tag."""
    functorch = torch._C._functorch
    while functorch.is_batchedtensor(t) or functorch.is_gradtrackingtensor(t) or functorch.is_functionaltensor(t):
        t = functorch.get_unwrapped(t)
    return t


def _tag(t: torch.Tensor):
    return getattr(t, TAG, None) if hasattr(t, TAG) else getattr(_unwrapped(t), TAG, False)


def on_device(t: torch.Tensor) -> bool:
    return _tag(t) is True


def _is_run_device(device) -> bool:
    try:
        return device is not None and torch.device(device) == RUN_DEVICE
    except (RuntimeError, TypeError):
        return False


def _mark(obj, value) -> None:
    for t in _tensors(obj):
        for layer in {id(t): t, id(inner := _unwrapped(t)): inner}.values():  # inside vmap: the value it returns
            try:
                setattr(layer, TAG, value)
            except (AttributeError, RuntimeError):
                pass


def _where() -> str:
    """The innermost frame of the library that made the call."""
    for frame in inspect.stack()[2:]:
        if "/nnapprox/" in frame.filename:
            return f"{frame.filename.split('/lib/')[-1]}:{frame.lineno} ({frame.function})"
    return "?"


class Audit(TorchFunctionMode):
    """Follows which tensors are on the run's device and records what CUDA (or the dtype) would refuse."""

    def __init__(self, check_device: bool, dtype: torch.dtype | None):
        super().__init__()
        self.check_device, self.dtype, self.problems = check_device, dtype, []

    def _problem(self, text: str) -> None:
        entry = f"{text} at {_where()}"
        if entry not in self.problems:
            self.problems.append(entry)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = resolve_name(func) or getattr(func, "__name__", str(func))
        inputs = list(_tensors(list(args) + list(kwargs.values())))
        if self.check_device:
            if name not in MIXING_ALLOWED and name not in FACTORIES:
                device = [t for t in inputs if on_device(t)]
                host = [t for t in inputs if not on_device(t) and t.dim() > 0]
                if device and host:
                    self._problem(f"{name} mixes a tensor on the run's device with a host tensor of shape "
                                  f"{tuple(host[0].shape)}")
            if name == "torch.Tensor.numpy" and inputs and on_device(inputs[0]):
                self._problem("a tensor on the run's device goes to NumPy without .cpu()")
        if self.dtype is not None and name not in MIXING_ALLOWED:
            floats = {t.dtype for t in inputs if t.is_floating_point() and t.dim() > 0}
            if self.dtype in floats and len(floats) > 1:
                other = sorted(str(d) for d in floats - {self.dtype})
                self._problem(f"{name} mixes {self.dtype} with {', '.join(other)}")
        if name == "torch.Tensor.device.__get__":
            return RUN_DEVICE if on_device(args[0]) else func(*args, **kwargs)
        result = func(*args, **kwargs)
        if name in FACTORIES or name.endswith("_like") or ".new_" in name:
            if "device" in kwargs and kwargs["device"] is not None:
                tag = _is_run_device(kwargs["device"])
            elif name.endswith("_like") or ".new_" in name:
                tag = bool(inputs) and on_device(inputs[0])
            else:
                tag = False
        elif name in ("torch.Tensor.to", "torch.Tensor.cuda"):
            target = [a for a in list(args[1:]) + [kwargs.get("device"), kwargs.get("other")]
                      if isinstance(a, (str, torch.device, torch.Tensor))]
            if name == "torch.Tensor.cuda":
                tag = True
            elif not target:  # a dtype only: stays where it was
                tag = _tag(args[0])
            elif isinstance(target[0], torch.Tensor):
                tag = _tag(target[0])
            else:
                tag = True if _is_run_device(target[0]) else "host"
        elif name == "torch.Tensor.cpu":
            tag = "host"
        elif name == "torch.Tensor.data.__set__":
            _mark(args[0], _tag(args[1]))
            return result
        else:  # computed: on the run's device if any input is; a result of host results stays host
            tags = {_tag(t) for t in inputs}
            tag = True if True in tags else ("host" if "host" in tags else False)
        if isinstance(result, (torch.Tensor, tuple, list)):
            _mark(result, tag)
        return result


# --------------------------------------------------------------------------- what gets audited
def public_functions() -> dict[str, object]:
    found = {}
    for package in SUBPACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]):
            obj = getattr(module, name, None)
            if not callable(obj):
                continue
            try:
                params = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if "device" in params or "dtype" in params:
                found.setdefault(f"{obj.__module__}.{getattr(obj, '__qualname__', name)}", obj)
    return dict(sorted(found.items()))


def _generator():
    return torch.Generator().manual_seed(0)


def _device_tensor(*shape, dtype=DTYPE, generator=None):
    t = torch.randn(*shape, generator=generator or _generator(), dtype=dtype).to(RUN_DEVICE)
    setattr(t, TAG, True)
    return t


def _denoiser(x):
    return x * 0.5


# small values by parameter name; a function-specific entry in ARGUMENTS wins
BY_NAME = {
    "d": 3, "n": 4, "N": 4, "L": 3, "m": 3, "M": 4, "K": 2, "k": 3, "batch": 2, "n_lines": 3, "n_samples": 5,
    "n_steps": 3, "width": 4, "width_factor": 2, "h": 1, "r": 4, "n_train": 2, "n_phases": 2, "s": 1,
    "length": 1.0, "radius": 1.0, "beta": 0.5, "T": 1.0, "delta": 0.1, "eta": 0.1, "lam": 0.1, "c": 1.0,
    "gamma": 1.0, "R": 2.0, "t_min": 0.01, "t_max": 1.0, "sigma": 0.1, "layer_widths": [2, 4, 1],
    "widths": [2, 4], "ds": [3, 4], "lams": [0.1, 1.0], "sigmas": [0.1, 0.5], "n_values": [2, 4],
    "context": 2, "d_emb": 4, "D": [64], "positional": True, "denoiser": _denoiser, "others": [_denoiser],
    "n_runs": 2, "x": lambda: _device_tensor(8, 2), "y": lambda: _device_tensor(8),
}
def _host_nets():
    from nnapprox.depth.relu_net import random_relu_net

    return [random_relu_net([2, w, 1], _generator(), dtype=DTYPE) for w in (3, 4)]


ARGUMENTS = {
    "nnapprox.checkpoints.load": dict(name="icl_garg"),
    "nnapprox.composition.expanding_layer": dict(K=2.0),
    "nnapprox.universal.yarotsky_product.product_tree_weights": dict(d=4),
    "nnapprox.rng.rand": {"*": (3,)},
    "nnapprox.rng.randn": {"*": (3,)},
    "nnapprox.rng.randint": {"*": (0, 5, (3,))},
    "nnapprox.depth.automaton.automaton_network_weights": dict(rule=110, W=4, T=2),
    "nnapprox.depth.batched_mlp.stack_mlps": dict(nets=lambda: _host_nets()),
    "nnapprox.depth.radial.near_sphere_points": dict(R=1.0, spread=0.1),
    "nnapprox.depth.radial.gaussian_slab_data": dict(u=lambda: _device_tensor(3)),
    "nnapprox.depth.shallow.init_shallow_family": dict(m=[2, 3]),
    "nnapprox.universal.mlp.init_relu_mlp": dict(widths=[1, 4, 1]),
    "nnapprox.failures.parity.sample_parity": dict(v=torch.tensor([1, 0, 1])),
    "nnapprox.icl.tasks.pool_tasks": dict(pool=lambda: _device_tensor(4, 3)),
    "nnapprox.scaling.sweep.train_sweep": dict(widths=[2, 4], D=[64, 64], n_steps=2, batch=4, context=2, d_emb=4,
                                               eval_every=1, n_eval=8, eval_chunk=8),
    "nnapprox.scaling.sweep.train_sweep_loop": dict(widths=[2, 4], D=[64, 64], n_steps=2, batch=4, context=2,
                                                    d_emb=4, eval_every=1, n_eval=8, eval_chunk=8),
    "nnapprox.universal.fourier_features.fit_fourier_features": dict(
        v_train=lambda: _device_tensor(8, dtype=torch.float32), y_train=lambda: _device_tensor(8, dtype=torch.float32),
        m_f=4, depth=2, width=4, n_steps=2),
    "nnapprox.universal.maurey.maurey_mse": dict(n_repeats=2, n_test=4),
    "nnapprox.universal.spectral_bias.train_spectral_ensemble": dict(
        A=lambda: _device_tensor(2, 2, dtype=torch.float32), k=lambda: _device_tensor(2, dtype=torch.float32),
        n_points=8, depth=2, width=4, n_steps=2, record_every=1),
    "nnapprox.universal.transformer.train_reverse": dict(d=4, d_x=2, n=2, n_blocks=1, h=1, m=2, r=4, batch=4,
                                                         n_steps=2),
}
NOT_AUDITED = {
    "nnapprox.checkpoints.Spec": "a registration record: its dtype is the storage format's name",
    "nnapprox.checkpoints.train": "retrains a registered checkpoint for minutes to hours (load is audited)",
    "nnapprox.runtime.Run": "the runtime record, not a tensor function (its generator is tested in test_runtime)",
    "nnapprox.runtime.setup": "resolves the device; makes no tensor",
    "nnapprox.runtime.resolve_device": "resolves the device; makes no tensor",
    "nnapprox.scaling.sweep.sweep_strategy": "picks a strategy by device type; makes no tensor",
}
# functions whose results are on the host by design (what they compute on the run's device is
# still audited, and so are their dtypes)
HOST_RESULTS = {
    "nnapprox.scaling.sweep.train_sweep": "returns loss curves and model/data sizes for fits and plots, on the host",
    "nnapprox.scaling.sweep.train_sweep_loop": "the reference loop of train_sweep: the same host results",
}
# functions that ignore the device or dtype they are given: defects to fix in the library
KNOWN: dict[str, str] = {
    "nnapprox.universal.transformer.train_reverse": (
        "its per-step loss log is made with torch.empty(n_steps) on the host (universal/transformer.py) while "
        "the blocks it returns are on the run's device: on CUDA every step copies its loss to the host"),
}


def _fresh(value):
    """A value of the tables; a lambda there makes a fresh one (a tensor on the run's device)."""
    return value() if getattr(value, "__name__", "") == "<lambda>" else value


def _arguments(qualname: str, func) -> dict:
    params = inspect.signature(func).parameters
    special = ARGUMENTS.get(qualname, {})
    kwargs = {}
    for name, p in params.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name in ("device", "dtype"):
            continue
        if name in special:
            kwargs[name] = _fresh(special[name])
        elif name == "generator":
            kwargs[name] = _generator()
        elif name in ("train", "test"):
            kwargs[name] = torch.randint(0, 256, (256,), generator=_generator(), dtype=torch.uint8).to(RUN_DEVICE)
            setattr(kwargs[name], TAG, True)
        elif p.default is not inspect.Parameter.empty:
            continue
        elif name in BY_NAME:
            kwargs[name] = _fresh(BY_NAME[name])
        else:
            raise LookupError(f"no example value for the parameter {name!r}")
    if "device" in params:
        kwargs["device"] = RUN_DEVICE
    if "dtype" in params:
        kwargs["dtype"] = DTYPE
    return kwargs


FUNCTIONS = public_functions()


def _case(qualname):
    marks = []
    if qualname in NOT_AUDITED:
        marks.append(pytest.mark.skip(reason=NOT_AUDITED[qualname]))
    elif qualname in KNOWN:
        marks.append(pytest.mark.xfail(reason=KNOWN[qualname], strict=True))
    return pytest.param(qualname, marks=marks, id=qualname.removeprefix("nnapprox."))


@pytest.mark.parametrize("qualname", [_case(q) for q in FUNCTIONS])
def test_public_function_keeps_to_the_run_device_and_dtype(qualname):
    func = FUNCTIONS[qualname]
    params = inspect.signature(func).parameters
    kwargs = _arguments(qualname, func)
    positional = ARGUMENTS.get(qualname, {}).get("*", ())
    audit = Audit(check_device="device" in params, dtype=DTYPE if "dtype" in params else None)
    with audit:
        result = func(*positional, **kwargs)
    for t in _tensors(result):
        if not t.is_floating_point():
            continue
        if audit.dtype is not None and t.dtype != audit.dtype:
            audit.problems.append(f"returns a {t.dtype} tensor of shape {tuple(t.shape)} (asked for {audit.dtype})")
        if audit.check_device and _tag(t) is False and t.dim() > 0 and qualname not in HOST_RESULTS:
            audit.problems.append(f"returns a host tensor of shape {tuple(t.shape)} (asked for the run's device)")
    assert not audit.problems, f"{qualname}:\n  " + "\n  ".join(audit.problems[:8])


# --------------------------------------------------------------------------- the audit itself
def _audited(func, *, device=True, dtype=DTYPE):
    audit = Audit(check_device=device, dtype=dtype)
    with audit:
        result = func()
    return audit, result


def test_the_audit_sees_a_host_tensor_meet_a_device_tensor():
    x = _device_tensor(3)
    audit, _ = _audited(lambda: x + torch.ones(3, dtype=DTYPE))
    assert audit.problems and "mixes a tensor on the run's device with a host tensor of shape (3,)" \
        in audit.problems[0]
    audit, _ = _audited(lambda: x + torch.ones(3, dtype=DTYPE, device=x.device))
    assert audit.problems == []
    audit, _ = _audited(lambda: x + torch.ones(3, dtype=DTYPE, device="cpu"))  # a device written in the code
    assert audit.problems


def test_the_audit_allows_draws_on_the_host_that_are_moved_and_host_scalars():
    x = _device_tensor(3)
    audit, y = _audited(lambda: x * torch.randn(3, generator=_generator(), dtype=DTYPE).to(x.device)
                        + torch.tensor(2.0, dtype=DTYPE))
    assert audit.problems == [] and on_device(y)


def test_the_audit_sees_a_module_left_on_the_host_and_numpy_of_a_device_tensor():
    x = _device_tensor(2, 3)
    audit, _ = _audited(lambda: nn.Linear(3, 1, dtype=DTYPE)(x))
    assert any("torch.nn.functional.linear mixes" in p for p in audit.problems)
    audit, _ = _audited(lambda: nn.Linear(3, 1, dtype=DTYPE).to(x.device)(x))
    assert audit.problems == []
    audit, _ = _audited(lambda: np.asarray(x.numpy()))
    assert any("NumPy without .cpu()" in p for p in audit.problems)


def test_the_audit_sees_the_default_dtype_meet_the_run_dtype():
    x = _device_tensor(3)
    audit, _ = _audited(lambda: x * torch.linspace(0, 1, 3, device=x.device))
    assert any("mixes torch.float64 with torch.float32" in p for p in audit.problems)


def test_every_public_function_with_a_device_or_dtype_is_audited_or_says_why_not():
    assert len(FUNCTIONS) > 50  # the enumeration found the library, not an empty list
    assert set(NOT_AUDITED) <= set(FUNCTIONS) and set(KNOWN) <= set(FUNCTIONS)
    for qualname, func in FUNCTIONS.items():
        if qualname not in NOT_AUDITED:
            _arguments(qualname, func)  # raises LookupError where no example value exists
