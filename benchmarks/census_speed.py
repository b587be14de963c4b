"""How fast the census reads: MB/s of the PTX view and of the SASS view on one core.

The input is real: one CUDA source holding many instantiations of a pipelined kernel (cp.async double buffer,
float4 loads, shuffles, barriers, rsqrt, exp), compiled by NVRTC into one PTX module of about `--mb` megabytes.
The compile runs ptxas and cuobjdump on it (through mage-tune's compile cache, so a second run is instant), which
also proves that ptxas accepts the module, and gives the `cuobjdump -sass` listing the SASS view is timed on.

Timed, per view, best of `--repeat` runs, in CPU seconds of this process pinned to one core (so other work on the
machine does not count against it):
  PTX view  = ptx.parse(text) + ptx.view(kernel) for every kernel (loads in flight and parameter attribution included)
  SASS view = sass.parse(listing) + sass.view(function) for every function

    python benchmarks/census_speed.py              # table
    python benchmarks/census_speed.py --json       # one JSON object
    python benchmarks/census_speed.py --profile    # also cProfile the PTX view (stderr)
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import pstats
import sys
import time

TARGET_PTX_MBPS = 5.0

KERNEL = r"""
#define STEPS 24

__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}

template <int V>
__global__ void __launch_bounds__(256) variant(const float4* __restrict__ in, float4* __restrict__ out,
                                               const float* __restrict__ w, const int* __restrict__ idx, int n) {
    __shared__ __align__(16) float4 tile[2][256];
    const int t = threadIdx.x;
    const int base = blockIdx.x * 256 * STEPS;
    copy16(&tile[0][t], in + base + t);
    asm volatile("cp.async.commit_group;\n" ::);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        if (s + 1 < STEPS) copy16(&tile[(s + 1) & 1][t], in + base + (s + 1) * 256 + t);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
        float4 v = tile[s & 1][(t + V) & 255];
        float g = w[(s * V + t) % n];
        float4 x = in[base + idx[t] + s];
        acc.x = fmaf(v.x, g, acc.x) + x.x * rsqrtf(fabsf(x.y) + 1e-6f);
        acc.y = fmaf(v.y, g, acc.y) + x.y;
        acc.z = fmaf(v.z, g + V, acc.z) + x.z;
        acc.w = fmaf(v.w, g, acc.w) + __expf(x.w * 0.01f);
        float r = acc.x + acc.y + acc.z + acc.w;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
        acc.x += r * (1.0f / (V + 1));
        __syncthreads();
    }
    out[blockIdx.x * 256 + t] = acc;
}
"""


def source(kernels: int) -> str:
    """KERNEL with `kernels` explicit instantiations: distinct mangled names, one PTX module."""
    lines = [KERNEL]
    for v in range(kernels):
        lines.append(f"template __global__ void variant<{v}>(const float4*, float4*, const float*, const int*, int);")
    return "\n".join(lines) + "\n"


def build(mb: float, arch: str):
    """Compile enough instantiations for about `mb` MB of PTX; returns the Artifact (PTX, SASS listing, ...)."""
    from mage_tune.compile import build_from_cu, nvrtc_ptx

    probe = 4
    per_kernel = len(nvrtc_ptx(source(probe), arch, "probe.cu")) / probe
    kernels = max(1, math.ceil(mb * 1e6 / per_kernel))
    started = time.perf_counter()
    note = "NVRTC, ptxas, cuobjdump; cached after the first run"
    print(f"compiling {kernels} kernels for {arch} ({note})...", file=sys.stderr)
    art = build_from_cu(source(kernels), arch, f"census_speed_{kernels}.cu")
    print(f"  ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return art, kernels


def pin_one_core() -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return f"core {core}"


def ptx_view(text: str):
    from mage_tune.census import ptx

    module = ptx.parse(text, "census_speed.ptx")
    return [ptx.view(kernel) for kernel in module.kernels]


def sass_view(text: str):
    from mage_tune.census import sass

    functions = sass.parse(text, "census_speed.sass")
    return [sass.view(instrs) for instrs in functions.values()]


def python_reference_ms() -> float:
    """Best of 5 of a fixed pure-Python loop, in ms: how fast this core runs Python right now (lower is faster).
    The census is pure Python, so MB/s scale with it; compare runs on different or busy machines through it."""
    best = math.inf
    for _ in range(5):
        started = time.process_time()
        sum(range(1_000_000))
        best = min(best, time.process_time() - started)
    return round(best * 1e3, 1)


def timed(fn, text: str, repeat: int) -> dict:
    """Best CPU and wall seconds of `repeat` runs (a first run warms caches and is counted too)."""
    cpu, wall = [], []
    for _ in range(repeat):
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        views = fn(text)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    mb = len(text.encode()) / 1e6
    return {
        "mb": round(mb, 3),
        "functions": len(views),
        "instructions": sum(v.instructions for v in views),
        "cpu_s": round(min(cpu), 4),
        "wall_s": round(min(wall), 4),
        "mb_per_s": round(mb / min(cpu), 2),
        "mb_per_s_wall": round(mb / min(wall), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="PTX size to build, in MB (default 5)")
    parser.add_argument("--arch", default="sm_90", help="target arch (default sm_90)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per view; the best counts (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--profile", action="store_true", help="cProfile the PTX view, top 25 on stderr")
    args = parser.parse_args(argv)

    art, kernels = build(args.mb, args.arch)
    core = pin_one_core()
    results = {
        "ptx": timed(ptx_view, art.ptx, args.repeat),
        "sass": timed(sass_view, art.sass, args.repeat),
    }
    report = {
        "arch": args.arch,
        "kernels": kernels,
        "pinned": core,
        "python": sys.version.split()[0],
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "python_reference_ms": python_reference_ms(),
        "target_ptx_mb_per_s": TARGET_PTX_MBPS,
        "ptx_meets_target": results["ptx"]["mb_per_s"] >= TARGET_PTX_MBPS,
        "views": results,
    }
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(ptx_view, art.ptx)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from tabulate import tabulate

    rows = [
        [
            name.upper(),
            r["mb"],
            r["functions"],
            r["instructions"],
            r["cpu_s"],
            r["wall_s"],
            r["mb_per_s"],
            f"≥ {TARGET_PTX_MBPS}" if name == "ptx" else "-",
        ]
        for name, r in results.items()
    ]
    headers = ["view", "MB", "kernels", "instructions", "CPU s (best)", "wall s (best)", "MB/s (CPU)", "target"]
    print(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    load = report["load_average"]
    print(f"\n{args.arch}, {kernels} kernels, one core ({core}), best of {args.repeat}; load average {load}")
    print(f"Python speed reference: sum(range(10**6)) takes {report['python_reference_ms']} ms on this core now")
    print(f"PTX view {'meets' if report['ptx_meets_target'] else 'MISSES'} the {TARGET_PTX_MBPS} MB/s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
