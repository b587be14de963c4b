"""The independent re-timer's CPU side (benchmarks/gpu/retime_independent.py): which trials of a run or a bench
record it re-times, and that a record of a family file nobody named never loads code. Its GPU side:
test_gpu_retime.py."""

from __future__ import annotations

import json

import pytest
from test_gpu_retime import ROOT, RUNS, retimer

from mage_tune.errors import MageError
from mage_tune.search import record


def test_the_best_distinct_configs_best_first():
    run = RUNS[0]
    top = retimer().winners(run, 3)
    assert len(top) == 3 and top[0]["number"] == record.best_trial(run)["number"]
    assert [t["value"] for t in top] == sorted(t["value"] for t in top)
    assert len({json.dumps(t["config"], sort_keys=True) for t in top}) == 3
    assert all(t["outcome"] == "measured" for t in top)
    every = {json.dumps(t["config"], sort_keys=True) for t in record.trials(run) if t["outcome"] == "measured"}
    assert len(retimer().winners(run, 10**6)) == len(every)


def test_a_record_of_a_family_file_nobody_named_loads_no_code(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    planted = tmp_path / "planted.py"
    planted.write_text("raise SystemExit('a record ran code')\n")
    meta = json.loads((RUNS[0] / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "family": str(planted), "origin": str(planted)}))
    (run / "trials.jsonl").write_text((RUNS[0] / "trials.jsonl").read_text())
    assert retimer().main([str(run), "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert str(run) in err and "records never load code" in err and "--family" in err


def test_runs_that_cannot_be_re_timed_are_listed_and_cost_the_others_nothing(tmp_path, capsys):
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text((RUNS[0] / "run.json").read_text())
    (empty / "trials.jsonl").write_text("")  # a search whose every trial was pruned re-times nothing
    out = tmp_path / "retime.json"
    assert retimer().main([str(missing), str(empty), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and f"{empty}: no measured or modelled trial" in err
    skipped = json.loads(out.read_text())["skipped"]
    assert [s["run"] for s in skipped] == [str(missing), str(empty)]


def test_an_unknown_regime_is_refused_before_anything_is_timed(capsys):
    assert retimer().main([str(RUNS[0]), "--regimes", "graph,hot"]) == 2
    assert "--regimes: hot not among warm, graph, batch" in capsys.readouterr().err


def test_a_bench_record_s_fastest_variants_and_its_cublas_time(tmp_path):
    bench = ROOT / "tests/fixtures/data/bench_matmul_bf16_4096.json"
    family, meta, best, theirs, baselines = retimer()._what_to_retime(bench, 5, None)
    assert family.name == "matmul-bf16" and meta["shape"] == {"m": 4096, "n": 4096, "k": 4096}
    assert [(t["value"], t["config"]["bn"]) for t in best] == [(200.0, 256), (240.0, 128)]
    assert theirs == 180.0  # the record's cuBLAS BF16 median, the ratio the re-timing is compared with
    assert baselines == {"torch.matmul (cuBLAS BF16)": 180.0}
    assert [t["config"]["bn"] for t in retimer()._what_to_retime(bench, 1, None)[2]] == [256]
    data = json.loads(bench.read_text())
    data["results"] = [r for r in data["results"] if r["kind"] != "variant"]
    (tmp_path / "none.json").write_text(json.dumps(data))
    with pytest.raises(MageError, match=r"none\.json: no measured variant to re-time"):
        retimer()._what_to_retime(tmp_path / "none.json", 1, None)


TMA = "triton-tma[BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3]"
PLAIN = "triton[BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3]"


def with_triton(tmp_path, times: dict[str, float]):
    """The 4096³ bench fixture with Triton results of these labels and times beside its cuBLAS one."""
    bench = ROOT / "tests/fixtures/data/bench_matmul_bf16_4096.json"
    data = json.loads(bench.read_text())
    torch_result = next(r for r in data["results"] if r["kind"] == "torch")
    for label, us in times.items():
        timing = {**torch_result["timings"][0], "median_us": us}
        data["results"].append({**torch_result, "label": label, "kind": "triton", "timings": [timing]})
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    return path


def test_the_fastest_triton_config_of_the_run_is_the_one_retimed(tmp_path, monkeypatch):
    """Of the run's Triton results, the fastest whose label is one of the family's own baselines: the family's
    launcher runs it (a label the family does not know, however fast, picks nothing)."""
    path = with_triton(tmp_path, {PLAIN: 190.0, TMA: 185.0, "triton[planted]": 1.0})
    family, meta, _, _, baselines = retimer()._what_to_retime(path, 1, None)
    assert baselines[TMA] == 185.0 and baselines["triton[planted]"] == 1.0
    launched = []
    monkeypatch.setattr(family, "launcher", lambda job, shape: lambda bufs: launched.append((job.label, job.config)))
    label, launch = retimer()._triton_baseline(family, {"A": None}, meta["shape"], baselines)
    launch()
    assert label == TMA and launched == [(TMA, next(b.config for b in family.baseline_kernels(meta["shape"])
                                                     if b.label == TMA))]  # fmt: skip
    assert retimer()._triton_baseline(family, {}, meta["shape"], {"triton[planted]": 1.0}) is None
    assert retimer()._triton_baseline(family, {}, meta["shape"], {"torch.matmul (cuBLAS BF16)": 180.0}) is None
