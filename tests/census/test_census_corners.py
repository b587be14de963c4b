"""Corners of the census found by checking it against NVIDIA's tools on kernels of the kind public repositories hold:
an FP8 mma.sync on sm_89 (SASS QMMA), cp.async completing on an mbarrier (ARRIVES.LDGSTSBAR), st.async and red.async
into a peer block's shared memory (STAS, REDAS), a kernel's own shared arrays kept out of its neighbours' PTX view,
the arch-specific target of a saved listing (sm_90a), a PTX error that no newer ptxas would accept (an error, not a
note to install one), an overloaded name given to --kernel, Blackwell's tcgen05.mma (UTCHMMA) beside its tensor-memory
allocation (whose SB0 waits are no copy's), a -G build's stack (the same from its PTX as from its cubin), the
evict_unchanged load hint (EU), a block-scaled mma's own key, a called function's shared array (its caller's) and
hand-written PTX without parameter lists.
Each count is checked against `cuobjdump -sass` of the same cubin, or the PTX's own lines."""

from __future__ import annotations

import re

import pytest
from conftest import count, cubin_file, cubin_listing, one_kernel, read_ptxas_v, run_tool, tool

from mage_tune import ptx_parts
from mage_tune.census import SourceOptions, census_artifact, census_path, load, ptx
from mage_tune.errors import InputError

FP8_AND_CP_ASYNC_ARRIVE = r"""
#include <cuda_fp8.h>
__global__ void fp8_mma(const unsigned* a, const unsigned* b, float* c) {
    __shared__ float s[1024];
    __shared__ __align__(8) unsigned long long bar;
    unsigned sb = (unsigned)__cvta_generic_to_shared(&bar), ss = (unsigned)__cvta_generic_to_shared(&s[threadIdx.x]);
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(sb));
    __syncthreads();
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(ss), "l"(c + threadIdx.x));
    asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];" ::"r"(sb));
    float d[4] = {0, 0, 0, 0};
    unsigned x[4] = {a[0], a[1], a[2], a[3]}, y[2] = {b[0], b[1]};
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
    c[threadIdx.x] = d[0] + d[1] + d[2] + d[3] + s[threadIdx.x ^ 1];
}
"""

PEER_STORES = r"""
__global__ void __cluster_dims__(2, 1, 1) peer_stores(float* y) {
    __shared__ float buf[64];
    __shared__ __align__(8) unsigned long long bar;
    unsigned b = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x]);
    unsigned m = (unsigned)__cvta_generic_to_shared(&bar), peer, rank, rb, rm;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    peer = rank ^ 1;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(b), "r"(peer));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rm) : "r"(m), "r"(peer));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];"
                 ::"r"(rb), "r"(threadIdx.x), "r"(rm) : "memory");
    asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];"
                 ::"r"(rb), "r"(1u), "r"(rm) : "memory");
    y[threadIdx.x] = buf[threadIdx.x];
}
"""

NEIGHBOURS = r"""
__global__ void tiled(const float* x, float* y) {
    __shared__ float tile[512];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = tile[511 - threadIdx.x];
}
__global__ void plain(const float* x, float* y) { y[threadIdx.x] = 2.f * x[threadIdx.x]; }
"""

OVERLOADS = r"""
namespace lib {
__global__ void fill(float* p, float v) { p[threadIdx.x] = v; }
__global__ void fill(double* p, double v) { p[threadIdx.x] = v; }
}
"""


def test_an_fp8_mma_and_a_cp_async_arrive_count_in_the_sass_as_in_the_ptx(tmp_path):
    _, c, sass = one_kernel(tmp_path, "fp8.cu", FP8_AND_CP_ASYNC_ARRIVE, "sm_89")
    qmma = count(sass, r"\bQMMA\.")
    assert qmma == 1 and c.sass.matrix.get("QMMA") == qmma and c.ptx.matrix == {"mma": 1}
    assert sum(c.sass.matrix_shapes.values()) == sum(c.sass.matrix.values())
    arrives = count(sass, r"\bARRIVES\.LDGSTSBAR\b")
    assert arrives == 1 and c.sass.mbarrier.get("cp_async_arrive") == arrives == c.ptx.mbarrier["cp_async_arrive"]


def test_stores_and_reductions_into_a_peer_blocks_shared_memory_count_in_both_views(tmp_path):
    _, c, sass = one_kernel(tmp_path, "peer.cu", PEER_STORES, "sm_90")
    assert count(sass, r"\bSTAS\b") == 1 and count(sass, r"\bREDAS\b") == 1
    stores = count(sass, r"\bSTS\b") + count(sass, r"\bSTAS\b")
    assert sum(c.sass.shared_stores.values()) == stores == sum(c.ptx.shared_stores.values())
    atomics = count(sass, r"\b(ATOMS?|ATOMG|REDG?|REDAS)\b")
    assert c.sass.atomics == atomics == c.ptx.atomics == 1


def test_a_kernels_own_shared_array_is_not_its_neighbours(tmp_path):
    path = tmp_path / "neighbours.cu"
    path.write_text(NEIGHBOURS)
    found = {c.demangled.split("(")[0]: c for c in census_path(path, arch="sm_90")}
    (tiled,) = found["tiled"].ptx.shared_declared.values()
    assert tiled == 512 * 4 == found["tiled"].resources.shared_bytes
    assert found["plain"].ptx.shared_declared == {} and found["plain"].resources.shared_bytes == 0


def test_a_saved_listing_keeps_its_arch_specific_target(tmp_path):
    path = tmp_path / "neighbours.cu"
    path.write_text(NEIGHBOURS)
    art = load(path, "sm_90a")
    listing = tmp_path / "listing.sass"
    listing.write_text(run_tool(tool("cuobjdump"), "-sass", cubin_file(art, tmp_path)))
    assert "code for sm_90a" in listing.read_text()
    assert {c.arch for c in census_path(listing)} == {"sm_90a"}


def test_a_ptx_error_is_an_error_not_a_ptxas_too_old(tmp_path):
    path = tmp_path / "neighbours.cu"
    path.write_text(NEIGHBOURS)
    ptx = load(path, "sm_90").ptx
    assert ptx.count("add.f32") == 1
    bad = tmp_path / "bad.ptx"
    bad.write_text(ptx.replace("add.f32", "add.f33"))
    with pytest.raises(InputError) as info:
        census_path(bad)
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "add.f33" in text)
    assert info.value.file == str(bad) and info.value.line == line and "install" not in info.value.message
    old = tmp_path / "old.ptx"  # a pre-Volta shuffle: refused from PTX ISA 6.4 on, by every ptxas since
    old.write_text(ptx.replace("add.f32", "shfl.down.b32 %r1, %r1, 1, 31;\n\tadd.f32"))
    with pytest.raises(InputError) as info:
        census_path(old)
    assert "shfl" in info.value.message and "install" not in info.value.message


def test_an_overloaded_name_is_ambiguous_and_says_so(tmp_path):
    path = tmp_path / "overloads.cu"
    path.write_text(OVERLOADS)
    with pytest.raises(InputError) as info:
        census_path(path, arch="sm_90", kernel="fill")
    assert "'fill' matches 2 kernels" in info.value.message
    (c,) = census_path(path, arch="sm_90", kernel="lib::fill(float*, float)")
    assert c.demangled == "lib::fill(float*, float)"


TENSOR_MEMORY = r"""
extern "C" __global__ void __launch_bounds__(128, 1) tc_mma(unsigned long long a, unsigned long long b, unsigned d,
                                                            float* out) {
    __shared__ unsigned base;
    __shared__ __align__(8) unsigned long long bar;
    unsigned sb = (unsigned)__cvta_generic_to_shared(&base), sm = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 128;" ::"r"(sb));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sm));
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;");
    unsigned tmem = base;
    if (threadIdx.x == 0) {
        for (int k = 0; k < 4; ++k)
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %4, 0; "
                         "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p; }"
                         ::"r"(tmem), "l"(a + 2 * k), "l"(b + 2 * k), "r"(d), "r"(k));
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(sm));
    }
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0; @!p bra W; }" ::"r"(sm));
    asm volatile("tcgen05.fence::after_thread_sync;");
    unsigned r;
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(r) : "r"(tmem));
    asm volatile("tcgen05.wait::ld.sync.aligned;");
    out[threadIdx.x] = __uint_as_float(r);
    __syncthreads();
    if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" ::"r"(tmem));
}
"""


def test_blackwell_tensor_memory_mma_counts_in_both_views_and_its_allocation_waits_are_no_copys(tmp_path):
    art, c, sass = one_kernel(tmp_path, "tc.cu", TENSOR_MEMORY, "sm_100a")
    ptx = art.ptx.count("tcgen05.mma.cta_group::1.kind::f16")
    utc = count(sass, r"\bUTCHMMA\b")
    assert ptx >= 1 and utc >= 1
    assert c.ptx.matrix == {"tcgen05": ptx} and c.ptx.matrix_shapes == {"tcgen05.mma.cta_group::1.kind::f16": ptx}
    assert c.sass.matrix == {"UTCHMMA": utc}
    assert count(sass, r"\bDEPBAR\b") >= 1 and count(sass, r"\b(LDGDEPBAR|LDGSTS|UTMACMDFLUSH)\b") == 0
    assert c.sass.cp_async_wait == () and c.sass.bulk_waits in ((), None)


DEBUG_CALLS = r"""
extern "C" __global__ void dbg(const float* x, float* y) { atomicAdd(y, x[threadIdx.x]); }  // -G: a call with a frame
"""


def test_a_debug_builds_stack_is_the_same_from_its_ptx_as_from_its_cubin(tmp_path):
    path = tmp_path / "dbg.cu"
    path.write_text(DEBUG_CALLS)
    art = load(path, "sm_90", source_options=SourceOptions(options=("-G",)))
    (from_source,) = census_artifact(art)
    (from_cubin,) = census_path(cubin_file(art, tmp_path))
    usage = run_tool(tool("cuobjdump"), "-res-usage", cubin_file(art, tmp_path))
    stack = int(usage.split("STACK:")[1].split()[0])
    assert "cumulative stack size" in art.ptxas_log  # the entry's frame alone would say less
    assert from_source.resources.stack_bytes == from_cubin.resources.stack_bytes == stack > 0


HINTS = r"""
__global__ void hints(const float* x, float* y) {
    float v;
    asm volatile("ld.global.L1::evict_unchanged.f32 %0, [%1];" : "=f"(v) : "l"(x + threadIdx.x));
    y[threadIdx.x] = v;
}
"""


def test_the_evict_unchanged_hint_counts_in_the_sass_as_in_the_ptx(tmp_path):
    _, c, sass = one_kernel(tmp_path, "hints.cu", HINTS, "sm_90")
    eu = count(sass, r"\bLDG\.[\w.]*\bEU\b")
    assert eu == 1 and c.sass.global_load_hints.get("EU") == eu == c.ptx.global_load_hints["L1::evict_unchanged"]


def test_a_block_scaled_mma_has_a_key_of_its_own():
    from mage_tune.census.ptx import matrix_shape_key

    def key(opcode: str) -> str:
        return matrix_shape_key(tuple(opcode.split(".")))

    plain = "mma.sync.aligned.kind::f8f6f4.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    scaled = "mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e4m3.f32.ue8m0"
    assert key(plain) == "mma.kind::f8f6f4.m16n8k32.f32.e4m3.e4m3.f32"
    assert key(scaled) == "mma.kind::mxf8f6f4.block_scale.m16n8k32.f32.e4m3.e4m3.f32"
    assert key("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == "mma.m16n8k16.f32.f16.f16.f32"  # as before


DEVICE_LAUNCH = r"""
__global__ void child(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= 2.f;
}
__global__ void parent(float* a, int n) {
    if (threadIdx.x == 0) child<<<(n + 255) / 256, 256>>>(a, n);
}
"""


def test_a_device_side_launch_is_censused_as_relocatable_code_from_source_and_from_its_ptx(tmp_path):
    path = tmp_path / "launch.cu"
    path.write_text(DEVICE_LAUNCH)
    art = load(path, "sm_90", source_options=SourceOptions(options=("-rdc=true",)))
    ptx = tmp_path / "launch.ptx"
    ptx.write_text(art.ptx)
    with pytest.raises(AssertionError):  # ptxas alone refuses it: the launch's runtime is in another file
        run_tool(tool("ptxas"), "-arch=sm_90", str(ptx), "-o", str(tmp_path / "no.cubin"))
    log = run_tool(tool("ptxas"), "-c", "-v", "-arch=sm_90", str(ptx), "-o", str(tmp_path / "launch.cubin"))
    want = {name: report["registers"] for name, report in read_ptxas_v(log).items() if "registers" in report}
    from_source = census_artifact(art)
    from_ptx = census_path(ptx)
    for found in (from_source, from_ptx):
        assert {c.kernel: c.resources.registers for c in found} == want and len(want) == 2
    (note,) = {n for c in from_ptx for n in c.notes}
    assert "assembled as relocatable device code (ptxas -c" in note and "__cudaCDP2" in note
    assert not any(c.notes for c in from_source)  # -rdc=true asked for it: nothing to say


BOUNDED = r"""
__global__ void __launch_bounds__(256, 4) bounded(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }
"""


def test_a_block_over_the_launch_bounds_cannot_launch_and_says_so(tmp_path):
    path = tmp_path / "bounded.cu"
    path.write_text(BOUNDED)
    art = load(path, "sm_90")
    (fits,) = census_artifact(art, block=256)
    (over,) = census_artifact(art, block=512)
    assert fits.occupancy.blocks_per_sm > 0 and fits.occupancy.limiter != "invalid" and not fits.notes
    assert over.launch_bounds["maxntid"] == 256 and over.occupancy.block == 512
    assert (over.occupancy.blocks_per_sm, over.occupancy.warps_per_sm, over.occupancy.limiter) == (0, 0, "invalid")
    (note,) = over.notes
    assert "a block of 512 threads cannot launch it" in note and "256 at most" in note


def test_a_cubin_without_barriers_says_0_as_its_ptx_does(tmp_path):
    path = tmp_path / "neighbours.cu"
    path.write_text(NEIGHBOURS)  # tiled syncs its block; plain uses no barrier
    art = load(path, "sm_90")
    from_ptx = {c.demangled: c.resources for c in census_artifact(art)}
    from_cubin = {c.demangled: c.resources for c in census_path(cubin_file(art, tmp_path))}
    elf = run_tool(tool("cuobjdump"), "-elf", cubin_file(art, tmp_path))
    assert elf.count("EIATTR_NUM_BARRIERS") == 1  # written for the kernel that uses one alone
    for name, resources in from_cubin.items():
        assert resources.barriers_used == from_ptx[name].barriers_used, name
        assert resources.sources["barriers_used"] == "cuobjdump -elf"
    assert sorted(r.barriers_used for r in from_cubin.values()) == [0, 1]


def test_the_table_shows_every_note(tmp_path):
    import dataclasses

    from mage_tune.census.table import render, rows

    path = tmp_path / "neighbours.cu"
    path.write_text(NEIGHBOURS)
    c = census_path(path, arch="sm_90")[0]
    two = dataclasses.replace(c, notes=("first thing to say", "second thing to say"))
    table = render([(c.demangled, rows(two))], mark_differences=False)
    assert "first thing to say" in table and "second thing to say" in table


def test_kernels_side_by_side_share_one_occupancy_row_whether_or_not_each_has_one(tmp_path):
    from mage_tune.census.table import render, rows

    path = tmp_path / "bounds.cu"
    path.write_text(
        "__global__ void __launch_bounds__(128) bounded(float* y) { y[threadIdx.x] = 1.f; }\n"
        "__global__ void unbounded(float* y) { y[threadIdx.x] = 2.f; }\n"
    )
    found = {c.demangled.split("(")[0]: c for c in census_path(path, arch="sm_90")}
    assert found["bounded"].occupancy is not None and found["unbounded"].occupancy is None
    table = render([(name, rows(c)) for name, c in sorted(found.items())])
    (line,) = [line for line in table.splitlines() if "occupancy" in line]
    assert "needs --block" in line and "%" in line


EXTERN_CALL = r"""
extern __device__ float helper(float);
__global__ void calls(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); }
"""


def test_a_large_ptx_in_parts_keeps_each_parts_note(tmp_path):
    from mage_tune.arch import get_arch
    from mage_tune.compile import _from_ptx_in_parts

    path = tmp_path / "calls.cu"
    path.write_text(EXTERN_CALL + NEIGHBOURS)  # a call into another file beside two plain kernels: three kernels
    ptx = load(path, "sm_90", source_options=SourceOptions(options=("-rdc=true",))).ptx
    art = _from_ptx_in_parts(ptx, get_arch("sm_90"), "calls.ptx", (), parts=3)
    assert art.tools["ptxas parts"] == "3"
    (note,) = art.notes
    assert "assembled as relocatable device code" in note


CALLED_SHARED = r"""
__device__ __noinline__ float helper(const float* x) {
    __shared__ float buf[256];
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    return buf[255 - threadIdx.x];
}
__device__ __noinline__ float outer(const float* x) { return helper(x) * 2.f; }
__global__ void calls(const float* x, float* y) { y[threadIdx.x] = outer(x); }
__global__ void own(const float* x, float* y) {
    __shared__ float t[64];
    t[threadIdx.x & 63] = x[0];
    __syncthreads();
    y[threadIdx.x] = t[threadIdx.x & 63];
}
"""


def test_a_called_functions_shared_array_is_its_callers_through_every_call(tmp_path):
    path = tmp_path / "called.cu"
    path.write_text(CALLED_SHARED)
    art = load(path, "sm_90")
    assert ".func" in art.ptx and art.ptx.count("_ZZ6helperPKfE3buf[1024]") == 1  # declared in the helper's body
    usage = run_tool(tool("cuobjdump"), "-res-usage", cubin_file(art, tmp_path))
    found = {c.demangled.split("(")[0]: c for c in census_artifact(art)}
    for name, declared in (("calls", {"_ZZ6helperPKfE3buf": 1024}), ("own", {"_ZZ3ownPKfPfE1t": 256})):
        c = found[name]
        listed = int(usage.split(f"Function {c.kernel}:")[1].split("SHARED:")[1].split()[0])
        assert c.ptx.shared_declared == declared
        assert sum(declared.values()) == c.resources.shared_bytes == listed - 1024  # cuobjdump adds the reservation


CALLED_DEEP = r"""
__device__ __noinline__ float block_sum(float v) {
    __shared__ float red[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    return red[0];
}
__device__ __noinline__ float block_mean_sq(float v) {  // calls block_sum: two levels
    __shared__ float stash[256];
    stash[threadIdx.x] = v * v;
    __syncthreads();
    return block_sum(stash[(threadIdx.x + 1) % blockDim.x]) / blockDim.x;
}
__device__ __noinline__ int rec_depth(int d, int* log) {  // recursion: -rdc calls a module-local copy
    __shared__ int scratch[64];
    scratch[threadIdx.x & 63] = d;
    if (d <= 0) return scratch[0];
    log[d] = scratch[(threadIdx.x + d) & 63];
    return rec_depth(d - 1, log) + 1;
}
__device__ float staged(const float* x) {  // inlined; under -rdc also a function, its array at module scope
    __shared__ float buf[256];
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    return buf[255 - threadIdx.x];
}
__global__ void inl(const float* x, float* y) { y[threadIdx.x] = staged(x); }
__global__ void rms(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x] * rsqrtf(block_mean_sq(x[0])); }
__global__ void sum(const float* x, float* y) { y[blockIdx.x] = block_sum(x[threadIdx.x]); }
__global__ void rec(int* log, int d) { log[0] = rec_depth(d, log); }
__global__ void plain(float* y) {  // printf: a call to vprintf, declared and never defined in the PTX
    y[threadIdx.x] = 1.f;
    printf("%d\n", threadIdx.x);
}
"""


@pytest.mark.parametrize("relocatable", [False, True], ids=["whole", "relocatable"])
def test_a_kernels_shared_arrays_are_those_of_the_functions_it_reaches_and_no_others(tmp_path, relocatable):
    """Relocatable code declares a function's static __shared__ at module scope where two places name it (a recursive
    function's module-local copy, a function also inlined): it is still only the blocks' whose code names it, as
    ptxas -v says of the PTX assembled whole (the PTX calls nothing outside itself but vprintf; assembled
    relocatable, ptxas counts a kernel's own arrays alone, the linker adds the rest)."""
    path = tmp_path / "deep.cu"
    path.write_text(CALLED_DEEP)
    options = ("-rdc=true",) if relocatable else ()
    art = load(path, "sm_90", source_options=SourceOptions(options=options))
    ptx = tmp_path / "deep.ptx"
    ptx.write_text(art.ptx)
    module_scope = re.search(r"^\.shared\b.*_ZZ9rec_depthiPiE7scratch", art.ptx, re.M)  # not indented in a body
    assert bool(module_scope) == relocatable
    log = run_tool(tool("ptxas"), "-v", "-arch=sm_90", str(ptx), "-o", str(tmp_path / "deep.cubin"))
    smem = {name: report.get("smem", 0) for name, report in read_ptxas_v(log).items()}
    found = {c.demangled.split("(")[0]: c for c in census_artifact(art)}
    assert set(found) == {"rms", "sum", "rec", "plain", "inl"} and ".extern .func" in art.ptx
    for c in found.values():
        assert sum(c.ptx.shared_declared.values()) == smem[c.kernel]
        assert relocatable or c.resources.shared_bytes == smem[c.kernel]
    assert found["plain"].ptx.shared_declared == {} and smem[found["sum"].kernel] == 128
    assert set(found["rms"].ptx.shared_declared) == {"_ZZ13block_mean_sqfE5stash", "_ZZ9block_sumfE3red"}
    assert found["inl"].ptx.shared_declared == {"_ZZ6stagedPKfE3buf": 1024}


WIDE = r"""
__global__ void copy256(const float* x, float* y, int n) {
    int i = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 8 > n) return;
    float a0, a1, a2, a3, a4, a5, a6, a7;
    asm volatile("ld.global.nc.L2::256B.v8.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=f"(a0), "=f"(a1), "=f"(a2), "=f"(a3), "=f"(a4), "=f"(a5), "=f"(a6), "=f"(a7) : "l"(x + i));
    asm volatile("st.global.v8.f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8};"
                 :: "l"(y + i), "f"(a0), "f"(a1), "f"(a2), "f"(a3), "f"(a4), "f"(a5), "f"(a6), "f"(a7));
}
"""


def test_a_256_bit_access_is_256_bits_in_both_views(tmp_path):
    _, c, sass = one_kernel(tmp_path, "wide.cu", WIDE, "sm_100a")
    loads, stores = count(sass, r"\bLDG\.\S*\b256\b"), count(sass, r"\bSTG\.\S*\b256\b")
    assert loads == stores == 1
    assert c.sass.global_loads == {256: loads} == c.ptx.global_loads
    assert c.sass.global_stores == {256: stores} == c.ptx.global_stores
    assert c.sass.bytes_in_flight == c.ptx.bytes_in_flight == 32


POINTER_CALL = r"""
__device__ __noinline__ float staged(const float* x) {
    __shared__ float buf[256];
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    return buf[255 - threadIdx.x];
}
__device__ __noinline__ float direct_only(const float* x) { return 2.f * x[0]; }  // its address never taken
typedef float (*unary)(const float*);
__device__ unary table[1] = {staged};
__global__ void through_table(const float* x, float* y, int i) { y[threadIdx.x] = table[i](x); }
__global__ void direct(const float* x, float* y) { y[threadIdx.x] = direct_only(x); }
"""


def test_a_call_through_a_pointer_reaches_the_functions_whose_address_is_taken(tmp_path):
    path = tmp_path / "pointer.cu"
    path.write_text(POINTER_CALL)
    art = load(path, "sm_90")
    assert ".callprototype" in art.ptx  # the call names no function
    listing = cubin_listing(art, tmp_path)
    found = {c.demangled.split("(")[0]: c for c in census_artifact(art)}
    c, sass = found["through_table"], listing[found["through_table"].kernel]
    assert count(sass, r"\bBAR\.SYNC\b") == c.sass.barriers == c.ptx.barriers == 1  # staged's, in the kernel's code
    assert c.ptx.shared_declared == {"_ZZ6stagedPKfE3buf": 1024} and c.resources.shared_bytes == 1024
    loads = count(sass, r"\b(LDG|LD)\.")  # the table's entry and staged's x; direct_only's is not in this kernel
    for view in (c.ptx, c.sass):
        assert sum(view.global_loads.values()) + sum(view.generic_loads.values()) == loads == 2
    assert found["direct"].ptx.barriers == 0 and found["direct"].ptx.shared_declared == {}


# Hand-written PTX may leave out an empty parameter list (`.entry k { ... }`, `.func f { ... }`), as ptxas accepts;
# nvcc and LLVM always write one. A forward declaration of such a function ends in `;`.
NO_PARAMETER_LISTS = """
.version 8.0
.target sm_90
.address_size 64

.func helper;

.visible .entry plain
.maxntid 128, 1, 1
{
\t.reg .b32 \t%r<3>;
\tmov.u32 \t%r1, %tid.x;
\tcall helper;
\tbar.sync \t1;
\tret;
}

.func helper
{
\tbar.sync \t0;
\tret;
}

.visible .entry with_params(.param .u64 out)
{
\t.reg .b64 \t%rd<2>;
\tld.param.u64 \t%rd1, [out];
\tret;
}
"""


def test_ptx_without_parameter_lists_is_read_with_its_calls(tmp_path):
    """A kernel and a function written without a parameter list: the kernel is found (its block from .maxntid, no
    parameters), its call reaches the function's barrier as ptxas puts it in the kernel's code, the forward
    declaration counts nothing, and the next kernel's parameters are still read."""
    path = tmp_path / "bare.ptx"
    path.write_text(NO_PARAMETER_LISTS)
    art = load(path, "sm_90")
    listing = cubin_listing(art, tmp_path)
    found = {c.kernel: c for c in census_artifact(art)}
    assert set(found) == {"plain", "with_params"}
    c = found["plain"]
    assert c.occupancy.block == 128 and c.ptx.params == {}
    assert count(listing["plain"], r"\bBAR\.SYNC\b") == c.sass.barriers == c.ptx.barriers == 2
    kernels = {k.name: k for k in ptx.parse(NO_PARAMETER_LISTS, "bare.ptx").kernels}
    assert kernels["plain"].params == () and [name for name, _ in kernels["with_params"].params] == ["out"]
    assert ptx_parts.entry_params(NO_PARAMETER_LISTS, "plain") == []
    assert ptx_parts.entry_params(NO_PARAMETER_LISTS, "with_params") == [("out", "int", 8)]
    assert ptx_parts.entry_params(NO_PARAMETER_LISTS, "helper") is None  # a function, not a kernel


RELOCATABLE_CALLS = r"""
__device__ __noinline__ float helper(float x) { return x * x + 1.0f; }
__device__ void far_away(float* p);  // defined in another file: the linker resolves it
__global__ void squares(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); far_away(p); }
__global__ void spin(int* flag) { while (atomicAdd(flag, 0) == 0) {} }
"""


def test_a_saved_listing_of_relocatable_code_lists_its_kernels_not_its_device_functions(tmp_path):
    """A -rdc object's `cuobjdump -sass` lists each device function as a function of its own, and a listing keeps
    no symbol table to say which are kernels: a function that returns (RET) and never exits (EXIT) is a device
    function, as the object's own symbol table says (STO_CUDA_ENTRY); a listing of device functions alone holds
    no kernel."""
    path = tmp_path / "calls.cu"
    path.write_text(RELOCATABLE_CALLS)
    art = load(path, "sm_90", source_options=SourceOptions(options=("-rdc=true",)))
    listing_text = run_tool(tool("cuobjdump"), "-sass", cubin_file(art, tmp_path))
    listing = tmp_path / "calls.sass"
    listing.write_text(listing_text)
    functions = {name.split("(")[0] for name in cubin_listing(art, tmp_path)}
    assert functions == {"_Z6helperf", "_Z7squaresPf", "_Z4spinPi"}  # what cuobjdump lists
    from_binary = {c.kernel for c in census_artifact(art)}
    assert from_binary == {c.kernel for c in census_path(listing)} == {"_Z7squaresPf", "_Z4spinPi"}
    helper_only = re.search(r"\n[^\n]*Function : _Z6helperf.*?(?=\n[^\n]*Function :|\Z)", listing_text, re.S)
    header = listing_text[: listing_text.index("Function :")].rsplit("\n", 1)[0]
    (tmp_path / "helper.sass").write_text(header + helper_only.group(0))
    with pytest.raises(InputError, match="device functions, none an entry"):
        census_path(tmp_path / "helper.sass")
