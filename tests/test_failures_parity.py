"""Exactness and property tests of the parity / Walsh–Hadamard / gradient-variance modules."""

import pytest
import torch

import nnapprox
import nnapprox.failures as F


@pytest.mark.parametrize("d", [1, 3, 6])
def test_fwht_equals_dense_hadamard(d):
    g = torch.Generator().manual_seed(d)
    f = torch.randn(2**d, 5, generator=g, dtype=torch.float64)
    torch.testing.assert_close(F.fwht(f), F.hadamard_matrix(d) @ f, rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [2, 5, 8])
def test_parities_orthonormal_and_equal_hadamard(d):
    P = F.all_parities(d)
    torch.testing.assert_close(P @ P.T / 2**d, torch.eye(2**d, dtype=torch.float64), rtol=0, atol=1e-14)
    torch.testing.assert_close(P, F.hadamard_matrix(d), rtol=0, atol=0)


def test_inplace_fwht_equals_dense_and_overwrites():
    g = torch.Generator().manual_seed(4)
    f = torch.randn(2**7, 3, 2, generator=g, dtype=torch.float64)
    expected = (F.hadamard_matrix(7) @ f.reshape(2**7, -1)).reshape(f.shape)
    out = F.fwht_(f)
    assert out is f  # transformed in place
    torch.testing.assert_close(f, expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="contiguous"):
        F.fwht_(torch.zeros(8, 4).T)  # a transposed view is not contiguous
    first = torch.randn(2**6, 5, generator=g, dtype=torch.float64)
    pieces = first.clone()
    for block in pieces.view(4, 16, 5):  # the stages along the low 4 bits, block by block
        F.fwht_(block)
    torch.testing.assert_close(F.butterflies_(pieces, 16), F.fwht(first), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="power of two"):
        F.butterflies_(pieces, 3)


@pytest.mark.parametrize("loss", F.LOSSES)
@pytest.mark.parametrize("d", [3, 6, 9])
def test_wht_variance_equals_per_parity_autograd(d, loss):
    """Fast path (batched per-example gradients + in-place WHT) == one autograd call per parity, float64."""
    params = F.mlp_init(d, 10 * d, torch.Generator().manual_seed(10 + d))
    var, G2, grads = F.parity_gradient_variance(F.mlp_forward, params, d, loss)
    var_ref, G2_ref, grads_ref = F.parity_gradient_variance_reference(F.mlp_forward, params, d, loss)
    torch.testing.assert_close(grads, grads_ref, rtol=0, atol=1e-12)
    assert abs(var - var_ref) <= 1e-12 * max(1.0, var_ref)
    assert G2 == pytest.approx(G2_ref, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("loss", F.LOSSES)
def test_variance_bound_holds(seed, loss):
    """Theorem 1: Var <= G^2 / 2^d for square, hinge and logistic losses, also after random shifts."""
    d = 7
    params = F.mlp_init(d, 20, torch.Generator().manual_seed(seed))
    params = {k: v * (1 + seed) for k, v in params.items()}  # outputs large enough to leave the linear regime
    var, G2, _ = F.parity_gradient_variance(F.mlp_forward, params, d, loss)
    assert 0 <= var <= G2 / 2**d * (1 + 1e-12)


def test_square_loss_parseval_identity():
    """Square loss: Var = G^2/2^d - |mean|^2 exactly (parities are a basis)."""
    d = 6
    params = F.mlp_init(d, 12, torch.Generator().manual_seed(3))
    var, G2, grads = F.parity_gradient_variance(F.mlp_forward, params, d, "square")
    x = F.hypercube(d)
    g = F.per_example_gradients(F.mlp_forward, params, x)
    centred = grads - (F.mlp_forward(params, x)[:, None] * g).mean(0)  # -E[h g] for each parity
    mean_sq = float((centred.mean(0) ** 2).sum())
    assert var == pytest.approx(G2 / 2**d - mean_sq, rel=1e-10)


@pytest.mark.parametrize("scale", [1.0, 4.0])
@pytest.mark.parametrize("loss", F.LOSSES)
def test_parseval_terms_equal_the_wht_variance(loss, scale):
    """Var 2^d / G^2 = E||beta g||^2 / E||g||^2 - 2^-d beta(1)^2 ||g(1)||^2 / E||g||^2 (fp64)."""
    d = 7
    params = F.mlp_init(d, 30, torch.Generator().manual_seed(5))
    params = {k: v * scale for k, v in params.items()}  # scale 4: |p| leaves (-1, 1) somewhere
    var, G2, _ = F.parity_gradient_variance(F.mlp_forward, params, d, loss)
    beta_share, point_share, p_max = F.parity_variance_parseval(F.mlp_forward, params, d, loss, chunk=32)
    assert abs(var * 2**d / G2 - (beta_share - point_share)) <= 1e-12
    p = F.mlp_forward(params, F.hypercube(d))
    assert p_max == float(p.abs().max())
    if loss == "square" or (loss == "hinge" and p_max < 1):
        assert beta_share == pytest.approx(1.0, abs=1e-14)  # beta = -1 at every point
    if loss == "hinge" and scale == 4.0:
        assert p_max > 1 and beta_share < 1  # beta = -1/2 where |p| >= 1


def test_parseval_terms_can_fail_on_a_wrong_variance():
    """The exact check of the chapter rejects a variance that misses the single-point term."""
    d = 5
    params = F.mlp_init(d, 10, torch.Generator().manual_seed(0))
    var, G2, _ = F.parity_gradient_variance(F.mlp_forward, params, d, "hinge")
    beta_share, point_share, _ = F.parity_variance_parseval(F.mlp_forward, params, d, "hinge")
    wrong = G2 / 2**d * beta_share  # second moment instead of variance
    assert abs(wrong * 2**d / G2 - (beta_share - point_share)) > 1e-12
    assert abs(var * 2**d / G2 - (beta_share - point_share)) <= 1e-12


def test_sample_parity_labels_and_reproducible():
    v = F.subset_mask(0b1011, 5)
    x, y = F.sample_parity(64, v, torch.Generator().manual_seed(0))
    assert torch.equal(y, x[:, 0] * x[:, 1] * x[:, 3])
    x2, _ = F.sample_parity(64, v, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)


def test_ensemble_padding_is_exact():
    """A padded member of the batched ensemble trains exactly like the member alone."""
    g = torch.Generator().manual_seed(0)
    params = F.init_ensemble([3, 6], 10, g)
    assert params["W"][0, 30:].abs().sum() == 0 and params["W"][0, :, 3:].abs().sum() == 0
    x = torch.randn(2, 16, 6)
    x[0, :, 3:] = 0
    out = F.ensemble_forward(params, x)
    W, b, v, c = (params[k][0] for k in "Wbvc")
    alone = torch.relu(x[0, :, :3] @ W[:30, :3].T + b[:30]) @ v[:30] + c
    torch.testing.assert_close(out[0], alone)


def test_ensemble_stops_when_every_member_has_learned():
    """stop_at ends training at the first evaluation where all members reach it; same prefix."""
    args = ([4, 4], [2, 2], 3000, )
    kw = dict(lr=0.05, eval_every=50, n_eval=256)
    s_full, a_full, _, _ = F.train_parity_ensemble(*args, torch.Generator().manual_seed(3), **kw)
    s_stop, a_stop, _, _ = F.train_parity_ensemble(*args, torch.Generator().manual_seed(3), stop_at=0.99, **kw)
    last = len(s_stop) - 1
    assert bool((a_stop[-1] >= 0.99).all()) and not bool((a_stop[:-1] >= 0.99).all(1).any())
    assert int(s_stop[-1]) < 3000
    torch.testing.assert_close(a_stop, a_full[: last + 1])
    with pytest.raises(ValueError, match="stop_at"):
        F.train_parity_ensemble(*args, torch.Generator(), stop_at=1.5)


def test_bad_parameters_raise_before_work():
    with pytest.raises(ValueError, match="valid losses"):
        F.parity_gradient_variance(F.mlp_forward, F.mlp_init(3, 4), 3, loss="cross-entropy")
    with pytest.raises(ValueError, match="subset size"):
        F.random_subset(4, 5)
    with pytest.raises(ValueError, match="power-of-two"):
        F.fwht(torch.zeros(6, 2))
    with pytest.raises(ValueError, match="one subset size"):
        F.train_parity_ensemble([10, 30], [5], 10, torch.Generator())


def test_claim_can_fail_on_wrong_input():
    """The chapter's bound check fails for a family that is not orthogonal (one parity repeated)."""
    d = 5
    params = F.mlp_init(d, 10, torch.Generator().manual_seed(1))
    x = F.hypercube(d)
    g = F.per_example_gradients(F.mlp_forward, params, x)
    targets = torch.stack([x[:, 0]] * 16 + [-x[:, 0]] * 16)  # 32 targets, not orthogonal
    grads = -(targets @ g) / 2**d
    var = float(((grads - grads.mean(0)) ** 2).sum(1).mean())
    G2 = float((g**2).sum(1).mean())
    claims = nnapprox.Claims()
    assert not claims.check("Var <= G^2/|H|", value=var * 32 / G2, op="<=", threshold=1.0, kind="bound", source="Theorem 1",
                            no_foil="a proven bound")


@pytest.mark.parametrize("chunk", [1, 8, 64, 256])
def test_blocked_fast_path_equals_reference(chunk):
    """The transform split into per-block stages and the remaining stages gives the same gradients."""
    d = 8
    params = F.mlp_init(d, 3 * d, torch.Generator().manual_seed(chunk))
    var, G2, grads = F.parity_gradient_variance(F.mlp_forward, params, d, "logistic", chunk=chunk)
    var_ref, G2_ref, grads_ref = F.parity_gradient_variance_reference(F.mlp_forward, params, d, "logistic")
    torch.testing.assert_close(grads, grads_ref, rtol=0, atol=1e-12)
    assert abs(var - var_ref) <= 1e-12 * max(1.0, var_ref)
    assert G2 == pytest.approx(G2_ref, rel=1e-12)
    with pytest.raises(ValueError, match="chunk"):
        F.parity_gradient_variance(F.mlp_forward, params, d, "logistic", chunk=3)


@pytest.mark.parametrize("loss", F.LOSSES)
def test_family_variance_equals_the_wht_variance_for_all_parities(loss):
    """family_gradient_variance on the 2^d parities == the Walsh-Hadamard path (two implementations)."""
    d = 6
    params = F.mlp_init(d, 4 * d, torch.Generator().manual_seed(11))
    var, G2, _ = F.parity_gradient_variance(F.mlp_forward, params, d, loss)
    var_f, G2_f = F.family_gradient_variance(F.mlp_forward, params, F.hypercube(d), F.all_parities(d), loss)
    assert var_f == pytest.approx(var, rel=1e-10, abs=1e-15)
    assert G2_f == pytest.approx(G2, rel=1e-12)


def test_family_variance_of_a_pair_is_half_the_gradient_gap_squared():
    """For {h, -h} the variance is ||(grad F_h - grad F_-h) / 2||^2, from two autograd calls."""
    d = 5
    params = F.mlp_init(d, 12, torch.Generator().manual_seed(2))
    x = F.hypercube(d)
    h = torch.sign(x @ torch.randn(d, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
    var, _ = F.family_gradient_variance(F.mlp_forward, params, x, torch.stack([h, -h]), "hinge")
    leaves = {k: t.clone().requires_grad_(True) for k, t in params.items()}

    def grad(y):
        out = torch.autograd.grad(F.loss_fn(F.mlp_forward(leaves, x), y, "hinge").mean(), list(leaves.values()))
        return torch.cat([t.reshape(-1) for t in out])

    expected = float(((grad(h) - grad(-h)) / 2).pow(2).sum())
    assert var == pytest.approx(expected, rel=1e-10)


def test_family_variance_exceeds_the_bound_for_non_orthogonal_targets():
    """Half-spaces are not orthogonal: Var |H| / G^2 is not bounded by 1 (the chapter's foil can fail)."""
    d = 8
    params = F.mlp_init(d, 10 * d, torch.Generator().manual_seed(4))
    x = F.hypercube(d)
    V = torch.randn(64, d, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    var, G2 = F.family_gradient_variance(F.mlp_forward, params, x, torch.sign(x @ V.T).T, "hinge")
    var_par, G2_par, _ = F.parity_gradient_variance(F.mlp_forward, params, d, "hinge")
    assert var_par * 2**d / G2_par <= 1 + 1e-12 < var * 64 / G2


def test_family_variance_validates_before_work():
    params = F.mlp_init(3, 4, torch.Generator().manual_seed(0))
    x = F.hypercube(3)
    with pytest.raises(ValueError, match="valid losses"):
        F.family_gradient_variance(F.mlp_forward, params, x, F.all_parities(3), "l1")
    with pytest.raises(Exception):  # ValueError, or the shape checker's error under pytest
        F.family_gradient_variance(F.mlp_forward, params, x, F.all_parities(3)[:, :5], "square")
    with pytest.raises(ValueError, match="at least 2"):
        F.family_gradient_variance(F.mlp_forward, params, x, F.all_parities(3)[:1], "square")
    with pytest.raises(ValueError, match="-1, \\+1"):
        F.family_gradient_variance(F.mlp_forward, params, x, 0.5 * F.all_parities(3), "hinge")
    var, _ = F.family_gradient_variance(F.mlp_forward, params, x, 0.5 * F.all_parities(3), "square")
    assert var >= 0  # real-valued targets are fine for the square loss
