"""The affine part of a ReLU teacher (the floor of any in-context learner that is affine in the query)."""

import math

import pytest
import torch
from jaxtyping import TypeCheckError

from nnapprox import icl

D64 = torch.float64


def test_affine_part_is_the_l2_projection():
    # per teacher, least squares of y on (1, x) over many Gaussian inputs converges to (c, b)
    g = torch.Generator().manual_seed(0)
    X, y, V, a = icl.relu_teacher_tasks(6, 200_000, 3, g, width=4, dtype=D64)
    c, b = icl.relu_teacher_affine_part(V, a)
    A = torch.cat([torch.ones_like(X[..., :1]), X], -1)  # (batch, n, 1 + d)
    coef = torch.linalg.lstsq(A, y[..., None]).solution[..., 0]  # (batch, 1 + d)
    # the fitted coefficients have standard error about sd(residual)/sqrt(n) < 1/sqrt(n) = 0.0022
    assert torch.allclose(coef[:, 0], c, atol=0.012, rtol=0)
    assert torch.allclose(coef[:, 1:], b, atol=0.012, rtol=0)


def test_affine_part_explains_half_plus_one_over_pi_of_the_variance():
    # under the prior, E c^2 = 1/pi and E |b|^2 = 1/2 (E y^2 = 1); Monte Carlo within 5 standard errors
    g = torch.Generator().manual_seed(1)
    _, _, V, a = icl.relu_teacher_tasks(200_000, 1, 4, g, width=4, dtype=D64)
    c, b = icl.relu_teacher_affine_part(V, a)
    for values, expected in ((c.pow(2), 1 / math.pi), (b.pow(2).sum(-1), 0.5)):
        se = float(values.std()) / math.sqrt(values.numel())
        assert abs(float(values.mean()) - expected) < 5 * se


def test_affine_part_rejects_mismatched_shapes():
    # under pytest the shape annotations are checked first (conftest); without the hook, ValueError
    with pytest.raises((ValueError, TypeCheckError)):
        icl.relu_teacher_affine_part(torch.zeros(2, 3, 4), torch.zeros(2, 4))
