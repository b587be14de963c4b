// sm_90a: one warpgroup loads an A and a B tile with TMA (tensor copies completing on an mbarrier), multiplies them
// with wgmma (f16 and tf32 shapes), stages the result in shared memory and writes it back with a TMA store.
// A plain bulk copy, a bulk store, an L2 prefetch and a multicast load are there for the census to tell apart.
// Tensor maps are opaque 128-byte parameters here, so the kernel needs no header.
struct __align__(64) TensorMap { unsigned long long words[16]; };

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ unsigned long long desc(const void* p) {
    unsigned long long addr = smem(p);
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wait_phase(unsigned bar, unsigned phase) {
    asm volatile(
        "{\n .reg .pred done;\n"
        "WAIT_%=:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra WAIT_%=;\n}" ::"r"(bar), "r"(phase) : "memory");
}

extern "C" __global__ void __launch_bounds__(128) wgmma_tma(const __grid_constant__ TensorMap a_map,
                                                            const __grid_constant__ TensorMap b_map,
                                                            const __grid_constant__ TensorMap c_map,
                                                            const float* bias, float* out) {
    __shared__ __align__(1024) unsigned short sa[64 * 16];
    __shared__ __align__(1024) unsigned short sb[16 * 16];
    __shared__ __align__(1024) float st[64 * 8];
    __shared__ __align__(1024) float sc[64 * 16];
    __shared__ __align__(16) float sbias[64];
    __shared__ __align__(8) unsigned long long bars[2];
    unsigned bar = smem(&bars[0]), bar2 = smem(&bars[1]);
    int tid = threadIdx.x;
    if (tid == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(1));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar2), "r"(128));
        asm volatile("fence.mbarrier_init.release.cluster;");
        asm volatile("prefetch.tensormap [%0];" ::"l"(&a_map) : "memory");
    }
    __syncthreads();
    if (tid == 0) {
        unsigned bytes = sizeof(sa) + sizeof(sb) + sizeof(st) + sizeof(sbias);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
            ::"r"(smem(sa)), "l"(&a_map), "r"(0), "r"(blockIdx.x * 64), "r"(bar) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
            ::"r"(smem(sb)), "l"(&b_map), "r"(0), "r"(0), "r"(bar) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
            " [%0], [%1, {%2, %3}], [%4], %5;"
            ::"r"(smem(st)), "l"(&b_map), "r"(16), "r"(0), "r"(bar), "h"((unsigned short)1) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(smem(sbias)), "l"(bias), "r"(256), "r"(bar) : "memory");
        asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];" ::"l"(&b_map), "r"(16), "r"(16)
                     : "memory");
    }
    wait_phase(bar, 0);

    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f, d4 = 0.f, d5 = 0.f, d6 = 0.f, d7 = 0.f;
    float t0 = 0.f, t1 = 0.f, t2 = 0.f, t3 = 0.f;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 1;\n}"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3), "+f"(d4), "+f"(d5), "+f"(d6), "+f"(d7)
        : "l"(desc(sa)), "l"(desc(sb)), "r"(1));
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}"
        : "+f"(t0), "+f"(t1), "+f"(t2), "+f"(t3)
        : "l"(desc(st)), "l"(desc(st + 256)), "r"(0));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

    float* row = sc + (tid % 64) * 16 + (tid / 64) * 8;
    row[0] = d0 + t0 + sbias[tid % 64];
    row[1] = d1 + t1;
    row[2] = d2 + t2;
    row[3] = d3 + t3;
    row[4] = d4;
    row[5] = d5;
    row[6] = d6;
    row[7] = d7;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    unsigned long long state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(bar2) : "memory");
    unsigned ready = 0;
    while (!ready) {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.test_wait.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
            : "=r"(ready) : "r"(bar2), "l"(state) : "memory");
    }
    if (tid == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(&c_map), "r"(0), "r"(blockIdx.x * 64), "r"(smem(sc)) : "memory");
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out), "r"(smem(sbias)),
                     "r"(256) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0x0;" ::: "memory");
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
    }
}
