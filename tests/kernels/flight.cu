// Memory-level parallelism in two shapes, one file: `two_loads` issues both 128-bit loads before it uses either;
// `chase` follows a pointer chain, so each load waits for the one before it.
extern "C" __global__ void two_loads(const float4* __restrict__ a, const float4* __restrict__ b, float4* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float4 x = a[i];
    const float4 y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

extern "C" __global__ void chase(const int* __restrict__ next, int* out, int steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int s = 0; s < steps; ++s) i = next[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}
