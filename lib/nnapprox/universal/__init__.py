"""Universal approximation and what it costs (chapter ``chapters/universal.md``).

One module per object: :mod:`.shallow` (one hidden layer, 1-D construction),
:mod:`.square_bump` (ReLU vs polynomial vs Fourier with 13 parameters), :mod:`.maurey`
(Barron's dimension-free rate), :mod:`.grid_interpolation` (the curse of dimensionality),
:mod:`.yarotsky` (deep ReLU network for x^2), :mod:`.yarotsky_product` (products and
trees of products), :mod:`.random_features` (one hidden layer in d dimensions, output layer
by least squares), :mod:`.polarization` (one hidden layer for a product, built from the
polarization identity), :mod:`.ridge_sum` (a Barron target of constant variance and a fixed-basis
foil), :mod:`.ntk_frequency` (learning time vs
frequency in the kernel regime), :mod:`.spectral_bias`,
:mod:`.fourier_features`, :mod:`.transformer` (Yun et al.'s block) and
:mod:`.selective_shift` (hardmax contextual mapping). :mod:`.mlp` runs any weight dict.
"""

from .fourier_features import fit_fourier_features, fourier_feature_map, predict_fourier_features, relative_mse
from .grid_interpolation import grid_values, interpolation_rmse, multilinear_interpolate, simplicial_interpolate
from .maurey import gaussian_target, loglog_slope, maurey_constant, maurey_mse, random_cosine_average
from .mlp import count_hidden_units, count_parameters, init_relu_mlp, n_layers, relu_mlp, relu_mlp_ensemble
from .selective_shift import (
    check_contextual_mapping,
    contextual_ids,
    grid_sequences_distinct_columns,
    hardmax_attention_layer,
    selective_shift_heads,
)
from .ntk_frequency import (
    circle_inputs,
    harmonic_amplitude,
    ntk_eigenvalue,
    ntk_learning_time,
    crossing_gap_ratio,
    kernel_time_exponent,
    power_law_exponents,
    relu_ntk_gram,
    relu_output_layer_gram,
    train_harmonics,
)
from .random_features import fit_random_relu_features, shallow_width
from .ridge_sum import (
    fixed_basis_relative_mse,
    maurey_ridge_relative_mse,
    ridge_directions,
    ridge_sum_moments,
    ridge_sum_target,
)
from .polarization import polarization_product, polarization_shallow_weights, polarization_signs
from .shallow import fit_relu_output_layer, interpolation_bound, relu_interpolant_weights, uniform_knots
from .spectral_bias import fourier_amplitudes, learning_times, sinusoid_target, spearman, train_spectral_ensemble
from .square_bump import (
    GIBBS_CONSTANT,
    fourier_bump_coefficients,
    fourier_bump_l2_error,
    fourier_bump_l2_error_exact,
    fourier_eval,
    fourier_overshoot,
    fourier_overshoot_exact,
    fourier_overshoot_grid_error,
    legendre_bump_coefficients,
    legendre_bump_l2_error,
    legendre_bump_l2_error_exact,
    legendre_eval,
    piecewise_l2_error,
    relu_bump_error_formula,
    relu_bump_l2_error,
    relu_bump_weights,
    square_bump,
)
from .transformer import (
    attention_layer,
    best_equivariant_reverse_error,
    feed_forward_layer,
    init_block,
    permutation_equivariance_error,
    reverse_batch,
    reverse_sequence_errors,
    reverse_test_error,
    train_reverse,
    transformer,
)
from .yarotsky_product import (
    clamp01_weights,
    compose,
    parallel,
    product_tree_error_bound,
    product_tree_weights,
    yarotsky_product_max_error_theory,
    yarotsky_product_reference,
    yarotsky_product_weights,
)
from .yarotsky import dyadic_grid, hat, yarotsky_max_error_theory, yarotsky_square_reference, yarotsky_square_weights

__all__ = [name for name in dir() if not name.startswith("_")]
