"""A residual connection fused into the FP32 layer norm: y = layer_norm(x + res) * scale + bias over rows of d
floats, and with `add-layernorm-sum` the sum h = x + res written out too (a pre-norm transformer block carries h on
as its residual stream). What PyTorch's compiler does when it fuses the add into its own layer norm: an opaque
layer-norm operator after the add would need h written and read again.

`add-vector-layernorm` adds one row res of d floats to every row of x: y = layer_norm(x + res) with res broadcast, a
Linear's bias, which PyTorch's compiler moves out of the matmul into its layer norm's kernel (cuBLAS's matmul with a
bias epilogue was slower at 8192 × 4096 × 4096 FP32 on an H200 than without it).

`add-row-layernorm` and `add-row-layernorm-sum` take both: h = x + (res + row), res of x's shape and row one row of
d floats added to each of its rows (in that order, as a graph's `x + (mm + bias)` adds). A pre-norm block's
`x + Linear(x)`, whose bias Inductor moves out of the matmul into a pointwise add: without the row in the kernel
that add would write and read a full tensor of its own.

One kernel, the layer norm's template with `residual` on (and `write_sum` for the sum, `res_vector` for one row,
`res_row` for the row beside res): `layernorm(x, res[, row], scale, bias, y[, h], int M, float eps)`. Each row of
res is loaded beside x's and added in registers, so the family takes passes=regs only (the other passes read x again;
they would read res again too).

The knobs, the other constraints and the launch are the layer norm's (mage_tune/kernels/layernorm.py), so the run-time
choice falls back to the layer norm's tuning data where these families have none (`tuned_as`), where that config
has passes=regs.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.arch import Arch
from mage_tune.kernels.base import Baseline, Config, Output, Shape
from mage_tune.kernels.layernorm import EPS, FLOAT, LayerNorm


class AddLayerNorm(LayerNorm):
    dims = ("m", "d")
    input_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "x": ("m", "d"),
        "res": ("m", "d"),
        "scale": ("d",),
        "bias": ("d",),
    }
    baselines = ("torch",)
    copy_of = None  # its traffic is three or four rows per row, not a copy's two
    tuned_as = "layernorm"

    def __init__(self, write_sum: bool = False, vector: bool = False, row: bool = False):
        if write_sum and vector:
            raise ValueError("add-layernorm-sum adds rows of res: its sum with one row is not a family here")
        if vector and row:
            raise ValueError("a row beside res needs res of x's shape, not one row")
        self.write_sum, self.vector, self.row = write_sum, vector, row
        self.name = _family_name(write_sum, vector, row)
        inputs = ("x", "res", "row", "scale", "bias") if row else ("x", "res", "scale", "bias")
        self.param_names = (*inputs, "y", "h") if write_sum else (*inputs, "y")
        self.outputs = (Output("y"), Output("h")) if write_sum else ()
        if vector:
            self.input_dims = {**AddLayerNorm.input_dims, "res": ("d",)}
        if row:
            self.input_dims = {"x": ("m", "d"), "res": ("m", "d"), "row": ("d",), "scale": ("d",), "bias": ("d",)}

    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        problems = super().violations(config, shape, arch)
        if config["passes"] != "regs":
            problems.append(
                f"{self.name} adds each row of res to x's as it is loaded, into registers: it needs passes=regs, not "
                f"passes={config['passes']}"
            )
        return problems

    def constraint_text(self) -> list[str]:
        return [*super().constraint_text(), "passes=regs only (res is added to x's row in registers as it arrives)."]

    def template_vars(self, config: Config, shape: Shape) -> dict:
        return {
            **super().template_vars(config, shape),
            "residual": True,
            "write_sum": self.write_sum,
            "res_vector": self.vector,
            "res_row": self.row,
        }

    def output_shapes(self, shape: Shape) -> dict[str, tuple[int, ...]]:
        rows = (shape["m"], shape["d"])
        return {"y": rows, "h": rows} if self.write_sum else super().output_shapes(shape)

    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        inputs = super().make_inputs(shape, rng)  # x: mean 30, spread 1 (far from its spread: see layernorm.py)
        rows = (shape["d"],) if self.vector else (shape["m"], shape["d"])
        inputs["res"] = (1.0 + 0.5 * rng.standard_normal(rows)).astype(np.float32)
        if self.row:
            inputs["row"] = (-1.0 + 0.5 * rng.standard_normal(shape["d"])).astype(np.float32)
        return inputs

    def reference(self, inputs: dict[str, np.ndarray], shape: Shape):
        added = inputs["res"].astype(np.float64)
        if self.row:
            added = added + inputs["row"].astype(np.float64)
        h = inputs["x"].astype(np.float64) + added
        y = super().reference({"x": h, "scale": inputs["scale"], "bias": inputs["bias"]}, shape)
        return {"y": y, "h": h} if self.write_sum else y

    def bytes_moved(self, shape: Shape) -> int:
        m, d = shape["m"], shape["d"]
        if self.vector:
            return FLOAT * (2 * m * d + 3 * d)
        rows = (4 if self.write_sum else 3) * m * d
        return FLOAT * (rows + (3 if self.row else 2) * d)

    # --- baselines: PyTorch's add then its layer norm ---------------------------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        return [Baseline("torch.add+layer_norm", "torch")]

    def launcher(self, job, shape: Shape):
        if job.kind != "torch":
            return None
        F = gpu.torch().nn.functional
        d = shape["d"]

        def launch(bufs):
            h = bufs["x"] + (bufs["res"] + bufs["row"] if self.row else bufs["res"])
            y = F.layer_norm(h, (d,), bufs["scale"], bufs["bias"], EPS)
            return {"y": y, "h": h} if self.write_sum else y

        return launch

    def reference_kernels(self, shape: Shape, arch, specialize: bool = True, **options) -> list:
        return []  # Triton's tutorial has no residual to set beside it


def _family_name(write_sum: bool, vector: bool, row: bool) -> str:
    kind = "add-row-layernorm" if row else "add-vector-layernorm" if vector else "add-layernorm"
    return kind + "-sum" if write_sum else kind


FAMILY = AddLayerNorm()
WITH_SUM = AddLayerNorm(write_sum=True)
VECTOR = AddLayerNorm(vector=True)
ROW = AddLayerNorm(row=True)
ROW_WITH_SUM = AddLayerNorm(write_sum=True, row=True)
