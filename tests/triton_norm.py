"""Triton's row-normalisation kernel, compiled offline (no GPU) so the census can be checked on real Triton output.

One program per row: the row, the scale and the bias are each read by one masked `tl.load`, the mean and the
variance come from `tl.sum`, the inverse deviation is `1 / tl.sqrt(var + eps)`, and one masked `tl.store` writes
the row. `ASTSource` needs the jit function to live in a real .py file, hence this module.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mage_tune.arch import get_arch

ARCH = get_arch("sm_89")
BLOCK = 1024
NUM_WARPS = 4
# fp32 with FMA contraction: Triton's default, spelled out so Triton 3.9 does not warn that the default will change.
OPTIONS = {"num_warps": NUM_WARPS, "enable_fp_fusion": True}


@triton.jit
def norm_kernel(x_ptr, y_ptr, scale_ptr, bias_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    inv = 1 / tl.sqrt(var + eps)
    scale = tl.load(scale_ptr + cols, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * row_stride + cols, diff * inv * scale + bias, mask=mask)


def param_names() -> list[str]:
    """The jit function's runtime arguments in order (constexprs are folded away, not parameters)."""
    return [name for name in norm_kernel.arg_names if name != "BLOCK"]


def compile_norm(capability: int = 89):
    """`triton.compile` of norm_kernel for `capability` without a device: the CompiledKernel with its `asm`."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {
        "x_ptr": "*fp32",
        "y_ptr": "*fp32",
        "scale_ptr": "*fp32",
        "bias_ptr": "*fp32",
        "row_stride": "i32",
        "n_cols": "i32",
        "eps": "fp32",
        "BLOCK": "constexpr",
    }
    src = ASTSource(fn=norm_kernel, signature=signature, constexprs={"BLOCK": BLOCK})
    return triton.compile(src, target=GPUTarget("cuda", capability, 32), options=OPTIONS)
