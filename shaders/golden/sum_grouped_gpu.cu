// r_3_64_1: 1536 threads, 6 blocks of 256
extern "C" __global__ void __launch_bounds__(256) r_3_64_1(float *__restrict__ b0, const float *__restrict__ b1) {
    __shared__ float s0[256];
    const int wgid = (int)blockIdx.x;
    const int lidx = (int)threadIdx.x;
    {
    const int v29 = (wgid * 4096);
    const int v10 = (lidx / 8);
    const int v27 = (v10 * 128);
    const int v30 = (v29 + v27);
    const int v9 = (lidx % 8);
    float acc37 = 0.0f;
    for (int r19 = 0; r19 < 16; r19++) {
      const int v20 = (r19 * 8);
      const int v21 = (v20 + v9);
      const int v31 = (v30 + v21);
      const float v35 = b1[v31];
      acc37 = acc37 + v35;
    }
    s0[lidx] = acc37;
    }
    __syncthreads();
    {
    const int v44 = (wgid * 32);
    const int v10 = (lidx / 8);
    const int v45 = (v44 + v10);
    const int v9 = (lidx % 8);
    const int v15 = (v9 * (-1));
    const int v16 = (lidx + v15);
    float acc41 = 0.0f;
    for (int r38 = 0; r38 < 8; r38++) {
      const int v39 = (v16 + r38);
      const float v40 = s0[v39];
      acc41 = acc41 + v40;
    }
    const bool v18 = (v9 == 0);
    if (v18) { b0[v45] = acc41; }
    }
}
// r_3: 3 threads, 1 blocks of 256
extern "C" __global__ void __launch_bounds__(256) r_3(float *__restrict__ b0, const float *__restrict__ b1) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 3u) return;
    const int gidx = (int)g;
    const int v7 = (gidx * 64);
    float acc10 = 0.0f;
    for (int r5 = 0; r5 < 64; r5++) {
      const int v8 = (v7 + r5);
      const float v9 = b1[v8];
      acc10 = acc10 + v9;
    }
    b0[gidx] = acc10;
}
