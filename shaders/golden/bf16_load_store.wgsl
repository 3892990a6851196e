// E_41: 41 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

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

// Only this lane's bits change, so neighbours storing into the same word cannot race.
fn st_b0(i: i32, v: u32) {
    let sh = u32(i & 1) * 16u;
    atomicAnd(&b0[i >> 1u], ~(0xffffu << sh));
    atomicOr(&b0[i >> 1u], (v & 0xffffu) << sh);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 41u) {
        return;
    }
    let gidx = i32(g);
    let v5: f32 = b1[gidx];
    let v6: f32 = bf16_round(v5);
    st_b0(gidx, f32_to_bf16(v6));
}
// E_41: 41 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;

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

// Only this lane's bits change, so neighbours storing into the same word cannot race.
fn st_b0(i: i32, v: u32) {
    let sh = u32(i & 1) * 16u;
    atomicAnd(&b0[i >> 1u], ~(0xffffu << sh));
    atomicOr(&b0[i >> 1u], (v & 0xffffu) << sh);
}

fn ld_b1(i: i32) -> f32 {
    return bf16_to_f32((b1[i >> 1u] >> (u32(i & 1) * 16u)) & 0xffffu);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 41u) {
        return;
    }
    let gidx = i32(g);
    let v5: f32 = ld_b1(gidx);
    let v6: f32 = (v5 * v5);
    let v7: f32 = v6;
    let v8: f32 = bf16_round(v7);
    let v11: f32 = (v8 + 1.0f);
    st_b0(gidx, f32_to_bf16(v11));
}
