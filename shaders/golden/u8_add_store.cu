// E_43: 43 threads, 1 blocks of 256
extern "C" __global__ void __launch_bounds__(256) E_43(unsigned char *__restrict__ b0, const unsigned char *__restrict__ b1) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 43u) return;
    const int gidx = (int)g;
    const unsigned char v5 = b1[gidx];
    const unsigned char v6 = (v5 + v5);
    b0[gidx] = v6;
}
