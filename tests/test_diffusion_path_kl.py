"""The path KL between two discretised reverse SDEs (chapter section 5, score error to sampling error)."""

import math

import pytest
import torch

from nnapprox.diffusion import (
    all_states, energy, euler_chain_path_kl, ou_schedule, posterior_mean, reverse_sde, sk_coupling,
    tap, time_grid,
)

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_chain_is_the_reverse_sde_chain_and_a_denoiser_has_zero_kl_to_itself():
    A = sk_coupling(6, 0.5, _gen(0))
    den = lambda h: tap(A, h, 20, 0.5)  # noqa: E731
    Y, Y_q, kl, err = euler_chain_path_kl(den, [den], 6, 50, n_steps=40, generator=_gen(1))
    _, Ys, _ = reverse_sde(den, 6, 50, delta=1e-2, n_steps=40, generator=_gen(1), n_snapshots=2)
    torch.testing.assert_close(Y, Ys[-1], rtol=0, atol=0)  # same draws, same updates
    torch.testing.assert_close(Y_q[0], Y, rtol=0, atol=0)  # coupled chain with the same score
    assert kl.shape == (1, 50) and float(kl.abs().max()) == 0.0
    assert err.shape == (1, 40) and float(err.abs().max()) == 0.0


def test_a_constant_error_in_the_mean_gives_the_closed_form_path_kl():
    """m_hat = m + c: s - s_hat = -lambda_t c / sigma_t^2, so each path sums dt lambda^2 |c|^2 / sigma^4."""
    d, n_steps, delta = 4, 30, 1e-2
    c = torch.tensor([0.1, -0.2, 0.0, 0.3], dtype=F64)
    den = torch.tanh
    _, _, kl, err = euler_chain_path_kl(den, [lambda h: den(h) + c], d, 7, delta=delta,
                                     n_steps=n_steps, generator=_gen(2))
    torch.testing.assert_close(err, torch.full_like(err, float((c**2).sum()) / d), rtol=1e-12, atol=0)
    ts = time_grid(5.0, delta, n_steps)
    lam, sig = ou_schedule(ts[:-1])
    expected = float(((ts[:-1] - ts[1:]) * lam**2 / sig**4).sum() * (c**2).sum())
    torch.testing.assert_close(kl, torch.full_like(kl, expected), rtol=1e-12, atol=0)
    # the 1/delta bound of the theorem: the sum is below (1/sigma_delta^2 - 1/sigma_T^2)/2
    _, s_delta = ou_schedule(torch.tensor(delta, dtype=F64))
    _, s_T = ou_schedule(torch.tensor(5.0, dtype=F64))
    assert expected <= float((c**2).sum() * (1 / s_delta**2 - 1 / s_T**2) / 2)


def test_the_bound_holds_for_a_coupling_free_sampler_and_fails_for_a_wrong_kl():
    """|E_P phi - E_Q phi| <= (b - a) sqrt(KL/2) with phi the energy; a KL 100 times too small breaks it."""
    d = 6
    A = sk_coupling(d, 0.8, _gen(3))
    exact = lambda h: posterior_mean(A, h)  # noqa: E731
    Y, Y_q, kl, _ = euler_chain_path_kl(exact, [torch.tanh], d, 2000, n_steps=100,
                                        generator=_gen(4))
    x_p = torch.where(Y >= 0, 1.0, -1.0).to(F64)
    x_q, _, _ = reverse_sde(torch.tanh, d, 2000, delta=1e-2, n_steps=100, generator=_gen(5))
    x_c = torch.where(Y_q[0] >= 0, 1.0, -1.0).to(F64)  # the coupled chain: same law as x_q
    assert abs(float(energy(x_c, A).mean() - energy(x_q, A).mean())) < 0.15
    gap = float((energy(x_p, A).mean() - energy(x_q, A).mean()).abs())
    e_all = energy(all_states(d, F64, "cpu"), A)
    span = float(e_all.max() - e_all.min())
    assert gap <= span * math.sqrt(float(kl.mean()) / 2)
    assert gap > span * math.sqrt(float(kl.mean()) / 200)  # the check can fail


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="n_samples"):
        euler_chain_path_kl(torch.tanh, [], 3, 0)
    with pytest.raises(ValueError, match="delta"):
        euler_chain_path_kl(torch.tanh, [], 3, 5, delta=10.0)
