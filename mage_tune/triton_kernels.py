"""Triton's reference kernels for each family, as `@triton.jit` functions.

They live in their own file because Triton's `ASTSource` reads a kernel's source text back from its module file;
`triton_ref.py` compiles them offline for any arch and hands the result to the census. Argument names are the
census's parameter names: the layer norm's pointers read x, y, scale, bias; the matrix multiply's A, B, C.
"""

import triton
import triton.language as tl

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages). The tutorial's (03-matrix-multiplication) CUDA
# autotune list is written for fp16; for FP32 we keep its tiles, groups, warps and stages and halve BLOCK_K, so one
# pipeline stage holds the same bytes as the tutorial's. Triton allocates num_stages - 1 stages of shared memory:
# the first config takes 96 KB, which fits the 99 KB a block may opt into on sm_86/sm_89.
MATMUL_CONFIGS: tuple[tuple[int, int, int, int, int, int], ...] = (
    (128, 256, 32, 8, 8, 3),
    (64, 256, 16, 8, 4, 4),
    (128, 128, 16, 8, 4, 4),
    (128, 64, 16, 8, 4, 4),
    (64, 128, 16, 8, 4, 4),
    (128, 32, 16, 8, 4, 4),
    (64, 32, 16, 8, 2, 5),
    (32, 64, 16, 8, 2, 5),
)
MATMUL_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")

NORM_SIGNATURE = {
    "x": "*fp32",
    "y": "*fp32",
    "scale": "*fp32",
    "bias": "*fp32",
    "stride": "i32",
    "N": "i32",
    "eps": "fp32",
    "BLOCK": "constexpr",
}
MATMUL_SIGNATURE = {
    **dict.fromkeys(("A", "B", "C"), "*fp32"),
    **dict.fromkeys(("M", "N", "K"), "i32"),
    **dict.fromkeys(("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"), "i32"),
    **dict.fromkeys(("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"), "constexpr"),
}


@triton.jit
def norm_kernel(x, y, scale, bias, stride, N, eps, BLOCK: tl.constexpr):
    """Layer norm forward, one program per row: the whole row (BLOCK >= N) is loaded once and held in registers.

    y[row] = (x[row] - mean) / sqrt(var + eps) * scale + bias, with var the biased variance.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(x + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(v, axis=0) / N
    centered = tl.where(mask, v - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(scale + cols, mask=mask)
    b = tl.load(bias + cols, mask=mask)
    tl.store(y + row * stride + cols, centered * rstd * w + b, mask=mask)


@triton.jit
def matmul_kernel(
    A,
    B,
    C,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """C = A @ B in FP32 with IEEE products (no TF32): one BLOCK_M x BLOCK_N tile of C per program.

    Programs are numbered in groups of GROUP_M tile rows so that consecutive programs share B tiles in L2.
    """
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % group_rows
    tile_n = (pid % per_group) // group_rows

    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = A + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = B + ks[:, None] * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - step * BLOCK_K
        a = tl.load(a_ptrs, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    out_rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = C + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


# The persistent TMA matmul's configs, (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) as MATMUL_KEYS:
# Hopper-sized tiles (BLOCK_K = 64 bf16 is one 128-byte swizzle row). Triton keeps num_stages buffers of A and B plus
# one BLOCK_M × BLOCK_N staging tile of C for the tensor store in shared memory, so the FP32 output drops the configs
# that outgrow the 227 KB a block may opt into (MatmulBF16.tma_reference_configs).
MATMUL_TMA_CONFIGS: tuple[tuple[int, int, int, int, int, int], ...] = (
    (128, 256, 64, 8, 8, 3),
    (128, 128, 64, 8, 8, 4),
    (128, 128, 64, 8, 4, 4),
    (128, 128, 128, 8, 8, 3),
    (128, 64, 64, 8, 4, 4),
    (64, 128, 64, 8, 4, 4),
)


@triton.jit
def matmul_tma_persistent_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    """C = A @ B with FP32 sums, persistent: NUM_SMS programs (the launch gives min(SMs, tiles)) each take tiles
    pid, pid + NUM_SMS, ... in the grouped order of matmul_kernel. Every load and the store go through tensor
    descriptors (TMA on Hopper): A's boxes BLOCK_M × BLOCK_K, B's BLOCK_K × BLOCK_N, C's BLOCK_M × BLOCK_N. The copy
    engine zero-fills what lies past M, N or K and the tensor store clips C's edges, so no masks are needed.
    """
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_group = GROUP_M * tiles_n
    # flatten: one software pipeline over every (tile, k-tile) step, so the copies of a program's next tile start
    # while the current one finishes (the nested loops would drain the pipeline at each tile's end)
    for tile in tl.range(pid, tiles_m * tiles_n, NUM_SMS, flatten=True):
        group = tile // per_group
        first_m = group * GROUP_M
        group_rows = min(tiles_m - first_m, GROUP_M)
        off_m = (first_m + (tile % per_group) % group_rows) * BLOCK_M
        off_n = ((tile % per_group) // group_rows) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(k_tiles):
            a = a_desc.load([off_m, step * BLOCK_K])
            b = b_desc.load([step * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
