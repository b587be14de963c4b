"""What the cupy probes (bulk_copy_probe.py, row_copy_probe.py) share: the plain copy they are measured against, the
timer, and the environment they record.

The timer is the median of single launches between CUDA events, each after `evict.fill` writes a buffer larger
than L2 (so the kernel starts cold; the lines it leaves are dirty, for the copy and the probed kernel alike).
"""

from __future__ import annotations

import statistics

import cupy as cp

PLAIN_COPY = r"""
extern "C" __global__ void plain_copy(const float4* __restrict__ src, float4* __restrict__ dst, long n4) {
    const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i < n4) dst[i] = src[i];
}
"""
EVICT_BYTES = 256 * 1024 * 1024
REPS = 20


def evict_buffer():
    return cp.empty(EVICT_BYTES // 4, dtype=cp.float32)


def cold_median_us(launch, evict, reps: int = REPS) -> float:
    start, end, times = cp.cuda.Event(), cp.cuda.Event(), []
    for _ in range(reps):
        evict.fill(1.0)
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1e3)
    return statistics.median(times)


def environment() -> dict:
    props = cp.cuda.runtime.getDeviceProperties(0)
    return {
        "gpu": props["name"].decode(),
        "driver": cp.cuda.runtime.driverGetVersion(),
        "cupy": cp.__version__,
        "nvrtc": cp.cuda.nvrtc.getVersion(),
    }
