#!/usr/bin/env python3
"""Generate tests/fixtures/mnist_steps.json: PyTorch's losses for the tutorial's training step on
the real digits, to check that wgrad trains the tutorial's CNN exactly as PyTorch does.

Run once by hand from the repository root after `bash scripts/data.sh` (NOT run in CI; the
output is committed):

    python3 scripts/gen_mnist_fixture.py

Needs numpy and torch (CPU build is enough). The run is deterministic, with nothing random: the
model (Conv2d(1,32,3) -> relu -> max_pool2d(2) -> Conv2d(32,64,3) -> relu -> max_pool2d(2) ->
flatten -> Linear(1600,10), dropout left out) starts from weights given by a formula that
tests/mnist.rs computes too (`det_weights` there), step k trains on the training digits
[128k, 128k+128) in file order, raw u8 pixels cast to float32, with cross-entropy and
torch.optim.Adam (lr 1e-3, betas (0.9, 0.999), eps 1e-8).

Format: {"steps": N, "batch": 128, "losses": [loss before each step's update],
         "abs_sums": [sum of |parameter| after the last step, one per parameter]}
"""
import gzip
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

STEPS, BS = 10, 128
FANS = [9, 9, 288, 288, 1600, 1600]  # fan-in of each parameter's layer: the init bound 1/sqrt(fan)
SHAPES = [(32, 1, 3, 3), (32,), (64, 32, 3, 3), (64,), (10, 1600), (10,)]


def det_weights(k, shape):
    """Uniform-looking values in +-1/sqrt(fan_in): a multiplicative hash of the flat index."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64) + np.uint64(k * 1000003)
    u = ((i * np.uint64(2654435761)) % np.uint64(1 << 32)).astype(np.float64) / 4294967296.0
    return torch.from_numpy(((2 * u - 1) / np.sqrt(FANS[k])).astype(np.float32)).reshape(shape)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * d: 8 + 4 * d], "big") for d in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    torch.set_num_threads(1)
    data = os.environ.get("WGRAD_DATA", "data")
    x = torch.from_numpy(read_idx(f"{data}/mnist/train-images-idx3-ubyte.gz").copy())
    y = torch.from_numpy(read_idx(f"{data}/mnist/train-labels-idx1-ubyte.gz").copy()).long()
    params = [det_weights(k, s).requires_grad_() for k, s in enumerate(SHAPES)]
    w1, b1, w2, b2, w3, b3 = params
    opt = torch.optim.Adam(params, lr=1e-3)
    losses = []
    for k in range(STEPS):
        xb = x[k * BS:(k + 1) * BS].reshape(BS, 1, 28, 28).float()
        opt.zero_grad()
        h = F.max_pool2d(F.relu(F.conv2d(xb, w1, b1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2)), 2)
        loss = F.cross_entropy(F.linear(h.flatten(1), w3, b3), y[k * BS:(k + 1) * BS])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"steps": STEPS, "batch": BS, "losses": losses,
           "abs_sums": [p.detach().abs().sum().item() for p in params]}
    with open("tests/fixtures/mnist_steps.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    main()
