"""Host emulation of CUDA kernels for tests without a GPU: the rendered source, compiled by g++ for the host, one OS
thread per CUDA thread, blocks one after another (so a function-static array, or one global buffer for dynamic shared
memory, is the block's shared memory), std::barrier for __syncthreads and per-warp barriers for __syncwarp and the
shuffles. A barrier that some thread of the block (or warp) never reaches hangs the emulation, as it would hang the
GPU. Each family's test swaps its inline-PTX helpers for host forms and supplies a main()."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

HOST_SHIM = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct Dim { unsigned x = 0, y = 0, z = 0; };
thread_local Dim threadIdx, blockIdx;
Dim gridDim, blockDim;
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> void __stcs(T* p, T v) { *p = v; }
inline void __trap() { std::abort(); }
inline float __fdividef(float a, float b) { return a / b; }
using std::max;
using std::min;

static std::unique_ptr<std::barrier<>> block_barrier;
static std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
static float lanes[32][32];  // [warp][lane]: the shuffles' exchange
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
inline void __syncwarp() { warp_barriers[threadIdx.x / 32]->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int mask) {
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    lanes[warp][lane] = v;
    __syncwarp();
    const float other = lanes[warp][lane ^ mask];
    __syncwarp();  // every lane has read before the next shuffle writes
    return other;
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
"""


@cache
def host_compiler() -> str | None:
    """g++ where it builds C++20 <barrier> with threads, else None."""
    gxx = shutil.which("g++")
    if gxx is None:
        return None
    probe = "#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n"
    command = [gxx, "-std=c++20", "-pthread", "-x", "c++", "-", "-o", os.devnull]
    done = subprocess.run(command, input=probe, text=True, capture_output=True)
    return gxx if done.returncode == 0 else None
