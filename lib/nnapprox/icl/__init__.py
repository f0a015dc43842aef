"""In-context learning as gradient descent: tasks, transformers, constructions, baselines."""
from .baselines import *  # noqa: F401,F403
from .curriculum import Curriculum
from .gpt import GPT, GPTConfig, causal_attention_reference, interleave, train_icl
from .tasks import (linear_tasks, logistic_tasks, mixed_noise_tasks, pool_tasks, regression_or_classification_tasks,
                    relu_teacher_affine_part, relu_teacher_tasks, sample_x, sign_tasks, skewed_sqrt_cov, sparse_linear_tasks, task_pool)
from .constructions import (layout, lasso_ista_layers, logistic_gd_layers, read_w, readout_layer, ridge_gd_layers,
                            sigmoid_interpolant, sigmoid_interpolant_eval, sigmoid_interpolation_bound)
from .lsa import LSA, gd_predictions, gd_weights, lsa_layer, lsa_layer_reference, lsa_predict, lsa_tokens
from .relu_attention import ReLUTransformer, embed, mlp, relu_attention, relu_attention_reference, transformer
from .icgd import (icgd_embed, icgd_layers, icgd_layout, icgd_readout_layers, icgd_step_layers, projected_gd_reference,
                   ramp_error_bound, read_weights, relu_net)
from .post_icl_validation import (parallel_ridge_layers, post_icl_validation_layers, post_icl_validation_reference,
                                  read_selection, selection_layers, selection_weights, validation_embed,
                                  validation_layout, validation_loss_layer)
from .encoder import BaiEncoder, EncoderConfig
from .pretrained import CHECKPOINTS, SETTINGS
from .settings import PROFILES
