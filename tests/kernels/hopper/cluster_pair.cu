// sm_90: blocks in clusters of two swap halves through distributed shared memory: each block fills its buffer,
// the cluster barrier publishes it, each block reads its partner's buffer (mapa + ld.shared::cluster), and a second
// cluster barrier keeps the partner's memory alive until the read is done. A second kernel leaves the cluster shape
// to the launch but bounds it (.maxclusterrank).
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ float partner_value(const float* mine, unsigned partner) {
    unsigned local = (unsigned)__cvta_generic_to_shared(mine), remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(partner));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128) cluster_pair(const float* x, float* y) {
    __shared__ float buf[128];
    int t = threadIdx.x;
    buf[t] = x[blockIdx.x * 128 + t] * 2.f;
    __syncthreads();
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    float v = partner_value(&buf[127 - t], cluster_rank() ^ 1);
    asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    y[blockIdx.x * 128 + t] = v + buf[t];
}

extern "C" __global__ void __launch_bounds__(256, 1, 4) cluster_bounded(const float* x, float* y) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = x[blockIdx.x * 256 + t];
    asm volatile("barrier.cluster.arrive;" ::: "memory");
    asm volatile("barrier.cluster.wait;" ::: "memory");
    y[blockIdx.x * 256 + t] = partner_value(&buf[t], 0);
}
