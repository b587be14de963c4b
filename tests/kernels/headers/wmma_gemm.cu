// A 32x32 output tile per block of four warps with the WMMA API (<mma.h>): fragments of A and B loaded from shared
// memory, multiplied-accumulated over K in 16-wide steps, the accumulator stored to global memory.
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

__global__ void __launch_bounds__(128) wmma_gemm(const __half* a, const __half* b, float* c, int k_total) {
    __shared__ __half sa[32 * 16];
    __shared__ __half sb[16 * 32];
    int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k = 0; k < k_total; k += 16) {
        for (int i = threadIdx.x; i < 32 * 16; i += 128) {
            sa[i] = a[(blockIdx.y * 32 + i / 16) * k_total + k + i % 16];
            sb[i] = b[(k + i / 32) * 1024 + blockIdx.x * 32 + i % 32];
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, sa + wm * 16 * 16, 16);
        wmma::load_matrix_sync(fb, sb + wn * 16, 32);
        wmma::mma_sync(acc, fa, fb, acc);
        __syncthreads();
    }
    wmma::store_matrix_sync(c + (blockIdx.y * 32 + wm * 16) * 1024 + blockIdx.x * 32 + wn * 16, acc, 1024,
                            wmma::mem_row_major);
}
