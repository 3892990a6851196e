"""Write the fuzz targets' seed corpus into fuzz/seeds/<target>/ (committed; run once, or again
after changing this file): small valid IDX files raw and gzipped, safetensors files of every
dtype the loader reads, state dicts for the small model of fuzz/fuzz_targets/state_dict.rs,
and the PyTorch checkpoints of tests/fixtures/torch/ (whole, and as the pickle and storages
fuzz/fuzz_targets/torch_load.rs zips itself), plus a few near misses. Python 3 standard library
only."""

import gzip
import json
import os
import struct
import zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "seeds")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def idx(dims, data, dtype=8):
    return bytes([0, 0, dtype, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def gz(data):
    return gzip.compress(data, compresslevel=6, mtime=0)


def safetensors(entries, metadata=None):
    """entries: (name, dtype, shape, raw bytes)."""
    header, blob = {}, b""
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def f32(*v):
    return struct.pack(f"<{len(v)}f", *v)


# ---- idx
labels = idx([3], [1, 2, 3])
images = idx([2, 28, 28], [(i * 7) % 256 for i in range(2 * 784)])
scalar = idx([], [5])
for name, data in [("labels", labels), ("images", images), ("scalar", scalar), ("4d", idx([1, 2, 2, 3], range(12)))]:
    write("idx", name, data)
    write("idx", name + ".gz", gz(data))
write("idx", "two-members.gz", gz(labels[:6]) + gz(labels[6:]))
write("idx", "dtype-f32", idx([2], [0] * 8, dtype=0x0D))
write("idx", "truncated-header", bytes([0, 0, 8, 3, 0, 0]))
write("idx", "oversized", labels + b"\0")

# ---- safetensors
dtypes = [
    ("F32", [2, 2], f32(1.0, -2.5, 0.0, 3e38)),
    ("F16", [3], struct.pack("<3e", 1.0, -0.5, 65504.0)),
    ("I32", [], struct.pack("<i", -7)),
    ("U32", [2], struct.pack("<2I", 0, 4294967295)),
    ("U8", [1, 3], bytes([0, 128, 255])),
    ("BOOL", [2], bytes([0, 1])),
    ("I64", [2], struct.pack("<2q", -(2**31), 2**31 - 1)),
    ("F64", [2], struct.pack("<2d", 0.1, -1e300)),
    ("BF16", [2], bytes([0x80, 0x3F, 0x00, 0xC0])),
]
for dtype, shape, raw in dtypes:
    write("safetensors", dtype.lower(), safetensors([("t", dtype, shape, raw)]))
write("safetensors", "all", safetensors([(d.lower(), d, s, r) for d, s, r in dtypes], {"format": "pt"}))
write("safetensors", "empty", safetensors([]))
write("safetensors", "metadata-only", safetensors([], {"a": "b"}))
write("safetensors", "i64-too-big", safetensors([("t", "I64", [1], struct.pack("<q", 2**40))]))

# ---- state_dict: a flags byte (bit 0 strict, bit 1 structured), then the state.
model = [
    ("l1.weight", "F32", [2, 3], f32(*[0.1 * i for i in range(6)])),
    ("l1.bias", "F32", [2], f32(1.0, -1.0)),
    ("bn.weight", "F32", [2], f32(2.0, 3.0)),
    ("bn.bias", "F32", [2], f32(0.5, 0.25)),
    ("bn.running_mean", "F32", [2], f32(0.0, 1.0)),
    ("bn.running_var", "F32", [2], f32(1.0, 4.0)),
    ("bn.num_batches_tracked", "I32", [], struct.pack("<i", 10)),
]
for flags in (0, 1):
    write("state_dict", f"model-{flags}", bytes([flags]) + safetensors(model))
    write("state_dict", f"partial-{flags}", bytes([flags]) + safetensors(model[:2] + [("extra", "F32", [1], f32(1.0))]))
    write("state_dict", f"wrong-shape-{flags}", bytes([flags]) + safetensors([("l1.bias", "F32", [3], f32(1, 2, 3))] + model[2:]))
# Structured: entry count, then per entry name index, rank, dims, dtype index, data.
write("state_dict", "structured-0", bytes([2, 2, 1, 1, 2, 0]) + f32(5.0, 6.0) + bytes([6, 0, 2]) + struct.pack("<i", 3))
write("state_dict", "structured-1", bytes([3, 1, 0, 2, 2, 3, 0]) + bytes(24))

# ---- torch_load: a flags byte (bit 0 structured, bit 1 big-endian), then the file, or the
# pickle and the storages, each after its u16 length.
TORCH = os.path.join(ROOT, "..", "..", "tests", "fixtures", "torch")
for name in ["dtypes", "views", "nested", "module", "proto4", "deflated", "bigendian", "legacy", "short_storage"]:
    path = os.path.join(TORCH, name + ".pt")
    with open(path, "rb") as f:
        write("torch_load", name, b"\0" + f.read())
    if not zipfile.is_zipfile(path):
        continue
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        base = names[0].split("/")[0]
        parts = [z.read(f"{base}/data.pkl")]
        while f"{base}/data/{len(parts) - 1}" in names:
            parts.append(z.read(f"{base}/data/{len(parts) - 1}"))
    flags = 1 | (2 if name == "bigendian" else 0)
    write("torch_load", name + "-structured", bytes([flags]) + b"".join(struct.pack("<H", len(p)) + p for p in parts))

# ---- dictionaries (libFuzzer -dict)
with open(os.path.join(ROOT, "..", "dicts", "safetensors.dict"), "w") as f:
    for tok in ["dtype", "shape", "data_offsets", "__metadata__", "F32", "F16", "I32", "U32", "U8",
                "BOOL", "I64", "F64", "BF16", '{"', '":', '":{', '":[', "],", "]}", "}}", ",", "-1",
                "18446744073709551615", "4294967296", "1e3", "l1.weight", "bn.num_batches_tracked"]:
        f.write(json.dumps(tok) + "\n")
with open(os.path.join(ROOT, "..", "dicts", "idx.dict"), "w") as f:
    for tok in [b"\x00\x00\x08\x01", b"\x00\x00\x08\x03", b"\x00\x00\x00\x1c", b"\xff\xff\xff\xff",
                b"\x80\x00\x00\x00", b"\x1f\x8b\x08\x00"]:
        f.write('"' + "".join(f"\\x{b:02x}" for b in tok) + '"\n')
with open(os.path.join(ROOT, "..", "dicts", "torch_load.dict"), "w") as f:
    for tok in [b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07",
                b"\xff\xff\xff\xff", b"/data.pkl", b"/data/0", b"byteorder", b"little", b"big",
                b"\x80\x02", b"ctorch._utils\n_rebuild_tensor_v2\n", b"ctorch._utils\n_rebuild_parameter\n",
                b"ctorch._utils\n_rebuild_tensor_v3\n", b"ctorch\nFloatStorage\n", b"ctorch\nLongStorage\n",
                b"ctorch\nHalfStorage\n", b"ctorch\nBFloat16Storage\n", b"ccollections\nOrderedDict\n",
                b"X\x07\x00\x00\x00storage", b"X\x03\x00\x00\x00cpu", b"(", b"t", b"R", b"Q", b"u", b"s",
                b"q\x00", b"h\x00", b"K\x01", b"\x85", b"\x86", b"\x87", b")", b"}", b"]", b"\x89", b"\x88",
                b"\x8a\x08", b"\x95", b"\x94", b"\x93", b"\x8c", b"b", b"."]:
        f.write('"' + "".join(f"\\x{b:02x}" for b in tok) + '"\n')
