// E_41: 41 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

// f16 helpers. Without shader-f16 (not in every browser), f16 values are stored as bits, two
// per u32 word, and computed with as f32. Both conversions work on bits: pack2x16float and
// unpack2x16float need a capability of their own in naga/wgpu (SHADER_FLOAT16_IN_FLOAT32, a
// downlevel flag), and WGSL leaves pack2x16float's rounding and out-of-range results
// implementation-defined.

// f16 bits (low 16 bits of h) -> f32, exactly.
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        // Zero or subnormal: m * 2^-24.
        let f = f32(m) * 5.9604644775390625e-8f;
        return select(f, -f, sign != 0u);
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// f32 -> f16 bits, rounding to nearest even; overflow gives +-inf, NaN a quiet NaN. Bit-exact
// with the interpreter (half::f16::from_f32) and the C dialect's f2h.
fn f32_to_f16(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sign = (x >> 16u) & 0x8000u;
    let mant = x & 0x7fffffu;
    let ex = i32((x >> 23u) & 0xffu);
    if (ex == 255) {
        return sign | 0x7c00u | select(0u, 0x200u, mant != 0u);
    }
    let e = ex - 112;
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        let m = mant | 0x800000u;
        let shift = u32(14 - e);
        let h = m >> shift;
        let rem = m & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        let up = rem > half || (rem == half && (h & 1u) != 0u);
        return sign | (h + select(0u, 1u, up));
    }
    let h = (u32(e) << 10u) | (mant >> 13u);
    let rem = mant & 0x1fffu;
    let up = rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u);
    return sign | (h + select(0u, 1u, up));
}

// Round an f32 to the nearest f16 value (a cast to f16).
fn f16_round(x: f32) -> f32 {
    return f16_to_f32(f32_to_f16(x));
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
    let v6: f32 = f16_round(v5);
    st_b0(gidx, f32_to_f16(v6));
}
// E_41: 41 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;

// f16 helpers. Without shader-f16 (not in every browser), f16 values are stored as bits, two
// per u32 word, and computed with as f32. Both conversions work on bits: pack2x16float and
// unpack2x16float need a capability of their own in naga/wgpu (SHADER_FLOAT16_IN_FLOAT32, a
// downlevel flag), and WGSL leaves pack2x16float's rounding and out-of-range results
// implementation-defined.

// f16 bits (low 16 bits of h) -> f32, exactly.
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        // Zero or subnormal: m * 2^-24.
        let f = f32(m) * 5.9604644775390625e-8f;
        return select(f, -f, sign != 0u);
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// f32 -> f16 bits, rounding to nearest even; overflow gives +-inf, NaN a quiet NaN. Bit-exact
// with the interpreter (half::f16::from_f32) and the C dialect's f2h.
fn f32_to_f16(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sign = (x >> 16u) & 0x8000u;
    let mant = x & 0x7fffffu;
    let ex = i32((x >> 23u) & 0xffu);
    if (ex == 255) {
        return sign | 0x7c00u | select(0u, 0x200u, mant != 0u);
    }
    let e = ex - 112;
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        let m = mant | 0x800000u;
        let shift = u32(14 - e);
        let h = m >> shift;
        let rem = m & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        let up = rem > half || (rem == half && (h & 1u) != 0u);
        return sign | (h + select(0u, 1u, up));
    }
    let h = (u32(e) << 10u) | (mant >> 13u);
    let rem = mant & 0x1fffu;
    let up = rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u);
    return sign | (h + select(0u, 1u, up));
}

// Round an f32 to the nearest f16 value (a cast to f16).
fn f16_round(x: f32) -> f32 {
    return f16_to_f32(f32_to_f16(x));
}

// Only this lane's bits change, so neighbours storing into the same word cannot race.
fn st_b0(i: i32, v: u32) {
    let sh = u32(i & 1) * 16u;
    atomicAnd(&b0[i >> 1u], ~(0xffffu << sh));
    atomicOr(&b0[i >> 1u], (v & 0xffffu) << sh);
}

fn ld_b1(i: i32) -> f32 {
    return f16_to_f32((b1[i >> 1u] >> (u32(i & 1) * 16u)) & 0xffffu);
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
    let v8: f32 = f16_round(v7);
    let v11: f32 = (v8 + 1.0f);
    st_b0(gidx, f32_to_f16(v11));
}
