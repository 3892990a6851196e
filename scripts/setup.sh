#!/usr/bin/env bash
# Installs what building and testing wgrad needs on a fresh Debian machine (as root), skipping
# whatever is already there: a C compiler (the cpu backend), a Vulkan driver for the WebGPU
# backend (Mesa's lavapipe runs it on the CPU where there is no GPU driver), the wasm32 Rust
# target, rustfmt and clippy.
set -euo pipefail

apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

if ! command -v "${CC:-cc}" >/dev/null 2>&1; then
  apt_install gcc libc6-dev
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
# wgpu finds Vulkan drivers through their ICD files; install Mesa's (lavapipe) when none exists.
if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt_install mesa-vulkan-drivers libvulkan1
  else
    echo "setup: no Vulkan driver found and no apt-get; WEBGPU tests will be skipped" >&2
  fi
fi
