#!/usr/bin/env bash
# The full test suite: formatting, lints, the wasm32 build of the core, and every test on every
# backend present. Installs what it needs first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --check
echo "== cargo clippy"
cargo clippy --all-targets -- -D warnings
echo "== wasm32 build of the core (interpreter only, no native dependency)"
cargo build --target wasm32-unknown-unknown --no-default-features
echo "== cargo test"
bash scripts/data.sh
cargo test
