import triton

# best first, as mage-tune ranked them
CONFIGS = [
    triton.Config({'BLOCK': 4096}, num_warps=8, num_stages=3),
    triton.Config({'BLOCK': 4096}, num_warps=4, num_stages=1),
    triton.Config({'BLOCK': 2048}, num_warps=4, num_stages=3),
    triton.Config({'BLOCK': 1024}, num_warps=8, num_stages=2),
    triton.Config({'BLOCK': 4096}, num_warps=1, num_stages=2),
]
