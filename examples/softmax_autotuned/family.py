"""A row softmax already decorated with `@triton.autotune`: its configs are the space, no knobs declared. mage-tune
compiles each offline (pruning what spills or cannot launch), measures them in its own harness, keeps every result
and prints the winners as a triton.Config list.

    mage-tune space examples/softmax_autotuned/family.py --shape m=4096,n=1024
    mage-tune search examples/softmax_autotuned/family.py --m 4096 --n 1024
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import triton
import triton.language as tl

from mage_tune.families import Baseline, TritonFamily


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=8),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 2048}, num_warps=16),
        triton.Config({"BLOCK": 4096}, num_warps=16),
    ],
    key=["N"],
)
@triton.jit
def softmax_kernel(x, y, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(x + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class RowSoftmax(TritonFamily):
    name = "softmax"
    kernel = softmax_kernel
    output = "y"
    dims = ("m", "n")
    default_dims: ClassVar[dict[str, int]] = {"m": 4096}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows", "n": "row length (softmax over it)"}
    baselines = ("torch", "copy")
    copy_of = "x"
    tolerance = 1e-5

    def violations(self, config, shape, arch) -> list[str]:
        problems = super().violations(config, shape, arch)
        if config["BLOCK"] < shape["n"]:
            problems.append(f"BLOCK={config['BLOCK']} must cover the row (n={shape['n']}): one block per row")
        return problems

    def constraint_text(self) -> list[str]:
        return [*super().constraint_text(), "BLOCK ≥ n (a program holds its whole row)."]

    def scalars(self, shape) -> dict:
        return {"stride": shape["n"], "N": shape["n"]}

    def grid(self, config, shape) -> tuple[int, ...]:
        return (shape["m"],)

    def make_inputs(self, shape, rng) -> dict[str, np.ndarray]:
        return {"x": (3.0 * rng.standard_normal((shape["m"], shape["n"]))).astype(np.float32)}

    def reference(self, inputs, shape) -> np.ndarray:
        x = inputs["x"].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def output_shape(self, shape) -> tuple[int, ...]:
        return (shape["m"], shape["n"])

    def bytes_moved(self, shape) -> int:
        return 4 * 2 * shape["m"] * shape["n"]

    def baseline_kernels(self, shape) -> list[Baseline]:
        return [Baseline("torch.softmax", "torch")]

    def launcher(self, job, shape):
        if job.kind == "torch":
            import torch

            return lambda bufs: torch.softmax(bufs["x"], dim=1)
        return super().launcher(job, shape)


FAMILY = RowSoftmax()
