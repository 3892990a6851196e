#!/usr/bin/env python3
"""The PyTorch twin of examples/gpt.rs: the same char-level GPT, data, initialisation and recipe,
so the two validation losses can be compared (the random streams differ: initial weights and
batches are drawn by each library's own generator).

    bash scripts/data.sh && python3 scripts/gpt_torch.py     # the same knobs as the example

Knobs (environment, defaults as examples/gpt.rs): N_LAYER 2, N_HEAD 4, N_EMBD 64, BLOCK 64,
BS 16, STEPS 2000, LR 1e-2, WARMUP 100, EVAL_EVERY 250, EVAL_WINDOWS 256, SEED 42, BIAS 0,
WGRAD_DATA (data directory).

The model is nanoGPT's (pre-LayerNorm blocks, causal self-attention, tanh GELU MLP of width 4C,
final LayerNorm, the output layer tied to the token embedding, no dropout; biases in the Linear
layers and LayerNorms only with BIAS=1, as nanoGPT's train.py defaults to none), initialised
as nanoGPT does: every Linear and Embedding weight from N(0, 0.02), the residual projections
(attn.c_proj, mlp.c_proj) from N(0, 0.02 / sqrt(2 N_LAYER)), biases 0, LayerNorms 1 and 0. The
recipe is nanoGPT's too: AdamW with betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the
matrices (Linear and Embedding weights) and none on biases and LayerNorms, a linear warmup of
WARMUP steps, then a cosine decay to LR / 10 at the last step; batches of BS windows of BLOCK
characters at uniformly random offsets of the training text.

Validation loss: the mean cross-entropy over consecutive, non-overlapping windows of BLOCK + 1
characters from the start of the validation text, in whole batches of 128 windows (EVAL_WINDOWS
rounded down every EVAL_EVERY steps, and at the end as many as fit), as the example does.
"""
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

EVAL_BATCH = 128


def env(name, default):
    v = os.environ.get(name)
    return type(default)(v) if v not in (None, "") else default


class Attention(nn.Module):
    def __init__(self, c, n_head, bias):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(c, 3 * c, bias=bias)
        self.c_proj = nn.Linear(c, c, bias=bias)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, c, bias):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c, bias=bias)
        self.c_proj = nn.Linear(4 * c, c, bias=bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, n_head, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, bias=bias)
        self.attn = Attention(c, n_head, bias)
        self.ln_2 = nn.LayerNorm(c, bias=bias)
        self.mlp = Mlp(c, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, c, bias):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(block, c)
        self.h = nn.ModuleList([Block(c, n_head, bias) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(c, bias=bias)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight[:t]
        for blk in self.h:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()


def lr_at(step, lr, warmup, steps):
    """nanoGPT's schedule: linear warmup, then cosine decay to lr / 10 at the last step."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    ratio = (step - warmup) / max(1, steps - warmup)
    return lr / 10 + 0.5 * (1 + math.cos(math.pi * min(ratio, 1.0))) * (lr - lr / 10)


def main():
    torch.manual_seed(env("SEED", 42))
    n_layer, n_head, c = env("N_LAYER", 2), env("N_HEAD", 4), env("N_EMBD", 64)
    block, bs, steps = env("BLOCK", 64), env("BS", 16), env("STEPS", 2000)
    lr, warmup = env("LR", 1e-2), env("WARMUP", 100)
    eval_every, eval_windows = env("EVAL_EVERY", 250), env("EVAL_WINDOWS", 256)
    data = os.environ.get("WGRAD_DATA", "data")
    train_text = open(f"{data}/shakespeare/train.txt", encoding="ascii").read()
    val_text = open(f"{data}/shakespeare/val.txt", encoding="ascii").read()
    chars = sorted(set(train_text + val_text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    train = torch.tensor([stoi[ch] for ch in train_text], dtype=torch.long)
    val = torch.tensor([stoi[ch] for ch in val_text], dtype=torch.long)

    model = GPT(len(chars), block, n_layer, n_head, c, env("BIAS", 0) != 0)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.99), eps=1e-8)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads: GPT {n_layer} layers, "
          f"{n_head} heads, width {c}, context {block}, vocabulary {len(chars)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters; batch {bs}, {steps} steps")

    @torch.no_grad()
    def val_loss(windows):
        """Mean loss over the first `windows` windows, in whole batches of EVAL_BATCH (at least one)."""
        total = (len(val) - 1) // block
        batches = min(max(1, windows // EVAL_BATCH), total // EVAL_BATCH)
        loss = 0.0
        for b in range(batches):
            starts = torch.arange(b * EVAL_BATCH, (b + 1) * EVAL_BATCH) * block
            w = val[starts[:, None] + torch.arange(block + 1)]
            loss += F.cross_entropy(model(w[:, :-1]).flatten(0, 1), w[:, 1:].flatten()).item()
        return loss / batches

    start = time.time()
    t_steps = 0.0
    warmup = min(warmup, max(steps - 1, 0))
    for i in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(i, lr, warmup, steps)
        t0 = time.perf_counter()
        ix = torch.randint(len(train) - block, (bs,))
        w = train[ix[:, None] + torch.arange(block + 1)]
        logits = model(w[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), w[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t_steps += time.perf_counter() - t0
        if (i + 1) % eval_every == 0 and i + 1 < steps:
            print(f"step {i + 1:5}  loss {loss.item():6.3f}  val {val_loss(eval_windows):6.4f}  "
                  f"{t_steps * 1e3 / (i + 1):6.1f} ms/step", flush=True)
    whole = (len(val) - 1) // block // EVAL_BATCH * EVAL_BATCH
    print(f"validation loss {val_loss(whole):.4f} after {steps} steps ({whole} windows of "
          f"{block}; {time.time() - start:.0f} s, {t_steps * 1e3 / max(steps, 1):.1f} ms per step)")


if __name__ == "__main__":
    main()
