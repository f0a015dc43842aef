"""Shannon's counting bound and Telgarsky's recurrent sawtooth (nnapprox.depth)."""

import math

import pytest
import torch

from nnapprox import depth as dp


@pytest.mark.parametrize("n", range(1, 21))
def test_shannon_bound_is_the_largest_s(n):
    s = dp.shannon_gate_bound(n)
    assert dp.log2_circuit_count(n, s) < 2**n <= dp.log2_circuit_count(n, s + 1)
    if n >= 3:
        assert s >= 2**n // (4 * n)


def test_shannon_bound_small_case_by_enumeration():
    # n = 2: 16 functions; circuits with s gates <= (16 (2 + s)^2)^s: s = 0 only has 2^0 = 1 < 16
    assert dp.log2_circuit_count(2, 0) == 0.0 and dp.shannon_gate_bound(2) == 0
    assert math.isclose(dp.log2_circuit_count(3, 1), 4 + 2 * math.log2(4))


@pytest.mark.parametrize("k", [0, 1, 2, 5, 12])
def test_recurrent_sawtooth_equals_the_deep_network(k):
    x = (torch.arange(2 ** (k + 3) + 1, dtype=torch.float64) / 2 ** (k + 3))[:, None]
    ref = dp.sawtooth(x[:, 0], k)
    assert torch.equal(dp.recurrent_sawtooth(x, k)[:, 0], ref)
    if k >= 1:
        assert torch.allclose(dp.relu_net(dp.sawtooth_weights(k), x)[:, 0], ref, atol=1e-12, rtol=0)
    assert dp.n_parameters(dp.tent_cell()) == 7


def test_recurrent_sawtooth_wrong_cell_detected():
    x = torch.linspace(0, 1, 33, dtype=torch.float64)[:, None]
    cell = dp.tent_cell()
    cell["W1"] = torch.tensor([[2.0, -3.0]], dtype=torch.float64)
    assert not torch.allclose(dp.recurrent_sawtooth(x, 3, cell)[:, 0], dp.sawtooth(x[:, 0], 3))


@pytest.mark.parametrize("call", [lambda: dp.shannon_gate_bound(0), lambda: dp.log2_circuit_count(2, -1),
                                  lambda: dp.recurrent_sawtooth(torch.zeros(3, 1), -1)])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
