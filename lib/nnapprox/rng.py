"""Random draws that work whichever device the generator and the result live on.

``torch.randn(..., generator=g, device=dev)`` fails when ``g`` and ``dev`` are different
devices (a CPU generator cannot fill a CUDA tensor, and the reverse). The library's
stochastic functions take a ``torch.Generator`` and an output ``device`` independently, so
they draw through these helpers: the numbers are drawn **on the generator's device** and the
result is moved to ``device`` (torch's default device, the CPU, when ``device`` is None).

Consequences worth knowing:

* a CPU generator (what :meth:`nnapprox.runtime.Run.generator` returns by default) gives the
  *same* random numbers on every machine, CPU or GPU; only the arithmetic afterwards differs;
* a CUDA generator draws on the GPU, which is faster for large training batches;
* with ``generator=None`` the call is plain torch (global RNG) on ``device``.

Each helper has the signature of the torch function it wraps.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["randn", "rand", "randint", "randperm", "multinomial"]


def _target(device: Any) -> torch.device:
    return torch.device(device) if device is not None else torch.empty(0).device


def _draw(fn: Callable[..., torch.Tensor], *args: Any, generator: torch.Generator | None = None,
          device: Any = None, **kwargs: Any) -> torch.Tensor:
    if generator is None:
        return fn(*args, device=device, **kwargs)
    out = fn(*args, generator=generator, device=generator.device, **kwargs)
    target = _target(device)
    return out if out.device == target else out.to(target)


def randn(*size: Any, generator: torch.Generator | None = None, device: Any = None, **kwargs: Any) -> torch.Tensor:
    """``torch.randn`` drawn on the generator's device, returned on ``device``."""
    return _draw(torch.randn, *size, generator=generator, device=device, **kwargs)


def rand(*size: Any, generator: torch.Generator | None = None, device: Any = None, **kwargs: Any) -> torch.Tensor:
    """``torch.rand`` drawn on the generator's device, returned on ``device``."""
    return _draw(torch.rand, *size, generator=generator, device=device, **kwargs)


def randint(*args: Any, generator: torch.Generator | None = None, device: Any = None, **kwargs: Any) -> torch.Tensor:
    """``torch.randint(high, size)`` or ``torch.randint(low, high, size)``, generator-device safe."""
    return _draw(torch.randint, *args, generator=generator, device=device, **kwargs)


def randperm(n: int, generator: torch.Generator | None = None, device: Any = None, **kwargs: Any) -> torch.Tensor:
    """``torch.randperm`` drawn on the generator's device, returned on ``device``."""
    return _draw(torch.randperm, n, generator=generator, device=device, **kwargs)


def multinomial(probs: torch.Tensor, num_samples: int, replacement: bool = False, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """``torch.multinomial``: sampled on the generator's device, returned on ``probs``' device."""
    if generator is None or generator.device == probs.device:
        return torch.multinomial(probs, num_samples, replacement, generator=generator)
    out = torch.multinomial(probs.to(generator.device), num_samples, replacement, generator=generator)
    return out.to(probs.device)


def uniform_like(t: torch.Tensor, low: float, high: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """A tensor shaped like ``t`` with U(low, high) entries, drawn on the generator's device."""
    dev = generator.device if generator is not None else t.device
    out = torch.empty(t.shape, dtype=t.dtype, device=dev).uniform_(low, high, generator=generator)
    return out.to(t.device)
