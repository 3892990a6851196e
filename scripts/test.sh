#!/usr/bin/env bash
# The full test suite: formatting, lints, the wasm32 builds, and every test on every backend
# present (WGRAD_REQUIRE=wgpu,cpu,nvrtc makes a missing backend a failure instead of a skip;
# CUDA runs where a GPU is), a bounded run of the parsers' fuzz targets (scripts/fuzz.sh:
# nightly and cargo-fuzz, installed if missing). Then the browser tests (scripts/test_web.sh;
# WGRAD_SKIP_WEB=1 skips them). Installs what it needs first (scripts/setup.sh, scripts/setup_nvrtc.sh: NVRTC into
# .nvrtc/, so every CUDA kernel is compiled without a GPU; scripts/setup_web.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_nvrtc.sh
# Mesa's Vulkan drivers complain on stderr without a runtime directory.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  export XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/wgrad-runtime-$(id -u)"
  mkdir -p -m 700 "$XDG_RUNTIME_DIR"
fi

echo "== cargo fmt --check"
cargo fmt --check
echo "== docs/benchmarks.md is generated from bench/results (scripts/bench_table.py)"
python3 scripts/bench_table.py --check
echo "== cargo clippy"
cargo clippy --all-targets -- -D warnings
echo "== cargo doc (the API reference builds without warnings: broken links and undocumented public items fail)"
RUSTDOCFLAGS="-D warnings -D missing_docs" cargo doc --no-deps
echo "== the crate ships no test data or build outputs (scripts/check_package.sh)"
bash scripts/check_package.sh cargo
echo "== wasm32 builds: the core alone, and with the browser's WebGPU"
cargo build --target wasm32-unknown-unknown --no-default-features
cargo clippy --target wasm32-unknown-unknown --no-default-features --features wgpu,wasm --lib --test web -- -D warnings
echo "== cargo test (with the doc tests: the examples in the API reference run)"
bash scripts/data.sh
cargo test
if [ "${WGRAD_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz: the parsers, 10 s per target (scripts/fuzz.sh; WGRAD_SKIP_FUZZ=1 skips it)"
  bash scripts/fuzz.sh 10
fi
if [ "${WGRAD_SKIP_WEB:-0}" != 1 ]; then
  echo "== browser: wasm-bindgen tests in headless Chromium, npm package loaded by a page"
  bash scripts/test_web.sh
fi
