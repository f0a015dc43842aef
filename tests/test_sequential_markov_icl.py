"""Random Markov chains in context: sampler, Bayes and unigram predictors, the token GPT."""

import math

import pytest
import torch

from nnapprox import sequential as Q

D64 = torch.float64


def test_chains_are_stochastic_and_rows_uniform_on_the_simplex():
    P = Q.dirichlet_chains(20_000, 3, torch.Generator().manual_seed(0))
    assert torch.allclose(P.sum(-1), torch.ones(20_000, 3), atol=1e-6) and (P > 0).all()
    # Dirichlet(1,1,1): E p_j = 1/3, Var p_j = (1/3)(2/3)/4 = 1/18
    p = P[:, 0, 0].double()
    assert abs(float(p.mean()) - 1 / 3) < 5 * math.sqrt(1 / 18 / 20_000)
    assert abs(float(p.var()) - 1 / 18) < 0.003


def test_sampled_transitions_follow_the_matrix():
    g = torch.Generator().manual_seed(1)
    P = Q.dirichlet_chains(1, 3, g).expand(4000, 3, 3)
    x = Q.sample_chains(P, 40, g)
    counts = torch.zeros(3, 3)
    counts.index_put_((x[:, :-1].reshape(-1), x[:, 1:].reshape(-1)), torch.ones(4000 * 39), accumulate=True)
    freq = counts / counts.sum(1, keepdim=True)
    assert torch.allclose(freq, P[0], atol=0.02)
    assert torch.allclose(torch.bincount(x[:, 0], minlength=3) / 4000., torch.full((3,), 1 / 3), atol=0.03)


def _bayes_loop(x, S):  # the posterior predictive written out, one sequence and position at a time
    B, T = x.shape
    out = torch.empty(B, T, S, dtype=D64)
    for b in range(B):
        n = torch.zeros(S, S, dtype=D64)
        out[b, 0] = 1.0 / S
        for t in range(1, T):
            if t >= 2:
                n[x[b, t - 2], x[b, t - 1]] += 1
            row = n[x[b, t - 1]]
            out[b, t] = (row + 1) / (row.sum() + S)
    return out


def test_bayes_predictor_matches_the_counting_loop_and_unigram_its_own():
    g = torch.Generator().manual_seed(2)
    x = Q.sample_chains(Q.dirichlet_chains(6, 4, g), 30, g)
    assert torch.allclose(Q.bigram_bayes_probs(x, 4), _bayes_loop(x, 4), atol=1e-12, rtol=0)
    u = Q.unigram_probs(x, 4)
    m = torch.stack([torch.bincount(x[0, :t], minlength=4) for t in range(30)]).double()
    assert torch.allclose(u[0], (m + 1) / (torch.arange(30)[:, None] + 4), atol=1e-12, rtol=0)


def test_bayes_predictor_beats_unigram_on_the_prior():
    # averaged over the prior, E[-log p_Bayes] <= E[-log p_unigram] (Bayes is optimal)
    g = torch.Generator().manual_seed(3)
    x = Q.sample_chains(Q.dirichlet_chains(4000, 3, g), 200, g)
    lb = Q.log_loss(Q.bigram_bayes_probs(x, 3), x)
    lu = Q.log_loss(Q.unigram_probs(x, 3), x)
    diff = (lu - lb).mean(1)
    assert float(diff.mean()) > 5 * float(diff.std()) / math.sqrt(4000)


def test_expected_row_entropy_is_the_harmonic_number_minus_one():
    P = Q.dirichlet_chains(50_000, 3, torch.Generator().manual_seed(4)).double()
    H = -(P[:, 0] * P[:, 0].log()).sum(-1)  # entropy of one row per chain
    se = float(H.std()) / math.sqrt(H.numel())
    assert abs(float(H.mean()) - Q.expected_row_entropy(3)) < 5 * se
    assert Q.expected_row_entropy(2) == pytest.approx(0.5)


def test_token_gpt_shapes_and_causality():
    torch.manual_seed(0)
    m = Q.TokenGPT(S=3, n_layer=2, n_embd=16, n_head=2, T=12)
    x = torch.randint(0, 3, (5, 12))
    p = m.probs(x)
    assert p.shape == (5, 12, 3) and torch.allclose(p.sum(-1), torch.ones(5, 12, dtype=D64))
    y = x.clone()
    y[:, 7:] = (y[:, 7:] + 1) % 3  # changing symbols from position 7 on leaves rows 0..7 unchanged
    assert torch.allclose(m.probs(y)[:, :8], p[:, :8], atol=1e-6)
    with pytest.raises(ValueError, match="longer than T"):
        m(torch.zeros(1, 13, dtype=torch.long))


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="S >= 2"):
        Q.dirichlet_chains(3, 1, torch.Generator())
    with pytest.raises(ValueError, match="S >= 2"):
        Q.TokenGPT(S=1)
    with pytest.raises(ValueError, match="T >= 1"):
        Q.sample_chains(torch.full((1, 2, 2), 0.5), 0, torch.Generator())


@pytest.mark.slow
def test_training_lowers_the_loss():
    spec = Q.CHECKPOINTS["sequential_markov"]
    s = {**spec.settings, "steps": 300, "warmup": 30, "T": 32}
    torch.manual_seed(0)
    m = Q.TokenGPT(**{**spec.config, "T": 32})
    losses = Q.train_token_gpt(m, s, torch.Generator().manual_seed(0))
    q = len(losses) // 4
    assert sum(losses[-q:]) / q < 0.95 * sum(losses[:q]) / q


def test_forward_with_attention_matches_the_model_and_knocks_heads_out():
    torch.manual_seed(0)
    model = Q.TokenGPT(S=3, n_layer=2, n_embd=16, n_head=4, T=12).double()
    x = torch.randint(0, 3, (5, 12), generator=torch.Generator().manual_seed(2))
    logits, A = Q.forward_with_attention(model, x)
    assert torch.allclose(logits, model(x), atol=1e-12)
    assert A.shape == (2, 5, 4, 12, 12)
    assert torch.allclose(A.sum(-1), torch.ones(2, 5, 4, 12, dtype=D64), atol=1e-12)
    assert (A.triu(1) == 0).all()  # causal
    # a knocked-out head: the same as zeroing its columns of the output projection
    ko, _ = Q.forward_with_attention(model, x, [(1, 2), (0, 0)])
    edited = Q.TokenGPT(S=3, n_layer=2, n_embd=16, n_head=4, T=12).double()
    edited.load_state_dict(model.state_dict())
    with torch.no_grad():
        edited.blocks[1].W_O.weight[:, 8:12] = 0.0
        edited.blocks[0].W_O.weight[:, 0:4] = 0.0
    assert torch.allclose(ko, edited(x), atol=1e-12)
    assert not torch.allclose(ko, logits)
    with pytest.raises(ValueError, match="ablate"):
        Q.forward_with_attention(model, x, [(2, 0)])


def test_induction_targets_by_hand():
    x = torch.tensor([[0, 1, 0, 1, 2, 0]])
    prev, succ, same = Q.induction_targets(x)
    assert same[0, 5].tolist() == [1, 0, 1, 0, 0, 1] and same[0, 1].tolist() == [0, 1, 0, 0, 0, 0]
    assert prev[0, 3].tolist() == [0, 0, 1, 0, 0, 0] and prev[0, 0].sum() == 0
    # t = 5 (x_t = 0): earlier 0s at positions 0 and 2, so successors s = 1, 3
    assert succ[0, 5].tolist() == [0, 1, 0, 1, 0, 0]
    # t = 3 (x_t = 1): the 1 at position 1 is followed by s = 2; s = 4 lies beyond t
    assert succ[0, 3].tolist() == [0, 0, 1, 0, 0, 0]
    assert succ[0, 0].sum() == 0
