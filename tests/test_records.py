"""What reads the committed H200 records, without a GPU: Nsight Compute's raw CSV, the counters table beside the census,
`mage-tune explain` on bench records, the same-bytes copy baseline, `bench --configs` lists and the shapes table
that analysis/ rebuilds from runs/ alone. The records are real runs (runs/h200-2026-11-29-shapes/)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune import textwidth
from mage_tune.cli.counters_cmd import format_counters
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels import get_family
from mage_tune.kernels.select import listed as _listed
from mage_tune.measure.baselines import copy_jobs
from mage_tune.measure.counters import parse_raw_csv, pick
from mage_tune.measure.explain import explain_bench

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs" / "h200-2026-11-29-shapes"
LN_COUNTERS = RUNS / "ln" / "counters_ln_16384x4096.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _raw_csv(kernels: list[dict]) -> str:
    """ncu's --csv --page raw layout, rebuilt from the raw metrics a record kept: names, units, one row per kernel."""
    header = list(kernels[0]["raw"])
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    writer.writerow(["" if i < 12 else "unit" for i in range(len(header))])
    for k in kernels:
        writer.writerow([k["raw"].get(name, "") for name in header])
    return "==PROF== Disconnected from process 1\n" + out.getvalue()


def test_raw_csv_parses_back_to_the_recorded_counters():
    record = _load(LN_COUNTERS)
    kernels = [k for ks in record["profiled"].values() for k in ks]
    parsed = parse_raw_csv(_raw_csv(kernels))
    assert [k.kernel for k in parsed] == [k["kernel"] for k in kernels]
    for got, kept in zip(parsed, kernels, strict=True):
        assert got.picked == pick(kept["raw"])[0]
        assert list(got.stalls) == list(pick(kept["raw"])[1])


def test_counters_check_the_census_against_the_machine():
    """The census's registers and occupancy are what ncu read at launch; DRAM traffic is within 6% of the bytes the
    layer norm must move (the rest of y is still in L2 when the kernel ends)."""
    record = _load(LN_COUNTERS)
    (variant,) = record["profiled"][next(iter(record["profiled"]))]
    picked, stalls = pick(variant["raw"])
    census = record["census"]
    assert picked["registers"] == census["registers"] == 36
    assert picked["theoretical_occupancy_pct"] == pytest.approx(100 * census["occupancy"]["fraction"])
    assert picked["achieved_occupancy_pct"] < picked["theoretical_occupancy_pct"]
    assert 0.94 < picked["dram_bytes"] / record["bytes_moved"] < 1.0
    assert next(iter(stalls)) == "long_scoreboard"  # a streaming kernel waits on its global loads
    textwidth.set_wide(True)  # the full table, as `mage-tune counters --wide` prints it
    try:
        table = format_counters(record)
    finally:
        textwidth.set_wide(False)
    assert "census (static)" in table and table.count("75.0%") == 2 and "long_scoreboard" in table


def test_explain_says_what_holds_the_winner_back():
    record = _load(RUNS / "rerun" / "ln_m16384_d4096.json")
    text = explain_bench(record, _load(LN_COUNTERS))
    assert "winner: layernorm[threads=512,rows=1,vec=16," in text
    for needed in (
        "vs Triton at its best config: triton[num_warps=16]",
        "vs the same-bytes copy",
        "limited by registers",
    ):
        assert needed in text
    assert re.search(r"waves: 16384 blocks over 132 SMs × 3 = 396 slots", text)
    assert "Nsight Compute" in text and "69.2% achieved of 75%" in text
    matmul = explain_bench(_load(RUNS / "matmul" / "mm_2048.json"), _load(RUNS / "matmul" / "counters_mm_2048.json"))
    assert "128 on 132 SMs, all resident at once" in matmul and "97% evenly loaded" in matmul  # 4 SMs idle
    assert "torch.matmul (cuBLAS FP32)" in matmul and "FMA pipe" in matmul


def _explain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mage_tune", "explain", *args], capture_output=True, text=True)


def test_explain_refuses_what_is_not_a_record(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "mage-tune.census/1"}))
    result = _explain(str(other))
    assert result.returncode == 2 and f"{other}: not a bench record" in result.stderr
    assert "take a search run directory" in result.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema":\n')
    result = _explain(str(broken))
    assert result.returncode == 2 and f"{broken}:2: not JSON" in result.stderr and "Traceback" not in result.stderr
    result = _explain(str(RUNS / "rerun" / "ln_m4096_d768.json"), "--counters", str(broken))
    assert result.returncode == 2 and f"{broken}:2: not JSON" in result.stderr


def test_same_bytes_copy_baseline_is_for_families_whose_output_copies_an_input():
    layernorm = get_family("layernorm")
    jobs = copy_jobs(layernorm, {"m": 4096, "d": 768})
    assert [j.kind for j in jobs] == ["copy", "copy"] and jobs[0].label == "copy[copy_one_per_thread]"
    assert jobs[0].expect == "x" and jobs[0].config["bytes"] == 4096 * 768 * 4
    assert copy_jobs(layernorm, {"m": 3, "d": 7}) == []  # 21 floats are not whole float4s
    assert copy_jobs(get_family("matmul"), {"m": 1024, "n": 1024, "k": 1024}) == []


def test_configs_file_errors_name_the_file(tmp_path):
    family, shape = get_family("matmul"), {"m": 1024, "n": 1024, "k": 1024}
    bad = tmp_path / "list.json"
    bad.write_text('[{"bm": 64},\n{"bm": }]')
    with pytest.raises(InputError, match=r"list.json:2: not JSON"):
        _listed(family, shape, "sm_90", bad)
    bad.write_text('[{"bm": 64}, {"bm": 7}]')
    with pytest.raises(ConfigError, match=r"list.json: config 1: knob bm: '7' is not allowed"):
        _listed(family, shape, "sm_90", bad)
    bad.write_text('{"bm": 64}')
    with pytest.raises(InputError, match="expected a JSON list"):
        _listed(family, shape, "sm_90", bad)
    listed = _listed(family, shape, "sm_90", ROOT / "benchmarks" / "gpu" / "configs" / "mm_large_tiles.json")
    assert len(listed) == 264 and all(not family.violations(c, shape, "sm_90") for c in listed)


def test_shapes_table_rebuilds_from_the_records():
    done = subprocess.run(
        [sys.executable, str(ROOT / "analysis" / "shapes_table.py")], capture_output=True, text=True, check=True
    )
    text = done.stdout
    for m in (4096, 16384):
        for d in (700, 768, 1000, 1024, 2048, 4096, 8192):
            assert f"{m} × {d}" in text
    for s in (1000, 1024, 2048, 4096):
        assert f"{s}³" in text
    # Every first-run winner measured again in the second run, within 3%.
    changes = [float(x) for x in re.findall(r"→ [\d.]+ \(([+-][\d.]+)%\)", text)]
    assert len(changes) == 18 and max(map(abs, changes)) < 3.0
    assert "Triton's kernel against ours, property by property" in text


@pytest.mark.parametrize(
    ("folder", "flags"),
    [
        ("h200-2026-12-01-template-ceiling/ceiling", []),
        ("h200-2026-12-01-inner-loop/warp_tile", []),
        ("h200-2026-12-01-inner-loop/inner_loop", []),
        ("h200-2026-12-01-inner-loop/load_hints", []),
        ("h200-2026-12-01-tensor-core/tensor_core", ["--errors"]),
        ("h200-2026-12-01-affine-shared/affine", []),
        ("h200-2026-12-01-affine-shared/rebench", []),
        ("h200-2026-12-01-x-hints-threads/x_hints_and_threads", []),
        ("h200-2026-12-01-x-hints-threads/rebench", []),
        ("h200-2026-12-01-regs-welford/regs_welford", []),
        ("h200-2026-12-01-wide-rows/rebench", []),
        ("h200-2026-12-01-wide-rows/rows_sweep", []),
        ("h200-2026-12-01-cluster-split/cluster", []),
        ("h200-2026-12-01-cluster-split/rows_sweep", []),
        ("h200-2026-12-02-l2-ahead/l2_ahead_wide", []),
        ("h200-2026-12-02-l2-ahead/l2_ahead", []),
    ],
)
def test_crossed_bench_tables_rebuild_from_the_records(folder, flags):
    """The committed tables (FOLDER.md) are what analysis/crossed_bench.py makes of the committed bench records."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "analysis" / "crossed_bench.py"), str(ROOT / "runs" / folder), *flags],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == (ROOT / "runs" / f"{folder}.md").read_text().strip()


def test_leave_shape_out_latest_keeps_one_search_per_shape(tmp_path):
    """--latest: a shape searched in several folders is reported by the search of the folder named last."""
    folders = ["h200-2026-11-30-warm-start/layernorm", "h200-2026-12-01-affine-shared/searches"]
    out = tmp_path / "lso.json"
    script = str(ROOT / "analysis" / "leave_shape_out.py")
    subprocess.run(
        [sys.executable, script, "--latest", *(str(ROOT / "runs" / f) for f in folders), "--json", str(out)],
        capture_output=True,
        check=True,
    )
    rows = json.loads(out.read_text())
    assert len(rows) == 10 and len({json.dumps(r["shape"]) for r in rows}) == 10
    latest = json.loads((ROOT / "runs" / folders[1] / "layernorm-m8192d6144" / "best" / "best.json").read_text())
    (row,) = [r for r in rows if r["shape"] == {"m": 8192, "d": 6144}]
    assert row["winner_config"] == latest["config"] and row["best_us"] == pytest.approx(latest["value"])


def test_configs_file_excludes_other_selections():
    listed = str(ROOT / "benchmarks" / "gpu" / "configs" / "mm_small_tiles.json")
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", "bench", "matmul", "--configs", listed, "--set", "bm=64"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--configs lists the configs itself" in done.stderr


BENCH_RECORDS = sorted(
    path.relative_to(ROOT)
    for path in (ROOT / "runs").rglob("*.json")
    if '"schema": "mage-tune.bench/' in path.read_text()[:200]
)
SEARCH_RUNS = sorted(path.parent.relative_to(ROOT) for path in (ROOT / "runs").rglob("trials.jsonl"))


def _cli(*args: str):
    from click.testing import CliRunner

    from mage_tune.cli import cli

    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "100"}, catch_exceptions=False)


@pytest.mark.parametrize("path", BENCH_RECORDS, ids=str)
def test_explain_and_report_read_every_committed_bench_record(path):
    """Records of any age: knobs added after a record was written read as their defaults (Family.with_defaults)."""
    for command in ("explain", "report"):
        result = _cli(command, str(ROOT / path))
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.output.splitlines()) <= 100


@pytest.mark.parametrize("path", SEARCH_RUNS, ids=str)
def test_explain_and_report_read_every_committed_search_run(path, tmp_path):
    run = tmp_path / path.name  # report writes report.md and plots beside the record: a copy keeps runs/ as committed
    shutil.copytree(ROOT / path, run)
    outputs = []
    for args in (("report", str(run), "--no-plots"), ("explain", str(run))):
        result = _cli(*args)
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.output.splitlines()) <= 100
        outputs.append(result.output)
    if path.name == "search_ln":
        assert "trials by outcome: duplicate 14, measured 69, pruned 17" in outputs[0]


def test_committed_records_are_all_found():
    assert len(BENCH_RECORDS) >= 71 and len(SEARCH_RUNS) >= 10
