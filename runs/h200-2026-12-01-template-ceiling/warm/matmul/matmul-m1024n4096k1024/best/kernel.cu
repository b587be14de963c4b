// FP32 matmul C = A·B, all row-major: A is M×K, B is K×N, C is M×N. One block computes a BM×BN tile of C.
// Config: bm=128,bn=256,bk=16,tm=16,tn=8,stages=4,a_vec=4,b_vec=16,a_trans=1,pad=4,smem_vec=1,pipe=1,k_unroll=0,raster=0,split_k=1
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

constexpr int BM = 128, BN = 256, BK = 16;
constexpr int TM = 16, TN = 8;
constexpr int TX = BN / TN, TY = BM / TM;  // threads along N and along M
constexpr int THREADS = 256;
constexpr int STAGES = 4;
constexpr int LDA = 132;  // shared row stride of A, padded: As[BK][BM + pad]
constexpr int LDB = 256;  // shared row stride of B: Bs[BK][BN]
constexpr int A_STAGE = 2112, B_STAGE = 4096;  // floats per stage buffer
constexpr int A_VEC = 1, B_VEC = 4;  // floats per cp.async
constexpr int A_COPIES = 2048, B_COPIES = 1024;  // cp.async per tile, all threads together
constexpr int WA = 4, WB = 4;  // contiguous rows / columns per run (4: float4 reads)

constexpr int SPLIT_K = 1;  // blocks along z, each summing a contiguous share of the k-tiles

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
            // Transposing copy, one float each: a warp takes 8 consecutive k of 4 rows, so global reads fill whole
            // 32-byte sectors and, with pad=4, the 32 shared writes k*LDA + m land in 32 different banks.
            const int m = (e / 8) % BM;
            const int k = (e / (8 * BM)) * 8 + e % 8;
            const bool ok = m0 + m < M && k0 + k < K;
            cp_async<4>(As + k * LDA + m, ok ? A + (size_t)(m0 + m) * K + (k0 + k) : A, ok);
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

// Row (of the block tile) of the thread's i-th micro-row, and column of its j-th micro-column.
__device__ __forceinline__ int row_of(int i, int ty) { return (i / WA) * (TY * WA) + ty * WA + i % WA; }
__device__ __forceinline__ int col_of(int j, int tx) { return (j / WB) * (TX * WB) + tx * WB + j % WB; }

// The fragments of KS consecutive k steps: A values of the thread's TM rows and B values of its TN columns.
constexpr int KS = 1;
struct Frag {
    float a[KS][TM], b[KS][TN];
};

// Read the fragments of steps kk..kk+KS-1 of one stage from shared memory into registers.
__device__ __forceinline__ void load_frag(Frag& f, const float* As, const float* Bs, int kk, int tx, int ty) {
#pragma unroll
    for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(As + kk * LDA + row_of(i, ty));
        f.a[0][i] = v.x, f.a[0][i + 1] = v.y, f.a[0][i + 2] = v.z, f.a[0][i + 3] = v.w;
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

extern "C" __global__ __launch_bounds__(256) void matmul(const float* __restrict__ A,
                                                                 const float* __restrict__ B, float* __restrict__ C,
                                                                 int M, int N, int K) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                     // STAGES buffers of A_STAGE floats
    float* Bs = smem + STAGES * A_STAGE;  // then STAGES buffers of B_STAGE floats

    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int k_first = 0, tiles = (K + BK - 1) / BK;

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
    // pipe=1: one barrier per k-tile, fragments double-buffered in registers. Group g+1's fragments are read
    // while group g's FMAs run; at the last group of tile kt the block waits for tile kt+1, passes the barrier
    // (after which no thread reads tile kt again, so the next iteration may overwrite it) and reads tile kt+1's
    // first fragments before the last FMAs of tile kt.
    constexpr int GROUPS = BK / KS;
    static_assert(GROUPS % 2 == 0, "the fragment buffers alternate, so a tile must hold an even number of groups");
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    Frag f[2];
    load_frag(f[0], As, Bs, 0, tx, ty);
#pragma unroll 1
    for (int kt = 0; kt < tiles; ++kt) {
        if (kt + STAGES - 1 < tiles)
            load_tile(As + write * A_STAGE, Bs + write * B_STAGE, A, B, M, N, K, m0, n0, (k_first + kt + STAGES - 1) * BK, tid);
        cp_async_commit();
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
            if (g + 1 < GROUPS) {
                load_frag(f[(g + 1) % 2], As + read * A_STAGE, Bs + read * B_STAGE, (g + 1) * KS, tx, ty);
            } else if (kt + 1 < tiles) {
                cp_async_wait<STAGES - 2>();  // this thread's part of tile kt+1 has landed
                __syncthreads();              // ... every thread's, and every read of tile kt is done
                read = read + 1 == STAGES ? 0 : read + 1;
                write = write + 1 == STAGES ? 0 : write + 1;
                load_frag(f[0], As + read * A_STAGE, Bs + read * B_STAGE, 0, tx, ty);
            }
            fma_frag(acc, f[g % 2]);
        }
    }

    // Epilogue: every in-bounds element of the tile is written; rows past M and columns past N are skipped.
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
                    *reinterpret_cast<float4*>(c_row + c) = v;
                }
            }
        }
    }
}
