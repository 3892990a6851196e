// r_2_128_1_128: 8192 invocations, workgroups (32, 1, 1) of 256
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
    let v140: i32 = (v6 * 4096i);
    let v12: i32 = (lidx / 16i);
    let v51: i32 = (v12 * 256i);
    let v141: i32 = (v140 + v51);
    let v5: i32 = (wgid % 4i);
    let v15: i32 = (v5 * 32i);
    let v11: i32 = (lidx % 16i);
    let v21: i32 = (v11 * 2i);
    let v22: i32 = (v15 + v21);
    let v142: i32 = (v141 + v22);
    let v23: i32 = (v12 * 2i);
    let v27: i32 = (v11 * 32i);
    let v28: i32 = (v12 + v27);
    let v7: i32 = (v6 % 4i);
    let v60: i32 = (v7 * 2048i);
    let v62: i32 = (v12 * 64i);
    let v70: i32 = (v60 + v62);
    let v9: i32 = (wgid / 16i);
    let v59: i32 = (v9 * 32i);
    let v74: i32 = (v12 + 16i);
    let v75: i32 = (v74 + v27);
    let v86: i32 = (v70 + 1024i);
    let v33: i32 = (v9 * 4096i);
    let v90: i32 = (lidx / 32i);
    let v95: i32 = (v90 * 128i);
    let v89: i32 = (lidx % 32i);
    let v93: i32 = (v15 + v89);
    let v73: i32 = (lidx + 256i);
    let v144: i32 = (v21 + 1i);
    let v152: i32 = (v23 + 1i);
    var acc135: f32 = 0.0f;
    var acc149: f32 = 0.0f;
    var acc157: f32 = 0.0f;
    var acc163: f32 = 0.0f;
    for (var r25: i32 = 0i; r25 < 2i; r25++) {
      workgroupBarrier();
      let v30: i32 = (r25 * 16i);
      let v31: i32 = (v30 + v11);
      let v66: i32 = (v59 + v31);
      let v71: i32 = (v70 + v66);
      let v72: f32 = b1[v71];
      let v87: i32 = (v86 + v66);
      let v88: f32 = b1[v87];
      let v42: i32 = (r25 * 2048i);
      let v102: i32 = (v33 + v42);
      let v103: i32 = (v102 + v95);
      let v106: i32 = (v103 + v93);
      let v107: f32 = b2[v106];
      let v119: i32 = (v103 + 1024i);
      let v120: i32 = (v119 + v93);
      let v121: f32 = b2[v120];
      s0[v28] = v72;
      s0[v75] = v88;
      s1[lidx] = v107;
      s1[v73] = v121;
      workgroupBarrier();
      var acc134: f32 = 0.0f;
      var acc148: f32 = 0.0f;
      var acc156: f32 = 0.0f;
      var acc162: f32 = 0.0f;
      for (var r26: i32 = 0i; r26 < 16i; r26++) {
        let v128: i32 = (r26 * 32i);
        let v129: i32 = (v23 + v128);
        let v130: f32 = s0[v129];
        let v131: i32 = (v21 + v128);
        let v132: f32 = s1[v131];
        acc134 = fma(v130, v132, acc134);
        let v145: i32 = (v144 + v128);
        let v146: f32 = s1[v145];
        acc148 = fma(v130, v146, acc148);
        let v153: i32 = (v152 + v128);
        let v154: f32 = s0[v153];
        acc156 = fma(v154, v132, acc156);
        acc162 = fma(v154, v146, acc162);
      }
      acc135 = (acc135 + acc134);
      acc149 = (acc149 + acc148);
      acc157 = (acc157 + acc156);
      acc163 = (acc163 + acc162);
    }
    b0[v142] = acc135;
    let v143: i32 = (v22 + 1i);
    let v150: i32 = (v141 + v143);
    b0[v150] = acc149;
    let v159: i32 = (v141 + 128i);
    let v160: i32 = (v159 + v22);
    b0[v160] = acc157;
    let v164: i32 = (v141 + v15);
    let v165: i32 = (v164 + v21);
    let v167: i32 = (v165 + 129i);
    b0[v167] = acc163;
    }
}
// r_128_1_128: 1024 invocations, workgroups (16, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b1: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 1024u) {
        return;
    }
    let gidx = i32(g);
    let v15: i32 = (gidx * 16i);
    var acc18: f32 = 0.0f;
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
      let v13: i32 = (r10 * 16384i);
      let v16: i32 = (v13 + v15);
      let v17_4: vec4<f32> = b1[(v16) >> 2u];
      let v17: f32 = v17_4[0];
      let v21: f32 = v17_4[1];
      let v27: f32 = v17_4[2];
      let v33: f32 = v17_4[3];
      acc18 = (acc18 + v17);
      acc22 = (acc22 + v21);
      acc28 = (acc28 + v27);
      acc34 = (acc34 + v33);
      let v38: i32 = (v16 + 4i);
      let v39_4: vec4<f32> = b1[(v38) >> 2u];
      let v39: f32 = v39_4[0];
      let v45: f32 = v39_4[1];
      let v51: f32 = v39_4[2];
      let v57: f32 = v39_4[3];
      acc40 = (acc40 + v39);
      acc46 = (acc46 + v45);
      acc52 = (acc52 + v51);
      acc58 = (acc58 + v57);
      let v61: i32 = (v16 + 8i);
      let v62_4: vec4<f32> = b1[(v61) >> 2u];
      let v62: f32 = v62_4[0];
      let v68: f32 = v62_4[1];
      let v74: f32 = v62_4[2];
      let v80: f32 = v62_4[3];
      acc63 = (acc63 + v62);
      acc69 = (acc69 + v68);
      acc75 = (acc75 + v74);
      acc81 = (acc81 + v80);
      let v85: i32 = (v16 + 12i);
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
    b0[(v15) >> 2u] = vec4<f32>(acc18, acc22, acc28, acc34);
    let v41: i32 = (v15 + 4i);
    b0[(v41) >> 2u] = vec4<f32>(acc40, acc46, acc52, acc58);
    let v64: i32 = (v15 + 8i);
    b0[(v64) >> 2u] = vec4<f32>(acc63, acc69, acc75, acc81);
    let v88: i32 = (v15 + 12i);
    b0[(v88) >> 2u] = vec4<f32>(acc87, acc93, acc99, acc105);
}
