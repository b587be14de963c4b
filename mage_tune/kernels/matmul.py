"""FP32 matmul C = A·B (row-major M×K times K×N): block tiles, per-thread micro-tiles, a cp.async pipeline.

The space spans the classic SIMT SGEMM choices: block tile (bm, bn, bk), micro-tile (tm, tn; the thread count is
derived), pipeline depth (stages), copy widths of A and B (a_vec, b_vec, in bytes), whether and how A is transposed on
its way into shared memory (a_trans: by cp.async, or through registers), row padding against bank conflicts (pad),
float4 fragment reads (smem_vec) and register double buffering with one barrier per k-tile (pipe), how much of a
k-tile one loop body holds (k_unroll), the order blocks run in (raster: grouped rasterization for L2 reuse) and how
many blocks share one C tile's K range (split_k: serial split-K, for grids too small to fill the GPU).
Every tile copy of B (and of A unless a_trans=2) is a cp.async; M, N and K are runtime arguments, so any shape runs
(edges zero-fill and are guarded).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.arch import Arch
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels.base import Baseline, Config, CudaFamily, Knob, Launch, Shape, shape_words
from mage_tune.triton_ref import compile_jit

FLOAT = 4  # bytes
MAX_ACCUMULATORS = 128  # per thread: with the fragments, about what fits in 255 registers without spilling


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# The block-order knobs both matmul families share (the template pieces in matmul_parts.cu.j2).
RASTER = Knob(
    "raster",
    (0, 4, 8, 16),
    "block rows per rasterization group (0: row-major block order): blocks resident together share tiles in L2",
    free=True,
)
SPLIT_K = Knob(
    "split_k",
    (1, 2, 3, 4, 8),
    "blocks per C tile along K (serial split-K: slices add into C in a fixed order): more blocks for grids under two "
    "waves",
    free=True,
)


def split_tiles(config: Config, shape: Shape) -> int:
    """Split-K's turn counters, one per C tile: a power of two at least the grid, so near shapes share a source."""
    return 1 << (_cdiv(shape["m"], config["bm"]) * _cdiv(shape["n"], config["bn"]) - 1).bit_length()


class Matmul(CudaFamily):
    name = "matmul"
    template = "matmul.cu.j2"
    # The first value of each domain is the default a partial --set completes with; together they are the fastest
    # config of 164 sampled and timed on an H200 at 4096³ (41.6 TFLOP/s, cuBLAS FP32 51.3). The rest ascend.
    knobs = (
        Knob("bm", (64, 32, 128, 256), "block tile rows (of C and A)"),
        Knob("bn", (64, 32, 128, 256), "block tile columns (of C and B)"),
        Knob("bk", (32, 8, 16), "k-tile depth: the K extent of one shared-memory tile"),
        Knob("tm", (8, 2, 4, 16), "micro-tile rows per thread"),
        Knob("tn", (8, 2, 4, 16), "micro-tile columns per thread (threads = bm*bn/(tm*tn))"),
        Knob("stages", (3, 1, 2, 4), "shared-memory buffers; stages-1 tile copies stay in flight while one computes"),
        Knob("a_vec", (16, 4, 8), "bytes per cp.async of A"),
        Knob("b_vec", (16, 4, 8), "bytes per cp.async of B"),
        Knob(
            "a_trans",
            (0, 1, 2),
            "A transposed into shared memory as As[bk][bm]: 1 by 4-byte cp.async, 2 through registers (16-byte "
            "loads, then four 4-byte shared stores, after the current tile's FMAs)",
        ),
        Knob("pad", (4, 0), "floats of padding per shared row of A, against bank conflicts"),
        Knob("smem_vec", (1, 0), "1: float4 fragment reads from shared memory (LDS.128)"),
        Knob(
            "pipe",
            (0, 1),
            "1: one barrier per k-tile and fragments double-buffered in registers, the next tile's first fragments "
            "read before the current tile's last FMAs",
        ),
        Knob("k_unroll", (0, 4, 8), "k steps per unrolled loop body (0: the whole k-tile); pipe=0 only"),
        RASTER,
        SPLIT_K,
    )
    dims = ("m", "n", "k")
    default_dims: ClassVar[dict[str, int]] = {"m": 1024, "n": 1024, "k": 1024}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows of A and C", "n": "columns of B and C", "k": "the inner size"}
    kernel_name = "matmul"
    param_names = ("A", "B", "C")
    input_dims: ClassVar[dict[str, tuple[str, ...]]] = {"A": ("m", "k"), "B": ("k", "n")}
    baselines = ("triton", "torch")
    tolerance = 1e-4  # FP32 sums over K products: the bound for matmul

    # --- the space ---------------------------------------------------------------------------------------------
    @staticmethod
    def threads(config: Config) -> int:
        return config["bm"] * config["bn"] // (config["tm"] * config["tn"])

    @staticmethod
    def shared_floats(config: Config) -> tuple[int, int]:
        """Floats in one stage's A buffer and B buffer (padding included)."""
        bm, bn, bk, pad = config["bm"], config["bn"], config["bk"], config["pad"]
        a = bk * (bm + pad) if config["a_trans"] else bm * (bk + pad)
        return a, bk * bn

    def shared_bytes(self, config: Config) -> int:
        return config["stages"] * sum(self.shared_floats(config)) * FLOAT

    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        c = config
        out = []
        threads = self.threads(c)
        if not (32 <= threads <= 1024 and threads % 32 == 0):
            out.append(f"threads = bm*bn/(tm*tn) = {threads} must be a multiple of 32 in 32..1024")
        if c["tm"] * c["tn"] > MAX_ACCUMULATORS:
            out.append(f"tm*tn = {c['tm'] * c['tn']} accumulators exceed {MAX_ACCUMULATORS} per thread")
        if c["k_unroll"] and (c["pipe"] or c["k_unroll"] >= c["bk"]):
            out.append(f"k_unroll={c['k_unroll']} needs pipe=0 and k_unroll < bk={c['bk']} (else: full unroll)")
        if c["pipe"] and c["stages"] < 2:
            out.append("pipe=1 needs stages >= 2 (tile kt+1 lands in its own buffer while tile kt is read)")
        if c["a_trans"] == 1 and c["a_vec"] != 4:
            out.append(f"a_trans=1 needs a_vec=4 (a transposing copy scatters single floats), got a_vec={c['a_vec']}")
        if c["a_trans"] == 2 and (c["a_vec"] != 16 or c["pipe"] or c["stages"] < 2):
            out.append(
                "a_trans=2 needs a_vec=16 (16-byte loads into registers), pipe=0 and stages >= 2 (the registers are "
                f"stored into the buffer of a later tile), got a_vec={c['a_vec']}, pipe={c['pipe']}, "
                f"stages={c['stages']}"
            )
        if c["bk"] % (c["a_vec"] // FLOAT) or c["bn"] % (c["b_vec"] // FLOAT):
            out.append("bk must be a multiple of a_vec/4 and bn of b_vec/4")
        if c["smem_vec"] and c["tn"] % 4:
            out.append(f"smem_vec=1 needs tn % 4 == 0 (float4 runs of B columns), got tn={c['tn']}")
        if c["smem_vec"] and c["a_trans"] and c["tm"] % 4:
            out.append(f"smem_vec=1 with a_trans>0 needs tm % 4 == 0 (float4 runs of A rows), got tm={c['tm']}")
        return out + self.copy_violations(c, shape, arch)

    def copy_violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        """What both matmul families ask of their copies: rows of A and B aligned to the copy widths, and the
        stages' buffers within the arch's shared memory."""
        c, out = config, []
        if (shape["k"] * FLOAT) % c["a_vec"]:
            out.append(f"a_vec={c['a_vec']} needs K*4 divisible by {c['a_vec']} (row starts of A), K={shape['k']}")
        if (shape["n"] * FLOAT) % c["b_vec"]:
            out.append(f"b_vec={c['b_vec']} needs N*4 divisible by {c['b_vec']} (row starts of B), N={shape['n']}")
        limit = arch.smem_per_block_optin
        if self.shared_bytes(c) > limit:
            out.append(f"shared memory stages*(A+B tiles)*4 = {self.shared_bytes(c)} B exceeds {limit} B on {arch}")
        return out

    def constraint_text(self) -> list[str]:
        return [
            "threads = bm*bn/(tm*tn) is derived and must be a multiple of 32 in 32..1024",
            f"tm*tn <= {MAX_ACCUMULATORS} accumulators per thread",
            "pipe=1 needs stages >= 2",
            "k_unroll > 0 needs pipe=0 (the register double buffer is indexed by the unrolled group) and k_unroll < bk",
            "a_trans=1 needs a_vec=4: the transposing copy scatters single floats",
            "a_trans=2 needs a_vec=16, pipe=0 and stages >= 2: A's 16-byte loads wait in registers for a later tile's "
            "buffer",
            "K*4 % a_vec == 0 and N*4 % b_vec == 0, so every row of A and B starts aligned to its copy width",
            "bk % (a_vec/4) == 0 and bn % (b_vec/4) == 0 (always true in these domains)",
            "smem_vec=1 needs tn % 4 == 0 (B fragments read as float4 runs of columns) and, when a_trans>0, "
            "tm % 4 == 0 (A fragments as float4 runs of rows); with a_trans=0 A is read as float4 along k",
            "shared memory stages * (A tile + pad, B tile) * 4 bytes <= the arch's opt-in limit (227 KB on sm_90)",
            "copies that do not divide evenly among the threads are guarded, so they constrain nothing",
        ]

    def launch(self, config: Config, shape: Shape, arch: Arch) -> Launch:
        grid = (_cdiv(shape["n"], config["bn"]), _cdiv(shape["m"], config["bm"]), config["split_k"])
        return Launch(grid, self.threads(config), self.shared_bytes(config))

    def template_vars(self, config: Config, shape: Shape) -> dict:
        c = config
        a_floats, b_floats = self.shared_floats(c)
        a_vec, b_vec = c["a_vec"] // FLOAT, c["b_vec"] // FLOAT
        # Contiguous runs in the micro-tile: float4 reads need 4 adjacent rows (A transposed) or columns (B).
        a_frag_vec = 4 if c["smem_vec"] and c["a_trans"] else 1
        b_frag_vec = 4 if c["smem_vec"] else 1
        return {
            **c,
            "label": ",".join(f"{k}={v}" for k, v in c.items()),
            "threads": self.threads(c),
            "lda": c["bm"] + c["pad"] if c["a_trans"] else c["bk"] + c["pad"],
            "ldb": c["bn"],
            "a_stage_floats": a_floats,
            "b_stage_floats": b_floats,
            "a_vec_floats": a_vec,
            "b_vec_floats": b_vec,
            "a_copies": c["bm"] * c["bk"] // a_vec,
            "b_copies": c["bk"] * c["bn"] // b_vec,
            "a_frag_vec": a_frag_vec,
            "b_frag_vec": b_frag_vec,
            # Untransposed A with smem_vec reads one float4 per row covering four k steps.
            "k_step": 4 if c["smem_vec"] and not c["a_trans"] else 1,
            # float4 stores of C need each run 16-byte aligned, hence rows of C a multiple of 4 floats.
            "c_store_vec": b_frag_vec == 4 and shape["n"] % 4 == 0,
            "max_split_tiles": split_tiles(c, shape),
        }

    # --- correctness and cost ---------------------------------------------------------------------------------
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        m, n, k = shape["m"], shape["n"], shape["k"]
        return {
            "A": rng.uniform(-1.0, 1.0, size=(m, k)).astype(np.float32),
            "B": rng.uniform(-1.0, 1.0, size=(k, n)).astype(np.float32),
        }

    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        return inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)

    def output_shape(self, shape: Shape) -> tuple[int, ...]:
        return (shape["m"], shape["n"])

    def scalar_args(self, shape: Shape) -> tuple:
        return (np.int32(shape["m"]), np.int32(shape["n"]), np.int32(shape["k"]))

    def bytes_moved(self, shape: Shape) -> int:
        m, n, k = shape["m"], shape["n"], shape["k"]
        return FLOAT * (m * k + k * n + m * n)

    def flops(self, shape: Shape) -> int:
        return 2 * shape["m"] * shape["n"] * shape["k"]

    def serial_turns(self, config: Config) -> int:
        """A tile's split_k slices add into C one after another."""
        return config["split_k"] - 1

    def check_shape(self, shape: Shape) -> None:
        """A, B and C each within max_elements."""
        m, n, k = shape["m"], shape["n"], shape["k"]
        for name, size in (("A", m * k), ("B", k * n), ("C", m * n)):
            if size > self.max_elements:
                where = shape_words(shape)
                raise ConfigError(f"matrix {name} at {where} would hold {size} elements, over {self.max_elements}")

    # --- baselines and comparison ---------------------------------------------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        """Triton's FP32 matmul at each of its configs, and torch.matmul (cuBLAS FP32, TF32 off)."""
        configs = self.reference_configs()
        triton = [Baseline("triton[" + ",".join(f"{k}={v}" for k, v in c.items()) + "]", "triton", c) for c in configs]
        return [*triton, Baseline("torch.matmul (cuBLAS FP32)", "torch")]

    def launcher(self, job, shape: Shape):
        m, n, k = shape["m"], shape["n"], shape["k"]
        if job.kind == "torch":
            torch = gpu.torch()
            return lambda bufs: torch.matmul(bufs["A"], bufs["B"], out=bufs["__out__"])
        if job.kind != "triton":
            return None
        matmul_kernel = gpu.triton_kernels().matmul_kernel
        consts = {key: job.config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        grid = (_cdiv(m, consts["BLOCK_M"]) * _cdiv(n, consts["BLOCK_N"]),)
        options = {"num_warps": job.config["num_warps"], "num_stages": job.config["num_stages"]}

        def launch(bufs):
            matmul_kernel[grid](bufs["A"], bufs["B"], bufs["__out__"], m, n, k, k, 1, n, 1, n, 1, **consts, **options)

        return launch

    def reference_kernels(self, shape: Shape, arch: Arch, specialize: bool = True, **options) -> list:
        """Triton's FP32 matmul (GROUP_M swizzle, IEEE products) at options["config"] (a dict of MATMUL_KEYS) or at
        every config of MATMUL_CONFIGS; options["num_warps"] overrides each config's."""
        configs = [dict(options["config"])] if options.get("config") else self.reference_configs()
        signature = dict(gpu.triton_kernels().MATMUL_SIGNATURE)
        return triton_matmul_kernels(shape, arch, configs, signature, options.get("num_warps"), specialize)

    def reference_configs(self) -> list[dict]:
        """The Triton configs `compare --config INDEX` picks from."""
        tk = gpu.triton_kernels()
        return [dict(zip(tk.MATMUL_KEYS, c, strict=True)) for c in tk.MATMUL_CONFIGS]


def triton_matmul_kernels(
    shape: Shape, arch: Arch, configs: list[dict], signature: dict, num_warps: int | None, specialize: bool
) -> list:
    """Triton's tutorial matmul (GROUP_M swizzle) compiled offline at each config (a dict of MATMUL_KEYS), pointers
    typed by `signature`, row-major strides, one program per output tile; `num_warps` overrides each config's."""
    tk = gpu.triton_kernels()
    m, n, k = shape["m"], shape["n"], shape["k"]
    out = []
    for cfg in configs:
        missing = [key for key in tk.MATMUL_KEYS if key not in cfg]
        if missing:
            raise InputError(f"Triton matmul config lacks {', '.join(missing)}")
        constexprs = {key: int(cfg[key]) for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        warps = int(num_warps or cfg["num_warps"])
        values = {"A": None, "B": None, "C": None, "M": m, "N": n, "K": k}
        values.update(stride_am=k, stride_ak=1, stride_bk=n, stride_bn=1, stride_cm=n, stride_cn=1)
        kernel = compile_jit(
            tk.matmul_kernel, signature, constexprs, arch, warps, int(cfg["num_stages"]), "triton", values, specialize
        )
        grid = (_cdiv(m, constexprs["BLOCK_M"]) * _cdiv(n, constexprs["BLOCK_N"]), 1, 1)
        out.append(dataclasses.replace(kernel, grid=grid))
    return out


FAMILY = Matmul()
