#!/usr/bin/env python3
"""The PyTorch twin of examples/bench_gpt.rs: the same GPT (scripts/gpt_torch.py's model) and
AdamW step (weight decay on the matrices) on random tokens, in eager mode on DEVICE (cpu; cuda
on an NVIDIA GPU). Prints the first step's time, the median of STEPS timed steps (each with its
loss read back) and the thread count.

    python3 scripts/bench_gpt_torch.py                   # small: 2 layers, width 64, context 64, batch 16
    N_LAYER=4 N_EMBD=128 BLOCK=128 BS=32 python3 scripts/bench_gpt_torch.py   # medium
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_torch import GPT, env  # noqa: E402


def main():
    torch.manual_seed(42)
    dev = torch.device(os.environ.get("DEVICE", "cpu"))
    n_layer, n_head, c = env("N_LAYER", 2), env("N_HEAD", 4), env("N_EMBD", 64)
    block, bs, vocab, steps = env("BLOCK", 64), env("BS", 16), env("VOCAB", 65), max(1, env("STEPS", 20))
    model = GPT(vocab, block, n_layer, n_head, c, False).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    data = torch.randint(0, vocab, (100_000,), device=dev)

    def step():
        t = time.perf_counter()
        starts = torch.randint(0, data.numel() - block, (bs,), device=dev)
        w = data[starts[:, None] + torch.arange(block + 1, device=dev)]
        x, y = w[:, :-1], w[:, 1:]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        loss.item()
        return time.perf_counter() - t

    first = step()
    step()
    times = sorted(step() for _ in range(steps))
    print(f"GPT {n_layer}L {n_head}H C={c} T={block} B={bs} on torch {torch.__version__} "
          f"({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else f'{torch.get_num_threads()} threads'}): first step {first:.2f} s, "
          f"step {times[steps // 2] * 1e3:.1f} ms (median of {steps})")


if __name__ == "__main__":
    main()
