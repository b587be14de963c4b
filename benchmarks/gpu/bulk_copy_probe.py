"""How fast can Hopper's bulk copies (cp.async.bulk into shared memory, completed on an mbarrier) move a tensor,
beside a plain one-float4-per-thread copy of the same bytes? The ceiling of any kernel that brings its input in that
way, e.g. examples/layernorm_bulk.

Every warp runs its own ring of `stages` chunk buffers: lane 0 issues a chunk's bulk copy and, once the warp has
used a chunk, the copy `stages` on. Three uses of a chunk: `load` (lane 0 reads one float: read bandwidth alone),
`bulk_store` (a bulk copy back out to global memory), `st_global` (the warp's lanes read it and store 16 bytes each,
as layernorm_bulk stores y). Each kernel is timed as the median of 20 launches between CUDA events, each after a
256 MiB write that evicts L2; every copy is checked equal to its source.

    python benchmarks/gpu/bulk_copy_probe.py [--mib 160] [--out probe.json]
"""

from __future__ import annotations

import argparse
import itertools
import json

import cupy as cp
import numpy as np
from probe_timing import PLAIN_COPY, cold_median_us, environment, evict_buffer

SOURCE = r"""
__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

template <int CHUNK, int STAGES, int USE, int WARPS>
__device__ void ring(const char* src, char* dst, long chunks) {
    extern __shared__ __align__(128) char buffers[];
    __shared__ __align__(8) unsigned long long full[WARPS][STAGES];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long first = blockIdx.x * static_cast<long>(WARPS) + warp, step = static_cast<long>(gridDim.x) * WARPS;
    if (first >= chunks) return;
    const long todo = (chunks - 1 - first) / step + 1;
    char* mine = buffers + warp * STAGES * CHUNK;
    auto issue = [&](long i) {
        const unsigned bar = sa(&full[warp][i % STAGES]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(sa(mine + (i % STAGES) * CHUNK)), "l"(src + (first + i * step) * CHUNK), "r"(CHUNK),
                     "r"(bar) : "memory");
    };
    if (lane == 0) {
        for (int s = 0; s < STAGES; ++s)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(&full[warp][s])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (long i = 0; i < STAGES && i < todo; ++i) issue(i);
    }
    __syncwarp();
    float seen = 0.f;
    for (long i = 0; i < todo; ++i) {
        const int s = i % STAGES;
        const unsigned parity = (i / STAGES) & 1;
        unsigned done;
        do {
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(sa(&full[warp][s])), "r"(parity) : "memory");
        } while (!done);
        char* chunk = mine + s * CHUNK;
        char* out = dst + (first + i * step) * CHUNK;
        if (USE == 0) {
            if (lane == 0) seen += *reinterpret_cast<volatile float*>(chunk);
        } else if (USE == 1) {
            if (lane == 0) {
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out), "r"(sa(chunk)),
                             "r"(CHUNK) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // the buffer may be refilled
            }
        } else {
            for (int o = lane * 16; o < CHUNK; o += 512) {
                float4 q;
                asm volatile("ld.volatile.shared.v4.f32 { %0, %1, %2, %3 }, [%4];"
                             : "=f"(q.x), "=f"(q.y), "=f"(q.z), "=f"(q.w) : "r"(sa(chunk + o)));
                *reinterpret_cast<float4*>(out + o) = q;
            }
        }
        __syncwarp();
        if (lane == 0 && i + STAGES < todo) issue(i + STAGES);
    }
    if (USE == 0 && lane == 0 && seen == -1.f) dst[0] = 1;  // keeps the reads; never true for uniform [0, 1) data
    if (USE == 1 && lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
"""
USES = ("load", "bulk_store", "st_global")
CHUNKS = (2048, 10240, 32768)  # bytes: a row of 512, 2560 and 8192 floats
STAGES = (2, 4)
WARPS = (1, 2, 4, 8)
RING_LIMIT = 200 * 1024  # bytes of buffers per block, under the 227 KB opt-in
SMEM_PER_SM = 220 * 1024


def kernels() -> list[tuple[int, int, int, int]]:
    return [
        (chunk, stages, use, warps)
        for chunk, stages, warps, use in itertools.product(CHUNKS, STAGES, WARPS, range(len(USES)))
        if warps * stages * chunk <= RING_LIMIT
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=160, help="MiB copied (default 160: 16384 rows of 2560 floats)")
    parser.add_argument("--out", default="bulk_copy_probe.json")
    args = parser.parse_args()
    entries = "\n".join(
        f'extern "C" __global__ void ring_{c}_{s}_{u}_{w}(const char* a, char* b, long n) '
        f"{{ ring<{c}, {s}, {u}, {w}>(a, b, n); }}"
        for c, s, u, w in kernels()
    )
    module = cp.RawModule(code=PLAIN_COPY + SOURCE + entries, options=("-std=c++17", "-arch=sm_90"))
    nbytes = args.mib * 1024 * 1024
    src = cp.random.random(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    evict = evict_buffer()
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]

    def median_us(launch) -> float:
        return cold_median_us(launch, evict)

    def copied() -> bool:
        same = bool(cp.array_equal(dst, src))
        dst.fill(0)
        return same

    n4 = nbytes // 16
    plain = module.get_function("plain_copy")
    plain_us = median_us(lambda: plain(((n4 + 255) // 256,), (256,), (src, dst, np.int64(n4))))
    rows = [{"kernel": "plain_copy", "us": plain_us, "copied": copied()}]
    for chunk, stages, use, warps in kernels():
        fn = module.get_function(f"ring_{chunk}_{stages}_{use}_{warps}")
        ring_bytes = warps * stages * chunk
        fn.max_dynamic_shared_size_bytes = ring_bytes
        fit = max(1, min(64 // warps, SMEM_PER_SM // ring_bytes))
        for per_sm in sorted({1, fit}):
            grid, block, count = (sms * per_sm,), (32 * warps,), np.int64(nbytes // chunk)
            us = median_us(lambda f=fn, g=grid, b=block, n=count, m=ring_bytes: f(g, b, (src, dst, n), shared_mem=m))
            rows.append({"kernel": "bulk_ring", "use": USES[use], "chunk_bytes": chunk, "stages": stages,
                         "warps": warps, "blocks_per_sm": per_sm, "us": us,
                         "copied": copied() if use else None})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    run = {**environment(), "sms": sms, "mib": args.mib}
    with open(args.out, "w") as f:
        json.dump({"environment": run, "results": rows}, f, indent=1)
    best = {use: min(r["us"] for r in rows if r.get("use") == use) for use in USES}
    shown = ", ".join(f"{u} {t:.2f} µs" for u, t in best.items())
    print(f"plain copy {rows[0]['us']:.2f} µs; best bulk ring: {shown}")


if __name__ == "__main__":
    main()
