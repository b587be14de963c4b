// A row softmax as people write it with the runtime headers: cooperative groups for the warp reductions, half
// precision output through cuda_fp16.h. Compiles only where the CUDA headers are found.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

__global__ void __launch_bounds__(256) row_softmax(const float* x, __half* y, int cols) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    const float* row = x + (size_t)blockIdx.x * cols;
    float peak = -INFINITY;
    for (int c = block.thread_rank(); c < cols; c += block.size()) peak = fmaxf(peak, row[c]);
    peak = cg::reduce(warp, peak, cg::greater<float>());
    float total = 0.f;
    for (int c = block.thread_rank(); c < cols; c += block.size()) total += __expf(row[c] - peak);
    total = cg::reduce(warp, total, cg::plus<float>());
    for (int c = block.thread_rank(); c < cols; c += block.size())
        y[(size_t)blockIdx.x * cols + c] = __float2half(__expf(row[c] - peak) / total);
}
