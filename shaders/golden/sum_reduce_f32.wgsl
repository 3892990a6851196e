// r_5_1: 5 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 5u) {
        return;
    }
    let gidx = i32(g);
    let v7: i32 = (gidx * 37i);
    var acc10: f32 = 0.0f;
    for (var r5: i32 = 0i; r5 < 37i; r5++) {
      let v8: i32 = (v7 + r5);
      let v9: f32 = b1[v8];
      acc10 = (acc10 + v9);
    }
    b0[gidx] = acc10;
}
