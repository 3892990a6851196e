// E_43: 43 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;

// Only this lane's bits change, so neighbours storing into the same word cannot race.
fn st_b0(i: i32, v: u32) {
    let sh = u32(i & 3) * 8u;
    atomicAnd(&b0[i >> 2u], ~(0xffu << sh));
    atomicOr(&b0[i >> 2u], (v & 0xffu) << sh);
}

fn ld_b1(i: i32) -> u32 {
    return (b1[i >> 2u] >> (u32(i & 3) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 43u) {
        return;
    }
    let gidx = i32(g);
    let v5: u32 = ld_b1(gidx);
    let v6: u32 = ((v5 + v5) & 0xffu);
    st_b0(gidx, v6);
}
