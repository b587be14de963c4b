"""analysis/k_sweep.py on bench records made for it: times that are exact lines in K give back their fixed part and
their cost per 64 of K, against cuBLAS's, a table per M × N; a variant timed at fewer than three K values is left
out; a folder with no matmul bench record is a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "analysis"))
import k_sweep  # noqa: E402


def _record(k: int, times: dict[str, float]) -> dict:
    results = []
    for name, t in times.items():
        kind = "torch" if name == "cuBLAS" else "variant"
        config = {} if kind == "torch" else {"bn": int(name), "cluster": 4}
        timings = [{"regime": "cold", "median_us": t, "min_us": t, "max_us": t}]
        results.append({"label": name, "kind": kind, "session": 0, "ok": True, "timings": timings, "config": config})
    return {
        "schema": "mage-tune.bench/1", "family": "matmul-bf16", "shape": {"m": 4500, "n": 3000, "k": k},
        "flops": 2 * 4500 * 3000 * k, "bytes_moved": 0, "environment": {"gpu": "NVIDIA H200"},
        "sessions": [{"index": 0, "copy_gbs": 4200.0, "fp32_tflops": 64.0}], "results": results, "census": {},
    }  # fmt: skip


def _write(folder: Path, ks: list[int], line) -> None:
    for k in ks:
        (folder / f"bench-4500x3000x{k}.json").write_text(json.dumps(_record(k, line(k))))


def test_exact_lines_give_back_their_fixed_part_and_their_cost_per_64_of_k(tmp_path):
    def line(k):
        times = {"cuBLAS": 10.0 + 2.0 * k / 64, "192": 14.0 + 2.0 * k / 64}
        if k != 4400:
            times["256"] = 9.0 + 2.5 * k / 64  # two K values: not fitted
        return times

    _write(tmp_path, [1100, 2200, 4400], line)
    out = tmp_path / "sweep.json"
    assert k_sweep.main([str(tmp_path), "--json", str(out)]) == 0
    (fitted,) = json.loads(out.read_text())
    assert fitted["shape"] == {"family": "matmul-bf16", "m": 4500, "n": 3000}
    rows = {row["name"]: row for row in fitted["rows"]}
    assert set(rows) == {"cuBLAS", "bn=192"}  # bn varies across the variants measured; 256 had two points
    assert abs(rows["cuBLAS"]["fixed_us"] - 10.0) < 1e-9 and abs(rows["cuBLAS"]["per_64_us"] - 2.0) < 1e-9
    assert abs(rows["bn=192"]["fixed_us"] - 14.0) < 1e-9 and abs(rows["bn=192"]["per_64_us"] - 2.0) < 1e-9
    assert rows["bn=192"]["worst_residual"] < 1e-12
    headers, body = k_sweep.table(fitted["rows"])
    line_192 = dict(zip(headers, next(b for b in body if b[0] == "bn=192"), strict=True))
    assert line_192["fixed/cuBLAS"] == "1.40" and line_192["per 64/cuBLAS"] == "1.000"
    assert line_192["K=2200"] == f"{14.0 + 2.0 * 2200 / 64:.2f}"


def test_a_fit_that_misses_shows_its_worst_residual(tmp_path):
    _write(tmp_path, [1000, 2000, 3000], lambda k: {"cuBLAS": {1000: 10.0, 2000: 30.0, 3000: 30.0}[k]})
    rows = k_sweep.sweep([json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))])
    assert rows[0]["worst_residual"] > 0.1


def test_min_k_leaves_out_the_smaller_k_that_no_line_fits(tmp_path):
    def line(k):  # cuBLAS's heuristics pick a slow kernel at the smallest K
        return {"cuBLAS": 2.0 * k / 64 + (100.0 if k == 1100 else 10.0), "192": 14.0 + 2.0 * k / 64}

    _write(tmp_path, [1100, 2200, 4400, 8800], line)
    out = tmp_path / "sweep.json"
    assert k_sweep.main([str(tmp_path), "--json", str(out)]) == 0
    rows = {row["name"]: row for row in json.loads(out.read_text())[0]["rows"]}
    assert rows["cuBLAS"]["worst_residual"] > 0.1
    out.unlink()
    assert k_sweep.main([str(tmp_path), "--min-k", "2200", "--json", str(out)]) == 0
    rows = {row["name"]: row for row in json.loads(out.read_text())[0]["rows"]}
    assert sorted(rows["cuBLAS"]["times_us"]) == ["2200", "4400", "8800"]
    assert abs(rows["cuBLAS"]["fixed_us"] - 10.0) < 1e-9 and rows["cuBLAS"]["worst_residual"] < 1e-12
    assert k_sweep.main([str(tmp_path), "--min-k", "9000"]) == 1


def test_a_folder_without_matmul_bench_records_is_a_one_line_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "analysis/k_sweep.py", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip() == f"k_sweep.py: no matmul bench records (bench-*.json) in {tmp_path}"
    (tmp_path / "bench-1x2x3.json").write_text("{not json")
    done = subprocess.run(
        [sys.executable, "analysis/k_sweep.py", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 1 and "bench-1x2x3.json" in done.stderr and "Traceback" not in done.stderr


def test_each_m_by_n_has_its_own_sweep(tmp_path):
    _write(tmp_path, [1000, 2000, 3000], lambda k: {"cuBLAS": 5.0 + k / 64})
    other = _record(1000, {"cuBLAS": 7.0})
    other["shape"] = {"m": 2500, "n": 4600, "k": 1000}
    (tmp_path / "bench-2500x4600x1000.json").write_text(json.dumps(other))
    done = subprocess.run(
        [sys.executable, "analysis/k_sweep.py", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "M = 4500, N = 3000" in done.stdout and "M = 2500" not in done.stdout  # one K value: no line


def test_a_config_recorded_before_a_knob_existed_is_the_same_variant(tmp_path):
    """An older record's config without the knobs added since (their defaults) and a newer one's with them are one
    variant, fitted over both records' K values."""
    _write(tmp_path, [1000, 2000, 3000], lambda k: {"cuBLAS": 5.0 + k / 64, "192": 6.0 + k / 64})
    newer = json.loads((tmp_path / "bench-4500x3000x3000.json").read_text())
    for r in newer["results"]:
        if r["kind"] == "variant":
            r["config"] |= {"stagger": 0, "staging": 2}
    (tmp_path / "bench-4500x3000x3000.json").write_text(json.dumps(newer))
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    ((shape, rows),) = k_sweep.sweeps(records)
    assert shape == {"family": "matmul-bf16", "m": 4500, "n": 3000}
    variant = next(row for row in rows if row["kind"] == "variant")
    assert sorted(variant["times_us"]) == [1000, 2000, 3000] and abs(variant["fixed_us"] - 6.0) < 1e-9


def test_no_ratio_to_a_cublas_line_that_meets_zero():
    rows = [
        {"name": "cuBLAS", "kind": "torch", "times_us": {64: 1.0}, "fixed_us": 0.0, "per_64_us": 1.0,
         "worst_residual": 0.0},
        {"name": "bn=192", "kind": "variant", "times_us": {64: 2.0}, "fixed_us": 1.0, "per_64_us": 1.0,
         "worst_residual": 0.0},
    ]  # fmt: skip
    headers, body = k_sweep.table(rows)
    line = dict(zip(headers, body[1], strict=True))
    assert line["fixed/cuBLAS"] == "-" and line["per 64/cuBLAS"] == "1.000"


def test_a_variant_s_waves_and_its_cost_per_64_of_k_with_whole_waves(tmp_path):
    # 4500 × 3000 in 128 × 192 quads: 36 × 16 = 576 tiles over the 120 persistent blocks the part holds in quads
    # (Arch.resident_blocks), 4.8 waves (the fifth 80 % full)
    def record(k):
        made = _record(k, {"cuBLAS": 10.0 + 2.0 * k / 64, "192": 14.0 + 2.2 * k / 64})
        made["environment"] |= {"sm_count": 132}
        made["census"] = {"192": {"arch": "sm_90a", "occupancy": {"blocks_per_sm": 1}}}
        return made

    rows = {row["name"]: row for row in k_sweep.sweep([record(k) for k in (2200, 4400, 8800)])}
    assert rows["cuBLAS"]["waves"] is None and rows["cuBLAS"]["per_64_whole_waves_us"] is None
    quad = rows["192"]  # the only variant: no knob varies, so it is named by its label
    assert abs(quad["waves"] - 576 / 120) < 1e-9
    assert abs(quad["per_64_whole_waves_us"] - 2.2 * 576 / (5 * 120)) < 1e-9
    headers, body = k_sweep.table(list(rows.values()))
    cells = dict(zip(headers, next(b for b in body if b[0] == "192"), strict=True))
    assert cells["waves"] == "4.80" and cells["µs/64 K, whole waves"] == f"{2.2 * 576 / 600:.3f}"
