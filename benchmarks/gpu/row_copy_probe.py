"""Where does a DRAM-bound layer norm lose to a plain copy? Kernels that build up from a copy to a layer norm one step
at a time, timed beside a plain copy of the same bytes: a block per row whose threads load their whole share of the
row into registers, then store it (`rows`); the same with a block barrier between the loads and the stores
(`rows+barrier`); the row centred and scaled by its mean and 1/std, two block reductions (`rows+stats`); with
scale and bias, a whole layer norm (`rows+stats+affine`); that in persistent blocks that walk the rows
(`persistent`), and with each thread's scale and bias loaded once and held in registers
(`persistent+affine_in_registers`); a block per row again with scale and bias loaded into registers as soon as
x's loads are issued (`rows+stats+affine_early`) or before them (`rows+stats+affine_first`).

Each kernel is the median of 20 launches between CUDA events, each after a 256 MiB write that evicts L2.

    python benchmarks/gpu/row_copy_probe.py [--out probe.json]
"""

from __future__ import annotations

import argparse
import json

import cupy as cp
import numpy as np
from probe_timing import PLAIN_COPY, cold_median_us, environment, evict_buffer

SOURCE = r"""
__device__ __forceinline__ float block_sum(float v, float* part) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warps = blockDim.x / 32;
    if (warps == 1) return v;
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[threadIdx.x % warps];
    for (int o = warps / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// STEP 0 copy, 1 + barrier, 2 + stats, 3 + affine (scale and bias loaded for every row), 4 the same in a persistent
// block walking rows by gridDim.x, 5 persistent with the thread's scale and bias loaded once, kept in registers,
// 6 a block per row with scale and bias loaded after x's loads are issued, before the reductions (early), 7 before
// x's loads.
template <int T, int D, int STEP>
__device__ void row(const float* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ bias,
                    float* __restrict__ y, int m) {
    constexpr int C = D / (4 * T);
    __shared__ float part[2][32];
    float4 sc[C], bi[C];
    if (STEP == 5 || STEP == 7) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            sc[c] = __ldg(reinterpret_cast<const float4*>(scale) + c * T + threadIdx.x);
            bi[c] = __ldg(reinterpret_cast<const float4*>(bias) + c * T + threadIdx.x);
        }
    }
    for (int r = blockIdx.x; r < m; r += (STEP == 4 || STEP == 5 ? gridDim.x : m)) {
        const float* xr = x + static_cast<size_t>(r) * D;
        float* yr = y + static_cast<size_t>(r) * D;
        float4 v[C];
#pragma unroll
        for (int c = 0; c < C; ++c) v[c] = reinterpret_cast<const float4*>(xr)[c * T + threadIdx.x];
        if (STEP == 6) {
#pragma unroll
            for (int c = 0; c < C; ++c) {
                sc[c] = __ldg(reinterpret_cast<const float4*>(scale) + c * T + threadIdx.x);
                bi[c] = __ldg(reinterpret_cast<const float4*>(bias) + c * T + threadIdx.x);
            }
        }
        if (STEP == 1) __syncthreads();
        float mean = 0.f, rstd = 1.f;
        if (STEP >= 2) {
            float s = 0.f;
#pragma unroll
            for (int c = 0; c < C; ++c) s += (v[c].x + v[c].y) + (v[c].z + v[c].w);
            mean = block_sum(s, part[0]) * (1.0f / D);
            float q = 0.f;
#pragma unroll
            for (int c = 0; c < C; ++c) {
                const float a = v[c].x - mean, b = v[c].y - mean, e = v[c].z - mean, f = v[c].w - mean;
                q += (a * a + b * b) + (e * e + f * f);
            }
            rstd = rsqrtf(block_sum(q, part[1]) * (1.0f / D) + 1e-5f);
        }
#pragma unroll
        for (int c = 0; c < C; ++c) {
            float4 o = v[c];
            if (STEP >= 2) {
                o = make_float4((o.x - mean) * rstd, (o.y - mean) * rstd, (o.z - mean) * rstd, (o.w - mean) * rstd);
            }
            if (STEP >= 3) {
                float4 s, b;
                if (STEP >= 5) {
                    s = sc[c], b = bi[c];
                } else {
                    s = __ldg(reinterpret_cast<const float4*>(scale) + c * T + threadIdx.x);
                    b = __ldg(reinterpret_cast<const float4*>(bias) + c * T + threadIdx.x);
                }
                o = make_float4(fmaf(o.x, s.x, b.x), fmaf(o.y, s.y, b.y), fmaf(o.z, s.z, b.z), fmaf(o.w, s.w, b.w));
            }
            reinterpret_cast<float4*>(yr)[c * T + threadIdx.x] = o;
        }
    }
}
"""
STEPS = (
    "rows",
    "rows+barrier",
    "rows+stats",
    "rows+stats+affine",
    "persistent",
    "persistent+affine_in_registers",
    "rows+stats+affine_early",
    "rows+stats+affine_first",
)
SHAPES = {(16384, 2560): (32, 64, 128), (32768, 1024): (32, 64, 128, 256), (32768, 512): (32, 64, 128)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="row_copy_probe.json")
    args = parser.parse_args()
    kernels = [(m, d, t, s) for (m, d), threads in SHAPES.items() for t in threads for s in range(len(STEPS))]
    entries = "\n".join(
        f'extern "C" __global__ void __launch_bounds__({t}) row_{d}_{t}_{s}(const float* x, const float* w, '
        f"const float* b, float* y, int m) {{ row<{t}, {d}, {s}>(x, w, b, y, m); }}"
        for _, d, t, s in kernels
    )
    module = cp.RawModule(code=PLAIN_COPY + SOURCE + entries, options=("-std=c++17", "-arch=sm_90"))
    evict = evict_buffer()

    def median_us(launch) -> float:
        return cold_median_us(launch, evict)

    plain = module.get_function("plain_copy")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rows = []
    for m, d in SHAPES:
        x = cp.random.standard_normal((m, d), dtype=cp.float32) + 30
        w, b = cp.random.standard_normal(d, dtype=cp.float32), cp.random.standard_normal(d, dtype=cp.float32)
        y = cp.empty_like(x)
        n4 = np.int64(m * d // 4)
        grid = (int(n4 + 255) // 256,)
        copy_us = median_us(lambda x=x, y=y, n4=n4, grid=grid, plain=plain: plain(grid, (256,), (x, y, n4)))
        rows.append({"m": m, "d": d, "kernel": "plain_copy", "us": copy_us})
        xd = x.astype(cp.float64)
        mean = xd.mean(axis=1, keepdims=True)
        want = (xd - mean) / cp.sqrt(((xd - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5) * w + b
        for mm, dd, t, s in kernels:
            if (mm, dd) != (m, d):
                continue
            fn = module.get_function(f"row_{d}_{t}_{s}")
            grid = (sms * min(32, 2048 // t),) if STEPS[s].startswith("persistent") else (m,)
            us = median_us(lambda fn=fn, g=grid, t=t, x=x, w=w, b=b, y=y, m=m: fn(g, (t,), (x, w, b, y, np.int32(m))))
            err = float(cp.abs(y - want).max()) if s >= 3 else float(cp.abs(y - x).max()) if s < 2 else None
            rows.append({"m": m, "d": d, "kernel": STEPS[s], "threads": t, "us": us, "per_copy": us / copy_us,
                         "max_abs_err": err})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    with open(args.out, "w") as f:
        json.dump({"environment": environment(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
