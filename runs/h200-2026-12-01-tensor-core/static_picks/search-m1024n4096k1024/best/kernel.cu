// FP32 matmul C = A·B on tensor cores, by 3xTF32; all row-major: A is M×K, B is K×N, C is M×N.
// Config: bm=128,bn=128,bk=32,wm=32,wn=64,stages=2,a_vec=16,b_vec=16,chain=1,raster=16,split_k=1
//
// Every float x splits into big = tf32(x) (its top 11 significand bits, rounded) and small = tf32(x - big) (the
// next 11); a·b = big_a·big_b + big_a·small_b + small_a·big_b + small_a·small_b, and the last term (about 2^-22 of the
// product) is dropped. Three mma.sync m16n8k8 TF32 per product tile, small terms first, on the tensor cores instead
// of the FMA pipe. An mma adds to its FP32 accumulator with truncation, not rounding to nearest, so a chain of them
// drifts in one direction (by about K·2^-27 of the result on an H200): with chain = 1 each k-tile's mma chain starts
// from zero and is then added to the FP32 total with ordinary (round-to-nearest) adds; chain = 0 runs one chain over
// all of K (fewer registers, an error that grows with K). Chains of two k-tiles measured no faster than one.
//
// A block computes a BM×BN tile of C; its warps split it into WM×WN warp tiles, each MI×NI tiles of 16×8 (one mma
// each). Copies as in the SIMT matmul: a ring of STAGES shared buffers filled by cp.async, zero-filled past the M, N
// or K edge so partial tiles compute as full ones.

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int WM = 32, WN = 64;  // warp tile
constexpr int MI = WM / 16, NI = WN / 8;     // mma tiles per warp tile
constexpr int WARPS_N = BN / WN;             // warps along N
constexpr int THREADS = 256;
constexpr int STAGES = 2;
// Shared rows padded so a warp's fragment reads are conflict-free: lane (g = lane / 4, t = lane % 4) reads A at row
// g, column t (bank 4g + t with LDA = 4 mod 32) and B at row t, column g (bank 8t + g with LDB = 8 mod 32).
constexpr int LDA = BK + 4, LDB = BN + 8;
constexpr int A_STAGE = BM * LDA, B_STAGE = BK * LDB;  // floats per stage buffer
constexpr int A_VEC = 4, B_VEC = 4;  // floats per cp.async
constexpr int A_COPIES = BM * BK / A_VEC, B_COPIES = BK * BN / B_VEC;  // cp.async per tile, all threads together
constexpr int SPLIT_K = 1;  // blocks along z, each summing a contiguous share of the k-tiles

static_assert((BM / WM) * WARPS_N * 32 == THREADS, "warp tiles must cover the block tile");
static_assert(BK % 8 == 0 && WM % 16 == 0 && WN % 8 == 0, "whole mma tiles");

template <int BYTES>
__device__ __forceinline__ void cp_async(float* dst, const float* src, bool in_bounds) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    const int src_bytes = in_bounds ? BYTES : 0;  // 0: read nothing, zero-fill the destination
    if constexpr (BYTES == 16) {  // .cg (L2 only) exists for 16-byte copies alone
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(BYTES), "r"(src_bytes)
                     : "memory");
    }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Issue one k-tile's copies of A (rows m0.., columns k0..) and B (rows k0.., columns n0..) into one stage's buffers.
__device__ __forceinline__ void load_tile(float* As, float* Bs, const float* __restrict__ A,
                                          const float* __restrict__ B, int M, int N, int K, int m0, int n0, int k0,
                                          int tid) {
#pragma unroll
    for (int c = 0; c < (A_COPIES + THREADS - 1) / THREADS; ++c) {
        const int e = tid + c * THREADS;
        if (A_COPIES % THREADS == 0 || e < A_COPIES) {
            // Row copy of A_VEC floats; K % A_VEC == 0, so a vector is wholly inside K or wholly past it.
            const int r = e / (BK / A_VEC);
            const int k = (e % (BK / A_VEC)) * A_VEC;
            const bool ok = m0 + r < M && k0 + k < K;
            cp_async<A_VEC * 4>(As + r * LDA + k, ok ? A + (size_t)(m0 + r) * K + (k0 + k) : A, ok);
        }
    }
#pragma unroll
    for (int c = 0; c < (B_COPIES + THREADS - 1) / THREADS; ++c) {
        const int e = tid + c * THREADS;
        if (B_COPIES % THREADS == 0 || e < B_COPIES) {
            // Row copy of B_VEC floats; N % B_VEC == 0, so a vector is wholly inside N or wholly past it.
            const int r = e / (BN / B_VEC);
            const int n = (e % (BN / B_VEC)) * B_VEC;
            const bool ok = k0 + r < K && n0 + n < N;
            cp_async<B_VEC * 4>(Bs + r * LDB + n, ok ? B + (size_t)(k0 + r) * N + (n0 + n) : B, ok);
        }
    }
}

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// x = big + small, each a TF32 value in a 32-bit register.
__device__ __forceinline__ void split(float x, unsigned& big, unsigned& small) {
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}

// c += a·b for one 16×8×8 tile (fragment layouts of the PTX ISA's mma.m16n8k8 .tf32).
__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, "
        "{ %0, %1, %2, %3 };"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One k step (8 deep) of a warp tile's operands, split: A's four values per mma row tile (rows g and g+8, columns t
// and t+4) and B's two per column tile (rows t and t+4, column g).
struct Frag {
    unsigned a_big[MI][4], a_small[MI][4], b_big[NI][2], b_small[NI][2];
};

__device__ __forceinline__ void load_frag(Frag& f, const float* As, const float* Bs, int kk, int row0, int col0,
                                          int g, int t) {
#pragma unroll
    for (int i = 0; i < MI; ++i) {
        const float* p = As + (row0 + i * 16 + g) * LDA + kk + t;
        split(p[0], f.a_big[i][0], f.a_small[i][0]);
        split(p[8 * LDA], f.a_big[i][1], f.a_small[i][1]);
        split(p[4], f.a_big[i][2], f.a_small[i][2]);
        split(p[8 * LDA + 4], f.a_big[i][3], f.a_small[i][3]);
    }
#pragma unroll
    for (int j = 0; j < NI; ++j) {
        const float* p = Bs + (kk + t) * LDB + col0 + j * 8 + g;
        split(p[0], f.b_big[j][0], f.b_small[j][0]);
        split(p[4 * LDB], f.b_big[j][1], f.b_small[j][1]);
    }
}

// acc += the k step's products, each tile's three terms smallest first; tiles innermost, so consecutive mma are
// independent.
__device__ __forceinline__ void mma_frag(float (&acc)[MI][NI][4], const Frag& f) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) mma_tf32(acc[i][j], f.a_small[i], f.b_big[j]);
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) mma_tf32(acc[i][j], f.a_big[i], f.b_small[j]);
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) mma_tf32(acc[i][j], f.a_big[i], f.b_big[j]);
}

extern "C" __global__ __launch_bounds__(256) void matmul(const float* __restrict__ A,
                                                                 const float* __restrict__ B, float* __restrict__ C,
                                                                 int M, int N, int K) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                     // STAGES buffers of A_STAGE floats
    float* Bs = smem + STAGES * A_STAGE;  // then STAGES buffers of B_STAGE floats

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int row0 = (warp / WARPS_N) * WM, col0 = (warp % WARPS_N) * WN;  // the warp tile in the block tile
    // Grouped rasterization: consecutive blocks walk down 16 block rows before moving right, so the blocks
    // resident together share B tiles (and A rows) in L2 instead of sweeping all of N.
    const int pid = blockIdx.y * gridDim.x + blockIdx.x, per_group = 16 * gridDim.x;
    const int first_row = (pid / per_group) * 16;
    const int group_rows = min((int)gridDim.y - first_row, 16);
    const int m0 = (first_row + (pid % per_group) % group_rows) * BM, n0 = ((pid % per_group) / group_rows) * BN;
    const int k_first = 0, tiles = (K + BK - 1) / BK;

    float acc[MI][NI][4];
    float part[MI][NI][4];  // the current k-tile's sums, added into acc at its end
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f, part[i][j][r] = 0.0f;

    // Prologue: tiles 0..STAGES-2 into buffers 0..STAGES-2, one commit group each.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(As + s * A_STAGE, Bs + s * B_STAGE, A, B, M, N, K, m0, n0, (k_first + s) * BK, tid);
        cp_async_commit();
    }

    int read = 0, write = STAGES - 1;  // buffers of tile kt and of tile kt+STAGES-1
#pragma unroll 1
    for (int kt = 0; kt < tiles; ++kt) {
        // The barrier that ended the last iteration freed `write` (tile kt-1's buffer) for the tile STAGES-1 ahead.
        if (kt + STAGES - 1 < tiles)
            load_tile(As + write * A_STAGE, Bs + write * B_STAGE, A, B, M, N, K, m0, n0, (k_first + kt + STAGES - 1) * BK, tid);
        cp_async_commit();
        cp_async_wait<STAGES - 1>();  // groups of tiles <= kt are done: this thread's part of tile kt has landed
        __syncthreads();              // ... and every other thread's
        const float* as = As + read * A_STAGE;
        const float* bs = Bs + read * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            Frag f;
            load_frag(f, as, bs, kk, row0, col0, g, t);
            mma_frag(part, f);
        }
        // The k-tile's chain ends: into the total, rounded to nearest; the next starts from zero.
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[i][j][r] += part[i][j][r], part[i][j][r] = 0.0f;
        __syncthreads();  // all reads of `read` are done before it is overwritten next iteration
        read = read + 1 == STAGES ? 0 : read + 1;
        write = write + 1 == STAGES ? 0 : write + 1;
    }

    // Epilogue: lane (g, t) holds columns 2t, 2t+1 of rows g and g+8 of each mma tile; in-bounds elements are written.
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = m0 + row0 + i * 16 + g + 8 * h;
            if (r >= M) continue;
            float* c_row = C + (size_t)r * N;
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int c = n0 + col0 + j * 8 + 2 * t;
                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                // N is even: a pair starting inside N ends inside it, 8-byte aligned.
                if (c < N) {
                    *reinterpret_cast<float2*>(c_row + c) = make_float2(v0, v1);
                }
            }
        }
    }
}
