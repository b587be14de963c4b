// A producer publishes a value and raises a flag for readers at each scope, the way a reduction across blocks
// does: a fence between the data and the flag at block, device and system scope, in both the legacy membar and
// the fence.{sc,acq_rel} forms.
extern "C" __global__ void publish(float* data, int* flags, float value) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    data[i] = value;
    __threadfence_block();  // membar.cta
    flags[0] = 1;
    data[i + 1] = value * 2.0f;
    __threadfence();  // membar.gl
    flags[1] = 1;
    data[i + 2] = value * 3.0f;
    __threadfence_system();  // membar.sys
    flags[2] = 1;
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        flags[3] = 1;
    }
    asm volatile("fence.sc.cta;" ::: "memory");
    flags[4] = 1;
}
