// Planted defect: a kernel that never returns. The harness must time out, kill the worker, record the failure and
// measure the next config in a fresh worker.
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K) {
    volatile int spin = 1;
    while (spin) {
    }
    C[threadIdx.x] = A[0] + B[0] + M + N + K;
}
