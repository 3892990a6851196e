// r_3_64_1: 1536 invocations, workgroups (6, 1, 1) of 256
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

var<workgroup> s0: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = wid.x + wid.y * nwg.x;
    if (w >= 6u) {
        return;
    }
    let wgid = i32(w);
    let lidx = i32(li);
    {
    let v29: i32 = (wgid * 4096i);
    let v10: i32 = (lidx / 8i);
    let v27: i32 = (v10 * 128i);
    let v30: i32 = (v29 + v27);
    let v9: i32 = (lidx % 8i);
    var acc39: f32 = 0.0f;
    for (var r19: i32 = 0i; r19 < 16i; r19++) {
      let v20: i32 = (r19 * 8i);
      let v35: i32 = (v30 + v20);
      let v36: i32 = (v35 + v9);
      let v37: f32 = b1[v36];
      acc39 = (acc39 + v37);
    }
    s0[lidx] = acc39;
    }
    workgroupBarrier();
    {
    let v46: i32 = (wgid * 32i);
    let v10: i32 = (lidx / 8i);
    let v47: i32 = (v46 + v10);
    let v9: i32 = (lidx % 8i);
    let v15: i32 = (v9 * (-1i));
    let v16: i32 = (lidx + v15);
    var acc43: f32 = 0.0f;
    for (var r40: i32 = 0i; r40 < 8i; r40++) {
      let v41: i32 = (v16 + r40);
      let v42: f32 = s0[v41];
      acc43 = (acc43 + v42);
    }
    let v18: bool = (v9 == 0i);
    if (v18) { b0[v47] = acc43; }
    }
}
// r_3: 3 invocations, workgroups (1, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 3u) {
        return;
    }
    let gidx = i32(g);
    let v7: i32 = (gidx * 64i);
    var acc10: f32 = 0.0f;
    for (var r5: i32 = 0i; r5 < 64i; r5++) {
      let v8: i32 = (v7 + r5);
      let v9: f32 = b1[v8];
      acc10 = (acc10 + v9);
    }
    b0[gidx] = acc10;
}
