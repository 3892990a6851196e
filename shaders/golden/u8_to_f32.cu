// E_37: 37 threads, 1 blocks of 256
extern "C" __global__ void __launch_bounds__(256) E_37(float *__restrict__ b0, const unsigned char *__restrict__ b1) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 37u) return;
    const int gidx = (int)g;
    const unsigned char v5 = b1[gidx];
    const float v6 = (float)v5;
    b0[gidx] = v6;
}
