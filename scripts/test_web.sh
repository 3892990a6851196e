#!/usr/bin/env bash
# The browser tests: the wasm-bindgen tests of tests/web.rs in headless Chromium (Debian's
# chromium through chromium-driver; WebGPU on, a software adapter without a GPU; flags in
# webdriver.json), then the npm package built, packed and loaded in Node.js and in Deno
# (scripts/node_test.mjs: WebAssembly kernels where there is no WebGPU; the tutorial's CNN trained 60 steps there by
# examples/mnist_node.mjs) and by a plain page that trains a model
# (scripts/page_test.mjs), the TypeScript declarations type-check, and the demo page is
# driven end to end (scripts/demo_test.mjs: training in its worker, charts, predictions, save and
# load, a corrupt upload, resume after a reload, the kernel inspector; screenshots in
# target/demo-shots). Installs what it
# needs first (scripts/setup_web.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_web.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export CHROMEDRIVER=/usr/bin/chromedriver
# The software adapter compiles and runs every kernel on the CPU: allow minutes per test.
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-900}"
echo "== wasm-pack test --headless --chrome (tests/web.rs)"
wasm-pack test --headless --chrome -- --no-default-features --features wgpu,wasm --test web
echo "== npm package"
bash scripts/build_web.sh
echo "== what the npm package ships (npm pack --dry-run; scripts/check_package.sh)"
bash scripts/check_package.sh npm
echo "== TypeScript declarations (tsc --strict tests/types/check.ts)"
npm run -s typecheck
echo "== the packed package in Node.js (scripts/node_test.mjs)"
node scripts/node_test.mjs
echo "== the packed package in Deno (the same script; Deno's WebGPU, then WebAssembly kernels)"
XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}" target/tools/deno/node_modules/.bin/deno run -A scripts/node_test.mjs
bash scripts/data.sh
echo "== the tutorial in Node.js on WebAssembly kernels, 60 steps (examples/mnist_node.mjs)"
STEPS=60 MIN_ACC=88 node examples/mnist_node.mjs
echo "== the packed package in a plain page"
node scripts/page_test.mjs
echo "== WebAssembly kernels on every core in a cross-origin isolated page: the same losses as one thread"
node scripts/page_test.mjs --no-package --no-webgpu --threads-test
echo "== the matmul benchmark page runs wgrad, jax-js and tfjs (small sizes: a smoke test)"
node scripts/page_test.mjs --no-package --bench-matmul
echo "== the demo page end to end (scripts/demo_test.mjs)"
node scripts/demo_test.mjs
