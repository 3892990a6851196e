#!/usr/bin/env bash
# Installs NVRTC (NVIDIA's runtime CUDA compiler, which runs without a GPU or driver) into the
# project-local, gitignored .nvrtc/, unless it is already there: tests/cuda.rs compiles every
# generated CUDA kernel to CUBIN with it. The library comes from NVIDIA's PyPI wheel (a zip),
# fetched with pip and unpacked with Python's zipfile; nothing outside .nvrtc/ changes.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=12.9.86
DIR=.nvrtc
if [ -f "$DIR/libnvrtc.so.12" ] && [ -f "$DIR/VERSION" ] && [ "$(cat "$DIR/VERSION")" = "$VERSION" ]; then
  exit 0
fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "setup_nvrtc: the NVRTC wheel is for Linux x86-64; the CUDA compile check will be skipped" >&2; exit 0 ;;
esac
echo "setup_nvrtc: installing NVRTC $VERSION into $DIR"
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "setup_nvrtc: installing pip"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --dest "$tmp" "nvidia-cuda-nvrtc-cu12==$VERSION"
rm -rf "$DIR"
mkdir -p "$DIR"
python3 - "$tmp"/nvidia_cuda_nvrtc_cu12-*.whl "$DIR" <<'PY'
import os, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
want = {"libnvrtc.so.12", "libnvrtc-builtins.so.12.9", "License.txt"}
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if base in want:
            with z.open(n) as src, open(os.path.join(out, base), "wb") as dst:
                dst.write(src.read())
            want.discard(base)
if want:
    sys.exit(f"setup_nvrtc: {sorted(want)} missing from {whl}")
PY
echo "$VERSION" >"$DIR/VERSION"
