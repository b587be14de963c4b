"""mage-tune's tuned kernels as PyTorch operators and modules (needs the `gpu` extra: torch).

- `LayerNorm`, `Linear`: drop-ins for torch.nn.LayerNorm and torch.nn.Linear (mage_tune/torch/modules.py).
- `layer_norm(x, weight, bias, eps)`, `matmul_fp32(a, b)`, and the layer norm with what a compiler fuses into it:
  `embedding_layer_norm(table, index, weight, bias, eps)`, `add_layer_norm(x, res, ...)`, `add_layer_norm_sum(x,
  res, ...)`, `add_row_layer_norm(x, res, row, ...)`, `add_row_layer_norm_sum(x, res, row, ...)`: the operators,
  also `torch.ops.mage_tune.*` (mage_tune/torch/ops.py); `configure(db=..., use_shipped=...)`: where their tuning
  data comes from.
- A torch.compile pass, installed on import, that fuses an embedding lookup or a residual add into the layer norm
  after it (mage_tune/torch/fusion.py; `fusion.install(False)` takes it out).
"""

from mage_tune.torch import fusion
from mage_tune.torch.modules import LayerNorm, Linear
from mage_tune.torch.ops import (
    add_layer_norm,
    add_layer_norm_sum,
    add_row_layer_norm,
    add_row_layer_norm_sum,
    configure,
    embedding_layer_norm,
    kernel,
    layer_norm,
    matmul_fp32,
)

fusion.install()

__all__ = [
    "LayerNorm",
    "Linear",
    "add_layer_norm",
    "add_layer_norm_sum",
    "add_row_layer_norm",
    "add_row_layer_norm_sum",
    "configure",
    "embedding_layer_norm",
    "fusion",
    "kernel",
    "layer_norm",
    "matmul_fp32",
]
