// Row-pitch copies for matmul-bf16's shapes whose K or N is off a tensor map's 16-byte pitch: a matrix copied into
// one whose rows are further apart (the padding written with zeros), and back. A grid row takes one matrix row at a
// time and consecutive threads take consecutive elements, so a warp reads and writes 64 (or 128) contiguous bytes on
// either side, whatever a row's alignment; each thread keeps PER_THREAD loads in flight before it stores.
//
// dst[r][c] = c < width ? src[r][c] : 0, for every r < rows and c < columns (width <= columns); pitches in elements.

#define THREADS 256
#define PER_THREAD 4

template <typename T>
__device__ __forceinline__ void copy_rows(const T* __restrict__ src, T* __restrict__ dst, unsigned rows,
                                          unsigned width, unsigned columns, unsigned long long src_pitch,
                                          unsigned long long dst_pitch) {
    const unsigned span = THREADS * PER_THREAD;
    for (unsigned r = blockIdx.y; r < rows; r += gridDim.y) {
        const T* from = src + r * src_pitch;
        T* to = dst + r * dst_pitch;
        for (unsigned first = blockIdx.x * span; first < columns; first += gridDim.x * span) {
            T held[PER_THREAD];
#pragma unroll
            for (int i = 0; i < PER_THREAD; ++i) {
                const unsigned c = first + i * THREADS + threadIdx.x;
                held[i] = c < width ? from[c] : T(0);
            }
#pragma unroll
            for (int i = 0; i < PER_THREAD; ++i) {
                const unsigned c = first + i * THREADS + threadIdx.x;
                if (c < columns) to[c] = held[i];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) copy_rows_2(const unsigned short* __restrict__ src,
    unsigned short* __restrict__ dst, unsigned rows, unsigned width, unsigned columns, unsigned long long src_pitch,
    unsigned long long dst_pitch) {
    copy_rows(src, dst, rows, width, columns, src_pitch, dst_pitch);
}

extern "C" __global__ void __launch_bounds__(THREADS) copy_rows_4(const unsigned* __restrict__ src,
    unsigned* __restrict__ dst, unsigned rows, unsigned width, unsigned columns, unsigned long long src_pitch,
    unsigned long long dst_pitch) {
    copy_rows(src, dst, rows, width, columns, src_pitch, dst_pitch);
}
