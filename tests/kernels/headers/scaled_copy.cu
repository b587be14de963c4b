// Copies with a scale, UNROLL elements per thread (set with -D UNROLL=N); its helper header lives in include/.
#include "scale_helpers.h"

extern "C" __global__ void scaled_copy(const float* __restrict__ x, float* __restrict__ y, float s) {
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
    for (int i = 0; i < UNROLL; ++i) y[base + i] = scaled(x[base + i], s);
}

#if __cplusplus >= 202002L
template <typename T>
concept Floating = __is_same(T, float) || __is_same(T, double);
template <Floating T>
__global__ void negate(T* p) { p[threadIdx.x] = -p[threadIdx.x]; }
template __global__ void negate<float>(float*);
#endif
