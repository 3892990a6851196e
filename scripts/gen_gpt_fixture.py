#!/usr/bin/env python3
"""Generate tests/fixtures/gpt_steps.json: PyTorch's losses and final weights for 10 training
steps of a tiny GPT, to check that wgrad's `nn::gpt` trains exactly as the PyTorch model of
scripts/gpt_torch.py does (tests/gpt.rs::training_steps_equal_pytorch).

Run once by hand from the repository root (NOT run in CI; the output is committed):

    python3 scripts/gen_gpt_fixture.py

Needs torch (CPU build is enough). Nothing is random: the model (gpt_torch.GPT with vocabulary
13, context 8, 2 layers, 2 heads, width 16, no biases: with them, the key bias's gradient is
0 in exact arithmetic, as adding a vector to every key leaves the softmax unchanged, so both
libraries' AdamW would amplify their different rounding noise into different updates) starts from weights given by a formula that
tests/gpt.rs computes too (`det_weights` there: for the k-th parameter in state-dict order, a
multiplicative hash of the flat index scaled to +-0.1, or 1 +- 0.1 for LayerNorm weights), and
step k trains on the 4 windows of 9 tokens stored in the fixture, with nanoGPT's recipe:
AdamW (betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the matrices and 0 on biases and
LayerNorms) at the learning rate gpt_torch.lr_at(k, 1e-2, 2, 10).

Format: {"config": {...}, "lr": [per step], "windows": [step][row][token],
         "losses": [loss before each step's update], "weights": {name: flat values after the
         last step}}
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch  # noqa: E402

VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD = 13, 8, 2, 2, 16
STEPS, BS, LR, WARMUP = 10, 4, 1e-2, 2


def det_weights(k, name, shape):
    """Uniform-looking values: a multiplicative hash of the flat index, +-0.1 around 0 (1 for a
    LayerNorm weight)."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64) + np.uint64(k * 1000003)
    u = ((i * np.uint64(2654435761)) % np.uint64(1 << 32)).astype(np.float64) / 4294967296.0
    base = 1.0 if ".ln_" in "." + name and name.endswith("weight") else 0.0
    return torch.from_numpy((base + 0.1 * (2 * u - 1)).astype(np.float32)).reshape(shape)


def main():
    torch.set_num_threads(1)
    model = gpt_torch.GPT(VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD, bias=False)
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            p.copy_(det_weights(k, name, p.shape))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=LR, betas=(0.9, 0.99), eps=1e-8)
    # A token stream with some structure, and windows at scattered offsets.
    stream = [(i * 7 + i // 5 + (i * i) % 3) % VOCAB for i in range(300)]
    windows, losses, lrs = [], [], []
    for k in range(STEPS):
        starts = [(k * 37 + b * 61 + 5) % (len(stream) - BLOCK - 1) for b in range(BS)]
        w = torch.tensor([stream[s:s + BLOCK + 1] for s in starts])
        lr = gpt_torch.lr_at(k, LR, WARMUP, STEPS)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = F.cross_entropy(model(w[:, :-1]).flatten(0, 1), w[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        windows.append(w.tolist())
        losses.append(loss.item())
        lrs.append(lr)
    out = {
        "config": {"vocab_size": VOCAB, "block_size": BLOCK, "n_layer": N_LAYER,
                   "n_head": N_HEAD, "n_embd": N_EMBD, "bias": False},
        "lr": lrs,
        "windows": windows,
        "losses": losses,
        "weights": {name: [float(f"{v:.8g}") for v in p.detach().flatten().tolist()]
                    for name, p in model.named_parameters()},
    }
    with open("tests/fixtures/gpt_steps.json", "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("losses", losses)


if __name__ == "__main__":
    main()
