// One warp multiplies an 8x4 by a 4x8 tile of doubles with the FP64 tensor-core mma (DMMA in SASS). Written for the
// census and static-model tests: the op is inline PTX, so no header is needed.
extern "C" __global__ void __launch_bounds__(32) tile_dmma(const double* a, const double* b, double* c) {
    const int lane = threadIdx.x;
    const double a0 = a[lane], b0 = b[lane];
    double c0 = 0.0, c1 = 0.0;
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(c0), "+d"(c1)
                 : "d"(a0), "d"(b0));
    c[lane * 2] = c0;
    c[lane * 2 + 1] = c1;
}
