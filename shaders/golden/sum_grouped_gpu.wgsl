// r_3_1: 192 invocations, workgroups (1, 1, 1) of 192
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

var<workgroup> s0: array<f32, 192>;

@compute @workgroup_size(192)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = wid.x + wid.y * nwg.x;
    if (w >= 1u) {
        return;
    }
    let wgid = i32(w);
    let lidx = i32(li);
    {
    let v6: i32 = (lidx / 64i);
    let v17: i32 = (v6 * 8192i);
    let v5: i32 = (lidx % 64i);
    var acc20: f32 = 0.0f;
    for (var r13: i32 = 0i; r13 < 128i; r13++) {
      let v14: i32 = (r13 * 64i);
      let v15: i32 = (v14 + v5);
      let v18: i32 = (v17 + v15);
      let v19: f32 = b1[v18];
      acc20 = (acc20 + v19);
    }
    let v21: f32 = subgroupAdd(acc20);
    s0[lidx] = v21;
    }
    workgroupBarrier();
    {
    let v6: i32 = (lidx / 64i);
    let v5: i32 = (lidx % 64i);
    let v9: i32 = (v5 * (-1i));
    let v10: i32 = (lidx + v9);
    var acc27: f32 = 0.0f;
    for (var r22: i32 = 0i; r22 < 8i; r22++) {
      let v24: i32 = (r22 * 8i);
      let v25: i32 = (v10 + v24);
      let v26: f32 = s0[v25];
      acc27 = (acc27 + v26);
    }
    let v12: bool = (v5 == 0i);
    if (v12) { b0[v6] = acc27; }
    }
}
