"""The two examples users bring, on a real GPU: the training layer norm with its statistics (three outputs, 2-D
blocks) and the in-place AdamW step (typed scalars, three buffers updated in place). Every value of every knob is
checked output by output against the float64 references and timed cold beside the baselines (torch, the copies, the
config the kernels' authors ship); an error planted in the layer norm's mean fails that output alone; a measured
search of each finds a config faster than the shipped one. Skipped where no CUDA device is present; the CPU side
(builds, census, host emulation) is tests/kernels/test_example_*.py's."""

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
LAYERNORM = str(ROOT / "examples" / "layernorm_stats" / "family.py")
ADAMW = str(ROOT / "examples" / "adamw" / "family.py")
ARCH = get_arch("sm_90")
NAMES = {LAYERNORM: ("out", "mean", "rstd"), ADAMW: ("params", "m", "v")}

pytestmark = pytest.mark.gpu


def _each_knob_value(family, shape: dict) -> list[dict]:
    """A config for each value of each knob (the other knobs completed as the space's first valid config), without
    repeats; a value that is not valid at this shape (vec=4 at a ragged d) is left to the other shapes."""
    from mage_tune.errors import ConfigError

    configs = []
    for knob in family.knobs:
        for value in knob.domain:
            try:
                config = family.complete({knob.name: value}, shape, ARCH)
            except ConfigError:
                continue
            if config not in configs:
                configs.append(config)
    return configs


def _bench(family, shape: dict, configs: list[dict], baselines: tuple[str, ...] | None = None) -> list:
    from mage_tune.measure import bench

    variants = [family.build(config, shape, ARCH) for config in configs]
    run = bench(
        Problem(family, shape, ARCH), variants, regimes=("cold",), baselines=baselines, rounds=3, job_timeout_s=120
    )
    return list(run.results)


def _assert_every_output_passes(results: list, names: tuple[str, ...]) -> None:
    failed = [(r.label, r.error) for r in results if not r.ok]
    assert not failed, failed
    for r in results:
        assert r.time("cold") > 0, r.label
        if r.kind in ("variant", "shipped") or r.label.startswith("as shipped["):
            assert tuple(o.name for o in r.outputs) == names, r.label
            assert all(o.ok and o.error <= o.tolerance for o in r.outputs), (r.label, r.outputs)


def _covers_every_value(family, results: list) -> None:
    variants = [r for r in results if r.kind == "variant"]
    for knob in family.knobs:
        assert {r.config[knob.name] for r in variants} == set(knob.domain), knob.name


def test_layernorm_stats_every_knob_value_passes_each_output_and_is_timed():
    """m=1027: the last warp's rows cut short for rows of 2 and 4; d=1000: float4 rows with a ragged last access;
    d=1001: plain floats (the float4 values are d=1000's)."""
    from mage_tune.kernels import load_family

    family = load_family(LAYERNORM)
    results = []
    for shape in ({"m": 1027, "d": 1000}, {"m": 515, "d": 1001}):
        shape = family.shape_from(shape)
        found = _bench(family, shape, _each_knob_value(family, shape))
        _assert_every_output_passes(found, NAMES[LAYERNORM])
        results += found
    kinds = {r.kind for r in results}
    assert {"variant", "torch", "copy"} <= kinds  # copies at d=1000 only: 1001 floats a row are no 16-byte units
    assert any(r.label.startswith("as shipped[") for r in results)  # 32 × 8, float4: valid at d=1000
    _covers_every_value(family, results)


def test_a_planted_error_in_the_mean_fails_the_mean_alone():
    from mage_tune.families import SourceOptions
    from mage_tune.kernels import load_family

    family = load_family(LAYERNORM)
    planted = family.with_source_options(SourceOptions(defines=("MEAN_SCALE=1.01f",)))
    shape = family.shape_from({"m": 1024, "d": 1024})
    configs = [family.default_config(shape, ARCH), family.complete({"x_in": "global", "stats": "welford"}, shape, ARCH)]
    results = _bench(planted, shape, configs, baselines=())
    assert [r.kind for r in results] == ["variant", "variant"]
    for r in results:
        assert not r.ok and r.error.startswith("mean: relative error 0.01"), (r.label, r.error)
        checks = {o.name: o for o in r.outputs}
        assert [name for name, o in checks.items() if not o.ok] == ["mean"]
        assert checks["mean"].metric == "rel_l2" and checks["mean"].error == pytest.approx(0.01, rel=1e-3)
        assert checks["out"].ok and checks["rstd"].ok


def test_adamw_every_knob_value_takes_one_step_in_place_and_is_timed_cold():
    """n=1000003: float4 accesses and a tail of three; n=3: the tail alone. Timed cold, a buffer set per launch, each
    restored before every replay: the harness fails a result whose sets do not hold exactly one step afterwards."""
    from mage_tune import gpu
    from mage_tune.kernels import load_family

    family = load_family(ADAMW)
    results = []
    for shape in ({"n": 1_000_003}, {"n": 3}):
        shape = family.shape_from(shape)
        found = _bench(family, shape, _each_knob_value(family, shape))
        labels = {r.label for r in found}
        if not hasattr(gpu.torch(), "_fused_adamw_"):  # an older torch: the plain-ops baseline stands alone
            found = [r for r in found if r.label != "torch._fused_adamw_"]
        _assert_every_output_passes(found, NAMES[ADAMW])
        assert "torch AdamW (plain ops)" in labels and any(label.startswith("as shipped[") for label in labels)
        results += found
    _covers_every_value(family, results)


@pytest.mark.parametrize(
    ("spec", "shape"),
    [(ADAMW, {"n": 4096 * 4096}), (LAYERNORM, {"m": 16384, "d": 4096})],
    ids=["adamw", "layernorm_stats"],
)
def test_a_measured_search_beats_the_shipped_config(spec, shape, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    dims = ",".join(f"{k}={v}" for k, v in shape.items())
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", "search", spec, "--shape", dims, "--trials", "20", "--run-dir", "run",
         "--db", "off", "--json"],
        capture_output=True, text=True, timeout=1800, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = json.loads(done.stdout)
    shipped = said.get("as_shipped") or {}
    if shipped.get("value"):  # timed in the best trial's session, beside the trials
        assert shipped["modelled"] is False
        assert shipped["ratio"] < 1.0, shipped
        return
    # a search that reports no shipped time: the shipped config and the search's best timed in one session
    from mage_tune.kernels import load_family

    family = load_family(spec)
    configs = [family.shipped_config(shape, ARCH), family.with_defaults(said["config"])]
    assert configs[0] != configs[1], "the search's best is the shipped config"
    times = [r.time("cold") for r in _bench(family, shape, configs, baselines=()) if r.kind == "variant"]
    assert len(times) == 2 and times[1] < times[0], times
