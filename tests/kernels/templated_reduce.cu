// Two instantiations of one block-reduction template, plus a namespaced overload pair: the census must keep their
// names apart (template arguments, parameter lists) and list them in one order whatever the input kind.
template <unsigned BLOCK>
__global__ void __launch_bounds__(BLOCK) reduce6(const float* in, float* out, unsigned n) {
    __shared__ float partial[BLOCK];
    unsigned t = threadIdx.x;
    float sum = 0.f;
    for (unsigned i = blockIdx.x * BLOCK + t; i < n; i += BLOCK * gridDim.x) sum += in[i];
    partial[t] = sum;
    __syncthreads();
    for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

template __global__ void reduce6<256>(const float*, float*, unsigned);
template __global__ void reduce6<512>(const float*, float*, unsigned);

namespace ops {
__global__ void fill(float* p, float v) { p[blockIdx.x * blockDim.x + threadIdx.x] = v; }
__global__ void fill(int* p, int v) { p[blockIdx.x * blockDim.x + threadIdx.x] = v; }
}  // namespace ops
