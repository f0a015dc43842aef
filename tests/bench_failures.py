"""Benchmark (not collected by pytest): exact gradient variance over all 2^d parities.

Walsh–Hadamard estimator (one batch of per-example gradients + one fast transform) against
the readable reference (one autograd call per parity), one-hidden-layer net of 10d ReLUs,
float64, hinge loss. Run from the repository root::

    .venv/bin/python tests/bench_failures.py [d] [repeats]
"""

import sys
import time

import torch

import nnapprox.failures as F


def timed(fn, repeats):
    best_wall, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        best_wall, best_cpu = min(best_wall, time.perf_counter() - w), min(best_cpu, time.process_time() - c)
    return out, best_wall, best_cpu


def main(d: int = 12, repeats: int = 3) -> None:
    params = F.mlp_init(d, 10 * d, torch.Generator().manual_seed(0))
    (var_fast, _, grads_fast), wall_fast, cpu_fast = timed(
        lambda: F.parity_gradient_variance(F.mlp_forward, params, d, "hinge"), repeats)
    (var_ref, _, grads_ref), wall_ref, cpu_ref = timed(
        lambda: F.parity_gradient_variance_reference(F.mlp_forward, params, d, "hinge"), 1)
    gap = float((grads_fast - grads_ref).abs().max())
    print(f"d = {d}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"Walsh-Hadamard : wall {wall_fast:8.3f} s  cpu {cpu_fast:8.3f} s   Var = {var_fast:.6e}")
    print(f"per-parity loop: wall {wall_ref:8.3f} s  cpu {cpu_ref:8.3f} s   Var = {var_ref:.6e}")
    print(f"speed-up (cpu time): {cpu_ref / cpu_fast:.1f}x   (wall: {wall_ref / wall_fast:.1f}x), max |grad gap| = {gap:.1e}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
