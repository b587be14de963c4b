"""The kernels cuBLAS runs for a BF16 (or FP16) matmul at each shape, read with torch's profiler: their names say the
tile, the cluster and whether K is split (stream-K, "segment_k"), which tells what cuBLAS does where our kernels lose.

usage: python benchmarks/gpu/cublas_kernels.py MxNxK... [--dtype bfloat16|float16] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def kernels_at(m: int, n: int, k: int, dtype: str, reps: int = 20) -> list[dict]:
    """Each CUDA kernel `reps` launches of torch.matmul ran at m × n × k, with its count and mean µs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    kind = getattr(torch, dtype)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    a, b = torch.randn(m, k, device="cuda").to(kind), torch.randn(k, n, device="cuda").to(kind)
    c = torch.empty(m, n, device="cuda", dtype=kind)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        if event.device_type.name == "CUDA" and event.count:
            rows.append({"kernel": event.key, "count": event.count, "mean_us": event.device_time_total / event.count})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="+")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    out = []
    for text in args.shapes:
        try:
            m, n, k = (int(x) for x in text.split("x"))
        except ValueError:
            print(f"cublas_kernels: {text!r} is not MxNxK", file=sys.stderr)
            return 2
        for row in kernels_at(m, n, k, args.dtype):
            out.append({"shape": {"m": m, "n": n, "k": k}, **row})
            print(f"{text}: {row['kernel']} ×{row['count']} {row['mean_us']:.2f} µs", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
