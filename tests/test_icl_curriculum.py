"""Garg et al.'s curriculum: the schedule, the reduced-dimension sampler, and train_icl passing it on."""

import math

import pytest
import torch

from nnapprox import icl


def test_curriculum_schedule_grows_to_full_size():
    c = icl.Curriculum(d=5, N=11, d_start=2, N_start=5, every=10)
    assert c(0) == {"d_eff": 2, "N": 5}
    assert c(9) == {"d_eff": 2, "N": 5}
    assert c(10) == {"d_eff": 3, "N": 7}
    assert c(30) == {"d_eff": 5, "N": 11}
    assert c(10_000) == {"d_eff": 5, "N": 11}
    assert c.n_stages == 3
    with pytest.raises(ValueError):
        icl.Curriculum(d=5, N=11, d_start=6, N_start=5, every=10)


def test_d_eff_zeroes_trailing_coordinates_and_keeps_the_task_linear():
    g = torch.Generator().manual_seed(0)
    X, y, w = icl.linear_tasks(64, 7, 5, g, d_eff=2, dtype=torch.float64)
    assert (X[..., 2:] == 0).all() and (X[..., :2] != 0).all()
    torch.testing.assert_close(y, torch.einsum("bnd,bd->bn", X[..., :2], w[:, :2]), rtol=0, atol=1e-12)
    # d_eff = d (or None) draws exactly the same prompts
    a = icl.linear_tasks(4, 3, 5, torch.Generator().manual_seed(1))
    b = icl.linear_tasks(4, 3, 5, torch.Generator().manual_seed(1), d_eff=5)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    with pytest.raises(ValueError, match="d_eff"):
        icl.linear_tasks(2, 2, 3, g, d_eff=4)


def test_train_icl_passes_the_curriculum_to_the_sampler():
    seen = []

    def sample(batch, g, d_eff, N):
        seen.append((d_eff, N))
        return icl.linear_tasks(batch, N, 3, g, d_eff=d_eff)[:2]

    model = icl.GPT(icl.GPTConfig(d=3, n_layer=1, n_embd=8, n_head=2, n_positions=14))
    icl.train_icl(model, sample, n_steps=6, batch=4, lr=1e-3, generator=torch.Generator().manual_seed(0),
                  curriculum=icl.Curriculum(d=3, N=7, d_start=1, N_start=3, every=2))
    assert seen == [(1, 3), (1, 3), (2, 5), (2, 5), (3, 7), (3, 7)]


def test_train_icl_weights_the_loss_per_prompt():
    """A third tensor from the sampler weights each prompt's loss: weight c scales the first loss by c."""
    def run(weight):
        def sample(batch, g):
            X, y = icl.linear_tasks(batch, 6, 3, g)[:2]
            return (X, y) if weight is None else (X, y, torch.full((batch,), weight))
        torch.manual_seed(0)
        model = icl.GPT(icl.GPTConfig(d=3, n_layer=1, n_embd=8, n_head=2, n_positions=12))
        return icl.train_icl(model, sample, n_steps=1, batch=16, lr=1e-3, generator=torch.Generator().manual_seed(1))[0]

    plain = run(None)
    assert run(1.0) == pytest.approx(plain, rel=1e-6)
    assert run(3.0) == pytest.approx(3 * plain, rel=1e-6)
    model = icl.GPT(icl.GPTConfig(d=3, n_layer=1, n_embd=8, n_head=2, n_positions=12))
    with pytest.raises(ValueError, match=r"\(X, y, weight\)"):  # linear_tasks' (X, y, w) unsliced: w is not a weight
        icl.train_icl(model, lambda b, g: icl.linear_tasks(b, 6, 3, g), n_steps=1, batch=16, lr=1e-3,
                      generator=torch.Generator())


def test_train_icl_skips_a_nonfinite_step_only_when_asked():
    """One prompt with an overflowing input: skip_nonfinite leaves the weights as they were, and the
    next finite step trains them; without it the weights become NaN. Both curves keep the inf loss."""
    def sample(batch, g):
        X, y = icl.linear_tasks(batch, 6, 3, g)[:2]
        if sample.calls == 1:  # the second step sees one prompt whose x overflows float32 in the loss
            X = X.clone()
            X[0, 0, 0] = 1e30
        sample.calls += 1
        return X, y

    for skip in (True, False):
        sample.calls = 0
        torch.manual_seed(0)
        model = icl.GPT(icl.GPTConfig(d=3, n_layer=1, n_embd=8, n_head=2, n_positions=12))
        snapshots = []

        def sample_and_snapshot(batch, g, _model=model):
            snapshots.append(torch.cat([p.detach().flatten() for p in _model.parameters()]).clone())
            return sample(batch, g)

        losses = icl.train_icl(model, sample_and_snapshot, n_steps=3, batch=8, lr=1e-2, clip=1.0, skip_nonfinite=skip,
                               generator=torch.Generator().manual_seed(2))
        after = torch.cat([p.detach().flatten() for p in model.parameters()])
        assert math.isfinite(losses[0]) and not math.isfinite(losses[1]) and math.isfinite(losses[2]) == skip
        if skip:
            assert torch.equal(snapshots[2], snapshots[1])  # step 1 (non-finite) changed nothing
            assert torch.isfinite(after).all() and not torch.equal(after, snapshots[2])  # step 2 trained
        else:
            assert torch.isnan(snapshots[2]).any()
