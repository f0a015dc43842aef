"""Benchmark (not a test): one training step of nnapprox.icl.GPT vs Hugging Face GPT2Model.

Garg et al. (2022) train a GPT2Model with a linear read-in and read-out on interleaved
(x, y) prompts. This script builds that model and the library's GPT at the same size, times
the full training step (forward, backward, Adam) on the same batches and prints the ratio
of the per-step times. Run from the repository root::

    .venv/bin/python tests/bench_icl.py                 # CPU, small config
    .venv/bin/python tests/bench_icl.py --device cuda --n-layer 12 --n-embd 256 --n-head 8 --d 20

It needs `transformers`, which is not a dependency of the book:
``.venv/bin/pip install transformers`` (measuring only; do not add it to the lock file).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch import nn

from nnapprox import icl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--n-layer", type=int, default=3)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--n-head", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    try:
        from transformers import GPT2Config, GPT2Model
    except ImportError:
        print("transformers is not installed: run `.venv/bin/pip install transformers` to measure "
              "(it is deliberately not a dependency of the book)")
        return 1
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    N = 2 * args.d + 1
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
    batches = [icl.linear_tasks(args.batch, N, args.d, g)[:2] for _ in range(args.steps + 5)]
    batches = [(X.to(device), y.to(device)) for X, y in batches]

    def time_model(model: nn.Module) -> float:
        model.to(device).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        for i, (X, y) in enumerate(batches):
            if i == 5:  # warm-up done
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
            loss = (model.predict(X, y) - y).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / args.steps

    torch.manual_seed(0)
    t_lib = time_model(icl.GPT(cfg))
    t_hf = time_model(HFRegression())
    print(f"config: d={args.d}, {args.n_layer} layers, width {args.n_embd}, {args.n_head} heads, "
          f"batch {args.batch}, {2 * N} tokens, device {device}")
    print(f"nnapprox.icl.GPT       {1e3 * t_lib:8.2f} ms/step")
    print(f"transformers GPT2Model {1e3 * t_hf:8.2f} ms/step")
    print(f"ratio nnapprox / transformers: {t_lib / t_hf:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
