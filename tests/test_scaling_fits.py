"""Power-law fitting: recovers known exponents; bootstrap covers the truth; claims can fail."""

import numpy as np
import pytest

from nnapprox import Claims
from nnapprox.scaling import (
    bootstrap_fits, chinchilla_loss, chinchilla_starts, compute_optimal_exponents, fit_chinchilla, fit_kaplan,
    fit_loglog, fit_saturating_power_law, kaplan_loss, optimal_allocation, optimal_allocation_numeric,
    percentile_ci, sample_chinchilla_runs, saturating_power_law,
)

TRUTH = dict(E=1.82, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658)


def _chinchilla_data(rng, n=240, noise=0.0):
    C = 10 ** rng.uniform(18.5, 21.5, n)
    N = 10 ** rng.uniform(7.8, 10.2, n)
    D = C / (6 * N)
    return N, D, chinchilla_loss(N, D, **TRUTH) * np.exp(noise * rng.standard_normal(n))


def test_loglog_exact():
    x = np.logspace(0, 4, 20)
    f = fit_loglog(x, 2.5 * x**-0.37)
    assert f.slope == pytest.approx(-0.37, abs=1e-12)
    assert np.exp(f.intercept) == pytest.approx(2.5, rel=1e-12)
    assert f.r2 == pytest.approx(1.0)


def test_loglog_matches_scipy_linregress():
    """Slope, intercept, standard error and R² agree with an independent implementation."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = np.logspace(-0.5, 3.2, 9)
    y = 0.75 * x**0.87 * np.exp(0.1 * rng.standard_normal(9))
    f, ref = fit_loglog(x, y), scipy_stats.linregress(np.log(x), np.log(y))
    assert f.slope == pytest.approx(ref.slope, rel=1e-12)
    assert f.intercept == pytest.approx(ref.intercept, rel=1e-12)
    assert f.slope_se == pytest.approx(ref.stderr, rel=1e-10)
    assert f.r2 == pytest.approx(ref.rvalue**2, rel=1e-12)


def test_loglog_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        fit_loglog(np.array([1.0, 2.0, -3.0]), np.array([1.0, 2.0, 3.0]))


def test_saturating_recovers_noiseless():
    N = np.logspace(1, 6, 20)
    fit = fit_saturating_power_law(N, saturating_power_law(N, 1.7, 12.0, 0.45))
    assert fit["alpha"] == pytest.approx(0.45, abs=1e-4)
    assert fit["E"] == pytest.approx(1.7, rel=1e-4)
    assert fit["A"] == pytest.approx(12.0, rel=1e-3)


def test_chinchilla_recovers_noiseless():
    N, D, L = _chinchilla_data(np.random.default_rng(0))
    fit = fit_chinchilla(N, D, L)
    for k in ("E", "alpha", "beta"):
        assert fit[k] == pytest.approx(TRUTH[k], rel=1e-3), k
    assert fit["A"] == pytest.approx(TRUTH["A"], rel=2e-2)
    assert fit["B"] == pytest.approx(TRUTH["B"], rel=2e-2)


def test_screened_starts_match_all_starts():
    N, D, L = _chinchilla_data(np.random.default_rng(1), n=120, noise=0.01)
    a = fit_chinchilla(N, D, L, n_best=32)
    b = fit_chinchilla(N, D, L, starts=chinchilla_starts()[::3], n_best=None)
    assert a.objective <= b.objective * (1 + 1e-6)


def test_mean_huber_with_default_tolerance_stops_early():
    N, D, L = _chinchilla_data(np.random.default_rng(0), noise=0.01)
    good = fit_chinchilla(N, D, L)
    bad = fit_chinchilla(N, D, L, reduction="mean", tight=False)
    assert abs(bad["alpha"] - TRUTH["alpha"]) > 5 * abs(good["alpha"] - TRUTH["alpha"])


def test_runs_record_every_start_and_the_best():
    N, D, L = _chinchilla_data(np.random.default_rng(4), n=60, noise=0.01)
    fit = fit_chinchilla(N, D, L, n_best=6)
    runs = fit.runs
    assert runs.starts.shape == runs.theta.shape == (6, 5) and runs.n_iter.shape == runs.success.shape == (6,)
    assert fit.objective == runs.objective_sum.min() and np.array_equal(fit.theta, runs.theta[runs.objective_sum.argmin()])
    assert fit.n_converged == runs.success.sum()
    mean = fit_chinchilla(N, D, L, n_best=6, reduction="mean")
    np.testing.assert_array_equal(mean.runs.starts, runs.starts)  # screening does not depend on the scale
    assert mean.objective * len(L) == pytest.approx(mean.runs.objective_sum.min(), rel=1e-12)


def test_mean_huber_stops_early_start_by_start():
    """Same starts, same path, n-fold looser tests: the mean fit stops after fewer iterations and higher."""
    N, D, L = _chinchilla_data(np.random.default_rng(0), noise=0.01)
    good = fit_chinchilla(N, D, L)
    bad = fit_chinchilla(N, D, L, reduction="mean", tight=False)
    np.testing.assert_array_equal(good.runs.starts, bad.runs.starts)
    assert np.median(bad.runs.n_iter) < np.median(good.runs.n_iter)
    assert np.median(bad.runs.objective_sum - good.runs.objective_sum) > 2.220446049250313e-09


def test_kaplan_recovers_noiseless():
    rng = np.random.default_rng(2)
    N = 10 ** rng.uniform(5, 9, 60)
    D = 10 ** rng.uniform(7, 10, 60)
    true = dict(N_c=8.8e13, D_c=5.4e13, alpha_N=0.076, alpha_D=0.095)
    fit = fit_kaplan(N, D, kaplan_loss(N, D, **true))
    assert fit["alpha_N"] == pytest.approx(0.076, rel=1e-3)
    assert fit["alpha_D"] == pytest.approx(0.095, rel=1e-3)


def test_bad_reduction_raises():
    N, D, L = _chinchilla_data(np.random.default_rng(0), n=20)
    with pytest.raises(ValueError, match="valid reductions"):
        fit_chinchilla(N, D, L, reduction="median")


@pytest.mark.slow
def test_bootstrap_ci_covers_truth():
    rng = np.random.default_rng(3)
    N, D, L = _chinchilla_data(rng, noise=0.01)
    good = fit_chinchilla(N, D, L)
    starts = np.vstack([good.theta, chinchilla_starts()])
    draws = bootstrap_fits(lambda n, d, l: fit_chinchilla(n, d, l, starts=starts, n_best=4).params, (N, D, L), 60, rng)
    for k in ("E", "alpha", "beta"):
        lo, hi = percentile_ci(draws[k])
        assert lo <= TRUTH[k] <= hi, k


def test_bootstrap_mean_ci_covers_truth_fast():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, 200)
    draws = bootstrap_fits(lambda v: {"mean": v.mean()}, (x,), 400, rng)
    lo, hi = percentile_ci(draws["mean"])
    assert lo <= 1.0 <= hi
    assert hi - lo == pytest.approx(2 * 1.96 / np.sqrt(200), rel=0.25)


def test_compute_optimal_closed_form_matches_numeric():
    C = np.logspace(19, 25, 5)
    N1, D1 = optimal_allocation(C, TRUTH["A"], TRUTH["B"], TRUTH["alpha"], TRUTH["beta"])
    N2, D2 = optimal_allocation_numeric(C, TRUTH["A"], TRUTH["B"], TRUTH["alpha"], TRUTH["beta"])
    np.testing.assert_allclose(N1, N2, rtol=1e-4)
    np.testing.assert_allclose(6 * N1 * D1, C, rtol=1e-12)
    a, b = compute_optimal_exponents(TRUTH["alpha"], TRUTH["beta"])
    assert a + b == pytest.approx(1.0)
    slope = fit_loglog(C, N1).slope
    assert slope == pytest.approx(a, abs=1e-10)


def test_claim_style_check_can_fail():
    claims = Claims()
    x = np.logspace(1, 4, 10)
    wrong = fit_loglog(x, x**-0.9).slope  # deliberately the wrong exponent
    assert not claims.check("N-slope", value=wrong, op="in", threshold=(-0.53, -0.47), kind="empirical", basis="convention", source="test",
                            foil=("a flat curve", 0.0))


def test_sample_chinchilla_runs_noiseless_and_in_range():
    rng = np.random.default_rng(3)
    N, D, L = sample_chinchilla_runs(500, rng, **TRUTH, log10_C=(18.0, 22.0), log10_N=(7.0, 11.0), noise=0.0)
    assert N.shape == D.shape == L.shape == (500,)
    assert (np.log10(N) >= 7.0).all() and (np.log10(N) <= 11.0).all()
    C = 6 * N * D
    assert (np.log10(C) >= 18.0 - 1e-9).all() and (np.log10(C) <= 22.0 + 1e-9).all()
    np.testing.assert_allclose(L, chinchilla_loss(N, D, **TRUTH), rtol=1e-12)
    with pytest.raises(ValueError):
        sample_chinchilla_runs(10, rng, **TRUTH, noise=-0.1)
