#!/usr/bin/env python3
"""Generate PyTorch's rounding of f32 values to bfloat16: tests/fixtures/bf16.json.

Run once by hand from the repository root (NOT run in CI; the output is committed):

    python3 scripts/gen_bf16_fixture.py

Needs torch (CPU build is enough). The output is deterministic (fixed seed).

The values are edge cases of the conversion: zeros, the smallest and largest subnormals and
normals, the largest finite f32, infinities, values exactly halfway between two bf16 (ties go
to the even one) and one unit of the last place either side of a tie, at every scale from
subnormal to the overflow threshold, plus random bit patterns. NaNs are left out: which NaN
torch makes is its own (0xffff from every NaN on the CPU with torch 2.15), while wgrad keeps a
NaN's sign and top bits, quieted (as the `half` crate); the tests check NaNs separately.

Format: {"f32_bits": [u32 bit patterns], "bf16_bits": [torch's bf16 bit pattern of each]}
"""
import json
import os
import random

import torch


def values():
    out = [
        0x00000000, 0x80000000,  # +-0
        0x00000001, 0x80000001,  # smallest subnormal: rounds to 0
        0x00007FFF, 0x00008000, 0x00008001,  # around the tie at the smallest subnormal bf16 / 2
        0x00018000, 0x00028000,  # ties at odd and even subnormal bf16
        0x007FFFFF, 0x807FFFFF,  # largest subnormal: rounds up to the smallest normal
        0x00800000, 0x00808000, 0x00818000,  # smallest normal, ties above it
        0x3F800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,  # 1.0 and ties
        0xBF808000, 0xBF818000,
        0x7F7F0000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,  # largest bf16, the overflow tie, f32 max
        0xFF7F7FFF, 0xFF7F8000, 0xFF7FFFFF,
        0x7F800000, 0xFF800000,  # +-inf
        0x3EAAAAAB, 0x40490FDB, 0x3DCCCCCD,  # 1/3, pi, 0.1
    ]
    # A tie and its neighbours at every exponent, for an even and an odd kept half.
    for e in range(0, 255):
        for kept in (0x0000, 0x0001, 0x0042, 0x007F):
            hi = (e << 7) | kept
            for lo in (0x7FFF, 0x8000, 0x8001):
                out.append((hi << 16) | lo)
    rng = random.Random(7)
    for _ in range(500):
        x = rng.getrandbits(32)
        if (x >> 23) & 0xFF != 0xFF:  # no NaNs (nor infs: they are above)
            out.append(x)
    return out


def main():
    bits = values()
    f32 = torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in bits], dtype=torch.int32)
    f32 = f32.view(torch.float32)
    b16 = f32.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
    out = {"f32_bits": bits, "bf16_bits": b16.tolist()}
    path = os.path.join("tests", "fixtures", "bf16.json")
    with open(path, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {len(bits)} values to {path} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
