"""FP32 matmul C = A·B by 3xTF32 on Hopper's own machinery (sm_90a only): matmul-3xtf32's problem (FP32 A, B and C,
row-major; its inputs, float64 reference, tolerance u·max(√K, 16) and baselines, cuBLAS FP32 and Triton's IEEE
matmul, with cuBLAS TF32 for context only) computed by matmul-bf16's kernel design (tensor copies into a ring of
mbarrier-guarded stages, a producer warpgroup and one or two consumer warpgroups with setmaxnreg, a persistent tile
walk) on `wgmma.mma_async` m64nNk8 with TF32 operands and FP32 accumulation.

The split. Every float x is big = tf32(x) (cvt.rna.tf32.f32: 10 explicit significand bits, round to nearest, ties
away from zero) plus small = tf32(x - big); a·b ≈ a_big·b_big + a_big·b_small + a_small·b_big, the dropped
a_small·b_small being about 2^-22 of the product. `tf32_round` mirrors the device's rounding in numpy and
`emulate_3xtf32` the whole recipe in float64 (the CPU tests hold both against the tolerance).

Operand layouts. TF32 wgmma takes no transpose (PTX ISA "wgmma.mma_async": imm-trans-a/b "valid only with
.f16/.bf16"), so both operands must sit in shared memory K-major. A (M×K, row-major) already is; B (K×N) is not.
A pre-pass kernel of the same module, `tf32_split`, writes per launch into a scratch buffer taken from torch's
caching allocator for that launch: A_big and A_small (M rows), B_big^T and B_small^T (N rows, B transposed through
32×32 shared-memory tiles), every row KP = K rounded up to 4 floats (zeros past K, written by the pre-pass each
launch, so the scratch needs no clearing) so that each row pitch is a multiple of 16 bytes, as a tensor map needs:
no shape is refused. Splitting once in the pre-pass rather than per block in shared memory costs 4 bytes read and
8 written per input element, and keeps the main loop free of conversions. Measured on an H100
(`benchmarks/gpu/split_share.py`, records/h100-2026-12-07d-split-share): at 3072 × 2304 × 3840 the pre-pass moves
247.7 MB in 88.5 µs (2.8 TB/s, about 84 % of the DRAM's peak), 15.7 % of a 562 µs call; the call is 0.49 × cuBLAS
FP32, the main kernel alone (the difference) 0.41 ×. The launch's time includes the pre-pass (the launcher issues
both kernels on torch's stream, and a CUDA graph captures both).

The main kernel (kernels/templates/matmul_3xtf32_sm90.cu.j2; its header comment has the protocol):
  warpgroup 0    setmaxnreg.dec to 40; one thread issues per k-tile four tensor copies, boxes of 32 floats × bm rows
                 (A_big, A_small) and 32 × bn (B_big^T, B_small^T), after waiting for the stage's `empty` barrier
                 and arming `full` with the stage's 2·(bm + bn)·128 bytes
  warpgroups 1.. setmaxnreg.inc to 232 (two consumers) or 240 (one); per k-tile 4 k8 steps × M_SUB m64 tiles × 3
                 wgmma (a_small·b_big, a_big·b_small, a_big·b_big: small terms first), one commit group per k-tile
  chain          the accumulation's restart: the wgmma of `chain` k-tiles (32·chain products of K) sum into `part`
                 from zero (scale-d = 0 at the chain's first wgmma); at the chain's end the consumer waits for all
                 its wgmma (wait_group 0), frees the chain's stages and adds `part` into `total` by ordinary
                 round-to-nearest FP32 adds. Within a chain it keeps one group in flight (wait_group 1) and frees the
                 previous k-tile's stage, as matmul-bf16 does.
  walk           tiles blockIdx.x, + gridDim.x, ... in grouped order (raster); persistent=1 launches min(tiles, SMs)
                 blocks, persistent=0 one per tile
  store          direct from `total` to C: a float2 per row and 8-column group (N even) or two floats, guarded

Facts beyond matmul-bf16's (its docstring lists the descriptor, swizzle, fragment, mbarrier, tensor-map and
setmaxnreg facts this kernel shares):
  - wgmma .tf32 (PTX "wgmma.mma_async"): shapes m64nNk8, N a multiple of 8 up to 256; dtype .f32 only; operands
    d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b (no imm-trans). Both descriptors are K-major.
  - The K-major 128-byte-swizzle layout is the same in bytes for 4-byte elements (cute's GMMA Layout_K_SW128_Atom is
    defined in bits: 8 rows × 1024 bits, i.e. 8 × 32 tf32 or 8 × 64 bf16): SBO 1024, LBO unused, and a k8 step of
    tf32 is 32 bytes into the row, as a k16 step of bf16 is. B^T (N×K) takes the same descriptor as A.
  - The accumulator fragment of m64nNk8 f32 is m64nNk16's (it depends on M and N only).
  - Tensor maps of FLOAT32 (7) with SWIZZLE_128B: the box's inner extent 32 floats = 128 bytes, box rows <= 256.

Register budget. A consumer thread holds two sets of accumulators, part and total, M_SUB × bn / 2 floats each: the
space admits 2 · M_SUB · bn / 2 <= 128, as matmul-bf16 admits one set of 128 (bm=128 over two consumers with
bn <= 128; bm=64 or 128 over one with bn <= 128 or 64; bm=256 over two with bn = 64).

Shared memory. Per stage 2·(bm + bn)·128 bytes and two 8-byte mbarriers, plus 1024 to align the first stage:
64 KB a stage at 128 × 128, so three stages (197,680 B of the 232,448 a block may opt into).

Accuracy. wgmma's accumulation truncates; matmul-3xtf32 measured a chain's drift at about 2^-27 of the result per
product of K for mma.sync on the H200. The space takes twice that (CHAIN_DRIFT, as matmul-bf16 does) and admits a
chain only where its length, min(32·chain, K) products, times 2^-26 is within the tolerance: chain 1 and 2 always,
chain 4 from K = 1024. Measured since (the 488 trials of six archived matmul-3xtf32-sm90 searches, shapes
from 2048³ to 3072 × 2304 × 3840, H100 and H200): relative error 2.8-3.1e-7 at chain 1, 4.7-4.8e-7 at chain 2,
9.1e-7 at chain 4, nearly independent of the shape, each within the tolerance. cuBLAS FP32's error on the same
inputs, the family's accuracy bar, varies more with the shape (6.4e-7 at 3072 × 2304 × 3840, 9.05e-7 at
2560 × 3072 × 2560, 9.1e-7 or more at 2048³): chain 4 passes the bar at some shapes and not at others, which only the
measurement tells, so it stays in the space and a search learns from its failed trials.

The CPU checks that every knob value compiles for sm_90a with HGMMA .TF32, UTMALDG, the mbarrier operations and
USETMAXREG and no spills (tests/kernels/test_matmul_3xtf32_sm90_family.py); tests/kernels/test_gpu_matmul_3xtf32_sm90.py
launches every knob value on a GPU against the float64 reference.

Later steps: the pre-pass fused into the producer (the split written to shared memory by a converting warpgroup),
A split in registers (wgmma's A from registers), TMA multicast of B in clusters, a TMA-store epilogue. A fused split
saves about the pre-pass's share (above), and moves its conversion's shared-memory reads and writes into a main
loop whose wgmma already read three operand pairs from shared memory per k8 step: `benchmarks/gpu/fp32_profile.sh`
reads how busy the banks and the tensor pipe are (`mage-tune counters`), which says whether there is room.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.arch import Arch
from mage_tune.cuda_driver import Driver
from mage_tune.errors import ConfigError
from mage_tune.kernels.base import SCALAR_TYPES, Baseline, Config, CudaFamily, Knob, Launch, Scalar, Shape, shape_words
from mage_tune.kernels.matmul_3xtf32 import FAMILY as PROBLEM
from mage_tune.kernels.matmul_bf16 import (
    FUNC_MAX_DYNAMIC_SHARED,
    TENSOR_MAP_ALIGN,
    TENSOR_MAP_BYTES,
    encode_tensor_map,
    forget_oldest,
    wgmma_refusal,
)
from mage_tune.ptx_parts import entry_params

FLOAT = 4  # bytes
BK = 32  # k-tile depth: one 128-byte swizzle row of FP32 (TF32) values
SWIZZLE_ATOM = 1024  # bytes: 8 rows of 128; tile bases are aligned to it
ROW_BYTES = 128
BARRIER_BYTES = 8
WARPGROUP = 128
MAX_ACCUMULATORS = 128  # FP32 accumulators per consumer thread (part and total together)
PRODUCER_REGISTERS = 40
REGISTER_FILE = 65536
MAX_REGISTERS = 255
CHAIN_DRIFT = 2.0**-26  # twice matmul-3xtf32's measured 2^-27 per product (mma.sync's): a margin kept for wgmma
MAPS = 4  # A_big, A_small, B_big^T, B_small^T
SPLIT_KERNEL = "tf32_split"
SPLIT_TILE = 32  # the pre-pass's tiles: 32 × 32 floats
SPLIT_THREADS = 256
ROW_ALIGN = 4  # floats: scratch rows are padded to a multiple of 16 bytes
TF32_DROPPED_BITS = 13  # FP32 keeps 23 explicit significand bits, TF32 10


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- TF32 in numpy ------------------------------------------------------------------------------------------------


def tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded as cvt.rna.tf32.f32 rounds them (PTX "cvt": .rna, round to nearest, ties away from
    zero) and returned as float32 with the low 13 significand bits zero; infinities and NaN pass through. Adding half
    of the dropped bits' unit to the magnitude's bits and clearing them rounds ties away (sign and magnitude)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    half = np.uint32(1 << (TF32_DROPPED_BITS - 1))
    keep = np.uint32((0xFFFFFFFF << TF32_DROPPED_BITS) & 0xFFFFFFFF)
    rounded = (bits + half) & keep
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, rounded).view(np.float32)


def tf32_split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(big, small) as the pre-pass writes them: big = tf32(x), small = tf32(x - big), the subtraction in FP32."""
    x = np.asarray(x, dtype=np.float32)
    big = tf32_round(x)
    return big, tf32_round((x - big).astype(np.float32))


def emulate_3xtf32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The three products of the split operands summed in float64: the recipe's error without the accumulation's."""
    a_big, a_small = (p.astype(np.float64) for p in tf32_split(a))
    b_big, b_small = (p.astype(np.float64) for p in tf32_split(b))
    return a_big @ b_big + a_big @ b_small + a_small @ b_big


# --- the family ---------------------------------------------------------------------------------------------------


class Matmul3xTF32SM90(CudaFamily):
    name = "matmul-3xtf32-sm90"
    template = "matmul_3xtf32_sm90.cu.j2"
    kernel_name = "matmul_3xtf32_sm90"
    arch_features = "a"  # an sm_90 device runs it as sm_90a ("auto" arch, run-time choices)
    param_names = ("A", "B", "C")  # A and B reach the main kernel as the tensor maps of their splits
    input_dims: ClassVar[dict[str, tuple[str, ...]]] = {"A": ("m", "k"), "B": ("k", "n")}
    scalar_params = (Scalar("M", "int"), Scalar("N", "int"), Scalar("K", "int"))
    dims = ("m", "n", "k")
    default_dims: ClassVar[dict[str, int]] = {"m": 4096, "n": 4096, "k": 4096}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows of A and C", "n": "columns of B and C", "k": "the inner size"}
    baselines = PROBLEM.baselines
    tolerance = PROBLEM.tolerance
    mma_passes = 3  # big·big, big·small, small·big: three TF32 products for each FP32 one
    # Defaults first: 128 × 128 over two consumers (64 + 64 accumulators each), three stages (192 KB), chains of two
    # k-tiles, persistent, grouped by 8 tile rows.
    knobs = (
        Knob("bm", (128, 64, 256), "block tile rows: 64-row wgmma tiles, shared among the consumer warpgroups"),
        Knob("bn", (128, 64), "block tile columns: the N of each wgmma"),
        Knob("bk", (BK,), "k-tile depth: 32 floats, one 128-byte swizzled row (the only depth of this layout)"),
        Knob("stages", (3, 2, 4, 6), "shared-memory stages in the ring: tensor copies in flight ahead of wgmma"),
        Knob("consumers", (2, 1), "consumer warpgroups (block = 128 × (1 + consumers) threads)"),
        Knob(
            "chain",
            (2, 1, 4),
            "k-tiles per truncating wgmma accumulation chain (32 products each), each chain then added to the FP32 "
            "total rounded to nearest; longer chains wait for the tensor cores less often and drift more",
        ),
        Knob(
            "raster",
            (8, 0, 4),
            "tile rows per rasterization group (0: row-major tile order): blocks resident together share tiles in L2",
            free=True,
        ),
        Knob("persistent", (1, 0), "1: min(tiles, SMs) blocks walk the tiles; 0: one block per tile", free=True),
    )

    # --- the space ---------------------------------------------------------------------------------------------
    @staticmethod
    def threads(config: Config) -> int:
        return WARPGROUP * (1 + config["consumers"])

    @staticmethod
    def m_sub(config: Config) -> int:
        """m64 wgmma tiles each consumer warpgroup issues per k8 step and product."""
        return config["bm"] // (64 * config["consumers"])

    def accumulators(self, config: Config) -> int:
        """FP32 accumulators per consumer thread: part and total, M_SUB tiles of 64 × bn over 128 threads each."""
        return 2 * self.m_sub(config) * config["bn"] // 2

    @staticmethod
    def stage_bytes(config: Config) -> int:
        """One stage: A_big and A_small (bm rows of 128 bytes), B_big^T and B_small^T (bn rows)."""
        return 2 * (config["bm"] + config["bn"]) * ROW_BYTES

    @staticmethod
    def shared_bytes(config: Config) -> int:
        """Dynamic shared memory: the stages, their two mbarriers each, and 1024 bytes to align the first stage."""
        return SWIZZLE_ATOM + config["stages"] * (Matmul3xTF32SM90.stage_bytes(config) + 2 * BARRIER_BYTES)

    def bulk_bytes_in_flight(self, config: Config) -> int:
        """Every stage filling: the producer's four tensor copies a k-tile (A_big, A_small, B_big^T, B_small^T)."""
        return config["stages"] * Matmul3xTF32SM90.stage_bytes(config)

    @staticmethod
    def consumer_registers(config: Config) -> int:
        """What setmaxnreg.inc asks for each consumer thread: the block's share once the producer gave up its own."""
        return 232 if config["consumers"] == 2 else 240

    @staticmethod
    def launch_registers(config: Config) -> int:
        """Registers per thread at launch as ptxas 13 sets them with setmaxnreg (matmul-bf16's rule, held by the
        tests): the consumers' count capped at 65536 / threads rounded down to 8 and at 255."""
        cap = min(MAX_REGISTERS, REGISTER_FILE // Matmul3xTF32SM90.threads(config) // 8 * 8)
        return min(cap, Matmul3xTF32SM90.consumer_registers(config))

    @staticmethod
    def chain_products(config: Config, shape: Shape) -> int:
        """Products of K one truncating chain sums: chain k-tiles of 32, or all of K where that is shorter."""
        return min(config["chain"] * BK, shape["k"])

    @staticmethod
    def tiles(config: Config, shape: Shape) -> int:
        return _cdiv(shape["m"], config["bm"]) * _cdiv(shape["n"], config["bn"])

    def refusal(self, shape: Shape, arch: Arch) -> list[str]:
        return wgmma_refusal(arch)

    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        c, out = config, self.refusal(shape, arch)
        if c["bm"] % (64 * c["consumers"]):
            out.append(
                f"bm={c['bm']} does not split into 64-row wgmma tiles over {c['consumers']} consumer warpgroups "
                f"(a multiple of {64 * c['consumers']})"
            )
        elif self.accumulators(c) > MAX_ACCUMULATORS:
            out.append(
                f"each consumer thread would hold {self.accumulators(c)} FP32 accumulators (part and total, "
                f"2 × (bm / consumers / 64) × bn / 2), over the {MAX_ACCUMULATORS} that fit its "
                f"{self.consumer_registers(c)} registers"
            )
        pool = self.threads(c) * self.launch_registers(c)
        wanted = WARPGROUP * (PRODUCER_REGISTERS + c["consumers"] * self.consumer_registers(c))
        if wanted > pool:
            out.append(
                f"setmaxnreg would hand out {wanted} registers, over the {pool} the block launches with "
                f"({self.threads(c)} threads × {self.launch_registers(c)})"
            )
        smem, limit = self.shared_bytes(c), arch.smem_per_block_optin
        if smem > limit:
            out.append(
                f"shared memory stages × 2 × (bm + bn) × 128 bytes, with barriers and alignment, = {smem} B exceeds "
                f"the {limit} B a block may opt into on {arch.name}"
            )
        products, bound = self.chain_products(c, shape), self.tolerance_for(shape)
        if products * CHAIN_DRIFT > bound:
            out.append(
                f"chain={c['chain']} sums {products} products in one truncating wgmma chain: its drift, about "
                f"{products * CHAIN_DRIFT:.1e}, is over FP32's bound {bound:.1e} for K={shape['k']}; use a shorter "
                "chain"
            )
        return out

    def constraint_text(self) -> list[str]:
        return [
            "sm_90a only: wgmma and setmaxnreg are arch-specific Hopper instructions (sm_80, sm_90 and Blackwell are "
            "refused)",
            "bm is a multiple of 64 × consumers: each consumer warpgroup issues whole m64 wgmma tiles",
            f"2 × (bm / consumers / 64) × bn / 2 <= {MAX_ACCUMULATORS} FP32 accumulators per consumer thread (the "
            "chain's and the total's)",
            f"setmaxnreg: 128 × ({PRODUCER_REGISTERS} + consumers × 232 or 240) registers <= threads × the registers "
            "the block launches with: always true in this space",
            "shared memory 1024 + stages × (2 × (bm + bn) × 128 + 16) bytes <= the arch's opt-in limit (227 KB)",
            "a chain's drift, min(32 × chain, K) × 2^-26, within the tolerance u·max(√K, 16): chain 1 and 2 always, "
            "4 from K = 1024",
            "any M, N, K: the pre-pass pads the split rows to a multiple of 4 floats for the tensor maps",
        ]

    def launch(self, config: Config, shape: Shape, arch: Arch) -> Launch:
        blocks = self.tiles(config, shape)
        if config["persistent"]:
            blocks = min(blocks, arch.sms)
        return Launch(blocks, self.threads(config), self.shared_bytes(config))

    def template_vars(self, config: Config, shape: Shape) -> dict:
        c = config
        regs = c["bn"] // 2
        names = [f"%{i}" for i in range(regs)]
        rows = [", ".join(names[i : i + 8]) for i in range(0, regs, 8)]
        last = len(rows) - 1
        acc_lines = [("{" if i == 0 else "") + row + ("}," if i == last else ",") for i, row in enumerate(rows)]
        operands = [f'"+f"(d[{i}])' for i in range(regs)]
        acc_operands = [", ".join(operands[i : i + 6]) for i in range(0, regs, 6)]
        acc_operands = [line + ("," if i < len(acc_operands) - 1 else "") for i, line in enumerate(acc_operands)]
        return {
            **c,
            "label": ",".join(f"{k}={v}" for k, v in c.items()),
            "acc_regs": regs,
            "acc_lines": acc_lines,
            "acc_operands": acc_operands,
            "c_pair": shape["n"] % 2 == 0,  # float2 stores of C: each pair 8-byte aligned
            "producer_registers": PRODUCER_REGISTERS,
            "consumer_registers": self.consumer_registers(c),
        }

    def check_parameters(self, ptx: str, shape: Shape) -> None:
        """The main kernel takes four tensor maps (128-byte structs), C's pointer and M, N, K as int; the pre-pass
        takes A's, B's and the scratch's pointers and M, N, K, KP as int."""
        ints = [(SCALAR_TYPES[s.ctype][1], SCALAR_TYPES[s.ctype][0]) for s in self.scalar_params]
        pointer = ("int", 8)
        expected = {
            self.kernel_name: [("bytes", TENSOR_MAP_BYTES)] * MAPS + [pointer, *ints],
            SPLIT_KERNEL: [pointer] * 3 + [*ints, ints[0]],
        }
        for kernel, wanted in expected.items():
            params = entry_params(ptx, kernel)
            if params is None:
                raise ConfigError(f"{self.name}: the compiled module has no kernel {kernel!r}")
            got = [(kind, size) for _, kind, size in params]
            if got != wanted:
                raise ConfigError(f"{self.name}: kernel {kernel} takes {got}; the launcher passes {wanted}")

    # --- the problem: matmul-3xtf32's -------------------------------------------------------------------------
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return PROBLEM.make_inputs(shape, rng)

    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        return PROBLEM.reference(inputs, shape)

    def output_shape(self, shape: Shape) -> tuple[int, ...]:
        return PROBLEM.output_shape(shape)

    def scalar_args(self, shape: Shape) -> tuple:
        return (shape["m"], shape["n"], shape["k"])

    def tolerance_for(self, shape: Shape) -> float:
        return PROBLEM.tolerance_for(shape)

    def accuracy_bar(self, shape: Shape) -> str | None:
        return PROBLEM.accuracy_bar(shape)

    def bytes_moved(self, shape: Shape) -> int:
        return PROBLEM.bytes_moved(shape)

    def flops(self, shape: Shape) -> int:
        return PROBLEM.flops(shape)

    def check_shape(self, shape: Shape) -> None:
        PROBLEM.check_shape(shape)
        scratch = 2 * (shape["m"] + shape["n"]) * padded_k(shape["k"])
        if scratch > 4 * self.max_elements:
            raise ConfigError(
                f"the split operands at {shape_words(shape)} would hold {scratch} floats, over {4 * self.max_elements}"
            )

    # --- baselines and launching ----------------------------------------------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        return PROBLEM.baseline_kernels(shape)

    def reference_configs(self) -> list[dict]:
        return PROBLEM.reference_configs()

    def reference_kernels(self, shape: Shape, arch: Arch, specialize: bool = True, **options) -> list:
        return PROBLEM.reference_kernels(shape, arch.plain, specialize, **options)

    def launcher(self, job, shape: Shape):
        if job.kind == "variant":
            return SplitLauncher(job, shape, Driver(), _torch_stream, _torch_context, _torch_scratch)
        return PROBLEM.launcher(job, shape)


# --- the GPU side: the scratch, the tensor maps and the two launches --------------------------------------------


def padded_k(k: int) -> int:
    """Floats per row of the split operands: K rounded up to a 16-byte multiple, as a tensor map's pitch must be."""
    return _cdiv(k, ROW_ALIGN) * ROW_ALIGN


def scratch_layout(shape: Shape) -> dict[str, tuple[int, int]]:
    """Each split operand's (byte offset into the scratch, rows), in the order the pre-pass writes them; every row
    holds padded_k(K) floats."""
    m, n, kp = shape["m"], shape["n"], padded_k(shape["k"])
    out, offset = {}, 0
    for name, rows in (("A_big", m), ("A_small", m), ("B_big_t", n), ("B_small_t", n)):
        out[name] = (offset, rows)
        offset += rows * kp * FLOAT
    return out


def scratch_bytes(shape: Shape) -> int:
    return 2 * (shape["m"] + shape["n"]) * padded_k(shape["k"]) * FLOAT


def split_grid(shape: Shape) -> int:
    """The pre-pass's blocks: one per 32 × 32 tile of A (M × KP) and of B^T (N × KP)."""
    k_tiles = _cdiv(padded_k(shape["k"]), SPLIT_TILE)
    return (_cdiv(shape["m"], SPLIT_TILE) + _cdiv(shape["n"], SPLIT_TILE)) * k_tiles


_torch_stream = gpu.raw_stream  # torch's current stream, the cheap way (what a launch is enqueued on)


def _torch_context() -> None:
    """Make torch's CUDA context current on this thread (a synchronize initializes the runtime's state for it)."""
    gpu.torch().cuda.synchronize()


def _torch_scratch(nbytes: int) -> tuple[object, int]:
    """A device buffer of nbytes from torch's caching allocator on the current device and stream (its blocks are
    512-byte aligned; under graph capture, from the graph's private pool): (the tensor, its address)."""
    torch = gpu.torch()
    buffer = torch.empty(max(nbytes, 16), dtype=torch.uint8, device="cuda")
    return buffer, buffer.data_ptr()


class SplitLauncher:
    """Launches one variant: its cubin loaded through the driver, then per call a scratch of scratch_bytes(shape)
    from `allocate`, the pre-pass (A, B, scratch, M, N, K, KP) and the main kernel (four tensor maps over the
    scratch, C, M, N, K) on one stream.

    The scratch lives for one call only: torch's caching allocator takes it back once both launches are enqueued and
    hands the block out again on the same stream only, so after these kernels (stream order), and a launcher keeps no
    memory between calls however many shapes an operator meets. Under CUDA graph capture torch satisfies the
    allocation from the graph's private pool, which stays reserved for the graph's replays. The maps are encoded once
    per scratch address (the allocator mostly returns the same block), kept in a bounded cache."""

    def __init__(self, job, shape: Shape, driver: Driver, stream_of, prepare, allocate: Callable[[int], tuple]):
        self.job, self.shape, self.driver, self.stream_of = job, dict(shape), driver, stream_of
        self.allocate = allocate  # nbytes -> (the buffer, kept alive through the call; its device address)
        self.scratch_nbytes = scratch_bytes(shape)
        prepare()
        self.driver.call("cuInit", 0)
        self.module = ctypes.c_void_p()
        self.image = ctypes.create_string_buffer(job.cubin, len(job.cubin))  # kept: the module is read from it
        self.driver.call("cuModuleLoadData", ctypes.byref(self.module), self.image)
        self.function = self._function(job.kernel_name)
        self.split = self._function(SPLIT_KERNEL)
        if job.dynamic_shared:
            self.driver.call("cuFuncSetAttribute", self.function, FUNC_MAX_DYNAMIC_SHARED, job.dynamic_shared)
        self.tensor_maps: dict[int, tuple] = {}  # by scratch address: (storage, the four maps' addresses)
        self.arguments: dict[tuple[int, int, int, int], tuple] = {}  # by (A, B, C, scratch)

    def _function(self, name: str) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self.driver.call("cuModuleGetFunction", ctypes.byref(function), self.module, name.encode())
        return function

    def encode(self, target: int, address: int, rows: int, columns: int, box_rows: int) -> None:
        encode_tensor_map(self.driver, target, address, rows, columns, box_rows, "float32")

    def maps(self, scratch: int) -> tuple:
        """The four tensor maps over a scratch at this address, encoded at its first use: (storage, addresses)."""
        found = self.tensor_maps.get(scratch)
        if found is None:
            if scratch % 16:
                raise ConfigError(f"the scratch at {scratch:#x} is not 16-byte aligned, as a tensor map needs")
            forget_oldest(self.tensor_maps)
            storage = ctypes.create_string_buffer(MAPS * TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN)
            first = ctypes.addressof(storage) + (-ctypes.addressof(storage)) % TENSOR_MAP_ALIGN
            addresses = [first + i * TENSOR_MAP_BYTES for i in range(MAPS)]
            config, kp = self.job.config, padded_k(self.shape["k"])
            box_rows = (config["bm"], config["bm"], config["bn"], config["bn"])
            for target, (offset, rows), box in zip(
                addresses, scratch_layout(self.shape).values(), box_rows, strict=True
            ):
                self.encode(target, scratch + offset, rows, kp, box)
            found = self.tensor_maps[scratch] = (storage, addresses)
        return found

    def parameters(self, a: int, b: int, c: int, scratch: int) -> tuple:
        """Both kernels' parameter lists for these buffers (packed once per buffer set): (storage, split's void*[],
        main's void*[]). The storage holds the maps too: they outlive their eviction from `tensor_maps`."""
        key = (a, b, c, scratch)
        found = self.arguments.get(key)
        if found is None:
            forget_oldest(self.arguments)
            maps, map_addresses = self.maps(scratch)
            m, n, k = self.shape["m"], self.shape["n"], self.shape["k"]
            dims = [ctypes.c_int(v) for v in (m, n, k, padded_k(k))]
            split = [ctypes.c_uint64(a), ctypes.c_uint64(b), ctypes.c_uint64(scratch), *dims]
            c_pointer = ctypes.c_uint64(c)
            split_pointers = (ctypes.c_void_p * len(split))(*(ctypes.addressof(v) for v in split))
            main = [*map_addresses, ctypes.addressof(c_pointer), *(ctypes.addressof(v) for v in dims[:3])]
            main_pointers = (ctypes.c_void_p * len(main))(*main)
            found = self.arguments[key] = ((split, c_pointer, maps), split_pointers, main_pointers)
        return found

    def __call__(self, bufs: dict, main: bool = True) -> None:
        """Both launches on torch's stream; main=False launches the pre-pass alone (to time its share of a call)."""
        scratch, address = self.allocate(self.scratch_nbytes)
        a, b, c = bufs["A"].data_ptr(), bufs["B"].data_ptr(), bufs["__out__"].data_ptr()
        _, split_args, main_args = self.parameters(a, b, c, address)
        stream = ctypes.c_void_p(self.stream_of())
        grid = (split_grid(self.shape), 1, 1)
        self.driver.call("cuLaunchKernel", self.split, *grid, SPLIT_THREADS, 1, 1, 0, stream, split_args, None)
        if main:
            job = self.job
            self.driver.call(
                "cuLaunchKernel", self.function, *job.grid, *job.block, job.dynamic_shared, stream, main_args, None
            )
        del scratch  # the launches are enqueued: the block goes back to the allocator (see the class docstring)


FAMILY = Matmul3xTF32SM90()
