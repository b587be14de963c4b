"""CUDA sources as their authors write them (runtime headers, -I, -D, --std, NVRTC or nvcc) and Triton's PTX with
the ptxas options Triton used; every count checked against NVIDIA's tools on the same PTX or cubin."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import KERNELS, count, nvidia_view, ptx_functions, read_res_usage, run_tool, sass_functions, tool

from mage_tune import toolchain
from mage_tune.census import SourceOptions, census_path, load
from mage_tune.cli import cli
from mage_tune.errors import CompileError

HEADERS = KERNELS / "headers"


def test_runtime_headers_found_automatically():
    if not toolchain.cuda_include_dirs():
        pytest.skip("no CUDA headers on this machine")
    art = load(HEADERS / "coop_softmax.cu", "sm_90")
    ref = nvidia_view(art.ptx, "sm_90", "coop_softmax")
    (c,) = census_path(HEADERS / "coop_softmax.cu", arch="sm_90")
    assert c.demangled == "row_softmax"
    assert c.resources.registers == ref["ptxas"][c.kernel]["registers"]
    lines = ptx_functions(art.ptx)[c.kernel]
    assert c.ptx.shuffles == count(lines, r"\bshfl\.sync\.")
    # NVRTC has no host math.h, so INFINITY is undefined there: auto falls back to nvcc where it is present
    assert ("nvcc" in c.tools) == (toolchain.nvcc() is not None)
    with pytest.raises(CompileError) as info:
        census_path(HEADERS / "coop_softmax.cu", arch="sm_90", source_options=SourceOptions(compiler="nvrtc"))
    assert str(info.value).startswith(f"{HEADERS / 'coop_softmax.cu'}:14: ") and "INFINITY" in str(info.value)


@pytest.mark.skipif(toolchain.nvcc() is None, reason="nvcc not found")
def test_nvcc_compiler():
    opts = SourceOptions(compiler="nvcc")
    art = load(HEADERS / "coop_softmax.cu", "sm_89", source_options=opts)
    assert "nvcc" in art.tools and "nvrtc" not in art.tools
    (c,) = census_path(HEADERS / "coop_softmax.cu", arch="sm_89", source_options=opts)
    ref = nvidia_view(art.ptx, "sm_89", "coop_softmax_nvcc")
    assert c.resources.registers == ref["ptxas"][c.kernel]["registers"]
    assert c.sass.shuffles == count(sass_functions(art.sass)[c.kernel], r"\bSHFL\.")


def test_missing_header_names_it_and_the_fix():
    with pytest.raises(CompileError) as info:
        census_path(HEADERS / "scaled_copy.cu", arch="sm_89", source_options=SourceOptions(compiler="nvrtc"))
    message = str(info.value)
    assert message.startswith(f"{HEADERS / 'scaled_copy.cu'}:2: ") and "'scale_helpers.h'" in message
    assert "-I DIR" in message
    out = CliRunner().invoke(cli, ["census", str(HEADERS / "scaled_copy.cu"), "--arch", "sm_89"])
    assert isinstance(out.exception, CompileError) and "scale_helpers.h" in str(out.exception)  # main() exits 2


@pytest.mark.parametrize("unroll", [1, 4])
def test_include_and_define(unroll):
    opts = SourceOptions(includes=(str(HEADERS / "include"),), defines=(f"UNROLL={unroll}",))
    art = load(HEADERS / "scaled_copy.cu", "sm_89", source_options=opts)
    (c,) = census_path(HEADERS / "scaled_copy.cu", arch="sm_89", source_options=opts)
    sass = sass_functions(art.sass)["scaled_copy"]
    assert sum(c.sass.global_loads.values()) == count(sass, r"\bLDG\b") == unroll
    assert (
        sum(c.ptx.global_stores.values()) == count(ptx_functions(art.ptx)["scaled_copy"], r"\bst\.global\.") == unroll
    )


def test_std():
    opts = SourceOptions(includes=(str(HEADERS / "include"),), std="c++20")
    names = [c.demangled for c in census_path(HEADERS / "scaled_copy.cu", arch="sm_89", source_options=opts)]
    assert names == ["negate<float>", "scaled_copy"]
    plain = SourceOptions(includes=(str(HEADERS / "include"),))
    assert [c.demangled for c in census_path(HEADERS / "scaled_copy.cu", arch="sm_89", source_options=plain)] == [
        "scaled_copy"
    ]
    out = CliRunner().invoke(
        cli, ["census", str(HEADERS / "scaled_copy.cu"), "--arch", "sm_89", "-I", str(HEADERS / "include"),
              "-D", "UNROLL=2", "--std", "c++20", "--json", "--kernel", "negate"]
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["demangled"] == "negate<float>"


def test_an_edited_header_is_compiled_again(tmp_path, monkeypatch):
    """The compile cache's key holds every header the source reaches in the user's folders: editing one (or the
    same source beside another header) never returns the old binary."""
    import shutil

    from mage_tune.compile import headers_digest

    monkeypatch.setenv("MAGE_TUNE_CACHE", str(tmp_path / "cache"))
    shutil.copytree(HEADERS, tmp_path / "src")
    source, header = tmp_path / "src" / "scaled_copy.cu", tmp_path / "src" / "include" / "scale_helpers.h"
    opts = SourceOptions(includes=(str(header.parent),))

    def loads() -> int:
        (c,) = census_path(source, arch="sm_89", kernel="scaled_copy", source_options=opts)
        return sum(c.sass.global_loads.values())

    assert loads() == 1
    header.write_text(header.read_text().replace("#define UNROLL 1", "#define UNROLL 4"))
    assert loads() == 4
    assert len(list((tmp_path / "cache" / "compile").iterdir())) == 2
    dirs = [str(header.parent)]
    assert headers_digest('#include "scale_helpers.h"\n', dirs) != headers_digest("", dirs)
    assert headers_digest("#define H <x.h>\n#include H\n", dirs) is None  # a macro names it: not cached


# --- Triton --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def triton_dot(tmp_path_factory):
    """dot_tile (tl.dot) and dot_desc (tl.dot over tensor descriptors) compiled offline for sm_90, each written as
    Triton's cache does: NAME.ptx, NAME.cubin and NAME.json."""
    pytest.importorskip("triton")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(KERNELS / "triton"))
    import dot_tma

    folder = tmp_path_factory.mktemp("triton-dot")
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    sig.update(BM="constexpr", BN="constexpr", BK="constexpr")
    out = {}
    for fn in (dot_tma.dot_tile, dot_tma.dot_desc):
        src = ASTSource(fn=fn, signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 32})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "enable_fp_fusion": True})
        name = k.metadata.name
        (folder / f"{name}.ptx").write_text(k.asm["ptx"])
        (folder / f"{name}.cubin").write_bytes(k.asm["cubin"])
        meta = {key: value for key, value in k.metadata._asdict().items() if key != "target"}
        (folder / f"{name}.json").write_text(json.dumps(meta, default=str))
        out[name] = folder / name
    return out


@pytest.mark.parametrize("name", ["dot_tile", "dot_desc"])
def test_triton_ptx_uses_tritons_ptxas_options(triton_dot, name):
    base = triton_dot[name]
    (c,) = census_path(base.with_suffix(".ptx"))
    assert c.arch == "sm_90a"  # Triton writes .target sm_90a for wgmma
    assert str(base.with_suffix(".json")) in c.tools["ptxas options"] and "-lineinfo" in c.tools["ptxas options"]
    assert c.resources.dynamic_shared_bytes == json.loads(base.with_suffix(".json").read_text())["shared"]
    usage = read_res_usage(run_tool(tool("cuobjdump"), "-res-usage", str(base.with_suffix(".cubin"))))
    assert c.resources.registers == usage[name]["REG"]  # Triton's own binary
    listing = sass_functions(run_tool(tool("cuobjdump"), "-sass", str(base.with_suffix(".cubin"))))[name]
    ptx = ptx_functions(base.with_suffix(".ptx").read_text())[name]
    assert c.ptx.matrix == {"wgmma": count(ptx, r"\bwgmma\.mma_async\b")} and c.ptx.matrix["wgmma"] > 0
    assert c.sass.matrix == {"HGMMA": count(listing, r"\bHGMMA\.")}
    assert c.ptx.wgmma_fences == count(ptx, r"\bwgmma\.fence\b")
    assert c.sass.wgmma_fences == count(listing, r"\bWARPGROUP\.ARRIVE\b")
    tma_loads = count(listing, r"\bUTMALDG\b")
    assert c.sass.bulk.get("load", 0) == tma_loads + count(listing, r"\bUBLKCP\.S\.G\b")
    assert c.sass.bulk.get("store", 0) == count(listing, r"\bUTMASTG\b")
    assert c.ptx.bulk.get("store", 0) == count(ptx, r"\bcp\.async\.bulk\.tensor\.\dd\.global\.shared::cta\b")
    assert (tma_loads > 0) == (name == "dot_desc")
    # the cubin Triton made and the census's assembly of the PTX give the same SASS view
    (from_cubin,) = census_path(base.with_suffix(".cubin"))
    assert from_cubin.sass == c.sass


def test_explicit_ptxas_options_are_used_and_said(triton_dot, tmp_path):
    ptx = tmp_path / "plain.ptx"  # no metadata beside it
    ptx.write_text(Path(triton_dot["dot_tile"]).with_suffix(".ptx").read_text())
    (plain,) = census_path(ptx)
    assert "ptxas options" not in plain.tools
    (slow,) = census_path(ptx, ptxas_options=("-O0",))
    assert slow.tools["ptxas options"] == "-O0 (--ptxas-options)"
    version = slow.tools["ptxas"]
    ptxas = next(t.path for t in toolchain.candidates("ptxas") if t.version == version)
    log = run_tool(ptxas, "-v", "-O0", "-arch=sm_90a", str(ptx), "-o", str(tmp_path / "o.cubin"))
    assert slow.resources.registers == int(re.search(r"Used (\d+) registers", log).group(1))
    assert slow.sass.instructions != plain.sass.instructions
    out = CliRunner().invoke(cli, ["census", str(ptx), "--ptxas-options", "-O0", "--wide"])
    assert out.exit_code == 0 and re.search(r"ptxas options\s+-O0 \(--ptxas-options\)", out.output)


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90", "sm_90a"])
def test_wmma_mma_apart_from_wmma_loads_and_stores(arch):
    art = load(HEADERS / "wmma_gemm.cu", arch)
    (c,) = census_path(HEADERS / "wmma_gemm.cu", arch=arch)
    ptx, sass = ptx_functions(art.ptx)[c.kernel], sass_functions(art.sass)[c.kernel]
    assert c.ptx.matrix == {"wmma": count(ptx, r"\bwmma\.mma\.")}
    assert c.ptx.wmma_loads == count(ptx, r"\bwmma\.load\.") and c.ptx.wmma_loads == 2
    assert c.ptx.wmma_stores == count(ptx, r"\bwmma\.store\.") == 1
    mma = re.compile(r"\bwmma\.mma\.sync\.aligned\.\w+\.\w+\.(m\d+n\d+k\d+)\.(\w+)\.(\w+)")
    shapes = {"wmma." + ".".join(m.groups()) for line in ptx for m in [mma.search(line)] if m}
    assert set(c.ptx.matrix_shapes) == shapes
    assert c.sass.matrix == {"HMMA": count(sass, r"\bHMMA\.")}
    assert sum(c.sass.matrix_loads.values()) == count(sass, r"\bLDSM\.")
    assert c.sass.wmma_loads is None and c.sass.wmma_stores is None


def test_sass_listing_honours_block(tmp_path):
    art = load(HEADERS / "wmma_gemm.cu", "sm_89")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(art.cubin)
    plain = tmp_path / "plain.sass"
    plain.write_text(run_tool(tool("cuobjdump"), "-sass", str(cubin)))
    (c,) = census_path(plain, block=128)
    assert c.occupancy is None and c.resources.registers is None  # a bare listing cannot say
    out = CliRunner().invoke(cli, ["census", str(plain), "--block", "128", "--wide"])
    assert out.exit_code == 0 and "needs the register count" in out.output
    with_usage = tmp_path / "usage.sass"
    with_usage.write_text(run_tool(tool("cuobjdump"), "-res-usage", "-sass", str(cubin)))
    usage = read_res_usage(with_usage.read_text())[c.kernel]
    (c,) = census_path(with_usage, block=128)
    assert c.resources.registers == usage["REG"]
    (from_cubin,) = census_path(cubin, block=128)
    assert c.occupancy == from_cubin.occupancy is not None and c.sass == from_cubin.sass


TEMPLATED = """
#include "scale_impl.cuh"
template <int N>
__global__ void __launch_bounds__(128) scale(const float* __restrict__ a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = N * a[i];
}
template __global__ void scale<4>(const float*, float*, int);  // types only: no names to take
template __global__ void shift<2>(const float*, float*, int);
"""
HEADER_KERNEL = """
template <int N>
__global__ void shift(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + N;
}
"""


def test_parameter_names_come_from_a_definition_never_an_instantiation(tmp_path):
    source = tmp_path / "templated.cu"
    source.write_text(TEMPLATED)
    (tmp_path / "scale_impl.cuh").write_text(HEADER_KERNEL)
    by_name = {c.demangled: c for c in census_path(source, arch="sm_80")}
    scale, shift = by_name["scale<4>"], by_name["shift<2>"]
    assert set(scale.ptx.params) == {"a", "b"}  # from the template's definition, not `const float*` of the line
    assert (scale.ptx.params["a"].loads, scale.ptx.params["b"].stores) == (1, 1)
    # defined in a header the census does not read: PTX's own parameter numbers, each parameter's traffic its own
    assert set(shift.ptx.params) == {"param_0", "param_1"}
    assert (shift.ptx.params["param_0"].loads, shift.ptx.params["param_1"].stores) == (1, 1)


INLINE_REGISTERS = r"""
extern "C" __global__ void flags(unsigned long long* out, int v) {
    unsigned long long r;
    asm volatile("{\n\t.reg .pred p;\n\t.reg .b64 a, b;\n\t"
                 "setp.ne.s32 p, %1, 0;\n\tselp.b64 a, 1, 2, p;\n\tmov.b64 b, a;\n\tmov.b64 %0, b;\n\t}"
                 : "=l"(r) : "r"(v));
    *out = r;
}
"""


def test_every_register_declaration_is_counted(tmp_path):
    source = tmp_path / "flags.cu"
    source.write_text(INLINE_REGISTERS)
    art = load(source, "sm_80")
    (c,) = census_path(source, arch="sm_80")
    declared: dict[str, int] = {}
    for types, names in re.findall(r"\.reg\s+((?:\.\w+\s+)+)([^;]+);", art.ptx):
        kind = types.split()[-1].lstrip(".")
        for name in names.split(","):
            found = re.search(r"<(\d+)>", name)
            declared[kind] = declared.get(kind, 0) + (int(found.group(1)) if found else 1)
    assert c.ptx.registers_declared == declared
    assert declared["pred"] >= 1 and declared["b64"] >= 2  # the asm block's own, beside the compiler's %p<N>, %rd<N>
