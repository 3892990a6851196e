// bf16 helpers. bf16 values are stored as bits, two per u32 word, and computed with as f32.
// A bf16 is the top half of an f32, so both conversions are integer operations on the bits.

// bf16 bits (low 16 bits of h) -> f32, exactly.
fn bf16_to_f32(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

// f32 -> bf16 bits, rounding to nearest even: add just under half an ulp plus the kept lowest
// bit (a carry into the exponent past the largest bf16 gives inf); a NaN keeps its top bits,
// made quiet so that it cannot truncate to inf. Bit-exact with the interpreter
// (half::bf16::from_f32) and the C dialect's f2b.
fn f32_to_bf16(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

// Round an f32 to the nearest bf16 value (a cast to bf16).
fn bf16_round(x: f32) -> f32 {
    return bf16_to_f32(f32_to_bf16(x));
}
