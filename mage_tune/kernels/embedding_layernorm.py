"""An embedding lookup fused into the FP32 layer norm: y[i] = layer_norm(table[index[i]]) * scale + bias, for M
tokens (int64 indices) into a table of `vocab` rows of d floats. The gathered rows are read straight from the table
and never written out, which is what PyTorch's compiler does when it fuses the lookup into its own layer norm: an
opaque layer-norm operator after an embedding would write M·d floats and read them again.

One kernel, the layer norm's template with `gather` on:
`layernorm(table, index, scale, bias, y, int M, long long vocab, float eps)`; an index outside [0, vocab) traps (as
PyTorch's embedding asserts), so a bad index stops the program instead of reading outside the table.

The knobs, their constraints and the launch are the layer norm's (mage_tune/kernels/layernorm.py): a row's work is
the same, only where it is read from differs. So a config tuned for `layernorm` at (m, d) is this family's config at
(m, d, any vocab), and the run-time choice falls back to the layer norm's tuning data where this family has none
(`tuned_as`); a search of this family tunes it on its own.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.kernels.base import Baseline, Config, Shape
from mage_tune.kernels.layernorm import EPS, FLOAT, LayerNorm

INDEX_BYTES = 8  # int64, as PyTorch's embedding takes


class EmbeddingLayerNorm(LayerNorm):
    name = "embedding-layernorm"
    dims = ("m", "d", "vocab")
    default_dims: ClassVar[dict[str, int]] = {"m": 4096, "vocab": 32000}
    dim_help: ClassVar[dict[str, str]] = {
        "m": "tokens (rows of y)",
        "d": "row width (normalized over)",
        "vocab": "rows of the embedding table",
    }
    param_names = ("table", "index", "scale", "bias", "y")
    input_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "table": ("vocab", "d"),
        "index": ("m",),
        "scale": ("d",),
        "bias": ("d",),
    }
    baselines = ("torch",)
    copy_of = None  # y has the bytes of the gathered rows, which no input holds contiguously
    tuned_as = "layernorm"

    def template_vars(self, config: Config, shape: Shape) -> dict:
        return {**super().template_vars(config, shape), "gather": True}

    def device_dtype(self, name: str) -> str:
        return "int64" if name == "index" else "float32"

    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        inputs = super().make_inputs({"m": shape["vocab"], "d": shape["d"]}, rng)
        # Tokens drawn with repeats, the last table row among them (a bound an off-by-one would miss).
        index = rng.integers(0, shape["vocab"], size=shape["m"], dtype=np.int64)
        index[-1] = shape["vocab"] - 1
        return {"table": inputs["x"], "index": index, "scale": inputs["scale"], "bias": inputs["bias"]}

    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        rows = inputs["table"][inputs["index"].astype(np.int64)]
        return super().reference({"x": rows, "scale": inputs["scale"], "bias": inputs["bias"]}, shape)

    def scalar_args(self, shape: Shape) -> tuple:
        return (np.int32(shape["m"]), np.int64(shape["vocab"]), np.float32(EPS))

    def bytes_moved(self, shape: Shape) -> int:
        m, d = shape["m"], shape["d"]
        return FLOAT * (2 * m * d + 2 * d) + INDEX_BYTES * m

    # --- baselines: PyTorch's lookup then its layer norm (two kernels) ------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        return [Baseline("torch.embedding+layer_norm", "torch")]

    def launcher(self, job, shape: Shape):
        if job.kind != "torch":
            return None
        F = gpu.torch().nn.functional
        d = shape["d"]
        return lambda bufs: F.layer_norm(
            F.embedding(bufs["index"], bufs["table"]), (d,), bufs["scale"], bufs["bias"], EPS
        )

    def reference_kernels(self, shape: Shape, arch, specialize: bool = True, **options) -> list:
        return []  # Triton's tutorial has no fused lookup to set beside it

    def compare_facts(self, census, config: dict, shape: Shape, reference: bool) -> list:
        return []


FAMILY = EmbeddingLayerNorm()
