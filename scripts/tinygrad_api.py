#!/usr/bin/env python3
"""Pin tinygrad's public Tensor API: tests/fixtures/tinygrad_api.txt.

Run once by hand (NOT in CI; the output is committed) with the path of a tinygrad checkout:

    python3 scripts/tinygrad_api.py /path/to/tinygrad [commit]

It reads `tinygrad/tensor.py` and the mixins `class Tensor` inherits from (tinygrad/mixin/*.py)
with Python's `ast` module, without importing tinygrad, and lists every public name of the class
(methods, properties, class attributes; not starting with `_`) plus the `grad` slot, minus the
names below that are tinygrad's internals rather than user API. `tests/api_coverage.rs` maps each
listed name to wgrad's Rust and JavaScript API and prints the coverage.
"""
import ast
import os
import subprocess
import sys

# Internal: used by tinygrad's own engine, kernels or tests, not by models.
INTERNAL = {
    "invalids", "ufix", "usum", "uprod", "threefry", "max_shape", "max_numel", "shrink_to",
    "image_dot", "image_conv2d", "alu", "const", "is_param_", "as_param", "call",
    "custom_kernel", "callify", "linear_with_vars", "schedule_linear", "replace",
    "decode_hevc_frame",
}

root = sys.argv[1]
commit = sys.argv[2] if len(sys.argv) > 2 else None
if commit is None:
    try:
        commit = subprocess.check_output(["git", "-C", root, "rev-parse", "HEAD"], text=True).strip()
    except Exception:
        commit = "unknown"

classes = {}
paths = [os.path.join(root, "tinygrad", "tensor.py")]
mixins = os.path.join(root, "tinygrad", "mixin")
paths += [os.path.join(mixins, f) for f in sorted(os.listdir(mixins)) if f.endswith(".py")]
for p in paths:
    for node in ast.parse(open(p).read()).body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node


def names(cls):
    out = set()
    node = classes[cls]
    for b in node.body:
        if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(b.name)
        elif isinstance(b, ast.Assign):
            out.update(t.id for t in b.targets if isinstance(t, ast.Name))
        elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
            out.add(b.target.id)
    for base in node.bases:
        if ast.unparse(base) in classes:
            out |= names(ast.unparse(base))
    return out


public = {n for n in names("Tensor") if not n.startswith("_")} | {"grad"}
missing = INTERNAL - public
assert not missing, f"internal names not in tinygrad's Tensor any more: {sorted(missing)}"
user = sorted(public - INTERNAL)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tinygrad_api.txt")
with open(out, "w") as fh:
    fh.write(f"# tinygrad's public Tensor names, user-facing ({len(user)}): scripts/tinygrad_api.py read\n")
    fh.write(f"# tinygrad/tinygrad at {commit} (tensor.py and its mixins); {len(INTERNAL)} internal names left out.\n")
    for n in user:
        fh.write(n + "\n")
print(f"{len(user)} names -> {os.path.normpath(out)}")
