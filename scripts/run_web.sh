#!/usr/bin/env bash
# The browser demo: builds the npm package (scripts/build_web.sh) and the data (scripts/data.sh),
# then serves the repository and prints the demo's URL (www/index.html trains the tutorial's CNN
# on MNIST digits on the page's WebGPU; www/bench.html times a training step). Open it in a
# browser with WebGPU. `HEADLESS=1` instead runs the demo in headless Chromium and prints its
# result (STEPS, BS choose the run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build_web.sh
bash scripts/data.sh
if [ "${HEADLESS:-0}" = 1 ]; then
  exec node scripts/page_test.mjs --no-package --demo --steps="${STEPS:-100}" --bs="${BS:-128}"
fi
PORT="${PORT:-8123}"
echo "demo:      http://localhost:$PORT/www/index.html?steps=1000"
echo "benchmark: http://localhost:$PORT/www/bench.html"
exec node scripts/serve.mjs "$PORT" .
