"""RMSNorm as a mage-tune CUDA template family: y = x · rsqrt(mean(x²) + eps) · w over the rows of x (M × d),
fp32 or bf16 in and out, fp32 accumulation. The template (rmsnorm.cu.j2, beside this file) holds the row in
registers, so x is read once and y written once.

    mage-tune space examples/rmsnorm/family.py --shape m=4096,d=4096
    mage-tune search examples/rmsnorm/family.py:BF16 --m 4096 --d 4096

`FAMILY` is the fp32 family, `BF16` the bf16 one. Baselines: torch's rms_norm, a Triton RMSNorm (triton_rmsnorm.py,
at every num_warps that fits its block) and same-bytes copies of x into y (the floor at the shape).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from mage_tune.families import Baseline, CudaFamily, Knob, Launch, import_file

HERE = Path(__file__).resolve().parent
EPS = 1e-6
MAX_CHUNKS = 16  # accesses of x a thread holds in registers
BYTES = {"fp32": 4, "bf16": 2}
DEVICE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class RMSNorm(CudaFamily):
    template = "rmsnorm.cu.j2"
    dims = ("m", "d")
    default_dims: ClassVar[dict[str, int]] = {"m": 4096}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows", "d": "row width (normalized over)"}
    knobs = (
        Knob("threads", (256, 128, 512, 1024, 64, 32), "threads per row (32: a warp per row, no barrier)"),
        Knob("rows", (1, 2, 4), "rows per block (threads·rows ≤ 1024)"),
        Knob("vec", (16, 8, 4), "bytes per global access of x, w and y"),
        Knob("hint", ("none", "nc", "cs"), "cache hint on x's loads: plain, read-only path, streaming"),
        Knob("store", ("plain", "cs"), "y's stores: plain, or streaming (st.global.cs)"),
        Knob("rsqrt", ("approx", "precise"), "rsqrtf (MUFU.RSQ), or 1/sqrtf (IEEE)"),
        Knob("w_early", (0, 1), "1: w loaded with x, before the reduction (more registers, its latency hidden)"),
    )
    kernel_name = "rmsnorm"
    param_names = ("x", "w", "y")
    baselines = ("triton", "torch", "copy")
    copy_of = "x"

    def __init__(self, dtype: str = "fp32"):
        self.dtype = dtype
        self.name = "rmsnorm" if dtype == "fp32" else f"rmsnorm_{dtype}"
        # bf16 output: one rounding of each element (relative 2^-9) dominates the error
        self.tolerance = 1e-5 if dtype == "fp32" else 8e-3

    # --- the space ---------------------------------------------------------------------------------------------
    def elems(self, config) -> int:
        return config["vec"] // BYTES[self.dtype]

    def chunks(self, config, shape) -> int:
        return _cdiv(shape["d"], config["threads"] * self.elems(config))

    def violations(self, config, shape, arch) -> list[str]:
        problems = []
        threads, rows, vec, d = config["threads"], config["rows"], config["vec"], shape["d"]
        if threads * rows > 1024:
            problems.append(f"threads={threads} × rows={rows} is over 1024 threads per block")
        if (d * BYTES[self.dtype]) % vec:
            problems.append(f"vec={vec} needs rows of {vec}-byte multiples; d={d} {self.dtype} is not")
        elif self.chunks(config, shape) > MAX_CHUNKS:
            problems.append(
                f"d={d} with threads={threads}, vec={vec} is {self.chunks(config, shape)} accesses per thread, over "
                f"{MAX_CHUNKS} held in registers; use more threads or a wider vec"
            )
        return problems

    def constraint_text(self) -> list[str]:
        return [
            "threads × rows ≤ 1024.",
            f"d·{BYTES[self.dtype]} bytes must be a multiple of vec (aligned row starts).",
            f"ceil(d / (threads · vec/{BYTES[self.dtype]})) ≤ {MAX_CHUNKS} accesses per thread (the row in registers).",
        ]

    def launch(self, config, shape, arch) -> Launch:
        return Launch((_cdiv(shape["m"], config["rows"]), 1, 1), config["threads"] * config["rows"])

    def template_vars(self, config, shape) -> dict:
        threads, d = config["threads"], shape["d"]
        return {
            **config,
            "label": f"{self.name} " + ",".join(f"{k}={v}" for k, v in config.items()),
            "dtype": self.dtype,
            "d": d,
            "elems": self.elems(config),
            "chunks": self.chunks(config, shape),
            "full": d % (threads * self.elems(config)) == 0,
            "block": threads * config["rows"],
            "warps": max(1, threads // 32),
            "early_exit": config["rows"] == 1 or threads == 32,
        }

    def scalar_args(self, shape) -> tuple:
        return (np.int32(shape["m"]), np.float32(EPS))

    # --- correctness and cost -----------------------------------------------------------------------------------
    def make_inputs(self, shape, rng) -> dict[str, np.ndarray]:
        m, d = shape["m"], shape["d"]
        return {
            "x": (1.5 * rng.standard_normal((m, d)) + 0.5).astype(np.float32),
            "w": (1.0 + 0.25 * rng.standard_normal(d)).astype(np.float32),
        }

    def device_dtype(self, name: str) -> str:
        return DEVICE_DTYPES[self.dtype]

    def reference(self, inputs, shape) -> np.ndarray:
        x = inputs["x"].astype(np.float64)
        scale = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPS)
        return x * scale * inputs["w"].astype(np.float64)

    def output_shape(self, shape) -> tuple[int, ...]:
        return (shape["m"], shape["d"])

    def bytes_moved(self, shape) -> int:
        return BYTES[self.dtype] * (2 * shape["m"] * shape["d"] + shape["d"])

    # --- baselines ---------------------------------------------------------------------------------------------
    def baseline_kernels(self, shape) -> list[Baseline]:
        block = triton_rmsnorm().next_power_of_2(shape["d"])
        warps = [w for w in (1, 2, 4, 8, 16, 32) if 32 * w <= block]
        triton = [Baseline(f"triton_rmsnorm[num_warps={w}]", "triton", {"BLOCK": block, "num_warps": w}) for w in warps]
        return [*triton, Baseline("torch.rms_norm", "torch")]

    def launcher(self, job, shape):
        m, d = shape["m"], shape["d"]
        if job.kind == "torch":
            import torch.nn.functional as F

            return lambda bufs: F.rms_norm(bufs["x"], (d,), bufs["w"], EPS)
        if job.kind == "triton":
            kernel = triton_rmsnorm().rmsnorm_kernel
            block, warps = job.config["BLOCK"], job.config["num_warps"]

            def launch(bufs):
                kernel[(m,)](
                    bufs["x"], bufs["w"], bufs["__out__"], d, d, EPS, BLOCK=block, SINGLE=True, num_warps=warps
                )

            return launch
        return None


def triton_rmsnorm():
    """The Triton RMSNorm beside this file (imported by path, as a family file is)."""
    return import_file(HERE / "triton_rmsnorm.py")


FAMILY = RMSNorm("fp32")
BF16 = RMSNorm("bf16")
