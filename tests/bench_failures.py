"""Benchmark (not collected by pytest): exact gradient variance over all 2^d parities.

Fast path (one batched backward for all per-example gradients via ``torch.func``, then one
in-place fast Walsh–Hadamard transform, no loop over parities) against the readable
reference (one autograd call per parity), one-hidden-layer net of 10d ReLUs, float64, hinge
loss, one thread. The two paths alternate (fast, reference, fast, ...) so that a change of the
machine's load affects both alike. Reports the median (min-max) wall time of ``repeats`` runs
of each path and the largest difference between their 2^d gradients. Run from the repository root::

    .venv/bin/python tests/bench_failures.py [d] [repeats]
"""

import statistics
import sys
import time

import torch

import nnapprox.failures as F


def timed(fn):
    """Run ``fn`` once; return its output and the wall time (seconds)."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(d: int = 12, repeats: int = 5) -> None:
    torch.set_num_threads(1)
    params = F.mlp_init(d, 10 * d, torch.Generator().manual_seed(0))
    t_fast, t_ref = [], []
    for _ in range(repeats):
        (var_fast, _, grads_fast), t = timed(lambda: F.parity_gradient_variance(F.mlp_forward, params, d, "hinge"))
        t_fast.append(t)
        (var_ref, _, grads_ref), t = timed(
            lambda: F.parity_gradient_variance_reference(F.mlp_forward, params, d, "hinge"))
        t_ref.append(t)
    gap = float((grads_fast - grads_ref).abs().max())
    med_fast, med_ref = statistics.median(t_fast), statistics.median(t_ref)
    print(f"d = {d}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), {repeats} runs each")
    print(f"fast (batched gradients + WHT): median {med_fast:8.3f} s  (min {min(t_fast):.3f}, max {max(t_fast):.3f})"
          f"   Var = {var_fast:.12e}")
    print(f"reference (loop over parities): median {med_ref:8.3f} s  (min {min(t_ref):.3f}, max {max(t_ref):.3f})"
          f"   Var = {var_ref:.12e}")
    print(f"speed-up (ratio of medians): {med_ref / med_fast:.0f}x, max |grad gap| = {gap:.1e}, "
          f"|Var gap| / Var = {abs(var_fast - var_ref) / var_ref:.1e}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
