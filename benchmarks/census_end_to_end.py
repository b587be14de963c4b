"""How long a census of a large tensor-core PTX takes end to end, beside ptxas's own time on the same file.

The input is real: one CUDA source with many instantiations of a warp-tiled tensor-core GEMM (cp.async tiles into
shared memory, ldmatrix fragments, mma.sync m16n8k16, a K loop), compiled by NVRTC for sm_90 into one PTX module of
about `--mb` megabytes. Timed (wall clock, best of `--repeat`):
  ptxas      ptxas -arch=sm_90 -v on the PTX, alone (what any census of it must pay)
  census     `mage-tune census FILE.ptx --json` in a fresh process with an empty compile cache
and the census's own share: census - ptxas. The target is at most 1 s over ptxas for 1 MB. The census assembles a
module that large in parts side by side (one per CPU, at least 128 KB each), so the CPU count is part of the result.

    python benchmarks/census_end_to_end.py [--mb 1.0] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_OVER_PTXAS_S = 1.0

KERNEL = r"""
template <int WM, int WN, int KT>
__global__ void __launch_bounds__(128) gemm_tc(const unsigned short* a, const unsigned short* b, float* c, int k) {
    __shared__ __align__(16) unsigned short sa[2][64 * 32];
    __shared__ __align__(16) unsigned short sb[2][32 * 64];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float acc[WM][WN][4] = {};
    for (int k0 = 0; k0 < k; k0 += 32 * KT) {
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
            const int buf = kt & 1;
            unsigned dst = (unsigned)__cvta_generic_to_shared(&sa[buf][threadIdx.x * 8]);
            const unsigned short* ga = a + k0 + kt * 32 + threadIdx.x * 8;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(ga));
            dst = (unsigned)__cvta_generic_to_shared(&sb[buf][threadIdx.x * 8]);
            const unsigned short* gb = b + k0 + kt * 32 + threadIdx.x * 8;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gb));
            asm volatile("cp.async.commit_group;");
            asm volatile("cp.async.wait_group 0;");
            __syncthreads();
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                unsigned af[WM][4], bf[WN][2];
#pragma unroll
                for (int i = 0; i < WM; ++i) {
                    const int at = ((warp * WM + i) % 4) * 512 + lane * 8 + ks * 16;
                    unsigned p = (unsigned)__cvta_generic_to_shared(&sa[buf][at]);
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                                 : "=r"(af[i][0]), "=r"(af[i][1]), "=r"(af[i][2]), "=r"(af[i][3]) : "r"(p));
                }
#pragma unroll
                for (int j = 0; j < WN; ++j) {
                    unsigned p = (unsigned)__cvta_generic_to_shared(&sb[buf][(j % 8) * 256 + lane * 8 + ks * 16]);
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                                 : "=r"(bf[j][0]), "=r"(bf[j][1]) : "r"(p));
                }
#pragma unroll
                for (int i = 0; i < WM; ++i)
#pragma unroll
                    for (int j = 0; j < WN; ++j)
                        asm volatile(
                            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                            "{%8,%9}, {%0,%1,%2,%3};"
                            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                            : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]), "r"(bf[j][1]));
            }
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                c[((blockIdx.x * 4 + warp) * WM * WN + i * WN + j) * 128 + lane * 4 + r] = acc[i][j][r];
}
"""

SHAPES = [(wm, wn, kt) for kt in (1, 2, 3, 4) for wm in (1, 2, 4) for wn in (1, 2, 4, 8)]


def source(count: int) -> str:
    lines = [KERNEL]
    for wm, wn, kt in SHAPES[:count]:
        lines.append(
            f"template __global__ void gemm_tc<{wm}, {wn}, {kt}>(const unsigned short*, const unsigned short*, "
            "float*, int);"
        )
    return "\n".join(lines)


def make_ptx(mb: float) -> str:
    from mage_tune.compile import nvrtc_ptx

    ptx = ""
    for count in range(4, len(SHAPES) + 1, 4):
        ptx = nvrtc_ptx(source(count), "sm_90", "gemm_tc.cu")
        if len(ptx) >= mb * 1e6:
            break
    return ptx


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from mage_tune import toolchain

    with tempfile.TemporaryDirectory(prefix="mage-e2e-") as tmp:
        path = Path(tmp) / "gemm_tc.ptx"
        path.write_text(make_ptx(args.mb))
        ptxas = toolchain.find("ptxas").path
        cubin = Path(tmp) / "out.cubin"
        t_ptxas = _best(
            lambda: subprocess.run(
                [ptxas, "-arch=sm_90", "-v", str(path), "-o", str(cubin)], check=True, capture_output=True
            ),
            args.repeat,
        )

        tools: dict = {}

        def census() -> None:
            cache = tempfile.mkdtemp(dir=tmp)  # an empty cache: ptxas and cuobjdump run again
            env = {**os.environ, "MAGE_TUNE_CACHE": cache}
            cmd = [sys.executable, "-m", "mage_tune", "census", str(path), "--json"]
            done = subprocess.run(cmd, check=True, capture_output=True, env=env, text=True)
            tools.update(json.loads(done.stdout)[0]["tools"])

        t_census = _best(census, args.repeat)
        kernels = path.read_text().count(".entry ")
        size = path.stat().st_size
    result = {
        "ptx_bytes": size,
        "kernels": kernels,
        "ptxas_s": round(t_ptxas, 3),
        "census_s": round(t_census, 3),
        "over_ptxas_s": round(t_census - t_ptxas, 3),
        "target_over_ptxas_s": TARGET_OVER_PTXAS_S,
        "cpus": os.cpu_count(),
        "ptxas_parts": int(tools.get("ptxas parts", 1)),  # the census assembles a large module in parts, side by side
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{size / 1e6:.2f} MB PTX, {kernels} kernels: ptxas {t_ptxas:.2f} s, census end to end {t_census:.2f} s, "
        f"over ptxas {t_census - t_ptxas:.2f} s (target <= {TARGET_OVER_PTXAS_S:.1f} s; {result['ptxas_parts']} "
        f"ptxas part(s) on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
