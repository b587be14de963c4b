"""Layer norm forward as training codebases write it: out = (x - mean) · rstd · weight + bias over the rows of x
(M × d, fp32), and the per-row statistics `mean` and `rstd` = 1/sqrt(var + eps) that the backward pass reuses:
three outputs, each checked on its own. The template (layernorm_stats.cu.j2, beside this file) gives a warp to a
row (or to a few rows), in blocks of dim3(32, warps): threadIdx.x the lane, threadIdx.y the warp; warp shuffles
reduce, and no block barrier is ever needed.

    mage-tune space  examples/layernorm_stats/family.py --shape m=8192,d=768
    mage-tune search examples/layernorm_stats/family.py --m 8192 --d 768

Knobs (defaults first):
  warps      warps per block, the block's y: 4, 8, 16, 32, 1, 2
  vec        floats per global access of x, weight, bias and out: 4 (float4; d a multiple of 4) or 1
  rows       rows per warp, interleaved so that their loads are in flight together: 1, 2, 4
  x_in       regs: x read once and held in registers until out is written (bounded by the registers);
             global: every pass reads x again, from L1/L2 when it is still there (any d)
  stats      twopass: the mean, then the squared deviations around it (a third read of x with x_in=global);
             welford: one pass of a running (count, mean, M2) per lane, merged by Chan's formula (one division per
             element, IEEE unless fast_math)
  stream     1: x's last read and every store streaming (__ldcs/__stcs, evict-first lines); 0: plain
  fast_math  1: built with --use_fast_math (approximate division and square root: rstd, Welford's steps)

`as_shipped` is what such a codebase ships: 32 × 8 blocks, float4, a warp per row, x re-read for each of the two
statistics passes and the output, its last read and the stores streaming. Baselines: torch's native_layer_norm (the op
autograd calls, which also returns mean and rstd) and same-bytes copies of x into out. Define MEAN_SCALE (e.g.
`-D MEAN_SCALE=1.01f`) to scale the stored mean alone: a planted error that only the mean's check sees.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.families import Baseline, CudaFamily, Knob, Launch, Output, Scalar, SourceOptions

EPS = 1e-5
WARP = 32
FLOAT = 4  # bytes
REG_FILE = 65536  # 32-bit registers per SM, all of which one block may take on sm_70 and later
MAX_HELD = 128  # floats of x a thread may hold (x_in=regs); more leaves too few of its 255 registers for the rest
REG_OVERHEAD = 40  # registers a thread needs beside x's: pointers, statistics, weight and bias (ptxas: up to 40)
MAX_WELFORD_D = 2**24  # Welford's counts are floats: exact up to 2^24


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class LayerNormStats(CudaFamily):
    name = "layernorm-stats"
    template = "layernorm_stats.cu.j2"
    dims = ("m", "d")
    default_dims: ClassVar[dict[str, int]] = {"m": 8192, "d": 768}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows (tokens)", "d": "row width (normalized over)"}
    knobs = (
        Knob("warps", (4, 8, 16, 32, 1, 2), "warps per block (blockDim.y; blockDim.x is the 32 lanes)"),
        Knob("vec", (4, 1), "floats per global access: 4 (float4, d a multiple of 4) or 1"),
        Knob("rows", (1, 2, 4), "rows per warp, their loads interleaved"),
        Knob("x_in", ("regs", "global"), "x for the later passes: held in registers, or read again from global"),
        Knob("stats", ("twopass", "welford"), "mean then squared deviations, or one Welford pass"),
        Knob("stream", (0, 1), "1: x's last read and the stores streaming (__ldcs/__stcs)", free=True),
        Knob("fast_math", (0, 1), "1: --use_fast_math (approximate division and square root)", free=True),
    )
    kernel_name = "layernorm_forward"
    param_names = ("x", "weight", "bias", "out", "mean", "rstd")
    scalar_params = (Scalar("N", "int"), Scalar("D", "int"), Scalar("eps", "float"))
    # rel_l2 for out and mean: a row's mean can sit near zero, where its few-ulp absolute error is a large relative
    # one that max_rel would charge in full. rstd is positive and never cancels, so every row's is held to max_rel.
    # The same bounds with and without fast_math: fp32 sums over d elements and 1/sqrt(var + eps), IEEE or
    # rsqrt.approx (about 2 ulp), land near 1e-7 (the host emulation's, d from 5 to 16384), and the sums' error
    # grows with d; a wrong statistic, a dropped element or a row's mix-up lands far above.
    outputs = (
        Output("out", "rel_l2", 1e-5),
        Output("mean", "rel_l2", 1e-5),
        Output("rstd", "max_rel", 1e-5),
    )
    baselines = ("torch", "copy")
    copy_of = "x"  # out has x's bytes: a copy of x into out is the floor
    as_shipped: ClassVar[dict] = {
        "warps": 8,
        "vec": 4,
        "rows": 1,
        "x_in": "global",
        "stats": "twopass",
        "stream": 1,
        "fast_math": 0,
    }

    # --- the space ---------------------------------------------------------------------------------------------
    @staticmethod
    def chunks(config, shape) -> int:
        """Accesses per lane per row."""
        return _cdiv(shape["d"], WARP * config["vec"])

    @classmethod
    def held_floats(cls, config, shape) -> int:
        """Floats of x a thread holds with x_in=regs."""
        return config["rows"] * cls.chunks(config, shape) * config["vec"]

    @staticmethod
    def held_limit(config) -> int:
        """The most floats of x a thread may hold: its share of the register file, less what the rest needs."""
        return min(MAX_HELD, REG_FILE // (WARP * config["warps"]) - REG_OVERHEAD)

    def violations(self, config, shape, arch) -> list[str]:
        problems = []
        d = shape["d"]
        if d % config["vec"]:
            problems.append(f"vec={config['vec']} needs d a multiple of {config['vec']} (aligned rows); d={d} is not")
        if config["x_in"] == "regs" and self.held_floats(config, shape) > self.held_limit(config):
            problems.append(
                f"x_in=regs holds {self.held_floats(config, shape)} floats of x per thread (rows={config['rows']} × "
                f"{self.chunks(config, shape)} accesses × vec={config['vec']}), over the {self.held_limit(config)} "
                f"that {WARP * config['warps']}-thread blocks leave room for; use x_in=global, fewer rows or warps"
            )
        if config["stats"] == "welford" and d > MAX_WELFORD_D:
            problems.append(f"stats=welford counts in floats, exact up to d={MAX_WELFORD_D}; d={d} is over")
        return problems

    def constraint_text(self) -> list[str]:
        return [
            "d must be a multiple of vec (aligned float4 rows).",
            f"x_in=regs: rows · ceil(d / (32·vec)) · vec floats held per thread ≤ min({MAX_HELD}, "
            f"{REG_FILE} / (32·warps) − {REG_OVERHEAD}) (the block's share of the registers).",
            "stats=welford: d ≤ 2^24 (float counts).",
        ]

    def launch(self, config, shape, arch) -> Launch:
        rows_per_block = config["warps"] * config["rows"]
        return Launch(_cdiv(shape["m"], rows_per_block), (WARP, config["warps"]))

    def template_vars(self, config, shape) -> dict:
        d = shape["d"]
        return {
            **config,
            "label": f"{self.name} " + ",".join(f"{k}={v}" for k, v in config.items()) + f" d={d}",
            "chunks": self.chunks(config, shape),
            # only the last access of a lane can fall past the row's end: the others need no check
            "in_row": "true" if d % (WARP * config["vec"]) == 0 else "c < CHUNKS - 1 || i < DV",
        }

    def source_options(self, config, shape) -> SourceOptions:
        base = super().source_options(config, shape)
        if config["fast_math"]:
            return dataclasses.replace(base, options=(*base.options, "--use_fast_math"))
        return base

    def scalar_args(self, shape) -> tuple:
        return (shape["m"], shape["d"], EPS)

    # --- correctness and cost -----------------------------------------------------------------------------------
    def make_inputs(self, shape, rng) -> dict[str, np.ndarray]:
        m, d = shape["m"], shape["d"]
        return {
            "x": (1.5 * rng.standard_normal((m, d)) + 0.5).astype(np.float32),
            "weight": (1.0 + 0.25 * rng.standard_normal(d)).astype(np.float32),
            "bias": (0.1 * rng.standard_normal(d)).astype(np.float32),
        }

    def reference(self, inputs, shape) -> dict[str, np.ndarray]:
        x = inputs["x"].astype(np.float64)
        mean = x.mean(axis=1)
        centred = x - mean[:, None]
        rstd = 1.0 / np.sqrt((centred * centred).mean(axis=1) + float(np.float32(EPS)))
        out = centred * rstd[:, None] * inputs["weight"].astype(np.float64) + inputs["bias"].astype(np.float64)
        return {"out": out, "mean": mean, "rstd": rstd}

    def output_shapes(self, shape) -> dict[str, tuple[int, ...]]:
        m, d = shape["m"], shape["d"]
        return {"out": (m, d), "mean": (m,), "rstd": (m,)}

    def bytes_moved(self, shape) -> int:
        # the problem's bytes, whatever a variant re-reads: x, weight and bias read once; out, mean, rstd written once
        m, d = shape["m"], shape["d"]
        return FLOAT * (2 * m * d + 2 * d + 2 * m)

    # --- baselines ---------------------------------------------------------------------------------------------
    def baseline_kernels(self, shape) -> list[Baseline]:
        return [Baseline("torch.native_layer_norm", "torch")]

    def launcher(self, job, shape):
        if job.kind != "torch":
            return None
        torch = gpu.torch()
        m, d = shape["m"], shape["d"]

        def launch(bufs):
            # the op autograd runs: one kernel writing out and the (m, 1) mean and rstd it saves for backward
            out, mean, rstd = torch.native_layer_norm(bufs["x"], (d,), bufs["weight"], bufs["bias"], EPS)
            return {"out": out, "mean": mean.view(m), "rstd": rstd.view(m)}

        return launch


FAMILY = LayerNormStats()
