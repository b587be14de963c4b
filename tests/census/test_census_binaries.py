"""Binaries nvcc writes beside cubins: a fatbinary holding SASS for two archs (in a host object, a .fatbin or a
saved listing of either), and relocatable (-rdc=true) or debug (-G) code, which keeps device functions apart.

The fixtures in tests/fixtures/kernels/binaries/ are compiled here with nvcc. The expected numbers come from
cuobjdump on the same file, split by arch and read with this file's own patterns (and conftest's), never from the
census.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import KERNELS, RES_USAGE_RESERVED, ptx_functions, read_res_usage, run_tool, sass_functions, tool

from mage_tune import toolchain
from mage_tune.census import SourceOptions, census_path, load
from mage_tune.cli import cli
from mage_tune.errors import InputError

BINARIES = KERNELS / "binaries"
ARCHS = ("sm_80", "sm_90")
# SASS for sm_80 and sm_90, and sm_90's PTX (which the census leaves out: the SASS is what runs)
TWO_ARCHS = ("-gencode", "arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=[sm_90,compute_90]")

pytestmark = pytest.mark.skipif(toolchain.nvcc() is None, reason="nvcc not found")


def nvcc(source: Path, out: Path, *options: str) -> Path:
    run = subprocess.run(
        [toolchain.nvcc().path, *options, "-o", str(out), str(source)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr or run.stdout
    return out


def cuobjdump(*args: str) -> str:
    return run_tool(tool("cuobjdump"), *args)


def by_arch(text: str) -> dict[str, str]:
    """cuobjdump's text of each ELF in a fatbinary, by the arch its header names (PTX parts left out)."""
    parts = re.split(r"^(?=Fatbin (?:elf|ptx) code:)", text, flags=re.M)
    return {
        re.search(r"^arch = (\w+)", part, re.M).group(1): part for part in parts if part.startswith("Fatbin elf code:")
    }


def entries(elf_dump: str) -> set[str]:
    """Functions the ELF symbol table marks as kernels: type FUNC (info & 0xf == 2), `other` with STO_CUDA_ENTRY
    (0x10)."""
    symtab = elf_dump.split(".section .symtab", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\s*\S+\s+\S+\s+\S+\s+(0x[0-9a-f]+|0)\s+(0x[0-9a-f]+|0)\s+\S+\s+(\S+)\s*$", symtab, re.M)
    return {name for info, other, name in rows if int(info, 16) & 0xF == 2 and int(other, 16) & 0x10}


def shared_of(usage: dict[str, int], arch: str) -> int:
    """Static shared bytes from -res-usage's SHARED, which holds the sm_90 reservation where it is not 0."""
    return usage["SHARED"] - RES_USAGE_RESERVED[arch] if usage["SHARED"] else 0


@pytest.fixture(scope="module")
def fat(tmp_path_factory) -> dict[str, Path]:
    """two_arch.cu as a host object, a .fatbin and a saved `cuobjdump -sass` listing of the object."""
    folder = tmp_path_factory.mktemp("fat")
    source = BINARIES / "two_arch.cu"
    obj = nvcc(source, folder / "two_arch.o", *TWO_ARCHS, "-c")
    listing = folder / "two_arch.sass"
    listing.write_text(cuobjdump("-sass", str(obj)))
    return {
        "object": obj,
        "fatbin": nvcc(source, folder / "two_arch.fatbin", *TWO_ARCHS, "-fatbin"),
        "listing": listing,
    }


@pytest.mark.parametrize("form", ["object", "fatbin", "listing"])
def test_fatbinary_is_censused_one_arch_at_a_time(fat, form):
    obj = str(fat["object"])  # the object, the .fatbin and the listing hold the same code
    listings = by_arch(cuobjdump("-sass", obj))
    usage = {arch: read_res_usage(text) for arch, text in by_arch(cuobjdump("-res-usage", obj)).items()}
    assert sorted(listings) == list(ARCHS) and "Fatbin ptx code:" in cuobjdump("-sass", obj)  # PTX left out
    records = census_path(fat[form])
    assert [(c.arch, c.demangled) for c in records] == [(a, k) for a in ARCHS for k in ("axpy", "stage_sum")]
    for c in records:
        sass = sass_functions(listings[c.arch])[c.kernel]
        assert c.sass.instructions == len(sass)
        assert c.sass.barriers == sum("BAR.SYNC" in line for line in sass)
        assert f"holds SASS for {', '.join(ARCHS)}" in " ".join(c.notes)
        if form != "listing":  # a listing holds no resource report
            assert c.resources.registers == usage[c.arch][c.kernel]["REG"]
            assert c.resources.shared_bytes == shared_of(usage[c.arch][c.kernel], c.arch)
    stage = [c for c in records if c.demangled == "stage_sum"]
    if form != "listing":  # the fixture's tile differs by arch, and so does each record
        assert [c.resources.shared_bytes for c in stage] == [256 * 4, 512 * 4]


def test_each_arch_equals_its_own_cubin(fat, tmp_path):
    """The records of one arch of a fatbinary are those of that arch's cubin, extracted by cuobjdump."""
    subprocess.run([tool("cuobjdump"), "-xelf", "all", str(fat["object"])], cwd=tmp_path, check=True, timeout=300)
    cubins = {re.search(r"sm_\d+", p.name).group(0): p for p in tmp_path.glob("*.cubin")}
    assert sorted(cubins) == list(ARCHS)
    apart = ("source", "notes")
    for arch, cubin in cubins.items():
        want = [{k: v for k, v in c.to_json().items() if k not in apart} for c in census_path(cubin)]
        got = [{k: v for k, v in c.to_json().items() if k not in apart} for c in census_path(fat["object"], arch)]
        assert got == want


@pytest.mark.parametrize("form", ["object", "listing"])
def test_arch_option_chooses_one_arch(fat, form):
    records = census_path(fat[form], arch="sm_90")
    assert [(c.arch, c.demangled) for c in records] == [("sm_90", "axpy"), ("sm_90", "stage_sum")]
    assert not any("holds SASS for" in note for c in records for note in c.notes)
    with pytest.raises(InputError, match=r"holds SASS for sm_80, sm_90, none for --arch sm_89") as err:
        census_path(fat[form], arch="sm_89")
    assert err.value.file == str(fat[form])
    with pytest.raises(InputError, match=r"holds SASS for sm_80, sm_90: pass --arch"):
        load(fat[form])  # one artifact: an arch must be chosen


def test_kernel_option_picks_the_kernel_of_each_arch(fat):
    records = census_path(fat["object"], kernel="stage_sum")
    assert [(c.arch, c.demangled) for c in records] == [("sm_80", "stage_sum"), ("sm_90", "stage_sum")]
    (only,) = census_path(fat["object"], arch="sm_80", kernel="axpy")
    assert (only.arch, only.kernel) == ("sm_80", "axpy")
    with pytest.raises(InputError, match="no kernel named 'gemm'"):
        census_path(fat["object"], kernel="gemm")


def test_cli_table_names_the_arch_where_a_kernel_appears_twice(fat):
    result = CliRunner().invoke(cli, ["census", str(fat["object"]), "--wide"])
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()[0]
    for arch in ARCHS:
        assert f"axpy ({arch})" in header and f"stage_sum ({arch})" in header
    result = CliRunner().invoke(cli, ["census", str(fat["object"]), "--arch", "sm_90", "--kernel", "axpy", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert (record["kernel"], record["arch"]) == ("axpy", "sm_90")


def test_ptx_only_binary_is_an_error_that_says_so(tmp_path):
    path = nvcc(
        BINARIES / "two_arch.cu", tmp_path / "ptx_only.fatbin", "-gencode=arch=compute_90,code=compute_90", "-fatbin"
    )
    assert "Fatbin elf code:" not in cuobjdump("-elf", str(path))
    with pytest.raises(InputError, match=r"holds PTX only \(for sm_90\), no SASS: `cuobjdump -xptx all"):
        census_path(path)


# --- relocatable and debug code: kernels are the entry functions -----------------------------------------------

DEVICE_CALLS = BINARIES / "device_calls.cu"
RELOCATABLE = {"rdc cubin": ("-rdc=true", "-cubin"), "-G cubin": ("-G", "-cubin"), "rdc object": ("-rdc=true", "-c")}


@pytest.mark.parametrize("form", RELOCATABLE)
def test_only_entry_functions_are_kernels(form, tmp_path):
    path = nvcc(DEVICE_CALLS, tmp_path / f"device_calls{'.o' if form.endswith('object') else '.cubin'}",
                "-arch=sm_90", *RELOCATABLE[form])  # fmt: skip
    dump = cuobjdump("-elf", str(path))
    kernels = entries(dump)
    assert kernels == set(re.findall(r"^(?:\.section )?\.nv\.constant0\.(\S+)$", dump, re.M))
    usage = read_res_usage(cuobjdump("-res-usage", str(path)))
    assert kernels < set(usage)  # cuobjdump lists the device functions too: what the fixture is for
    records = census_path(path)
    assert {c.kernel for c in records} == kernels
    for c in records:
        assert c.resources.registers == usage[c.kernel]["REG"]


def test_nvdisasm_listing_marks_the_entries(tmp_path):
    cubin = nvcc(DEVICE_CALLS, tmp_path / "device_calls.cubin", "-arch=sm_90", "-rdc=true", "-cubin")
    listing = tmp_path / "device_calls.nvdisasm.txt"
    listing.write_text(run_tool(tool("nvdisasm"), str(cubin)))
    kernels = entries(cuobjdump("-elf", str(cubin)))
    assert {c.kernel for c in census_path(listing)} == kernels


@pytest.mark.parametrize("form", ["cu -G", "ptx -rdc"])
def test_sources_report_their_entries_whatever_the_sass_lists(form, tmp_path):
    """A .cu's or a PTX's kernels are its .entry functions, though relocatable or -G SASS lists the device functions
    beside them."""
    if form == "cu -G":
        path, options = DEVICE_CALLS, {"source_options": SourceOptions(options=("-G",))}
    else:
        path = nvcc(DEVICE_CALLS, tmp_path / "device_calls.ptx", "-arch=sm_90", "-rdc=true", "-ptx")
        options = {"ptxas_options": ("-c",)}  # relocatable, as nvcc -rdc=true assembles it
    art = load(path, "sm_90", **options)
    assert set(sass_functions(art.sass)) > set(ptx_functions(art.ptx))  # device functions listed apart
    assert {c.kernel for c in census_path(path, "sm_90", **options)} == set(ptx_functions(art.ptx))


def test_device_code_without_a_kernel_is_an_error(tmp_path):
    path = nvcc(BINARIES / "device_only.cu", tmp_path / "device_only.cubin", "-arch=sm_90", "-rdc=true", "-cubin")
    assert entries(cuobjdump("-elf", str(path))) == set()
    with pytest.raises(InputError, match=r"holds no kernel: its functions \(_Z5twicef\) are device functions"):
        census_path(path)


def test_a_relocatable_objects_shared_memory_has_no_reservation_to_take_out(tmp_path):
    """cuobjdump folds the 1 KB reservation into SHARED on sm_90 once code is linked, not in a relocatable ELF: its
    SHARED is ptxas's own number, and nothing is taken out of it."""
    obj = nvcc(BINARIES / "two_arch.cu", tmp_path / "rdc.o", "-c", "-rdc=true", "-arch=sm_90")
    usage = read_res_usage(cuobjdump("-res-usage", str(obj)))
    assert "type=ET_REL" in cuobjdump("-elf", str(obj))
    found = {c.kernel: c.resources for c in census_path(obj)}
    assert found and set(found) <= set(usage)
    for name, resources in found.items():
        assert resources.shared_bytes == usage[name]["SHARED"], name
    assert max(r.shared_bytes for r in found.values()) == 512 * 4  # stage_sum's sm_90 tile


def test_a_kernel_in_two_files_of_one_executable_is_counted_once(tmp_path):
    """Two files that instantiate one template kernel, linked into one executable: one ELF each, the same code; the
    census counts it once (both listings were summed)."""
    source = "template <int N> __global__ void k(float* p) { p[threadIdx.x] = N; }\n"
    objects = []
    for name, n in (("a", 4), ("b", 4)):
        cu = tmp_path / f"{name}.cu"
        cu.write_text(source + f"void launch_{name}(float* p) {{ k<{n}><<<1, 32>>>(p); }}\n")
        objects.append(str(nvcc(cu, tmp_path / f"{name}.o", "-c", "-arch=sm_90")))
    main = tmp_path / "main.cu"
    main.write_text("void launch_a(float*); void launch_b(float*);\nint main() { launch_a(0); launch_b(0); }\n")
    exe = tmp_path / "ab"
    run = subprocess.run(
        [toolchain.nvcc().path, "-arch=sm_90", "-o", str(exe), str(main), *objects], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    listing = cuobjdump("-sass", str(exe))
    (kernel,) = {name for name in re.findall(r"Function : (\S+)", listing)}
    copies = [lines for lines in re.split(r"Function : \S+", listing)[1:]]
    assert len(copies) == 2 and copies[0].count("STG") == copies[1].count("STG") == 1  # two ELFs, one store each
    (c,) = census_path(exe)
    assert c.kernel == kernel and c.sass.global_stores == {32: 1}


def test_compare_of_two_fatbinaries_pairs_each_kernel_by_arch(fat):
    runner = CliRunner()
    out = runner.invoke(cli, ["census", str(fat["object"]), "--compare", str(fat["fatbin"]), "--kernel", "stage_sum"])
    assert out.exit_code == 0, out.output
    tables = out.output.strip().split("\n\n")
    assert len(tables) == len(ARCHS)  # one table per arch, both files' stage_sum in each
    for table in tables:  # the same code in both files: within an arch nothing differs but the notes' file names
        marked = [line for line in table.splitlines() if line.startswith("≠")]
        assert all(re.match(r"≠\s+note\b", line) for line in marked), marked


def test_a_build_for_a_variant_refuses_relocatable_code():
    from mage_tune.arch import get_arch
    from mage_tune.compile import build_from_cu

    source = (BINARIES / "two_arch.cu").read_text()
    with pytest.raises(InputError, match="-rdc=true is for the census of a file"):
        build_from_cu(source, get_arch("sm_90"), "v.cu", source_options=SourceOptions(options=("-rdc=true",)))
