#!/usr/bin/env python3
"""Generate the nn-layer reference fixtures: tests/fixtures/nn.json.

Run once by hand from the repository root (NOT run in CI; the output is committed):

    python3 scripts/gen_nn_fixtures.py

Needs numpy and torch (CPU build is enough). The output is deterministic (fixed seed).

Every case runs one torch layer in float64 on float32 values (inputs and parameters), and stores
results rounded to float32. The loss backpropagated is

    loss = sum(output * upstream)

with "upstream" a fixed random array stored in the case.

Case format:
    {"name":     unique case name,
     "layer":    "batchnorm" | "layernorm" | "groupnorm" | "embedding" | "conv1d" |
                 "conv_transpose1d" | "conv_transpose2d" | "instancenorm" | "layernorm2d" |
                 "rmsnorm" | "lstmcell",
     "args":     constructor arguments:
                   batchnorm {"num_features", "eps", "momentum", "affine"}
                   layernorm {"normalized_shape", "eps", "elementwise_affine"}
                   groupnorm {"num_groups", "num_channels", "eps", "affine"}
                   embedding {"vocab_size", "embed_size"}
                   conv layers: torch's constructor keywords ("in_channels", "out_channels",
                     "kernel_size", "bias", "stride", "padding", "output_padding", "dilation",
                     "groups")
                   instancenorm {"num_features", "eps", "affine"}
                   layernorm2d {"num_channels", "eps", "elementwise_affine"}
                   rmsnorm {"dim", "eps", "elementwise_affine"}
                   lstmcell {"input_size", "hidden_size", "bias"},
     "x":        {"shape", "dtype": "f32" | "i32", "data": [flat]},
     "inputs":   lstmcell only: the state {"h0", "c0"} (absent: zeros),
     "params":   {state-dict name: {"shape", "data"}} loaded into the layer before the forward
                 (batchnorm: weight, bias, running_mean, running_var),
     "upstream": {"shape", "data"},
     "out":      the forward output in training mode,
     "grads":    {"x" (float inputs only) | parameter name: {"shape", "data"}},
     "after":    batchnorm only: running_mean, running_var ({"shape", "data"}) and
                 num_batches_tracked (int) after the training forward,
     "eval_out": batchnorm only: the output in eval mode (with the updated running stats)}
"""
import json
import os

import numpy as np
import torch

SEED = 4321
rng = np.random.default_rng(SEED)
torch.manual_seed(SEED)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "nn.json")


def f32(a):
    return np.asarray(a, dtype=np.float32)


def arr(a, dtype="f32"):
    a = np.asarray(a)
    if dtype == "f32":
        data = [float(v) for v in a.astype(np.float32).reshape(-1)]
    else:
        data = [int(v) for v in a.reshape(-1)]
    return {"shape": list(a.shape), "dtype": dtype, "data": data}


def t64(a, grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, requires_grad=grad)


def tensor_out(t):
    return arr(t.detach().numpy())


def set_params(module, params):
    with torch.no_grad():
        for name, value in params.items():
            getattr(module, name).copy_(t64(value))


def run_float_layer(name, layer, args, module, x, params, train=True, eval_after=False):
    """Forward/backward of a float-input layer in float64; eval-mode output afterwards."""
    module = module.double()
    set_params(module, params)
    module.train(train)
    xt = t64(x, grad=True)
    out = module(xt)
    up = f32(rng.standard_normal(tuple(out.shape)))
    (out * t64(up)).sum().backward()
    case = {
        "name": name,
        "layer": layer,
        "args": args,
        "x": arr(x),
        "params": {k: arr(v) for k, v in params.items()},
        "upstream": arr(up),
        "out": tensor_out(out),
        "grads": {"x": arr(xt.grad.numpy())},
    }
    for pname, p in module.named_parameters():
        case["grads"][pname] = arr(p.grad.numpy())
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        case["after"] = {
            "running_mean": tensor_out(module.running_mean),
            "running_var": tensor_out(module.running_var),
            "num_batches_tracked": int(module.num_batches_tracked.item()),
        }
    if eval_after:
        module.eval()
        with torch.no_grad():
            case["eval_out"] = tensor_out(module(t64(x)))
    return case


cases = []


def batchnorm(name, xshape, affine=True, momentum=0.1, eps=1e-5):
    c = xshape[1]
    x = f32(rng.standard_normal(xshape) * 1.5 + 0.3)
    params = {}
    if affine:
        params["weight"] = f32(rng.uniform(0.5, 1.5, c))
        params["bias"] = f32(rng.standard_normal(c) * 0.5)
    params["running_mean"] = f32(rng.standard_normal(c) * 0.2)
    params["running_var"] = f32(rng.uniform(0.5, 2.0, c))
    cls = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[len(xshape)]
    module = cls(c, eps=eps, momentum=momentum, affine=affine)
    args = {"num_features": c, "eps": eps, "momentum": momentum, "affine": affine}
    cases.append(run_float_layer(name, "batchnorm", args, module, x, params, eval_after=True))


def layernorm(name, xshape, normalized_shape, affine=True, eps=1e-5):
    x = f32(rng.standard_normal(xshape) * 2.0 - 0.5)
    params = {}
    if affine:
        params["weight"] = f32(rng.uniform(0.5, 1.5, normalized_shape))
        params["bias"] = f32(rng.standard_normal(normalized_shape) * 0.5)
    module = torch.nn.LayerNorm(normalized_shape, eps=eps, elementwise_affine=affine)
    args = {"normalized_shape": list(normalized_shape), "eps": eps, "elementwise_affine": affine}
    cases.append(run_float_layer(name, "layernorm", args, module, x, params))


def groupnorm(name, xshape, groups, affine=True, eps=1e-5):
    c = xshape[1]
    x = f32(rng.standard_normal(xshape) * 1.2 + 0.7)
    params = {}
    if affine:
        params["weight"] = f32(rng.uniform(0.5, 1.5, c))
        params["bias"] = f32(rng.standard_normal(c) * 0.5)
    module = torch.nn.GroupNorm(groups, c, eps=eps, affine=affine)
    args = {"num_groups": groups, "num_channels": c, "eps": eps, "affine": affine}
    cases.append(run_float_layer(name, "groupnorm", args, module, x, params))


def embedding(name, vocab, embed, idx_shape):
    idx = rng.integers(0, vocab, size=idx_shape).astype(np.int32)
    w = f32(rng.standard_normal((vocab, embed)))
    module = torch.nn.Embedding(vocab, embed).double()
    set_params(module, {"weight": w})
    up = f32(rng.standard_normal(tuple(idx_shape) + (embed,)))
    out = module(torch.tensor(idx, dtype=torch.long))
    (out * t64(up)).sum().backward()
    cases.append(
        {
            "name": name,
            "layer": "embedding",
            "args": {"vocab_size": vocab, "embed_size": embed},
            "x": arr(idx, "i32"),
            "params": {"weight": arr(w)},
            "upstream": arr(up),
            "out": tensor_out(out),
            "grads": {"weight": arr(module.weight.grad.numpy())},
        }
    )


batchnorm("batchnorm2d", (4, 3, 4, 4))
batchnorm("batchnorm2d_momentum", (2, 5, 3, 3), momentum=0.3, eps=1e-3)
batchnorm("batchnorm1d_nc", (8, 5))
batchnorm("batchnorm1d_ncl", (3, 4, 6))
batchnorm("batchnorm2d_noaffine", (3, 2, 3, 3), affine=False)
layernorm("layernorm_last", (3, 4, 6), [6])
layernorm("layernorm_last2", (2, 4, 5), [4, 5])
layernorm("layernorm_noaffine", (5, 7), [7], affine=False)
layernorm("layernorm_eps", (4, 3), [3], eps=1e-2)
groupnorm("groupnorm", (2, 6, 3, 3), 3)
groupnorm("groupnorm_one_group", (3, 4, 5), 1)
groupnorm("groupnorm_per_channel", (2, 4, 2, 3), 4)
groupnorm("groupnorm_noaffine", (2, 6, 4), 2, affine=False)
embedding("embedding", 10, 4, (2, 3))
embedding("embedding_1d_repeats", 7, 5, (9,))



# ---- Convolution layers, instance/2-D layer/RMS norms and the LSTM cell (h-conv). The conv
# layers take the Python keyword arguments of their torch constructor in "args"; the LSTM cell
# also has the state inputs "h0" and "c0" and its output is cat(h', c') on the last dim.
def conv_layer(name, layer, cls, xshape, cin, cout, k, bias=True, **kw):
    x = f32(rng.uniform(-1, 1, xshape))
    module = cls(cin, cout, k, bias=bias, **kw)
    params = {"weight": f32(rng.uniform(-0.5, 0.5, tuple(module.weight.shape)))}
    if bias:
        params["bias"] = f32(rng.uniform(-0.5, 0.5, tuple(module.bias.shape)))
    args = {"in_channels": cin, "out_channels": cout, "kernel_size": k, "bias": bias, **kw}
    cases.append(run_float_layer(name, layer, args, module, x, params))


class LayerNorm2dRef(torch.nn.Module):
    """tinygrad's LayerNorm2d: LayerNorm over the channels, applied channels-last."""

    def __init__(self, c, eps, affine):
        super().__init__()
        self.ln = torch.nn.LayerNorm(c, eps=eps, elementwise_affine=affine)
        if affine:
            self.weight, self.bias = self.ln.weight, self.ln.bias

    def forward(self, x):
        return self.ln(x.movedim(1, -1)).movedim(-1, 1)


def norm_layer(name, layer, module, xshape, c, args, affine=True, bias=True):
    x = f32(rng.standard_normal(xshape) * 1.3 + 0.4)
    params = {}
    if affine:
        params["weight"] = f32(rng.uniform(0.5, 1.5, c))
        if bias:
            params["bias"] = f32(rng.standard_normal(c) * 0.5)
    cases.append(run_float_layer(name, layer, args, module, x, params))


def lstm_cell(name, n, isz, hsz, bias=True, state=True):
    module = torch.nn.LSTMCell(isz, hsz, bias=bias).double()
    params = {"weight_ih": f32(rng.uniform(-0.5, 0.5, (4 * hsz, isz))),
              "weight_hh": f32(rng.uniform(-0.5, 0.5, (4 * hsz, hsz)))}
    if bias:
        params["bias_ih"] = f32(rng.uniform(-0.5, 0.5, 4 * hsz))
        params["bias_hh"] = f32(rng.uniform(-0.5, 0.5, 4 * hsz))
    set_params(module, params)
    x = f32(rng.standard_normal((n, isz)))
    xt = t64(x, grad=True)
    extra = {}
    if state:
        h0, c0 = f32(rng.standard_normal((n, hsz))), f32(rng.standard_normal((n, hsz)))
        ht, ct = t64(h0, grad=True), t64(c0, grad=True)
        h1, c1 = module(xt, (ht, ct))
        extra = {"h0": (h0, ht), "c0": (c0, ct)}
    else:
        h1, c1 = module(xt)
    out = torch.cat([h1, c1], dim=1)
    up = f32(rng.standard_normal(tuple(out.shape)))
    (out * t64(up)).sum().backward()
    case = {"name": name, "layer": "lstmcell", "args": {"input_size": isz, "hidden_size": hsz, "bias": bias},
            "x": arr(x), "params": {k: arr(v) for k, v in params.items()}, "upstream": arr(up),
            "out": tensor_out(out), "grads": {"x": arr(xt.grad.numpy())},
            "inputs": {k: arr(v) for k, (v, _) in extra.items()}}
    for k, (_, t) in extra.items():
        case["grads"][k] = arr(t.grad.numpy())
    for pname, p in module.named_parameters():
        case["grads"][pname] = arr(p.grad.numpy())
    cases.append(case)


conv_layer("conv1d", "conv1d", torch.nn.Conv1d, (2, 3, 9), 3, 4, 3, stride=2, padding=1)
conv_layer("conv1d_same_groups", "conv1d", torch.nn.Conv1d, (1, 4, 6), 4, 2, 3, bias=False, padding="same",
           dilation=2, groups=2)
conv_layer("conv_transpose2d", "conv_transpose2d", torch.nn.ConvTranspose2d, (2, 3, 3, 4), 3, 2, 3, stride=2,
           padding=1, output_padding=1)
conv_layer("conv_transpose2d_groups", "conv_transpose2d", torch.nn.ConvTranspose2d, (1, 4, 3, 3), 4, 6, 2,
           groups=2, dilation=2)
conv_layer("conv_transpose1d", "conv_transpose1d", torch.nn.ConvTranspose1d, (2, 2, 5), 2, 3, 4, stride=3,
           padding=2, output_padding=1)
norm_layer("instancenorm2d", "instancenorm", torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5), 3,
           {"num_features": 3, "eps": 1e-5, "affine": True})
norm_layer("instancenorm1d_noaffine", "instancenorm", torch.nn.InstanceNorm1d(4, eps=1e-3), (3, 4, 6), 4,
           {"num_features": 4, "eps": 1e-3, "affine": False}, affine=False)
norm_layer("layernorm2d", "layernorm2d", LayerNorm2dRef(5, 1e-5, True), (2, 5, 3, 3), 5,
           {"num_channels": 5, "eps": 1e-5, "elementwise_affine": True})
norm_layer("rmsnorm", "rmsnorm", torch.nn.RMSNorm(6, eps=1e-6), (3, 4, 6), 6,
           {"dim": 6, "eps": 1e-6, "elementwise_affine": True}, bias=False)
norm_layer("rmsnorm_noaffine_eps", "rmsnorm", torch.nn.RMSNorm(5, eps=1e-2, elementwise_affine=False), (4, 5), 5,
           {"dim": 5, "eps": 1e-2, "elementwise_affine": False}, affine=False)
lstm_cell("lstmcell", 3, 4, 5)
lstm_cell("lstmcell_zero_state_nobias", 2, 3, 4, bias=False, state=False)

with open(OUT, "w") as f:
    json.dump({"seed": SEED, "torch": torch.__version__, "cases": cases}, f, indent=None)
    f.write("\n")
print(f"wrote {len(cases)} cases to {os.path.normpath(OUT)}")
