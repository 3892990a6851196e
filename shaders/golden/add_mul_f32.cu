// E_37: 37 threads, 1 blocks of 256
extern "C" __global__ void __launch_bounds__(256) E_37(float *__restrict__ b0, const float *__restrict__ b1, const float *__restrict__ b2, const float *__restrict__ b3) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 37u) return;
    const int gidx = (int)g;
    const float v5 = b1[gidx];
    const float v6 = b2[gidx];
    const float v7 = (v5 + v6);
    const float v8 = b3[gidx];
    const float v9 = (v7 * v8);
    b0[gidx] = v9;
}
