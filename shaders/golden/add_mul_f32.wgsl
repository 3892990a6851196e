// E_37: 37 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;
@group(0) @binding(2) var<storage, read> b2: array<f32>;
@group(0) @binding(3) var<storage, read> b3: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 37u) {
        return;
    }
    let gidx = i32(g);
    let v5: f32 = b1[gidx];
    let v6: f32 = b2[gidx];
    let v7: f32 = (v5 + v6);
    let v8: f32 = b3[gidx];
    let v9: f32 = (v7 * v8);
    b0[gidx] = v9;
}
