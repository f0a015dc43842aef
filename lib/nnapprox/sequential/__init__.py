"""Universal prediction and decision making in context (chapter ``sequential``)."""
from nnapprox.sequential.bandits import (  # noqa: F401
    Problem, beta, linucb, linucb_loop, make_problem, regret_bound, thompson,
)
from nnapprox.sequential.prediction import (  # noqa: F401
    CTW, best_markov_loss, ctw_losses, ctw_mixture_brute_force, entropy_rate, gamma_fn,
    kt_log2_prob, kt_losses, leaf_counts, lz78_losses, markov_kt_losses, ml_loss, random_markov,
    sample_markov, stationary, tree_cost, tree_sources, true_losses,
)

PROFILES = dict(
    quick=dict(n_lengths=[1024, 4096, 16384], n_sources=12, order=2, ctw_depth=4,
               bandit_B=32, bandit_T=200, bandit_K=10, bandit_d=5, sigma=0.3),
    full=dict(n_lengths=[1024, 4096, 16384, 65536], n_sources=40, order=2, ctw_depth=6,
              bandit_B=256, bandit_T=2000, bandit_K=20, bandit_d=5, sigma=0.3),
)
