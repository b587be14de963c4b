// Planted defect: a kernel that never returns (it waits for an input value that never comes; the volatile read
// cannot be hoisted). The harness must time out, kill the worker, record the failure and measure the next config
// in a fresh worker.
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K) {
    const volatile float* flag = A;
    while (flag[0] != 12345.0f) {
    }
    C[threadIdx.x] = B[0] + M + N + K;
}
