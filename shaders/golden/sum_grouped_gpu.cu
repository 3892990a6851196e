// r_3_1: 192 threads, 1 blocks of 192
#ifdef __CUDA_ARCH__
template <typename T> __device__ __forceinline__ T sg_sum(T v, int size) {
  for (int o = size >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
#endif
extern "C" __global__ void __launch_bounds__(192) r_3_1(float *__restrict__ b0, const float *__restrict__ b1) {
    __shared__ float s0[192];
    const int wgid = (int)blockIdx.x;
    const int lidx = (int)threadIdx.x;
    {
    const int v6 = (lidx / 64);
    const int v17 = (v6 * 8192);
    const int v5 = (lidx % 64);
    float acc20 = 0.0f;
    for (int r13 = 0; r13 < 128; r13++) {
      const int v14 = (r13 * 64);
      const int v15 = (v14 + v5);
      const int v18 = (v17 + v15);
      const float v19 = b1[v18];
      acc20 = acc20 + v19;
    }
    const float v21 = sg_sum(acc20, 8);
    s0[lidx] = v21;
    }
    __syncthreads();
    {
    const int v6 = (lidx / 64);
    const int v5 = (lidx % 64);
    const int v9 = (v5 * (-1));
    const int v10 = (lidx + v9);
    float acc27 = 0.0f;
    for (int r22 = 0; r22 < 8; r22++) {
      const int v24 = (r22 * 8);
      const int v25 = (v10 + v24);
      const float v26 = s0[v25];
      acc27 = acc27 + v26;
    }
    const bool v12 = (v5 == 0);
    if (v12) { b0[v6] = acc27; }
    }
}
