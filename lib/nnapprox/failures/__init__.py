"""When gradient descent fails: expressivity is not learnability.

The library of the chapter ``chapters/failures.md``: parities and the Walsh–Hadamard
transform, the exact gradient variance over a family of targets (Theorem 1 of
Shalev-Shwartz, Shamir & Shammah 2017), parity learning with SGD, linear-periodic targets
(Shamir 2016), decomposition versus end-to-end training, ill-conditioned piecewise-linear curves, flat (staircase) activations, sparse parities
and their hidden progress (Barak et al. 2022), the sensitivity
of soft attention (Hahn 2020), and length generalisation of LSTMs and transformers on parity.
"""

from .decomposition import (
    end_to_end_predictor,
    gradient_signals,
    part_moments,
    part_predictor,
    sample_tuples,
    train_decomposition,
)
from .flat_activation import flat_neuron_loss, forward_only_bound, quantised_identity, train_flat_neuron
from .grad_variance import (
    LOSSES,
    family_gradient_variance,
    gradient_snr,
    loss_derivative,
    loss_fn,
    mlp_forward,
    mlp_init,
    parity_gradient_variance,
    parity_gradient_variance_reference,
    parity_variance_parseval,
    per_example_gradients,
)
from .hidden_progress import (
    fourier_coefficient,
    movement_ratio,
    movement_zscore,
    placebo_masks,
    placebo_zscore,
    scan_threshold,
)
from .parity import all_parities, hypercube, parity, random_subset, sample_parity, subset_mask
from .parity_sgd import relevance, ensemble_forward, init_ensemble, sample_ensemble_batch, train_parity_ensemble
from .periodic import (
    linear_periodic,
    periodic_gradient_variance,
    periodic_loss_landscape,
    periodic_variance_bound,
    r_squared,
    random_directions,
    train_periodic_ensemble,
)
from .piecewise_curves import (
    condition_squared,
    conv_encoder_gd,
    fc_encoder_error_closed_form,
    fc_encoder_error_lower_bound,
    fc_encoder_gd,
    pwl_matrix,
    shift_powers,
    steps_to_reach,
)
from .sequence_parity import (
    ParityLSTM,
    ParityTransformer,
    flip_margin_change,
    init_parameters_,
    parity_accuracy,
    random_positions,
    running_parity_loss,
    sample_bit_strings,
    sinusoidal_encoding,
    train_running_parity,
)
from .sensitivity import (
    encoder_forward,
    encoder_last,
    flip_changes,
    flip_sensitivity,
    init_encoder,
    loglog_slope,
    positional_encoding,
)
from .staircase import evaluate_target, staircase, train_targets_ensemble
from .walsh_hadamard import butterflies_, fwht, fwht_, hadamard_matrix

__all__ = [name for name in dir() if not name.startswith("_")]
