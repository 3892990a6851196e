#!/usr/bin/env bash
# Builds the browser package: the engine compiled to wasm32 with the WebGPU backend, packaged by
# wasm-pack for plain pages (pkg/web, what package.json exports) and for bundlers (pkg/bundler),
# with weak references so collected JS tensors free their GPU buffers. Prints the wasm size.
# `PROFILE=dev` builds without optimisation (faster, much larger).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_web.sh
# wasm-pack runs wasm-opt; npm's binaryen provides a recent one (see scripts/setup_web.sh).
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
mode=--release
[ "${PROFILE:-release}" = dev ] && mode=--dev
for target in web bundler; do
  echo "== wasm-pack build --target $target"
  wasm-pack build $mode --target "$target" --out-dir "pkg/$target" --out-name wgrad --weak-refs \
    --no-pack -- --no-default-features --features wgpu,wasm
done
# wasm-pack writes a .gitignore of "*" into each output, which would make `npm pack` leave the
# files out (the repository's own .gitignore already ignores pkg/).
rm -f pkg/*/.gitignore
wasm=pkg/web/wgrad_bg.wasm
raw=$(wc -c < "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
echo "wasm size: $raw bytes raw, $gz bytes gzipped ($wasm)"
