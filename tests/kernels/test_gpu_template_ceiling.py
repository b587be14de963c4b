"""The templates' newer paths on a real GPU: matmul's serial split-K (turn counters that must start over at every
launch) and A staged through registers, the 3xTF32 tensor-core matmul (its fragments, ragged edges, split-K and
scalar stores of C), and layer norm's butterfly exchange (reduce=shfl2), streaming stores (y_hint=cs) and scale and
bias loaded early or copied into shared memory (affine=early, smem), each checked against the float64 reference after
one launch and again after many (graph replays included), then timed beside its baselines. Skipped where no CUDA
device is present."""

from __future__ import annotations

import numpy as np
import pytest

from mage_tune.arch import get_arch
from mage_tune.problem import Problem

pytestmark = pytest.mark.gpu

# The template's previous best at 1024x4096x1024 (a grid of 128 blocks: under one wave on 132 SMs), and changes of it.
WIDE = {"bm": 128, "bn": 256, "bk": 16, "tm": 8, "tn": 16, "stages": 2, "a_vec": 4, "b_vec": 16, "a_trans": 1}
WIDE = {**WIDE, "pad": 4, "smem_vec": 1, "pipe": 0, "k_unroll": 0, "raster": 0, "split_k": 1}
MATMUL_CASES = [
    ("matmul", {**WIDE, "split_k": 3}, {"m": 1024, "n": 4096, "k": 1024}),
    ("matmul", {**WIDE, "split_k": 8, "a_trans": 2, "a_vec": 16}, {"m": 1000, "n": 1028, "k": 4100}),  # 8 slices
    ("matmul", {**WIDE, "a_trans": 2, "a_vec": 16, "raster": 8}, {"m": 2048, "n": 2048, "k": 2048}),
    ("matmul", {**WIDE, "bm": 64, "bn": 64, "bk": 32, "tm": 8, "tn": 4, "a_trans": 0, "a_vec": 16, "split_k": 4,
                "pipe": 1, "stages": 3}, {"m": 1024, "n": 1024, "k": 8192}),
    ("matmul-3xtf32", {}, {"m": 1024, "n": 4096, "k": 1024}),
    # ragged in every dimension, N odd (scalar stores of C), 4-byte copies, three slices
    ("matmul-3xtf32", {"a_vec": 4, "b_vec": 4, "split_k": 3}, {"m": 1000, "n": 1001, "k": 999}),
    ("matmul-3xtf32", {"bm": 256, "bn": 64, "raster": 8, "stages": 4}, {"m": 2048, "n": 2048, "k": 2048}),
    ("matmul-3xtf32", {"wm": 64, "wn": 64, "chain": 0}, {"m": 512, "n": 768, "k": 64}),  # short K: one chain passes
    ("matmul-3xtf32", {"bm": 64, "bn": 64, "bk": 16, "wm": 32, "wn": 32, "split_k": 4},
     {"m": 1024, "n": 1028, "k": 8192}),
]  # fmt: skip
LAYERNORM_CASES = [
    ({"threads": 512, "reduce": "shfl2"}, {"m": 4096, "d": 4096}),
    ({"threads": 256, "reduce": "shfl2", "passes": "welford"}, {"m": 2048, "d": 5000}),
    ({"threads": 256, "rows": 2, "reduce": "shfl2", "persist": 2}, {"m": 8192, "d": 1600}),
    ({"threads": 128, "vec": 8, "y_hint": "cs", "hint": "cs"}, {"m": 16384, "d": 2560}),  # streaming stores
    ({"threads": 128, "vec": 8, "affine": "early"}, {"m": 4099, "d": 1000}),  # early scale/bias, ragged row
    ({"threads": 32, "vec": 16, "affine": "early", "full_occupancy": 1}, {"m": 32768, "d": 1024}),
    # scale and bias copied into shared memory: 20 KB, 48 KB of dynamic shared memory beside static (the opt-in), 64 KB,
    # and Welford's two reads with surplus rows in the last block and a ragged row
    ({"threads": 128, "vec": 8, "affine": "smem"}, {"m": 16384, "d": 2560}),
    ({"threads": 512, "passes": "twopass", "hint": "nc", "reduce": "smem", "affine": "smem"}, {"m": 8192, "d": 6144}),
    ({"threads": 256, "vec": 8, "affine": "smem"}, {"m": 1024, "d": 8192}),
    ({"threads": 64, "rows": 2, "vec": 4, "passes": "welford", "affine": "smem"}, {"m": 4099, "d": 1000}),
]


def _variant(family_name: str, config: dict, shape: dict):
    from mage_tune.kernels import get_family

    family = get_family(family_name)
    full = family.parse_settings([f"{k}={v}" for k, v in config.items()], shape, get_arch("sm_90"))
    return family, family.build(full, shape, get_arch("sm_90"))


def _correct_after_many_launches(family_name: str, config: dict, shape: dict) -> None:
    import torch

    from mage_tune.measure import variant_job
    from mage_tune.measure.harness import Buffers, check, make_launcher, time_graph

    family, variant = _variant(family_name, config, shape)
    bufs = Buffers(family, shape, seed=0, sets=2)
    reference = family.reference(bufs.host, shape)
    launch = make_launcher(variant_job(variant), family, shape)
    ok, _, _, why = check(launch, family, shape, bufs, reference)
    assert ok, f"{variant.label} first launch: {why}"
    for _ in range(25):
        launch(bufs.sets[0])
    time_graph(launch, bufs.sets, launches=20, rounds=2)  # graph replays, rotating buffer sets
    torch.cuda.synchronize()
    again = check(launch, family, shape, bufs, reference)
    assert again[0], f"{variant.label} after 65 launches: {again[3]}"
    if config.get("split_k", 1) > 1:  # the slices add in a fixed order: the same bits at every launch
        first = bufs.sets[0]["__out__"].clone()
        launch(bufs.sets[0])
        torch.cuda.synchronize()
        assert torch.equal(first, bufs.sets[0]["__out__"]), variant.label


@pytest.mark.parametrize(("family_name", "config", "shape"), MATMUL_CASES)
def test_matmul_paths_stay_correct_launch_after_launch(family_name, config, shape):
    _correct_after_many_launches(family_name, config, shape)


@pytest.mark.parametrize(("config", "shape"), LAYERNORM_CASES)
def test_butterfly_exchange_and_streaming_stores_stay_correct_launch_after_launch(config, shape):
    _correct_after_many_launches("layernorm", config, shape)


def test_split_k_is_timed_beside_cublas_and_fills_the_gpu():
    """The same tile with and without split-K at a shape whose grid is under one wave: both correct and timed in one
    session with cuBLAS; the split variant launches split_k times the blocks."""
    from mage_tune.measure import bench

    shape = {"m": 1024, "n": 4096, "k": 1024}
    family, plain = _variant("matmul", WIDE, shape)
    _, split = _variant("matmul", {**WIDE, "split_k": 3}, shape)
    assert np.prod(split.launch.grid) == 3 * np.prod(plain.launch.grid) == 3 * 128
    run = bench(Problem(family, shape, plain.arch), [plain, split], rounds=3, job_timeout_s=120, baselines=("torch",))
    results = {r.label: r for r in run.results}
    assert all(r.ok for r in results.values()), [(r.label, r.error) for r in results.values()]
    assert {r.kind for r in results.values()} == {"variant", "torch"}
    assert all(r.time("cold") > 0 for r in results.values())


def test_3xtf32_chains_keep_fp32_accuracy_and_are_timed_beside_cublas(monkeypatch):
    """The tensor-core family against the same float64 reference as cuBLAS FP32 (TF32 off), in one session, at a
    long K: with a chain per k-tile (the default) its error is within FP32's bound and near cuBLAS's; one mma chain
    over each split_k slice of 4096 products (chain=0, which the space refuses at this K, built here around its
    rule) drifts past the bound, since the tensor cores' accumulation truncates, and fails its check."""
    from mage_tune.measure import bench

    shape = {"m": 1024, "n": 1024, "k": 8192}
    family, chained = _variant("matmul-3xtf32", {"split_k": 2}, shape)
    monkeypatch.setattr(family, "check_valid", lambda *args: None)
    one_chain = family.build(family.with_defaults({"split_k": 2, "chain": 0}), shape, get_arch("sm_90"))
    run = bench(
        Problem(family, shape, chained.arch), [chained, one_chain], rounds=3, job_timeout_s=120, baselines=("torch",)
    )
    results = {r.config.get("chain", "cuBLAS"): r for r in run.results}
    errors = {k: r.rel_err for k, r in results.items()}
    print(f"relative error at {shape}: {errors}, tolerance {family.tolerance_for(shape):.3g}")
    assert results[1].ok and results["cuBLAS"].ok, results
    assert errors[1] <= 2 * errors["cuBLAS"] <= family.tolerance_for(shape), errors
    assert not results[0].ok and "over tolerance" in results[0].error and errors[0] > family.tolerance_for(shape)
    assert results[1].time("cold") > 0 and results["cuBLAS"].time("cold") > 0
