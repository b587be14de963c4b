// Several kernels sharing module-level state, for the census of a PTX assembled in parts: a template instantiated
// at four sizes, a kernel calling a function kept out of line (a .func every part must carry), a __device__ array
// and __constant__ table (module variables every part must declare), static and dynamic shared memory, and a comment
// with braces { } that a careless splitter would count.

__constant__ float weights[64];
__device__ unsigned int hits[256];

__device__ __noinline__ float mix(float a, float b, int i) {  // out of line: a .func, called by two kernels
    return fmaf(a, weights[i & 63], b);
}

template <int TILE>
__global__ void __launch_bounds__(TILE) tile_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float buf[TILE];
    const int i = blockIdx.x * TILE + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int h = TILE / 2; h > 0; h >>= 1) {  /* { a tree } */
        if (threadIdx.x < h) buf[threadIdx.x] += buf[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = buf[0];
}

template __global__ void tile_sum<64>(const float*, float*, int);
template __global__ void tile_sum<128>(const float*, float*, int);
template __global__ void tile_sum<256>(const float*, float*, int);
template __global__ void tile_sum<512>(const float*, float*, int);

extern "C" __global__ void count_hits(const int* __restrict__ keys, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hits[keys[i] & 255], 1u);
}

extern "C" __global__ void blend(const float* __restrict__ a, const float* __restrict__ b, float* c, int n) {
    extern __shared__ float stage[];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = i < n ? a[i] : 0.f;
    __syncthreads();
    if (i < n) c[i] = mix(stage[threadIdx.x], b[i], i);
}

extern "C" __global__ void blend_twice(const float* __restrict__ a, float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = mix(mix(a[i], 1.f, i), 2.f, i + 1) + (float)hits[i & 255];
}
