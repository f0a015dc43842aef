"""Cellular automata as ReLU networks (nnapprox.depth.automaton), exact on bits."""

import pytest
import torch

from nnapprox import depth as dp


def _reference(x, rule, T):
    for _ in range(T):
        x = dp.automaton_step(x, rule)
    return x


def test_step_matches_rule_table():
    # rule 110 on a single neighbourhood per row: the rule's bits in order
    rows = torch.tensor([[(p >> 2) & 1, (p >> 1) & 1, p & 1] for p in range(8)], dtype=torch.float64)
    centre = dp.automaton_step(rows, 110)[:, 1]
    assert centre.tolist() == [float((110 >> p) & 1) for p in range(8)]


@pytest.mark.parametrize("rule,W,T", [(110, 12, 1), (110, 16, 9), (30, 10, 7), (90, 9, 4), (255, 5, 3)])
def test_network_equals_the_automaton(rule, W, T):
    g = torch.Generator().manual_seed(rule + W + T)
    x = torch.randint(0, 2, (300, W), generator=g).double()
    net = dp.automaton_network_weights(rule, W, T)
    assert torch.equal(dp.relu_net(net, x), _reference(x, rule, T))
    assert dp.n_affine_layers(net) == T + 1


def test_a_wrong_rule_is_detected():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 2, (300, 12), generator=g).double()
    assert not torch.equal(dp.relu_net(dp.automaton_network_weights(110, 12, 5), x), _reference(x, 54, 5))


@pytest.mark.parametrize("call", [lambda: dp.automaton_step(torch.zeros(2, 3), 256),
                                  lambda: dp.automaton_network_weights(110, 0, 3),
                                  lambda: dp.automaton_network_weights(110, 4, 0),
                                  lambda: dp.automaton_network_weights(0, 4, 2)])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
