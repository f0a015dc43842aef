"""Depth separation: what depth buys, and what it does not (chapter ``depth``).

One module per object: :mod:`relu_net` (networks as weight dicts), :mod:`pieces` (exact
piece counting), :mod:`sawtooth`, :mod:`best_pieces`, :mod:`shallow`, :mod:`regions`, :mod:`region_density`, :mod:`cantor`,
:mod:`parity`, :mod:`circuit_counting`, :mod:`automaton`, :mod:`narrow`, :mod:`radial`, :mod:`batched_mlp`, :mod:`weight_tied`, :mod:`anderson`.
"""

from .anderson import anderson, fixed_point_iteration
from .automaton import automaton_network_weights, automaton_step
from .best_pieces import (best_error_closed_form, best_piecewise_errors, max_switches,
                          min_errors_with_switches, telgarsky_width_limit)
from .circuit_counting import log2_circuit_count, shannon_gate_bound
from .cantor import (cantor_map, cantor_net_weights, coarse_levels, fine_levels, in_cantor_set,
                     sample_cantor_data, spread_levels)
from .batched_mlp import (family_member, family_mse, family_parameters, family_size, mlp_family, stack_mlps,
                         train_mlp_family)
from .narrow import hat, hat_width2_weights, is_monotone, sup_error
from .parity import (all_bit_strings, dnf_weights, parity, parity_dnf_terms, parity_one_hidden_layer_weights,
                     xor_gate, xor_tree, xor_tree_size)
from .pieces import (breakpoints_along_line, count_pieces_along_line, count_pieces_on_grid,
                     count_regions_along_line, slope_changes)
from .radial import (balanced_ball_radius, ball_error_rate, ball_indicator, ball_indicator_weights,
                     gaussian_ball_data, gaussian_slab_data, near_sphere_points, square_interpolant_weights, squared_norm_error_bound,
                     squared_norm_error_mc, squared_norm_weights)
from .region_density import bias_density_bound, offset_segments, region_expectation_terms
from .regions import (equal_width_architecture, max_pieces_on_line, random_segments, regions_per_neuron,
                      telgarsky_piece_bound)
from .relu_net import (Weights, n_affine_layers, n_parameters, preactivations, random_relu_net, relu_net,
                       train_relu_net, widths)
from .sawtooth import (alternating_points, classification_error, recurrent_sawtooth, sawtooth, sawtooth_weights, tent,
                       tent_cell, telgarsky_error_lower_bound)
from .shallow import (fit_output_layer, init_shallow_family, pad_tasks, shallow_family, shallow_member,
                      train_shallow_family)
from .weight_tied import (
    iterate_tied,
    output_block,
    tied_layer,
    tied_output_error_bound,
    weight_tied_from_mlp,
)

__all__ = [name for name in dir() if not name.startswith("_")]
