"""`mage-tune explain`'s bound line on two small hand-made bench records (tests/fixtures/data/bench_*.json), read
through the one validated record reader: a Hopper BF16 matmul (tensor pipe against the arch's dense BF16 peak, memory
against the session's copy bandwidth, the last wave of its persistent grid's tiles) and a layer norm (no FLOPs: no pipe
fraction; memory bound)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mage_tune import arch
from mage_tune.cli import cli
from mage_tune.measure.explain import bound_fractions, bound_line, compute_dtype, explain_bench
from mage_tune.measure.saved import read_json, result_time, timed_results

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
MATMUL = DATA / "bench_matmul_bf16_4096.json"
LAYERNORM = DATA / "bench_layernorm_16384x4096.json"


def _best(record):
    best = timed_results(record, "variant")[0]
    return best, result_time(best)


def test_peaks_live_in_arch():
    assert arch.peak_tflops("sm_90a", "BF16") == arch.peak_tflops("sm_90", "BF16") == 989.4
    assert (arch.peak_tflops("sm_90", "TF32"), arch.peak_tflops("sm_90", "FP32")) == (494.7, 66.9)
    assert arch.peak_tflops("sm_80", "BF16") is None and arch.peak_tflops("sm_90", "FP8") is None
    assert arch.nominal_bandwidth_gbs("NVIDIA H200") == 4800.0 and arch.nominal_bandwidth_gbs("RTX 9999") is None


def test_matmul_bf16_is_tensor_pipe_bound():
    record = read_json(MATMUL)
    best, t = _best(record)
    assert t == 200.0 and compute_dtype(record["census"][best["label"]]) == "BF16"
    b = bound_fractions(record, best, t)
    assert b["pipe"]["tflops"] == pytest.approx(2 * 4096**3 / 200e-6 / 1e12)  # 687.2 TFLOP/s
    assert b["pipe"]["fraction"] == pytest.approx(687.19476736 / 989.4)  # 69%
    assert b["memory"]["fraction"] == pytest.approx(3 * 4096 * 4096 * 2 / 200e-6 / 4200e9)  # 12% of the copy
    assert b["memory"]["source"] == "copy"
    tail = b["tail"]  # 32 × 16 tiles of 128 × 256 walked by 132 persistent blocks, one per SM
    assert (tail["units"], tail["what"], tail["workers"]) == (512, "tiles", 132)
    assert tail["last_full"] == pytest.approx(512 / 132 - 3) and tail["idle"] == pytest.approx(1 - 512 / 528)
    assert b["bound"] == "tensor pipe"
    assert bound_line(record, best, t) == (
        "bound: tensor pipe; tensor pipe 69% of 989 TFLOP/s (BF16 dense); memory 12% of 4.20 TB/s (copy); "
        "last wave 88% full (512 tiles over 132 resident blocks, 3.88 waves)"
    )
    # the family's own tile count, where its code is named, agrees
    named = bound_fractions(record, best, t, "mage_tune/kernels/matmul_bf16.py")
    assert named["tail"] == tail and tail["edge"] == 0  # 128 × 256 tiles fit 4096² exactly


def test_tiles_past_a_ragged_output_s_edges_are_named():
    record = read_json(MATMUL)
    best, t = _best(record)
    record["shape"] = {"m": 2900, "n": 4704, "k": 3104}  # 23 × 19 tiles of 128 × 256: 2944 × 4864 for 2900 × 4704
    tail = bound_fractions(record, best, t)["tail"]
    assert tail["units"] == 23 * 19 and tail["edge"] == pytest.approx(1 - 2900 * 4704 / (2944 * 4864))
    assert bound_line(record, best, t).endswith("3.31 waves); tiles 5% past the output's edges")
    record["shape"] = {"m": 4096, "n": 4096, "k": 3104}
    assert "past the output's edges" not in bound_line(record, best, t)


def test_layernorm_is_memory_bound_without_a_pipe_fraction():
    record = read_json(LAYERNORM)
    best, t = _best(record)
    b = bound_fractions(record, best, t)
    assert "pipe" not in b and record["flops"] == 0
    assert b["memory"]["fraction"] == pytest.approx(record["bytes_moved"] / (t * 1e-6) / 4200e9)
    assert round(b["memory"]["fraction"], 2) == 0.95
    tail = b["tail"]  # one row per block, 3 blocks of 512 threads per SM
    assert (tail["units"], tail["what"], tail["workers"]) == (16384, "blocks", 396)
    assert tail["last_full"] == pytest.approx(16384 / 396 - 41)
    assert b["bound"] == "memory"
    assert bound_line(record, best, t).startswith("bound: memory; memory 95% of 4.20 TB/s (copy); last wave 37% full")


def test_latency_tail_and_unknown_peaks():
    record = read_json(LAYERNORM)
    best, _ = _best(record)
    assert bound_fractions(record, best, 10 * 134.48)["bound"] == "latency"  # 10% of the copy, a full last wave
    few = copy.deepcopy(record)
    few["shape"] = {"m": 500, "d": 4096}  # 500 blocks over 396 slots: the second wave is 26% full
    b = bound_fractions(few, best, 10 * 134.48)
    assert b["bound"] == "tail" and b["tail"]["idle"] == pytest.approx(1 - 500 / 792)
    mm = read_json(MATMUL)
    best, t = _best(mm)
    mm["environment"]["compute_capability"] = "8.0"
    line = bound_line(mm, best, t)
    assert "tensor pipe 687.2 TFLOP/s (no known peak for BF16 on sm_80)" in line
    mm["sessions"][0]["copy_gbs"] = None  # no measured copy: the part's nominal bandwidth
    assert "memory 10% of 4.80 TB/s (nominal)" in bound_line(mm, best, t)


def test_explain_prints_the_bound_line():
    text = explain_bench(read_json(MATMUL))
    assert "\nbound: tensor pipe; tensor pipe 69% of 989 TFLOP/s (BF16 dense)" in text
    out = CliRunner().invoke(cli, ["explain", str(LAYERNORM), "--wide"])
    assert out.exit_code == 0, out.output
    assert "bound: memory; memory 95% of 4.20 TB/s (copy); last wave 37% full" in out.output


def test_a_bf16_winners_floor_is_the_tensor_peak_not_the_fma_rate():
    record = read_json(MATMUL)
    text = explain_bench(record)
    floor = record["flops"] / 989.4e12 * 1e6
    assert f"floor {floor:.2f} µs (FLOPs at the BF16 dense tensor peak, 989 TFLOP/s): 69% of the floor" in text
    fp32 = read_json(MATMUL)
    for c in fp32["census"].values():  # the same record with an FMA-only winner keeps the measured FMA floor
        for view in c.values():
            if isinstance(view, dict):
                view.pop("matrix", None)
                view.pop("matrix_shapes", None)
    assert "(FLOPs at the measured FMA rate" in explain_bench(fp32)


def _tf32(record: dict, family: str, passes: int | None) -> dict:
    """The BF16 fixture as a TF32 matmul's record: its winners' wgmma shapes TF32, the family and its products per
    FLOP as given (None: a record written before bench records kept them)."""
    out = copy.deepcopy(record)
    out["family"] = family
    for census in out["census"].values():
        for view in ("ptx", "sass"):
            shapes = census[view].get("matrix_shapes") or {}
            census[view]["matrix_shapes"] = {re.sub("bf16", "tf32", k, flags=re.I): v for k, v in shapes.items()} or {
                "wgmma.m64n256k8.f32.tf32.tf32": 1
            }
    if passes is not None:
        out["mma_passes"] = passes
    return out


def test_a_3xtf32_winner_fills_the_tensor_pipe_three_times_per_flop():
    record = read_json(MATMUL)
    best, t = _best(record)  # 687.2 TFLOP/s FP32-equivalent at 200 µs
    tf32 = _tf32(record, "matmul-3xtf32-sm90", 3)
    b = bound_fractions(tf32, best, 4 * t)  # 171.8 TFLOP/s, three TF32 products each
    assert b["pipe"]["dtype"] == "TF32" and b["pipe"]["products"] == 3
    assert b["pipe"]["fraction"] == pytest.approx(3 * 687.19476736 / 4 / 494.7)  # 104 %: bound by the pipe
    assert b["bound"] == "tensor pipe"
    assert "tensor pipe 104% of 495 TFLOP/s (TF32 dense, 3 products per FLOP)" in bound_line(tf32, best, 4 * t)
    # the floor: three products per FLOP at the TF32 peak, not the FP32 FMA rate
    tf32["results"][0]["timings"][0]["median_us"] = 8 * t
    floor = record["flops"] * 3 / 494.7e12 * 1e6
    assert f"floor {floor:.2f} µs (FLOPs × 3 products at the TF32 dense tensor peak, 495 TFLOP/s)" in explain_bench(
        tf32
    )
    # without the record's count: the built-in family's code says 3; a family file nobody named says nothing
    builtin = _tf32(record, "matmul-3xtf32", None)
    assert bound_fractions(builtin, best, 4 * t)["pipe"]["products"] == 3
    unnamed = _tf32(record, "my_kernels/matmul_3xtf32_sm90.py", None)
    pipe = bound_fractions(unnamed, best, 4 * t)["pipe"]
    assert (pipe["products"], pipe["products_known"]) == (1, False)
    # the package's own module, as records of searches by path named it, is the built-in: its code says 3
    by_path = _tf32(record, "mage_tune/kernels/matmul_3xtf32_sm90.py", None)
    assert bound_fractions(by_path, best, 4 * t)["pipe"]["products"] == 3
    assert "(FLOPs at the measured FMA rate" in explain_bench(unnamed)  # no tensor floor it cannot vouch for


def test_a_damaged_products_count_is_refused_naming_the_file(tmp_path):
    import json

    from mage_tune.errors import InputError

    record = read_json(MATMUL)
    for bad in (0, -1, 2.5, "3", True):
        path = tmp_path / "bench.json"
        path.write_text(json.dumps({**record, "mma_passes": bad}))
        with pytest.raises(InputError, match=r"'mma_passes' is .*, not a positive integer") as err:
            read_json(path)
        assert str(path) in str(err.value)


def test_a_cluster_winner_s_resident_blocks_are_an_upper_bound():
    """A cluster's blocks share one GPC, so how many are resident at once is the driver's count at launch, which no
    record holds: for a winner in clusters of 4 explain gives the SMs' slots as the most, and says why."""
    record = copy.deepcopy(read_json(MATMUL))
    best, t = _best(record)
    record["census"][best["label"]]["cluster"] = {"dims": [4, 1, 1], "explicit": True, "source": "PTX"}
    assert bound_fractions(record, best, t)["tail"]["cluster"] == 4
    assert bound_line(record, best, t).endswith(
        "last wave 88% full (512 tiles over at most 132 resident blocks, at least 3.88 waves)"
    )
    text = explain_bench(record)
    assert "blocks: 132 on 132 SMs, in clusters of 4, at most 132 resident at once" in text
    assert "clusters of 4: a cluster's blocks share one GPC" in text and "all resident at once" not in text
    assert "so the waves the fewest" in text
    for odd in (None, {}, {"dims": None}, {"dims": 4}, "4x1x1", {"dims": [True, 1, 1]}):  # no clusters said
        record["census"][best["label"]]["cluster"] = odd
        assert bound_fractions(record, best, t)["tail"]["cluster"] == 1
    assert "all resident at once (132 slots)" in explain_bench(read_json(MATMUL))  # without clusters, as before


def test_a_cluster_winner_whose_launch_was_counted_uses_the_driver_s_count():
    """Where the measurement kept the driver's count of resident blocks (128 for clusters of 4 on a part whose GPCs
    leave 4 SMs out) and the grid its launcher cut to it, the waves are over those: 512 tiles over 128 blocks is
    4.00 waves, not at least 3.88, and nothing is said to be a bound."""
    record = copy.deepcopy(read_json(MATMUL))
    best, t = _best(record)
    record["census"][best["label"]]["cluster"] = {"dims": [4, 1, 1], "explicit": True, "source": "PTX"}
    best |= {"launched_grid": [128, 1, 1], "resident_blocks": 128}
    tail = bound_fractions(record, best, t)["tail"]
    assert (tail["workers"], tail["counted"], tail["waves"]) == (128, True, 4.0)
    assert bound_line(record, best, t).endswith("last wave 100% full (512 tiles over 128 resident blocks, 4.00 waves)")
    text = explain_bench(record)
    assert (
        "blocks: 128 on 132 SMs, in clusters of 4, 128 resident at once (the driver's count; 4 of the SMs' 132 slots "
        "hold none)" in " ".join(text.split())
    )
    assert "at most" not in text and "share one GPC" not in text
    best |= {"launched_grid": [0, 1, 1], "resident_blocks": True}  # damaged: read as not kept
    assert bound_fractions(record, best, t)["tail"]["counted"] is False
    assert "at most 132 resident" in explain_bench(record)


def test_a_tma_winner_s_bulk_loads_are_counted_by_its_family():
    """A bulk tensor copy's size is its tensor map's box, set on the host, so the census counts the winner's TMA loads
    but no bytes in flight: explain takes the bytes from the family's code (its ring of stages), and says where it
    has no code to ask."""
    record = read_json(MATMUL)  # winner: 128 × 256, four stages, five bulk loads in its census
    ring = 4 * (128 + 256) * 64 * 2  # 192 KiB
    text = explain_bench(record)
    assert (
        f"  bulk tensor (TMA) loads: 5 in the code, up to {ring // 1024} KiB a block in flight by the family's count "
        f"(every stage of its ring filling) = {ring // 1024} KiB per SM" in text
    )
    unnamed = copy.deepcopy(record)
    unnamed["family"] = "my_kernels/matmul_bf16.py"
    assert "bulk tensor (TMA) loads: 5 in the code, their bytes set by tensor maps on the host, not in the binary" in (
        explain_bench(unnamed)
    )
    multicast = copy.deepcopy(record)  # a cluster's multicast loads are bulk tensor loads too
    multicast["census"][_best(record)[0]["label"]]["sass"]["bulk"] = {"load": 1, "multicast": 2}
    assert "  bulk tensor (TMA) loads: 3 in the code, up to" in explain_bench(multicast)
    plain = read_json(LAYERNORM)  # no bulk copies: no such line
    assert "bulk tensor" not in explain_bench(plain)


def test_families_count_their_ring_of_bulk_copies():
    from mage_tune.kernels.registry import load_family

    bf16, tf32 = load_family("matmul-bf16"), load_family("matmul-3xtf32-sm90")
    config = bf16.with_defaults({"bm": 128, "bn": 160, "stages": 5, "consumers": 2})
    assert bf16.bulk_bytes_in_flight(config) == 5 * (128 + 192) * 64 * 2  # B's last 64-column box copied whole
    assert bf16.bulk_bytes_in_flight({**config, "transposed": 1}) == 5 * (128 + 160) * 64 * 2  # bn rows of A
    assert load_family("matmul-f16").bulk_bytes_in_flight(config) == bf16.bulk_bytes_in_flight(config)
    wide = tf32.with_defaults({"bm": 128, "bn": 128, "stages": 3})
    assert tf32.bulk_bytes_in_flight(wide) == 3 * 2 * (128 + 128) * 32 * 4  # big and small parts of A and B^T
    layernorm = load_family("layernorm")
    assert layernorm.bulk_bytes_in_flight(layernorm.with_defaults({})) == 0
