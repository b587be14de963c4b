"""A user's own Triton kernel, for `mage-tune compare --against tests/data/user_triton_ok.py:scale_kernel`."""

import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, N, factor, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < N
    v = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, v * factor, mask=mask)


@triton.jit
def bad_range_kernel(x_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, 1000)  # Triton rejects a range that is not a power of two
    tl.store(x_ptr + offs, tl.zeros((1000,), dtype=tl.float32), mask=offs < N)


def not_a_kernel(x):
    return x
