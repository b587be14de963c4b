// FP32 matmul C = A·B, all row-major: A is M×K, B is K×N, C is M×N. One block computes a BM×BN tile of C.
// Config: bm=64,bn=64,bk=16,tm=8,tn=8,stages=2,a_vec=16,b_vec=16,a_trans=0,pad=0,smem_vec=1,pipe=0,k_unroll=4,raster=4,split_k=8
//
// Pipeline: every tile copy is a cp.async into a ring of STAGES shared buffers. Iteration kt issues the tile
// STAGES-1 ahead into the buffer tile kt-1 used, commits (an empty group once no tile is left, so the depth stays
// constant), waits until at most STAGES-1 groups are outstanding (tile kt has landed), then computes tile kt.
// Copies past the M, N or K edge zero-fill through cp.async's src-size operand, so partial tiles compute as full.
//
// Thread -> micro-tile: thread (tx, ty) owns TM rows and TN columns of the tile, taken in runs of WA contiguous
// rows strided by TY*WA and of WB contiguous columns strided by TX*WB. A warp's fragment reads of B (and of A when
// transposed) then hit consecutive shared words, conflict-free, threads sharing tx or ty broadcast; rows of A kept
// as [BM][BK] are LDA apart, which pad=4 staggers across banks. Stores of C are consecutive
// float4s across a warp.

constexpr int BM = 64, BN = 64, BK = 16;
constexpr int TM = 8, TN = 8;
constexpr int TX = BN / TN, TY = BM / TM;  // threads along N and along M
constexpr int THREADS = 64;
constexpr int STAGES = 2;
constexpr int LDA = 16;  // shared row stride of A, padded: As[BM][BK + pad]
constexpr int LDB = 64;  // shared row stride of B: Bs[BK][BN]
constexpr int A_STAGE = 1024, B_STAGE = 1024;  // floats per stage buffer
constexpr int A_VEC = 4, B_VEC = 4;  // floats per cp.async
constexpr int A_COPIES = 256, B_COPIES = 256;  // cp.async per tile, all threads together
constexpr int WA = 1, WB = 4;  // contiguous rows / columns per run (4: float4 reads)

constexpr int SPLIT_K = 8;  // blocks along z, each summing a contiguous share of the k-tiles

static_assert(TX * TY == THREADS, "micro-tiles must cover the block tile");
static_assert(LDA % 4 == 0 && LDB % 4 == 0, "shared rows must stay 16-byte aligned");

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

// Issue one k-tile's copies of A and B (rows k0.. of B,
// columns k0.. of A) into one stage's buffers.
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

// Serial split-K: the SPLIT_K blocks of one C tile (blockIdx.z = 0..SPLIT_K-1) add their partial tiles into C in
// order of z, so the sum is the same at every launch. Slice 0 stores its partial; slice z waits until the tile's turn
// counter says z, adds its partial to what C holds and passes the turn on; the last slice resets the counter to 0
// for the next launch (the counters start at 0: a __device__ array is zeroed when the module loads). Blocks start in
// order of their linear index, z slowest, so slice z-1 of a tile has started (and waits on nothing later) before
// slice z can spin on it: no deadlock however few blocks fit at once.
constexpr int MAX_TILES = 1024;
__device__ unsigned int tile_turn[MAX_TILES];

__device__ __forceinline__ void wait_turn(const unsigned int* turn, unsigned int z) {
    unsigned int now;
    for (;;) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(now) : "l"(turn) : "memory");
        if (now == z) break;
        __nanosleep(64);
    }
}

__device__ __forceinline__ void pass_turn(unsigned int* turn, unsigned int z) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(turn), "r"(z) : "memory");
}

// Row (of the block tile) of the thread's i-th micro-row, and column of its j-th micro-column.
__device__ __forceinline__ int row_of(int i, int ty) { return (i / WA) * (TY * WA) + ty * WA + i % WA; }
__device__ __forceinline__ int col_of(int j, int tx) { return (j / WB) * (TX * WB) + tx * WB + j % WB; }

// The fragments of KS consecutive k steps: A values of the thread's TM rows and B values of its TN columns.
constexpr int KS = 4;
struct Frag {
    float a[KS][TM], b[KS][TN];
};

// Read the fragments of steps kk..kk+KS-1 of one stage from shared memory into registers.
__device__ __forceinline__ void load_frag(Frag& f, const float* As, const float* Bs, int kk, int tx, int ty) {
    // As[m][k] is contiguous along k: one float4 per row holds its A values for four k steps.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const float4 v = *reinterpret_cast<const float4*>(As + row_of(i, ty) * LDA + kk);
        f.a[0][i] = v.x, f.a[1][i] = v.y, f.a[2][i] = v.z, f.a[3][i] = v.w;
    }
#pragma unroll
    for (int s = 0; s < KS; ++s) {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(Bs + (kk + s) * LDB + col_of(j, tx));
            f.b[s][j] = v.x, f.b[s][j + 1] = v.y, f.b[s][j + 2] = v.z, f.b[s][j + 3] = v.w;
        }
    }
}

// acc += the outer products of the fragments' KS steps.
__device__ __forceinline__ void fma_frag(float (&acc)[TM][TN], const Frag& f) {
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(f.a[s][i], f.b[s][j], acc[i][j]);
}

extern "C" __global__ __launch_bounds__(64) void matmul(const float* __restrict__ A,
                                                                 const float* __restrict__ B, float* __restrict__ C,
                                                                 int M, int N, int K) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                     // STAGES buffers of A_STAGE floats
    float* Bs = smem + STAGES * A_STAGE;  // then STAGES buffers of B_STAGE floats

    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    // Grouped rasterization: consecutive blocks walk down 4 block rows before moving right, so the blocks
    // resident together share B tiles (and A rows) in L2 instead of sweeping all of N.
    const int pid = blockIdx.y * gridDim.x + blockIdx.x, per_group = 4 * gridDim.x;
    const int first_row = (pid / per_group) * 4;
    const int group_rows = min((int)gridDim.y - first_row, 4);
    const int m0 = (first_row + (pid % per_group) % group_rows) * BM, n0 = ((pid % per_group) / group_rows) * BN;
    // This block's k-tiles: [k_first, k_first + tiles) of all K's, in shares of ceil(all / SPLIT_K); a late share may
    // be empty (it still takes its turn, adding zeros).
    const int all_tiles = (K + BK - 1) / BK, share = (all_tiles + SPLIT_K - 1) / SPLIT_K;
    const int k_first = blockIdx.z * share, tiles = max(0, min(all_tiles - k_first, share));

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    // Prologue: tiles 0..STAGES-2 into buffers 0..STAGES-2, one commit group each.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) {
            load_tile(As + s * A_STAGE, Bs + s * B_STAGE, A, B, M, N, K, m0, n0, (k_first + s) * BK, tid);
        }
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
        // k_unroll=4: the loop body holds 4 k steps, not all BK: a smaller body for the
        // instruction cache, at the cost of a branch and address arithmetic per body.
#pragma unroll 1
        for (int kk = 0; kk < BK; kk += KS) {
            Frag f;
            load_frag(f, as, bs, kk, tx, ty);
            fma_frag(acc, f);
        }
        __syncthreads();  // all reads of `read` are done before it is overwritten next iteration
        read = read + 1 == STAGES ? 0 : read + 1;
        write = write + 1 == STAGES ? 0 : write + 1;
    }

    // Epilogue: every in-bounds element of the tile is written; rows past M and columns past N are skipped.
    // Slice z > 0 adds to what slices 0..z-1 left in C, read through L2 (.cg): L1 is not coherent with their stores.
    const unsigned int z = blockIdx.z;
    if (gridDim.x * gridDim.y > MAX_TILES) __trap();  // launched for a bigger shape than it was made for
    unsigned int* turn = tile_turn + blockIdx.y * gridDim.x + blockIdx.x;
    if (z > 0) {
        if (tid == 0) wait_turn(turn, z);
        __syncthreads();  // the acquire of thread 0 orders every thread's reads of C after the previous slice's stores
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = m0 + row_of(i, ty);
        if (r < M) {
            float* c_row = C + (size_t)r * N;
            // N % 4 == 0: a float4 run starting inside N ends inside it, and its address is 16-byte aligned.
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const int c = n0 + col_of(j, tx);
                if (c < N) {
                    float4 v = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
                    if (z > 0) {
                        const float4 prior = __ldcg(reinterpret_cast<const float4*>(c_row + c));
                        v.x += prior.x, v.y += prior.y, v.z += prior.z, v.w += prior.w;
                    }
                    *reinterpret_cast<float4*>(c_row + c) = v;
                }
            }
        }
    }
    if (z + 1 < SPLIT_K) {
        __syncthreads();  // every thread's stores of C precede the release that hands the tile to slice z+1
        if (tid == 0) pass_turn(turn, z + 1);
    } else if (tid == 0) {
        *turn = 0;  // the last slice: nothing reads the counter again in this launch
    }
}
