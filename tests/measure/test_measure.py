"""The measurement path: refused cleanly without a GPU; on a GPU, planted defects fail and the next config measures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.measure.device import has_gpu
from mage_tune.problem import Problem

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "benchmarks" / "planted"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, timeout=300, env=os.environ.copy()
    )


@pytest.mark.skipif(has_gpu(), reason="checks the GPU-less refusal")
def test_bench_without_a_gpu_exits_2_with_one_line():
    proc = run_cli("bench", "layernorm", "--d", "64", "--m", "32")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mage-tune: error:") and "no CUDA device" in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_sweep_measures_every_valid_combination_and_skips_the_rest():
    from mage_tune.kernels import get_family
    from mage_tune.kernels.select import sweep

    fam = get_family("layernorm")
    shape = fam.shape_from(d=256, m=64)
    skipped = []
    configs = sweep(fam, shape, get_arch("sm_90"), ["threads=64,1024", "rows=1,2", "passes=regs"], skipped.append)
    labels = sorted(c["threads"] * c["rows"] for c in configs)
    assert labels == [64, 128, 1024]  # 1024 threads x 2 rows is over the block limit: skipped, and said
    assert len(skipped) == 1 and "1024" in skipped[0]


@pytest.mark.gpu
def test_planted_defects_fail_and_the_next_config_measures():
    from mage_tune.kernels import get_family
    from mage_tune.kernels.select import from_source as _from_source
    from mage_tune.measure import bench

    fam = get_family("matmul")
    shape = fam.shape_from(m=256, n=256, k=256)
    config = fam.parse_settings(["bm=64", "bn=64", "tm=4", "tn=4", "stages=2"], shape, get_arch("sm_90"))
    variants = [
        _from_source(fam, shape, get_arch("sm_90"), config, PLANTED / name)
        for name in ("matmul_wrong_last_tile.cu", "matmul_out_of_bounds.cu")
    ]
    variants.append(fam.build(config, shape, get_arch("sm_90")))
    run = bench(Problem(fam, shape, variants[0].arch), variants, baselines=("torch",), rounds=3, job_timeout_s=30)
    by_label = {r.label: r for r in run.results if r.kind == "variant"}
    wrong, oob, good = (by_label[v.label] for v in variants)
    assert not wrong.ok and "relative error" in wrong.error and not wrong.timings
    assert not oob.ok and "illegal" in oob.error.lower()
    assert good.ok and good.rel_err < fam.tolerance and good.time("cold") > 0
    assert good.session == oob.session + 1  # a fresh worker took over after the illegal address
    assert len(run.sessions) == 2
