#!/usr/bin/env python3
"""PyTorch's side of examples/bench_step.rs: the same training step of the tutorial's CNN on the
same GPU, for comparison (scripts/gpu_check.sh runs both).

Model: Conv2d(1,32,3) relu maxpool2 -> Conv2d(32,64,3) relu maxpool2 -> flatten -> dropout(0.5)
-> Linear(1600,10); SGD(lr=0.01); a batch of BS (128) drawn with torch.randint from 1024 random
uint8 images cast to float32, cross-entropy on integer labels, all on the device.

Timed like bench_step: 3 warm-up steps, then STEPS (20) steps, each until loss.item() returns;
the median and minimum ms per step are printed. Two modes on the same model:
  eager   the step as plain PyTorch calls;
  graph   the whole step (sampling, forward, backward, update) captured once with
          torch.cuda.graphs and replayed (the analogue of a TinyJit replay as one CUDA graph).
Prints one line per mode and a JSON line with everything. Env: BS, STEPS, DEVICE (cuda; any other device runs
the eager mode alone, for a dry run).
"""
import json, os, statistics, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Conv2d(1, 32, kernel_size=(3, 3))
        self.l2 = nn.Conv2d(32, 64, kernel_size=(3, 3))
        self.l3 = nn.Linear(1600, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.l1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.l2(x)), (2, 2))
        return self.l3(F.dropout(x.flatten(1), 0.5, self.training))


def timed(step, steps):
    times = []
    for i in range(steps + 3):
        t = time.perf_counter()
        loss = step()
        lv = loss.item()
        ms = (time.perf_counter() - t) * 1e3
        if i >= 3:
            times.append(ms)
    return {"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4), "last_loss": round(lv, 4)}


def main():
    bs, steps = int(os.environ.get("BS", 128)), int(os.environ.get("STEPS", 20))
    dev = torch.device(os.environ.get("DEVICE", "cuda"))
    torch.manual_seed(42)
    x_all = torch.randint(0, 256, (1024, 1, 28, 28), dtype=torch.uint8, device=dev)
    y_all = torch.randint(0, 10, (1024,), device=dev)
    model = Model().to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        samples = torch.randint(0, 1024, (bs,), device=dev)
        x, y = x_all[samples].float(), y_all[samples]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else dev.type
    res = {"system": "torch", "version": torch.__version__, "device": name, "batch": bs, "steps": steps}
    res["eager"] = timed(step, steps)
    print(f"torch eager: median {res['eager']['median_ms']:.3f} ms/step, min {res['eager']['min_ms']:.3f} ms", flush=True)

    if dev.type != "cuda":
        print(json.dumps(res), flush=True)
        return
    # Whole-step capture, as in PyTorch's CUDA graphs notes: warm up on a side stream, capture
    # with the gradients unset (the backward pass allocates them in the graph's pool), replay.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = step()

    def replay():
        g.replay()
        return static_loss

    res["graph"] = timed(replay, steps)
    print(f"torch cuda graph: median {res['graph']['median_ms']:.3f} ms/step, min {res['graph']['min_ms']:.3f} ms", flush=True)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
