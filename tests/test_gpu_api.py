"""mage_tune.search and mage_tune.bench on a GPU (mage_tune/api/): a measured search of three trials returns its best
with the baselines timed in its session and every trial with its census; bench returns every kernel checked and
timed beside the baselines, its to_json() is the record out= writes and holds what `mage-tune bench --json`
prints. Skipped where no CUDA device is present."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import mage_tune
from mage_tune.api import BenchResult, KernelResult, SearchResult
from mage_tune.measure import device

pytestmark = pytest.mark.gpu

SHAPE = {"m": 4096, "d": 768}


def test_a_measured_search_returns_its_best_beside_the_baselines(tmp_path):
    said: list[str] = []
    result = mage_tune.search(
        "layernorm", SHAPE, trials=3, seed=1, db="off", run_dir=tmp_path / "run", echo=said.append
    )
    assert isinstance(result, SearchResult) and result.mode == "measured"
    assert result.arch == device.arch_of_device() and result.study.endswith("-measured")
    assert said[0].startswith("measuring on the GPU: ") and "new study" in said[0]
    assert result.best.outcome == "measured" and result.best_us > 0 and result.best.session is not None
    measured = [t for t in result.trials if t.outcome == "measured"]
    assert measured and all(t.value > 0 and t.census["registers"] > 0 for t in measured)
    assert result.best_us == min(t.value for t in measured)
    assert "torch.layer_norm" in result.baselines and all(us > 0 for us in result.baselines.values())
    assert len(result.baselines) > 1  # Triton's kernels and the copies beside torch
    said_json = result.to_json()
    assert said_json["number"] == result.best.number and said_json["outcomes"] == result.outcomes
    assert "torch.layer_norm" in result.table() and f"run directory: {result.run_dir}" in result.table()


def test_bench_returns_every_kernel_timed_beside_the_baselines(tmp_path):
    out = tmp_path / "bench.json"
    said: list[str] = []
    result = mage_tune.bench("layernorm", SHAPE, settings={"vec": [4, 8]}, out=out, echo=said.append)
    assert isinstance(result, BenchResult) and result.regimes == ("cold",) and said[0].startswith("measuring on")
    assert all(isinstance(r, KernelResult) for r in result.results)
    variants = [r for r in result.results if r.kind == "variant"]
    assert len(variants) == 2 and {r.config["vec"] for r in variants} == {4, 8}
    for r in variants:
        assert r.ok and r.time_us > 0 and r.times["cold"] == r.time_us and r.census["registers"] > 0
    assert result.best in variants and result.best_us == min(r.time_us for r in variants)
    assert result.best_config == result.best.config and not result.failed
    assert "torch.layer_norm" in result.baselines and all(us > 0 for us in result.baselines.values())
    assert all(not r.census for r in result.results if r.kind != "variant")
    record = result.to_json()
    assert record == json.loads(out.read_text()) and record["schema"] == "mage-tune.bench/1"
    assert {row["label"] for row in record["summary"]["cold"]} == {r.label for r in result.results}
    assert "cold regime" in result.table() and result.best.label in result.table()

    env = {**os.environ, "COLUMNS": "100"}
    command = [sys.executable, "-m", "mage_tune", "bench", "layernorm", "--m", "4096", "--d", "768", "--set", "vec=4,8"]
    printed = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    cli = json.loads(printed.stdout)  # another run: other times, the same record
    assert cli.keys() == record.keys() and cli["launches"] == record["launches"]
    assert cli["census"].keys() == record["census"].keys() and cli["schema"] == record["schema"]
    assert [r["label"] for r in cli["results"]] == [r["label"] for r in record["results"]]


def test_bench_checks_only_where_asked(tmp_path):
    result = mage_tune.bench("layernorm", SHAPE, settings=["vec=4"], check_only=True, baselines="none")
    (variant,) = result.results
    assert variant.ok and variant.time_us is None and variant.times == {} and result.baselines == {}
    assert result.best is None and result.best_us is None and not result.failed
