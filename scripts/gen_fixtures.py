#!/usr/bin/env python3
"""Generate the op-suite reference fixtures: tests/fixtures/ops.json.

Run once by hand from the repository root (NOT run in CI; the output is committed):

    python3 scripts/gen_fixtures.py

Needs numpy and torch (CPU build is enough). The output is deterministic (fixed seed).

Every case holds float32 inputs (or i32 / bool / u8 inputs), the forward output computed by
torch in float64 from those float32 values and rounded back to float32, and, for float outputs
with at least one differentiable input, the gradients of

    loss = sum(output * upstream)

with respect to every input marked "grad": true, where "upstream" is a fixed random array stored
in the case.

Case format:
    {"name": unique case name,
     "op":   which wgrad operation tests/ops.rs runs (several cases share one op),
     "args": op parameters (see ARGS CONVENTION below),
     "atol": optional forward absolute tolerance override (default 1e-6 in tests/ops.rs),
     "inputs": [{"shape": [...], "dtype": "f32"|"i32"|"bool"|"u8", "data": [flat], "grad": bool}],
     "output": {"shape": [...], "dtype": ..., "data": [flat]},
     "upstream": [flat]            (only when some input has grad),
     "grads": [[flat] or null, ...] (one per input)}

ARGS CONVENTION (inputs are in call order: inputs[0] is `self`):
    binary ops / comparisons: {"scalar": v} -> rhs is the f64 scalar v (one input), else {} and
        rhs is inputs[1]
    where_:        inputs cond, a, b; or {"b": v} -> cond.where_(a, v)
    elu {"alpha"}, leaky_relu {"slope"}, hardtanh / clip {"min", "max"}, cast {"dtype"},
    dropout {"p"}
    sum/mean/max/min/logsumexp: {"axes": null (= Axes::All) | [isize...], "keepdim": bool}
    var/std: same plus {"correction": f64}
    softmax/log_softmax: {"axis"}; argmax/argmin: {"axis": null | isize, "keepdim"}
    reshape/expand {"shape"}, permute {"order"}, transpose {"a", "b"}, flatten {"start_dim"},
    squeeze {"axis": null | isize}, unsqueeze {"axis"}, pad {"pads": [[before, after]...], "value"},
    shrink {"ranges": [[start, end]...]}, slice {"axis", "start", "end", "step"}, flip {"axes"},
    cat/stack {"axis"} (all inputs), split {"sizes", "axis", "piece"}, chunk {"n", "axis", "piece"}
    (output = returned piece number `piece`), repeat {"repeats"}
    index: inputs x, idx;  gather {"axis"}: inputs x, index
    matmul/dot: inputs a, b;  linear: inputs x, w[, b]
    conv2d {"stride": [sh, sw], "padding": "valid" | "same" | [ph, pw], "dilation": [dh, dw],
            "groups"}: inputs x, w[, b]
    max_pool2d/avg_pool2d {"kernel": [kh, kw], "stride": null | [sh, sw]}
    sparse_categorical_crossentropy {"ignore_index": null | int, "label_smoothing", "reduction"}
    binary_crossentropy / binary_crossentropy_logits / mse {"reduction": "mean"|"sum"|"none"}
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

SEED = 1234
rng = np.random.default_rng(SEED)
torch.manual_seed(SEED)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ops.json")

cases = []
names = set()


# ----------------------------------------------------------------------------- input helpers
def f32(a):
    return np.asarray(a, dtype=np.float32)


def uni(shape, lo=-2.0, hi=2.0):
    return f32(rng.uniform(lo, hi, size=shape))


def away(shape, lo, hi, points, margin=0.1):
    """Uniform in [lo, hi) but at least `margin` away from every point in `points`."""
    x = rng.uniform(lo, hi, size=shape)
    for _ in range(1000):
        bad = np.zeros(x.shape, dtype=bool)
        for p in points:
            bad |= np.abs(x - p) < margin
        if not bad.any():
            break
        x[bad] = rng.uniform(lo, hi, size=int(bad.sum()))
    return f32(x)


def distinct(shape, lo=-2.0, hi=2.0):
    """Values with pairwise gaps (no ties anywhere): a shuffled grid plus small jitter."""
    n = int(np.prod(shape)) if len(shape) else 1
    grid = np.linspace(lo, hi, n)
    step = (hi - lo) / max(n - 1, 1)
    x = rng.permutation(grid) + rng.uniform(-0.25, 0.25, size=n) * step
    return f32(x.reshape(shape))


def ints(shape, lo, hi):
    return rng.integers(lo, hi, size=shape).astype(np.int32)


def I(arr, dtype=None, grad=None):
    """An input: (numpy array, dtype name, grad flag). Float inputs default to grad=True."""
    arr = np.asarray(arr)
    if dtype is None:
        dtype = {np.float32: "f32", np.int32: "i32", np.bool_: "bool", np.uint8: "u8"}[arr.dtype.type]
    if grad is None:
        grad = dtype == "f32"
    return (arr, dtype, grad)


def dtype_name(t):
    if t.dtype == torch.bfloat16:
        return "bf16"
    if t.dtype.is_floating_point:
        return "f32"
    if t.dtype == torch.bool:
        return "bool"
    if t.dtype == torch.uint8:
        return "u8"
    return "i32"


def fl(v, signed_zero=False):
    """float32-rounded value, written with the shortest repr that round-trips through float32
    (-0.0 kept as such with `signed_zero`, for inputs)."""
    v = np.float32(v)
    assert np.isfinite(v), v
    if signed_zero and v == 0 and np.signbit(v):
        return -0.0
    s = str(v)
    f = float(s)
    return int(f) if f == int(f) and abs(f) < 1e15 else f


def flat(arr, dtype, signed_zero=False):
    if dtype == "bf16":
        arr = arr.astype(np.float32) if hasattr(arr, "astype") else arr
        dtype = "f32"
    arr = np.asarray(arr).reshape(-1)
    if dtype == "f32":
        return [fl(v, signed_zero) for v in arr]
    if dtype == "bool":
        return [bool(v) for v in arr]
    return [int(v) for v in arr]


# ----------------------------------------------------------------------------- case builder
def case(name, op, inputs, fn, args=None, atol=None):
    assert name not in names, name
    names.add(name)
    tins = []
    for arr, dt, grad in inputs:
        if dt == "f32":
            t = torch.tensor(arr.astype(np.float64), dtype=torch.float64, requires_grad=grad)
        elif dt == "i32":
            t = torch.tensor(arr.astype(np.int64), dtype=torch.int64)
        elif dt == "bool":
            t = torch.tensor(arr.astype(bool))
        elif dt == "u8":
            t = torch.tensor(arr.astype(np.uint8))
        else:
            raise ValueError(dt)
        tins.append(t)
    out = fn(*tins)
    odt = dtype_name(out)
    c = {
        "name": name,
        "op": op,
        "args": args or {},
        "inputs": [
            {"shape": list(arr.shape), "dtype": dt, "data": flat(arr, dt, True), "grad": bool(grad)}
            for arr, dt, grad in inputs
        ],
        "output": {"shape": list(out.shape), "dtype": odt,
                   "data": flat(out.detach().float().numpy() if odt == "bf16" else out.detach().numpy(), odt)},
    }
    if atol is not None:
        c["atol"] = atol
    grads = [None] * len(inputs)
    if odt == "f32" and any(g for _, _, g in inputs):
        up = f32(rng.standard_normal(size=tuple(out.shape)))
        c["upstream"] = flat(up, "f32")
        loss = (out * torch.tensor(up.astype(np.float64))).sum()
        loss.backward()
        for i, (t, (_, _, g)) in enumerate(zip(tins, inputs)):
            if g:
                gr = t.grad if t.grad is not None else torch.zeros_like(t)
                grads[i] = flat(gr.numpy(), "f32")
    c["grads"] = grads
    cases.append(c)
    self_check(c, inputs, fn)


def self_check(c, inputs, fn):
    """Evaluate the case again in float32 torch and check it passes the tolerances tests/ops.rs uses
    (forward atol 1e-6 or the case's "atol", rtol 1e-3; gradients atol 1e-4, rtol 1e-3)."""
    tins = []
    for arr, dt, grad in inputs:
        if dt == "f32":
            tins.append(torch.tensor(arr, dtype=torch.float32, requires_grad=grad))
        elif dt == "i32":
            tins.append(torch.tensor(arr.astype(np.int64)))
        elif dt == "bool":
            tins.append(torch.tensor(arr.astype(bool)))
        else:
            tins.append(torch.tensor(arr.astype(np.uint8)))
    out = fn(*tins)

    def bad(got, want, atol, rtol):
        got = np.asarray(got, dtype=np.float64).reshape(-1)
        want = np.asarray(want, dtype=np.float64).reshape(-1)
        return np.max(np.abs(got - want) - (atol + rtol * np.abs(want)), initial=-1.0)

    b = bad(out.detach().double().numpy(), c["output"]["data"], c.get("atol", 1e-6), 1e-3)
    if b > 0:
        print(f"warning: {c['name']}: float32 forward exceeds tolerance by {b:.3g}")
    if "upstream" in c:
        (out * torch.tensor(c["upstream"], dtype=out.dtype).reshape(out.shape)).sum().backward()
        for t, g in zip(tins, c["grads"]):
            if g is not None:
                gr = t.grad if t.grad is not None else torch.zeros_like(t)
                b = bad(gr.double().numpy(), g, 1e-4, 1e-3)
                if b > 0:
                    print(f"warning: {c['name']}: float32 grad exceeds tolerance by {b:.3g}")


# ----------------------------------------------------------------------------- unary
S = (3, 4)
case("neg", "neg", [I(uni(S))], lambda x: -x)
case("exp", "exp", [I(uni(S))], torch.exp)
case("log", "log", [I(uni(S, 0.2, 4.0))], torch.log)
case("exp2", "exp2", [I(uni(S))], torch.exp2)
case("log2", "log2", [I(uni(S, 0.2, 4.0))], torch.log2)
case("sqrt", "sqrt", [I(uni(S, 0.1, 4.0))], torch.sqrt)
case("rsqrt", "rsqrt", [I(uni(S, 0.2, 4.0))], torch.rsqrt)
case("sin", "sin", [I(uni(S, -3, 3))], torch.sin)
case("cos", "cos", [I(uni(S, -3, 3))], torch.cos)
case("tan", "tan", [I(uni(S, -1.2, 1.2))], torch.tan)
case("relu", "relu", [I(away(S, -2, 2, [0]))], torch.relu)
case("sigmoid", "sigmoid", [I(uni(S, -4, 4))], torch.sigmoid)
case("tanh", "tanh", [I(uni(S, -3, 3))], torch.tanh)
case("gelu", "gelu", [I(uni(S, -3, 3))], lambda x: F.gelu(x, approximate="tanh"))
case("silu", "silu", [I(uni(S, -4, 4))], F.silu)
case("softplus", "softplus", [I(uni(S, -4, 4))], lambda x: F.softplus(x, beta=1))
case("abs", "abs", [I(away(S, -2, 2, [0]))], torch.abs)
case("sign", "sign", [I(away(S, -2, 2, [0]))], torch.sign)
case("reciprocal", "reciprocal", [I(away(S, -2, 2, [0], 0.3))], torch.reciprocal)
case("square", "square", [I(uni(S))], torch.square)
case("elu", "elu", [I(away(S, -3, 3, [0]))], lambda x: F.elu(x, alpha=1.0), {"alpha": 1.0})
case("relu6", "relu6", [I(away(S, -3, 9, [0, 6], 0.2))], F.relu6)
case("hardtanh", "hardtanh", [I(away(S, -2, 2, [-1, 1]))], lambda x: F.hardtanh(x, -1.0, 1.0),
     {"min": -1.0, "max": 1.0})
case("hardtanh_wide", "hardtanh", [I(away(S, -4, 4, [-2.5, 0.5]))], lambda x: F.hardtanh(x, -2.5, 0.5),
     {"min": -2.5, "max": 0.5})
case("hardsigmoid", "hardsigmoid", [I(away(S, -5, 5, [-3, 3], 0.2))], F.hardsigmoid)
case("hardswish", "hardswish", [I(away(S, -5, 5, [-3, 3], 0.2))], F.hardswish)
case("mish", "mish", [I(uni(S, -4, 4))], lambda x: x * torch.tanh(F.softplus(x)))
case("leaky_relu", "leaky_relu", [I(away(S, -2, 2, [0]))], lambda x: F.leaky_relu(x, 0.01), {"slope": 0.01})
case("leaky_relu_02", "leaky_relu", [I(away(S, -2, 2, [0]))], lambda x: F.leaky_relu(x, 0.2), {"slope": 0.2})
case("clip", "clip", [I(away(S, -2, 2, [-0.5, 1.0]))], lambda x: torch.clamp(x, -0.5, 1.0),
     {"min": -0.5, "max": 1.0})
case("dropout_eval", "dropout", [I(uni(S))], lambda x: x * 1.0, {"p": 0.5})
case("logical_not", "logical_not", [I(rng.random(S) < 0.5)], torch.logical_not)

# ----------------------------------------------------------------------------- binary
def binop(name, op, fn, xa, xb):
    case(name, op, [I(xa), I(xb)], fn)


binop("add", "add", torch.add, uni(S), uni(S))
binop("sub", "sub", torch.sub, uni(S), uni(S))
binop("mul", "mul", torch.mul, uni(S), uni(S))
binop("div", "div", torch.div, uni(S), away(S, -2, 2, [0], 0.5))
binop("pow", "pow", torch.pow, uni(S, 0.5, 2.0), uni(S, -1.5, 1.5))
xa = distinct(S)
xb = distinct(S)
assert not (xa == xb).any()
binop("maximum", "maximum", torch.maximum, xa, xb)
binop("minimum", "minimum", torch.minimum, distinct(S), distinct(S))
binop("add_bcast", "add", torch.add, uni((3, 1)), uni((1, 4)))
binop("sub_bcast_rank", "sub", torch.sub, uni((2, 3, 4)), uni((4,)))
binop("mul_bcast", "mul", torch.mul, uni((2, 3, 4)), uni((3, 1)))
binop("div_bcast", "div", torch.div, uni((2, 3)), away((2, 1), -2, 2, [0], 0.5))
binop("pow_bcast", "pow", torch.pow, uni((2, 3), 0.5, 2.0), uni((1, 3), -1.5, 1.5))
binop("maximum_bcast", "maximum", torch.maximum, distinct((2, 3)), distinct((3,)) + f32(0.0371))


def scal(name, op, fn, x, s):
    case(name, op, [I(x)], lambda t: fn(t, s), {"scalar": s})


scal("add_scalar", "add", torch.add, uni(S), 1.5)
scal("sub_scalar", "sub", torch.sub, uni(S), -0.75)
scal("mul_scalar", "mul", torch.mul, uni(S), 2.5)
scal("div_scalar", "div", torch.div, uni(S), 4.0)
scal("pow_scalar", "pow", torch.pow, uni(S, 0.3, 2.0), 2.5)
scal("pow_scalar_neg", "pow", torch.pow, uni(S, 0.3, 2.0), -0.5)
scal("maximum_scalar", "maximum", lambda t, v: torch.clamp(t, min=v), away(S, -2, 2, [0.25]), 0.25)
scal("minimum_scalar", "minimum", lambda t, v: torch.clamp(t, max=v), away(S, -2, 2, [-0.5]), -0.5)

case("add_i32", "add", [I(ints(S, -50, 50)), I(ints(S, -50, 50))], torch.add)
case("mul_i32", "mul", [I(ints(S, -20, 20)), I(ints(S, -20, 20))], torch.mul)
case("maximum_i32", "maximum", [I(ints(S, -9, 9)), I(ints((1, 4), -9, 9))], torch.maximum)
case("add_i32_scalar", "add", [I(ints(S, -50, 50))], lambda t: t + 7, {"scalar": 7.0})

# ----------------------------------------------------------------------------- comparisons
ca = f32(ints(S, -2, 3))
cb = f32(ints(S, -2, 3))
for nm in ["lt", "le", "gt", "ge", "eq", "ne"]:
    fn = getattr(torch, nm)
    case(nm, nm, [I(ca, grad=False), I(cb, grad=False)], fn)
case("lt_scalar", "lt", [I(ca, grad=False)], lambda t: t < 0.5, {"scalar": 0.5})
case("eq_scalar", "eq", [I(ca, grad=False)], lambda t: t == 1.0, {"scalar": 1.0})
case("gt_bcast", "gt", [I(ca, grad=False), I(f32([[0.0, 1.0, -1.0, 2.0]]), grad=False)], torch.gt)
case("eq_i32", "eq", [I(ints(S, 0, 3)), I(ints(S, 0, 3))], torch.eq)

# ----------------------------------------------------------------------------- where / cast
cond = rng.random(S) < 0.5
case("where", "where_", [I(cond), I(uni(S)), I(uni(S))], torch.where)
case("where_bcast", "where_", [I(rng.random((3, 1)) < 0.5), I(uni((1, 4))), I(uni((3, 4)))], torch.where)
case("where_scalar", "where_", [I(cond), I(uni(S))], lambda c, a: torch.where(c, a, torch.tensor(-1.5, dtype=a.dtype)),
     {"b": -1.5})
ct = away(S, -5, 5, [-4, -3, -2, -1, 0, 1, 2, 3, 4], 0.05)
case("cast_f32_i32", "cast", [I(ct, grad=False)], lambda t: t.to(torch.int32), {"dtype": "i32"})
case("cast_i32_f32", "cast", [I(ints(S, -100, 100))], lambda t: t.to(torch.float64), {"dtype": "f32"})
case("cast_bool_f32", "cast", [I(rng.random(S) < 0.5)], lambda t: t.to(torch.float64), {"dtype": "f32"})
case("cast_u8_f32", "cast", [I(rng.integers(0, 256, size=S).astype(np.uint8))], lambda t: t.to(torch.float64),
     {"dtype": "f32"})
case("cast_f32_u8", "cast", [I(away(S, 0, 200, list(range(0, 201)), 0.05), grad=False)],
     lambda t: t.to(torch.uint8), {"dtype": "u8"})
cz = uni(S)
cz[0, 1] = 0.0
cz[2, 3] = 0.0
case("cast_f32_bool", "cast", [I(cz, grad=False)], lambda t: t.to(torch.bool), {"dtype": "bool"})
case("cast_bool_i32", "cast", [I(rng.random(S) < 0.5)], lambda t: t.to(torch.int32), {"dtype": "i32"})

# ----------------------------------------------------------------------------- reductions
S3 = (2, 3, 4)


def red(name, op, fn, x, axes, keepdim, atol=None):
    dims = tuple(range(x.ndim)) if axes is None else tuple(axes)
    case(name, op, [I(x)], lambda t: fn(t, dims, keepdim), {"axes": axes, "keepdim": keepdim}, atol)


tsum = lambda t, d, k: t.sum(dim=d, keepdim=k)
tmean = lambda t, d, k: t.mean(dim=d, keepdim=k)
tmax = lambda t, d, k: t.amax(dim=d, keepdim=k)
tmin = lambda t, d, k: t.amin(dim=d, keepdim=k)
tlse = lambda t, d, k: torch.logsumexp(t, dim=d, keepdim=k)

red("sum_axis1", "sum", tsum, uni(S), [1], False)
red("sum_axis0_keepdim", "sum", tsum, uni(S), [0], True)
red("sum_axes02", "sum", tsum, uni(S3), [0, 2], False, 1e-5)
red("sum_neg_keepdim", "sum", tsum, uni(S3), [-1], True)
red("sum_all", "sum", tsum, uni(S3), None, False, 1e-5)
red("sum_all_keepdim", "sum", tsum, uni(S), None, True, 1e-5)
red("mean_axis1", "mean", tmean, uni(S), [1], False)
red("mean_axes02_keepdim", "mean", tmean, uni(S3), [0, 2], True)
red("mean_neg", "mean", tmean, uni(S3), [-2], False)
red("mean_all", "mean", tmean, uni(S3), None, False)
red("max_axis1", "max", tmax, distinct(S), [1], False)
red("max_axis0_keepdim", "max", tmax, distinct(S), [0], True)
red("max_neg_keepdim", "max", tmax, distinct(S3), [-2], True)
red("max_all", "max", tmax, distinct(S3), None, False)
red("min_axis1", "min", tmin, distinct(S), [1], False)
red("min_axes02", "min", tmin, distinct(S3), [0, 2], False)
red("min_all", "min", tmin, distinct(S), None, False)
red("logsumexp_axis1", "logsumexp", tlse, uni(S), [1], False)
red("logsumexp_neg_keepdim", "logsumexp", tlse, uni(S3), [-1], True)
red("logsumexp_all", "logsumexp", tlse, uni(S3), None, False)


def vs(name, op, x, axes, keepdim, corr):
    dims = tuple(range(x.ndim)) if axes is None else tuple(axes)
    f = torch.var if op == "var" else torch.std
    case(name, op, [I(x)], lambda t: f(t, dim=dims, keepdim=keepdim, correction=corr),
         {"axes": axes, "keepdim": keepdim, "correction": float(corr)}, 1e-5)


vs("var_axis1_c1", "var", uni(S), [1], False, 1)
vs("var_axis1_c0_keepdim", "var", uni(S), [1], True, 0)
vs("var_axes02_c0", "var", uni(S3), [0, 2], False, 0)
vs("var_all_c1", "var", uni(S3), None, False, 1)
vs("std_axis1_c1", "std", uni(S), [1], False, 1)
vs("std_axis0_c0_keepdim", "std", uni(S), [0], True, 0)
vs("std_neg_c1", "std", uni(S3), [-1], False, 1)
vs("std_all_c0", "std", uni(S3), None, False, 0)

case("softmax_axis1", "softmax", [I(uni(S, -3, 3))], lambda t: torch.softmax(t, 1), {"axis": 1})
case("softmax_axis0", "softmax", [I(uni(S, -3, 3))], lambda t: torch.softmax(t, 0), {"axis": 0})
case("softmax_neg", "softmax", [I(uni(S3, -3, 3))], lambda t: torch.softmax(t, -1), {"axis": -1})
case("log_softmax_axis1", "log_softmax", [I(uni(S, -3, 3))], lambda t: torch.log_softmax(t, 1), {"axis": 1})
case("log_softmax_3d_axis1", "log_softmax", [I(uni(S3, -3, 3))], lambda t: torch.log_softmax(t, 1), {"axis": 1})

case("argmax_none", "argmax", [I(distinct(S))], lambda t: torch.argmax(t), {"axis": None, "keepdim": False})
case("argmax_axis1", "argmax", [I(distinct(S))], lambda t: torch.argmax(t, 1), {"axis": 1, "keepdim": False})
case("argmax_neg_keepdim", "argmax", [I(distinct(S3))], lambda t: torch.argmax(t, -1, keepdim=True),
     {"axis": -1, "keepdim": True})
tie = f32([[1, 3, 3, 0], [2, 2, 2, 2], [-1, 5, 0, 5]])
case("argmax_ties", "argmax", [I(tie)], lambda t: torch.from_numpy(np.argmax(t.detach().numpy(), 1)),
     {"axis": 1, "keepdim": False})
case("argmin_axis0", "argmin", [I(distinct(S))], lambda t: torch.argmin(t, 0), {"axis": 0, "keepdim": False})
case("argmin_none", "argmin", [I(distinct(S3))], lambda t: torch.argmin(t), {"axis": None, "keepdim": False})
case("argmin_ties", "argmin", [I(tie)], lambda t: torch.from_numpy(np.argmin(t.detach().numpy(), 1)),
     {"axis": 1, "keepdim": False})

# ----------------------------------------------------------------------------- movement
case("reshape", "reshape", [I(uni(S3))], lambda t: t.reshape(4, -1), {"shape": [4, -1]})
case("reshape_3d", "reshape", [I(uni(S))], lambda t: t.reshape(2, -1, 3), {"shape": [2, -1, 3]})
case("permute", "permute", [I(uni(S3))], lambda t: t.permute(2, 0, 1), {"order": [2, 0, 1]})
case("permute_neg", "permute", [I(uni(S3))], lambda t: t.permute(1, -1, 0), {"order": [1, -1, 0]})
case("transpose", "transpose", [I(uni(S))], lambda t: t.transpose(0, 1), {"a": 0, "b": 1})
case("transpose_neg", "transpose", [I(uni(S3))], lambda t: t.transpose(-1, -3), {"a": -1, "b": -3})
case("expand", "expand", [I(uni((3, 1)))], lambda t: t.expand(3, 4), {"shape": [3, 4]})
case("expand_keep", "expand", [I(uni((2, 1, 4)))], lambda t: t.expand(-1, 3, -1), {"shape": [-1, 3, -1]})
case("flatten", "flatten", [I(uni(S3))], lambda t: t.flatten(1), {"start_dim": 1})
case("flatten_all", "flatten", [I(uni(S3))], lambda t: t.flatten(0), {"start_dim": 0})
case("flatten_neg", "flatten", [I(uni((2, 3, 2, 2)))], lambda t: t.flatten(-2), {"start_dim": -2})
case("squeeze_axis", "squeeze", [I(uni((2, 1, 3, 1)))], lambda t: t.squeeze(1), {"axis": 1})
case("squeeze_all", "squeeze", [I(uni((2, 1, 3, 1)))], lambda t: t.squeeze(), {"axis": None})
case("squeeze_neg", "squeeze", [I(uni((2, 3, 1)))], lambda t: t.squeeze(-1), {"axis": -1})
case("unsqueeze", "unsqueeze", [I(uni(S))], lambda t: t.unsqueeze(0), {"axis": 0})
case("unsqueeze_neg", "unsqueeze", [I(uni(S))], lambda t: t.unsqueeze(-1), {"axis": -1})
case("unsqueeze_mid", "unsqueeze", [I(uni(S))], lambda t: t.unsqueeze(1), {"axis": 1})
case("pad", "pad", [I(uni((2, 3)))], lambda t: F.pad(t, (0, 1, 1, 2), value=1.5),
     {"pads": [[1, 2], [0, 1]], "value": 1.5})
case("pad_3d", "pad", [I(uni(S3))], lambda t: F.pad(t, (2, 0, 0, 0, 1, 1), value=0.0),
     {"pads": [[1, 1], [0, 0], [2, 0]], "value": 0.0})
case("shrink", "shrink", [I(uni((4, 5)))], lambda t: t[1:3, 0:4], {"ranges": [[1, 3], [0, 4]]})
case("shrink_3d", "shrink", [I(uni(S3))], lambda t: t[1:2, 0:3, 2:4], {"ranges": [[1, 2], [0, 3], [2, 4]]})
case("slice_step2_negstart", "slice", [I(uni((6, 4)))], lambda t: t[-5:6:2],
     {"axis": 0, "start": -5, "end": 6, "step": 2})
case("slice_negend", "slice", [I(uni((3, 5)))], lambda t: t[:, 1:-1], {"axis": 1, "start": 1, "end": -1, "step": 1})
case("slice_clamp_step3", "slice", [I(uni((2, 3, 7)))], lambda t: t[..., 0:100:3],
     {"axis": -1, "start": 0, "end": 100, "step": 3})
case("flip", "flip", [I(uni(S))], lambda t: torch.flip(t, (0,)), {"axes": [0]})
case("flip_multi", "flip", [I(uni(S3))], lambda t: torch.flip(t, (0, 2)), {"axes": [0, -1]})
case("cat", "cat", [I(uni((2, 3))), I(uni((2, 1))), I(uni((2, 2)))], lambda *ts: torch.cat(ts, 1), {"axis": 1})
case("cat_axis0", "cat", [I(uni((1, 4))), I(uni((3, 4)))], lambda *ts: torch.cat(ts, 0), {"axis": 0})
case("cat_neg", "cat", [I(uni((2, 2, 3))), I(uni((2, 2, 2)))], lambda *ts: torch.cat(ts, -1), {"axis": -1})
case("stack", "stack", [I(uni((2, 3))), I(uni((2, 3)))], lambda *ts: torch.stack(ts, 0), {"axis": 0})
case("stack_neg", "stack", [I(uni((2, 3))), I(uni((2, 3))), I(uni((2, 3)))], lambda *ts: torch.stack(ts, -1),
     {"axis": -1})
case("stack_mid", "stack", [I(uni((2, 3))), I(uni((2, 3)))], lambda *ts: torch.stack(ts, 1), {"axis": 1})
case("split_1", "split", [I(uni((3, 6)))], lambda t: torch.split(t, [1, 2, 3], 1)[1],
     {"sizes": [1, 2, 3], "axis": 1, "piece": 1})
case("split_axis0_0", "split", [I(uni((5, 2)))], lambda t: torch.split(t, [2, 3], 0)[0],
     {"sizes": [2, 3], "axis": 0, "piece": 0})
case("split_neg_2", "split", [I(uni(S3))], lambda t: torch.split(t, [1, 1, 2], -1)[2],
     {"sizes": [1, 1, 2], "axis": -1, "piece": 2})
case("chunk_1", "chunk", [I(uni((6, 4)))], lambda t: torch.chunk(t, 3, 0)[1], {"n": 3, "axis": 0, "piece": 1})
case("chunk_uneven_1", "chunk", [I(uni((3, 5)))], lambda t: torch.chunk(t, 2, 1)[1], {"n": 2, "axis": 1, "piece": 1})
case("repeat", "repeat", [I(uni((2, 3)))], lambda t: t.repeat(2, 1), {"repeats": [2, 1]})
case("repeat_both", "repeat", [I(uni((2, 3)))], lambda t: t.repeat(2, 3), {"repeats": [2, 3]})
case("repeat_3d", "repeat", [I(uni((1, 2, 2)))], lambda t: t.repeat(3, 1, 2), {"repeats": [3, 1, 2]})

# ----------------------------------------------------------------------------- indexing
case("index", "index", [I(uni((5, 3))), I(np.array([3, 0, 3, 1], dtype=np.int32))], lambda x, i: x[i])
case("index_2d_idx", "index", [I(uni((5, 3))), I(np.array([[4, 0, 4], [2, 2, 1]], dtype=np.int32))],
     lambda x, i: x[i])
case("index_1d", "index", [I(uni((6,))), I(np.array([[5, 1], [1, 0]], dtype=np.int32))], lambda x, i: x[i])
case("gather_axis1", "gather", [I(uni((3, 4))), I(np.array([[0, 3, 3], [1, 1, 2], [2, 0, 1]], dtype=np.int32))],
     lambda x, i: torch.gather(x, 1, i), {"axis": 1})
case("gather_axis0", "gather", [I(uni((3, 4))), I(np.array([[2, 0, 1, 2], [2, 2, 0, 1]], dtype=np.int32))],
     lambda x, i: torch.gather(x, 0, i), {"axis": 0})
case("gather_neg", "gather", [I(uni((2, 2, 3))), I(ints((2, 2, 4), 0, 3))],
     lambda x, i: torch.gather(x, -1, i), {"axis": -1})

# ----------------------------------------------------------------------------- matmul / linear
MM = 1e-5
case("matmul_2d", "matmul", [I(uni((3, 4))), I(uni((4, 5)))], torch.matmul, atol=MM)
case("matmul_batched", "matmul", [I(uni((2, 3, 4))), I(uni((2, 4, 5)))], torch.matmul, atol=MM)
case("matmul_bcast", "matmul", [I(uni((2, 3, 4))), I(uni((4, 5)))], torch.matmul, atol=MM)
case("matmul_matvec", "matmul", [I(uni((3, 4))), I(uni((4,)))], torch.matmul, atol=MM)
case("matmul_vecmat", "matmul", [I(uni((4,))), I(uni((4, 3)))], torch.matmul, atol=MM)
case("dot_2d", "dot", [I(uni((2, 3))), I(uni((3, 4)))], torch.matmul, atol=MM)
case("dot_vec", "dot", [I(uni((4,))), I(uni((4,)))], torch.matmul, atol=MM)
case("linear", "linear", [I(uni((2, 3))), I(uni((3, 4))), I(uni((4,)))], lambda x, w, b: x @ w + b, atol=MM)
case("linear_nobias", "linear", [I(uni((2, 3, 3))), I(uni((3, 2)))], lambda x, w: x @ w, atol=MM)

# ----------------------------------------------------------------------------- conv / pool
def conv(name, xs, ws, bias, stride=(1, 1), padding="valid", dilation=(1, 1), groups=1):
    ins = [I(uni(xs, -1, 1)), I(uni(ws, -1, 1))]
    if bias:
        ins.append(I(uni((ws[0],), -1, 1)))
    tpad = padding if isinstance(padding, str) else tuple(padding)

    def fn(x, w, b=None):
        return F.conv2d(x, w, b, stride=stride, padding=tpad, dilation=dilation, groups=groups)

    case(name, "conv2d", ins, fn,
         {"stride": list(stride), "padding": padding if isinstance(padding, str) else list(padding),
          "dilation": list(dilation), "groups": groups}, atol=1e-5)


conv("conv2d_bias", (2, 3, 6, 6), (4, 3, 3, 3), True)
conv("conv2d_nobias", (1, 2, 5, 5), (3, 2, 2, 2), False)
conv("conv2d_stride2_pad1", (2, 3, 6, 6), (4, 3, 3, 3), True, stride=(2, 2), padding=[1, 1])
conv("conv2d_rect", (1, 2, 5, 6), (3, 2, 2, 3), True, stride=(1, 2), padding=[0, 1])
conv("conv2d_dilation2", (2, 3, 7, 7), (2, 3, 3, 3), True, dilation=(2, 2))
conv("conv2d_groups2", (2, 4, 6, 6), (4, 2, 3, 3), True, groups=2)
conv("conv2d_same", (2, 3, 6, 6), (4, 3, 3, 3), True, padding="same")
conv("conv2d_same_1x3", (1, 2, 4, 5), (2, 2, 1, 3), False, padding="same")


def pool(name, op, xs, kernel, stride):
    x = distinct(xs) if op == "max_pool2d" else uni(xs)
    f = F.max_pool2d if op == "max_pool2d" else F.avg_pool2d
    case(name, op, [I(x)], lambda t: f(t, kernel, stride if stride is not None else kernel),
         {"kernel": list(kernel), "stride": list(stride) if stride is not None else None})


pool("max_pool2d_k2", "max_pool2d", (2, 3, 6, 6), (2, 2), None)
pool("max_pool2d_k3s2", "max_pool2d", (2, 3, 7, 7), (3, 3), (2, 2))
pool("max_pool2d_k2s1", "max_pool2d", (1, 2, 4, 4), (2, 2), (1, 1))
pool("max_pool2d_floor", "max_pool2d", (1, 2, 5, 5), (2, 2), None)
pool("avg_pool2d_k2", "avg_pool2d", (2, 3, 6, 6), (2, 2), None)
pool("avg_pool2d_k3s2", "avg_pool2d", (2, 3, 7, 7), (3, 3), (2, 2))
pool("avg_pool2d_rect", "avg_pool2d", (1, 2, 4, 6), (2, 3), (1, 3))

# ----------------------------------------------------------------------------- losses
def sce(name, labels, ignore_index=None, smoothing=0.0, reduction="mean", classes=5):
    labels = np.asarray(labels, dtype=np.int32)
    logits = uni((len(labels), classes), -3, 3)

    def fn(x, y):
        return F.cross_entropy(x, y, ignore_index=-100 if ignore_index is None else ignore_index,
                               label_smoothing=smoothing, reduction=reduction)

    case(name, "sparse_categorical_crossentropy", [I(logits), I(labels)], fn,
         {"ignore_index": ignore_index, "label_smoothing": smoothing, "reduction": reduction}, atol=1e-5)


sce("sce", [1, 4, 0, 2])
sce("sce_smooth", [3, 0, 0, 4], smoothing=0.1)
sce("sce_ignore", [2, -1, 0, -1, 4], ignore_index=-1)
sce("sce_ignore_smooth", [2, -1, 1, 3], ignore_index=-1, smoothing=0.1)
sce("sce_sum", [1, 4, 0, 2], reduction="sum")
sce("sce_none", [4, 1, 1, 3], reduction="none")
sce("sce_ignore_none", [0, 3, -1], ignore_index=-1, reduction="none")
sce("sce_ignore_class", [2, 1, 2, 0], ignore_index=2, classes=3)

for red_ in ["mean", "sum", "none"]:
    p = uni((2, 3), 0.05, 0.95)
    y = f32(np.where(rng.random((2, 3)) < 0.5, 1.0, 0.0))
    y[0, 0] = 0.3  # one soft label
    case(f"bce_{red_}", "binary_crossentropy", [I(p), I(y, grad=False)],
         lambda a, b, r=red_: F.binary_cross_entropy(a, b, reduction=r), {"reduction": red_}, atol=1e-5)
for red_ in ["mean", "none"]:
    case(f"bce_logits_{red_}", "binary_crossentropy_logits",
         [I(uni((2, 3), -4, 4)), I(f32(np.where(rng.random((2, 3)) < 0.5, 1.0, 0.0)), grad=False)],
         lambda a, b, r=red_: F.binary_cross_entropy_with_logits(a, b, reduction=r), {"reduction": red_}, atol=1e-5)
for red_ in ["mean", "sum", "none"]:
    case(f"mse_{red_}", "mse", [I(uni((2, 3))), I(uni((2, 3)))],
         lambda a, b, r=red_: F.mse_loss(a, b, reduction=r), {"reduction": red_}, atol=1e-5)

# ----------------------------------------------------------------------------- extremes and kinks
# Saturated activations, exact zeros, signed zeros, ties and zero exponents: where a composite's
# derivative can meet 0·inf (an exp overflowing in a branch not taken) or a kink (PyTorch's
# subgradients: relu'(0) = 0, abs'(0) = 0, leaky_relu'(0) = slope, elu'(0) = alpha, clamp and
# hardtanh 0 at the bounds, hardswish 0 at -3 and 1 at 3, ties of amax/maximum shared equally).
# The inputs are fixed, and these cases come last so that the random draws of the cases above
# stay as they were.
EXT = f32([[-1e4, -100, -90, -50], [-11, -3, -1, 0], [1, 3, 6, 11], [50, 90, 100, 1e4]])
case("sigmoid_ext", "sigmoid", [I(EXT)], torch.sigmoid)
case("tanh_ext", "tanh", [I(EXT)], torch.tanh)
case("silu_ext", "silu", [I(EXT)], F.silu)
case("gelu_ext", "gelu", [I(EXT)], lambda x: F.gelu(x, approximate="tanh"))
case("elu_ext", "elu", [I(EXT)], lambda x: F.elu(x, alpha=1.0), {"alpha": 1.0})
case("elu_ext_alpha2", "elu", [I(EXT)], lambda x: F.elu(x, alpha=2.0), {"alpha": 2.0})
case("softplus_ext", "softplus", [I(EXT)], lambda x: F.softplus(x, beta=1))
case("softplus_zeros", "softplus", [I(f32([0.0, -0.0, 1.0]))], lambda x: F.softplus(x, beta=1))
case("mish_ext", "mish", [I(EXT)], F.mish)
case("relu_ext", "relu", [I(EXT)], torch.relu)
case("relu_zeros", "relu", [I(f32([0.0, -0.0, 1.0, -1.0]))], torch.relu)
case("leaky_relu_ext", "leaky_relu", [I(EXT)], lambda x: F.leaky_relu(x, 0.01), {"slope": 0.01})
case("leaky_relu_zero_02", "leaky_relu", [I(f32([0.0, -0.0, 2.0]))], lambda x: F.leaky_relu(x, 0.2),
     {"slope": 0.2})
case("relu6_ext", "relu6", [I(EXT)], F.relu6)
case("hardtanh_ext", "hardtanh", [I(EXT)], lambda x: F.hardtanh(x, -1.0, 1.0), {"min": -1.0, "max": 1.0})
case("hardsigmoid_ext", "hardsigmoid", [I(EXT)], F.hardsigmoid)
case("hardswish_ext", "hardswish", [I(EXT)], F.hardswish)
case("clip_ext", "clip", [I(EXT)], lambda x: torch.clamp(x, -1.0, 3.0), {"min": -1.0, "max": 3.0})
case("abs_ext", "abs", [I(f32([0.0, -0.0, -100.0, 1e4, -3.0]))], torch.abs)
case("sign_ext", "sign", [I(f32([0.0, -0.0, -100.0, 1e4]))], torch.sign)
case("exp_neg_ext", "exp", [I(f32([-1e4, -100.0, -50.0, -11.0, 0.0]))], torch.exp)
case("square_zeros", "square", [I(f32([0.0, -0.0, 1e4, -3.0]))], torch.square)
case("pow2_zeros", "pow", [I(f32([0.0, -0.0, 3.0, -2.0, 100.0]))], lambda t: t ** 2.0, {"scalar": 2.0})
case("pow3_zeros", "pow", [I(f32([0.0, -0.0, 3.0, -2.0, 100.0]))], lambda t: t ** 3.0, {"scalar": 3.0})
case("pow0_scalar", "pow", [I(f32([0.0, 3.0, -2.0, 1e4]))], lambda t: t ** 0.0, {"scalar": 0.0})
case("pow_neg1_scalar", "pow", [I(f32([0.5, 3.0, -2.0, 100.0]))], lambda t: t ** -1.0, {"scalar": -1.0})
case("pow_exp0", "pow", [I(f32([2.0, 0.5, 3.0, 1.0, 100.0])), I(f32([0.0, 0.0, 1.5, 0.0, 2.0]))], torch.pow)
case("pow_base2_exp0", "pow", [I(f32([2.0, 2.0, 2.0]), grad=False), I(f32([0.0, 1.0, -1.0]))], torch.pow)
case("pow_base0", "pow", [I(f32([0.0, 0.0, 0.0, 0.0])), I(f32([2.0, 3.0, 0.0, 2.5]))], torch.pow)
case("std_zero_var", "std", [I(f32([[1, 1, 1, 1], [2, 3, 4, 5], [0, 0, 0, 0]]))],
     lambda t: torch.std(t, dim=(1,), keepdim=False, correction=1),
     {"axes": [1], "keepdim": False, "correction": 1.0}, 1e-5)
case("var_zero_var", "var", [I(f32([[1, 1, 1, 1], [2, 3, 4, 5]]))],
     lambda t: torch.var(t, dim=(1,), keepdim=True, correction=0),
     {"axes": [1], "keepdim": True, "correction": 0.0}, 1e-5)
case("mse_zero", "mse", [I(f32([[1.0, -2.0], [0.0, 1e4]])), I(f32([[1.0, -2.0], [0.0, 1e4]]), grad=False)],
     lambda a, b: F.mse_loss(a, b, reduction="sum"), {"reduction": "sum"})
TIES = f32([[1, 3, 3, 0], [2, 2, 2, 2], [-1, 5, 0, 5]])
red("max_ties_axis1", "max", tmax, TIES, [1], False)
red("max_ties_axis0_keepdim", "max", tmax, TIES, [0], True)
red("max_ties_all", "max", tmax, TIES, None, False)
red("min_ties_axis1", "min", tmin, TIES, [1], False)
red("min_ties_all", "min", tmin, f32([[0, 0, 1], [2, 0, 3]]), None, False)
case("maximum_ties", "maximum", [I(f32([1.0, 0.0, -2.0, 3.0])), I(f32([1.0, 0.0, 5.0, -3.0]))], torch.maximum)
case("minimum_ties", "minimum", [I(f32([1.0, 0.0, -2.0, 3.0])), I(f32([1.0, 0.0, 5.0, -3.0]))], torch.minimum)
case("argmax_ties_axis0", "argmax", [I(TIES)], lambda t: torch.from_numpy(np.argmax(t.detach().numpy(), 0)),
     {"axis": 0, "keepdim": False})
case("argmin_ties_none", "argmin", [I(f32([[3, 0, 1], [0, 2, 0]]))],
     lambda t: torch.from_numpy(np.asarray(np.argmin(t.detach().numpy()))), {"axis": None, "keepdim": False})
LSE = f32([[1e4, -1e4, 0, 1], [100, 100, -100, 0], [-1e4, -1e4, -1e4, -1e4]])
case("softmax_ext", "softmax", [I(LSE)], lambda t: torch.softmax(t, 1), {"axis": 1})
case("log_softmax_ext", "log_softmax", [I(LSE)], lambda t: torch.log_softmax(t, 1), {"axis": 1})
red("logsumexp_ext", "logsumexp", tlse, LSE, [1], False)
case("sce_ext", "sparse_categorical_crossentropy", [I(LSE), I(np.array([1, 2, 3], dtype=np.int32))],
     lambda x, y: F.cross_entropy(x, y), {"ignore_index": None, "label_smoothing": 0.0, "reduction": "mean"},
     atol=1e-5)
case("bce_logits_ext", "binary_crossentropy_logits",
     [I(EXT.reshape(-1)), I(f32([1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0]), grad=False)],
     lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"), {"reduction": "none"})
case("bce_near_01", "binary_crossentropy", [I(f32([1e-6, 0.999999, 0.5, 1e-3])), I(f32([1, 0, 1, 0]), grad=False)],
     lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), {"reduction": "none"}, atol=1e-5)
# At exactly 0 and 1 the loss saturates at 100; the gradients differ by design (see
# Tensor::binary_crossentropy), so these are forward only.
case("bce_saturated", "binary_crossentropy",
     [I(f32([0, 1, 0, 1]), grad=False), I(f32([1, 0, 0, 1]), grad=False)],
     lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), {"reduction": "none"})

# ----------------------------------------------------------------------------- breadth
# The ops that port models from tinygrad and PyTorch (after the cases above, so that their random
# draws stay as they were).
def un(name, op, fn, x, args=None, atol=None):
    case(name, op, [I(x)], fn, args, atol)


un("erf", "erf", torch.erf, uni(S, -3, 3))
un("gelu_erf", "gelu_erf", lambda x: F.gelu(x), uni(S, -3, 3))
un("quick_gelu", "quick_gelu", lambda x: x * torch.sigmoid(1.702 * x), uni(S, -4, 4))
un("log10", "log10", torch.log10, uni(S, 0.2, 40.0))
un("asin", "asin", torch.asin, uni(S, -0.95, 0.95))
un("acos", "acos", torch.acos, uni(S, -0.95, 0.95))
un("atan", "atan", torch.atan, uni(S, -6, 6))
un("atan_small", "atan", torch.atan, uni(S, -0.6, 0.6))
un("sinh", "sinh", torch.sinh, uni(S, -3, 3))
un("cosh", "cosh", torch.cosh, uni(S, -3, 3))
un("asinh", "asinh", torch.asinh, uni(S, -5, 5))
un("acosh", "acosh", torch.acosh, uni(S, 1.1, 6.0))
un("atanh", "atanh", torch.atanh, uni(S, -0.9, 0.9))
un("selu", "selu", F.selu, away(S, -3, 3, [0]))
un("celu", "celu", lambda x: F.celu(x, 1.5), away(S, -3, 3, [0]), {"alpha": 1.5})
un("logsigmoid", "logsigmoid", F.logsigmoid, uni(S, -6, 6))
un("softsign", "softsign", F.softsign, uni(S, -4, 4))
un("float_i32", "float", lambda t: t.to(torch.float64), ints(S, -9, 9))
un("int_f32", "int", lambda t: t.to(torch.int32), away(S, -5, 5, list(range(-5, 6)), 0.05))
un("bfloat16", "bfloat16", lambda t: t.float().to(torch.bfloat16), uni(S))
un("bool_f32", "bool", lambda t: t.to(torch.bool), f32([[0, 1.5, -2, 0], [3, 0, 0, 1], [0, 0, 0, 0.5]]))
un("erf_ext", "erf", torch.erf, f32([-1e4, -5, -1, 0, 0.5, 2, 5, 1e4]))
un("atan_ext", "atan", torch.atan, f32([-1e4, -10, -1, -0.4142, 0, 0.4142, 1, 10, 1e4]))
case("copysign", "copysign", [I(uni(S)), I(away(S, -2, 2, [0]), grad=False)], torch.copysign)
case("copysign_scalar", "copysign", [I(uni(S))], lambda t: torch.copysign(t, torch.tensor(-2.0, dtype=t.dtype)),
     {"scalar": -2.0})
case("logaddexp", "logaddexp", [I(uni(S, -5, 5)), I(uni(S, -5, 5))], torch.logaddexp)
case("logaddexp_ext", "logaddexp", [I(f32([-1e4, 100, 0, -50])), I(f32([-1e4, -100, 0, 60]))], torch.logaddexp)
case("lerp", "lerp", [I(uni(S)), I(uni(S)), I(uni(S, 0, 1))], torch.lerp)
case("lerp_scalar", "lerp", [I(uni(S)), I(uni(S))], lambda a, b: torch.lerp(a, b, 0.25), {"scalar": 0.25})
case("clamp_min", "clamp", [I(away(S, -2, 2, [-0.5]))], lambda t: torch.clamp(t, min=-0.5), {"min": -0.5})
case("clamp_max", "clamp", [I(away(S, -2, 2, [0.5]))], lambda t: torch.clamp(t, max=0.5), {"max": 0.5})
MOD_A = f32([[-7, 7, -7, 7], [-7.5, 7.5, 0, 5], [3, -3, -1, 1]])
MOD_B = f32([[3, -3, -3, 3], [2, 2, 3, -5], [1.5, 1.5, 4, -4]])
case("mod", "mod_", [I(MOD_A), I(MOD_B)], torch.remainder)
case("mod_i32", "mod_", [I(np.int32(MOD_A[0:1])), I(np.int32(MOD_B[0:1]))], torch.remainder)
case("mod_scalar", "mod_", [I(uni(S, -5, 5))], lambda t: torch.remainder(t, 1.5), {"scalar": 1.5})
case("fmod", "fmod", [I(MOD_A), I(MOD_B)], torch.fmod)
case("fmod_i32", "fmod", [I(np.int32(MOD_A[0:1])), I(np.int32(MOD_B[0:1]))], torch.fmod)
SPECIAL = f32([[np.nan, np.inf, -np.inf, 0], [1, -2, np.nan, 3e38], [-0.0, 5, np.inf, -1]])


def special(name, op, fn, args=None):
    # Built by hand: the case builder's inputs are finite by design.
    assert name not in names, name
    names.add(name)
    out = fn(torch.tensor(SPECIAL))
    cases.append({"name": name, "op": op, "args": args or {},
                  "inputs": [{"shape": list(SPECIAL.shape), "dtype": "f32",
                              "data": [v if np.isfinite(v) else ("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf"))
                                       for v in SPECIAL.reshape(-1).tolist()], "grad": False}],
                  "output": {"shape": list(out.shape), "dtype": "bool", "data": [bool(v) for v in out.reshape(-1)]},
                  "grads": [None]})


special("isnan", "isnan", torch.isnan)
special("isinf", "isinf", torch.isinf)
special("isinf_pos", "isinf", torch.isposinf, {"detect_positive": True, "detect_negative": False})
special("isinf_neg", "isinf", torch.isneginf, {"detect_positive": False, "detect_negative": True})
special("isfinite", "isfinite", torch.isfinite)
ICA = f32([[1.0, 1.0 + 2e-5, 100.0, 0.0], [1e-9, 5.0, -3.0, 2.0]])
ICB = f32([[1.0, 1.0, 100.001, 1e-9], [0.0, 5.0 + 1e-4, -3.0, 2.1]])
case("isclose", "isclose", [I(ICA, grad=False), I(ICB, grad=False)], torch.isclose)
case("isclose_tol", "isclose", [I(ICA, grad=False), I(ICB, grad=False)],
     lambda a, b: torch.isclose(a, b, rtol=1e-3, atol=1e-6), {"rtol": 1e-3, "atol": 1e-6})
case("allclose_no", "allclose", [I(ICA, grad=False), I(ICB, grad=False)],
     lambda a, b: torch.tensor(torch.allclose(a, b)))
case("allclose_yes", "allclose", [I(ICA, grad=False), I(ICA + f32(1e-7), grad=False)],
     lambda a, b: torch.tensor(torch.allclose(a, b)))

case("bitwise_not_i32", "bitwise_not", [I(ints(S, -9, 9))], lambda t: torch.bitwise_not(t))
case("bitwise_not_u8", "bitwise_not", [I(rng.integers(0, 256, size=S).astype(np.uint8))], torch.bitwise_not)
case("const_like", "const_like", [I(ints(S, -9, 9))], lambda t: torch.full_like(t, 3), {"value": 3.0})
un("layernorm", "layernorm", lambda t: F.layer_norm(t, (4,), eps=1e-5), uni(S3))
un("layernorm_2axes", "layernorm", lambda t: F.layer_norm(t, (3, 4), eps=1e-3), uni(S3), {"axes": [1, 2], "eps": 1e-3})
BN_X = uni((2, 3, 2, 2))
case("batchnorm", "batchnorm", [I(BN_X), I(uni((3,))), I(uni((3,))), I(uni((3,)), grad=False),
                                I(uni((3,), 0.5, 2.0), grad=False)],
     lambda x, w, b, m, s: (x - m.reshape(1, 3, 1, 1)) * w.reshape(1, 3, 1, 1) * s.reshape(1, 3, 1, 1)
     + b.reshape(1, 3, 1, 1))


def ns(x, steps, params, eps=1e-7):
    if x.shape[-2] > x.shape[-1]:
        return ns(x.transpose(-2, -1), steps, params, eps).transpose(-2, -1)
    g = x / (x.square().sum((-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
        gram = g @ g.transpose(-2, -1)
        power, poly = gram, None
        for i, p in enumerate(params[1:]):
            if i > 0:
                power = gram @ power
            poly = power * p if poly is None else poly + power * p
        g = g * params[0] + (poly @ g if poly is not None else 0)
    return g


case("newton_schulz", "newton_schulz", [I(uni((3, 4)))], lambda t: ns(t, 3, [3.4445, -4.7750, 2.0315]),
     {"steps": 3, "params": [3.4445, -4.7750, 2.0315]}, 1e-4)
case("newton_schulz_tall", "newton_schulz", [I(uni((2, 5, 3)))], lambda t: ns(t, 2, [2.0, -1.5, 0.5]),
     {"steps": 2, "params": [2.0, -1.5, 0.5]}, 1e-4)

# Reductions and scans.
PZ = uni(S3, 0.5, 1.5)
red("prod_axis1", "prod", lambda t, d, k: torch.prod(t, d[0], keepdim=k), PZ, [1], False)
red("prod_axis2_keep", "prod", lambda t, d, k: torch.prod(t, d[0], keepdim=k), PZ, [2], True)
red("prod_all", "prod", lambda t, d, k: torch.prod(t), uni((2, 3), 0.5, 1.5), None, False)
PZ0 = f32([[1.5, 0, 2, -1], [0, 3, 0, 2], [1, 2, 3, 0.5]])
red("prod_zeros", "prod", lambda t, d, k: torch.prod(t, d[0], keepdim=k), PZ0, [1], False)
case("prod_i32", "prod", [I(ints(S, -3, 4))], lambda t: torch.prod(t, 1).to(torch.int32),
     {"axes": [1], "keepdim": False})
BO = rng.random((3, 4)) < 0.3
BO[0] = True
BO[1] = False
case("any_axis1", "any", [I(BO)], lambda t: torch.any(t, 1), {"axes": [1], "keepdim": False})
case("all_axis1", "all", [I(BO)], lambda t: torch.all(t, 1), {"axes": [1], "keepdim": False})
case("any_f32_all", "any", [I(f32([[0, 0], [0, 0.5]]), grad=False)], lambda t: torch.any(t), {"axes": None})
case("all_f32_axis0", "all", [I(f32([[1, 0], [2, 3]]), grad=False)], lambda t: torch.all(t, 0, keepdim=True),
     {"axes": [0], "keepdim": True})
for piece in (0, 1):
    case(f"var_mean_{piece}", "var_mean", [I(uni(S3))], lambda t, p=piece: torch.var_mean(t, 1, correction=1)[p],
         {"axes": [1], "keepdim": False, "correction": 1.0, "piece": piece}, 1e-5)
    case(f"std_mean_{piece}", "std_mean", [I(uni(S3))],
         lambda t, p=piece: torch.std_mean(t, (0, 2), correction=0, keepdim=True)[p],
         {"axes": [0, 2], "keepdim": True, "correction": 0.0, "piece": piece}, 1e-5)
un("normalize", "normalize", lambda t: F.normalize(t, 2.0, 1), uni(S3))
un("normalize_p1_last", "normalize", lambda t: F.normalize(t, 1.0, -1), uni(S3), {"p": 1.0, "axis": -1})
un("softmin", "softmin", lambda t: F.softmin(t, -1), uni(S3))
un("cumsum", "cumsum", lambda t: torch.cumsum(t, 0), uni(S3))
un("cumsum_axis2", "cumsum", lambda t: torch.cumsum(t, 2), uni(S3), {"axis": 2})
un("cumsum_long", "cumsum", lambda t: torch.cumsum(t, 1), uni((2, 600)), {"axis": 1}, 1e-4)
case("cumsum_i32", "cumsum", [I(ints((2, 5), -9, 9))], lambda t: torch.cumsum(t, 1).to(torch.int32), {"axis": 1})
case("cumsum_bool", "cumsum", [I(BO)], lambda t: torch.cumsum(t, 1).to(torch.int32), {"axis": -1})
un("cumprod", "cumprod", lambda t: torch.cumprod(t, 1), uni(S3, 0.5, 1.5), {"axis": 1})
un("cumprod_zero", "cumprod", lambda t: torch.cumprod(t, 1), PZ0, {"axis": 1})
for piece in (0, 1):
    case(f"cummax_{piece}", "cummax", [I(distinct(S3))], lambda t, p=piece: torch.cummax(t, 2)[p],
         {"axis": 2, "piece": piece})
    case(f"cummin_{piece}", "cummin", [I(distinct(S3))], lambda t, p=piece: torch.cummin(t, 0)[p],
         {"axis": 0, "piece": piece})
un("logcumsumexp", "logcumsumexp", lambda t: torch.logcumsumexp(t, 1), uni(S3, -5, 5), {"axis": 1})
un("logcumsumexp_ext", "logcumsumexp", lambda t: torch.logcumsumexp(t, 1), LSE, {"axis": 1})

# Sorting: values (with gradients) and indices; ties keep their order (PyTorch's stable sort).
SRT = f32([[3, 1, 2, 1, 5, 0.5], [2, 2, 2, 1, 3, 3], [-1, 4, 0, 4, -2, 7]])
for piece in (0, 1):
    case(f"sort_{piece}", "sort", [I(SRT)], lambda t, p=piece: torch.sort(t, stable=True, dim=-1)[p].to(
        torch.int32 if p else t.dtype), {"piece": piece})
    case(f"sort_desc_axis0_{piece}", "sort", [I(SRT)],
         lambda t, p=piece: torch.sort(t, stable=True, dim=0, descending=True)[p].to(torch.int32 if p else t.dtype),
         {"axis": 0, "descending": True, "piece": piece})
    # torch.topk does not keep ties in order: the reference is the stable sort's first k.
    case(f"topk_{piece}", "topk", [I(SRT)],
         lambda t, p=piece: torch.sort(t, stable=True, dim=-1, descending=True)[p][:, :3].to(
             torch.int32 if p else t.dtype), {"k": 3, "piece": piece})
    case(f"topk_smallest_{piece}", "topk", [I(SRT)],
         lambda t, p=piece: torch.sort(t, stable=True, dim=0)[p][:2].to(torch.int32 if p else t.dtype),
         {"k": 2, "axis": 0, "largest": False, "piece": piece})
case("argsort", "argsort", [I(distinct(S3))], lambda t: torch.argsort(t, 1).to(torch.int32), {"axis": 1})
case("argsort_i32_desc", "argsort", [I(ints((2, 7), 0, 3))],
     lambda t: torch.sort(t, stable=True, dim=-1, descending=True)[1].to(torch.int32), {"descending": True})

# Masks and indexing.
un("tril", "tril", torch.tril, uni((3, 5)))
un("tril_k1", "tril", lambda t: torch.tril(t, 1), uni(S3), {"diagonal": 1})
un("triu_km1", "triu", lambda t: torch.triu(t, -1), uni((4, 3)), {"diagonal": -1})
case("triu_bool", "triu", [I(np.ones((3, 3), dtype=bool))], torch.triu)
case("one_hot", "one_hot", [I(np.array([[0, 3], [2, 1]], dtype=np.int32))],
     lambda t: F.one_hot(t.long(), 4).to(torch.int32), {"num_classes": 4})
case("masked_fill", "masked_fill", [I(uni(S)), I(rng.random((1, 4)) < 0.5)],
     lambda x, m: x.masked_fill(m, -2.5), {"scalar": -2.5})


def getitem(name, shape, index, tensors=(), fn=None):
    """`x[index]`: index entries as the fixture stores them ("T" takes the next tensor)."""
    ts = iter(tensors)

    def py(e):
        if e is None:
            return None
        if e == "...":
            return Ellipsis
        if e == "T":
            return "T"
        if isinstance(e, str):
            parts = [int(p) if p.strip() else None for p in e.split(":")]
            return slice(*parts)
        return e

    entries = [py(e) for e in index]

    def f(x, *idx):
        # PyTorch slices only step forward: a backward slice is an index_select first.
        d, key = 0, []
        for e in entries:
            if isinstance(e, slice) and e.step is not None and e.step < 0:
                x = x.index_select(d, torch.tensor(list(range(*e.indices(x.shape[d])))))
                e = slice(None)
            key.append(e)
            d += e is not None
        it = iter(idx)
        return x[tuple(next(it).long() if e == "T" else e for e in key)]

    ins = [I(uni(shape))] + [I(np.asarray(t, dtype=np.int32)) for t in tensors]
    case(name, "get", ins, fn or f, {"index": index})


getitem("get_int", (3, 4), [1])
getitem("get_neg_int", (3, 4, 2), [-1, 2])
getitem("get_slice", (5, 4), ["1:4", "::2"])
getitem("get_neg_step", (5, 4), ["::-1", "3:0:-2"])
getitem("get_neg_step_clamp", (6,), ["10:-10:-3"])
getitem("get_newaxis_ellipsis", (2, 3, 4), [None, "...", 1, None])
getitem("get_ellipsis_mid", (2, 3, 4, 5), [0, "...", "1:"])
getitem("get_tensor", (5, 3), ["T"], [[4, 0, -1, 2]])
getitem("get_tensor_axis1", (3, 5, 2), [":", "T"], [[[1, 4], [0, -2]]])
getitem("get_tensors_adjacent", (4, 5, 3), [":", "T", "T"], [[2, 0, 4], [[1], [2]]])
getitem("get_tensors_apart", (4, 5, 3), ["T", ":", "T"], [[3, 1], [0, 2]])
getitem("get_list_and_slice", (4, 5), [[3, 1, 1], "1:4"])
getitem("get_tensor_int_slice", (3, 4, 5), ["T", 1, "::-2"], [[2, 0]])
SCI = np.array([[0, 1, 2, 0], [2, 2, 1, 0]], dtype=np.int32)
case("scatter", "scatter", [I(uni((3, 5))), I(np.array([[0, 1, 2, 0], [2, 0, 1, 1]], dtype=np.int32)), I(uni((2, 4)))],
     lambda x, i, s: x.scatter(0, i.long(), s), {"axis": 0})
case("scatter_axis1_scalar", "scatter", [I(uni((3, 5))), I(np.array([[1, 4], [0, 0], [3, 2]], dtype=np.int32))],
     lambda x, i: x.scatter(1, i.long(), 1.5), {"axis": 1, "scalar": 1.5})
case("scatter_add", "scatter", [I(uni((3, 4))), I(SCI), I(uni((2, 4)))],
     lambda x, i, s: x.scatter_add(0, i.long(), s), {"axis": 0, "reduce": "add"})
for red_ in ["sum", "prod", "mean", "amax", "amin"]:
    for inc in (True, False):
        src = distinct((2, 4)) if red_ in ("amax", "amin") else uni((2, 4), 0.5, 1.5)
        case(f"scatter_reduce_{red_}_{'self' if inc else 'noself'}", "scatter_reduce",
             [I(distinct((3, 4)) + f32(0.013) if red_ in ("amax", "amin") else uni((3, 4), 0.5, 1.5)), I(SCI), I(src)],
             lambda x, i, s, r=red_, c=inc: x.scatter_reduce(0, i.long(), s, r, include_self=c),
             {"axis": 0, "reduce": red_, "include_self": inc}, 1e-5)

# Movement and creation.
un("roll", "roll", lambda t: torch.roll(t, (1, -2), (0, 2)), uni(S3), {"shifts": [1, -2], "axes": [0, 2]})
un("roll_flat", "roll", lambda t: torch.roll(t, 5), uni(S), {"shifts": [5]})
un("repeat_interleave", "repeat_interleave", lambda t: torch.repeat_interleave(t, 2, 1), uni((2, 3)),
   {"repeats": 2, "axis": 1})
un("repeat_interleave_flat", "repeat_interleave", lambda t: torch.repeat_interleave(t, 3), uni((2, 2)),
   {"repeats": 3})
un("unflatten", "unflatten", lambda t: t.unflatten(1, (2, -1)), uni((3, 8)), {"axis": 1, "shape": [2, -1]})
un("flatten_range", "flatten", lambda t: t.flatten(1, 2), uni((2, 3, 4, 2)), {"start_dim": 1, "end_dim": 2})
un("diag", "diag", torch.diag, uni((4,)))
un("diagonal", "diagonal", lambda t: torch.diagonal(t), uni((3, 4)))
un("diagonal_off", "diagonal", lambda t: torch.diagonal(t, 1, 0, 2), uni((3, 2, 4)), {"offset": 1, "dim2": 2})
un("diagonal_neg", "diagonal", lambda t: torch.diagonal(t, -1, -2, -1), uni((2, 4, 3)),
   {"offset": -1, "dim1": -2, "dim2": -1})
un("view", "view", lambda t: t.view(3, 8), uni(S3), {"shape": [3, 8]})
un("pad_to", "pad_to", lambda t: F.pad(t, (0, 2, 0, 0)), uni((2, 3)), {"shape": [-1, 5]})
for piece in (0, 1):
    # Grid p depends on input p only (wgrad gives no gradient to an input outside the graph).
    case(f"meshgrid_{piece}", "meshgrid", [I(uni((3,)), grad=piece == 0), I(uni((2,)), grad=piece == 1)],
         lambda a, b, p=piece: torch.meshgrid(a, b, indexing="ij")[p], {"piece": piece})
    case(f"meshgrid_xy_{piece}", "meshgrid", [I(uni((3,)), grad=piece == 0), I(uni((2,)), grad=piece == 1)],
         lambda a, b, p=piece: torch.meshgrid(a, b, indexing="xy")[p], {"indexing": "xy", "piece": piece})
case("einsum_matmul", "einsum", [I(uni((3, 4))), I(uni((4, 2)))], lambda a, b: torch.einsum("ij,jk->ik", a, b),
     {"formula": "ij,jk->ik"}, 1e-5)
case("einsum_batch_t", "einsum", [I(uni((2, 3, 4))), I(uni((2, 5, 4)))],
     lambda a, b: torch.einsum("bij,bkj->bik", a, b), {"formula": "bij,bkj->bik"}, 1e-5)
case("einsum_trace", "einsum", [I(uni((4, 4)))], lambda a: torch.einsum("ii", a), {"formula": "ii"}, 1e-5)
case("einsum_implicit", "einsum", [I(uni((3, 4))), I(uni((4,)))], lambda a, b: torch.einsum("ij,j", a, b),
     {"formula": "ij,j"}, 1e-5)
case("einsum_ellipsis", "einsum", [I(uni((2, 3, 4)))], lambda a: torch.einsum("...ij->...ji", a),
     {"formula": "...ij->...ji"})
case("einsum_outer_sum", "einsum", [I(uni((3,))), I(uni((4,)))], lambda a, b: torch.einsum("i,j->", a, b),
     {"formula": "i,j->"}, 1e-5)
case("linspace", "linspace", [], lambda: torch.linspace(-1.5, 2.0, 8, dtype=torch.float64),
     {"start": -1.5, "stop": 2.0, "steps": 8})

# Losses and attention.
CE_X = uni((4, 5), -3, 3)
case("cross_entropy_idx", "cross_entropy", [I(CE_X), I(np.array([1, 4, 0, 2], dtype=np.int32))],
     lambda x, y: F.cross_entropy(x, y.long()), atol=1e-5)
case("cross_entropy_probs", "cross_entropy", [I(CE_X), I(f32(rng.dirichlet(np.ones(5), 4)), grad=False)],
     lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1, reduction="sum"),
     {"reduction": "sum", "label_smoothing": 0.1}, 1e-5)
case("cross_entropy_4d", "cross_entropy", [I(uni((2, 3, 2, 2))), I(ints((2, 2, 2), 0, 3))],
     lambda x, y: F.cross_entropy(x, y.long(), reduction="none"), {"reduction": "none"}, 1e-5)
LP = torch.log_softmax(torch.tensor(uni((5, 4), -2, 2), dtype=torch.float64), 1).numpy().astype(np.float32)
case("nll_loss", "nll_loss", [I(LP), I(np.array([0, 3, 1, 1, 2], dtype=np.int32))],
     lambda x, y: F.nll_loss(x, y.long()), atol=1e-5)
case("nll_loss_weight_ignore", "nll_loss",
     [I(LP), I(np.array([0, 3, 1, 1, 2], dtype=np.int32)), I(uni((4,), 0.5, 2.0), grad=False)],
     lambda x, y, w: F.nll_loss(x, y.long(), weight=w, ignore_index=1), {"ignore_index": 1}, 1e-5)
Q, K, V = uni((2, 3, 4, 8), -1, 1), uni((2, 3, 6, 8), -1, 1), uni((2, 3, 6, 5), -1, 1)
case("sdpa", "scaled_dot_product_attention", [I(Q), I(K), I(V)], F.scaled_dot_product_attention, atol=1e-5)
case("sdpa_causal", "scaled_dot_product_attention", [I(uni((2, 5, 8), -1, 1)), I(uni((2, 5, 8), -1, 1)),
                                                      I(uni((2, 5, 3), -1, 1))],
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), {"is_causal": True}, 1e-5)
# Every query keeps at least one key (its diagonal), else its row is NaN in both.
case("sdpa_mask", "scaled_dot_product_attention", [I(Q), I(K), I(V), I((rng.random((4, 6)) < 0.7) | np.eye(4, 6, dtype=bool))],
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), atol=1e-5)
case("sdpa_gqa", "scaled_dot_product_attention", [I(uni((1, 4, 3, 8), -1, 1)), I(uni((1, 2, 5, 8), -1, 1)),
                                                   I(uni((1, 2, 5, 4), -1, 1))],
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), {"enable_gqa": True}, 1e-5)
# ----------------------------------------------------------------------------- conv block
def conv_block_cases():
    """Convolutions, pooling and resampling (the h-conv block of the op table):
    conv1d {"stride", "padding": n | "valid" | "same", "dilation", "groups"}: inputs x, w[, b]
    conv_transpose1d / conv_transpose2d {"stride", "padding", "output_padding", "dilation",
        "groups"} (numbers or pairs): inputs x, w (C_in, C_out/groups, *k)[, b]
    max_pool2d / avg_pool2d / max_pool2d_with_indices {"kernel", "stride", "padding",
        "dilation", "ceil_mode", "count_include_pad"} (with_indices: "piece" 0 values, 1 indices)
    max_unpool2d {"kernel", "stride", "padding", "output_size"}: inputs values, indices
    pad {"pads", "mode": "reflect" | "replicate" | "circular" | "constant", "value"}
    interpolate {"size", "mode", "align_corners"}
    unfold {"dim", "size", "step"}"""
    C = 1e-5

    def conv1(name, xs, ws, bias, stride=1, padding=0, dilation=1, groups=1):
        ins = [I(uni(xs, -1, 1)), I(uni(ws, -1, 1))]
        if bias:
            ins.append(I(uni((ws[0],), -1, 1)))
        case(name, "conv1d", ins,
             lambda x, w, b=None: F.conv1d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups),
             {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}, atol=C)

    conv1("conv1d_bias", (2, 3, 7), (4, 3, 3), True)
    conv1("conv1d_stride2_pad1", (2, 2, 8), (3, 2, 3), True, stride=2, padding=1)
    conv1("conv1d_same_dilation2", (1, 2, 6), (2, 2, 3), False, padding="same", dilation=2)
    conv1("conv1d_groups2", (2, 4, 5), (6, 2, 2), True, groups=2)

    def convt(name, xs, ws, bias, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
        ins = [I(uni(xs, -1, 1)), I(uni(ws, -1, 1))]
        cout = ws[1] * groups
        if bias:
            ins.append(I(uni((cout,), -1, 1)))
        two = len(xs) == 4
        f = F.conv_transpose2d if two else F.conv_transpose1d
        tup = (lambda v: tuple(v) if isinstance(v, (list, tuple)) else v)
        js = (lambda v: list(v) if isinstance(v, (list, tuple)) else v)
        case(name, "conv_transpose2d" if two else "conv_transpose1d", ins,
             lambda x, w, b=None: f(x, w, b, stride=tup(stride), padding=tup(padding),
                                    output_padding=tup(output_padding), groups=groups, dilation=tup(dilation)),
             {"stride": js(stride), "padding": js(padding), "output_padding": js(output_padding),
              "dilation": js(dilation), "groups": groups}, atol=C)

    convt("conv_transpose2d_bias", (2, 3, 4, 4), (3, 2, 3, 3), True)
    convt("conv_transpose2d_s2_p1_op1", (1, 2, 3, 3), (2, 3, 3, 3), True, stride=2, padding=1, output_padding=1)
    convt("conv_transpose2d_rect_groups", (1, 4, 3, 4), (4, 3, 2, 3), True, stride=[1, 2], padding=[1, 0],
          dilation=[2, 1], groups=2)
    # padding larger than dilation·(k-1): the inner convolution crops the spread input.
    convt("conv_transpose2d_crop", (1, 2, 5, 5), (2, 1, 2, 2), False, stride=2, padding=2)
    convt("conv_transpose2d_s3_op2", (2, 1, 2, 3), (1, 2, 2, 2), False, stride=3, output_padding=2)
    convt("conv_transpose1d_s2_p1_op1", (2, 3, 5), (3, 4, 3), True, stride=2, padding=1, output_padding=1)
    convt("conv_transpose1d_groups_dil", (1, 4, 4), (4, 1, 3), False, dilation=2, groups=2)

    def pool2(name, op, xs, kernel, stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True,
              piece=None):
        x = distinct(xs) if op != "avg_pool2d" else uni(xs)
        pr = (lambda v: list(v) if isinstance(v, (list, tuple)) else [v, v])
        args = {"kernel": pr(kernel), "stride": pr(stride) if stride is not None else None, "padding": pr(padding),
                "dilation": pr(dilation), "ceil_mode": ceil_mode}
        st = stride if stride is not None else kernel
        if op == "avg_pool2d":
            args["count_include_pad"] = count_include_pad
            fn = lambda t: F.avg_pool2d(t, kernel, st, padding, ceil_mode, count_include_pad)
        elif op == "max_pool2d":
            fn = lambda t: F.max_pool2d(t, kernel, st, padding, dilation, ceil_mode)
        else:
            args["piece"] = piece
            fn = lambda t: F.max_pool2d(t, kernel, st, padding, dilation, ceil_mode, return_indices=True)[piece]
        case(name, op, [I(x)], fn, args)

    pool2("max_pool2d_k3s2p1", "max_pool2d", (1, 2, 7, 7), 3, 2, padding=1)
    pool2("max_pool2d_ceil", "max_pool2d", (1, 2, 5, 5), 2, ceil_mode=True)
    pool2("max_pool2d_ceil_pad", "max_pool2d", (1, 1, 6, 6), 3, 2, padding=1, ceil_mode=True)
    pool2("max_pool2d_dilation2", "max_pool2d", (1, 2, 7, 6), (2, 2), (1, 2), dilation=(2, 1))
    pool2("max_pool2d_ceil_drop", "max_pool2d", (1, 1, 5, 5), 3, 3, padding=1, ceil_mode=True)
    pool2("avg_pool2d_pad_incl", "avg_pool2d", (1, 2, 5, 5), 3, 2, padding=1)
    pool2("avg_pool2d_pad_excl", "avg_pool2d", (1, 2, 5, 5), 3, 2, padding=1, count_include_pad=False)
    pool2("avg_pool2d_ceil_incl", "avg_pool2d", (1, 2, 5, 5), 2, ceil_mode=True)
    pool2("avg_pool2d_ceil_excl", "avg_pool2d", (1, 2, 5, 5), 2, ceil_mode=True, count_include_pad=False)
    pool2("avg_pool2d_ceil_pad_incl", "avg_pool2d", (1, 1, 6, 7), 3, 2, padding=1, ceil_mode=True)
    pool2("avg_pool2d_ceil_pad_excl", "avg_pool2d", (1, 1, 6, 7), 3, 2, padding=1, ceil_mode=True,
          count_include_pad=False)
    pool2("avg_pool2d_ceil_drop", "avg_pool2d", (1, 1, 5, 5), 3, 3, padding=1, ceil_mode=True)
    pool2("max_pool2d_indices_values", "max_pool2d_with_indices", (2, 2, 5, 5), 2, ceil_mode=True, piece=0)
    pool2("max_pool2d_indices", "max_pool2d_with_indices", (2, 2, 5, 5), 2, ceil_mode=True, piece=1)
    pool2("max_pool2d_indices_pad", "max_pool2d_with_indices", (1, 2, 6, 6), 3, 2, padding=1, piece=1)

    def unpool(name, xs, kernel, stride=None, padding=0, output_size=None):
        st = stride if stride is not None else kernel
        vals, idx = F.max_pool2d(torch.tensor(distinct(xs)), kernel, st, padding, return_indices=True)
        pr = (lambda v: list(v) if isinstance(v, (list, tuple)) else [v, v])
        case(name, "max_unpool2d", [I(f32(vals.numpy())), I(idx.numpy().astype(np.int32))],
             lambda v, i: F.max_unpool2d(v, i, kernel, st, padding, output_size),
             {"kernel": pr(kernel), "stride": pr(stride) if stride is not None else None, "padding": pr(padding),
              "output_size": list(output_size) if output_size is not None else None})

    unpool("max_unpool2d_k2", (2, 2, 4, 4), 2)
    # Non-overlapping windows: where windows overlap and share a maximum, PyTorch writes it once
    # and wgrad (as tinygrad) adds it once per window.
    unpool("max_unpool2d_k2s2p1", (1, 2, 5, 5), 2, 2, padding=1, output_size=(5, 5))
    unpool("max_unpool2d_k2s2p1_default_size", (1, 2, 4, 4), 2, 2, padding=1)
    unpool("max_unpool2d_output_size", (1, 1, 5, 5), 2, output_size=(5, 5))

    def padm(name, xs, pads, mode):
        # torch takes pads for the last dims only: from the first padded one on.
        first = next(i for i, p in enumerate(pads) if p != (0, 0))
        tp = [v for pr_ in reversed(pads[first:]) for v in pr_]
        case(name, "pad", [I(uni(xs))], lambda t: F.pad(t, tp, mode=mode), {"pads": [list(p) for p in pads],
                                                                              "mode": mode})

    padm("pad_reflect", (2, 3, 5), [(0, 0), (2, 1), (1, 3)], "reflect")
    padm("pad_replicate", (1, 2, 3, 4), [(0, 0), (0, 0), (2, 0), (1, 3)], "replicate")
    padm("pad_circular", (1, 2, 3, 4), [(0, 0), (0, 0), (3, 1), (0, 2)], "circular")
    case("pad_negative", "pad", [I(uni((3, 5)))], lambda t: F.pad(t, (-1, 2, 1, -2), value=0.5),
         {"pads": [[1, -2], [-1, 2]], "value": 0.5})
    case("pad_constant_mode", "pad", [I(uni((2, 3)))], lambda t: F.pad(t, (1, 1, 0, 2), value=-1.0),
         {"pads": [[0, 2], [1, 1]], "mode": "constant", "value": -1.0})

    def interp(name, xs, size, mode, align_corners=None):
        tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)] if mode == "linear" else mode
        case(name, "interpolate", [I(uni(xs))],
             lambda t: F.interpolate(t, size=tuple(size), mode=tmode, align_corners=align_corners),
             {"size": list(size), "mode": mode, "align_corners": bool(align_corners)}, atol=C)

    interp("interpolate_linear_up", (2, 3, 5), [8], "linear", False)
    interp("interpolate_linear_up_align", (2, 3, 5), [8], "linear", True)
    interp("interpolate_linear_down", (1, 2, 7), [3], "linear", False)
    interp("interpolate_bilinear", (1, 2, 3, 4), [5, 7], "linear", False)
    interp("interpolate_bilinear_align", (1, 2, 3, 4), [5, 7], "linear", True)
    interp("interpolate_bilinear_down", (1, 1, 6, 5), [4, 2], "linear", False)
    interp("interpolate_bilinear_align_to1", (1, 1, 3, 4), [1, 3], "linear", True)
    interp("interpolate_trilinear", (1, 1, 2, 3, 4), [3, 4, 5], "linear", False)
    interp("interpolate_nearest_up", (1, 2, 3, 4), [5, 7], "nearest")
    interp("interpolate_nearest_down", (1, 2, 7, 6), [3, 4], "nearest")
    interp("interpolate_nearest_exact_up", (1, 2, 3, 4), [5, 7], "nearest-exact")
    interp("interpolate_nearest_exact_down", (1, 2, 7, 6), [3, 4], "nearest-exact")
    interp("interpolate_bilinear_one_dim_same", (1, 2, 3, 4), [3, 6], "linear", False)
    interp("interpolate_nearest_one_dim_same", (2, 1, 3, 4), [5, 4], "nearest")

    case("unfold_step2", "unfold", [I(uni((2, 7)))], lambda t: t.unfold(1, 3, 2), {"dim": 1, "size": 3, "step": 2})
    case("unfold_dim0", "unfold", [I(uni((3, 4, 5)))], lambda t: t.unfold(0, 2, 1), {"dim": 0, "size": 2, "step": 1})
    case("unfold_whole_neg", "unfold", [I(uni((3, 4, 5)))], lambda t: t.unfold(-1, 5, 3),
         {"dim": -1, "size": 5, "step": 3})


conv_block_cases()

# ----------------------------------------------------------------------------- write
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as fh:
    fh.write('{"cases": [\n')
    fh.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
    fh.write("\n]}\n")
print(f"wrote {len(cases)} cases, {os.path.getsize(OUT)} bytes -> {os.path.normpath(OUT)}")
