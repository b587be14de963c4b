"""Kernels that measure the machine itself, in the same run as the variants: copy bandwidth (the DRAM floor's
denominator), FP32 FMA rate (the matmul floor's), and the control kernel that bounds drift between runs."""

from __future__ import annotations

COPY_SOURCE = r"""
extern "C" __global__ void copy_grid_stride(const float4* __restrict__ src, float4* __restrict__ dst, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x)
        dst[i] = __ldcs(src + i);
}
extern "C" __global__ void copy_one_per_thread(const float4* __restrict__ src, float4* __restrict__ dst, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n4) dst[i] = src[i];
}
extern "C" __global__ void copy_two_per_thread(const float4* __restrict__ src, float4* __restrict__ dst, long n4) {
    long i = 2 * (blockIdx.x * (long)blockDim.x) + threadIdx.x;
    float4 a = i < n4 ? src[i] : make_float4(0, 0, 0, 0);
    float4 b = i + blockDim.x < n4 ? src[i + blockDim.x] : make_float4(0, 0, 0, 0);
    if (i < n4) dst[i] = a;
    if (i + blockDim.x < n4) dst[i + blockDim.x] = b;
}
extern "C" __global__ void fma_rate(float* out, int iters) {
    float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    const float m = 0.999999f, c = 1e-7f;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int j = 0; j < 16; ++j) {
            a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
            a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
"""

# Copy kernels also timed at a layer norm's own shape (x -> y, 256 threads a block): name -> float4s per block.
SHAPE_COPY_KERNELS = {"copy_one_per_thread": 256, "copy_two_per_thread": 512}

COPY_BYTES = 256 * 2**20  # per direction; with two buffers the working set is 8x the H200's L2
FMA_ITERS = 4096
FMA_PER_THREAD = FMA_ITERS * 16 * 8
