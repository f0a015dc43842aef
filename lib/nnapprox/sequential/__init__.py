"""Universal prediction and decision making in context (chapter ``sequential``)."""
from nnapprox.sequential.bandits import (  # noqa: F401
    Problem, beta, linucb, linucb_loop, make_problem, regret_bound, thompson,
)
from nnapprox.sequential.byte_counts import (  # noqa: F401
    byte_contexts, clustered_mean_se, kt_byte_losses, kt_byte_probs, kt_log_evidence,
    order_mixture_losses,
)
from nnapprox.sequential.prediction import (  # noqa: F401
    CTW, best_markov_loss, ctw_losses, ctw_mixture_brute_force, entropy_rate, gamma_fn,
    kt_log2_prob, kt_losses, leaf_counts, lz78_losses, markov_kt_losses, ml_loss, random_markov,
    sample_markov, stationary, tree_cost, tree_sources, true_losses,
)

from nnapprox.sequential.markov_icl import (  # noqa: F401
    TokenGPT, bigram_bayes_probs, dirichlet_chains, expected_row_entropy, forward_with_attention,
    induction_targets, log_loss, sample_chains, train_token_gpt, unigram_probs,
)
from nnapprox.sequential.bandit_icl import (  # noqa: F401
    BanditGPT, attention_mask, decision_transformer_play, imitation_data, loglog_slope,
    train_bandit_gpt,
)
from nnapprox.sequential.linucb_construction import (  # noqa: F401
    gd_reference, linucb_embed, linucb_layers, linucb_layout, linucb_tf, score_error_bound,
    score_layer, sqrt_interpolant, sqrt_interpolant_eval, sqrt_interpolation_bound,
)
from nnapprox.checkpoints import Spec

#: Full-profile settings of the trained models (the committed checkpoints were trained with them).
SETTINGS = {
    "sequential_markov": dict(S=3, T=64, steps=6_000, batch=64, lr=1e-3, warmup=300, decay=True),
    "sequential_linucb": dict(d=3, K=4, T=32, sigma=0.3, lam=1.0, delta=0.01, steps=2_500, batch=32,
                              lr=1e-3, warmup=200, decay=True),
}
MARKOV_CONFIG = dict(S=3, n_layer=2, n_embd=64, n_head=4, T=64)
LINUCB_CONFIG = dict(d=3, n_layer=3, n_embd=64, n_head=4)

#: Registered with :mod:`nnapprox.checkpoints`.
CHECKPOINTS = {
    "sequential_markov": Spec("sequential", TokenGPT, MARKOV_CONFIG, train_token_gpt,
                              SETTINGS["sequential_markov"], seed=0),
    "sequential_linucb": Spec("sequential", BanditGPT, LINUCB_CONFIG, train_bandit_gpt,
                              SETTINGS["sequential_linucb"], seed=0),
}

PROFILES = dict(
    quick=dict(n_lengths=[1024, 4096, 16384], n_sources=48, order=2, ctw_depth=4,
               bandit_B=32, bandit_T=200, bandit_K=10, bandit_d=5, sigma=0.3, tf_B=400,
               byte_D=[2**12, 2**15, 2**18], byte_steps=800, byte_batch=128),
    full=dict(n_lengths=[1024, 4096, 16384, 65536], n_sources=100, order=2, ctw_depth=6,
              bandit_B=256, bandit_T=2000, bandit_K=20, bandit_d=5, sigma=0.3, tf_B=2000,
              byte_D=[2**12, 2**15, 2**18], byte_steps=800, byte_batch=128),
)
