// r_2_128_128_1: 8192 invocations, workgroups (32, 1, 1) of 256
@group(0) @binding(0) var<storage, read_write> b0: array<f32>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;
@group(0) @binding(2) var<storage, read> b2: array<f32>;

var<workgroup> s0: array<f32, 512>;
var<workgroup> s1: array<f32, 512>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = wid.x + wid.y * nwg.x;
    if (w >= 32u) {
        return;
    }
    let wgid = i32(w);
    let lidx = i32(li);
    {
    let v6: i32 = (wgid / 4i);
    let v131: i32 = (v6 * 4096i);
    let v12: i32 = (lidx / 16i);
    let v129: i32 = (v12 * 256i);
    let v132: i32 = (v131 + v129);
    let v5: i32 = (wgid % 4i);
    let v15: i32 = (v5 * 32i);
    let v11: i32 = (lidx % 16i);
    let v21: i32 = (v11 * 2i);
    let v22: i32 = (v15 + v21);
    let v133: i32 = (v132 + v22);
    let v23: i32 = (v12 * 2i);
    let v27: i32 = (v11 * 32i);
    let v28: i32 = (v12 + v27);
    let v7: i32 = (v6 % 4i);
    let v56: i32 = (v7 * 2048i);
    let v57: i32 = (v12 * 64i);
    let v58: i32 = (v56 + v57);
    let v9: i32 = (wgid / 16i);
    let v32: i32 = (v9 * 32i);
    let v63: i32 = (v12 + 16i);
    let v64: i32 = (v63 + v27);
    let v74: i32 = (v58 + 1024i);
    let v77: i32 = (lidx % 32i);
    let v80: i32 = (v15 + v77);
    let v94: i32 = (v9 * 4096i);
    let v78: i32 = (lidx / 32i);
    let v97: i32 = (v78 * 128i);
    let v62: i32 = (lidx + 256i);
    let v135: i32 = (v21 + 1i);
    let v143: i32 = (v23 + 1i);
    var acc126: f32 = 0.0f;
    var acc140: f32 = 0.0f;
    var acc148: f32 = 0.0f;
    var acc154: f32 = 0.0f;
    for (var r25: i32 = 0i; r25 < 2i; r25++) {
      workgroupBarrier();
      let v30: i32 = (r25 * 16i);
      let v31: i32 = (v30 + v11);
      let v44: i32 = (v32 + v31);
      let v59: i32 = (v58 + v44);
      let v60: f32 = b1[v59];
      let v75: i32 = (v74 + v44);
      let v76: f32 = b1[v75];
      let v95: i32 = (r25 * 2048i);
      let v96: i32 = (v94 + v95);
      let v98: i32 = (v96 + v97);
      let v99: i32 = (v80 + v98);
      let v100: f32 = b2[v99];
      let v110: i32 = (v98 + 1024i);
      let v111: i32 = (v80 + v110);
      let v112: f32 = b2[v111];
      s0[v28] = v60;
      s0[v64] = v76;
      s1[lidx] = v100;
      s1[v62] = v112;
      workgroupBarrier();
      var acc125: f32 = 0.0f;
      var acc139: f32 = 0.0f;
      var acc147: f32 = 0.0f;
      var acc153: f32 = 0.0f;
      for (var r26: i32 = 0i; r26 < 16i; r26++) {
        let v119: i32 = (r26 * 32i);
        let v120: i32 = (v23 + v119);
        let v121: f32 = s0[v120];
        let v122: i32 = (v21 + v119);
        let v123: f32 = s1[v122];
        acc125 = fma(v121, v123, acc125);
        let v136: i32 = (v135 + v119);
        let v137: f32 = s1[v136];
        acc139 = fma(v121, v137, acc139);
        let v144: i32 = (v143 + v119);
        let v145: f32 = s0[v144];
        acc147 = fma(v145, v123, acc147);
        acc153 = fma(v145, v137, acc153);
      }
      acc126 = (acc126 + acc125);
      acc140 = (acc140 + acc139);
      acc148 = (acc148 + acc147);
      acc154 = (acc154 + acc153);
    }
    b0[v133] = acc126;
    let v134: i32 = (v22 + 1i);
    let v141: i32 = (v132 + v134);
    b0[v141] = acc140;
    let v150: i32 = (v132 + 128i);
    let v151: i32 = (v150 + v22);
    b0[v151] = acc148;
    let v155: i32 = (v132 + v15);
    let v156: i32 = (v155 + v21);
    let v158: i32 = (v156 + 129i);
    b0[v158] = acc154;
    }
}
// r_128_128_1: 1024 invocations, workgroups (16, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b1: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 1024u) {
        return;
    }
    let gidx = i32(g);
    let v12: i32 = (gidx * 16i);
    let v37: i32 = (v12 + 4i);
    let v60: i32 = (v12 + 8i);
    let v84: i32 = (v12 + 12i);
    var acc17: f32 = 0.0f;
    var acc22: f32 = 0.0f;
    var acc28: f32 = 0.0f;
    var acc34: f32 = 0.0f;
    var acc40: f32 = 0.0f;
    var acc46: f32 = 0.0f;
    var acc52: f32 = 0.0f;
    var acc58: f32 = 0.0f;
    var acc63: f32 = 0.0f;
    var acc69: f32 = 0.0f;
    var acc75: f32 = 0.0f;
    var acc81: f32 = 0.0f;
    var acc87: f32 = 0.0f;
    var acc93: f32 = 0.0f;
    var acc99: f32 = 0.0f;
    var acc105: f32 = 0.0f;
    for (var r10: i32 = 0i; r10 < 2i; r10++) {
      let v14: i32 = (r10 * 16384i);
      let v15: i32 = (v12 + v14);
      let v16_4: vec4<f32> = b1[(v15) >> 2u];
      let v16: f32 = v16_4[0];
      let v21: f32 = v16_4[1];
      let v27: f32 = v16_4[2];
      let v33: f32 = v16_4[3];
      acc17 = (acc17 + v16);
      acc22 = (acc22 + v21);
      acc28 = (acc28 + v27);
      acc34 = (acc34 + v33);
      let v38: i32 = (v37 + v14);
      let v39_4: vec4<f32> = b1[(v38) >> 2u];
      let v39: f32 = v39_4[0];
      let v45: f32 = v39_4[1];
      let v51: f32 = v39_4[2];
      let v57: f32 = v39_4[3];
      acc40 = (acc40 + v39);
      acc46 = (acc46 + v45);
      acc52 = (acc52 + v51);
      acc58 = (acc58 + v57);
      let v61: i32 = (v60 + v14);
      let v62_4: vec4<f32> = b1[(v61) >> 2u];
      let v62: f32 = v62_4[0];
      let v68: f32 = v62_4[1];
      let v74: f32 = v62_4[2];
      let v80: f32 = v62_4[3];
      acc63 = (acc63 + v62);
      acc69 = (acc69 + v68);
      acc75 = (acc75 + v74);
      acc81 = (acc81 + v80);
      let v85: i32 = (v84 + v14);
      let v86_4: vec4<f32> = b1[(v85) >> 2u];
      let v86: f32 = v86_4[0];
      let v92: f32 = v86_4[1];
      let v98: f32 = v86_4[2];
      let v104: f32 = v86_4[3];
      acc87 = (acc87 + v86);
      acc93 = (acc93 + v92);
      acc99 = (acc99 + v98);
      acc105 = (acc105 + v104);
    }
    b0[(v12) >> 2u] = vec4<f32>(acc17, acc22, acc28, acc34);
    b0[(v37) >> 2u] = vec4<f32>(acc40, acc46, acc52, acc58);
    b0[(v60) >> 2u] = vec4<f32>(acc63, acc69, acc75, acc81);
    b0[(v84) >> 2u] = vec4<f32>(acc87, acc93, acc99, acc105);
}
