#!/usr/bin/env python3
"""Generate the optimizer reference fixtures: tests/fixtures/optim.json.

Run once by hand from the repository root (NOT run in CI; the output is committed):

    python3 scripts/gen_optim_fixtures.py

Needs numpy and torch (CPU build is enough). The output is deterministic (fixed seed).

Each config holds float32 initial parameters, a fixed sequence of STEPS gradient sets (one
gradient per parameter per step) and the parameters after each step. SGD, Adam and AdamW come
from torch.optim; LAMB, LARS and Muon have no torch.optim counterpart and are written below in
numpy (float64, rounded to float32 for storage), following tinygrad/nn/optim.py formula for
formula, which is what src/nn/optim.rs implements.

Format:
    {"configs": [
        {"name": unique name,
         "opt":  "sgd" | "adam" | "adamw" | "lamb" | "lars" | "muon"  (the wgrad struct),
         "hp":   {setter name: value}  (hyperparameters that differ from the struct's defaults;
                 every key is the name of a chainable setter in src/nn/optim.rs),
         "params":   [{"shape": [...], "data": [flat f32]}],
         "grads":    [[flat per param] per step],
         "expected": [[flat per param] per step]  (parameters after each step)}]}
"""
import json
import os

import numpy as np
import torch

SEED = 4321
STEPS = 3
SHAPES = [(4, 3), (3,)]
rng = np.random.default_rng(SEED)

# Defaults of the wgrad structs (= tinygrad's, except Muon's lr/momentum, see src/nn/optim.rs).
LARS_DEFAULTS = dict(lr=0.001, momentum=0.9, weight_decay=1e-4, nesterov=False, classic=True, tcoef=0.001)
LAMB_DEFAULTS = dict(lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0)
MUON_DEFAULTS = dict(lr=0.02, momentum=0.95, weight_decay=0.0, nesterov=True)
NS_COEFFS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7


def f32(a):
    return np.asarray(a, dtype=np.float32)


def make_data(shapes):
    params = [f32(rng.standard_normal(s)) for s in shapes]
    grads = [[f32(rng.standard_normal(s)) for s in shapes] for _ in range(STEPS)]
    return params, grads


# ------------------------------------------------------------------------------ torch references


def run_torch(make_opt, params, grads):
    ts = [torch.tensor(p, dtype=torch.float32, requires_grad=True) for p in params]
    opt = make_opt(ts)
    out = []
    for gs in grads:
        for t, g in zip(ts, gs):
            t.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        out.append([t.detach().numpy().copy() for t in ts])
    return out


# ------------------------------------------------------------------------------ numpy references


def norm(x):
    return np.sqrt(np.sum(np.square(x)))


def newton_schulz(g2d):
    """Quintic Newton-Schulz orthogonalisation of a 2-D matrix (tinygrad / Keller Jordan)."""
    a, b, c = NS_COEFFS
    x = g2d
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    x = x / (norm(x) + NS_EPS)
    for _ in range(NS_STEPS):
        A = x @ x.T
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return x.T if transposed else x


def run_lars(params, grads, lr, momentum, weight_decay, nesterov, classic, tcoef, ns=False):
    """tinygrad's LARS._step: SGD (tcoef 0), LARS and Muon (ns=True, 2-D+ params only)."""
    ts = [p.astype(np.float64) for p in params]
    bufs = [np.zeros_like(t) for t in ts]
    out = []
    for gs in grads:
        for i, g in enumerate(gs):
            t, g = ts[i], g.astype(np.float64)
            if tcoef != 0:
                r1, r2 = norm(t), norm(g)
                r = (tcoef * r1 / (r2 + weight_decay * r1)) if (r1 > 0 and r2 > 0) else 1.0
            else:
                r = 1.0
            if weight_decay > 0:
                g = g + weight_decay * t
            if classic:
                g = g * r * lr
            if momentum:
                bufs[i] = momentum * bufs[i] + g
                g = (g + momentum * bufs[i]) if nesterov else bufs[i]
            if ns and t.ndim >= 2:
                rows = t.shape[0]
                g2d = g.reshape(rows, -1)
                g = newton_schulz(g2d) * np.sqrt(max(1.0, g2d.shape[0] / g2d.shape[1]))
                g = g.reshape(t.shape)
            if not classic:
                g = g * r * lr
            ts[i] = t - g
        out.append([f32(t) for t in ts])
    return out


def run_lamb(params, grads, lr, b1, b2, eps, weight_decay, adam=False):
    """tinygrad's LAMB._step (adam=True: Adam / AdamW)."""
    ts = [p.astype(np.float64) for p in params]
    ms = [np.zeros_like(t) for t in ts]
    vs = [np.zeros_like(t) for t in ts]
    b1_t = b2_t = 1.0
    out = []
    for gs in grads:
        b1_t *= b1
        b2_t *= b2
        for i, g in enumerate(gs):
            t, g = ts[i], g.astype(np.float64)
            ms[i] = b1 * ms[i] + (1.0 - b1) * g
            vs[i] = b2 * vs[i] + (1.0 - b2) * (g * g)
            m_hat = ms[i] / (1.0 - b1_t)
            v_hat = vs[i] / (1.0 - b2_t)
            up = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * t
            if not adam:
                r1, r2 = norm(t), norm(up)
                r = (r1 / r2) if (r1 > 0 and r2 > 0) else 1.0
            else:
                r = 1.0
            ts[i] = t - lr * r * up
        out.append([f32(t) for t in ts])
    return out


# ------------------------------------------------------------------------------ configs


def config(name, opt, hp, shapes, run):
    params, grads = make_data(shapes)
    expected = run(params, grads)
    return {
        "name": name,
        "opt": opt,
        "hp": hp,
        "params": [{"shape": list(p.shape), "data": p.ravel().tolist()} for p in params],
        "grads": [[g.ravel().tolist() for g in gs] for gs in grads],
        "expected": [[p.ravel().tolist() for p in ps] for ps in expected],
    }


def cross_check():
    """The numpy cores reproduce torch.optim where both exist (SGD and AdamW)."""
    params, grads = make_data(SHAPES)

    def worst(a, b):
        return max(np.abs(x - y).max() for xs, ys in zip(a, b) for x, y in zip(xs, ys))

    want = run_torch(lambda ts: torch.optim.SGD(ts, lr=0.1, momentum=0.9, nesterov=True,
                                                weight_decay=0.01), params, grads)
    got = run_lars(params, grads, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True,
                   classic=False, tcoef=0.0)
    assert worst(want, got) < 1e-6, "numpy LARS core disagrees with torch SGD"
    want = run_torch(lambda ts: torch.optim.AdamW(ts, lr=0.01, weight_decay=0.1), params, grads)
    got = run_lamb(params, grads, lr=0.01, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.1, adam=True)
    assert worst(want, got) < 1e-6, "numpy LAMB core disagrees with torch AdamW"


# ------------------------------------------------------------------------------ schedules, clipping
# (h-conv) "schedules": [{"name", "lr": base learning rate, "schedule": {"kind", ...the fields of
# wgrad's LrSchedule variant}, "lrs": [the learning rate of step k, k = 0..]}], from torch's
# schedulers stepped after each optimizer step. "clipping": [{"name", "max_norm", "norm_type"
# (null: infinity), "shapes", "grads": [flat per param], "norm", "clipped": [flat per param]}]
# from torch.nn.utils.clip_grad_norm_.


def torch_lrs(make_sched, lr, steps):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr)
    sched = make_sched(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    return out


def schedules():
    S = torch.optim.lr_scheduler
    cases = []

    def add(name, lr, schedule, make, steps):
        cases.append({"name": name, "lr": lr, "schedule": schedule, "lrs": torch_lrs(make, lr, steps)})

    add("linear_warmup", 0.1, {"kind": "linear", "start_factor": 0.1, "end_factor": 1.0, "total_steps": 5},
        lambda o: S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=5), 12)
    add("linear_decay", 0.05, {"kind": "linear", "start_factor": 1.0, "end_factor": 0.25, "total_steps": 7},
        lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.25, total_iters=7), 12)
    add("step", 0.1, {"kind": "step", "step_size": 3, "gamma": 0.5},
        lambda o: S.StepLR(o, step_size=3, gamma=0.5), 14)
    add("exponential", 0.2, {"kind": "exponential", "gamma": 0.9},
        lambda o: S.ExponentialLR(o, gamma=0.9), 25)
    add("cosine", 0.1, {"kind": "cosine", "warmup_steps": 0, "start_factor": 1.0, "total_steps": 12,
                        "min_lr": 0.001},
        lambda o: S.CosineAnnealingLR(o, T_max=12, eta_min=0.001), 13)
    add("cosine_warmup", 0.1, {"kind": "cosine", "warmup_steps": 4, "start_factor": 0.25, "total_steps": 16,
                               "min_lr": 0.0},
        lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4),
                                     S.CosineAnnealingLR(o, T_max=12, eta_min=0.0)], milestones=[4]), 17)
    add("onecycle", 0.1, {"kind": "onecycle", "total_steps": 20, "pct_start": 0.3, "div_factor": 25.0,
                          "final_div_factor": 1e4},
        lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=20, pct_start=0.3, anneal_strategy="cos",
                               cycle_momentum=False, div_factor=25.0, final_div_factor=1e4), 20)
    return cases


def clipping():
    crng = np.random.default_rng(SEED + 1)
    shapes = [(4, 3), (3,), (2, 2, 2)]
    cases = []
    for name, max_norm, norm_type in [("l2_clipped", 1.0, 2.0), ("l2_unclipped", 100.0, 2.0),
                                      ("inf_clipped", 0.5, float("inf")), ("l1_clipped", 2.0, 1.0),
                                      ("l3_clipped", 0.7, 3.0)]:
        grads = [f32(crng.standard_normal(s) * 2.0) for s in shapes]
        ts = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in shapes]
        for t, g in zip(ts, grads):
            t.grad = torch.tensor(g, dtype=torch.float64)
        norm = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type=norm_type)
        cases.append({
            "name": name, "max_norm": max_norm, "norm_type": None if norm_type == float("inf") else norm_type,
            "shapes": [list(s) for s in shapes], "grads": [g.ravel().tolist() for g in grads],
            "norm": float(norm), "clipped": [t.grad.numpy().astype(np.float32).ravel().tolist() for t in ts],
        })
    return cases


def main():
    cross_check()
    configs = []

    hp = {"lr": 0.1}
    configs.append(config("sgd", "sgd", hp, SHAPES, lambda p, g: run_torch(
        lambda ts: torch.optim.SGD(ts, lr=0.1), p, g)))

    hp = {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}
    configs.append(config("sgd_momentum_nesterov_wd", "sgd", hp, SHAPES, lambda p, g: run_torch(
        lambda ts: torch.optim.SGD(ts, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), p, g)))

    hp = {"lr": 0.1, "momentum": 0.9}
    configs.append(config("sgd_momentum", "sgd", hp, SHAPES, lambda p, g: run_torch(
        lambda ts: torch.optim.SGD(ts, lr=0.1, momentum=0.9), p, g)))

    hp = {"lr": 0.01}
    configs.append(config("adam", "adam", hp, SHAPES, lambda p, g: run_torch(
        lambda ts: torch.optim.Adam(ts, lr=0.01, betas=(0.9, 0.999), eps=1e-8), p, g)))

    hp = {"lr": 0.01, "weight_decay": 0.1}
    configs.append(config("adamw", "adamw", hp, SHAPES, lambda p, g: run_torch(
        lambda ts: torch.optim.AdamW(ts, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1), p, g)))

    hp = {"lr": 0.01, "weight_decay": 0.01}
    configs.append(config("lamb", "lamb", hp, SHAPES, lambda p, g: run_lamb(
        p, g, **{**LAMB_DEFAULTS, **hp})))

    hp = {"lr": 1.0}
    configs.append(config("lars", "lars", hp, SHAPES, lambda p, g: run_lars(
        p, g, **{**LARS_DEFAULTS, **hp})))

    hp = {}
    configs.append(config("muon", "muon", hp, SHAPES, lambda p, g: run_lars(
        p, g, classic=False, tcoef=0.0, ns=True, **MUON_DEFAULTS)))

    # A wide 3-D param (reshaped to (2, 6): no transpose) and a tall one ((6, 2): transposed,
    # scaled by sqrt(3)), with weight decay.
    hp = {"weight_decay": 0.01}
    configs.append(config("muon_nd_wd", "muon", hp, [(2, 3, 2), (6, 2), (3,)], lambda p, g: run_lars(
        p, g, classic=False, tcoef=0.0, ns=True, **{**MUON_DEFAULTS, **hp})))

    out = {"configs": configs, "schedules": schedules(), "clipping": clipping()}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "optim.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(configs)} configs to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
