r"""Shannon's counting argument: most Boolean functions need exponentially many gates.

Chapter "Depth separation", section "Parity and circuits" (``shannon1949synthesis``).

There are :math:`2^{2^n}` Boolean functions of :math:`n` bits. A circuit of :math:`s` gates
of fan-in 2 is described by choosing, for each gate, one of the 16 Boolean functions of two
bits and its two inputs among at most :math:`n + s` wires, so there are at most
:math:`(16 (n + s)^2)^s` such circuits, each computing one function. If

.. math::  s \, \big(4 + 2 \log_2 (n + s)\big) < 2^n,

fewer than :math:`2^{2^n}` functions have circuits of :math:`s` gates, and a fraction at
least :math:`1 - 2^{s(4 + 2\log_2(n+s)) - 2^n}` of all functions needs more. The largest
such :math:`s` (:func:`shannon_gate_bound`) is at least :math:`\lfloor 2^n/(4n) \rfloor` for :math:`n \ge 3`:
almost every function needs :math:`\Omega(2^n/n)` gates, while parity needs :math:`n - 1`.
"""

from __future__ import annotations

import math


def log2_circuit_count(n: int, s: int) -> float:
    r""":math:`\log_2` of the bound :math:`(16 (n + s)^2)^s` on the number of circuits with :math:`s` gates on :math:`n` inputs."""
    if not isinstance(n, int) or n < 1 or not isinstance(s, int) or s < 0:
        raise ValueError(f"need integers n >= 1 and s >= 0, got n={n!r}, s={s!r}")
    return 0.0 if s == 0 else s * (4 + 2 * math.log2(n + s))


def shannon_gate_bound(n: int) -> int:
    r"""Largest :math:`s` with :math:`s (4 + 2\log_2(n+s)) < 2^n`: some function of :math:`n` bits needs more than :math:`s` gates."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    lo, hi = 0, 2**n  # log2_circuit_count(n, 2^n) >= 2^n: hi fails, lo = 0 succeeds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if log2_circuit_count(n, mid) < 2**n else (lo, mid)
    return lo
