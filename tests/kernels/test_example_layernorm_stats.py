"""The training layer norm with statistics (examples/layernorm_stats) without a GPU: every knob value compiles
(NVRTC and ptxas) at a float4 row with a ragged last access and at a row of plain floats, the kernel's parameter list
matches the declared scalars (and a wrong declaration is named), a 2-D block reaches the census whole, what each
knob changes shows in the PTX, the float64 references agree with numpy's own statistics, and a static search runs
through the CLI. Its correctness and time on a GPU are tests/kernels/test_gpu_examples.py's."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mage_tune.census import census_variant
from mage_tune.errors import ConfigError
from mage_tune.families import Scalar, SourceOptions
from mage_tune.kernels import load_family

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "examples" / "layernorm_stats"
SPEC = str(FOLDER / "family.py")
ARCH = "sm_90"
# d=1000: float4 rows whose last access per lane is ragged (1000 = 7 · 128 + 104); d=1001: plain floats only
SHAPES = ({"m": 37, "d": 1000}, {"m": 64, "d": 1001})


@pytest.fixture(scope="module")
def family():
    return load_family(SPEC)


def _cases():
    family = load_family(SPEC)
    return [(k.name, v) for k in family.knobs for v in k.domain]


@pytest.mark.parametrize(("knob", "value"), _cases())
def test_every_knob_value_builds(family, knob, value):
    built = 0
    for shape in SHAPES:
        if knob == "vec" and shape["d"] % value:
            with pytest.raises(ConfigError, match="multiple of 4"):
                family.complete({knob: value}, shape, ARCH)
            continue
        config = family.complete({knob: value}, shape, ARCH)
        variant = family.build(config, shape, ARCH)  # checks the PTX's parameters against the declared scalars
        assert variant.artifact.cubin and variant.config[knob] == value
        assert variant.launch.block == (32, config["warps"], 1)
        built += 1
    assert built


def test_the_scalars_are_packed_as_declared(family):
    shape = family.shape_from({"m": 37, "d": 1000})
    n, d, eps = family.packed_scalars(shape)
    assert (n, d) == (37, 1000) and n.dtype == np.int32 and d.dtype == np.int32
    assert eps.dtype == np.float32 and eps == np.float32(1e-5)


def test_a_wrong_scalar_declaration_is_named(family):
    wrong = type(
        "WrongEps",
        (type(family),),
        {
            "template_dir": str(FOLDER),
            "scalar_params": (Scalar("N", "int"), Scalar("D", "int"), Scalar("eps", "double")),
        },
    )()
    shape = wrong.shape_from({"m": 37, "d": 1000})
    with pytest.raises(ConfigError, match=r"parameter 8 of layernorm_forward \(eps\) is passed as double"):
        wrong.build(wrong.default_config(shape, ARCH), shape, ARCH)


def test_a_two_dimensional_block_reaches_the_census(family):
    shape = family.shape_from({"m": 37, "d": 1000})
    config = family.complete({"warps": 8, "rows": 2}, shape, ARCH)
    variant = family.build(config, shape, ARCH)
    assert variant.launch.block == (32, 8, 1) and variant.threads == 256
    assert variant.launch.grid == (3, 1, 1)  # 37 rows, 16 a block
    census = census_variant(variant)
    assert census.block_dims == (32, 8, 1)
    assert census.occupancy.block == 256 and census.occupancy.blocks_per_sm > 0


def test_x_in_regs_reads_x_once_and_global_reads_it_in_loops(family):
    shape = family.shape_from({"m": 64, "d": 1024})
    base = {"warps": 4, "vec": 4, "rows": 2, "stats": "twopass", "stream": 0, "fast_math": 0}
    regs = census_variant(family.build({**base, "x_in": "regs"}, shape, ARCH)).ptx.params
    # 1024 floats: 8 float4 accesses per lane per row, 2 rows, fully unrolled: every load is counted
    assert regs["x"].loads == 16 and regs["out"].stores == 16 and regs["weight"].loads == 8
    assert regs["x"].load_bits == {128: 16}
    again = census_variant(family.build({**base, "x_in": "global"}, shape, ARCH)).ptx.params
    # three loops over the row (the mean, the deviations, out), each loading both rows, unrolled as the compiler likes
    assert again["x"].loads >= 3 * 2 and again["out"].stores >= 2


def test_stream_and_fast_math_change_the_instructions(family):
    shape = family.shape_from({"m": 64, "d": 1024})
    base = {"warps": 4, "vec": 4, "rows": 1, "x_in": "regs", "stats": "twopass", "stream": 0, "fast_math": 0}
    plain = family.build(base, shape, ARCH).artifact.ptx
    assert "ld.global.cs" not in plain and "st.global.cs" not in plain
    assert "sqrt.rn.f32" in plain and "rcp.rn.f32" in plain  # 1/sqrtf(var + eps) and 1/D in IEEE arithmetic
    streamed = family.build({**base, "stream": 1}, shape, ARCH).artifact.ptx
    assert "ld.global.cs.v4.f32" in streamed and "st.global.cs.v4.f32" in streamed
    fast_config = {**base, "fast_math": 1}
    assert "--use_fast_math" in family.source_options(fast_config, shape).options
    assert "--use_fast_math" not in family.source_options(base, shape).options
    fast = family.build(fast_config, shape, ARCH).artifact.ptx
    assert "sqrt.rn.f32" not in fast and "rcp.rn.f32" not in fast
    assert "rsqrt.approx.ftz.f32" in fast and "rcp.approx.ftz.f32" in fast


def test_welford_divides_per_element_and_merges_by_shuffles(family):
    shape = family.shape_from({"m": 64, "d": 1024})
    config = {"warps": 4, "vec": 4, "rows": 1, "x_in": "regs", "stats": "welford", "stream": 0, "fast_math": 0}
    census = census_variant(family.build(config, shape, ARCH))
    # three values a level over five levels, and lane 0's mean and M2 broadcast
    assert census.ptx.shuffles == 3 * 5 + 2


def test_mean_scale_define_reaches_the_kernel(family):
    shape = family.shape_from({"m": 64, "d": 1024})
    config = family.default_config(shape, ARCH)
    planted = family.with_source_options(SourceOptions(defines=("MEAN_SCALE=1.01f",)))
    constant = "0f" + struct.pack(">f", 1.01).hex().upper()  # how PTX writes 1.01f
    assert constant in planted.build(config, shape, ARCH).artifact.ptx
    assert constant not in family.build(config, shape, ARCH).artifact.ptx


def test_the_constraints_say_why(family):
    shape = family.shape_from({"m": 64, "d": 8192})
    config = {"warps": 4, "vec": 4, "rows": 1, "x_in": "regs", "stats": "twopass", "stream": 0, "fast_math": 0}
    (why,) = family.violations(config, shape, ARCH)
    assert "holds 256 floats of x per thread" in why and "over the 128" in why
    assert not family.violations({**config, "x_in": "global"}, shape, ARCH)
    ragged = family.shape_from({"m": 64, "d": 1001})
    assert any("multiple of 4" in p for p in family.violations(config, ragged, ARCH))
    assert family.shipped_config(family.shape_from({"m": 64, "d": 768}), ARCH)["warps"] == 8


def test_references_agree_with_numpy_statistics(family):
    shape = family.shape_from({"m": 3, "d": 5})
    inputs = family.make_inputs(shape, np.random.default_rng(1))
    inputs["x"][2] = [1.0, 1.0, 1.0, 1.0, 1.0]  # a constant row: var 0, rstd 1/sqrt(eps)
    refs = family.references(inputs, shape)
    x = inputs["x"].astype(np.float64)
    eps = float(np.float32(1e-5))
    mean = np.mean(x, axis=1)
    rstd = 1.0 / np.sqrt(np.var(x, axis=1) + eps)
    out = (x - mean[:, None]) * rstd[:, None] * inputs["weight"] + inputs["bias"]
    np.testing.assert_allclose(refs["mean"], mean, rtol=1e-13)
    np.testing.assert_allclose(refs["rstd"], rstd, rtol=1e-13)
    np.testing.assert_allclose(refs["out"], out, rtol=1e-12, atol=1e-14)
    assert refs["rstd"][2] == pytest.approx(1.0 / np.sqrt(eps)) and refs["mean"][2] == 1.0
    assert {k: v.shape for k, v in refs.items()} == {"out": (3, 5), "mean": (3,), "rstd": (3,)}
    assert family.output_shapes(shape) == {"out": (3, 5), "mean": (3,), "rstd": (3,)}
    assert family.bytes_moved(shape) == 4 * (2 * 15 + 2 * 5 + 2 * 3)


def test_a_static_search_runs_through_the_cli(tmp_path, compile_cache):
    env = {**os.environ, "MAGE_TUNE_CACHE": str(compile_cache)}
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", "search", SPEC, "--m", "512", "--d", "1000", "--static",
         "--trials", "10", "--run-dir", "run", "--db", "off", "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = json.loads(done.stdout)
    trials = [json.loads(line) for line in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 10 and any(t["outcome"] == "modelled" for t in trials)
    assert said["as_shipped"]["value"] > 0  # 32 × 8 blocks, float4: valid at d=1000
