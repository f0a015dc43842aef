"""Benchmark (not a test): one training step of nnapprox.icl.GPT vs Hugging Face GPT2Model.

Garg et al. (2022) train a GPT2Model with a linear read-in and read-out on interleaved
(x, y) prompts. This script builds that model and the library's GPT at the same size, times
the full training step (forward, backward, Adam) on the same batches and prints the ratio
of the per-step times. Both models get the same optimizer, the one the chapter's trainers use
(``nnapprox.icl.gpt.adam``: PyTorch's fused Adam on CPU and CUDA). The two models' steps
alternate (library then HF, HF then library,
...) in one process, so a change in the machine's background load affects both equally;
each repeat reports the ratio of the median step times, and the script ends with the median
(min-max) of the repeats' ratios. Run from the repository root::

    .venv/bin/python tests/bench_icl.py --threads 1     # CPU, the icl_garg checkpoint's size
    .venv/bin/python tests/bench_icl.py --threads 1 --d 8 --points 17 --n-layer 4 --n-head 4  # icl_tasks_*
    .venv/bin/python tests/bench_icl.py --threads 1 --d 4 --points 25 --n-layer 4 --n-head 4  # icl_relu_teacher
    .venv/bin/python tests/bench_icl.py --threads 1 --n-layer 6 --n-embd 128 --n-head 4
    .venv/bin/python tests/bench_icl.py --device cuda --n-layer 12 --n-embd 256 --n-head 8 --d 20

The default size (d = 5, N = 2d + 1 = 11 examples, 3 layers, width 64, 2 heads, batch 64) is
that of the committed checkpoint ``icl_garg`` (``nnapprox.icl.pretrained.GARG_CONFIG``).
It needs `transformers`, which is not a dependency of the book:
``.venv/bin/pip install transformers`` (measuring only; do not add it to the lock file).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

from nnapprox import icl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--points", type=int, default=0, help="points per prompt (0: 2d + 1)")
    parser.add_argument("--n-layer", type=int, default=3)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--n-head", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model and repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (ratio reported per repeat)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.points < 0:
        parser.error("--points must be >= 0")
    if min(args.d, args.n_layer, args.n_embd, args.n_head, args.batch, args.steps, args.repeats) < 1 or args.threads < 0:
        parser.error("--d, --n-layer, --n-embd, --n-head, --batch, --steps and --repeats must be >= 1, --threads >= 0")
    try:
        from transformers import GPT2Config, GPT2Model
    except ImportError:
        print("transformers is not installed: run `.venv/bin/pip install transformers` to measure "
              "(it is deliberately not a dependency of the book)")
        return 1
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    N = args.points or 2 * args.d + 1
    cfg = icl.GPTConfig(d=args.d, n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head, n_positions=2 * N)

    class HFRegression(nn.Module):  # Garg et al.'s model: read-in, GPT2Model, read-out at the x-tokens
        def __init__(self) -> None:
            super().__init__()
            self.read_in = nn.Linear(args.d + 1, args.n_embd)
            self.backbone = GPT2Model(GPT2Config(n_positions=2 * N, n_embd=args.n_embd, n_layer=args.n_layer,
                                                 n_head=args.n_head, resid_pdrop=0.0, embd_pdrop=0.0,
                                                 attn_pdrop=0.0, use_cache=False))
            self.read_out = nn.Linear(args.n_embd, 1)

        def predict(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            h = self.backbone(inputs_embeds=self.read_in(icl.interleave(X, y))).last_hidden_state
            return self.read_out(h)[..., 0][:, ::2]

    g = torch.Generator(device="cpu").manual_seed(0)
    batches = [icl.linear_tasks(args.batch, N, args.d, g)[:2] for _ in range(args.steps)]
    batches = [(X.to(device), y.to(device)) for X, y in batches]

    torch.manual_seed(0)
    models = {"nnapprox.icl.GPT": icl.GPT(cfg), "transformers GPT2Model": HFRegression()}
    opts = {}
    for name, model in models.items():
        model.to(device).train()
        opts[name] = icl.gpt.adam(model.parameters(), 1e-4)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step(name: str, X: torch.Tensor, y: torch.Tensor) -> float:
        sync()
        start = time.perf_counter()
        loss = (models[name].predict(X, y) - y).pow(2).mean()
        opts[name].zero_grad(set_to_none=True)
        loss.backward()
        opts[name].step()
        sync()
        return time.perf_counter() - start

    names = list(models)
    for X, y in batches[:5]:  # warm-up
        for name in names:
            step(name, X, y)
    print(f"config: d={args.d}, {args.n_layer} layers, width {args.n_embd}, {args.n_head} heads, batch {args.batch}, "
          f"{2 * N} tokens, device {device}, {torch.get_num_threads()} thread(s), {args.steps} steps x "
          f"{args.repeats} repeats, steps alternating")
    ratios = []
    for r in range(args.repeats):
        times: dict[str, list[float]] = {name: [] for name in names}
        for i, (X, y) in enumerate(batches):
            for name in (names if i % 2 == 0 else names[::-1]):
                times[name].append(step(name, X, y))
        med = {name: statistics.median(t) for name, t in times.items()}
        ratios.append(med[names[0]] / med[names[1]])
        print(f"repeat {r + 1}: " + ", ".join(f"{name} {1e3 * m:.2f} ms/step" for name, m in med.items())
              + f", ratio {ratios[-1]:.3f}")
    print(f"ratio nnapprox / transformers (median step times): median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {args.repeats} repeats)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
