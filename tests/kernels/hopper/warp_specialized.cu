// sm_90a: a producer warpgroup gives registers back (setmaxnreg.dec) and streams tiles into a two-slot shared ring;
// two consumer warpgroups take more registers (setmaxnreg.inc) and reduce the tiles. Full/empty handshakes use
// named barriers (bar.arrive / bar.sync with a thread count), apart from the block-wide __syncthreads.
extern "C" __global__ void __launch_bounds__(384, 1) warp_specialized(const float4* x, float* y, int tiles) {
    __shared__ __align__(16) float4 ring[2][256];
    int tid = threadIdx.x, wg = tid / 128;
    __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        for (int t = 0; t < tiles; ++t) {
            int slot = t & 1;
            if (t >= 2) asm volatile("bar.sync %0, 384;" ::"r"(3 + slot));
            ring[slot][tid] = x[(size_t)t * 256 + tid];
            ring[slot][tid + 128] = x[(size_t)t * 256 + tid + 128];
            asm volatile("bar.arrive %0, 384;" ::"r"(1 + slot));
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        float acc = 0.f;
        int me = tid - 128;
        for (int t = 0; t < tiles; ++t) {
            int slot = t & 1;
            asm volatile("bar.sync %0, 384;" ::"r"(1 + slot));
            float4 v = ring[slot][me];
            acc += v.x * v.y + v.z * v.w;
            asm volatile("bar.arrive %0, 384;" ::"r"(3 + slot));
        }
        y[blockIdx.x * 256 + me] = acc;
    }
}
