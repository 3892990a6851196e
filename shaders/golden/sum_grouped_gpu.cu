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
    float acc39 = 0.0f;
    for (int r19 = 0; r19 < 16; r19++) {
      const int v20 = (r19 * 8);
      const int v35 = (v30 + v20);
      const int v36 = (v35 + v9);
      const float v37 = b1[v36];
      acc39 = acc39 + v37;
    }
    s0[lidx] = acc39;
    }
    __syncthreads();
    {
    const int v46 = (wgid * 32);
    const int v10 = (lidx / 8);
    const int v47 = (v46 + v10);
    const int v9 = (lidx % 8);
    const int v15 = (v9 * (-1));
    const int v16 = (lidx + v15);
    float acc43 = 0.0f;
    for (int r40 = 0; r40 < 8; r40++) {
      const int v41 = (v16 + r40);
      const float v42 = s0[v41];
      acc43 = acc43 + v42;
    }
    const bool v18 = (v9 == 0);
    if (v18) { b0[v47] = acc43; }
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
