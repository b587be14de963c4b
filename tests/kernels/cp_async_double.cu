// Double-buffered cp.async copy through shared memory: the next tile's 16-byte copy stays in flight while the
// current tile is consumed (wait_group 1), so two commit groups are outstanding at once.
#define TILE 256

__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void wait_group() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

extern "C" __global__ void __launch_bounds__(TILE) cp_async_double(const float4* in, float4* out, int tiles) {
    __shared__ __align__(16) float4 buf[2][TILE];
    const int t = threadIdx.x;
    const float4* src = in + (size_t)blockIdx.x * tiles * TILE;
    float4* dst = out + (size_t)blockIdx.x * tiles * TILE;
    copy16(&buf[0][t], src + t);
    commit();
    for (int k = 0; k < tiles; ++k) {
        if (k + 1 < tiles) copy16(&buf[(k + 1) & 1][t], src + (k + 1) * TILE + t);
        commit();
        wait_group<1>();
        __syncthreads();
        float4 v = buf[k & 1][t];
        v.x += 1.0f;
        dst[k * TILE + t] = v;
        __syncthreads();
    }
}
