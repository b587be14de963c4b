// One warp multiplies a 16x16 f16 tile of A by a 16x8 tile of B with mma.sync, fragments fetched from shared
// memory by ldmatrix (x4 for A, x2 .trans for B, x1 for a bias row); on sm_90 the f16 result goes back through
// stmatrix. Written for the census tests: every instruction is inline PTX, so no header is needed.
extern "C" __global__ void __launch_bounds__(32) tile_mma(const unsigned short* a, const unsigned short* b,
                                                          float* c, unsigned short* d) {
    __shared__ __align__(16) unsigned short sa[16 * 16];
    __shared__ __align__(16) unsigned short sb[16 * 8];
    __shared__ __align__(16) unsigned short sd[16 * 8];
    int lane = threadIdx.x;
    for (int i = lane; i < 16 * 16; i += 32) sa[i] = a[i];
    for (int i = lane; i < 16 * 8; i += 32) sb[i] = b[i];
    __syncthreads();

    unsigned a0, a1, a2, a3, b0, b1, e0;
    unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[(lane % 16) * 16 + (lane / 16) * 8]);
    unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[(lane % 16) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(pa));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(pb));
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(e0) : "r"(pb));

    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a3), "r"(a2), "r"(a1), "r"(e0), "r"(b1), "r"(b0));
    c[lane * 4 + 0] = c0;
    c[lane * 4 + 1] = c1;
    c[lane * 4 + 2] = c2;
    c[lane * 4 + 3] = c3;
#if __CUDA_ARCH__ >= 900
    unsigned h0, h1;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h0) : "f"(c1), "f"(c0));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h1) : "f"(c3), "f"(c2));
    unsigned pd = (unsigned)__cvta_generic_to_shared(&sd[(lane % 16) * 8]);
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" :: "r"(pd), "r"(h0), "r"(h1));
    asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" :: "r"(pd), "r"(h1));
    __syncwarp();
    for (int i = lane; i < 16 * 8; i += 32) d[i] = sd[i];
#endif
}
