"""Quanta model, teacher-student, corpus and the batched sweep."""

import numpy as np
import pytest
import torch

from nnapprox.scaling import (
    expected_loss_data_limited, fit_loglog, load_stdlib_corpus, loss_capacity_limited, loss_data_limited,
    quanta_probs, variance_loss_data_limited, random_features_curve, sample_positions, sweep_strategy, tanh_teacher, train_sweep, train_sweep_loop,
    variance_limited_curve,
)


def test_quanta_capacity_slope():
    N = np.unique(np.logspace(2, 5, 10).astype(int))
    for alpha in (0.5, 1.0):
        assert fit_loglog(N, loss_capacity_limited(alpha, N)).slope == pytest.approx(-alpha, abs=0.01)


def test_quanta_probs_sum_and_tail():
    p = quanta_probs(0.7, 1000)
    tail = loss_capacity_limited(0.7, np.array([1000]))[0]
    assert float(p.sum()) + tail == pytest.approx(1.0, abs=1e-12)


def test_quanta_data_limited_sample_matches_expectation():
    D = np.array([10_000, 100_000])
    g = torch.Generator().manual_seed(0)
    sampled = np.mean([loss_data_limited(1.0, D, g, n_quanta=100_000) for _ in range(5)], axis=0)
    np.testing.assert_allclose(sampled, expected_loss_data_limited(1.0, D, n_quanta=100_000), rtol=0.05)


def test_quanta_data_limited_variance_matches_samples():
    D = np.array([1_000, 30_000])
    g = torch.Generator().manual_seed(1)
    draws = np.array([loss_data_limited(0.5, D, g, tau=2, n_quanta=20_000) for _ in range(400)])
    var = variance_loss_data_limited(0.5, D, tau=2, n_quanta=20_000)
    # sample variance of 400 draws: relative se sqrt(2/399) ~ 0.07; 5 se
    np.testing.assert_allclose(draws.var(axis=0, ddof=1), var, rtol=0.35)
    with pytest.raises(ValueError, match="tau must be >= 1"):
        variance_loss_data_limited(0.5, D, tau=0)


def test_quanta_bad_alpha():
    with pytest.raises(ValueError, match="alpha must be > 0"):
        quanta_probs(0.0, 10)


def test_teacher_student_one_d_is_steep():
    g = torch.Generator().manual_seed(0)
    N = [20, 40, 80, 160]
    mse = random_features_curve(tanh_teacher(1, g), 1, N, g, n_train=2000, n_test=2000)
    assert -fit_loglog(np.array(N), mse).slope > 2.0  # theory: 4/d = 4


def test_teacher_student_curve_shares_one_gram_matrix_but_fits_each_size_on_its_own():
    from nnapprox.scaling import teacher_student as ts

    teacher, N, d = tanh_teacher(2, torch.Generator().manual_seed(1)), [5, 12, 30], 2
    mse = random_features_curve(teacher, d, N, torch.Generator().manual_seed(2), n_train=400, n_test=300)
    g = torch.Generator().manual_seed(2)  # the same draws, in the function's order
    x = 2 * torch.rand(400, d, generator=g, dtype=torch.float64) - 1
    x_test = 2 * torch.rand(300, d, generator=g, dtype=torch.float64) - 1
    v = torch.randn(max(N), d, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    a = (2 * torch.rand(max(N), generator=g, dtype=torch.float64) - 1) * d**0.5
    y, y_test = teacher(x), teacher(x_test)
    for n_feat, got in zip(N, mse):  # each size from its own features and its own Gram matrix
        coef = ts._least_squares(ts._features(x, v[:n_feat], a[:n_feat]), y, 1e-12)
        want = float(((ts._features(x_test, v[:n_feat], a[:n_feat]) @ coef - y_test) ** 2).mean())
        assert got == pytest.approx(want, rel=1e-6)


def test_variance_limited_excess_positive_and_decreasing():
    g = torch.Generator().manual_seed(0)
    ex = variance_limited_curve(tanh_teacher(2, g), 2, 10, [200, 2000, 20000], g, n_test=5000)
    assert (ex > 0).all() and ex[0] > ex[-1]


def test_corpus_holds_out_every_tenth_file():
    c = load_stdlib_corpus()
    assert c.n_test_files == c.n_files // 10
    assert len(c.file_list_sha256) == 64 and len(c.train) > 10 * len(c.test) / 2


def test_batched_sweep_equals_loop_fp64():
    c = load_stdlib_corpus()
    kw = dict(n_steps=12, batch=8, eval_every=4, n_eval=64, dtype=torch.float64)
    widths, D = [4, 8, 6], [1000, 5000, 2000]
    a = train_sweep(c.train, c.test, widths, D, torch.Generator().manual_seed(0), **kw)
    b = train_sweep_loop(c.train, c.test, widths, D, torch.Generator().manual_seed(0), **kw)
    torch.testing.assert_close(a["curves"], b["curves"], rtol=0, atol=1e-12)
    assert torch.equal(a["N"], b["N"])
    chunked = train_sweep(c.train, c.test, widths, D, torch.Generator().manual_seed(0), eval_chunk=10, **kw)
    torch.testing.assert_close(chunked["curves"], a["curves"], rtol=0, atol=1e-12)  # 64 contexts in chunks of 10


@pytest.mark.parametrize("strategy", ["batched", "by_width", "auto"])
def test_every_strategy_equals_loop_fp64(strategy):
    """Each grouping of the models computes the same training: float64 curves agree to 1e-12.

    Repeated widths (two models of width 4) make ``by_width`` stack models; the widths are
    not sorted, so the groups' results must be scattered back to the right columns.
    """
    c = load_stdlib_corpus()
    kw = dict(n_steps=12, batch=8, eval_every=4, n_eval=64, dtype=torch.float64)
    widths, D = [4, 8, 6, 4], [1000, 5000, 2000, 3000]
    a = train_sweep(c.train, c.test, widths, D, torch.Generator().manual_seed(1), strategy=strategy, eval_chunk=24, **kw)
    b = train_sweep_loop(c.train, c.test, widths, D, torch.Generator().manual_seed(1), **kw)
    torch.testing.assert_close(a["curves"], b["curves"], rtol=0, atol=1e-12)
    assert torch.equal(a["best"], a["curves"].min(dim=0).values) and torch.equal(a["final"], a["curves"][-1])


def test_strategies_agree_float32():
    """In float32 (the chapter's dtype) the strategies differ by rounding only.

    Tolerance 1e-5 nats: about 20 float32 spacings at the loss's size (2^-21 = 4.8e-7 between
    4 and 8 nats), for summation orders that differ between one padded model, stacks per
    width and single models. A difference in what is computed (another batch, another
    initialisation, a skipped update) moves the test loss by 1e-3 nats or more after 40 steps.
    """
    c = load_stdlib_corpus()
    kw = dict(n_steps=40, batch=32, eval_every=20, n_eval=512)
    widths, D = [8, 32, 8, 16, 32], [2000, 4000, 8000, 2000, 9000]
    out = {s: train_sweep(c.train, c.test, widths, D, torch.Generator().manual_seed(2), strategy=s, **kw)
           for s in ("batched", "by_width")}
    loop = train_sweep_loop(c.train, c.test, widths, D, torch.Generator().manual_seed(2), **kw)
    for s, o in out.items():
        torch.testing.assert_close(o["curves"], loop["curves"], rtol=0, atol=1e-5, msg=s)


def test_sweep_strategy_rule():
    """``auto`` is decided by the device type alone: by width on a CPU, one padded model elsewhere."""
    assert sweep_strategy("cpu") == "by_width" and sweep_strategy(torch.device("cpu")) == "by_width"
    assert sweep_strategy("cuda") == "batched" and sweep_strategy("cuda:1") == "batched"
    assert sweep_strategy("mps") == "batched"


def test_sweep_rejects_bad_strategy_and_too_few_steps():
    c = load_stdlib_corpus()
    with pytest.raises(ValueError, match="valid strategies are"):
        train_sweep(c.train, c.test, [4], [1000], torch.Generator().manual_seed(0), n_steps=4, eval_every=2,
                    strategy="fastest")
    with pytest.raises(ValueError, match="must be >= eval_every"):
        train_sweep(c.train, c.test, [4], [1000], torch.Generator().manual_seed(0), n_steps=4, eval_every=8)


def test_sweep_rejects_mismatched_sizes():
    c = load_stdlib_corpus()
    with pytest.raises(ValueError, match="one data size per model"):
        train_sweep(c.train, c.test, [4, 8], [1000], torch.Generator().manual_seed(0), n_steps=2)


def test_sample_positions_common_random_numbers():
    pos = sample_positions([100, 100, 1000], n_steps=7, batch=5, context=8, generator=torch.Generator().manual_seed(0))
    assert pos.shape == (7, 3, 5)
    assert torch.equal(pos[:, 0], pos[:, 1])  # same D: same batches
    assert (pos[:, :2] < 92).all() and (pos[:, 2] < 992).all() and (pos >= 0).all()


@pytest.mark.parametrize("strategy", ["batched", "by_width"])
def test_returned_params_reproduce_the_final_test_loss(strategy):
    """``return_params=True`` returns the trained weights: they give the recorded final test loss."""
    from nnapprox import rng
    from nnapprox.scaling import init_sweep, make_contexts, sweep_logits
    c = load_stdlib_corpus()
    kw = dict(n_steps=8, batch=8, eval_every=4, n_eval=64, dtype=torch.float64)
    widths, D = [4, 8, 4], [1000, 5000, 2000]
    out = train_sweep(c.train, c.test, widths, D, torch.Generator().manual_seed(3), strategy=strategy,
                      return_params=True, **kw)
    g = torch.Generator().manual_seed(3)  # replay the draws that precede the test positions
    init_sweep(widths, 8, 16, g, torch.float64)
    sample_positions(D, 8, 8, 8, g)
    x, y = make_contexts(c.test, rng.randint(0, len(c.test) - 8, (64,), generator=g), 8)
    logits = sweep_logits(out["params"], out["mask"], x.unsqueeze(0).expand(len(widths), -1, -1))
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), y.repeat(len(widths)),
                                           reduction="none").view(len(widths), -1).mean(dim=1)
    torch.testing.assert_close(ce, out["final"], rtol=0, atol=1e-12)
    assert "params" not in train_sweep(c.train, c.test, [4], [1000], torch.Generator().manual_seed(0), **kw)
