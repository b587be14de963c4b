"""Drop-in modules: `mage_tune.torch.LayerNorm` for torch.nn.LayerNorm and `mage_tune.torch.Linear` for
torch.nn.Linear (FP32-accurate through matmul-3xtf32), with the same parameters, state dicts and results.

Each runs its tuned operator (mage_tune/torch/ops.py) where it applies — FP32 CUDA tensors, and for LayerNorm one
normalized dimension with weight and bias — and its PyTorch parent otherwise, saying once which case it met. The
test is on dtype, device and parameters only, which torch.compile guards on, so a compiled model traces one branch
and keeps its own fused kernels for what the operators do not cover (the message is said where the module runs
eagerly; a compiled graph's trace says nothing).
"""

from __future__ import annotations

from mage_tune import gpu
from mage_tune.torch import ops

torch = gpu.torch()


def _fp32_cuda(*tensors) -> bool:
    return all(t is not None and t.is_cuda and t.dtype == torch.float32 for t in tensors)


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm, run by mage-tune's tuned layer norm on FP32 CUDA tensors."""

    def forward(self, x):
        if len(self.normalized_shape) == 1 and _fp32_cuda(x, self.weight, self.bias):
            return ops.layer_norm(x, self.weight, self.bias, self.eps)
        if not torch.compiler.is_compiling():
            ops.say_once(f"LayerNorm of {x.dtype} on {x.device.type}{_affine_note(self)} is not covered")
        return super().forward(x)


def _affine_note(module: torch.nn.LayerNorm) -> str:
    if module.weight is None or module.bias is None:
        return " without weight and bias"
    if len(module.normalized_shape) != 1:
        return f" over {len(module.normalized_shape)} dimensions"
    return ""


class Linear(torch.nn.Linear):
    """torch.nn.Linear, its product run by mage-tune's FP32-accurate matmul on FP32 CUDA tensors (the weight
    transposed to K×N per call: the kernel reads B row-major)."""

    def forward(self, x):
        if _fp32_cuda(x, self.weight) and x.dim() >= 1:
            rows = x.reshape(-1, self.in_features)
            y = ops.matmul_fp32(rows.contiguous(), self.weight.t().contiguous())
            if self.bias is not None:
                y = y + self.bias
            return y.view(*x.shape[:-1], self.out_features)
        if not torch.compiler.is_compiling():
            ops.say_once(f"Linear of {x.dtype} on {x.device.type} is not covered")
        return super().forward(x)
