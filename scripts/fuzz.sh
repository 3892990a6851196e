#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers (fuzz/: cargo-fuzz targets idx, safetensors,
# state_dict, torch_load), each for a bounded time: `bash scripts/fuzz.sh [seconds per target]`
# (default 10; the test command runs it with the default). Installs the nightly toolchain and cargo-fuzz if
# missing. Each target starts from its committed seeds (fuzz/seeds/<target>) and the local
# corpus it grew before (fuzz/corpus/<target>, gitignored). Prints executions and crashes per
# target; a crash fails the script, its input is saved under fuzz/artifacts/<target>/ (turn it
# into a regression test in tests/).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --version 0.13.2 --locked
fi
cargo +nightly fuzz build -a
bin=fuzz/target/x86_64-unknown-linux-gnu/release
failed=0
for t in idx safetensors state_dict torch_load; do
  dict=fuzz/dicts/safetensors.dict
  [ "$t" = idx ] && dict=fuzz/dicts/idx.dict
  [ "$t" = torch_load ] && dict=fuzz/dicts/torch_load.dict
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  log="fuzz/artifacts/$t.log"
  # Leak checks off: the engine's caches and weak-reference lists grow on purpose, and checking
  # after every input slows the targets a hundredfold (tests/long_run.rs checks memory instead).
  set +e
  "$bin/$t" -max_total_time="$secs" -detect_leaks=0 -print_final_stats=1 -dict="$dict" \
    -artifact_prefix="fuzz/artifacts/$t/" "fuzz/corpus/$t" "fuzz/seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
  if [ $rc -ne 0 ]; then
    failed=1
    echo "fuzz $t: CRASH after ${runs} executions (exit $rc):"
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -5
  else
    echo "fuzz $t: ${runs} executions in ${secs} s, 0 crashes, corpus ${corpus} inputs"
  fi
done
exit $failed
