// E_41: 41 threads, 1 blocks of 256
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f != f ? (unsigned short)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u) : h;
}
#else
__device__ __forceinline__ float h2f(unsigned short h) {
  unsigned int sign = ((unsigned int)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned int x = __float_as_uint(f);
  unsigned int sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = exp - 112;
  if (e >= 31) return (unsigned short)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    mant |= 0x800000u;
    unsigned int shift = (unsigned int)(14 - e), h = mant >> shift;
    unsigned int rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (unsigned short)(sign | h);
  }
  unsigned int h = ((unsigned int)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (unsigned short)(sign | h);
}
#endif
extern "C" __global__ void __launch_bounds__(256) E_41(unsigned short *__restrict__ b0, const float *__restrict__ b1) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 41u) return;
    const int gidx = (int)g;
    const float v5 = b1[gidx];
    const float v6 = h2f(f2h((float)v5));
    b0[gidx] = f2h(v6);
}
// E_41: 41 threads, 1 blocks of 256
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f != f ? (unsigned short)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u) : h;
}
#else
__device__ __forceinline__ float h2f(unsigned short h) {
  unsigned int sign = ((unsigned int)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned int x = __float_as_uint(f);
  unsigned int sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = exp - 112;
  if (e >= 31) return (unsigned short)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    mant |= 0x800000u;
    unsigned int shift = (unsigned int)(14 - e), h = mant >> shift;
    unsigned int rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (unsigned short)(sign | h);
  }
  unsigned int h = ((unsigned int)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (unsigned short)(sign | h);
}
#endif
extern "C" __global__ void __launch_bounds__(256) E_41(unsigned short *__restrict__ b0, const unsigned short *__restrict__ b1) {
    const unsigned int g = blockIdx.x * 256u + threadIdx.x;
    if (g >= 41u) return;
    const int gidx = (int)g;
    const float v5 = h2f(b1[gidx]);
    const float v6 = (v5 * v5);
    const float v7 = v6;
    const float v8 = h2f(f2h((float)v7));
    const float v11 = (v8 + 1.0f);
    b0[gidx] = f2h(v11);
}
