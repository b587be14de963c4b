// Warp sum by butterfly shuffles: five shfl.sync.bfly, one per halving.
extern "C" __global__ void shuffle_reduce(const float* __restrict__ in, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) out[i >> 5] = v;
}
