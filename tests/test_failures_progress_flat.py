"""Tests of the hidden-progress measures and the flat-activation (staircase neuron) module."""

import pytest
import torch

import nnapprox
import nnapprox.failures as F


def test_movement_zscore_null_and_signal():
    g = torch.Generator().manual_seed(0)
    W0 = torch.randn(1, 50, 30, generator=g, dtype=torch.float64)
    masks = torch.zeros(1, 30, dtype=torch.long)
    masks[0, :3] = 1
    noise = W0 + 0.1 * torch.randn(1, 50, 30, generator=g, dtype=torch.float64)  # every column moves alike
    assert abs(float(F.movement_zscore(noise, W0, masks, [30])[0])) < 4
    assert float(F.movement_ratio(noise, W0, masks, [30])[0]) == pytest.approx(1.0, abs=0.15)
    signal = noise.clone()
    signal[0, :, :3] += 0.2  # the relevant columns move further
    assert float(F.movement_zscore(signal, W0, masks, [30])[0]) > 10
    assert float(F.movement_ratio(signal, W0, masks, [30])[0]) > 2
    assert torch.isnan(F.movement_zscore(W0, W0, masks, [30])[0])  # nothing moved: undefined


def test_scan_threshold_is_the_union_bound_t_quantile():
    from scipy.stats import t as student_t

    tau = F.scan_threshold(6, 120, alpha=1e-3)
    assert student_t.sf(tau, 6) * 120 == pytest.approx(1e-3, rel=1e-9)
    assert F.scan_threshold(26, 120) < F.scan_threshold(6, 120)  # fewer columns: heavier tails
    assert F.scan_threshold(26, 1) < F.scan_threshold(26, 120)  # a longer scan: higher threshold
    with pytest.raises(ValueError, match="df"):
        F.scan_threshold(0, 10)
    with pytest.raises(ValueError, match="alpha"):
        F.scan_threshold(5, 10, alpha=1.5)


def _null_scans(n_scans, n_evals, n, k, seed):
    """Largest z over a scan of independent evaluations with exchangeable normal column movements."""
    g = torch.Generator().manual_seed(seed)
    W0 = torch.zeros(n_scans * n_evals, 1, n, dtype=torch.float64)
    W = 10.0 + torch.randn(n_scans * n_evals, 1, n, generator=g, dtype=torch.float64)  # mu_j ~ N(10, 1)
    masks = torch.zeros(n_scans * n_evals, n, dtype=torch.long)
    masks[:, :k] = 1
    z = F.movement_zscore(W, W0, masks, [n] * (n_scans * n_evals))
    return z.reshape(n_scans, n_evals).max(dim=1).values


def test_scan_threshold_controls_false_positives_and_normal_quantile_does_not():
    """Under the null the scan with tau fires at most alpha of the time; the normal quantile fires far more."""
    from scipy.stats import norm

    n_scans, n_evals, n, k, alpha = 3000, 10, 12, 3, 0.05
    z_max = _null_scans(n_scans, n_evals, n, k, seed=0)
    tau = F.scan_threshold(n - k - 1, n_evals, alpha=alpha)
    rate = float((z_max >= tau).double().mean())
    assert rate <= alpha + 3 * (alpha * (1 - alpha) / n_scans) ** 0.5
    naive = float((z_max >= norm.isf(alpha / n_evals)).double().mean())  # ignores the t tails
    assert naive > 2 * alpha


def test_fourier_coefficient_exact_on_the_cube():
    d = 6
    x = F.hypercube(d)
    S, T = torch.tensor([1, 0, 1, 1, 0, 0]), torch.tensor([0, 1, 0, 0, 0, 1])
    p = 0.7 * F.parity(x, S) - 0.2 * F.parity(x, T) + 0.1  # Fourier expansion with three terms
    coef = F.fourier_coefficient(p[None], F.parity(x, S)[None])
    assert float(coef[0]) == pytest.approx(0.7, abs=1e-12)
    with pytest.raises(Exception):  # ValueError, or the shape checker's error under pytest
        F.fourier_coefficient(p[None], p[None, :-1])


def test_parity_training_returns_progress_measures():
    steps, acc, progress, masks = F.train_parity_ensemble([6, 8], [2, 3], 20, torch.Generator().manual_seed(0), eval_every=10)
    assert set(progress) == {"norm_ratio", "movement_ratio", "movement_z", "placebo_z", "fourier", "hinge"}
    assert all(v.shape == (3, 2) for v in progress.values())
    assert torch.isnan(progress["movement_z"][0]).all() and not torch.isnan(progress["movement_z"][1:]).any()


def test_placebo_is_the_lowest_irrelevant_inputs_and_null_when_only_s_moves():
    masks = torch.tensor([[0, 1, 0, 1, 1, 0, 0, 0, 0, 0]])
    assert F.placebo_masks(masks, [10]).tolist() == [[1, 0, 1, 0, 0, 1, 0, 0, 0, 0]]
    g = torch.Generator().manual_seed(1)
    W0 = torch.randn(1, 40, 10, generator=g, dtype=torch.float64)
    W = W0 + 0.1 * torch.randn(1, 40, 10, generator=g, dtype=torch.float64)
    W[0, :, masks[0].bool()] += 0.3  # only the relevant columns move further
    assert float(F.movement_zscore(W, W0, masks, [10])[0]) > 10
    assert abs(float(F.placebo_zscore(W, W0, masks, [10])[0])) < 4
    planted = W.clone()
    planted[0, :, F.placebo_masks(masks, [10])[0].bool()] += 0.3  # the placebo group moves: it fires
    assert float(F.placebo_zscore(planted, W0, masks, [10])[0]) > 10
    with pytest.raises(ValueError, match="placebo"):
        F.placebo_masks(torch.tensor([[1, 1, 1, 0, 0, 0]]), [6])  # 3 others < 3 + 2


def test_placebo_scan_fires_at_most_alpha_under_exchangeable_columns():
    """Exchangeable normal movements: the placebo's scan with its own tau fires at most alpha of the time."""
    n_scans, n_evals, n, k, alpha = 2000, 10, 14, 3, 0.05
    g = torch.Generator().manual_seed(2)
    W = 10.0 + torch.randn(n_scans * n_evals, 1, n, generator=g, dtype=torch.float64)
    W0 = torch.zeros_like(W)
    masks = torch.zeros(n_scans * n_evals, n, dtype=torch.long)
    masks[:, -k:] = 1
    z = F.placebo_zscore(W, W0, masks, [n] * (n_scans * n_evals)).reshape(n_scans, n_evals).max(1).values
    rate = float((z >= F.scan_threshold(n - 2 * k - 1, n_evals, alpha=alpha)).double().mean())
    assert rate <= alpha + 3 * (alpha * (1 - alpha) / n_scans) ** 0.5


def test_staircase_gradient_is_exactly_zero():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(256, 4, generator=g, dtype=torch.float64)
    w_star, w0 = torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=torch.float64), torch.zeros(4, dtype=torch.float64) + 0.1
    y = F.quantised_identity(X @ w_star, 0.5)
    ws, losses = F.train_flat_neuron(X, y, w0, 0.5, 0.5, 10, mode="end_to_end")
    assert torch.equal(ws[-1], w0) and torch.equal(losses, losses[0].expand(11))
    assert (F.quantised_identity(X @ w0, 0.5) - X @ w0).abs().max() <= 0.25 + 1e-12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_only_within_theorem_bound(seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(512, 5, generator=g, dtype=torch.float64)
    w_star = 2.0 * torch.randn(5, generator=g, dtype=torch.float64)
    w0 = torch.randn(5, generator=g, dtype=torch.float64)
    delta = 0.7
    eta = 1.0 / float(torch.linalg.eigvalsh(X.T @ X / 512)[-1])
    ws, losses = F.train_flat_neuron(X, F.quantised_identity(X @ w_star, delta), w0, delta, eta, 30)
    bound = F.forward_only_bound(X, w0, w_star, delta, eta, 30)
    assert ((ws - w_star).norm(dim=1) <= bound + 1e-12).all()
    with pytest.raises(ValueError, match="eta"):
        F.forward_only_bound(X, w0, w_star, delta, 3 * eta, 30)


def test_flat_claim_can_fail_on_wrong_update():
    """Gradient *ascent* with the forward-only direction leaves the theorem's ball: the chapter's check fails."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(512, 5, generator=g, dtype=torch.float64)
    w_star, w0 = 2.0 * torch.randn(5, generator=g, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    delta = 0.5
    y = F.quantised_identity(X @ w_star, delta)
    eta = 1.0 / float(torch.linalg.eigvalsh(X.T @ X / 512)[-1])
    w = w0.clone()
    for _ in range(10):
        w = w + eta * X.T @ (F.quantised_identity(X @ w, delta) - y) / 512  # wrong sign
    bound = F.forward_only_bound(X, w0, w_star, delta, eta, 10)
    claims = nnapprox.Claims()
    assert not claims.check("wrong update within bound", value=float((w - w_star).norm() / bound[-1]), op="<=",
                            threshold=1.0, kind="bound", source="test",
                            no_foil="a proven bound")


class _OracleParity(torch.nn.Module):
    """Exact running parity as logits: the automaton y_t = y_{t-1} xor b_t."""

    def forward(self, bits):
        y = torch.cumsum(bits, dim=1) % 2
        return torch.stack([1.0 - y, y.float()], dim=-1) * 10.0


def test_bit_strings_running_parity_and_padding():
    bits, parity, lengths = F.sample_bit_strings(64, 12, torch.Generator().manual_seed(0), min_length=3)
    assert bits.shape == parity.shape == (64, 12) and lengths.min() >= 3 and lengths.max() <= 12
    for i in range(64):
        n = int(lengths[i])
        assert bits[i, n:].eq(0).all()
        assert int(parity[i, n - 1]) == int(bits[i, :n].sum()) % 2


def test_oracle_has_zero_error_and_loss_ignores_padding():
    g = torch.Generator().manual_seed(1)
    assert F.parity_accuracy(_OracleParity(), 50, 256, g) == 1.0
    bits, parity, lengths = F.sample_bit_strings(32, 10, g, min_length=1)
    logits = _OracleParity()(bits)
    logits_wrong_padding = logits.clone()
    pad = torch.arange(10)[None, :] >= lengths[:, None]
    logits_wrong_padding[pad] = torch.tensor([-10.0, 10.0])  # garbage where there is no symbol
    torch.testing.assert_close(F.running_parity_loss(logits, parity, lengths),
                               F.running_parity_loss(logits_wrong_padding, parity, lengths))


@pytest.mark.parametrize("cls", [F.ParityLSTM, F.ParityTransformer])
def test_sequence_models_shapes_and_seeded_init(cls):
    a = F.init_parameters_(cls(), torch.Generator().manual_seed(3))
    b = F.init_parameters_(cls(), torch.Generator().manual_seed(3))
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name
    bits, _, _ = F.sample_bit_strings(4, 30, torch.Generator().manual_seed(0))
    assert a(bits).shape == (4, 30, 2)


def test_transformer_is_causal():
    model = F.init_parameters_(F.ParityTransformer(), torch.Generator().manual_seed(0)).eval()
    bits, _, _ = F.sample_bit_strings(2, 16, torch.Generator().manual_seed(1))
    changed = bits.clone()
    changed[:, -1] = 1 - changed[:, -1]  # a later symbol must not change earlier outputs
    with torch.no_grad():
        torch.testing.assert_close(model(bits)[:, :-1], model(changed)[:, :-1])


def test_random_positions_sorted_distinct_in_range():
    pos = F.random_positions(64, 20, 256, torch.Generator().manual_seed(0))
    assert pos.shape == (64, 20) and int(pos.min()) >= 0 and int(pos.max()) < 256
    assert bool((pos[:, 1:] > pos[:, :-1]).all())  # strictly increasing: sorted and distinct
    assert int(pos.max()) > 100  # positions beyond the string length do occur
    with pytest.raises(ValueError, match="max_position"):
        F.random_positions(2, 300, 256)


def test_transformer_default_positions_equal_explicit_arange():
    """positions=None is the standard encoding 0..n-1; explicit positions use the same formula."""
    model = F.init_parameters_(F.ParityTransformer(), torch.Generator().manual_seed(0)).eval()
    bits, _, _ = F.sample_bit_strings(3, 12, torch.Generator().manual_seed(1))
    arange = torch.arange(12).expand(3, 12)
    with torch.no_grad():
        torch.testing.assert_close(model(bits), model(bits, arange))
    torch.testing.assert_close(F.sinusoidal_encoding(torch.arange(9), 6), F.positional_encoding(9, 6))


def test_flip_margin_change_of_the_oracle_is_twice_its_margin():
    """A model that knows the parity with margin m changes its margin by 2m under any flip."""
    g = torch.Generator().manual_seed(2)
    change = F.flip_margin_change(_OracleParity(), 40, 64, g)
    margin = _OracleParity()(F.sample_bit_strings(1, 40, g)[0])[0, -1]
    torch.testing.assert_close(change, torch.full((64,), 2 * float((margin[1] - margin[0]).abs())))
