"""Programmatic dependent launch (griddepcontrol: SASS ACQBULK / PREEXIT), elect.sync (ELECT), Blackwell's
tensor-memory operations other than mma (tcgen05.ld / st / cp / shift / commit: LDTM / STTM / UTCCP / UTCSHIFT /
UTCBAR), global loads and stores with memory-order semantics (volatile, relaxed, acquire, release, mmio: the
STRONG / MMIO modifiers of LDG and STG), the mbarrier operations ptxas writes as SYNCS.ARRIVE.TRANS64.RED… and .OPTOUT,
and the instructions of a called device function, each counted in both views. Every count is checked against the
PTX's own lines or `cuobjdump -sass` of the same cubin."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import count, one_kernel

from mage_tune.census.table import rows

DEPENDENT_LAUNCH = r"""
extern "C" __global__ void scale_after_producer(float* x, int n, int* flag) {
    asm volatile("griddepcontrol.wait;" ::: "memory");  // the producer grid's writes are visible from here
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.f;
    unsigned leader;
    asm volatile("{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 %0, 1, 0, p; }" : "=r"(leader));
    if (leader) atomicAdd(flag, 1);
    asm volatile("griddepcontrol.launch_dependents;");
}
"""

ORDERED = r"""
extern "C" __global__ void flags(volatile int* v, int* x, int* y) {
    int a = v[threadIdx.x];
    int b, c, d;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(b) : "l"(x));
    asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(c) : "l"(x + 1));
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(y), "r"(a + b + c));
    asm volatile("st.relaxed.cta.global.b32 [%0], %1;" ::"l"(y + 1), "r"(a));
    v[threadIdx.x + 32] = b;
    asm volatile("ld.mmio.relaxed.sys.global.b32 %0, [%1];" : "=r"(d) : "l"(x + 2));
    y[2] = d + x[3];  // and two plain ones, no order
}
"""

TENSOR_MEMORY_MOVES = r"""
extern "C" __global__ void __launch_bounds__(128, 1) tmem_moves(unsigned long long desc, float* out) {
    __shared__ unsigned base;
    __shared__ __align__(8) unsigned long long bar;
    unsigned sb = (unsigned)__cvta_generic_to_shared(&base), sm = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x < 32) asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" ::"r"(sb));
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sm));
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;");
    unsigned tmem = base, r0, r1;
    if (threadIdx.x == 0) {
        asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;" ::"r"(tmem), "l"(desc));
        asm volatile("tcgen05.shift.cta_group::1.down [%0];" ::"r"(tmem));
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(sm));
    }
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0; @!p bra W; }" ::"r"(sm));
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(tmem));
    asm volatile("tcgen05.wait::ld.sync.aligned;");
    asm volatile("tcgen05.st.sync.aligned.32x32b.x2.b32 [%0], {%1, %2};" ::"r"(tmem), "r"(r1), "r"(r0));
    asm volatile("tcgen05.wait::st.sync.aligned;");
    out[threadIdx.x] = __uint_as_float(r0 + r1);
    __syncthreads();
    if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" ::"r"(tmem));
}
"""


def _compiled(folder: Path, name: str, source: str, arch: str):
    """(census, the PTX's lines, cuobjdump's listing lines) of a one-kernel source."""
    art, c, sass = one_kernel(folder, name, source, arch)
    return c, art.ptx.splitlines(), sass


def test_a_dependent_launchs_wait_and_trigger_and_an_elect_count_in_both_views(tmp_path):
    c, ptx, sass = _compiled(tmp_path, "pdl.cu", DEPENDENT_LAUNCH, "sm_90")
    waits, triggers = count(ptx, r"griddepcontrol\.wait"), count(ptx, r"griddepcontrol\.launch_dependents")
    assert waits == triggers == 1
    assert count(sass, r"\bACQBULK\b") == waits and count(sass, r"\bPREEXIT\b") == triggers
    assert c.ptx.grid_dependency == c.sass.grid_dependency == {"wait": waits, "launch_dependents": triggers}
    elects = count(ptx, r"\belect\.sync\b")
    assert elects == 1 and c.ptx.elects == elects and c.sass.elects == count(sass, r"\bELECT\b") == 1
    table = dict(rows(c))
    assert table["PTX dependent launch"] == table["SASS dependent launch"] == "launch_dependents 1, wait 1"
    assert table["PTX elects"] == table["SASS elects"] == "1"


def test_ordered_global_accesses_are_counted_by_order_and_scope(tmp_path):
    c, ptx, sass = _compiled(tmp_path, "flags.cu", ORDERED, "sm_90")
    expected = {}
    for line in ptx:
        m = re.match(r"\s*(ld|st)((?:\.\w+)*)\.global\.", line)
        if not m:
            continue
        marks = [
            q
            for q in m.group(2).split(".")
            if q in ("mmio", "volatile", "relaxed", "acquire", "release") or q in ("cta", "cluster", "gpu", "sys")
        ]
        if marks:
            key = ".".join(["load" if m.group(1) == "ld" else "store", *marks])
            expected[key] = expected.get(key, 0) + 1
    assert expected == {
        "load.volatile": 1,
        "load.relaxed.gpu": 1,
        "load.acquire.sys": 1,
        "store.release.gpu": 1,
        "store.relaxed.cta": 1,
        "store.volatile": 1,
        "load.mmio.relaxed.sys": 1,
    }
    assert c.ptx.global_ordering == expected
    listed = {}
    for line in sass:
        m = re.search(r"\b(LDG|STG)\.\S*?\b(STRONG|MMIO)\.(\w+)", line)
        if m:
            key = f"{'load' if m.group(1) == 'LDG' else 'store'}.{m.group(2)}.{m.group(3)}"
            listed[key] = listed.get(key, 0) + 1
    assert sum(listed.values()) == sum(expected.values()) and c.sass.global_ordering == listed
    # the plain load and store stay out of it: all global accesses are more than the ordered ones
    assert sum(c.sass.global_loads.values()) + sum(c.sass.global_stores.values()) == sum(expected.values()) + 2


def test_tensor_memory_moves_count_by_operation_in_both_views(tmp_path):
    c, ptx, sass = _compiled(tmp_path, "tmem.cu", TENSOR_MEMORY_MOVES, "sm_100a")
    ops = {}
    for line in ptx:
        m = re.match(r"\s*(?:@%?\w+\s+)?tcgen05\.([\w:]+)", line)
        if m and m.group(1) != "mma":
            ops[m.group(1).replace("::", "_")] = ops.get(m.group(1).replace("::", "_"), 0) + 1
    assert {"alloc", "dealloc", "cp", "shift", "commit", "ld", "st", "wait_ld", "wait_st"} <= set(ops)
    assert c.ptx.tensor_memory == ops
    own = {"ld": r"\bLDTM\b", "st": r"\bSTTM\b", "cp": r"\bUTCCP\b", "shift": r"\bUTCSHIFT\b", "commit": r"\bUTCBAR\b"}
    listed = {op: count(sass, pattern) for op, pattern in own.items()}
    assert all(listed.values()) and c.sass.tensor_memory == listed
    assert c.ptx.matrix == {} and c.sass.matrix == {}  # moves, not matrix ops


CALLEE_OPS = r"""
__device__ __noinline__ int wait_and_poll(const int* flag) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    unsigned e;
    asm volatile("{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 %0, 1, 0, p; }" : "=r"(e));
    return e ? v : 0;
}
__global__ void twice(const int* flag, int* out) {  // one copy of the function in the kernel's code, called twice
    out[threadIdx.x] = wait_and_poll(flag) + wait_and_poll(flag + 1);
    asm volatile("griddepcontrol.launch_dependents;");
}
"""


def _statements(ptx: str, name: str) -> int:
    """Instruction statements in the body of the kernel or function `name` of nvcc's PTX: the `;`-ended statements
    that are no directive, label or brace (inline asm's `{ .reg .pred p; elect.sync …; }` counts its instructions)."""
    head = re.search(rf"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?{re.escape(name)}\s*\(", ptx)
    text = re.sub(r"//[^\n]*", "", ptx[ptx.index("{", ptx.index(")", head.end())) :])
    end, depth = 0, 1
    while depth:  # to the body's closing brace
        end += 1
        depth += {"{": 1, "}": -1}.get(text[end], 0)
    found = 0
    for chunk in text[1:end].split(";"):
        statement = re.sub(r"^(?:\s*[{}]|\s*[\w$]+\s*:(?!:))*\s*", "", chunk)
        found += bool(re.match(r"[a-z@]", statement))
    return found


def test_a_called_functions_instructions_count_in_the_ptx_view_as_in_the_sass(tmp_path):
    c, ptx, sass = _compiled(tmp_path, "callee.cu", CALLEE_OPS, "sm_90")
    text = "\n".join(ptx)
    assert c.ptx.instructions == _statements(text, c.kernel) + _statements(text, "_Z13wait_and_pollPKi")
    assert count(ptx, r"^\s*call") == 2 and count(sass, r"\bCALL\.") == 2 and count(sass, r"\bRET\.") == 1
    assert count(sass, r"\bACQBULK\b") == count(ptx, r"griddepcontrol\.wait") == 1  # the function's, once
    assert c.ptx.grid_dependency == c.sass.grid_dependency == {"wait": 1, "launch_dependents": 1}
    assert c.ptx.elects == c.sass.elects == count(sass, r"\bELECT\b") == 1
    assert c.ptx.global_ordering == {"load.acquire.gpu": 1} and c.sass.global_ordering == {"load.STRONG.GPU": 1}


MBARRIER_KINDS = r"""
__global__ void __cluster_dims__(2, 1, 1) barrier_kinds(float* y) {
    __shared__ __align__(8) unsigned long long bars[2];
    unsigned b = (unsigned)__cvta_generic_to_shared(&bars[0]), d = (unsigned)__cvta_generic_to_shared(&bars[1]);
    unsigned rank, remote, remote_d;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(b));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(d));
    }
    asm volatile("barrier.cluster.arrive; barrier.cluster.wait;" ::: "memory");
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(b), "r"(rank ^ 1));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_d) : "r"(d), "r"(rank ^ 1));
    if (threadIdx.x == 0) {  // each kind a different number of times, so that no two names can be swapped unseen
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
        asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], 16;" ::"r"(remote)
                     : "memory");
        asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], 16;" ::"r"(b) : "memory");
        asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 16;" ::"r"(b) : "memory");
        asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 16;" ::"r"(d) : "memory");
        asm volatile("{ .reg .b64 s; mbarrier.arrive.shared::cta.b64 s, [%0], 2; }" ::"r"(d) : "memory");
        asm volatile("{ .reg .b64 s; mbarrier.arrive_drop.expect_tx.shared::cta.b64 s, [%0], 16; }" ::"r"(d)
                     : "memory");
        asm volatile("mbarrier.arrive_drop.shared::cta.b64 _, [%0];" ::"r"(d) : "memory");
        asm volatile("mbarrier.arrive_drop.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_d) : "memory");
    }
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], 0; "
                 "@!p bra W; }" ::"r"(b) : "memory");
    asm volatile("barrier.cluster.arrive; barrier.cluster.wait;" ::: "memory");
    y[threadIdx.x] = 1.f;
}
"""


def test_remote_arrivals_transaction_counts_and_drops_have_the_ptx_views_names_in_the_sass(tmp_path):
    c, _, sass = _compiled(tmp_path, "kinds.cu", MBARRIER_KINDS, "sm_90")
    listed = {
        op: count(sass, rf"\bSYNCS\.ARRIVE\.TRANS64{re.escape(op)}\s")
        for op in (
            ".RED.A1T0",
            ".RED",
            ".RED.A0TR",
            ".RED.A0TX",
            ".ART0",
            ".OPTOUT",
            ".OPTOUT.A1T0",
            ".RED.OPTOUT.A1T0",
        )
    }
    # as ptxas 13 writes them for sm_90: a remote arrival, a remote arrive.expect_tx, an expect_tx, two complete_tx
    # (on two barriers: ptxas adds up those on one), an arrival with a count, an arrive_drop.expect_tx, a local and a
    # remote arrive_drop
    assert listed == {
        ".RED.A1T0": 1,
        ".RED": 1,
        ".RED.A0TR": 1,
        ".RED.A0TX": 2,
        ".ART0": 1,
        ".OPTOUT": 1,
        ".OPTOUT.A1T0": 1,
        ".RED.OPTOUT.A1T0": 1,
    }
    kinds = {
        "arrive": 2,
        "arrive_expect_tx": 1,
        "expect_tx": 1,
        "complete_tx": 2,
        "arrive_drop": 2,
        "arrive_drop_expect_tx": 1,
    }
    assert {k: c.ptx.mbarrier.get(k) for k in kinds} == {k: c.sass.mbarrier.get(k) for k in kinds} == kinds
    assert not [k for k in c.sass.mbarrier if k.startswith("SYNCS")]  # no opcode left under its own name
