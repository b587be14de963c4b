// Register pressure past what __launch_bounds__(1024, 2) allows (32 registers a thread): 80 accumulators stay live
// across a data-dependent loop, and a local array indexed at run time lives in local memory.
#define LIVE 80

extern "C" __global__ void __launch_bounds__(1024, 2) spill(const float* __restrict__ in, float* out, const int* idx,
                                                            int n) {
    float acc[LIVE];
    float table[64];
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int j = 0; j < LIVE; ++j) acc[j] = in[t + j * n];
#pragma unroll
    for (int j = 0; j < 64; ++j) table[j] = in[t * 64 + j];
    for (int k = 0; k < n; ++k) {
        float x = table[idx[k] & 63];
#pragma unroll
        for (int j = 0; j < LIVE; ++j) acc[j] = acc[j] * x + acc[(j + 7) % LIVE];
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < LIVE; ++j) s += acc[j] * (j + 1);
    out[t] = s;
}
