// r_128_128_2_1: 8192 invocations, workgroups (32, 1, 1) of 256
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
    let v10: i32 = (wgid / 8i);
    let v127: i32 = (v10 * 8192i);
    let v13: i32 = (lidx / 16i);
    let v129: i32 = (v13 * 512i);
    let v130: i32 = (v127 + v129);
    let v6: i32 = (wgid / 2i);
    let v8: i32 = (v6 % 4i);
    let v131: i32 = (v8 * 64i);
    let v12: i32 = (lidx % 16i);
    let v132: i32 = (v12 * 4i);
    let v133: i32 = (v131 + v132);
    let v134: i32 = (v130 + v133);
    let v5: i32 = (wgid % 2i);
    let v135: i32 = (v134 + v5);
    let v24: i32 = (v13 * 2i);
    let v60: i32 = (v12 * 32i);
    let v61: i32 = (v13 + v60);
    let v55: i32 = (v10 * 2048i);
    let v56: i32 = (v13 * 64i);
    let v57: i32 = (v55 + v56);
    let v40: i32 = (v5 * 32i);
    let v64: i32 = (v13 + 16i);
    let v77: i32 = (v64 + v60);
    let v74: i32 = (v57 + 1024i);
    let v16: i32 = (v8 * 32i);
    let v78: i32 = (lidx % 32i);
    let v80: i32 = (v16 + v78);
    let v94: i32 = (v5 * 4096i);
    let v79: i32 = (lidx / 32i);
    let v97: i32 = (v79 * 128i);
    let v63: i32 = (lidx + 256i);
    let v22: i32 = (v12 * 2i);
    let v137: i32 = (v22 + 1i);
    let v147: i32 = (v24 + 1i);
    var acc126: f32 = 0.0f;
    var acc142: f32 = 0.0f;
    var acc152: f32 = 0.0f;
    var acc158: f32 = 0.0f;
    for (var r26: i32 = 0i; r26 < 2i; r26++) {
      workgroupBarrier();
      let v29: i32 = (r26 * 16i);
      let v30: i32 = (v29 + v12);
      let v43: i32 = (v40 + v30);
      let v58: i32 = (v57 + v43);
      let v59: f32 = b1[v58];
      let v75: i32 = (v74 + v43);
      let v76: f32 = b1[v75];
      let v95: i32 = (r26 * 2048i);
      let v96: i32 = (v94 + v95);
      let v98: i32 = (v96 + v97);
      let v99: i32 = (v80 + v98);
      let v100: f32 = b2[v99];
      let v109: i32 = (v98 + 1024i);
      let v110: i32 = (v80 + v109);
      let v111: f32 = b2[v110];
      s0[v61] = v59;
      s0[v77] = v76;
      s1[lidx] = v100;
      s1[v63] = v111;
      workgroupBarrier();
      var acc125: f32 = 0.0f;
      var acc141: f32 = 0.0f;
      var acc151: f32 = 0.0f;
      var acc157: f32 = 0.0f;
      for (var r27: i32 = 0i; r27 < 16i; r27++) {
        let v119: i32 = (r27 * 32i);
        let v120: i32 = (v24 + v119);
        let v121: f32 = s0[v120];
        let v122: i32 = (v22 + v119);
        let v123: f32 = s1[v122];
        acc125 = fma(v121, v123, acc125);
        let v138: i32 = (v137 + v119);
        let v139: f32 = s1[v138];
        acc141 = fma(v121, v139, acc141);
        let v148: i32 = (v147 + v119);
        let v149: f32 = s0[v148];
        acc151 = fma(v149, v123, acc151);
        acc157 = fma(v149, v139, acc157);
      }
      acc126 = (acc126 + acc125);
      acc142 = (acc142 + acc141);
      acc152 = (acc152 + acc151);
      acc158 = (acc158 + acc157);
    }
    b0[v135] = acc126;
    let v143: i32 = (v133 + 2i);
    let v144: i32 = (v130 + v143);
    let v145: i32 = (v144 + v5);
    b0[v145] = acc142;
    let v153: i32 = (v130 + 256i);
    let v154: i32 = (v153 + v133);
    let v155: i32 = (v154 + v5);
    b0[v155] = acc152;
    let v159: i32 = (v130 + v131);
    let v160: i32 = (v159 + v132);
    let v162: i32 = (v160 + 258i);
    let v163: i32 = (v162 + v5);
    b0[v163] = acc158;
    }
}
// r_128_128_1: 1024 invocations, workgroups (16, 1, 1) of 64
@group(0) @binding(0) var<storage, read_write> b0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b1: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * (nwg.x * 64u);
    if (g >= 1024u) {
        return;
    }
    let gidx = i32(g);
    let v21: i32 = (gidx * 16i);
    let v16: i32 = (gidx * 32i);
    let v24: i32 = (v16 + 2i);
    let v32: i32 = (v16 + 4i);
    let v41: i32 = (v16 + 6i);
    let v48: i32 = (v16 + 8i);
    let v57: i32 = (v16 + 10i);
    let v65: i32 = (v16 + 12i);
    let v74: i32 = (v16 + 14i);
    let v81: i32 = (v16 + 16i);
    let v90: i32 = (v16 + 18i);
    let v98: i32 = (v16 + 20i);
    let v107: i32 = (v16 + 22i);
    let v115: i32 = (v16 + 24i);
    let v124: i32 = (v16 + 26i);
    let v132: i32 = (v16 + 28i);
    let v141: i32 = (v16 + 30i);
    var acc19: f32 = 0.0f;
    var acc27: f32 = 0.0f;
    var acc35: f32 = 0.0f;
    var acc44: f32 = 0.0f;
    var acc51: f32 = 0.0f;
    var acc60: f32 = 0.0f;
    var acc68: f32 = 0.0f;
    var acc77: f32 = 0.0f;
    var acc84: f32 = 0.0f;
    var acc93: f32 = 0.0f;
    var acc101: f32 = 0.0f;
    var acc110: f32 = 0.0f;
    var acc118: f32 = 0.0f;
    var acc127: f32 = 0.0f;
    var acc135: f32 = 0.0f;
    var acc144: f32 = 0.0f;
    for (var r10: i32 = 0i; r10 < 2i; r10++) {
      let v17: i32 = (v16 + r10);
      let v18: f32 = b1[v17];
      acc19 = (acc19 + v18);
      let v25: i32 = (v24 + r10);
      let v26: f32 = b1[v25];
      acc27 = (acc27 + v26);
      let v33: i32 = (v32 + r10);
      let v34: f32 = b1[v33];
      acc35 = (acc35 + v34);
      let v42: i32 = (v41 + r10);
      let v43: f32 = b1[v42];
      acc44 = (acc44 + v43);
      let v49: i32 = (v48 + r10);
      let v50: f32 = b1[v49];
      acc51 = (acc51 + v50);
      let v58: i32 = (v57 + r10);
      let v59: f32 = b1[v58];
      acc60 = (acc60 + v59);
      let v66: i32 = (v65 + r10);
      let v67: f32 = b1[v66];
      acc68 = (acc68 + v67);
      let v75: i32 = (v74 + r10);
      let v76: f32 = b1[v75];
      acc77 = (acc77 + v76);
      let v82: i32 = (v81 + r10);
      let v83: f32 = b1[v82];
      acc84 = (acc84 + v83);
      let v91: i32 = (v90 + r10);
      let v92: f32 = b1[v91];
      acc93 = (acc93 + v92);
      let v99: i32 = (v98 + r10);
      let v100: f32 = b1[v99];
      acc101 = (acc101 + v100);
      let v108: i32 = (v107 + r10);
      let v109: f32 = b1[v108];
      acc110 = (acc110 + v109);
      let v116: i32 = (v115 + r10);
      let v117: f32 = b1[v116];
      acc118 = (acc118 + v117);
      let v125: i32 = (v124 + r10);
      let v126: f32 = b1[v125];
      acc127 = (acc127 + v126);
      let v133: i32 = (v132 + r10);
      let v134: f32 = b1[v133];
      acc135 = (acc135 + v134);
      let v142: i32 = (v141 + r10);
      let v143: f32 = b1[v142];
      acc144 = (acc144 + v143);
    }
    b0[(v21) >> 2u] = vec4<f32>(acc19, acc27, acc35, acc44);
    let v52: i32 = (v21 + 4i);
    b0[(v52) >> 2u] = vec4<f32>(acc51, acc60, acc68, acc77);
    let v85: i32 = (v21 + 8i);
    b0[(v85) >> 2u] = vec4<f32>(acc84, acc93, acc101, acc110);
    let v119: i32 = (v21 + 12i);
    b0[(v119) >> 2u] = vec4<f32>(acc118, acc127, acc135, acc144);
}
