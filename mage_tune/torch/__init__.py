"""mage-tune's tuned kernels as PyTorch operators and modules (needs the `gpu` extra: torch).

- `LayerNorm`, `Linear`: drop-ins for torch.nn.LayerNorm and torch.nn.Linear (mage_tune/torch/modules.py).
- `layer_norm(x, weight, bias, eps)`, `matmul_fp32(a, b)`: the operators, also `torch.ops.mage_tune.*`
  (mage_tune/torch/ops.py); `configure(db=..., use_shipped=...)`: where their tuning data comes from.
"""

from mage_tune.torch.modules import LayerNorm, Linear
from mage_tune.torch.ops import configure, kernel, layer_norm, matmul_fp32

__all__ = ["LayerNorm", "Linear", "configure", "kernel", "layer_norm", "matmul_fp32"]
