// Planted defect: every thread stores far outside C, so the launch dies with an illegal address. The harness must
// record it failed with the CUDA error and carry on in a fresh worker.
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K) {
    long wild = (1L << 40) + blockIdx.x * (long)blockDim.x + threadIdx.x;
    C[wild] = A[0] + B[0] + M + N + K;
}
