#!/usr/bin/env bash
# Installs what building and testing wgrad needs on a fresh Debian machine (as root), skipping
# whatever is already there: a C compiler (the cpu backend), the wasm32 Rust target, rustfmt
# and clippy.
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
