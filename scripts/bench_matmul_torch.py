#!/usr/bin/env python3
"""The PyTorch twin of examples/bench_matmul.rs: for each N in SIZES (256,512,1024,2048), CHAIN (8)
f32 products x = x @ w in a row (w scaled by 1/sqrt(N)) and the sum of the last, timed to the
readback; GFLOP/s from the median of STEPS (10). DEVICE: cuda (default when available) or cpu.
TF32 stays off (PyTorch's default for matmul), so this is plain f32 as wgrad computes it.
"""
import os
import time

import torch


def main():
    dev = torch.device(os.environ.get("DEVICE", "cuda" if torch.cuda.is_available() else "cpu"))
    sizes = [int(s) for s in os.environ.get("SIZES", "256,512,1024,2048").split(",")]
    chain, steps = int(os.environ.get("CHAIN", 8)), int(os.environ.get("STEPS", 10))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    for n in sizes:
        x = torch.randn(n, n, device=dev)
        w = torch.randn(n, n, device=dev) / n ** 0.5

        def step():
            t = time.perf_counter()
            y = x
            for _ in range(chain):
                y = y @ w
            y.sum().item()
            return time.perf_counter() - t

        step(), step()
        times = sorted(step() for _ in range(steps))
        t = times[steps // 2]
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
        print(f"torch matmul {n}x{n}x{n} f32 on {name}: {2 * n**3 * chain / t / 1e9:.0f} GFLOP/s "
              f"({t * 1e3 / chain:.3f} ms per product, median of {steps})", flush=True)


if __name__ == "__main__":
    main()
