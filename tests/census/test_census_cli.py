"""`mage-tune census` on the command line: the table, the versioned JSON, --kernel, --compare and --help.

In-process runs go through click's CliRunner on `mage_tune.cli.cli`; the console entry point (`python -m mage_tune`,
which is `mage_tune.cli.main()`) runs in a subprocess where the exit code and stderr matter. Expected numbers come
from our own `ptxas -v` runs (conftest's `build`), not from earlier census output.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import KERNELS, count

from mage_tune.census.occupancy import occupancy
from mage_tune.cli import cli

TOP_KEYS = {
    "schema",
    "kernel",
    "demangled",
    "source",
    "arch",
    "registers",
    "shared_bytes",
    "dynamic_shared_bytes",
    "stack_bytes",
    "spill_store_bytes",
    "spill_load_bytes",
    "local_bytes",
    "barriers_used",
    "resource_sources",
    "occupancy",
    "launch_bounds",
    "tools",
    "ptx",
    "sass",
    "notes",
    "cluster",
}
OCCUPANCY_KEYS = {"block", "blocks_per_sm", "warps_per_sm", "fraction", "limiter"}
VIEW_KEYS = {
    "global_loads",
    "global_stores",
    "shared_loads",
    "shared_stores",
    "local_loads",
    "local_stores",
    "cp_async",
    "cp_async_wait",
    "barriers",
    "shuffles",
    "special",
    "loads_in_flight",
    "matrix_loads",
    "matrix_stores",
    "mbarrier",
    "bulk",
    "bulk_waits",
    "wgmma_waits",
    "setmaxnreg",
    "cluster_barriers",
    "memory_fences",
    "grid_dependency",
    "elects",
    "tensor_memory",
    "global_ordering",
}


def invoke(*args: str):
    result = CliRunner().invoke(cli, ["census", *args])
    assert result.exit_code == 0, result.output
    return result.output


def rows_of(table: str) -> dict[str, list[str]]:
    """Table row name -> its cells; columns are separated by two or more spaces, a leading '≠' marks a difference."""
    found = {}
    for line in table.splitlines()[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == "≠":
            found[cells[1]] = ["≠", *cells[2:]]
        else:
            found[cells[0]] = cells[1:]
    return found


def test_table(build):
    b = build("vec_scale.cu", "sm_89")
    mine = b.ptxas["vec_scale"]
    rows = rows_of(invoke(str(KERNELS / "vec_scale.cu"), "--arch", "sm_89", "--block", "256"))
    assert rows["arch"] == ["sm_89"]
    assert rows["registers"] == [f"{mine['registers']} [ptxas -v]"]
    assert rows["spill stores / loads (bytes)"] == [f"{mine['spill_stores']} / {mine['spill_loads']}"]
    assert rows["PTX global loads"] == [f"{count(b.ptx['vec_scale'], r'ld.global.nc.v4.f32')}×128b"] == ["1×128b"]
    assert rows["SASS global loads"] == [f"{count(b.sass['vec_scale'], r'LDG.E.128')}×128b"] == ["1×128b"]
    assert rows["PTX global stores"] == rows["SASS global stores"] == ["1×128b"]
    occ = occupancy("sm_89", 256, mine["registers"], mine.get("smem", 0), barriers=max(1, mine["barriers"]))
    assert rows["block"] == ["256"]
    assert rows["blocks / warps per SM"] == [f"{occ.blocks_per_sm} / {occ.warps_per_sm}"]
    assert rows["occupancy (limiter)"] == [f"{occ.fraction:.0%} ({occ.limiter})"]
    assert rows["PTX global traffic by parameter"] == ["in: ld 1 (128b); out: st 1 (128b)"]


def test_json_record(build):
    b = build("cp_async_double.cu", "sm_90")
    mine, usage = b.ptxas["cp_async_double"], b.res_usage["cp_async_double"]
    record = json.loads(invoke(str(KERNELS / "cp_async_double.cu"), "--arch", "sm_90", "--block", "128", "--json"))
    assert isinstance(record, dict)
    assert record["schema"] == "mage-tune.census/2"
    assert set(record) >= TOP_KEYS
    assert set(record["occupancy"]) >= OCCUPANCY_KEYS
    assert (record["kernel"], record["arch"]) == ("cp_async_double", "sm_90")
    assert record["registers"] == mine["registers"] == usage["REG"]
    assert record["shared_bytes"] == mine["smem"] == usage["SHARED"] - 1024  # sm_90: -res-usage adds the 1 KB
    assert record["stack_bytes"] == mine["stack"]
    assert (record["spill_store_bytes"], record["spill_load_bytes"]) == (mine["spill_stores"], mine["spill_loads"])
    occ = occupancy("sm_90", 128, mine["registers"], mine["smem"], barriers=max(1, mine["barriers"]))
    assert record["occupancy"]["block"] == 128
    assert record["occupancy"]["blocks_per_sm"] == occ.blocks_per_sm
    assert record["occupancy"]["warps_per_sm"] == occ.warps_per_sm
    assert record["occupancy"]["limiter"] == occ.limiter
    assert record["occupancy"]["fraction"] == pytest.approx(occ.fraction)
    for name in ("ptx", "sass"):
        view = record[name]
        assert set(view) >= VIEW_KEYS, name
        assert all(isinstance(k, str) and k.isdigit() for k in view["global_stores"]), name
        assert isinstance(view["cp_async_wait"], list)
        assert view["cp_async_groups_in_flight"] == 2
    ptx, sass = b.ptx["cp_async_double"], b.sass["cp_async_double"]
    assert record["ptx"]["cp_async"] == {"128": count(ptx, r"\bcp\.async\.cg\.shared\.global\b")}
    assert record["sass"]["cp_async"] == {"128": count(sass, r"\bLDGSTS\.E\.BYPASS\.128\b")}
    assert record["ptx"]["global_stores"] == {"128": count(ptx, r"\bst\.global\.v4\.f32\b")}
    assert record["sass"]["global_stores"] == {"128": count(sass, r"\bSTG\.E\.128\b")}
    assert record["ptx"]["barriers"] == count(ptx, r"\bbar\.sync\b")
    assert record["sass"]["barriers"] == count(sass, r"\bBAR\.SYNC\b")
    assert set(record["ptx"]["params"]) == {"in", "out"}
    assert record["ptx"]["params"]["out"]["store_bits"] == {"128": count(ptx, r"\bst\.global\.v4\.f32\b")}
    assert record["sass"]["params"] is None


def test_json_multi_kernel_is_a_list():
    records = json.loads(invoke(str(KERNELS / "flight.cu"), "--arch", "sm_90", "--json"))
    assert [r["kernel"] for r in records] == ["chase", "two_loads"]  # one order for every input kind: by name
    assert all(r["schema"] == "mage-tune.census/2" for r in records)
    assert records[0]["occupancy"] is None  # no --block and no __launch_bounds__


@pytest.mark.parametrize("name", ["scale_kernel", "_Z12scale_kernelPfi"])
def test_kernel_option(name):
    record = json.loads(invoke(str(KERNELS / "mangled.cu"), "--arch", "sm_89", "--kernel", name, "--json"))
    assert (record["kernel"], record["demangled"]) == ("_Z12scale_kernelPfi", "scale_kernel")


def test_compare_marks_differences(build):
    double, single = KERNELS / "cp_async_double.cu", KERNELS / "cp_async_single.cu"
    ref = [build("cp_async_double.cu", "sm_89"), build("cp_async_single.cu", "sm_89")]
    out = invoke(str(double), "--arch", "sm_89", "--compare", str(single), "--wide")
    header = out.splitlines()[0]
    assert f"cp_async_double ({double})" in header and f"cp_async_single ({single})" in header
    rows = rows_of(out)
    for cells in rows.values():  # a row is marked exactly when its two values differ
        assert (cells[0] == "≠") == (len(set(cells[-2:])) == 2)
    assert rows["arch"] == ["sm_89", "sm_89"]
    regs = [b.ptxas[b.file[:-3]]["registers"] for b in ref]
    assert rows["registers"][-2:] == [f"{n} [ptxas -v]" for n in regs]
    bars = [count(b.sass[b.file[:-3]], r"\bBAR\.SYNC\b") for b in ref]
    assert rows["SASS barriers"][-2:] == [str(n) for n in bars]
    copies = [count(b.ptx[b.file[:-3]], r"\bcp\.async\.cg\.shared\.global\b") for b in ref]
    assert rows["PTX cp.async copies"] == ["≠", *(f"{n}×128b" for n in copies)]
    assert rows["PTX cp.async groups in flight"] == ["≠", "2", "1"]
    assert rows["SASS cp.async groups in flight"] == ["≠", "2", "1"]


def test_compare_with_kernel_picks_that_kernel_of_both_files(tmp_path):
    """--kernel applies to the --compare file too: one kernel against the same kernel of the other file."""
    other = tmp_path / "flight_copy.cu"
    other.write_text((KERNELS / "flight.cu").read_text())
    out = invoke(str(KERNELS / "flight.cu"), "--arch", "sm_90", "--compare", str(other), "--kernel", "chase", "--json")
    records = json.loads(out)
    assert [r["kernel"] for r in records] == ["chase", "chase"]
    assert records[0]["registers"] == records[1]["registers"]


def test_compare_of_files_with_several_kernels_pairs_them_by_name(tmp_path):
    """Each kernel against the same kernel of the other file, one table each, its marks that kernel's differences
    alone (marks across every column said nothing where two kernels of one file differ from each other)."""
    other = tmp_path / "flight_copy.cu"
    other.write_text((KERNELS / "flight.cu").read_text())
    out = invoke(str(KERNELS / "flight.cu"), "--arch", "sm_90", "--compare", str(other), "--wide")
    tables = out.split("\n\n")
    records = json.loads(invoke(str(KERNELS / "flight.cu"), "--arch", "sm_90", "--json"))
    assert len(tables) == len(records) == 2
    for table, record in zip(tables, records, strict=True):
        header = table.splitlines()[0]
        assert header.count(record["demangled"]) == 2 and str(other) in header
        assert not any(cells[0] == "≠" for cells in rows_of(table).values())  # the same source: nothing differs


def test_help():
    runner = CliRunner()
    top = runner.invoke(cli, ["--help"])
    assert top.exit_code == 0 and "census" in top.output
    sub = runner.invoke(cli, ["census", "--help"])
    assert sub.exit_code == 0
    for option in ("--arch", "--kernel", "--block", "--compare", "--json"):
        assert option in sub.output
    run = subprocess.run([sys.executable, "-m", "mage_tune", "census", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "--compare" in run.stdout and not run.stderr


def test_console_entry_point(build):
    mine = build("rsqrt.cu", "sm_80").ptxas["inv_norm"]
    cmd = [sys.executable, "-m", "mage_tune", "census", str(KERNELS / "rsqrt.cu"), "--arch", "sm_80", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert record["registers"] == mine["registers"]
    assert record["ptx"]["special"] == {"rsqrt.approx": 1} and record["sass"]["special"] == {"MUFU.RSQ": 1}
