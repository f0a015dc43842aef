"""Neural scaling laws: fitting power laws honestly, models with known exponents, batched sweeps.

Chapter *Neural scaling laws* (``chapters/scaling.md``). One module per object:

* :mod:`.huber_fit` — summed Huber on log loss, many starts, L-BFGS (the fitting engine);
* :mod:`.power_law` — log-log regression and :math:`E + A N^{-\\alpha}`;
* :mod:`.two_variable` — Chinchilla's and Kaplan et al.'s :math:`L(N, D)`;
* :mod:`.bootstrap` — case-resampling bootstrap confidence intervals;
* :mod:`.compute_optimal` — :math:`N_{opt} \\propto C^{\\beta/(\\alpha+\\beta)}`;
* :mod:`.quanta` — the quanta model (known exponents);
* :mod:`.teacher_student` — resolution- and variance-limited regimes;
* :mod:`.intrinsic_dimension` — the TwoNN estimator of a point cloud's intrinsic dimension;
* :mod:`.corpus`, :mod:`.byte_lm`, :mod:`.sweep` — a byte-level LM sweep on the stdlib sources.
"""

from .bootstrap import bootstrap_fits, percentile_ci
from .byte_lm import VOCAB, ByteMLP, make_contexts, non_embedding_params
from .compute_optimal import compute_optimal_exponents, optimal_allocation, optimal_allocation_numeric
from .corpus import ByteCorpus, file_list_hash, load_stdlib_corpus, stdlib_files
from .intrinsic_dimension import (
    TwoNN, flat_torus, flat_torus_angles, torus_embedding, torus_geodesic_distances, two_nn,
    two_nn_dimension, two_nn_mle, two_nn_ratios, two_nn_torus,
)
from .huber_fit import FitResult, StartRuns, fit_huber_log, huber, huber_grad, single_threaded_blas
from .power_law import LogLogFit, fit_loglog, fit_saturating_power_law, saturating_power_law
from .quanta import (
    expected_loss_data_limited, loss_capacity_limited, loss_data_limited, quanta_probs,
    variance_loss_data_limited,
)
from .sweep import (
    STRATEGIES,
    init_sweep,
    lr_schedule,
    sample_positions,
    sweep_hidden,
    sweep_logits,
    sweep_strategy,
    train_sweep,
    train_sweep_loop,
)
from .teacher_student import random_features_curve, tanh_teacher, variance_limited_curve
from .two_variable import (
    FORMS,
    chinchilla_loss,
    chinchilla_starts,
    fit_chinchilla,
    fit_kaplan,
    kaplan_loss,
    kaplan_starts,
    predict,
    sample_chinchilla_runs,
)

__all__ = [
    "FORMS", "STRATEGIES", "VOCAB", "ByteCorpus", "ByteMLP", "FitResult", "LogLogFit", "bootstrap_fits",
    "chinchilla_loss", "chinchilla_starts", "compute_optimal_exponents", "expected_loss_data_limited",
    "file_list_hash", "fit_chinchilla", "fit_huber_log", "fit_kaplan", "fit_loglog", "fit_saturating_power_law",
    "huber", "huber_grad", "init_sweep", "kaplan_loss", "kaplan_starts", "load_stdlib_corpus",
    "loss_capacity_limited", "loss_data_limited", "lr_schedule", "make_contexts", "non_embedding_params",
    "optimal_allocation", "optimal_allocation_numeric", "percentile_ci", "predict", "quanta_probs",
    "random_features_curve", "sample_positions", "sample_chinchilla_runs", "saturating_power_law", "single_threaded_blas", "StartRuns", "stdlib_files",
    "sweep_hidden", "sweep_logits", "sweep_strategy", "tanh_teacher", "train_sweep", "train_sweep_loop", "variance_limited_curve",
    "variance_loss_data_limited", "TwoNN", "flat_torus", "two_nn", "two_nn_dimension", "two_nn_mle",
    "two_nn_ratios", "flat_torus_angles", "torus_embedding", "torus_geodesic_distances",
    "two_nn_torus",
]
