#!/usr/bin/env bash
# The check of the GPU backends on a machine with an NVIDIA GPU, in two halves:
#
#   bash scripts/gpu_check.sh build   Here, with the Rust toolchain: builds the release test and
#                                     benchmark binaries (cargo --no-run, stripped, into
#                                     target/gpu-check) and stages what the run needs in
#                                     .gpu-check/: the binaries, the MNIST data, the Vulkan loader
#                                     packages (NVIDIA's Vulkan driver needs a loader the GPU
#                                     machine may lack). The binaries travel as one xz archive
#                                     (about 7 MB for 65 MB): the device tool carries 64 MiB.
#   bash scripts/gpu_check.sh run     On the GPU machine (NVIDIA driver, NVRTC, PyTorch; no Rust
#                                     toolchain, no network), from the repository root with
#                                     .gpu-check/ beside it: the CUDA tests, the op suite, the JIT
#                                     and MNIST tests on CUDA and on WebGPU (wgpu on NVIDIA's
#                                     Vulkan driver), bench_step on both (jitted and not), the
#                                     1000-step MNIST run on CUDA (97% target), and PyTorch's eager
#                                     step and CUDA-graph replay of the same step
#                                     (scripts/bench_torch.py). A few minutes; the log goes to
#                                     $OUT/gpu_check.log (else .gpu-check/log), a summary at the end.
#
# Without an argument: build where cargo exists, else run. `ONLY=regex` runs only the parts whose
# names match it (`ONLY='JIT|GPT tests' bash scripts/gpu_check.sh run`). With the device tool of this
# workplace: run(command="bash scripts/gpu_check.sh run", carry=[".gpu-check"], timeout_s=560).
# `bash scripts/gpu_check.sh dry-run` (after build) runs the run half here, where every GPU part
# is skipped: it checks the script and the staged files, not the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
G=.gpu-check
mode="${1:-}"
if [ -z "$mode" ]; then
  if command -v cargo >/dev/null 2>&1; then mode=build; else mode=run; fi
fi

build() {
  set -e
  local target=target/gpu-check
  mkdir -p target
  # No debug info and stripped symbols: the binaries travel (64 MiB for everything).
  export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols
  echo "== building release test binaries (ops, jit, mnist, cuda, gpt) and examples (bench_step, bench_gpt, bench_matmul, mnist)"
  cargo test --release --target-dir "$target" --no-run --test ops --test jit --test mnist --test cuda --test gpt \
    --message-format=json-render-diagnostics >"$target.json"
  cargo build --release --target-dir "$target" --example bench_step --example mnist --example bench_gpt --example bench_matmul
  rm -rf "$G/bin" "$G/data"
  mkdir -p "$G/bin" "$G/data"
  python3 - "$target.json" "$G/bin" <<'PY'
import json, shutil, sys
out = sys.argv[2]
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        shutil.copy(m["executable"], f"{out}/{m['target']['name']}")
PY
  for e in bench_step bench_gpt bench_matmul; do cp "$target/release/examples/$e" "$G/bin/$e"; done
  cp "$target/release/examples/mnist" "$G/bin/mnist_example"
  bash scripts/data.sh >/dev/null
  cp -rL data/mnist "$G/data/mnist"
  # Test binaries read a few files (shaders/golden) by their build-time path; the run links it.
  pwd >"$G/manifest_dir"
  # The GPU machine's image is Ubuntu 24.04 (glibc 2.39): the binaries must not need more.
  local need
  need=$(objdump -T "$G"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "$need" >"$G/glibc_needed"
  # The Vulkan loader and GL dispatch packages, unpacked onto / there (the device README's way).
  if ! ls "$G"/gl/libvulkan1_*.deb >/dev/null 2>&1; then
    mkdir -p "$G/gl" /tmp/gpu-check-apt/partial
    local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-check-apt'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd "$G/gl" && apt-get $o download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  fi
  ls -la "$G/bin"
  tar -cJf "$G/bin.tar.xz" -C "$G" bin
  rm -rf "$G/bin"
  echo "== staged $(du -sh "$G" | cut -f1) in $G (binaries need $need):"
  echo "now run on the GPU machine: bash scripts/gpu_check.sh run   (carry $G)"
}

LOG=
FAILED=()
PASSED=()
log() { echo "$@" | tee -a "$LOG"; }
# step NAME SECONDS COMMAND...: run one part, keep going whatever it returns.
step() {
  local name=$1 secs=$2
  shift 2
  # ONLY (a bash regex) runs just the parts whose names match: a second, shorter run.
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
  log ""
  log "== $name"
  local t0=$SECONDS
  timeout "$secs" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  log "-- $name: exit $rc in $((SECONDS - t0)) s"
  if [ "$rc" = 0 ]; then PASSED+=("$name"); else FAILED+=("$name (exit $rc)"); fi
}

run() {
  local dry=${1:-0}
  [ -f "$G/bin.tar.xz" ] && tar -xJf "$G/bin.tar.xz" -C "$G"
  if [ ! -x "$G/bin/cuda" ]; then
    echo "gpu_check: $G/bin is missing: run 'bash scripts/gpu_check.sh build' first (where cargo is) and carry $G" >&2
    exit 2
  fi
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then LOG=$OUT/gpu_check.log; else LOG=$G/log; fi
  : >"$LOG"
  export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/gpu-check-xdg}
  mkdir -p -m 700 "$XDG_RUNTIME_DIR"
  export WGRAD_DATA=$PWD/$G/data WGRAD_CACHE_DIR=/tmp/gpu-check-cache RUST_BACKTRACE=1
  local manifest
  manifest=$(cat "$G/manifest_dir")
  if [ "$dry" = 0 ]; then
    # The test binaries' build-time path, pointing here.
    if [ ! -e "$manifest" ]; then mkdir -p "$(dirname "$manifest")" && ln -s "$PWD" "$manifest"; fi
    # The Vulkan loader, where the image has none (unpacked onto /, as the device README says).
    if ! ldconfig -p | grep -q libvulkan.so.1; then
      for f in "$G"/gl/*.deb; do dpkg -x "$f" /; done
      ldconfig
    fi
    local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    if ! ls /usr/share/vulkan/icd.d/nvidia*.json /etc/vulkan/icd.d/nvidia*.json >/dev/null 2>&1 && [ -f "$icd" ]; then
      export VK_DRIVER_FILES=$icd __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    fi
    # NVRTC: the system's (CUDA 13 here), wherever the toolkit or PyTorch's wheels put it.
    if [ -z "${WGRAD_NVRTC:-}" ]; then
      local nv
      nv=$(ldconfig -p | awk '/libnvrtc\.so/ && !/alt/ {print $NF; exit}')
      [ -n "$nv" ] || nv=$(find /usr/local /opt /usr/lib -name 'libnvrtc.so*' ! -name '*alt*' ! -name '*builtins*' 2>/dev/null | sort | head -1)
      [ -n "$nv" ] && export WGRAD_NVRTC=$nv
    fi
    export WGRAD_REQUIRE=cuda,wgpu,nvrtc
  fi
  log "gpu_check run $(date -u +%FT%TZ) on $(uname -m), glibc $(ldd --version 2>/dev/null | head -1 | grep -o '[0-9.]*$'), binaries need $(cat "$G/glibc_needed")"
  log "WGRAD_NVRTC=${WGRAD_NVRTC:-} VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 | tee -a "$LOG"
  else
    log "no nvidia-smi"
  fi
  local b=$G/bin
  if [ "$dry" = 1 ]; then
    # Here: the staged binaries start, find NVRTC, skip what needs the GPU; tiny workloads.
    [ -d .nvrtc ] && export WGRAD_NVRTC=${WGRAD_NVRTC:-$PWD/.nvrtc}
    step "CUDA tests (dry: NVRTC only)" 600 "$b/cuda" --test-threads=2 --nocapture
    step "JIT error tests (dry)" 120 "$b/jit" input_mismatch
    step "bench_step on CPU (dry)" 120 env DEV=CPU STEPS=1 BS=8 "$b/bench_step"
    step "bench_step on CUDA (dry: must fail without a GPU)" 60 sh -c "! DEV=CUDA STEPS=1 $b/bench_step"
    step "MNIST 5 steps on CPU (dry)" 120 env DEV=CPU STEPS=5 BS=16 EVAL_EVERY=5 "$b/mnist_example"
    step "PyTorch eager step on the CPU (dry)" 120 env PYTHONUNBUFFERED=1 DEVICE=cpu STEPS=1 BS=8 python3 scripts/bench_torch.py
  else
    # Most telling first: CUDA correctness, then speed beside PyTorch, then WebGPU (Vulkan).
    step "CUDA tests (NVRTC for every kernel, golden, graph replay counters)" 150 "$b/cuda" --test-threads=4 --nocapture
    step "op suite on CUDA and WebGPU (and f16 on every device)" 120 "$b/ops" op_suite_cuda op_suite_wgpu f16_ops
    local torch=0
    python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1 && torch=1
    [ $torch = 1 ] || { log "no PyTorch with CUDA here: skipping the PyTorch references"; FAILED+=("PyTorch comparison (no torch with CUDA)"); }
    step "bench_step on CUDA" 60 env DEV=CUDA STEPS=20 "$b/bench_step"
    [ $torch = 1 ] && step "PyTorch eager and CUDA-graph step" 60 env PYTHONUNBUFFERED=1 STEPS=20 python3 scripts/bench_torch.py
    step "matmul on CUDA" 60 env DEV=CUDA "$b/bench_matmul"
    [ $torch = 1 ] && step "PyTorch matmul (cuBLAS, f32, no TF32)" 60 env PYTHONUNBUFFERED=1 DEVICE=cuda python3 scripts/bench_matmul_torch.py
    for size in "" "N_LAYER=4 N_EMBD=128 BLOCK=128 BS=32"; do
      # shellcheck disable=SC2086
      step "GPT step on CUDA ${size:-small}" 60 env DEV=CUDA STEPS=20 $size "$b/bench_gpt"
      # shellcheck disable=SC2086
      [ $torch = 1 ] && step "PyTorch GPT step on CUDA ${size:-small}" 60 env PYTHONUNBUFFERED=1 DEVICE=cuda STEPS=20 $size python3 scripts/bench_gpt_torch.py
    done
    # The same steps planned for a GPU of 65,536 resident threads (the optimizer's default where
    # the device does not say): what sizing kernels to this GPU gains.
    step "GPT step on CUDA, medium, planned for 65536 threads" 60 env WGRAD_GPU_THREADS=65536 DEV=CUDA STEPS=20 N_LAYER=4 N_EMBD=128 BLOCK=128 BS=32 "$b/bench_gpt"
    step "bench_step on CUDA, planned for 65536 threads" 60 env WGRAD_GPU_THREADS=65536 DEV=CUDA STEPS=20 "$b/bench_step"
    step "matmul on CUDA, planned for 65536 threads" 60 env WGRAD_GPU_THREADS=65536 DEV=CUDA "$b/bench_matmul"
    # The same without operand tiles staged in workgroup memory: what staging gains.
    step "matmul on CUDA, TILES=0" 60 env TILES=0 DEV=CUDA "$b/bench_matmul"
    step "GPT step on CUDA, medium, TILES=0" 60 env TILES=0 DEV=CUDA STEPS=20 N_LAYER=4 N_EMBD=128 BLOCK=128 BS=32 "$b/bench_gpt"
    step "GPT step on CUDA, small, TILES=0" 60 env TILES=0 DEV=CUDA STEPS=20 "$b/bench_gpt"
    step "bench_step on CUDA, TILES=0" 60 env TILES=0 DEV=CUDA STEPS=20 "$b/bench_step"
    for tiles in 1 0; do
      step "bench_step on CUDA, TILES=$tiles, DEBUG=2 profile (in cnn_cuda_tiles$tiles.log)" 60 sh -c \
        "TILES=$tiles DEV=CUDA STEPS=3 DEBUG=2 $b/bench_step >$(dirname "$LOG")/cnn_cuda_tiles$tiles.log 2>&1; tail -3 $(dirname "$LOG")/cnn_cuda_tiles$tiles.log"
    done
    step "GPT step on CUDA, medium, DEBUG=2 profile (in gpt_cuda_debug2.log)" 60 sh -c \
      "DEV=CUDA STEPS=2 DEBUG=2 N_LAYER=4 N_EMBD=128 BLOCK=128 BS=32 $b/bench_gpt >$(dirname "$LOG")/gpt_cuda_debug2.log 2>&1; tail -3 $(dirname "$LOG")/gpt_cuda_debug2.log"
    # (The sampling test runs on the interpreter and the CPU only.)
    step "GPT tests on every device" 120 "$b/gpt" --nocapture --skip sampling_draws
    step "JIT tests on every device" 90 "$b/jit"
    step "MNIST test (60 steps) on every compiled device" 120 "$b/mnist" --nocapture
    step "bench_step on WEBGPU" 60 env DEV=WEBGPU STEPS=20 "$b/bench_step"
    step "matmul on WEBGPU" 60 env DEV=WEBGPU "$b/bench_matmul"
    step "matmul on WEBGPU, TILES=0" 60 env TILES=0 DEV=WEBGPU "$b/bench_matmul"
    step "GPT step on WEBGPU small" 60 env DEV=WEBGPU STEPS=20 "$b/bench_gpt"
    step "MNIST 1500 steps on CUDA (target 97%)" 120 env DEV=CUDA STEPS=1500 TARGET_EVAL_ACC_PCT=97 "$b/mnist_example"
  fi
  log ""
  log "== summary: ${#PASSED[@]} passed, ${#FAILED[@]} failed"
  for p in "${PASSED[@]}"; do log "  ok      $p"; done
  for f in "${FAILED[@]}"; do log "  FAILED  $f"; done
  grep -hE "^(device |  jitted|  not jitted|torch |cuda: |SKIPPED|matmul |GPT )|test accuracy|op-suite kernels" "$LOG" | sort -u | sed 's/^/  /' | tee -a "$LOG.summary"
  [ ${#FAILED[@]} = 0 ]
}

case "$mode" in
  build) build ;;
  run) run 0 ;;
  dry-run) run 1 ;;
  *) echo "usage: $0 [build|run|dry-run]" >&2; exit 2 ;;
esac
