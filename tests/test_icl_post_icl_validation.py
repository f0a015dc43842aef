"""Post-ICL validation (Bai et al., 2023, Section 4.1): the hand-built transformer equals the plain algorithm.

float64, explicit tolerances: ridge by gradient descent on the training split, validation
losses, and the selection rule (exactly the argmin when the margin exceeds gamma).
"""

import pytest
import torch

from nnapprox import icl
from nnapprox.icl import baselines as bl
from nnapprox.icl import post_icl_validation as pv

D64 = torch.float64


def _prompts(seed=0, batch=24, N=16, d=3, sigma=0.3):
    g = torch.Generator().manual_seed(seed)
    X, y, _ = icl.linear_tasks(batch, N + 1, d, g, sigma=sigma, w_scale=d**-0.5, dtype=D64)
    return X[:, :-1], y[:, :-1], X[:, -1]


def _run(X, y, xq, lams, eta, n_steps, n_train, gamma):
    d, N = X.shape[2], X.shape[1]
    H = pv.validation_embed(X, y, xq, n_train, len(lams))
    H = icl.transformer(H, pv.post_icl_validation_layers(d, lams, eta, n_steps, N, n_train, gamma))
    return pv.read_selection(H, d, len(lams))


@pytest.mark.parametrize("n_train,lams", [(10, [0.01, 0.1, 1.0]), (12, [0.0, 0.05]), (5, [0.3])])
def test_construction_equals_reference(n_train, lams):
    X, y, xq = _prompts()
    eta, n_steps, gamma = 0.4, 12, 1e-6
    tf = _run(X, y, xq, lams, eta, n_steps, n_train, gamma)
    ref = pv.post_icl_validation_reference(X, y, xq, lams, eta, n_steps, n_train)
    assert (tf["w"] - ref["w"]).abs().max() <= 1e-12
    assert (tf["f"] - ref["f"]).abs().max() <= 1e-12
    assert (tf["loss"] - ref["loss"]).abs().max() <= 1e-12
    alpha = pv.selection_weights(ref["loss"], gamma)
    assert (tf["alpha"] - alpha).abs().max() <= 1e-8  # u amplifies rounding of the losses by 1/gamma
    assert (tf["y_hat"] - (alpha * ref["f"]).sum(1)).abs().max() <= 1e-8
    clear = ref["margin"] > gamma
    assert clear.sum() >= len(X) - 1  # ties within 1e-6 are rare on continuous data
    assert (tf["y_hat"] - ref["prediction"])[clear].abs().max() <= 1e-12


def test_reference_is_ridge_on_the_training_split_and_argmin():
    X, y, xq = _prompts(seed=1, N=20)
    lams, n_train = [0.02, 0.2, 1.0], 14
    ref = pv.post_icl_validation_reference(X, y, xq, lams, 0.4, 1000, n_train)
    for k, lam in enumerate(lams):  # 1000 steps converge: the closed-form ridge on the first n_train examples
        torch.testing.assert_close(ref["w"][:, k], bl.ridge_weights(X[:, :n_train], y[:, :n_train], lam),
                                   atol=1e-10, rtol=0)
        val = (X[:, n_train:] @ ref["w"][:, k, :, None])[..., 0] - y[:, n_train:]
        torch.testing.assert_close(ref["loss"][:, k], val.pow(2).mean(1) / 2, atol=1e-14, rtol=0)
    best = torch.stack([ref["f"][b, ref["loss"][b].argmin()] for b in range(len(X))])
    torch.testing.assert_close(ref["prediction"], best, atol=0, rtol=0)


def test_selection_inside_and_outside_the_margin():
    """Losses written into the tokens directly: near-ties mix only near-best candidates, clear winners are exact."""
    d, K, N, n_train, gamma = 2, 4, 6, 4, 0.1
    loss = torch.tensor([[0.50, 0.20, 0.90, 0.60],    # clear winner (margin 0.3)
                         [0.32, 0.30, 0.31, 1.00],    # three within gamma of the best, the first not the best
                         [0.40, 0.40, 0.70, 0.45],    # an exact tie, and one at 0.05
                         [0.20, 0.25, 0.60, 0.28]], dtype=D64)
    f = torch.tensor([[1.0, -2.0, 3.0, 0.5]], dtype=D64).repeat(4, 1)
    g = torch.Generator().manual_seed(2)
    X = torch.randn(4, N, d, generator=g, dtype=D64)
    H = pv.validation_embed(X, torch.zeros(4, N, dtype=D64), torch.randn(4, d, generator=g, dtype=D64), n_train, K)
    s = pv.validation_layout(d, K)
    H[:, :, s["loss"]], H[:, :, s["f"]] = loss[:, None], f[:, None]
    out = pv.read_selection(icl.transformer(H, pv.selection_layers(d, K, N, n_train, gamma)), d, K)
    alpha = pv.selection_weights(loss, gamma)
    torch.testing.assert_close(out["alpha"], alpha, atol=1e-12, rtol=0)
    torch.testing.assert_close(out["y_hat"], (alpha * f).sum(1), atol=1e-12, rtol=0)
    assert (alpha >= 0).all() and torch.allclose(alpha.sum(1), torch.ones(4, dtype=D64), atol=1e-12)
    near = loss < loss.min(1, keepdim=True).values + gamma
    assert (alpha[~near] == 0).all()  # weight only on candidates within gamma of the best
    assert torch.equal(alpha[0], torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=D64))
    assert (alpha[1] > 0).sum() >= 2  # inside the margin the rule mixes


def test_a_wrong_split_is_detected():
    """The claim can fail: the reference run with another train/validation split disagrees."""
    X, y, xq = _prompts(seed=3)
    lams = [0.01, 0.3, 3.0]
    tf = _run(X, y, xq, lams, 0.4, 10, 10, 1e-6)
    wrong = pv.post_icl_validation_reference(X, y, xq, lams, 0.4, 10, 9)
    assert (tf["w"] - wrong["w"]).abs().max() > 1e-3


def test_bad_input_is_refused_before_work():
    X, y, xq = _prompts(batch=2)
    with pytest.raises(ValueError, match="n_train < N"):
        pv.validation_embed(X, y, xq, X.shape[1], 2)
    with pytest.raises(ValueError, match="n_train < N"):
        pv.post_icl_validation_reference(X, y, xq, [0.1], 0.3, 2, 0)
    with pytest.raises(ValueError, match="lambda >= 0"):
        pv.post_icl_validation_layers(3, [0.1, -1.0], 0.3, 2, 16, 8, 1e-3)
    with pytest.raises(ValueError, match="at least one penalty"):
        pv.parallel_ridge_layers(3, [], 0.3, 2, 16, 8)
    with pytest.raises(ValueError, match="gamma > 0"):
        pv.post_icl_validation_layers(3, [0.1], 0.3, 2, 16, 8, 0.0)
    with pytest.raises(ValueError, match="gamma > 0"):
        pv.selection_weights(torch.zeros(1, 2, dtype=D64), -1.0)
    with pytest.raises(ValueError, match="K >= 1"):
        pv.validation_layout(3, 0)
