#!/usr/bin/env bash
# The browser demo: builds the npm package (scripts/build_web.sh) and the data (scripts/data.sh),
# then serves the repository and prints the demo's URL (www/index.html: train MNIST digits or
# Fashion-MNIST in a Web Worker on WebGPU, with live charts, a drawing pad, save/load, resume and
# a kernel inspector; www/bench.html times a training step). Open it in a browser with WebGPU.
# `HEADLESS=1` instead runs the demo's end-to-end test in headless Chromium (STEPS, BS, MODEL
# choose the run; screenshots in target/demo-shots).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build_web.sh
bash scripts/data.sh
if [ "${HEADLESS:-0}" = 1 ]; then
  exec node scripts/demo_test.mjs --steps="${STEPS:-120}" --bs="${BS:-64}" --model="${MODEL:-mlp}"
fi
PORT="${PORT:-8123}"
echo "demo:      http://localhost:$PORT/www/index.html"
echo "benchmark: http://localhost:$PORT/www/bench.html"
exec node scripts/serve.mjs "$PORT" .
