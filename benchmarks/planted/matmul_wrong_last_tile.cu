// Planted defect (the seed's first pipeline bug): a double-buffered 64x64x16 FP32 matmul whose last K tile is
// read from buffer `tiles % 2` instead of `(tiles - 1) % 2`. It runs fast and writes every output, so only the
// correctness check can catch it. Launch like matmul bm=64, bn=64, tm=4, tn=4 (256 threads). Needs K % 16 == 0.
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K) {
    __shared__ float As[2][16][64];
    __shared__ float Bs[2][16][64];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    const int tiles = K / 16;
    float acc[4][4] = {};
    auto load = [&](int t, int buf) {
        for (int i = tid; i < 64 * 16; i += 256) {
            int r = i / 16, k = i % 16;  // A tile: 64 rows x 16 k, stored transposed
            As[buf][k][r] = (row0 + r < M) ? A[(row0 + r) * K + t * 16 + k] : 0.f;
            int kb = i / 64, c = i % 64;  // B tile: 16 k x 64 cols
            Bs[buf][kb][c] = (col0 + c < N) ? B[(t * 16 + kb) * N + col0 + c] : 0.f;
        }
    };
    load(0, 0);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        if (t + 1 < tiles) load(t + 1, (t + 1) % 2);
        const int buf = (t == tiles - 1) ? tiles % 2 : t % 2;  // BUG: should be (tiles - 1) % 2
        #pragma unroll
        for (int k = 0; k < 16; ++k)
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += As[buf][k][ty * 4 + i] * Bs[buf][k][tx * 4 + j];
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
            if (r < M && c < N) C[r * N + c] = acc[i][j];
        }
}
