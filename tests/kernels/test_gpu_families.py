"""User families on a real GPU: a CUDA template family and Triton kernel families loaded by path, checked against
their float64 references and timed beside their baselines; a planted crashing config is a failed trial and the
search goes on. Skipped where no CUDA device is present."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.problem import Problem

ROOT = Path(__file__).resolve().parents[2]
RMSNORM = ROOT / "examples" / "rmsnorm"

pytestmark = pytest.mark.gpu


def _bench(spec: str, shape: dict, settings: list[str]) -> dict:
    from mage_tune.kernels import load_family, select
    from mage_tune.measure import bench

    family = load_family(spec)
    shape = family.shape_from(shape)
    configs = select.sweep(family, shape, get_arch("sm_90"), settings, lambda why: None)
    variants = select.build_all(family, shape, get_arch("sm_90"), configs, lambda error: pytest.fail(str(error)))
    run = bench(Problem(family, shape, variants[0].arch), variants, rounds=3, job_timeout_s=60)
    return {r.label: r for r in run.results}


@pytest.mark.parametrize("spec", [f"{RMSNORM}/family.py", f"{RMSNORM}/family.py:BF16"])
def test_cuda_family_by_path_is_correct_and_timed_with_its_baselines(spec):
    results = _bench(spec, {"m": 1024, "d": 4096}, ["threads=128,512", "vec=16,8"])
    kinds = {r.kind for r in results.values()}
    assert kinds == {"variant", "triton", "torch", "copy"}
    for label, r in results.items():
        assert r.ok, (label, r.error)
        assert r.time("cold") > 0
    assert sum(r.kind == "variant" for r in results.values()) == 4


@pytest.mark.parametrize(
    "name", ["add-layernorm", "add-layernorm-sum", "add-vector-layernorm", "add-row-layernorm", "add-row-layernorm-sum"]
)
def test_the_fused_residual_add_and_norm_is_correct_at_a_ragged_shape_beside_pytorchs(name):
    results = _bench(name, {"m": 1001, "d": 768}, ["persist=0,4", "affine=late,early", "threads=128"])
    assert {r.kind for r in results.values()} == {"variant", "torch"}
    for label, r in results.items():
        assert r.ok, (label, r.error)
        assert r.time("cold") > 0
    assert sum(r.kind == "variant" for r in results.values()) == 3  # affine=early needs persist=0


@pytest.mark.parametrize("settings", [["persist=0,4", "threads=128,256"], ["passes=welford,twopass", "l2_ahead=0,2"]])
def test_the_fused_lookup_and_norm_is_correct_at_a_ragged_shape_beside_pytorchs(settings):
    results = _bench("embedding-layernorm", {"m": 1001, "d": 768, "vocab": 5003}, settings)
    assert {r.kind for r in results.values()} == {"variant", "torch"}
    for label, r in results.items():
        assert r.ok, (label, r.error)
        assert r.time("cold") > 0
    assert sum(r.kind == "variant" for r in results.values()) == 4


@pytest.mark.parametrize(
    "spec", [f"{RMSNORM}/triton_family.py:BF16", str(ROOT / "examples/softmax_autotuned/family.py")]
)
def test_triton_family_variants_launch_through_the_jit(spec):
    from mage_tune.kernels import load_family

    family = load_family(spec)
    shape = family.shape_from({dim: 2048 if dim != "m" else 1024 for dim in family.dims})
    first = list(family.configs(shape, get_arch("sm_90")))[:3]
    settings = [f"{k}={','.join(str(c[k]) for c in first)}" for k in first[0]]
    results = _bench(spec, shape, settings)
    variants = [r for r in results.values() if r.kind == "variant"]
    assert variants and all(r.ok for r in variants), [(r.label, r.error) for r in variants]
    assert all(r.ok for r in results.values() if r.kind != "variant")


def test_bulk_copy_family_is_correct_at_every_shared_memory_size():
    """The Hopper bulk-copy layer norm: short last row groups (M odd), a ragged last chunk (d=1000), both L2 policies,
    and rings of under, exactly and over 48 KB of dynamic shared memory (exactly 48 KB with the mbarriers' static bytes
    needs the opt-in too)."""
    from mage_tune.kernels import load_family

    spec = str(ROOT / "examples/layernorm_bulk/family.py")
    family = load_family(spec)
    cases = [
        ({"m": 4099, "d": 1000}, ["warps=2", "rows=2", "stages=2", "blocks=1", "x_hint=none,evict_first"]),
        ({"m": 4096, "d": 1024}, ["warps=4", "rows=1", "stages=3,6", "blocks=1"]),  # 48 KB and 96 KB rings
    ]
    sizes = set()
    for shape, settings in cases:
        results = _bench(spec, shape, settings)
        variants = [r for r in results.values() if r.kind == "variant"]
        assert len(variants) == 2 and all(r.ok for r in results.values()), [(r.label, r.error) for r in variants]
        sizes |= {family.ring_bytes(r.config, shape) for r in variants}
    assert min(sizes) < 48 * 1024 and 48 * 1024 in sizes and max(sizes) > 48 * 1024


def test_cluster_family_is_correct_for_every_cluster_size():
    """The cluster layer norm: a row split over 2, 4 or 8 CTAs meeting through distributed shared memory (and the
    control, a CTA per row), scale and bias late or early, an odd row count, and a ragged last chunk (d=1000)."""
    spec = str(ROOT / "examples/layernorm_cluster/family.py")
    cases = [
        ({"m": 1027, "d": 6144}, ["cluster=1,2,4,8", "threads=128,256", "affine=late,early"]),
        ({"m": 515, "d": 1000}, ["cluster=1,2", "threads=64", "affine=late,early"]),
    ]
    clusters = set()
    for shape, settings in cases:
        results = _bench(spec, shape, settings)
        variants = [r for r in results.values() if r.kind == "variant"]
        failed = [(r.label, r.error) for r in results.values() if not r.ok]
        assert variants and not failed, failed
        clusters |= {r.config["cluster"] for r in variants}
    assert clusters == {1, 2, 4, 8}


def test_a_crashing_config_is_a_failed_trial_and_the_search_goes_on(tmp_path):
    family = ROOT / "tests" / "fixtures" / "data" / "planted_crash_family.py"
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", "search", str(family), "--trials", "4", "--sampler", "grid",
         "--run-dir", str(run_dir), "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    trials = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    by_crash = {}
    for t in trials:
        by_crash.setdefault(t["config"]["crash"], set()).add(t["outcome"])
    assert by_crash[1] <= {"failed", "duplicate"} and "failed" in by_crash[1]
    assert "measured" in by_crash[0]
    failed = [t for t in trials if t["outcome"] == "failed"]
    assert all("illegal" in t["error"].lower() or "died" in t["error"] for t in failed)
