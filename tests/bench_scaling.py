"""Benchmark (not collected by pytest): the sweep's strategies against a Python loop over the same models.

    .venv/bin/python tests/bench_scaling.py [--device cpu|cuda] [--steps 200] [--n-rep 1] [--repeats 7] [--threads 1]

Trains the chapter's quick-profile sweep (5 widths x 3 data sizes = 15 byte-level MLPs, times
``--n-rep`` replicates) with every strategy of ``train_sweep`` (``batched``: one padded model;
``by_width``: one stack per width; ``auto``: what ``sweep_strategy`` picks on the device) and
with ``train_sweep_loop``, all with identical initialisation and batches. The four are timed
in turn within each repeat (so that a change of machine load hits all of them alike), and
the script prints the median and range of the wall times over the repeats, the ratio
loop/strategy of the medians (above 1: the strategy is faster than the loop) and the largest
difference between each strategy's test-loss curves and the loop's (float32 rounding only).
"""

import argparse
import os
import statistics
import time

import torch

os.environ.setdefault("NNAPPROX_STATIC", "1")

from nnapprox.scaling import load_stdlib_corpus, sweep_strategy, train_sweep, train_sweep_loop  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--n-rep", type=int, default=1, help="replicates of each (width, data size), as the chapter's n_rep")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats of each variant (the medians are reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the chapter's quick profile uses 1)")
    args = parser.parse_args()
    if args.repeats < 1 or args.steps < 100 or args.n_rep < 1:
        raise SystemExit("need --repeats >= 1, --steps >= 100 (one evaluation every 100 steps) and --n-rep >= 1")
    torch.set_num_threads(args.threads)
    corpus = load_stdlib_corpus()
    widths, sizes = [8, 16, 32, 64, 128], [2**12, 2**15, 2**18]
    W = [w for _ in range(args.n_rep) for d in sizes for w in widths]
    D = [d for _ in range(args.n_rep) for d in sizes for w in widths]
    kw = dict(n_steps=args.steps, batch=128, eval_every=100, n_eval=8192, device=args.device)
    variants = {
        "auto": lambda g: train_sweep(corpus.train, corpus.test, W, D, g, strategy="auto", **kw),
        "batched": lambda g: train_sweep(corpus.train, corpus.test, W, D, g, strategy="batched", **kw),
        "by_width": lambda g: train_sweep(corpus.train, corpus.test, W, D, g, strategy="by_width", **kw),
        "loop": lambda g: train_sweep_loop(corpus.train, corpus.test, W, D, g, **kw),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    curves: dict[str, torch.Tensor] = {}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            wall = time.perf_counter()
            out = fn(torch.Generator().manual_seed(0))
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - wall)
            curves[name] = out["curves"]
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.device}, {torch.get_num_threads()} thread(s), {len(W)} models, {args.steps} steps, "
          f"{args.repeats} repeats; auto = {sweep_strategy(args.device)!r}")
    for name in variants:
        diff = (curves[name] - curves["loop"]).abs().max().item()
        print(f"{name:8s}: median {med[name]:6.2f} s wall (range {min(times[name]):.2f}-{max(times[name]):.2f})"
              f"  loop/{name} {med['loop'] / med[name]:.2f}x  max |test loss - loop's| {diff:.1e} nats")


if __name__ == "__main__":
    main()
