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

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.errors import ConfigError
from mage_tune.families import Scalar, SourceOptions
from mage_tune.kernels import load_family

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "examples" / "layernorm_stats"
SPEC = str(FOLDER / "family.py")
ARCH = get_arch("sm_90")
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


# --- the rendered kernel run on the host (tests/host_emulation.py) ---------------------------------------------------
# Warps share no barrier, so a block's warps run one after another, each as 32 OS threads (warp 0 of the shim's
# shuffle exchange); out, mean and rstd are then checked as the harness checks them, each in its own metric.

HOST_EXTRA = r"""
inline float __shfl_sync(unsigned, float v, int source) {
    lanes[0][threadIdx.x] = v;
    __syncwarp();
    const float got = lanes[0][source];
    __syncwarp();
    return got;
}
template <class T> T __ldcs(const T* p) { return *p; }
"""

HOST_MAIN = r"""
// argv: N, D, warps, grid, the inputs' file (x, weight, bias), the outputs' file (out, mean, rstd, NaN where unwritten)
int main(int argc, char** argv) {
    const int N = std::atoi(argv[1]), D = std::atoi(argv[2]);
    blockDim.x = 32;
    blockDim.y = std::atoi(argv[3]);
    gridDim.x = std::atoi(argv[4]);
    std::vector<float> x(size_t(N) * D), w(D), b(D), out(size_t(N) * D, NAN), mean(N, NAN), rstd(N, NAN);
    FILE* in = std::fopen(argv[5], "rb");
    for (auto* v : {&x, &w, &b})
        if (std::fread(v->data(), sizeof(float), v->size(), in) != v->size()) return 2;
    std::fclose(in);
    warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
    for (unsigned block = 0; block < gridDim.x; ++block)
        for (unsigned warp = 0; warp < blockDim.y; ++warp) {
            std::vector<std::thread> lanes_;
            for (unsigned lane = 0; lane < 32; ++lane)
                lanes_.emplace_back([&, lane] {
                    threadIdx.x = lane;
                    threadIdx.y = warp;
                    blockIdx.x = block;
                    layernorm_forward(x.data(), w.data(), b.data(), out.data(), mean.data(), rstd.data(), N, D, 1e-5f);
                });
            for (auto& t : lanes_) t.join();
        }
    FILE* result = std::fopen(argv[6], "wb");
    for (auto* v : {&out, &mean, &rstd}) std::fwrite(v->data(), sizeof(float), v->size(), result);
    std::fclose(result);
    return 0;
}
"""

BASE = {"warps": 4, "vec": 4, "rows": 1, "x_in": "regs", "stats": "twopass", "stream": 0, "fast_math": 0}
HOST_CASES = [
    (BASE, {"m": 37, "d": 1000}),  # the default: float4 rows with a ragged last access
    ({**BASE, "warps": 2, "vec": 1, "rows": 4, "stats": "welford"}, {"m": 37, "d": 1001}),  # a short last warp
    ({**BASE, "warps": 1, "rows": 2, "x_in": "global", "stream": 1}, {"m": 37, "d": 1000}),
    ({**BASE, "warps": 8, "vec": 1, "rows": 2, "x_in": "global", "stats": "welford"}, {"m": 37, "d": 1001}),
    ({**BASE, "warps": 32, "x_in": "global", "fast_math": 1}, {"m": 40, "d": 768}),
    ({**BASE, "warps": 16, "rows": 4, "x_in": "global", "stats": "welford"}, {"m": 70, "d": 64}),  # idle lanes
    ({**BASE, "vec": 1, "rows": 2, "stats": "welford"}, {"m": 9, "d": 5}),
    ({**BASE, "vec": 1, "rows": 2}, {"m": 9, "d": 5}),
]


def _host_failures(family, config, shape, tmp: Path, defines: tuple[str, ...] = ()) -> dict[str, str]:
    """Each output's failure on the host, by name ("" where it passes)."""
    from host_emulation import HOST_SHIM, host_compiler

    from mage_tune.measure.checks import compare

    source, program = tmp / "k.cpp", tmp / "k"
    source.write_text(HOST_SHIM + HOST_EXTRA + family.render(config, shape) + HOST_MAIN)
    flags = [f"-D{d}" for d in defines]
    subprocess.run([host_compiler(), "-std=c++20", "-O1", "-pthread", "-w", *flags, "-o", program, source], check=True)
    m, d = shape["m"], shape["d"]
    inputs = family.make_inputs(shape, np.random.default_rng(m + d))
    (tmp / "in.bin").write_bytes(b"".join(inputs[k].tobytes() for k in ("x", "weight", "bias")))
    grid = family.launch(config, shape, ARCH).grid[0]
    args = [program, m, d, config["warps"], grid, tmp / "in.bin", tmp / "out.bin"]
    subprocess.run(list(map(str, args)), check=True, timeout=300)
    got = np.fromfile(tmp / "out.bin", np.float32)
    got = {"out": got[: m * d].reshape(m, d), "mean": got[m * d : m * d + m], "rstd": got[m * d + m :]}
    refs = family.references(inputs, shape)
    return {
        o.name: compare(o.name, o.metric, got[o.name], refs[o.name], family.tolerance_of(o, shape), "float32").why
        for o in family.output_list()
    }


@pytest.mark.parametrize(("config", "shape"), HOST_CASES)
def test_kernels_match_the_references_in_a_host_emulation(family, config, shape, tmp_path):
    from host_emulation import host_compiler

    if host_compiler() is None:
        pytest.skip("needs g++ with C++20 <barrier>")
    assert not family.violations(config, shape, ARCH)
    assert _host_failures(family, config, shape, tmp_path) == {"out": "", "mean": "", "rstd": ""}


def test_a_planted_error_in_the_mean_fails_the_mean_alone_in_a_host_emulation(family, tmp_path):
    from host_emulation import host_compiler

    if host_compiler() is None:
        pytest.skip("needs g++ with C++20 <barrier>")
    failures = _host_failures(family, BASE, {"m": 37, "d": 1000}, tmp_path, ("MEAN_SCALE=1.01f",))
    assert failures["out"] == failures["rstd"] == ""
    assert failures["mean"].startswith("mean: relative error 0.01")
