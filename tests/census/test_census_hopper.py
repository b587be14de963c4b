"""Hopper-era census fields on kernels written for these tests (tests/fixtures/kernels/hopper/,
tests/fixtures/kernels/ldmatrix_mma.cu),
every count checked against NVIDIA's own output on the same binary: a grep of the PTX, of `cuobjdump -sass`, of
`cuobjdump -elf`, and `ptxas -v`. The reference patterns here are independent of mage_tune.census.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    KERNELS,
    PTX_FENCES,
    SASS_FENCES,
    count,
    nvidia_view,
    opcodes,
    ptx_functions,
    run_tool,
    sass_functions,
    tool,
)

from mage_tune.arch import get_arch
from mage_tune.census import SourceOptions, census_artifact, census_path, load
from mage_tune.errors import InputError

HOPPER = KERNELS / "hopper"
CASES = [
    ("wgmma_tma.cu", get_arch("sm_90a")),
    ("warp_specialized.cu", get_arch("sm_90a")),
    ("cluster_pair.cu", get_arch("sm_90")),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    done = {}
    folder = tmp_path_factory.mktemp("cubins")  # this run's own: two runs at once never share a file

    def _built(path: Path, arch: str):
        if (path, arch) not in done:
            art = load(path, arch)
            ref = nvidia_view(art.ptx, arch, path.stem)
            with_elf = folder / f"{path.stem}-{arch}.cubin"
            with_elf.write_bytes(ref["cubin"])
            elf = run_tool(tool("cuobjdump"), "-elf", str(with_elf))
            sass = sass_functions(run_tool(tool("cuobjdump"), "-sass", str(with_elf)))
            with_elf.unlink()
            done[path, arch] = (art, ref, ptx_functions(art.ptx), sass, elf)
        return done[path, arch]

    return _built


def grep_counter(lines: list[str], pattern: str, key=lambda m: m.group(0)) -> Counter:
    rx = re.compile(pattern)
    return Counter(key(m) for line in lines for m in [rx.search(line)] if m)


def ptx_int(text: str) -> int:
    return int(text.rstrip("uU"), 0)


# --- one test per field family, both views ----------------------------------------------------------------------


@pytest.mark.parametrize(("file", "arch"), CASES)
def test_resources_match_ptxas(built, file, arch):
    art, ref, *_ = built(HOPPER / file, arch)
    for c in census_artifact(art):
        mine = ref["ptxas"][c.kernel]
        assert (c.resources.registers, c.resources.barriers_used) == (mine["registers"], mine["barriers"])
        assert c.resources.shared_bytes == mine.get("smem", 0)
        assert c.arch == arch


@pytest.mark.parametrize(("file", "arch"), CASES)
def test_mbarrier_by_kind(built, file, arch):
    art, _, ptx, sass, _ = built(HOPPER / file, arch)
    sass_kinds = {  # SASS opcode (exact) -> the PTX operation the census files it under
        "SYNCS.EXCH.64": "init",
        "SYNCS.ARRIVE.TRANS64.A1T0": "arrive",
        "SYNCS.ARRIVE.TRANS64": "arrive_expect_tx",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT": "try_wait",
        "SYNCS.PHASECHK.TRANS64": "test_wait",
        "SYNCS.CCTL.IV": "inval",
    }
    for c in census_artifact(art):
        want = grep_counter(
            ptx[c.kernel],
            r"\bmbarrier\.(\w+)(\.expect_tx)?",
            lambda m: m.group(1) + ("_expect_tx" if m.group(2) and m.group(1).startswith("arrive") else ""),
        )
        assert c.ptx.mbarrier == dict(want)
        got = grep_counter(sass[c.kernel], r"\bSYNCS\.[\w.]+", lambda m: sass_kinds[m.group(0)])
        assert c.sass.mbarrier == dict(got)


@pytest.mark.parametrize(("file", "arch"), CASES)
def test_bulk_copies_by_direction(built, file, arch):
    art, _, ptx, sass, _ = built(HOPPER / file, arch)
    for c in census_artifact(art):
        p = ptx[c.kernel]
        multicast = count(p, r"\bcp\.async\.bulk\..*\.multicast::cluster")
        want = {
            "load": count(p, r"\bcp\.async\.bulk(\.tensor\.\dd)?\.shared::cluster\.global\b") - multicast,
            "store": count(p, r"\bcp\.async\.bulk(\.tensor\.\dd)?\.global\.shared::cta\b"),
            "prefetch": count(p, r"\bcp\.async\.bulk\.prefetch\b"),
            "multicast": multicast,
        }
        assert c.ptx.bulk == {k: v for k, v in want.items() if v}
        s = sass[c.kernel]
        want = {
            "load": count(s, r"\bUTMALDG\.\dD\s") + count(s, r"\bUBLKCP\.S\.G\b"),
            "store": count(s, r"\bUTMASTG\b") + count(s, r"\bUBLKCP\.G\.S\b"),
            "prefetch": count(s, r"\bUTMAPF\b"),
            "multicast": count(s, r"\bUTMALDG\.\dD\.MULTICAST\b"),
        }
        assert c.sass.bulk == {k: v for k, v in want.items() if v}
        assert c.ptx.bulk_copies == sum(c.ptx.bulk.values()) and c.sass.bulk_copies == sum(c.sass.bulk.values())
        # commit and wait groups are their own fields, never copies
        assert c.ptx.bulk_commits == count(p, r"\bcp\.async\.bulk\.commit_group\b") == count(s, r"\bUTMACMDFLUSH\b")
        waits = tuple(
            ptx_int(m.group(1)) for m in re.finditer(r"cp\.async\.bulk\.wait_group(?:\.read)?\s+(\w+)", "\n".join(p))
        )
        assert c.ptx.bulk_waits == waits
        sass_waits = tuple(int(m.group(1), 0) for m in re.finditer(r"DEPBAR\.LE SB0, (0x[0-9a-f]+)", "\n".join(s)))
        assert c.sass.bulk_waits == sass_waits
        assert c.ptx.cp_async_wait == c.sass.cp_async_wait == ()


@pytest.mark.parametrize(("file", "arch"), CASES)
def test_wgmma_fields(built, file, arch):
    art, _, ptx, sass, _ = built(HOPPER / file, arch)
    for c in census_artifact(art):
        p, s = ptx[c.kernel], sass[c.kernel]
        shapes = grep_counter(
            p,
            r"\bwgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)\.(\w+)\.(\w+)\.(\w+)",
            lambda m: "wgmma." + ".".join(m.groups()),
        )
        assert {k: v for k, v in c.ptx.matrix_shapes.items() if k.startswith("wgmma")} == dict(shapes)
        assert c.ptx.matrix.get("wgmma", 0) == count(p, r"\bwgmma\.mma_async\b")
        assert c.ptx.wgmma_fences == count(p, r"\bwgmma\.fence\b")
        assert c.ptx.wgmma_commits == count(p, r"\bwgmma\.commit_group\b")
        assert c.ptx.wgmma_waits == tuple(
            ptx_int(m.group(1)) for m in re.finditer(r"\bwgmma\.wait_group\.sync\.aligned\s+(\w+)", "\n".join(p))
        )
        assert c.sass.matrix_shapes == dict(grep_counter(s, r"\bHGMMA\.[\w.]+"))
        assert c.sass.wgmma_fences == count(s, r"\bWARPGROUP\.ARRIVE\b")
        assert c.sass.wgmma_commits == count(s, r"\bHGMMA\..*\bgsb0\b")
        assert c.sass.wgmma_waits == tuple(
            int(m.group(1), 0) for m in re.finditer(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", "\n".join(s))
        )
        # the two views agree on what the kernel does
        assert c.ptx.wgmma_fences == c.sass.wgmma_fences and c.ptx.wgmma_waits == c.sass.wgmma_waits
        assert c.ptx.matrix.get("wgmma", 0) == c.sass.matrix.get("HGMMA", 0)


@pytest.mark.parametrize(("file", "arch"), CASES)
def test_setmaxnreg_and_barriers(built, file, arch):
    art, _, ptx, sass, _ = built(HOPPER / file, arch)
    for c in census_artifact(art):
        p, s = ptx[c.kernel], sass[c.kernel]
        want = [
            (m.group(1), int(m.group(2)))
            for line in p
            for m in [re.search(r"setmaxnreg\.(inc|dec)\S* (\d+)", line)]
            if m
        ]
        assert list(c.ptx.setmaxnreg) == want
        got = [
            ("dec" if m.group(1) == "DEALLOC" else "inc", int(m.group(2), 0))
            for line in s
            for m in [re.search(r"USETMAXREG\.(TRY_ALLOC|DEALLOC)\S*.*?(0x[0-9a-f]+)\s*;", line)]
            if m
        ]
        assert list(c.sass.setmaxnreg) == got
        assert sorted(c.ptx.setmaxnreg) == sorted(c.sass.setmaxnreg)
        cluster = {"arrive": count(p, r"\bbarrier\.cluster\.arrive\b"), "wait": count(p, r"\bbarrier\.cluster\.wait\b")}
        assert c.ptx.cluster_barriers == {k: v for k, v in cluster.items() if v}
        cluster = {"arrive": count(s, r"\bUCGABAR_ARV\b"), "wait": count(s, r"\bUCGABAR_WAIT\b")}
        assert c.sass.cluster_barriers == {k: v for k, v in cluster.items() if v}
        # memory fences by opcode: the proxy fences of TMA code, and the MEMBARs ptxas puts before release arrivals
        assert c.ptx.memory_fences == dict(opcodes(p, PTX_FENCES))
        assert c.sass.memory_fences == dict(opcodes(s, SASS_FENCES))
        # CTA barriers apart from cluster barriers, in both views
        assert c.ptx.barriers == count(p, r"\b(bar|barrier)\.(sync|arrive|red)\b")
        assert c.sass.barriers == count(s, r"\bBAR\.(SYNC|ARV|RED)\b")


@pytest.mark.parametrize(("file", "arch"), CASES)
def test_cluster_shape_and_launch_bounds_from_ptx_and_elf(built, file, arch, tmp_path):
    art, *_, elf = built(HOPPER / file, arch)
    cubin = tmp_path / f"{Path(file).stem}.cubin"
    cubin.write_bytes(art.cubin)
    from_ptx = census_artifact(art)
    from_cubin = census_path(cubin)
    assert [c.kernel for c in from_ptx] == [c.kernel for c in from_cubin]
    sections = re.split(r"^\.nv\.info\.", elf, flags=re.M)
    for a, b in zip(from_ptx, from_cubin, strict=True):
        lines = ptx_functions(art.ptx)[a.kernel]
        section = next(sec for sec in sections[1:] if sec.startswith(a.kernel + "\n"))

        def attr(name, section=section):
            m = re.search(rf"Attribute:\s*{name}\s*\n\s*Format:.*\n\s*(?:Value:\s*)?(.*)", section)
            return m.group(1).strip() if m else None

        dims = re.search(r"\.reqnctapercluster\s+([\d, ]+)", "\n".join(lines))
        elf_dims = attr("EIATTR_CTA_PER_CLUSTER")
        if dims:
            want = tuple(int(v) for v in dims.group(1).replace(",", " ").split())
            assert a.cluster.dims == want == tuple(int(v, 0) for v in elf_dims.split())
        assert (a.cluster is not None and a.cluster.explicit) == any(".explicitcluster" in x for x in lines)
        assert (b.cluster is not None and b.cluster.explicit) == (attr("EIATTR_EXPLICIT_CLUSTER") is not None)
        rank = attr("EIATTR_MAX_CLUSTER_RANK")
        assert (b.cluster.max_rank if b.cluster else None) == (int(rank, 0) if rank else None)
        assert (a.cluster.max_rank if a.cluster else None) == (b.cluster.max_rank if b.cluster else None)
        # The cubin states its launch bounds: occupancy without --block, the same as the PTX's
        threads = attr("EIATTR_MAX_THREADS")
        assert b.launch_bounds["maxntid"] == a.launch_bounds["maxntid"] == math.prod(int(v, 0) for v in threads.split())
        assert b.occupancy == a.occupancy is not None
        # a cubin and its PTX give the same SASS view
        assert b.sass == a.sass
        assert b.resources.registers == a.resources.registers


# --- ldmatrix / stmatrix / mma.sync on every arch that has them ---------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90", "sm_90a"])
def test_ldmatrix_stmatrix_mma(arch):
    art = load(KERNELS / "ldmatrix_mma.cu", arch)
    (c,) = census_artifact(art)
    p = ptx_functions(art.ptx)["tile_mma"]
    s = sass_functions(art.sass)["tile_mma"]

    def ptx_key(m):
        return m.group(1) + (".trans" if m.group(2) else "")

    def sass_key(m):
        return "x" + (m.group(2) or "1") + (".trans" if m.group(1) else "")

    assert c.ptx.matrix_loads == dict(grep_counter(p, r"\bldmatrix\.sync\.aligned\.m8n8\.(x\d)(\.trans)?", ptx_key))
    assert c.ptx.matrix_stores == dict(grep_counter(p, r"\bstmatrix\.sync\.aligned\.m8n8\.(x\d)(\.trans)?", ptx_key))
    assert c.sass.matrix_loads == dict(grep_counter(s, r"\bLDSM\.16\.M(T)?88(?:\.(\d))?\b", sass_key))
    assert c.sass.matrix_stores == dict(grep_counter(s, r"\bSTSM\.16\.M(T)?88(?:\.(\d))?\b", sass_key))
    assert c.ptx.matrix_loads == c.sass.matrix_loads and c.ptx.matrix_stores == c.sass.matrix_stores
    assert bool(c.sass.matrix_stores) == (arch >= "sm_90")
    # matrix loads are apart from LDS, and in shared traffic (4 bytes per 8x8 matrix per thread)
    assert sum(c.sass.shared_loads.values()) == count(s, r"\bLDS(\.\w+)*\s")
    lds_bytes = sum(bits * n for bits, n in c.sass.shared_loads.items()) // 8
    assert c.sass.shared_load_bytes == lds_bytes + 4 * sum(int(k[1]) * n for k, n in c.sass.matrix_loads.items())
    assert c.ptx.matrix_shapes == dict(
        grep_counter(
            p,
            r"\bmma\.sync\.aligned\.(m\d+n\d+k\d+)\.row\.col\.(\w+)\.(\w+)\.(\w+)\.(\w+)",
            lambda m: "mma." + ".".join(m.groups()),
        )
    )
    assert c.sass.matrix_shapes == dict(grep_counter(s, r"\bHMMA\.[\w.]+"))
    assert c.ptx.matrix == {"mma": count(p, r"\bmma\.sync\b")}


# --- PTX forms, targets and what ptxas cannot do ------------------------------------------------------------------


def test_wait_group_in_any_integer_form(tmp_path):
    ptx = load(KERNELS / "cp_async_double.cu", "sm_89").ptx
    plain = census_path(_write(tmp_path / "plain.ptx", ptx))
    assert re.search(r"cp\.async\.wait_group 1;", ptx)
    for form in ("0x1", "1U", "0x1U", "01"):
        (c,) = census_path(
            _write(tmp_path / f"w{form}.ptx", ptx.replace("cp.async.wait_group 1;", f"cp.async.wait_group {form};"))
        )
        assert c.ptx.cp_async_wait == plain[0].ptx.cp_async_wait
        assert c.sass == plain[0].sass


def test_ptx_target_sets_the_arch(built, tmp_path):
    art, *_ = built(HOPPER / "wgmma_tma.cu", "sm_90a")
    path = _write(tmp_path / "k.ptx", art.ptx)
    (c,) = census_path(path)
    assert c.arch == "sm_90a" and c.sass is not None and not c.notes
    with pytest.raises(InputError) as info:
        census_path(path, arch="sm_90")
    assert str(path) in str(info.value) and "--arch sm_90a" in str(info.value)


def test_target_ptxas_cannot_assemble_keeps_the_ptx_view(built, tmp_path, monkeypatch):
    art, *_ = built(HOPPER / "wgmma_tma.cu", "sm_90a")
    path = _write(tmp_path / "k.ptx", art.ptx)
    import mage_tune.arch

    monkeypatch.setattr(mage_tune.arch, "_ptxas_archs", lambda: frozenset({get_arch("sm_80")}))
    (c,) = census_path(path)
    assert c.sass is None and c.ptx.bulk and c.ptx.matrix_shapes
    (note,) = c.notes
    assert note.startswith(f"{path}: no SASS view") and "sm_90a" in note and "CUDA_HOME" in note
    unknown = _write(tmp_path / "old.ptx", re.sub(r"\.target sm_90a", ".target sm_75", art.ptx))
    monkeypatch.undo()
    (c,) = census_path(unknown)
    assert c.sass is None and c.occupancy is None and c.notes[0].startswith(f"{unknown}: no SASS view")
    assert "--arch" in c.notes[0]


def test_cli_note_and_no_traceback(built, tmp_path):
    from click.testing import CliRunner

    from mage_tune.cli import cli

    art, *_ = built(HOPPER / "wgmma_tma.cu", "sm_90a")
    path = _write(tmp_path / "old.ptx", re.sub(r"\.target sm_90a", ".target sm_75", art.ptx))
    out = CliRunner().invoke(cli, ["census", str(path), "--wide"])
    assert out.exit_code == 0, out.output
    assert "no SASS view" in out.output and "PTX bulk copies" in out.output


def test_a_source_that_needs_sm_90a_is_compiled_for_it_where_no_arch_is_given(built):
    # wgmma_tma.cu's wgmma and setmaxnreg exist on sm_90a alone: the default sm_90 would fail in ptxas
    (c,) = census_path(HOPPER / "wgmma_tma.cu")
    (want,) = census_artifact(built(HOPPER / "wgmma_tma.cu", "sm_90a")[0])
    assert c.arch == "sm_90a" and c.resources == want.resources and c.sass.matrix == want.sass.matrix
    (note,) = c.notes
    assert note.startswith(f"{HOPPER / 'wgmma_tma.cu'}: compiled for sm_90a, not the default sm_90")
    assert "wgmma.fence needs sm_90a" in note
    # the same through nvcc (asked for, or where NVRTC cannot take a source), whose ptxas says it in its own words
    (by_nvcc,) = census_path(HOPPER / "wgmma_tma.cu", source_options=SourceOptions(compiler="nvcc"))
    assert by_nvcc.arch == "sm_90a" and by_nvcc.sass.matrix == want.sass.matrix
    assert any("compiled for sm_90a, not the default sm_90" in n for n in by_nvcc.notes)
    with pytest.raises(InputError) as info:  # asked for sm_90 by name: refused, at the PTX's line, not the source's
        census_path(HOPPER / "wgmma_tma.cu", arch="sm_90")
    assert info.value.line is None and "of the PTX compiled from it" in info.value.message
    assert "not supported on .target 'sm_90'" in info.value.message


GUARDED = """extern "C" __global__ void guarded(float* p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;");
    p[threadIdx.x] = 2.f;
#endif
}
"""


def test_a_source_that_keeps_code_to_sm_90a_says_the_default_left_it_out(tmp_path):
    from click.testing import CliRunner

    from mage_tune.cli import cli

    path = _write(tmp_path / "guarded.cu", GUARDED)
    (c,) = census_path(path)
    assert c.arch == "sm_90" and c.ptx.global_stores == {} and c.sass.global_stores == {}
    (note,) = c.notes
    assert "__CUDA_ARCH_FEAT_SM90_ALL is not defined" in note and "--arch chooses the target" in note
    (c,) = census_path(path, arch="sm_90a")  # the code kept to sm_90a, counted; nothing to say
    assert c.ptx.global_stores == {32: 1} and c.sass.global_stores == {32: 1} and not c.notes
    out = CliRunner().invoke(cli, ["census", str(path)])
    assert out.exit_code == 0 and out.stderr.count("__CUDA_ARCH_FEAT_SM90_ALL") == 1, out.output


# --- names and order ------------------------------------------------------------------------------------------------


def test_template_names_and_kernel_selection(tmp_path):
    art = load(KERNELS / "templated_reduce.cu", "sm_89")
    records = census_artifact(art)
    symbols = [c.kernel for c in records]
    filt = subprocess.run(["c++filt", "-p"], input="\n".join(symbols), capture_output=True, text=True)
    if filt.returncode == 0:
        readable = dict(zip(symbols, filt.stdout.split("\n"), strict=False))
        for c in records:
            if c.demangled.startswith("reduce6"):
                assert c.demangled == readable[c.kernel]
    assert {c.demangled for c in records} >= {"reduce6<256u>", "reduce6<512u>", "ops::fill(float*, float)"}
    (c,) = census_artifact(art, kernel="reduce6<512u>")
    assert c.launch_bounds["maxntid"] == 512 and c.occupancy is not None
    (c,) = census_artifact(art, kernel="_Z7reduce6ILj256EEvPKfPfj")
    assert c.demangled == "reduce6<256u>"
    with pytest.raises(InputError) as info:
        census_artifact(art, kernel="reduce6")
    assert "reduce6<256u>" in str(info.value) and "reduce6<512u>" in str(info.value) and art.label in str(info.value)
    with pytest.raises(InputError, match="ops::fill"):
        census_artifact(art, kernel="fill")
    # one order in every input kind
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(art.cubin)
    ptx = _write(tmp_path / "k.ptx", art.ptx)
    assert [c.kernel for c in census_path(cubin)] == [c.kernel for c in census_path(ptx)] == symbols


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
