"""Mean field, TAP, the unrolled ResNet, Glauber and the reverse SDE."""

import math

import pytest
import torch

from nnapprox.diffusion import (
    MLPDenoiser, UnrolledVIResNet, dense_forward, energy, exact_second_moment, glauber, glauber_trace,
    init_weights, knots, mf_trajectory, mlp_width_for, naive_mean_field, noise, operator_norm,
    posterior_mean, probabilities, relu_tanh, relu_tanh_sup_error_bound, relu_tanh_weights,
    as_denoiser, posterior_mean_error, reverse_sde, sample_exact, sk_coupling, state_index, tap, train_denoiser, tv_distance,
    unrolled_vi_weights, vi_free_energy, field, train_denoisers, tune_denoisers, validation_draws,
    held_out_loss, as_ensemble_denoiser,
)

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_mean_field_fixed_point_is_stationary_for_the_vi_objective():
    g = _gen(0)
    A = sk_coupling(20, 0.3, g)
    h = torch.randn(3, 20, generator=g, dtype=F64)
    m = naive_mean_field(A, h, n_iter=500).requires_grad_(True)
    (grad,) = torch.autograd.grad(vi_free_energy(m, A, h).sum(), m)
    assert float(grad.abs().max()) < 1e-8


def test_tap_fixed_point_solves_the_tap_equation():
    g = _gen(1)
    A = sk_coupling(30, 0.5, g)
    h = torch.randn(4, 30, generator=g, dtype=F64)
    m = tap(A, h, n_iter=400, damping=0.5)
    onsager = (1 - m**2) @ (A**2).T
    torch.testing.assert_close(m, torch.tanh(h + m @ A.T - m * onsager), rtol=0, atol=1e-10)


def test_tap_beats_mean_field_at_high_temperature():
    g = _gen(2)
    A = sk_coupling(12, 0.5, g)
    ts = torch.full((200,), 1.0, dtype=F64)
    h = field(noise(sample_exact(A, 200, g), ts, g), ts)
    m = posterior_mean(A, h)
    err = lambda u: float(((u - m) ** 2).mean())  # noqa: E731
    assert err(tap(A, h)) < err(naive_mean_field(A, h)) < err(torch.tanh(h))


def test_unrolled_resnet_with_exact_tanh_is_the_mean_field_iteration():
    g = _gen(3)
    A = sk_coupling(16, 0.35, g)
    h = torch.randn(8, 16, generator=g, dtype=F64)
    for L in (1, 5, 12):
        net = UnrolledVIResNet(16, L, 8, dtype=F64, exact_tanh=True)
        net.load_state_dict(unrolled_vi_weights(A, L, 8))
        torch.testing.assert_close(net(h), mf_trajectory(A, h, L)[-1], rtol=0, atol=1e-13)


@pytest.mark.parametrize("weights", ["hand-built", "random"])
def test_literal_resnet_matrices_agree_with_the_fast_path(weights):
    g = _gen(4)
    d, L, M = 6, 3, 8
    A = sk_coupling(d, 0.5, g)
    net = UnrolledVIResNet(d, L, M, dtype=F64)
    net.load_state_dict(unrolled_vi_weights(A, L, M) if weights == "hand-built"
                        else init_weights(d, L, M, generator=g, dtype=F64))
    h = 3 * torch.randn(10, d, generator=g, dtype=F64)
    torch.testing.assert_close(dense_forward(net, h), net(h), rtol=0, atol=1e-12)


def test_forward_equals_the_trajectory_and_the_block_loop_values_and_gradients():
    g = torch.Generator().manual_seed(3)
    net = UnrolledVIResNet(9, 4, 8)
    net.load_state_dict(init_weights(9, 4, 8, generator=g))
    h = torch.randn(5, 9, generator=g)
    m = torch.zeros_like(h)
    for ell in range(net.L):  # the indexed blocks, from m^0 = 0
        m = net.block(ell, m, h)
    assert torch.equal(net(h), m) and torch.equal(net.trajectory(h)[-1], m)
    fast = torch.autograd.grad(net(h).square().sum(), list(net.parameters()))
    slow = torch.autograd.grad(m.square().sum(), list(net.parameters()))
    for a, b in zip(fast, slow):  # unbound weights and the skipped product change no gradient
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_relu_tanh_error_obeys_the_interpolation_bound_and_shrinks():
    v = torch.linspace(-10, 10, 40001, dtype=F64)
    errors = []
    for M in (4, 8, 16, 32, 64):
        a, c = relu_tanh_weights(M, 4.0)
        err = float((relu_tanh(v, a, c, knots(M, 4.0)) - torch.tanh(v)).abs().max())
        assert err <= relu_tanh_sup_error_bound(M, 4.0)
        errors.append(err)
    assert all(b < a for a, b in zip(errors, errors[1:]))


def test_unrolled_network_error_contracts_to_the_fixed_point():
    g = _gen(5)
    A = sk_coupling(16, 0.3, g)
    rho = operator_norm(A)
    assert rho < 1
    h = torch.randn(4, 16, generator=g, dtype=F64)
    m_star = naive_mean_field(A, h, 1000)
    dist = (mf_trajectory(A, h, 20) - m_star).norm(dim=2)
    bound = rho ** torch.arange(21, dtype=F64)[:, None] * dist[0]
    assert bool((dist <= bound * (1 + 1e-9) + 1e-13).all())


def test_relu_network_iterates_obey_the_contraction_plus_approximation_bound():
    g = _gen(11)
    d, L, M, R = 12, 15, 8, 4.0
    A = sk_coupling(d, 0.3, g)
    rho = operator_norm(A)
    h = torch.randn(6, d, generator=g, dtype=F64)
    net = UnrolledVIResNet(d, L, M, R, dtype=F64)
    net.load_state_dict(unrolled_vi_weights(A, L, M, R))
    traj = net.trajectory(h)
    assert traj.shape == (L + 1, 6, d)
    torch.testing.assert_close(traj[-1], net(h), rtol=0, atol=0)
    m_star = naive_mean_field(A, h, 1000)
    dist = (traj - m_star).norm(dim=2)
    eps = relu_tanh_sup_error_bound(M, R)
    geo = torch.tensor([sum(rho**j for j in range(ell)) for ell in range(L + 1)], dtype=F64)
    bound = rho ** torch.arange(L + 1, dtype=F64)[:, None] * dist[0] + d**0.5 * eps * geo[:, None]
    assert bool((dist <= bound * (1 + 1e-9) + 1e-13).all())
    # the bound can fail: a crude tanh (M = 1) with a too-small eps_M violates it at depth
    coarse = UnrolledVIResNet(d, L, 1, R, dtype=F64)
    coarse.load_state_dict(unrolled_vi_weights(A, L, 1, R))
    dist_coarse = (coarse.trajectory(h) - m_star).norm(dim=2)
    assert not bool((dist_coarse <= bound * (1 + 1e-9) + 1e-13).all())


def test_relu_tanh_moves_its_weights_to_the_input():
    a, c = relu_tanh_weights(8, 4.0, F64)
    v = torch.linspace(-3, 3, 7, dtype=torch.float32)
    out = relu_tanh(v, a, c, knots(8, 4.0, F64))
    assert out.dtype == torch.float32 and out.device == v.device


def test_glauber_trace_starts_at_x0_and_two_starts_agree_after_mixing():
    g = _gen(12)
    d = 30
    A = sk_coupling(d, 0.5, g)
    x0 = torch.cat([glauber(A, 300, 0, g), torch.ones(300, d, dtype=F64)])
    trace = glauber_trace(A, 600, 40, 10, g, x0=x0)
    assert trace.shape == (5, 600, d)
    torch.testing.assert_close(trace[0], x0)
    mag = trace.mean(2)  # (snapshots, chains)
    z = lambda v: float((v[:300].mean() - v[300:].mean()).abs()  # noqa: E731
                        / torch.sqrt(v[:300].var() / 300 + v[300:].var() / 300))
    assert z(mag[0]) > 20      # at sweep 0 the two groups are far apart: the test can fail
    assert z(mag[-1]) < 4      # after 40 sweeps they agree
    with pytest.raises(ValueError, match="shape"):
        glauber(A, 5, 1, g, x0=torch.ones(4, d, dtype=F64))


def test_glauber_has_the_exact_stationary_law():
    g = _gen(6)
    A = sk_coupling(4, 1.0, g)
    x = glauber(A, 40_000, 30, g)
    assert tv_distance(x, probabilities(A)) < 0.02


def test_glauber_rejects_a_nonzero_diagonal():
    with pytest.raises(ValueError, match="zero diagonal"):
        glauber(torch.eye(3, dtype=F64), 2, 1)


def test_reverse_sde_with_the_exact_score_samples_the_model():
    g = _gen(7)
    A = sk_coupling(5, 0.8, g)
    x, Ys, ts = reverse_sde(lambda h: posterior_mean(A, h), 5, 20_000, n_steps=150, generator=g, n_snapshots=3)
    assert Ys.shape == (3, 20_000, 5) and ts.shape == (3,)
    assert set(x.unique().tolist()) <= {-1.0, 1.0}
    assert tv_distance(x, probabilities(A)) < 0.03
    floor = float(torch.linalg.matrix_norm(x.T @ x / 20_000 - exact_second_moment(A)))
    assert floor < 0.1


def test_denoiser_training_reduces_the_loss():
    g = _gen(8)
    A = sk_coupling(6, 0.6, g)
    x = sample_exact(A, 256, g)
    net = UnrolledVIResNet(6, 3, 8)
    net.load_state_dict(init_weights(6, 3, 8, generator=g))
    losses = train_denoiser(net, x, 150, g, batch_size=128, lr=1e-2)
    assert sum(losses[-20:]) / 20 < sum(losses[:20]) / 20
    mlp = MLPDenoiser(6, mlp_width_for(6, net.n_parameters()), generator=g)
    assert abs(mlp.n_parameters() - net.n_parameters()) / net.n_parameters() < 0.15


@pytest.mark.parametrize("M", [8, 16, 64])
def test_initial_nonlinearity_is_a_noisy_clip_and_flat_outside_the_knots(M):
    """Each block's phi at initialisation has total slope 0, so it is constant for |v| >= R (as
    tanh nearly is): the large fields of small times cannot blow the initial network up (with
    uncentred noise its slope beyond R had s.d. 0.1 sqrt(M+1)). Between the knots phi is the clip
    plus sum_k (eps_k - mean eps) relu(v - b_k), eps_k ~ N(0, 0.1^2), whose s.d. at any v is at most
    0.1 (sum_k (R - b_k)^2)^(1/2); we allow 6 of those."""
    L, R = 5, 4.0
    w = init_weights(3, L, M, R, generator=_gen(12), dtype=F64)
    assert torch.allclose(w["a"].sum(dim=1), torch.zeros(L, dtype=F64), atol=1e-12)
    b = knots(M, R, F64)
    sd_max = 0.1 * float(((R - b) ** 2).sum().sqrt())
    v = torch.linspace(-100.0, 100.0, 4001, dtype=F64)
    for ell in range(L):
        phi = relu_tanh(v, w["a"][ell], w["c"][ell], w["b"])
        right, left = phi[v >= R], phi[v <= -R]
        assert torch.allclose(right, right[0].expand_as(right)) and torch.allclose(left, left[0].expand_as(left))
        assert (phi - v.clamp(-1, 1)).abs().max() <= 6 * sd_max
    net = UnrolledVIResNet(3, L, M, R, dtype=F64)
    net.load_state_dict(w)
    assert net(torch.full((7, 3), 1e4, dtype=F64)).abs().max() <= 1 + 6 * sd_max  # the last block's phi, bounded


def test_early_stopping_keeps_the_best_held_out_weights():
    """A learning rate that wrecks the network: without x_val the final weights are worse than the
    initial ones; with x_val the weights kept are at least as good as the initial ones (evaluated at step 0)."""
    g = _gen(9)
    A = sk_coupling(6, 0.6, g)
    x = sample_exact(A, 200, g)
    init = init_weights(6, 3, 8, generator=g)

    def error_after(x_val):
        net = UnrolledVIResNet(6, 3, 8)
        net.load_state_dict(init)
        train_denoiser(net, x[40:], 60, _gen(10), batch_size=64, lr=50.0, x_val=x_val, eval_every=5)
        return posterior_mean_error(as_denoiser(net), A, 0.5, 4000, _gen(11))

    start = UnrolledVIResNet(6, 3, 8)
    start.load_state_dict(init)
    e0 = posterior_mean_error(as_denoiser(start), A, 0.5, 4000, _gen(11))
    assert error_after(None) > 1.5 * e0  # the wrecking learning rate does wreck
    assert error_after(x[:40]) <= e0 * (1 + 1e-9)  # same test draws: exactly comparable
    with pytest.raises(ValueError, match="x_val"):
        train_denoiser(start, x, 5, g, x_val=x[:0])


def test_bad_iteration_parameters_raise():
    A = sk_coupling(3, 0.5)
    h = torch.zeros(1, 3, dtype=F64)
    with pytest.raises(ValueError, match="damping"):
        tap(A, h, 10, damping=1.5)
    with pytest.raises(ValueError, match="0 < delta < T"):
        reverse_sde(lambda h: h, 3, 10, T=1.0, delta=2.0)
    with pytest.raises(ValueError, match="M >= 1"):
        knots(0, 4.0)


def test_relu_tanh_equals_the_literal_sum_of_relus_with_the_same_gradients():
    """The cumulative-sum evaluation is c + sum_k a_k relu(v - b_k) itself: values and gradients
    (in v, a and c) agree in float64, at random points, beyond the outer knots and on the knots."""
    g = _gen(21)
    b = knots(8, 4.0, F64)
    a = torch.randn(9, generator=g, dtype=F64).requires_grad_(True)
    c = torch.tensor(0.3, dtype=F64, requires_grad=True)
    v = torch.cat([6 * torch.randn(500, generator=g, dtype=F64), b, torch.tensor([-50.0, 50.0], dtype=F64)])
    v.requires_grad_(True)
    literal = c + (torch.relu(v[:, None] - b) * a).sum(1)
    fast = relu_tanh(v, a, c, b)
    assert torch.allclose(fast, literal, atol=1e-12, rtol=0)
    w = torch.randn(v.shape, generator=g, dtype=F64)
    grads_fast = torch.autograd.grad((fast * w).sum(), [v, a, c])
    grads_literal = torch.autograd.grad((literal * w).sum(), [v, a, c])
    for gf, gl in zip(grads_fast, grads_literal):
        assert torch.allclose(gf, gl, atol=1e-10, rtol=0)


@pytest.mark.parametrize("arch", ["resnet", "mlp"])
def test_ensemble_training_of_one_model_is_train_denoiser(arch):
    """train_denoisers with E = 1 draws the same batches, times and noise and takes the same Adam
    steps (cosine learning rate, early stopping on the same held-out draws) as train_denoiser."""
    import copy

    g = _gen(22)
    A = sk_coupling(6, 0.6, g)
    x = sample_exact(A, 80, g)
    if arch == "resnet":  # float64: the two paths differ only by round-off
        net = UnrolledVIResNet(6, 3, 8, dtype=F64)
        net.load_state_dict(init_weights(6, 3, 8, generator=g, dtype=F64))
    else:
        net = MLPDenoiser(6, 12, dtype=F64, generator=g)
    twin = copy.deepcopy(net)
    serial = train_denoiser(net, x[16:], 40, _gen(23), lr=3e-2, x_val=x[:16], eval_every=5)
    g2 = _gen(23)
    h_val, x_val = validation_draws(x[:16], 64, g2)
    batched = train_denoisers([twin], x[None, 16:], 40, [3e-2], g2, validation=(h_val[None], x_val[None]),
                              eval_every=5)
    assert batched.shape == (1, 40)
    assert max(abs(s - b) for s, b in zip(serial, batched[0].tolist())) < 1e-10
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-9, rtol=0)


def test_ensemble_members_train_independently_with_their_own_learning_rates():
    """Adam is elementwise and each member's loss involves only its own weights: two ensembles
    that differ only in member 1's learning rate (10, which wrecks it) end with the same member 0,
    bit for bit, and a different member 1."""
    g = _gen(24)
    A = sk_coupling(5, 0.5, g)
    x = torch.stack([sample_exact(A, 40, g) for _ in range(2)])
    init = [MLPDenoiser(5, 8, generator=g) for _ in range(2)]
    import copy

    runs = []
    for other_lr in (1e-2, 10.0):
        models = copy.deepcopy(init)
        train_denoisers(models, x, 30, [1e-2, other_lr], _gen(25))
        runs.append(models)
    for p, q in zip(runs[0][0].parameters(), runs[1][0].parameters()):
        assert torch.equal(p, q)  # member 0 untouched by member 1's learning rate
    assert any(not torch.equal(p, q) for p, q in zip(runs[0][1].parameters(), runs[1][1].parameters()))


def test_tune_denoisers_keeps_the_configuration_with_the_lowest_held_out_loss():
    g = _gen(26)
    A = sk_coupling(5, 0.5, g)
    x = torch.stack([sample_exact(A, 50, g) for _ in range(3)])
    nets, configs, table = tune_denoisers(lambda w, g_: MLPDenoiser(5, w, generator=g_), [4, 8],
                                          [1e-3, 3e-2], x, 20, g, val_draws=8)
    assert table.shape == (3, 2, 2) and len(nets) == len(configs) == 3
    for r in range(3):
        i, j = divmod(int(torch.argmin(table[r].flatten())), 2)
        assert configs[r] == ([4, 8][i], [1e-3, 3e-2][j])
        assert nets[r].width == configs[r][0]
        h_val, x_val = validation_draws(x[r, :10], 8, _gen(0))  # any fresh draws: a finite loss
        assert math.isfinite(held_out_loss(nets[r], h_val, x_val))
    with pytest.raises(ValueError, match="learning rates > 0"):
        tune_denoisers(lambda w, g_: MLPDenoiser(5, w), [4], [0.0], x, 5, g)
    with pytest.raises(ValueError, match="val_fraction"):
        tune_denoisers(lambda w, g_: MLPDenoiser(5, w), [4], [1e-2], x[:, :3], 5, g)
    with pytest.raises((ValueError, TypeError)):  # one training set is (1, n, d), not (n, d)
        tune_denoisers(lambda w, g_: MLPDenoiser(5, w), [4], [1e-2], x[0], 5, g)
    with pytest.raises(ValueError, match="one learning rate"):
        train_denoisers([MLPDenoiser(5, 4)], x[:1], 5, [1e-2, 1e-2], g)
    with pytest.raises(ValueError, match="same class"):
        train_denoisers([MLPDenoiser(5, 4), MLPDenoiser(5, 6)], x[:2], 5, [1e-2, 1e-2], g)


def test_ensemble_denoiser_runs_each_model_on_its_own_block_whatever_its_width():
    g = _gen(27)
    models = [MLPDenoiser(4, 6, generator=g), MLPDenoiser(4, 9, generator=g), MLPDenoiser(4, 6, generator=g)]
    h = torch.randn(3 * 7, 4, generator=g, dtype=F64)
    out = as_ensemble_denoiser(models)(h)
    for e, model in enumerate(models):
        assert torch.allclose(out[7 * e:7 * (e + 1)], as_denoiser(model)(h[7 * e:7 * (e + 1)]), atol=1e-6)
    with pytest.raises(ValueError, match="equal blocks"):
        as_ensemble_denoiser(models)(h[:20])
