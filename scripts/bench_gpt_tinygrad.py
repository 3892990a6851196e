#!/usr/bin/env python3
"""The tinygrad twin of examples/bench_gpt.rs: the same GPT (scripts/gpt_torch.py's model: no
biases, pre-LayerNorm blocks, causal attention through `scaled_dot_product_attention`, tanh GELU,
the output layer tied to the token embedding) and AdamW step (betas 0.9/0.99, eps 1e-8, weight
decay 0.1 on the matrices only) on random tokens, captured by tinygrad's TinyJit. Prints the
kernels one replayed step runs (GlobalCounters.kernel_count), the first call's time, and the
median of STEPS timed replays (each reading the loss back), as one JSON line.

    pip install tinygrad==0.14.0   # and clang, tinygrad's CPU compiler
    python3 scripts/bench_gpt_tinygrad.py                  # small: 2 layers, width 64, context 64, batch 16
    N_LAYER=4 N_EMBD=128 BLOCK=128 BS=32 python3 scripts/bench_gpt_tinygrad.py   # medium
"""
import json
import os
import time

from tinygrad import Context, Device, GlobalCounters, Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters


def env(name, default):
    v = os.environ.get(name)
    return type(default)(v) if v not in (None, "") else default


class Block:
    def __init__(self, c, n_head, proj_std):
        self.n_head = n_head
        self.ln_1, self.ln_2 = Tensor.ones(c), Tensor.ones(c)
        self.c_attn = Tensor.normal(3 * c, c, std=0.02)
        self.c_proj = Tensor.normal(c, c, std=proj_std)
        self.c_fc = Tensor.normal(4 * c, c, std=0.02)
        self.mlp_proj = Tensor.normal(c, 4 * c, std=proj_std)

    def __call__(self, x):
        b, t, c = x.shape
        heads = lambda z: z.reshape(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        q, k, v = x.layernorm(eps=1e-5).mul(self.ln_1).linear(self.c_attn.T).split(c, dim=2)
        y = heads(q).scaled_dot_product_attention(heads(k), heads(v), is_causal=True)
        x = x + y.transpose(1, 2).reshape(b, t, c).linear(self.c_proj.T)
        h = x.layernorm(eps=1e-5).mul(self.ln_2).linear(self.c_fc.T).gelu()
        return x + h.linear(self.mlp_proj.T)


class GPT:
    def __init__(self, vocab, block, n_layer, n_head, c):
        self.wte = Tensor.normal(vocab, c, std=0.02)
        self.wpe = Tensor.normal(block, c, std=0.02)
        self.h = [Block(c, n_head, 0.02 / (2 * n_layer) ** 0.5) for _ in range(n_layer)]
        self.ln_f = Tensor.ones(c)

    def __call__(self, idx):
        x = self.wte[idx] + self.wpe[: idx.shape[1]]
        for blk in self.h:
            x = blk(x)
        return x.layernorm(eps=1e-5).mul(self.ln_f).linear(self.wte.T)


def main():
    Tensor.manual_seed(42)
    n_layer, n_head, c = env("N_LAYER", 2), env("N_HEAD", 4), env("N_EMBD", 64)
    block, bs, vocab, steps = env("BLOCK", 64), env("BS", 16), env("VOCAB", 65), max(1, env("STEPS", 10))
    model = GPT(vocab, block, n_layer, n_head, c)
    params = get_parameters(model)
    for p in params:
        p.requires_grad = True
    decay = [p for p in params if p.ndim >= 2]
    rest = [p for p in params if p.ndim < 2]
    adamw = lambda ps, wd: nn.optim.AdamW(ps, lr=1e-3, b1=0.9, b2=0.99, eps=1e-8, weight_decay=wd)
    opt = nn.optim.OptimizerGroup(adamw(decay, 0.1), adamw(rest, 0.0))
    data = Tensor.randint(100_000, low=0, high=vocab).realize()

    @TinyJit
    def step():
        with Context(TRAINING=1):  # tinygrad 0.14 gates the optimizer on TRAINING
            starts = Tensor.randint(bs, low=0, high=data.shape[0] - block)
            w = data[starts.unsqueeze(1) + Tensor.arange(block + 1)]
            x, y = w[:, :-1], w[:, 1:]
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y)
            loss.backward()
            return loss.realize(*opt.schedule_step())

    def timed():
        t = time.perf_counter()
        loss = step().item()
        return time.perf_counter() - t, loss

    first, _ = timed()
    timed()  # the capture
    GlobalCounters.reset()
    timed()
    kernels = GlobalCounters.kernel_count  # what one replay runs
    times = sorted(timed()[0] for _ in range(steps))
    print(json.dumps({
        "engine": "tinygrad", "device": Device.DEFAULT, "n_layer": n_layer, "n_head": n_head, "n_embd": c, "block": block,
        "bs": bs, "kernels_per_step": kernels, "first_call_s": round(first, 2),
        "ms_per_step": round(times[steps // 2] * 1e3, 1), "steps": steps,
    }))


if __name__ == "__main__":
    main()
