#!/usr/bin/env python3
"""The tinygrad twin of examples/bench_step.rs: the tutorial's CNN (Conv2d(1,32,3) relu maxpool2
-> Conv2d(32,64,3) relu maxpool2 -> flatten -> dropout(0.5) -> Linear(1600,10)), SGD(lr=0.01),
a batch of BS (128) drawn with Tensor.randint from 1024 random uint8 images cast to float32,
sparse categorical cross-entropy, the whole step (sampling, forward, backward, update) under
tinygrad's TinyJit on its default device (CPU here: clang).

Timed like bench_step: 3 warm-up steps (TinyJit captures on the second), then STEPS (20) steps,
each until loss.item() returns; prints the median and minimum ms per step, the kernels one
replayed step runs (GlobalCounters.kernel_count) and the first step's time, then one JSON line.

    pip install tinygrad==0.14.0   # and clang, tinygrad's CPU compiler
    python3 scripts/bench_tinygrad.py
"""
import json
import os
import statistics
import time

from tinygrad import Context, Device, GlobalCounters, Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters


class Model:
    def __init__(self):
        self.l1 = nn.Conv2d(1, 32, kernel_size=(3, 3))
        self.l2 = nn.Conv2d(32, 64, kernel_size=(3, 3))
        self.l3 = nn.Linear(1600, 10)

    def __call__(self, x):
        x = self.l1(x).relu().max_pool2d((2, 2))
        x = self.l2(x).relu().max_pool2d((2, 2))
        return self.l3(x.flatten(1).dropout(0.5))


def main():
    bs, steps = int(os.environ.get("BS", 128)), int(os.environ.get("STEPS", 20))
    Tensor.manual_seed(42)
    x_all = Tensor.randint(1024, 1, 28, 28, low=0, high=256).cast("uint8").realize()
    y_all = Tensor.randint(1024, low=0, high=10).realize()
    model = Model()
    opt = nn.optim.SGD(get_parameters(model), lr=0.01)

    @TinyJit
    def step():
        # tinygrad 0.14 applies dropout and lets the optimizer step only under TRAINING.
        with Context(TRAINING=1):
            samples = Tensor.randint(bs, high=1024)
            x, y = x_all[samples].float(), y_all[samples]
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

    times, kernels, first = [], 0, None
    for i in range(steps + 3):
        t = time.perf_counter()
        k0 = GlobalCounters.kernel_count
        loss = step().item()
        kernels = GlobalCounters.kernel_count - k0
        ms = (time.perf_counter() - t) * 1e3
        if i == 0:
            first = ms / 1e3
        if i >= 3:
            times.append(ms)
    res = {
        "system": "tinygrad",
        "device": Device.DEFAULT,
        "batch": bs,
        "steps": steps,
        "jitted": {"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4)},
        "kernels_per_step": kernels,
        "first_step_s": round(first, 3),
        "last_loss": round(loss, 4),
    }
    print(
        f"tinygrad TinyJit on {Device.DEFAULT}: median {res['jitted']['median_ms']:.3f} ms/step, "
        f"min {res['jitted']['min_ms']:.3f} ms, {kernels} kernels/step, first step {first:.2f} s",
        flush=True,
    )
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
