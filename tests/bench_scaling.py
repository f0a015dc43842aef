"""Benchmark (not collected by pytest): batched sweep vs a Python loop over the same models.

    .venv/bin/python tests/bench_scaling.py [--device cpu|cuda] [--steps 200] [--threads 1]

Trains the chapter's quick-profile sweep (5 widths x 3 data sizes = 15 byte-level MLPs) both
ways with identical initialisation and batches and prints CPU and wall times and the ratio.
"""

import argparse
import os
import time

import torch

os.environ.setdefault("NNAPPROX_STATIC", "1")

from nnapprox.scaling import load_stdlib_corpus, train_sweep, train_sweep_loop  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the chapter's quick profile uses 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = load_stdlib_corpus()
    widths, sizes = [8, 16, 32, 64, 128], [2**12, 2**15, 2**18]
    W = [w for d in sizes for w in widths]
    D = [d for d in sizes for w in widths]
    kw = dict(n_steps=args.steps, batch=128, eval_every=100, n_eval=8192, device=args.device)
    times = {}
    for name, fn in (("batched", train_sweep), ("loop", train_sweep_loop)):
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        cpu, wall = time.process_time(), time.perf_counter()
        out = fn(corpus.train, corpus.test, W, D, torch.Generator().manual_seed(0), **kw)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        times[name] = (time.process_time() - cpu, time.perf_counter() - wall)
        print(f"{name:8s}: {times[name][0]:7.2f} s CPU  {times[name][1]:7.2f} s wall  final losses {out['final'][:3].tolist()}")
    print(f"loop / batched: CPU {times['loop'][0] / times['batched'][0]:.2f}x, wall {times['loop'][1] / times['batched'][1]:.2f}x "
          f"({args.device}, {torch.get_num_threads()} threads, {args.steps} steps, {len(W)} models)")


if __name__ == "__main__":
    main()
