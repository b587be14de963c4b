// Single-buffered cp.async copy: every tile is waited for (wait_group 0) before the next one is issued.
#define TILE 256

__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}

extern "C" __global__ void __launch_bounds__(TILE) cp_async_single(const float4* in, float4* out, int tiles) {
    __shared__ __align__(16) float4 buf[TILE];
    const int t = threadIdx.x;
    const float4* src = in + (size_t)blockIdx.x * tiles * TILE;
    float4* dst = out + (size_t)blockIdx.x * tiles * TILE;
    for (int k = 0; k < tiles; ++k) {
        copy16(&buf[t], src + k * TILE + t);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 0;\n" ::);
        __syncthreads();
        float4 v = buf[t];
        v.x += 1.0f;
        dst[k * TILE + t] = v;
        __syncthreads();
    }
}
