"""The census of real compiled kernels, every asserted count checked against NVIDIA's own tools on the same binary.

Each kernel in tests/fixtures/kernels/ is compiled by the census (NVRTC -> ptxas -> cuobjdump) for sm_80, sm_89
and sm_90.
The reference numbers never come from the census: conftest runs `ptxas -v` on the census's PTX, `cuobjdump
-res-usage` and `cuobjdump -sass` on the resulting cubin, and greps PTX and SASS lines with its own patterns.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    ARCHS,
    KERNELS,
    PTX_FENCES,
    RES_USAGE_RESERVED,
    SASS_FENCES,
    count,
    nvidia_view,
    nvrtc_compile,
    opcodes,
    ptx_functions,
    read_res_usage,
    run_tool,
    sass_functions,
    tool,
    triton_tool,
)

from mage_tune.census import census_artifact, census_path
from mage_tune.census.occupancy import occupancy
from mage_tune.errors import InputError

FILES = sorted(p.name for p in KERNELS.glob("*.cu"))

# Independent patterns, one per census category: what a person would grep for.
PTX_TOTALS = {
    "global_loads": r"\bldu?\.global\.",
    "global_stores": r"\bst\.global\.",
    "shared_loads": r"\bld\.shared(::cta)?\.",
    "shared_stores": r"\bst\.shared(::cta)?\.",
    "local_loads": r"\bld\.local\.",
    "local_stores": r"\bst\.local\.",
    "cp_async": r"\bcp\.async\.c[ag]\.shared(::\w+)?\.global\b",
}
PTX_SCALARS = {
    "cp_async_commits": r"\bcp\.async\.commit_group\b",
    "barriers": r"\bbar(rier)?\.sync\b",
    "shuffles": r"\bshfl\.sync\.",
}
SASS_TOTALS = {
    "global_loads": r"\bLDG\b",
    "global_stores": r"\bSTG\b",
    "shared_loads": r"\bLDS\b",
    "shared_stores": r"\bSTS\b",
    "local_loads": r"\bLDL\b",
    "local_stores": r"\bSTL\b",
    "cp_async": r"\bLDGSTS\b",
}
SASS_SCALARS = {
    "cp_async_commits": r"\bLDGDEPBAR\b",
    "barriers": r"\bBAR\.SYNC\b",
    "shuffles": r"\bSHFL\.",
}


def mufu(lines: list[str]) -> Counter:
    return Counter(m.group(0) for line in lines for m in [re.search(r"\bMUFU\.\w+", line)] if m)


def ptx_waits(lines: list[str]) -> tuple[int, ...]:
    return tuple(int(m.group(1)) for line in lines for m in [re.search(r"\bcp\.async\.wait_group\s+(\d+)", line)] if m)


def sass_waits(lines: list[str]) -> tuple[int, ...]:
    found = (re.search(r"\bDEPBAR\.LE\s+SB0\s*,\s*(0x[0-9a-f]+|\d+)", line) for line in lines)
    return tuple(int(m.group(1), 0) for m in found if m)


# --- resources: ptxas -v and cuobjdump -res-usage ----------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("file", FILES)
def test_resources_match_ptxas_and_res_usage(build, file, arch):
    b = build(file, arch)
    records = b.census()
    assert set(records) == set(b.ptxas) == set(b.res_usage)
    for name, c in records.items():
        mine, usage, r = b.ptxas[name], b.res_usage[name], c.resources
        assert r.registers == mine["registers"] == usage["REG"]
        assert r.stack_bytes == mine["stack"] == usage["STACK"]
        assert r.spill_store_bytes == mine["spill_stores"]
        assert r.spill_load_bytes == mine["spill_loads"]
        assert r.barriers_used == mine["barriers"]
        assert r.shared_bytes == mine.get("smem", 0)
        # On sm_90 cuobjdump folds the 1 KB per-block reservation into SHARED of a kernel that has static shared
        # memory (SHARED stays 0 for one without); the census reports shared memory without it, as ptxas does.
        reserved = RES_USAGE_RESERVED[arch] if usage["SHARED"] else 0
        assert r.shared_bytes == usage["SHARED"] - reserved
        assert r.sources["registers"] == "ptxas -v"
        assert c.arch == arch


# --- every category, both views, against a grep -------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("file", FILES)
def test_counts_match_grep(build, file, arch):
    b = build(file, arch)
    for name, c in b.census().items():
        ptx, sass = b.ptx[name], b.sass[name]
        for key, pattern in PTX_TOTALS.items():
            assert sum(getattr(c.ptx, key).values()) == count(ptx, pattern), f"PTX {key}"
        for key, pattern in PTX_SCALARS.items():
            assert getattr(c.ptx, key) == count(ptx, pattern), f"PTX {key}"
        assert c.ptx.cp_async_wait == ptx_waits(ptx)
        for key, pattern in SASS_TOTALS.items():
            assert sum(getattr(c.sass, key).values()) == count(sass, pattern), f"SASS {key}"
        for key, pattern in SASS_SCALARS.items():
            assert getattr(c.sass, key) == count(sass, pattern), f"SASS {key}"
        assert c.sass.cp_async_wait == sass_waits(sass)
        assert c.sass.special == dict(mufu(sass))
        assert c.ptx.memory_fences == dict(opcodes(ptx, PTX_FENCES))
        assert c.sass.memory_fences == dict(opcodes(sass, SASS_FENCES))


@pytest.mark.parametrize("arch", ARCHS)
def test_float4_scale(build, arch):
    b = build("vec_scale.cu", arch)
    c = b.only()
    ptx, sass = b.ptx["vec_scale"], b.sass["vec_scale"]
    assert count(ptx, r"\bld\.global\.nc\.v4\.f32\b") == 1
    assert count(ptx, r"\bst\.global\.v4\.f32\b") == 1
    assert count(sass, r"\bLDG\.E\.128\b") == 1
    assert count(sass, r"\bSTG\.E\.128\b") == 1
    for view in (c.ptx, c.sass):
        assert view.global_loads == {128: 1}
        assert view.global_stores == {128: 1}
        assert view.barriers == view.shuffles == 0
    assert c.ptx.global_load_hints == {"nc": count(ptx, r"\bld\.global\.nc\.")}
    assert c.sass.global_load_hints == {"CONSTANT": count(sass, r"\bLDG\.E\.128\.CONSTANT\b")}
    params = c.ptx.params
    assert (params["in"].loads, params["in"].load_bits, params["in"].stores) == (1, {128: 1}, 0)
    assert (params["out"].stores, params["out"].store_bits, params["out"].loads) == (1, {128: 1}, 0)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("file", "depth", "groups"), [("cp_async_double.cu", 1, 2), ("cp_async_single.cu", 0, 1)])
def test_cp_async(build, file, arch, depth, groups):
    b = build(file, arch)
    name = Path(file).stem
    c = b.only()
    ptx, sass = b.ptx[name], b.sass[name]
    copies_ptx = count(ptx, r"\bcp\.async\.cg\.shared\.global\s+\[[^\]]+\],\s*\[[^\]]+\],\s*16\s*;")
    copies_sass = count(sass, r"\bLDGSTS\.E\.BYPASS\.128\b")
    assert copies_ptx >= 2
    assert c.ptx.cp_async == {128: copies_ptx}
    assert c.sass.cp_async == {128: copies_sass}
    assert c.ptx.cp_async_commits == count(ptx, r"\bcp\.async\.commit_group\b")
    assert c.sass.cp_async_commits == count(sass, r"\bLDGDEPBAR\b")
    assert set(ptx_waits(ptx)) == {depth} and c.ptx.cp_async_wait == ptx_waits(ptx)
    assert set(sass_waits(sass)) == {depth} and c.sass.cp_async_wait == sass_waits(sass)
    assert c.ptx.shared_loads == {128: count(ptx, r"\bld\.shared\.v4\.f32\b")}
    assert c.sass.shared_loads == {128: count(sass, r"\bLDS\.128\b")}
    # Double buffering keeps the next tile's group outstanding while the current one is used; single does not.
    assert c.ptx.cp_async_groups_in_flight == c.sass.cp_async_groups_in_flight == groups
    assert c.ptx.params["in"].load_bits == {128: copies_ptx}


@pytest.mark.parametrize("arch", ARCHS)
def test_spills(build, arch):
    b = build("spill.cu", arch)
    c = b.only()
    mine = b.ptxas["spill"]
    assert mine["spill_stores"] > 0 and mine["spill_loads"] > 0
    assert c.resources.spill_store_bytes == mine["spill_stores"]
    assert c.resources.spill_load_bytes == mine["spill_loads"]
    assert c.resources.stack_bytes == mine["stack"] == b.res_usage["spill"]["STACK"] > 0
    # Spills exist only in SASS; the PTX holds the dynamically indexed local array.
    ptx, sass = b.ptx["spill"], b.sass["spill"]
    assert sum(c.ptx.local_stores.values()) == count(ptx, r"\bst\.local\.") > 0
    assert sum(c.sass.local_stores.values()) == count(sass, r"\bSTL\b") > sum(c.ptx.local_stores.values())
    assert sum(c.sass.local_loads.values()) == count(sass, r"\bLDL\b") > sum(c.ptx.local_loads.values())


@pytest.mark.parametrize("arch", ARCHS)
def test_shuffle_reduction(build, arch):
    b = build("shuffle_reduce.cu", arch)
    c = b.only()
    assert count(b.ptx["shuffle_reduce"], r"\bshfl\.sync\.bfly\.b32\b") == 5
    assert count(b.sass["shuffle_reduce"], r"\bSHFL\.BFLY\b") == 5
    assert c.ptx.shuffles == c.sass.shuffles == 5


@pytest.mark.parametrize("arch", ARCHS)
def test_named_barrier(build, arch):
    b = build("named_barrier.cu", arch)
    c = b.only()
    ptx, sass = b.ptx["named_barrier"], b.sass["named_barrier"]
    assert count(ptx, r"\bbar\.sync\s+1,\s*64\b") == 1
    assert count(sass, r"\bBAR\.SYNC(\.DEFER_BLOCKING)?\s+0x1,\s*0x40\b") == 1
    assert c.ptx.barriers == count(ptx, r"\bbar\.sync\b") == 2
    assert c.sass.barriers == count(sass, r"\bBAR\.SYNC\b") == 2
    assert c.resources.barriers_used == b.ptxas["named_barrier"]["barriers"] == 2


@pytest.mark.parametrize("arch", ARCHS)
def test_memory_fences_by_form_and_scope(build, arch):
    """Five fences in the source, each as its author wrote it in PTX and as one MEMBAR of its scope in SASS."""
    b = build("fences.cu", arch)
    c = b.only()
    assert c.ptx.memory_fences == {
        "membar.cta": 1,
        "membar.gl": 1,
        "membar.sys": 1,
        "fence.acq_rel.gpu": 1,
        "fence.sc.cta": 1,
    }
    scopes = Counter(op.rsplit(".", 1)[1] for op, n in c.sass.memory_fences.items() for _ in range(n))
    assert all(op.startswith("MEMBAR.") for op in c.sass.memory_fences)
    assert scopes == {"CTA": 2, "GPU": 2, "SYS": 1}


@pytest.mark.parametrize("arch", ARCHS)
def test_rsqrt(build, arch):
    b = build("rsqrt.cu", arch)
    c = b.only()
    assert c.ptx.special == {"rsqrt.approx": count(b.ptx["inv_norm"], r"\brsqrt\.approx(\.ftz)?\.f32\b")}
    assert c.sass.special == {"MUFU.RSQ": count(b.sass["inv_norm"], r"\bMUFU\.RSQ\b")}
    assert c.ptx.special["rsqrt.approx"] == c.sass.special["MUFU.RSQ"] == 1


# --- loads in flight --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_loads_in_flight(build, arch):
    b = build("flight.cu", arch)
    records = b.census()
    two, chase = records["two_loads"], records["chase"]
    # Both float4 loads are issued before either is used.
    assert count(b.sass["two_loads"], r"\bLDG\.E\.128\b") == 2
    assert two.ptx.loads_in_flight >= 2 and two.sass.loads_in_flight >= 2
    assert two.ptx.bytes_in_flight == two.sass.bytes_in_flight == 32
    # `i = next[i]`: each load's address is the previous load's value.
    assert count(b.sass["chase"], r"\bLDG\b") == sum(chase.sass.global_loads.values()) > 1
    assert chase.ptx.loads_in_flight == chase.sass.loads_in_flight == 1
    assert two.ptx.cp_async_groups_in_flight == chase.ptx.cp_async_groups_in_flight == 0


# --- occupancy --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("file", "block"), [("vec_scale.cu", 256), ("cp_async_double.cu", 256), ("spill.cu", 1024)])
def test_occupancy_from_ptxas_numbers(build, file, arch, block):
    b = build(file, arch)
    c = b.only(block=block)
    mine = b.ptxas[c.kernel]
    # A block always owns barrier 0, whether or not ptxas counts it.
    expected = occupancy(arch, block, mine["registers"], mine.get("smem", 0), barriers=max(1, mine["barriers"]))
    assert c.occupancy == expected
    assert c.to_json()["occupancy"]["blocks_per_sm"] == expected.blocks_per_sm


@pytest.mark.parametrize("arch", ARCHS)
def test_occupancy_from_launch_bounds(build, arch):
    """No --block: .maxntid from __launch_bounds__(256) decides the block."""
    b = build("cp_async_double.cu", arch)
    c = b.only()
    mine = b.ptxas["cp_async_double"]
    assert c.launch_bounds.get("maxntid") == 256
    assert c.occupancy == occupancy(arch, 256, mine["registers"], mine["smem"], barriers=max(1, mine["barriers"]))


# --- kernel names -------------------------------------------------------------------------------------------------


def demangled_by_cxxfilt(symbol: str) -> str | None:
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        return None
    return subprocess.run([cxxfilt, symbol], capture_output=True, text=True, check=True).stdout.strip()


def test_kernel_by_mangled_and_demangled_name(build):
    b = build("mangled.cu", "sm_89")
    functions = set(b.sass)  # the symbols cuobjdump names in the cubin
    assert functions == {"_Z5scaleILi4EEvPf", "_Z12scale_kernelPfi"} == set(b.census())
    for wanted, symbol in [
        ("scale_kernel", "_Z12scale_kernelPfi"),
        ("_Z12scale_kernelPfi", "_Z12scale_kernelPfi"),
        ("scale", "_Z5scaleILi4EEvPf"),
        ("_Z5scaleILi4EEvPf", "_Z5scaleILi4EEvPf"),
    ]:
        (c,) = census_path(KERNELS / "mangled.cu", arch="sm_89", kernel=wanted)
        assert c.kernel == symbol
        full = demangled_by_cxxfilt(symbol)
        if full:  # "scale_kernel(float*, int)", "void scale<4>(float*)": the name, template arguments kept
            assert re.sub(r"^void ", "", full.split("(")[0]) == c.demangled
    (c,) = census_path(KERNELS / "mangled.cu", arch="sm_89", kernel="scale_kernel")
    assert list(c.ptx.params) == ["p"]
    assert c.ptx.global_loads == c.sass.global_loads == {32: count(b.sass["_Z12scale_kernelPfi"], r"\bLDG\.E\b")}
    with pytest.raises(InputError, match="_Z12scale_kernelPfi"):
        census_path(KERNELS / "mangled.cu", arch="sm_89", kernel="nope")


def test_a_cu_file_without_a_kernel_is_one_error_naming_the_file_only(tmp_path):
    """No line number: the compiler's PTX has lines, the user's file has no kernel at all."""
    source = tmp_path / "helper.cu"
    source.write_text("__device__ int twice(int a) { return 2 * a; }\n")
    with pytest.raises(InputError) as raised:
        census_path(source, arch="sm_90")
    assert (
        str(raised.value) == f"{source}: holds no kernel: no .entry in its PTX (a .cu file needs a __global__ function)"
    )


def test_multi_kernel_file_gives_every_kernel(build):
    b = build("flight.cu", "sm_90")
    records = census_path(KERNELS / "flight.cu", arch="sm_90")
    assert {c.kernel for c in records} == set(b.sass) == set(b.ptx) == {"two_loads", "chase"}
    params = {c.kernel: list(c.ptx.params) for c in records}
    assert params == {"two_loads": ["a", "b", "out"], "chase": ["next", "out"]}


# --- inputs: .cu, .ptx, .cubin, cuobjdump and nvdisasm listings ----------------------------------------------------


def _without_params(view):
    return dataclasses.replace(view, params=None)


@pytest.mark.parametrize(("file", "arch"), [("flight.cu", "sm_80"), ("cp_async_double.cu", "sm_90")])
def test_every_input_form(build, tmp_path, file, arch):
    b = build(file, arch)
    from_cu = b.census(block=256)
    stem = Path(file).stem
    ptx_file = tmp_path / f"{stem}.ptx"
    ptx_file.write_text(nvrtc_compile((KERNELS / file).read_text(), arch, file))
    cubin = tmp_path / f"{stem}.cubin"
    run_tool(tool("ptxas"), f"-arch={arch}", str(ptx_file), "-o", str(cubin))
    by_cuobjdump = tmp_path / f"{stem}.cuobjdump.sass"
    by_cuobjdump.write_text(run_tool(tool("cuobjdump"), "-sass", str(cubin)))
    by_nvdisasm = tmp_path / f"{stem}.nvdisasm.sass"
    by_nvdisasm.write_text(run_tool(tool("nvdisasm"), str(cubin)))
    usage = read_res_usage(run_tool(tool("cuobjdump"), "-res-usage", str(cubin)))
    # Our own assembly of the same PTX disassembles to the listing the census compile grepped elsewhere.
    assert sass_functions(by_cuobjdump.read_text()) == b.sass

    forms = {p.name: {c.kernel: c for c in census_path(p, block=256)} for p in (ptx_file, cubin)}
    assert census_path(cubin, arch=arch, block=256)[0].arch == arch  # its own arch named: taken
    other = "sm_90" if arch == "sm_80" else "sm_80"
    with pytest.raises(InputError, match=f"the cubin is built for {arch}, not --arch {other}"):
        census_path(cubin, arch=other)  # a cubin's arch is what it was built for: never silently another
    forms.update({p.name: {c.kernel: c for c in census_path(p)} for p in (by_cuobjdump, by_nvdisasm)})
    for form, records in forms.items():
        assert set(records) == set(from_cu), form
        assert all(c.arch == arch for c in records.values()), form

    for name, ref in from_cu.items():
        from_ptx = forms[ptx_file.name][name]
        assert _without_params(from_ptx.ptx) == _without_params(ref.ptx)
        assert list(from_ptx.ptx.params) == [f"param_{i}" for i in range(len(from_ptx.ptx.params))]
        assert from_ptx.sass == ref.sass
        assert from_ptx.resources == ref.resources

        from_cubin = forms[cubin.name][name]
        assert from_cubin.ptx is None
        assert from_cubin.sass == ref.sass
        # Without a ptxas report the numbers come from -res-usage, the sm_90 reservation taken out once.
        assert from_cubin.resources.registers == usage[name]["REG"] == b.ptxas[name]["registers"]
        assert from_cubin.resources.shared_bytes == b.ptxas[name].get("smem", 0)
        took_out = "minus the 1024 B reservation" in from_cubin.resources.sources["shared_bytes"]
        assert took_out == (arch == "sm_90" and usage[name]["SHARED"] > 0)
        assert from_cubin.occupancy == ref.occupancy

        for listing in (by_cuobjdump, by_nvdisasm):
            from_sass = forms[listing.name][name]
            assert from_sass.sass == from_cubin.sass, listing.name
            assert from_sass.ptx is None and from_sass.resources.registers is None


# --- Triton's norm_kernel -----------------------------------------------------------------------------------------


def test_triton_norm_kernel(triton_norm, tmp_path):
    import triton_norm as norm

    compiled, art = triton_norm
    (c,) = census_artifact(art, param_names=norm.param_names())
    assert c.kernel == "norm_kernel" and c.arch == "sm_89"

    # NVIDIA's tools, run here: Triton's bundled ptxas on Triton's PTX, cuobjdump on Triton's cubin.
    ref = nvidia_view(art.ptx, "sm_89", "norm_kernel", ptxas_path=triton_tool("ptxas"))
    cubin = tmp_path / "norm.cubin"
    cubin.write_bytes(art.cubin)
    sass = sass_functions(run_tool(tool("cuobjdump"), "-sass", str(cubin)))["norm_kernel"]
    usage = read_res_usage(run_tool(tool("cuobjdump"), "-res-usage", str(cubin)))["norm_kernel"]
    ptx = ptx_functions(art.ptx)["norm_kernel"]

    params = re.findall(r"\.param\s+\.\w+.*?\b(norm_kernel_param_\d+)", "\n".join(ptx))
    assert len(params) == 9  # 7 arguments, plus the two scratch pointers Triton 3.9 appends

    assert count(ptx, r"\bld\.global\.b32\b") == 24
    assert count(ptx, r"\bst\.global\.b32\b") == 8
    assert count(ptx, r"\bbar\.sync\b") == 3
    assert count(ptx, r"\bshfl\.sync\.bfly\.b32\b") == 14
    assert count(sass, r"\bLDG\.E\s") == 24
    assert count(sass, r"\bSTG\.E\s") == 8
    assert count(sass, r"\bBAR\.SYNC\.DEFER_BLOCKING\b") == 3
    assert count(sass, r"\bSHFL\.BFLY\b") == 14
    for view in (c.ptx, c.sass):
        assert view.global_loads == {32: 24}
        assert view.global_stores == {32: 8}
        assert view.barriers == 3
        assert view.shuffles == 14
    loads = {name: (acc.loads, acc.load_bits) for name, acc in c.ptx.params.items() if acc.loads}
    assert loads == {"x_ptr": (8, {32: 8}), "scale_ptr": (8, {32: 8}), "bias_ptr": (8, {32: 8})}
    assert (c.ptx.params["y_ptr"].stores, c.ptx.params["y_ptr"].store_bits) == (8, {32: 8})

    # 1 / tl.sqrt(var + eps): an approximate square root and a full-precision division, MUFU.SQRT + MUFU.RCP.
    assert count(ptx, r"\bsqrt\.approx(\.ftz)?\.f32\b") == c.ptx.special["sqrt.approx"] >= 1
    assert count(ptx, r"\bdiv\.full\.f32\b") == c.ptx.special["div.full"] >= 1
    assert c.sass.special == dict(mufu(sass))
    assert c.sass.special["MUFU.SQRT"] >= 1 and c.sass.special["MUFU.RCP"] >= 1

    mine = ref["ptxas"]["norm_kernel"]
    assert c.resources.registers == mine["registers"] == usage["REG"]
    assert c.resources.spill_store_bytes == mine["spill_stores"] == 0
    assert c.resources.dynamic_shared_bytes == compiled.metadata.shared
    block = 32 * norm.NUM_WARPS
    assert c.launch_bounds.get("reqntid") == block
    shared = mine.get("smem", 0) + compiled.metadata.shared
    assert c.occupancy == occupancy("sm_89", block, mine["registers"], shared, barriers=max(1, mine["barriers"]))
