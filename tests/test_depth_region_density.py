"""Co-area expectation of the number of activation regions (nnapprox.depth.region_density)."""

import math

import pytest
import torch

from nnapprox import depth as dp

f64 = dict(dtype=torch.float64)


def _resample_biases(net, bias_std, g):
    out = dict(net)
    for key in net:
        if key.startswith("b") and key != f"b{len(net) // 2 - 1}":
            out[key] = torch.randn(net[key].shape, generator=g, **f64) * bias_std
    return out


@pytest.mark.parametrize("arch,bias_std", [([3, 12, 1], 0.3), ([3, 6, 6, 6, 1], 0.5)])
def test_counted_regions_match_V_in_expectation(arch, bias_std):
    g = torch.Generator().manual_seed(0)
    net = dp.random_relu_net(arch, g, init="he", bias_std=bias_std)
    seg = dp.offset_segments(1, arch[0], 4.0, g)[0]
    diffs = []
    for _ in range(400):
        w = _resample_biases(net, bias_std, g)
        count, V, tv = dp.region_expectation_terms(w, seg[0], seg[1], bias_std)
        assert V <= 1 + dp.bias_density_bound(bias_std) * tv + 1e-12
        diffs.append(count - V)
    d = torch.tensor(diffs, **f64)
    assert abs(float(d.mean())) <= 4 * float(d.std()) / math.sqrt(len(d))


def test_one_layer_closed_form():
    # one hidden layer: neuron z switches on the segment iff -b lies between g(0) and g(1)
    W = torch.tensor([[1.0, 0.0], [0.0, 2.0]], **f64)
    net = {"W0": W, "b0": torch.zeros(2, **f64), "W1": torch.ones(1, 2, **f64), "b1": torch.zeros(1, **f64)}
    x0, x1 = torch.tensor([-1.0, 0.5], **f64), torch.tensor([1.0, 1.0], **f64)
    _, V, tv = dp.region_expectation_terms(net, x0, x1, 1.0)
    Phi = torch.distributions.Normal(0.0, 1.0).cdf
    expected = 1 + float(Phi(torch.tensor(1.0, **f64)) - Phi(torch.tensor(-1.0, **f64))) + float(
        Phi(torch.tensor(-1.0, **f64)) - Phi(torch.tensor(-2.0, **f64)))
    assert abs(V - expected) < 1e-12
    assert abs(tv - (2.0 + 1.0)) < 1e-12


def test_a_wrong_density_is_detected():
    # V computed with the wrong bias scale no longer matches the counts
    g = torch.Generator().manual_seed(1)
    net = dp.random_relu_net([3, 20, 1], g, init="he", bias_std=0.3)
    seg = dp.offset_segments(1, 3, 4.0, g)[0]
    diffs = []
    for _ in range(400):
        w = _resample_biases(net, 0.3, g)
        count, V, _ = dp.region_expectation_terms(w, seg[0], seg[1], 3.0)
        diffs.append(count - V)
    d = torch.tensor(diffs, **f64)
    assert abs(float(d.mean())) > 4 * float(d.std()) / math.sqrt(len(d))


def test_offset_segments_shape_and_length():
    s = dp.offset_segments(5, 4, 2.5, torch.Generator().manual_seed(0))
    assert s.shape == (5, 2, 4)
    assert torch.allclose((s[:, 1] - s[:, 0]).norm(dim=1), torch.full((5,), 2.5, **f64))


@pytest.mark.parametrize("call", [lambda: dp.bias_density_bound(0.0), lambda: dp.offset_segments(0, 2, 1.0, torch.Generator()),
                                  lambda: dp.offset_segments(1, 2, 0.0, torch.Generator())])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
