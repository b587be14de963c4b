"""The accuracy bar, without a GPU: a family may name, for a shape, a baseline kind whose error on the same inputs no
variant may exceed besides its tolerance (the FP32-accurate matmuls: cuBLAS FP32's where M, N and K reach 2048), and
a variant over it fails saying so. Its
GPU side: tests/kernels/test_gpu_matmul_3xtf32_sm90.py (a chain of 128 products worse than cuBLAS at 2304 × 4096 ×
2048)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from mage_tune.kernels import load_family
from mage_tune.measure.harness import Checked, over_bar
from mage_tune.search import sources

BENCH = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "bench_matmul_bf16_4096.json"

BAR = ("torch.matmul (cuBLAS FP32)", 8.09e-7)


def _checked(error: float) -> Checked:
    return Checked(ok=True, rel_err=error, max_abs_err=0.0, why="", outputs=())


def test_a_variant_over_the_bar_fails_saying_whose_error_it_exceeds():
    why = over_bar(_checked(9.1e-7), BAR)
    assert why == (
        "relative error 9.10e-07 is over torch.matmul (cuBLAS FP32)'s 8.09e-07 on the same inputs (the accuracy bar)"
    )
    assert over_bar(_checked(2.8e-7), BAR) == "" and over_bar(_checked(8.09e-7), BAR) == ""  # equal is not worse
    assert over_bar(_checked(9.1e-7), None) == ""  # no bar: the tolerance alone
    assert over_bar(_checked(math.nan), BAR) == ""  # a NaN error already failed its check


def test_the_fp32_accurate_matmuls_hold_to_cublas_fp32_where_all_dims_reach_2048():
    """There cuBLAS FP32 sums K-long chains above the split's own error; under it cuBLAS's short sums fall below that
    floor, and the tolerance alone holds (the other families: the tolerance everywhere)."""
    big, thin = {"m": 2304, "n": 4096, "k": 2048}, {"m": 300, "n": 200, "k": 4100}
    short = {"m": 4096, "n": 4096, "k": 1030}
    for name in ("matmul-3xtf32", "matmul-3xtf32-sm90"):
        family = load_family(name)
        assert family.accuracy_bar(big) == "torch"
        assert family.accuracy_bar(thin) is None and family.accuracy_bar(short) is None
        assert [b.label for b in family.baseline_kernels(big) if b.kind == "torch"] == ["torch.matmul (cuBLAS FP32)"]
    for name in ("matmul", "matmul-bf16"):
        assert load_family(name).accuracy_bar(big) is None
    assert load_family("layernorm").accuracy_bar({"m": 4096, "d": 4096}) is None


def _fp32_bench(tmp_path, shape: dict, errors: list[float], cublas: float):
    """The 4096³ bench fixture made a matmul-3xtf32-sm90 record at `shape`: cuBLAS FP32 with error `cublas`, and a
    passing variant for each of `errors`."""
    data = json.loads(BENCH.read_text())
    data |= {"family": "matmul-3xtf32-sm90", "family_origin": "matmul-3xtf32-sm90", "shape": shape, "census": {}}
    data["arch"] = "sm_90a"
    torch_result, variant = (next(r for r in data["results"] if r["kind"] == kind) for kind in ("torch", "variant"))
    results = [{**torch_result, "label": "torch.matmul (cuBLAS FP32)", "rel_err": cublas}]
    for i, error in enumerate(errors):
        results.append({**variant, "label": f"v{i}", "config": {"chain": i + 1}, "rel_err": error, "outputs": []})
    data["results"] = results
    path = tmp_path / f"bench-{shape['m']}.json"
    path.write_text(json.dumps(data))
    return path


def test_the_warm_start_reads_a_trial_over_the_bar_as_failed(tmp_path):
    """A record measured before the bar: at 2304 × 4096 × 2048 the variant worse than the run's own cuBLAS FP32 is a
    failed trial for the warm start, the one better measured; at 1024³ (no bar) both stay measured."""
    big = _fp32_bench(tmp_path, {"m": 2304, "n": 4096, "k": 2048}, [9.1e-7, 2.8e-7], cublas=8.09e-7)
    _, rows = sources.bench_record(big)
    assert [r["outcome"] for r in rows] == ["failed", "measured"]
    small = _fp32_bench(tmp_path, {"m": 1024, "n": 1024, "k": 1024}, [9.1e-7, 2.8e-7], cublas=8.09e-7)
    _, rows = sources.bench_record(small)
    assert [r["outcome"] for r in rows] == ["measured", "measured"]
