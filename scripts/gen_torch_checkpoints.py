#!/usr/bin/env python3
"""Generate the PyTorch checkpoint fixtures of tests/state.rs: tests/fixtures/torch/*.pt and
tests/fixtures/torch/expected.json.

Run once by hand from the repository root (NOT run in CI; the output is committed):

    python3 scripts/gen_torch_checkpoints.py

Needs torch (CPU build is enough). Values are deterministic (fixed seed); torch.save also writes
a random serialization id, so the .pt bytes differ from run to run.

Files torch.save writes:
    dtypes.pt   one tensor per dtype (f32, f16, bf16, f64, i64, i32, u8, bool, u32) and 0-d ones
    views.pt    views saved as they are: a transpose, a strided slice, an offset block, a row, a
                column, a permutation, an expanded (stride 0) tensor, two slices of one int64
                tensor, and one tensor under two names
    nested.pt   {"model": state dict, "step": 3, "hist": [t, t], "opt": optimizer-like state
                with integer keys, ...}: non-tensor values in between
    module.pt   the state_dict of a Conv2d + BatchNorm2d + ReLU + Flatten + Linear model after one
                training step; expected.json holds an input and the model's output in eval mode
    params.pt   dict(model.named_parameters()): nn.Parameter objects
    proto4.pt   a state dict pickled with protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL, ...)
    legacy.pt   the pre-1.6 format (_use_new_zipfile_serialization=False): not read
    i64_overflow.pt   an int64 value that does not fit in i32
Files made from those by rewriting the archive (each checked with torch.load where torch reads
it):
    deflated.pt     views.pt with every entry deflated
    bigendian.pt    a state dict with byteorder "big" and byte-swapped storages
    bad_opcode.pt   dtypes.pt with an invalid opcode in data.pkl
    missing_data.pt dtypes.pt without one storage file
    short_storage.pt  a tensor whose shape reaches past its storage (pickled here like torch does)

expected.json: {file: {"tensors": [{"name", "dtype" (torch's name), "shape", "values" (flat,
row-major)}], ...}}, names flattened as wgrad names them (dict keys and list indices joined by
dots, non-tensors left out); module.pt has "x" and "y" ({"shape", "values"}) too.
"""

import collections
import io
import json
import os
import pickle
import zipfile

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "torch")
expected = {}


def flatten(obj, prefix=""):
    join = lambda k: f"{prefix}.{k}" if prefix else str(k)
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, (str, int)):
                out += flatten(v, join(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += flatten(v, join(i))
    return out


def describe(t):
    t = t.detach()
    flat = t.contiguous().flatten()
    if t.dtype in (torch.float16, torch.bfloat16):
        flat = flat.float()
    if t.dtype == torch.uint32:
        flat = flat.to(torch.int64)
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "values": flat.tolist()}


def path(name):
    return os.path.join(OUT, name)


def save(name, obj, **kw):
    torch.save(obj, path(name), **kw)
    expected[name] = {"tensors": [dict(name=n, **describe(t)) for n, t in flatten(obj)]}
    check(name)


def check(name):
    """torch.load reads the file back to what expected.json says."""
    got = flatten(torch.load(path(name), weights_only=False))
    want = expected[name]["tensors"]
    assert [n for n, _ in got] == [w["name"] for w in want], name
    for (n, t), w in zip(got, want):
        assert describe(t) == {k: w[k] for k in ("dtype", "shape", "values")}, (name, n)


def read_zip(name):
    with zipfile.ZipFile(path(name)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def write_zip(name, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path(name), "w", compression=compression) as z:
        for n, data in entries:
            z.writestr(n, data)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)

    save("dtypes.pt", {
        "f32": torch.randn(2, 3),
        "f16": torch.randn(4).half(),
        "bf16": torch.randn(3).bfloat16(),
        "f64": torch.randn(2, 2, dtype=torch.float64),
        "i64": torch.tensor([0, -1, 2**31 - 1, -2**31, 7]),
        "i32": torch.tensor([1, -2, 3], dtype=torch.int32),
        "u8": torch.tensor([0, 255, 7], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "u32": torch.tensor([0, 4_000_000_000], dtype=torch.uint32),
        "scalar": torch.tensor(2.5),
        "scalar_i64": torch.tensor(3),
    })

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    longs = torch.arange(10) * 1000 - 3000
    tied = torch.randn(2, 2).half()
    save("views.pt", {
        "base": base,
        "t": base.t(),
        "strided": base[:, ::2],
        "block": base[1:3, 2:5],
        "row": base[2],
        "col": base[:, 3],
        "permuted": torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
        "expanded": torch.arange(3.0).expand(2, 3),
        "head": longs[:4],
        "tail": longs[4:],
        "tied_a": tied,
        "tied_b": tied,
    })

    lin = torch.nn.Linear(3, 2)
    save("nested.pt", {
        "model": lin.state_dict(),
        "step": 3,
        "lr": 0.1,
        "name": "run",
        "none": None,
        "hist": [torch.tensor([1.0, 2.0]), torch.tensor([3, 4], dtype=torch.int32)],
        "opt": {
            "state": {0: {"exp_avg": torch.randn(2, 3), "step": torch.tensor(5.0)}},
            "param_groups": [{"lr": 0.1, "params": [0, 1]}],
        },
    })

    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8, 3))
    model.train()
    model(torch.randn(4, 1, 4, 4))  # running statistics and num_batches_tracked move
    model.eval()
    x = torch.randn(2, 1, 4, 4)
    with torch.no_grad():
        y = model(x)
    save("module.pt", model.state_dict())
    expected["module.pt"]["x"] = {"shape": list(x.shape), "values": x.flatten().tolist()}
    expected["module.pt"]["y"] = {"shape": list(y.shape), "values": y.flatten().tolist()}
    save("params.pt", dict(model.named_parameters()))

    save("proto4.pt", {"w": torch.randn(2, 3), "n": torch.tensor([1, 2, 3])}, pickle_protocol=4)

    torch.save({"w": torch.randn(2)}, path("legacy.pt"), _use_new_zipfile_serialization=False)
    torch.save({"ok": torch.tensor([1]), "big": torch.tensor([1, 2**40])}, path("i64_overflow.pt"))

    # views.pt with every entry deflated.
    write_zip("deflated.pt", read_zip("views.pt"), zipfile.ZIP_DEFLATED)
    expected["deflated.pt"] = expected["views.pt"]
    check("deflated.pt")

    # A big-endian checkpoint: byteorder "big", every storage's elements byte-swapped.
    torch.save({"a": torch.randn(2, 2), "b": torch.tensor([1, -2, 70000]), "h": torch.randn(3).half()},
               path("bigendian.pt"))
    expected["bigendian.pt"] = {"tensors": [dict(name=n, **describe(t)) for n, t in
                                            flatten(torch.load(path("bigendian.pt")))]}
    itemsize = {"0": 4, "1": 8, "2": 2}  # storages in pickling order: a, b, h
    entries = []
    for n, data in read_zip("bigendian.pt"):
        if n.endswith("/byteorder"):
            data = b"big"
        elif "/data/" in n:
            s = itemsize[n.rsplit("/", 1)[1]]
            data = b"".join(data[i:i + s][::-1] for i in range(0, len(data), s))
        entries.append((n, data))
    write_zip("bigendian.pt", entries)
    check("bigendian.pt")

    # Broken files.
    entries = read_zip("dtypes.pt")
    write_zip("bad_opcode.pt", [(n, d[:2] + b"\xff" + d[3:] if n.endswith("data.pkl") else d) for n, d in entries])
    write_zip("missing_data.pt", [(n, d) for n, d in entries if not n.endswith("/data/1")])
    write_short_storage()

    with open(path("expected.json"), "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"))
        f.write("\n")
    for n in sorted(os.listdir(OUT)):
        print(f"{n}: {os.path.getsize(path(n))} bytes")


class FakeStorage:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class FakeTensor:
    """Pickles as torch pickles a tensor: _rebuild_tensor_v2(storage, offset, size, stride, ...)."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, FakeStorage):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None


def write_short_storage():
    """'w' has shape (5,) on a storage of 4 float32 elements."""
    buf = io.BytesIO()
    TorchLikePickler(buf, protocol=2).dump({"w": FakeTensor(FakeStorage("0", 4), 0, (5,), (1,))})
    data = torch.arange(4, dtype=torch.float32).numpy().tobytes()
    write_zip("short_storage.pt", [("archive/data.pkl", buf.getvalue()), ("archive/byteorder", b"little"),
                                   ("archive/data/0", data), ("archive/version", b"3\n")])


if __name__ == "__main__":
    main()
