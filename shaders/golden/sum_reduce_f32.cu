// r_5_1: 5 threads, 1 blocks of 256
extern "C" __global__ void __launch_bounds__(256) r_5_1(float *__restrict__ b0, const float *__restrict__ b1) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 5u) return;
    const int gidx = (int)g;
    const int v7 = (gidx * 37);
    float acc10 = 0.0f;
    for (int r5 = 0; r5 < 37; r5++) {
      const int v8 = (v7 + r5);
      const float v9 = b1[v8];
      acc10 = acc10 + v9;
    }
    b0[gidx] = acc10;
}
