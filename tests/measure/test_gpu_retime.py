"""The independent re-timer (benchmarks/gpu/retime_independent.py) on H200 search winners (tests/fixtures/): it rebuilds
the very cubin the search timed (or flags one that differs), launches it outside mage-tune's harness, finds it
correct, and times it beside torch. Skipped where no CUDA device is present."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BF16 = ROOT / "mage_tune/kernels/matmul_bf16.py"
RUNS = [
    ROOT / "tests/fixtures/matmul-3xtf32/searches/matmul-3xtf32-m512n512k512",
    ROOT / "tests/fixtures/layernorm-winner/searches/layernorm-m2048d1536",
]

pytestmark = pytest.mark.gpu


def retimer():
    spec = importlib.util.spec_from_file_location("retime_independent", ROOT / "benchmarks/gpu/retime_independent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_winners_retimed_outside_the_harness(tmp_path):
    out = tmp_path / "retime.json"
    assert retimer().main([*map(str, RUNS), "--rounds", "1", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["harness"].startswith("single launches") and record["environment"]["gpu"]
    for run, row in zip(RUNS, record["winners"], strict=True):
        best = json.loads((run / "best" / "best.json").read_text())
        assert row["same_binary"] and row["cubin_sha256"] == best["cubin_sha256"]  # the binary the search timed
        assert row["ok"] and row["rel_err"] <= row["tolerance"]
        assert row["ours_us"] > 0 and row["torch_us"] > 0 and row["search_torch_us"] > 0


def test_a_changed_binary_is_flagged(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("run.json", "baselines.jsonl"):
        (run / name).write_text((RUNS[0] / name).read_text())
    winner = retimer().winners(RUNS[0], 1)[0]["number"]
    lines = [json.loads(x) for x in (RUNS[0] / "trials.jsonl").read_text().splitlines()]
    changed = [{**t, "cubin_sha256": "0" * 64} if t["number"] == winner else t for t in lines]
    (run / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in changed))
    out = tmp_path / "retime.json"
    assert retimer().main([str(run), "--rounds", "1", "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())["winners"]
    assert row["ok"] and not row["same_binary"] and row["trial"] == winner


def test_bf16_winners_launched_by_their_family_are_retimed(tmp_path):
    """matmul-bf16 launches through tensor maps (its own launcher): its best two configs of a static search at a
    ragged shape, rebuilt to the same cubins, launched, checked against float64 on the BF16-rounded inputs and timed
    beside cuBLAS BF16, also warm, as a one-launch graph and in batches. A static search has no times of its own to
    compare with: the row says so."""
    run = tmp_path / "bf16"
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", "search", str(BF16), "--m", "320", "--n", "200", "--k", "136",
         "--arch", "sm_90a", "--static", "--trials", "4", "--polish", "0", "--run-dir", str(run)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = tmp_path / "retime.json"
    argv = [str(run), "--family", str(BF16), "--top", "2", "--rounds", "1", "--regimes", "warm,graph,batch"]
    assert retimer().main([*argv, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["winners"]
    assert [r["rank"] for r in rows] == [1, 2] and rows[0]["config"] != rows[1]["config"]
    for row in rows:
        assert row["same_binary"] and row["ok"] and 0 < row["rel_err"] <= row["tolerance"]
        assert row["ours_us"] > 0 and row["torch_us"] > 0
        assert row["search_outcome"] == "modelled" and row["search_ours_us"] is None and "ratio_change" not in row
        assert set(row["regimes"]) == {"warm", "graph", "batch"}
        assert all(t["ours_us"] > 0 and t["torch_us"] > 0 for t in row["regimes"].values())


def test_a_bench_record_s_fastest_triton_config_is_retimed_beside_ours(tmp_path):
    """A bench record that timed Triton: its fastest Triton config is launched and timed in turns with the winner and
    cuBLAS, and the row keeps both ratios (the record's own Triton time beside it)."""
    from test_retime_winners import TMA, with_triton

    path = with_triton(tmp_path, {TMA: 210.0})
    out = tmp_path / "retime.json"
    assert retimer().main([str(path), "--rounds", "1", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["winners"]
    assert row["ok"] and row["triton_label"] == TMA and row["triton_us"] > 0 and len(row["rounds_triton_us"]) == 1
    assert row["ours_over_triton"] == row["ours_us"] / row["triton_us"]
    assert row["search_ours_over_triton"] == 200.0 / 210.0
    assert row["bar_rel_err"] is None  # BF16 is held to its tolerance alone
