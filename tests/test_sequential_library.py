import itertools
import math

import numpy as np
import pytest
import torch

import nnapprox.sequential as Q


def test_kt_sequential_equals_closed_form():
    rng = np.random.default_rng(1)
    for n in (1, 5, 40):
        x = rng.integers(0, 2, n)
        assert Q.kt_losses(x).sum() == pytest.approx(-Q.kt_log2_prob(n - x.sum(), x.sum()), abs=1e-9)


def test_kt_redundancy_bound_all_sequences():
    n = 10
    for x in itertools.product((0, 1), repeat=n):
        x = np.array(x)
        red = Q.kt_losses(x).sum() - Q.ml_loss(n - x.sum(), x.sum())
        assert red <= 0.5 * np.log2(n) + 1 + 1e-12


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_ctw_equals_mixture(depth):
    rng = np.random.default_rng(depth)
    x = rng.integers(0, 2, 14)
    assert Q.ctw_losses(x, depth).sum() == pytest.approx(-Q.ctw_mixture_brute_force(x, depth), abs=1e-9)


def test_tree_count_and_prior_sums_to_one():
    for D, count in [(0, 1), (1, 2), (2, 5), (3, 26)]:
        trees = Q.tree_sources(D)
        assert len(trees) == count
        assert sum(2.0 ** -Q.tree_cost(s, D) for s in trees) == pytest.approx(1.0)


def test_ctw_bound_and_markov_kt_bound():
    rng = np.random.default_rng(3)
    th = Q.random_markov(2, rng)
    x = Q.sample_markov(th, 3000, rng)
    D = 3
    leaves = [tuple(int(b) for b in s) for s in itertools.product((0, 1), repeat=2)]
    cnt = Q.leaf_counts(x, leaves, D)
    ml = Q.ml_loss(cnt[:, 0], cnt[:, 1]).sum()
    n = x.size - D
    assert Q.ctw_losses(x, D).sum() <= ml + Q.tree_cost(leaves, D) + 4 * Q.gamma_fn(n / 4) + 1e-9
    assert Q.markov_kt_losses(x, 2).sum() - Q.best_markov_loss(x, 2) <= 4 * Q.gamma_fn((x.size - 2) / 4)


def test_entropy_rate_matches_long_run():
    rng = np.random.default_rng(4)
    th = Q.random_markov(2, rng)
    x = Q.sample_markov(th, 200_000, rng)
    assert Q.true_losses(x, th).mean() == pytest.approx(Q.entropy_rate(th), abs=0.01)


def test_lz78_is_a_probability():
    # the losses of all 2^n continuations define a distribution: sum 2^-loss = 1
    n = 8
    tot = sum(2.0 ** -Q.lz78_losses(np.array(x)).sum() for x in itertools.product((0, 1), repeat=n))
    assert tot == pytest.approx(1.0)


def test_bad_inputs():
    with pytest.raises(ValueError):
        Q.kt_losses([0, 2])
    with pytest.raises(ValueError):
        Q.CTW(-1)
    with pytest.raises(ValueError):
        Q.make_problem(0, 1, 1, 1, 0.1, torch.Generator())


def test_linucb_vectorised_equals_loop():
    g = torch.Generator().manual_seed(0)
    p = Q.make_problem(3, 25, 4, 3, 0.2, g)
    p.actions *= 0.5 + 0.5 * torch.rand(25, 3, 4, 1, generator=g, dtype=torch.float64)
    assert torch.allclose(Q.linucb(p)["regret"], Q.linucb_loop(p), atol=1e-10)


def test_linucb_ellipsoid_and_ridge():
    from nnapprox.icl.baselines import ridge_weights
    g = torch.Generator().manual_seed(1)
    p = Q.make_problem(8, 60, 5, 3, 0.2, g)
    r = Q.linucb(p, lam=1.0, delta=0.01)
    assert bool((r["err"] <= r["radius"]).all())
    th_hat = torch.linalg.solve(r["V"], r["b"])
    assert torch.isfinite(th_hat).all()


def test_linucb_width_optimism_and_elliptical_potential():
    g = torch.Generator().manual_seed(3)
    lam = 1.0
    p = Q.make_problem(6, 40, 4, 3, 0.2, g)
    r = Q.linucb(p, lam=lam, delta=0.01)
    for i in range(6):  # ||x_t||_{V_t^-1} of the played action, by a loop over rounds
        V = lam * torch.eye(3, dtype=torch.float64)
        for t in range(40):
            x = r["X"][i, t]
            assert math.isclose(float(r["width"][t, i]), float(x @ torch.linalg.solve(V, x)) ** 0.5,
                                rel_tol=1e-12)
            V = V + torch.outer(x, x)
    # on the ellipsoid's event, optimism gives r_t <= 2 beta_t ||x_t||_{V_t^-1} (and r_t <= 2)
    assert bool((r["err"] <= r["radius"]).all())
    assert bool((r["regret"] <= torch.clamp(2 * r["radius"] * r["width"], max=2) + 1e-12).all())
    # elliptical potential (Abbasi-Yadkori et al. 2011, Lemma 11)
    pot = torch.clamp(r["width"] ** 2, max=1).sum(0)
    logdet = torch.logdet(r["V"]) - 3 * math.log(lam)
    assert bool((pot <= 2 * logdet).all())
    # a wrong radius (a tenth) breaks the optimism inequality on some round
    assert bool((r["regret"] > 0.2 * r["radius"] * r["width"] + 1e-12).any())


def test_thompson_runs_and_learns():
    g = torch.Generator().manual_seed(2)
    p = Q.make_problem(16, 150, 5, 3, 0.2, g)
    reg = Q.thompson(p, g)["regret"]
    assert reg[-50:].mean() < reg[:50].mean()


def _kt_loop(train, test, k, first):  # dictionary counts, one test byte at a time
    counts, tot = {}, {}
    for t in range(k, len(train)):
        c = tuple(train[t - k:t])
        counts[c, train[t]] = counts.get((c, train[t]), 0) + 1
        tot[c] = tot.get(c, 0) + 1
    out = []
    for t in range(first, len(test)):
        c = tuple(test[t - k:t])
        out.append(-math.log((counts.get((c, test[t]), 0) + 0.5) / (tot.get(c, 0) + 128)))
    return np.array(out)


def test_frozen_byte_kt_matches_a_dictionary_loop():
    from nnapprox.sequential import byte_counts as B
    r = np.random.default_rng(0)
    train = r.integers(0, 6, 500) * 40  # few distinct bytes, so contexts repeat
    test = r.integers(0, 7, 200) * 40
    for k in (0, 1, 2, 3):
        assert np.allclose(B.kt_byte_losses(train, test, k, 3), _kt_loop(train, test, k, 3), atol=1e-12)


def test_byte_kt_evidence_is_the_sequential_code_length():
    from nnapprox.sequential import byte_counts as B
    r = np.random.default_rng(1)
    x = r.integers(0, 4, 300) * 60 + 3
    for k in (0, 1, 2):
        first = 2
        counts, tot, total = {}, {}, 0.0
        for t in range(first, len(x)):
            c = tuple(x[t - k:t])
            total += math.log((counts.get((c, x[t]), 0) + 0.5) / (tot.get(c, 0) + 128))
            counts[c, x[t]] = counts.get((c, x[t]), 0) + 1
            tot[c] = tot.get(c, 0) + 1
        assert abs(B.kt_log_evidence(x, k, first) - total) < 1e-8


def test_order_mixture_weights_and_bad_input():
    from nnapprox.sequential import byte_counts as B
    r = np.random.default_rng(2)
    x = np.zeros(2000, dtype=np.int64)  # an order-1 source: the next byte is a function of the last
    x[0] = 1
    for t in range(1, 2000):
        x[t] = (x[t - 1] * 7 + 3) % 11 if r.random() > 0.05 else r.integers(0, 11)
    loss, w = B.order_mixture_losses(x[:1500], x[1500:], [0, 1, 2], 2)
    assert w.shape == (3,) and abs(w.sum() - 1) < 1e-12 and w.argmax() == 1
    assert loss.shape == (498,)
    with pytest.raises(ValueError, match="bytes"):
        B.kt_byte_losses(np.array([0, 300]), x, 1, 1)
    with pytest.raises(ValueError, match="first >= k"):
        B.kt_byte_losses(x, x, 3, 1)


def test_clustered_se_equals_the_iid_formula_for_singletons_and_rejects_one_cluster():
    from nnapprox.sequential import byte_counts as B
    r = np.random.default_rng(3)
    d = r.normal(size=50)
    m, se = B.clustered_mean_se(d, np.arange(50))  # one observation per cluster: s / sqrt(n)
    assert abs(m - d.mean()) < 1e-14 and abs(se - d.std(ddof=1) / np.sqrt(50)) < 1e-12
    # identical values inside a cluster: the cluster means' standard error
    g = np.repeat(np.arange(10), 7)
    v = np.repeat(r.normal(size=10), 7)
    m, se = B.clustered_mean_se(v, g)
    assert abs(se - v[::7].std(ddof=1) / np.sqrt(10)) < 1e-12
    with pytest.raises(ValueError, match="2 clusters"):
        B.clustered_mean_se(d, np.zeros(50))
