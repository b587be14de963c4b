"""The in-place AdamW step (examples/adamw) without a GPU: every knob value compiles (NVRTC and ptxas) at a count
with a ragged tail and at one under a single float4, the scalars are packed as the kernel declares them (seven
floats, an int, a size_t) and a wrong declaration is named, the grid follows the loop knob, what the knobs change
shows in the PTX, the float64 reference agrees with the step written as torch's plain ops in numpy, and a static
search runs through the CLI. Its correctness and time on a GPU are tests/kernels/test_gpu_examples.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.errors import ConfigError
from mage_tune.families import Scalar
from mage_tune.kernels import load_family

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "examples" / "adamw"
SPEC = str(FOLDER / "family.py")
ARCH = get_arch("sm_90")
# 1000003 = 4 · 250000 + 3: float4 accesses and a tail of three; 3: no whole float4 at all, the tail alone
SHAPES = ({"n": 1_000_003}, {"n": 3})


@pytest.fixture(scope="module")
def family():
    return load_family(SPEC)


def _cases():
    family = load_family(SPEC)
    return [(k.name, v) for k in family.knobs for v in k.domain]


@pytest.mark.parametrize(("knob", "value"), _cases())
def test_every_knob_value_builds(family, knob, value):
    for shape in SHAPES:
        config = family.complete({knob: value}, shape, ARCH)
        variant = family.build(config, shape, ARCH)  # checks the PTX's parameters against the declared scalars
        assert variant.artifact.cubin and variant.config[knob] == value
        assert variant.launch.block == (config["threads"], 1, 1) and variant.launch.grid[0] >= 1


def test_the_scalars_are_packed_as_declared(family):
    shape = family.shape_from({"n": 1_000_003})
    packed = family.packed_scalars(shape)
    assert [p.dtype.name for p in packed] == ["float32"] * 7 + ["int32", "uint64"]
    lr, beta1, beta2, c1, c2, eps, wd, mode, n = packed
    assert n == 1_000_003 and mode == 1
    assert c1 == np.float32(1 - 0.9**10) and c2 == np.float32(1 - 0.999**10)
    assert (lr, beta1, beta2, eps, wd) == tuple(np.float32(v) for v in (1e-3, 0.9, 0.999, 1e-8, 1e-2))


@pytest.mark.parametrize(
    ("name", "ctype", "said"),
    [
        ("n", "int", r"parameter 12 of adamw_step \(n\) is passed as int \(32-bit int\) but the kernel declares a "
         r"64-bit int"),
        ("mode", "float", r"parameter 11 of adamw_step \(mode\) is passed as float"),
    ],
)  # fmt: skip
def test_a_wrong_scalar_declaration_is_named(family, name, ctype, said):
    declared = tuple(Scalar(s.name, ctype) if s.name == name else s for s in family.scalar_params)
    wrong = type("WrongScalar", (type(family),), {"template_dir": str(FOLDER), "scalar_params": declared})()
    shape = wrong.shape_from({"n": 4096})
    with pytest.raises(ConfigError, match=said):
        wrong.build(wrong.default_config(shape, ARCH), shape, ARCH)


def test_the_grid_covers_n_once_or_fills_the_gpu_once(family):
    shape = family.shape_from({"n": 4096 * 4096 + 3})
    chunk = {"threads": 256, "vec": 4, "per_thread": 2, "loop": "chunk", "hint": "none"}
    assert family.launch(chunk, shape, ARCH).grid == (4096 * 4096 // 4 // 512, 1, 1)
    # sm_90: 132 SMs of 2048 threads, 8 blocks of 256 each
    assert family.launch({**chunk, "loop": "stride"}, shape, ARCH).grid == (132 * 8, 1, 1)
    tiny = family.shape_from({"n": 3})
    assert family.launch({**chunk, "loop": "stride"}, tiny, ARCH).grid == (1, 1, 1)


def test_vec_per_thread_and_hint_change_the_accesses(family):
    shape = family.shape_from({"n": 1_000_003})
    config = {"threads": 256, "vec": 4, "per_thread": 2, "loop": "chunk", "hint": "none"}
    variant = family.build(config, shape, ARCH)
    params = census_variant(variant).ptx.params
    # two float4 of each buffer per thread, and the tail's scalar element
    for name in ("params", "grads", "m", "v"):
        assert params[name].load_bits == {128: 2, 32: 1}, name
    for name in ("params", "m", "v"):  # ptxas may lay the stores out more than once (a path per bounds check)
        assert set(params[name].store_bits) == {128, 32} and params[name].store_bits[32] == 1, name
    assert params["grads"].stores == 0
    assert "ld.global.cs" not in variant.artifact.ptx
    streamed = family.build({**config, "hint": "cs"}, shape, ARCH).artifact.ptx
    assert "ld.global.cs.v4.f32" in streamed and "st.global.cs.v4.f32" in streamed
    scalar = census_variant(family.build({**config, "vec": 1}, shape, ARCH)).ptx.params
    assert scalar["params"].load_bits == {32: 2}  # no tail with scalar accesses


def test_the_register_constraint_says_why(family):
    shape = family.shape_from({"n": 4096})
    config = {"threads": 512, "vec": 4, "per_thread": 8, "loop": "chunk", "hint": "none"}
    (why,) = family.violations(config, shape, ARCH)
    assert "holds 128 floats per thread" in why and "512-thread blocks" in why
    assert not family.violations({**config, "threads": 256}, shape, ARCH)
    assert family.shipped_config(shape, ARCH) == {
        "threads": 512, "vec": 1, "per_thread": 1, "loop": "chunk", "hint": "none"
    }  # fmt: skip


def test_reference_is_one_step_of_torch_adamw(family):
    shape = family.shape_from({"n": 7})
    inputs = family.make_inputs(shape, np.random.default_rng(3))
    pristine = {k: v.copy() for k, v in inputs.items()}
    refs = family.references(inputs, shape)
    assert all(np.array_equal(inputs[k], pristine[k]) for k in inputs)  # the reference leaves the state alone
    lr, b1, b2, c1, c2, eps, wd = (float(np.float32(v)) for v in (1e-3, 0.9, 0.999, 1 - 0.9**10, 1 - 0.999**10,
                                                                  1e-8, 1e-2))  # fmt: skip
    p, g, m, v = (inputs[k].astype(np.float64) for k in ("params", "grads", "m", "v"))
    # torch's plain ops: p.mul_(1 - lr·wd); m.lerp_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2);
    # p.addcdiv_(m / c1, (v / c2).sqrt_().add_(eps), value=-lr)
    p = p * (1 - lr * wd)
    m = m + (1 - b1) * (g - m)
    v = v * b2 + (1 - b2) * g * g
    p = p - lr * (m / c1) / (np.sqrt(v / c2) + eps)
    np.testing.assert_allclose(refs["m"], m, rtol=1e-12)
    np.testing.assert_allclose(refs["v"], v, rtol=1e-12)
    np.testing.assert_allclose(refs["params"], p, rtol=1e-12)
    assert not np.allclose(refs["params"], pristine["params"], rtol=1e-4)  # the step moves every parameter
    assert family.inplace_names() == ("params", "m", "v") and family.output_shapes(shape) == {}
    assert family.bytes_moved(shape) == 7 * 4 * 7 and family.copy_of is None
    assert all(inputs["v"] > 0)


def test_baselines(family):
    labels = [(b.label, b.kind, b.config) for b in family.baseline_kernels({"n": 4096})]
    assert labels == [
        ("torch._fused_adamw_", "torch", {"impl": "fused"}),
        ("torch AdamW (plain ops)", "torch", {"impl": "plain"}),
    ]


def test_a_static_search_runs_through_the_cli(tmp_path, compile_cache):
    env = {**os.environ, "MAGE_TUNE_CACHE": str(compile_cache)}
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", "search", SPEC, "--static", "--trials", "10",
         "--run-dir", "run", "--db", "off", "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = json.loads(done.stdout)
    trials = [json.loads(line) for line in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 10 and any(t["outcome"] == "modelled" for t in trials)
    assert said["as_shipped"]["value"] > 0


# --- the rendered kernel run on the host (tests/host_emulation.py) ---------------------------------------------------
# No barrier and no shuffle: every thread of every block runs in turn on one OS thread; the three in-place buffers
# are then checked as the harness checks them, each in its own metric, one step from the pristine state.

HOST_MAIN = r"""
template <class T> T __ldcs(const T* p) { return *p; }
"""

HOST_RUN = r"""
// argv: n, threads, grid, the nine scalars after n as hex floats and an int, the state's file (params, grads, m, v),
// the output file (params, m, v after the step)
int main(int argc, char** argv) {
    const size_t n = std::strtoull(argv[1], nullptr, 10);
    blockDim.x = std::atoi(argv[2]);
    gridDim.x = std::atoi(argv[3]);
    float s[7];
    for (int i = 0; i < 7; ++i) s[i] = std::strtof(argv[4 + i], nullptr);
    const int mode = std::atoi(argv[11]);
    std::vector<float> p(n), g(n), m(n), v(n);
    FILE* in = std::fopen(argv[12], "rb");
    for (auto* a : {&p, &g, &m, &v})
        if (std::fread(a->data(), sizeof(float), n, in) != n) return 2;
    std::fclose(in);
    for (unsigned b = 0; b < gridDim.x; ++b)
        for (unsigned t = 0; t < blockDim.x; ++t) {
            blockIdx.x = b;
            threadIdx.x = t;
            adamw_step(p.data(), g.data(), m.data(), v.data(), s[0], s[1], s[2], s[3], s[4], s[5], s[6], mode, n);
        }
    FILE* out = std::fopen(argv[13], "wb");
    for (auto* a : {&p, &m, &v}) std::fwrite(a->data(), sizeof(float), n, out);
    std::fclose(out);
    return 0;
}
"""

SEED = {"threads": 256, "vec": 4, "per_thread": 1, "loop": "chunk", "hint": "none"}
HOST_CASES = [
    (SEED, 10_003, None),
    ({**SEED, "per_thread": 8}, 10_003, None),  # a last block only partly covered
    ({**SEED, "vec": 1, "per_thread": 4, "hint": "cs"}, 10_003, None),
    ({**SEED, "loop": "stride", "per_thread": 2}, 10_003, 3),  # three blocks walk the whole count
    ({**SEED, "loop": "stride", "vec": 1, "threads": 64}, 10_003, 5),
    (SEED, 3, None),  # the tail alone
    ({**SEED, "threads": 512, "vec": 1}, 1, None),  # as shipped, at one parameter
]


@pytest.mark.parametrize(("config", "n", "grid"), HOST_CASES)
def test_kernels_match_the_references_in_a_host_emulation(family, config, n, grid, tmp_path):
    from host_emulation import HOST_SHIM, host_compiler

    from mage_tune.measure.checks import compare

    if host_compiler() is None:
        pytest.skip("needs g++ with C++20 <barrier>")
    shape = family.shape_from({"n": n})
    assert not family.violations(config, shape, ARCH)
    source, program = tmp_path / "k.cpp", tmp_path / "k"
    source.write_text(HOST_SHIM + HOST_MAIN + family.render(config, shape) + HOST_RUN)
    subprocess.run([host_compiler(), "-std=c++20", "-O1", "-pthread", "-w", "-o", program, source], check=True)
    inputs = family.make_inputs(shape, np.random.default_rng(n))
    (tmp_path / "in.bin").write_bytes(b"".join(inputs[k].tobytes() for k in ("params", "grads", "m", "v")))
    *floats, mode, count = family.packed_scalars(shape)
    grid = grid or family.launch(config, shape, ARCH).grid[0]
    args = [program, count, config["threads"], grid, *(float(f).hex() for f in floats), mode]
    subprocess.run([*map(str, args), tmp_path / "in.bin", tmp_path / "out.bin"], check=True, timeout=300)
    after = dict(zip(("params", "m", "v"), np.fromfile(tmp_path / "out.bin", np.float32).reshape(3, n), strict=True))
    refs = family.references(inputs, shape)
    failures = {
        o.name: compare(o.name, o.metric, after[o.name], refs[o.name], family.tolerance_of(o, shape), "float32").why
        for o in family.output_list()
    }
    assert failures == {"params": "", "m": "", "v": ""}
    assert not np.array_equal(after["params"], inputs["params"])  # every buffer took its step
