// E_43: 43 threads, 1 blocks of 256
extern "C" __global__ void __launch_bounds__(256) E_43(unsigned char *__restrict__ b0, const float *__restrict__ b1, const float *__restrict__ b2) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 43u) return;
    const int gidx = (int)g;
    const float v5 = b1[gidx];
    const float v6 = b2[gidx];
    const bool v7 = (v5 < v6);
    b0[gidx] = v7;
}
