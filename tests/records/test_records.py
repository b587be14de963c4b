"""What reads H200 records, without a GPU: Nsight Compute's raw CSV, the counters table beside the census, `mage-tune
explain` and `report` on bench records and run directories of every age, the same-bytes copy baseline, `bench
--configs` lists, and the tables analysis/ rebuilds from records (shapes, crossed benches, leave-shape-out), each
checked against numbers this file computes from the same records. The records are the fixtures of tests/fixtures/:
real runs (records/*.tar.xz) with fewer results and trials (analysis/make_fixtures.py)."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune import textwidth
from mage_tune.arch import get_arch
from mage_tune.cli.counters_cmd import format_counters
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels import get_family
from mage_tune.kernels.select import listed as _listed
from mage_tune.measure.baselines import copy_jobs
from mage_tune.measure.counters import parse_raw_csv, pick
from mage_tune.measure.explain import _counter_lines, busiest_units, explain_bench
from mage_tune.measure.saved import best_result, result_time, timed_results
from mage_tune.search import record as run_record

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RUNS = FIXTURES / "shape-benches"
LN_COUNTERS = RUNS / "ln" / "counters_ln_16384x4096.json"
NCU_HOPPER = FIXTURES / "ncu-hopper" / "matmul_bf16_4500x3000x8800.csv"


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


def test_a_wgmma_kernel_s_counters_lead_with_its_tensor_pipe():
    """Real ncu rows (an H100: matmul-bf16's variants and cuBLAS BF16's nvjet kernel at 4500 × 3000 × 8800): the
    tensor-pipe, shared-memory and L2 fields are picked, and the busiest units put the tensor pipe first, the FMA pipe
    (the SIMT matmul's roof) last."""
    kernels = parse_raw_csv(NCU_HOPPER.read_text())
    ours, cublas = kernels[0], kernels[-1]
    assert cublas.kernel.startswith("nvjet_sm90") and ours.kernel == "matmul_bf16"
    assert ours.picked["tensor_pipe_pct"] == 92.21 and cublas.picked["tensor_pipe_pct"] == 96.07
    assert ours.picked["shared_bank_reads_pct"] == 27.72 and ours.picked["l2_throughput_pct"] == 71.32
    units = busiest_units(ours.picked)
    assert [name for name, _ in units] == [
        "tensor pipe", "L2", "DRAM", "shared-memory reads", "shared-memory writes", "FMA pipe",
    ]  # fmt: skip
    assert busiest_units({"fma_pipe_pct": 80.0, "dram_throughput_pct": 10.0}) == []  # a record from before: no line
    counters = {
        "census": {"occupancy": {"fraction": 0.1875}, "registers": 168},
        "profiled": {"matmul-bf16": [dataclasses.asdict(ours)], "cuBLAS BF16": [dataclasses.asdict(cublas)]},
    }
    text = "\n".join(_counter_lines(counters))
    assert "busiest units, % of peak: tensor pipe 92%, L2 71%, DRAM 35%, shared-memory reads 28%" in text
    assert "busiest units, % of peak: tensor pipe 96%, L2 57%, shared-memory reads 38%, DRAM 26%" in text


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
    # each says what is wrong in words: where the JSON breaks, an empty file, a missing field, not an object
    for text, says in (
        ('{\n "a": "x\n', ":2: not JSON: Invalid control character at column 9"),
        ('{"a": "x', ":1: not JSON: Unterminated string starting at column 7"),
        (" \n", ": empty file, not a JSON record"),
        ('{"schema": "mage-tune.bench/1"}', ": damaged bench record: 'shape' missing"),
        ("[1, 2]", ": not a bench record (not a JSON object)"),
        ('{"shape": {"m": 1}}', ": not a bench record (no schema)"),
    ):
        broken.write_text(text)
        result = _explain(str(broken))
        assert result.returncode == 2 and f"{broken}{says}" in result.stderr, (text, result.stderr)


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
        _listed(family, shape, get_arch("sm_90"), bad)
    bad.write_text('[{"bm": 64}, {"bm": 7}]')
    with pytest.raises(ConfigError, match=r"list.json: config 1: knob bm: '7' is not allowed"):
        _listed(family, shape, get_arch("sm_90"), bad)
    bad.write_text('{"bm": 64}')
    with pytest.raises(InputError, match="expected a JSON list"):
        _listed(family, shape, get_arch("sm_90"), bad)
    listed = _listed(family, shape, get_arch("sm_90"), ROOT / "benchmarks" / "gpu" / "configs" / "mm_large_tiles.json")
    assert len(listed) == 264 and all(not family.violations(c, shape, get_arch("sm_90")) for c in listed)


def _first_run_winner(family: str, paths: list[Path]) -> tuple[dict, float] | None:
    """The fastest passing variant over a shape's first-run records: its config with defaults, and its time."""
    timed = [
        (result_time(best), get_family(family).with_defaults(best["config"]))
        for path in paths
        if path.exists() and (best := best_result(_load(path), "variant"))
    ]
    return (min(timed, key=lambda p: p[0])[1], min(timed, key=lambda p: p[0])[0]) if timed else None


def test_shapes_table_rebuilds_from_the_records():
    """Every shape of the second run (rerun/) is a row with its best time; the first-run winner's change between the
    runs is what the records say (computed here); the property tables of both compare records follow."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "analysis" / "shapes_table.py"), "--runs", str(RUNS)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    text = done.stdout
    expected_changes = []
    shapes = [("layernorm", f"ln_m{m}_d{d}", f"{m} × {d}", [RUNS / "ln" / f"ln_m{m}_d{d}.json"]) for m, d in
              ((4096, 768), (16384, 4096))]  # fmt: skip
    shapes += [
        ("matmul", f"mm_{s}", f"{s}³", [RUNS / "matmul" / f"mm_{s}.json", RUNS / "matmul_k_unroll" / f"mm_{s}.json"])
        for s in (1000, 1024, 2048)
    ]
    for family, name, row, first in shapes:
        second = _load(RUNS / "rerun" / f"{name}.json")
        best = result_time(best_result(second, "variant"))
        line = next(x for x in text.splitlines() if x.startswith(row + " "))
        assert f"{best:.2f}" in line or f"{best:.1f}" in line, line
        config, t1 = _first_run_winner(family, first)
        again = [
            result_time(r) for r in second["results"]
            if r["kind"] == "variant" and r["ok"] and get_family(family).with_defaults(r["config"]) == config
        ]  # fmt: skip
        assert again, f"{name}: the first-run winner was measured again"
        expected_changes.append(f"{t1:.2f} → {again[0]:.2f} ({again[0] / t1 - 1:+.1%})")
        assert expected_changes[-1] in line, line
    changes = [float(x) for x in re.findall(r"→ [\d.]+ \(([+-][\d.]+)%\)", text)]
    assert len(changes) == len(shapes) == 5 and max(map(abs, changes)) < 3.0  # these winners held within 3 %
    assert text.count("Triton's kernel against ours, property by property") == 2


KINDS = ("copy", "torch", "triton")


def _table_rows(text: str) -> dict[str, list[str]]:
    """A markdown table's rows by their first cell."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return {r[0]: r[1:] for r in rows[2:]}


@pytest.mark.parametrize(
    ("folder", "flags"),
    [("matmul-3xtf32/tensor_core", ["--errors"]), ("wide-row-bench/rows_sweep", [])],
)
def test_crossed_bench_tables_rebuild_from_the_records(folder, flags):
    """analysis/crossed_bench.py: per bench record a heading with its baseline (cuBLAS for a matmul family, Triton's
    best and the copy for layer norm) and a row per variant named by the knobs that vary in the record: its time, the
    time over the baseline, (ours - copy)/(Triton - copy) where there is a copy, the relative error with --errors."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "analysis" / "crossed_bench.py"), str(FIXTURES / folder), *flags],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    blocks = done.stdout.split("### ")[1:]
    paths = sorted((FIXTURES / folder).glob("*.json"))
    assert len(blocks) == len(paths)
    for block, path in zip(blocks, paths, strict=True):
        data = _load(path)
        ok = {kind: [result_time(r) for r in data["results"] if r["kind"] == kind and r["ok"]] for kind in KINDS}
        variants = [r for r in data["results"] if r["kind"] == "variant"]
        knobs = [k for k in variants[0]["config"] if len({json.dumps(v["config"].get(k)) for v in variants}) > 1]
        copy = min(ok["copy"], default=None)
        base = min(ok["torch" if copy is None else "triton"])
        heading = block.splitlines()[0]
        assert heading.startswith(f"{data['family']} ") and (f"{base:.1f} µs" in heading or f"{base:.2f} µs" in heading)
        rows = _table_rows(block)
        assert len(rows) == len(variants)
        for r in variants:
            name = ", ".join(f"{k}={r['config'][k]}" for k in knobs) if len(knobs) > 1 else str(r["config"][knobs[0]])
            t = result_time(r)
            cells = rows[name]
            expected = [f"{t:.{1 if copy is None else 2}f}", f"{t / base:.3f}"]  # printed as numbers by tabulate
            expected += [f"{(t - copy) / (base - copy):.2f}"] if copy is not None else []
            expected += [f"{r['rel_err']:.1e}"] if flags else []
            assert [float(c) for c in cells] == [float(e) for e in expected], (name, cells)


LSO_FOLDERS = [FIXTURES / "warm-start-searches/layernorm", FIXTURES / "later-layernorm-search/searches"]


def test_leave_shape_out_rows_are_what_the_run_directories_say(tmp_path):
    """Per run directory: its trials, the best measured time and config, the first trial within 3 % of it and where
    that trial came from, the ratio to each baseline kind (the fastest label, median over sessions) of the same run."""
    out = tmp_path / "lso.json"
    script = str(ROOT / "analysis" / "leave_shape_out.py")
    subprocess.run(
        [sys.executable, script, *map(str, LSO_FOLDERS), "--json", str(out)], capture_output=True, check=True
    )
    rows = json.loads(out.read_text())
    run_dirs = sorted(p.parent for folder in LSO_FOLDERS for p in folder.glob("*/run.json"))
    assert len(rows) == len(run_dirs) == 3
    for row, run in zip(rows, sorted(run_dirs, key=lambda p: (p.parent != LSO_FOLDERS[0], p.name)), strict=True):
        trials = sorted(run_record.trials(run), key=lambda t: t["number"])
        measured = [t for t in trials if t["outcome"] == "measured"]
        best = min(measured, key=lambda t: t["value"])
        reach = next(i + 1 for i, t in enumerate(trials) if t in measured and t["value"] <= best["value"] * 1.03)
        assert row["shape"] == _load(run / "run.json")["shape"] and row["trials"] == len(trials)
        assert row["best_us"] == best["value"] and row["winner_config"] == best["config"]
        assert row["trials_to_within_3pct"] == reach and row["reached_by"] == trials[reach - 1].get("source", "")
        baselines = {}
        for b in run_record.baselines(run):
            if b["result"]["ok"]:
                key = (b["result"]["kind"], b["result"]["label"])
                baselines.setdefault(key, []).append(result_time(b["result"]))
        fastest = {}
        for (kind, _), times in baselines.items():
            fastest[kind] = min(fastest.get(kind, float("inf")), statistics.median(times))  # over sessions (GPUs)
        assert row["baselines_us"] == pytest.approx(fastest)
        assert row["ratio"] == pytest.approx({k: best["value"] / v for k, v in fastest.items()})


def test_leave_shape_out_latest_keeps_one_search_per_shape(tmp_path):
    """--latest: a shape searched in several folders is reported by the search of the folder named last."""
    out = tmp_path / "lso.json"
    script = str(ROOT / "analysis" / "leave_shape_out.py")
    subprocess.run(
        [sys.executable, script, "--latest", *map(str, LSO_FOLDERS), "--json", str(out)],
        capture_output=True,
        check=True,
    )
    rows = json.loads(out.read_text())
    shapes = {json.dumps(_load(p)["shape"]) for folder in LSO_FOLDERS for p in folder.glob("*/run.json")}
    assert len(rows) == len(shapes) == 2 and len({json.dumps(r["shape"]) for r in rows}) == 2
    latest = _load(LSO_FOLDERS[1] / "layernorm-m8192d6144" / "best" / "best.json")
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
    path.relative_to(FIXTURES)
    for path in FIXTURES.rglob("*.json")
    if '"schema": "mage-tune.bench/' in path.read_text()[:200]
)
SEARCH_RUNS = sorted(path.parent.relative_to(FIXTURES) for path in FIXTURES.rglob("trials.jsonl"))


def _cli(*args: str):
    from click.testing import CliRunner

    from mage_tune.cli import cli

    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "100"})


@pytest.mark.parametrize("path", BENCH_RECORDS, ids=str)
def test_explain_and_report_read_every_bench_record(path):
    """Records of any age: knobs added after a record was written read as their defaults (Family.with_defaults); a
    record with no timed variant (checked only) is reported, and explain says there is nothing to explain."""
    data = _load(FIXTURES / path)
    timed = bool(timed_results(data, "variant"))
    for command in ("explain", "report"):
        result = _cli(command, str(FIXTURES / path))
        if command == "explain" and not timed:
            assert isinstance(result.exception, InputError) and "nothing to explain" in str(result.exception)
            continue
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.output.splitlines()) <= 100


@pytest.mark.parametrize("path", SEARCH_RUNS, ids=str)
def test_explain_and_report_read_every_search_run(path, tmp_path):
    run = tmp_path / path.name  # report writes report.md and plots beside the record: a copy keeps the fixture as it is
    shutil.copytree(FIXTURES / path, run)
    outputs = []
    for args in (("report", str(run), "--no-plots"), ("explain", str(run))):
        result = _cli(*args)
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.output.splitlines()) <= 100
        outputs.append(result.output)
    outcomes = {}
    for t in run_record.trials(run):
        outcomes[t["outcome"]] = outcomes.get(t["outcome"], 0) + 1
    said = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    assert f"trials by outcome: {said}" in " ".join(outputs[0].split()), said


def test_the_fixtures_hold_records_of_every_age():
    """Bench records with and without `family_origin` (added 2026-11-30), one checked but never timed; run
    directories with run.json and the oldest, with search.json alone."""
    records = [_load(FIXTURES / p) for p in BENCH_RECORDS]
    assert len(BENCH_RECORDS) >= 15 and len(SEARCH_RUNS) >= 8
    assert any("family_origin" in r for r in records) and any("family_origin" not in r for r in records)
    assert any(
        not (FIXTURES / p / "run.json").exists() and (FIXTURES / p / "search.json").exists() for p in SEARCH_RUNS
    )
    assert any((FIXTURES / p / "run.json").exists() for p in SEARCH_RUNS)


def test_search_efficiency_replays_the_space_the_record_measured(tmp_path):
    """analysis/search_efficiency.py replays samplers over the knobs and values of the record's configs (knobs added
    since stay at their defaults, as the record reads them), each draw looked up in the record's table of times."""
    out, record = tmp_path / "replay.json", FIXTURES / "oldest-records/ln_d768_all.json"
    script = ROOT / "analysis" / "search_efficiency.py"
    done = subprocess.run(
        [sys.executable, str(script), str(record), "--seeds", "2", "--budget", "50", "--out", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    replay = json.loads(out.read_text())
    variants = [r for r in _load(record)["results"] if r["kind"] == "variant" and r["ok"]]
    assert replay["configs"] == len(variants) and f"{len(variants)} configs measured" in done.stdout
    assert replay["best_us"] == min(result_time(r) for r in variants)
    assert all(n is None or 1 <= n <= 50 for hits in replay["trials_to_within"].values() for n in hits)

    spec = importlib.util.spec_from_file_location("search_efficiency", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    family = get_family("layernorm")
    _, table = module.load_table(record)
    space = dict(module.recorded_space(family, table))
    assert space == {k: [v for v in knob.domain if v in {r["config"][k] for r in variants}]
                     for knob in family.knobs if (k := knob.name) in variants[0]["config"]}  # fmt: skip
    assert set(space) < {k.name for k in family.knobs}  # knobs added since the record are not drawn
    # any measured config is a hit when the target is the slowest time: the replay draws from the recorded space
    assert module.replay(family, table, "random", 0, 3000, max(table.values())) is not None
