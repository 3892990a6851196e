#!/usr/bin/env bash
# The main job: the tinygrad MNIST tutorial. Trains the tutorial's CNN on the MNIST digits
# (8,000 train / 2,000 test, see scripts/data.sh) with Adam, the whole step jitted by TinyJit:
# a progress bar with loss and ms/step, the test accuracy every 100 steps, and the final test
# accuracy, which must reach TARGET_EVAL_ACC_PCT (97). STEPS, SEED, DEV, BS, FASHION=1 and the
# other knobs of examples/mnist.rs pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/data.sh
TARGET_EVAL_ACC_PCT="${TARGET_EVAL_ACC_PCT:-97}" cargo run --release --example mnist
echo "the same training in the browser, on WebGPU: bash scripts/run_web.sh"
