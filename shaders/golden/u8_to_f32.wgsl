// E_37: 37 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;

fn ld_b1(i: i32) -> u32 {
    return (b1[i >> 2u] >> (u32(i & 3) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 37u) {
        return;
    }
    let gidx = i32(g);
    let v5: u32 = ld_b1(gidx);
    let v6: f32 = f32(v5);
    b0[gidx] = v6;
}
