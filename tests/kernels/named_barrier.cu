// Two warps meet on named barrier 1 (64 threads); the whole block then meets on barrier 0.
extern "C" __global__ void named_barrier(float* data) {
    __shared__ float stage[128];
    const int t = threadIdx.x;
    stage[t] = data[blockIdx.x * 128 + t];
    if (t < 64) {
        asm volatile("bar.sync 1, 64;" ::: "memory");
        stage[t] += stage[63 - t];
    }
    __syncthreads();
    data[blockIdx.x * 128 + t] = stage[127 - t];
}
