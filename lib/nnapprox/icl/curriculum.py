r"""Garg et al.'s training curriculum: start on small problems, grow them during training.

Chapter "In-context learning as gradient descent", section "The phenomenon" (``garg2022what``,
Section 3 and Appendix A.2: "we start with :math:`d_{\rm eff} = 5`, :math:`n = 11` and increase
:math:`d_{\rm eff}` by 1 and :math:`n` by 2 every 2000 steps" for :math:`d = 20`).

At training step :math:`t` the prompts are linear-regression tasks whose inputs have only
their first

.. math:: d_{\rm eff}(t) = \min\bigl(d,\ d_0 + \lfloor t / T \rfloor\bigr)

coordinates non-zero, and :math:`N(t) = \min\bigl(N,\ N_0 + 2\lfloor t / T \rfloor\bigr)`
examples. The tokens keep their full dimension :math:`d`, so one model sees every stage.
:func:`nnapprox.icl.train_icl` takes a curriculum and passes ``curriculum(t)`` to the sampler
as keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Curriculum:
    """``d_eff`` from ``d_start`` to ``d`` (+1) and ``N`` from ``N_start`` to ``N`` (+2) every ``every`` steps."""

    d: int
    N: int
    d_start: int
    N_start: int
    every: int

    def __post_init__(self) -> None:
        if not (1 <= self.d_start <= self.d and 1 <= self.N_start <= self.N and self.every >= 1):
            raise ValueError(f"need 1 <= d_start <= d, 1 <= N_start <= N, every >= 1; got {self}")

    def __call__(self, step: int) -> dict[str, int]:
        """Keyword arguments of the sampler at training step ``step``: ``{"d_eff": ..., "N": ...}``."""
        stage = step // self.every
        return {"d_eff": min(self.d, self.d_start + stage), "N": min(self.N, self.N_start + 2 * stage)}

    @property
    def n_stages(self) -> int:
        """Number of increments until both sizes are full (training steps ``n_stages * every``)."""
        return max(self.d - self.d_start, -(-(self.N - self.N_start) // 2))
