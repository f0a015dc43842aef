"""Exact best 0-1 error of p-piece functions on the alternating points (nnapprox.depth.best_pieces)."""

import itertools

import pytest
import torch

from nnapprox import depth as dp


def _brute_force(y, s_max):
    """Fewest mismatches over all 0/1 sequences with at most s switches, by enumeration."""
    n = len(y)
    best = [n + 1] * (s_max + 1)
    for seq in itertools.product([0, 1], repeat=n):
        s = sum(a != b for a, b in zip(seq, seq[1:]))
        err = sum(a != b for a, b in zip(seq, y))
        for t in range(s, s_max + 1):
            best[t] = min(best[t], err)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_dp_equals_enumeration_on_random_labels(seed):
    g = torch.Generator().manual_seed(seed)
    n = 9
    y = torch.randint(0, 2, (n,), generator=g)
    assert dp.min_errors_with_switches(y, n).tolist() == _brute_force(y.tolist(), n)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 13, 64])
def test_closed_form_on_alternating_points(n):
    errs = dp.min_errors_with_switches(torch.arange(n) % 2, n + 2)
    assert [e / n for e in errs.tolist()] == [dp.best_error_closed_form(n, s) for s in range(n + 3)]


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_telgarsky_bound_below_exact_best(k):
    n = 2**k
    cont = dp.best_piecewise_errors(n, n)
    disc = dp.best_piecewise_errors(n, n, continuous=False)
    bound = torch.tensor([dp.telgarsky_error_lower_bound(n, p) for p in range(1, n + 1)], dtype=torch.float64)
    assert bool((disc >= bound).all()) and bool((cont >= disc).all())
    # zero error needs n - 1 pieces (continuous) and exactly n - 1 suffice
    assert cont[n - 3].item() > 0 if n >= 3 else True
    assert cont[n - 2].item() == 0


def test_a_wrong_bound_is_caught():
    # a bound that is too strong, (n - p)/n, exceeds the exact best error somewhere
    n = 32
    disc = dp.best_piecewise_errors(n, n, continuous=False)
    too_strong = torch.tensor([(n - p) / n for p in range(1, n + 1)], dtype=torch.float64)
    assert bool((disc < too_strong).any())


def test_width_limit_and_one_sixth():
    for k in range(4, 14):
        for l in range(1, 4):
            m = dp.telgarsky_width_limit(k, l)
            assert (2 * m) ** l <= 2 ** (k - 3) < (2 * (m + 1)) ** l
            if m >= 1:
                n = 2**k
                best = dp.best_piecewise_errors(n, (2 * m) ** l, continuous=False)[-1].item()
                assert best >= 1 / 6


@pytest.mark.parametrize(
    "call",
    [
        lambda: dp.min_errors_with_switches(torch.tensor([0, 2, 1]), 2),
        lambda: dp.min_errors_with_switches(torch.tensor([0, 1]), -1),
        lambda: dp.best_piecewise_errors(0, 3),
        lambda: dp.best_piecewise_errors(8, 0),
        lambda: dp.max_switches(0),
        lambda: dp.best_error_closed_form(4, -1),
        lambda: dp.telgarsky_width_limit(0, 1),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
