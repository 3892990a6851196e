#!/usr/bin/env bash
# The main job: trains the tutorial's CNN a few steps and prints the loss falling.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/data.sh
cargo run --release --example tutorial
