r"""Diffusion models as variational inference: networks as denoising algorithms.

Library of the chapter ``chapters/diffusion.md`` ({cite}`mei2023deep`). Data come from an
Ising model :math:`\mu(x) \propto e^{x^\top A x/2}` on :math:`\{-1,1\}^d`; the score of the
noised data is Tweedie's :math:`(\lambda_t m - z)/\sigma_t^2`, with :math:`m` the mean of the
Ising posterior with field :math:`h = \lambda_t z/\sigma_t^2`, which variational inference
(mean field, TAP) approximates and a ResNet can unroll.
"""

from .enumeration import (
    all_states,
    exact_score,
    log_density_t,
    log_partition,
    posterior_mean,
    posterior_mean_reference,
    probabilities,
    sample_exact,
    score_autograd,
    state_index,
)
from .glauber import glauber, glauber_trace
from .ising import energy, field, noise, operator_norm, ou_schedule, score_from_mean, sk_coupling
from .path_kl import euler_chain_path_kl
from .rbm import (
    joint_coupling,
    joint_field,
    rbm_coupling,
    rbm_log_weight,
    rbm_mean_field,
    rbm_mf_step,
    rbm_mf_trajectory,
    rbm_posterior_mean,
    rbm_posterior_mean_reference,
    rbm_sample_exact,
)
from .mean_field import mf_step, mf_trajectory, naive_mean_field, tap, tap_step, vi_free_energy
from .reverse_sde import reverse_sde, time_grid
from .sample_quality import (
    correlation_error,
    empirical_law,
    exact_second_moment,
    ks_energy,
    resampled_quality,
    second_moment,
    tv_distance,
)
from .score_matching import (
    as_denoiser,
    as_ensemble_denoiser,
    held_out_loss,
    log_uniform_times,
    posterior_mean_error,
    score_error,
    train_denoiser,
    train_denoisers,
    tune_denoisers,
    validation_draws,
)
from .score_net import MLPDenoiser, mlp_width_for
from .unrolled_resnet import (
    UnrolledVIResNet,
    dense_blocks,
    dense_forward,
    init_weights,
    knots,
    relu_tanh,
    relu_tanh_sup_error_bound,
    relu_tanh_weights,
    unrolled_vi_weights,
)

__all__ = [name for name in dir() if not name.startswith("_")]
