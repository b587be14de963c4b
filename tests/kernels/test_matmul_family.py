"""The matmul family on real compiles (no GPU): the space renders and compiles, the census sees what every knob
does to the binary, configs outside the space are refused with a message that says why, and the pipelines compute
the product in a host emulation."""

from __future__ import annotations

import functools
import itertools
import random
import re
import subprocess
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import compile_job
from host_emulation import HOST_SHIM, host_compiler

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.errors import ConfigError
from mage_tune.kernels import get_family
from mage_tune.kernels.base import config_label
from mage_tune.kernels.matmul import FAMILY
from mage_tune.kernels.sample import sample_configs

ARCH = get_arch("sm_90")
CUBE = {"m": 1024, "n": 1024, "k": 1024}
# The seed's kernel: 64×64 tiles, bk=32, 4×4 micro-tiles (256 threads), A transposed by 4-byte copies, B by 16.
SEED = {"bm": 64, "bn": 64, "bk": 32, "tm": 4, "tn": 4, "stages": 2, "a_vec": 4, "b_vec": 16, "a_trans": 1}
SEED = {**SEED, "pad": 4, "smem_vec": 0, "pipe": 0, "k_unroll": 0, "raster": 0, "split_k": 1}
# The base every one-knob change is measured against; a_trans=1 needs a_vec=4 and tn=2 needs smem_vec=0, hence
# two more bases.
BASE = {"bm": 64, "bn": 64, "bk": 16, "tm": 4, "tn": 4, "stages": 2, "a_vec": 16, "b_vec": 16, "a_trans": 0}
BASE = {**BASE, "pad": 4, "smem_vec": 1, "pipe": 0, "k_unroll": 0, "raster": 0, "split_k": 1}
BASE_A4 = {**BASE, "a_vec": 4}
BASE_SCALAR = {**BASE, "smem_vec": 0}


# --- workers (module level, so the process pool can pickle them) ------------------------------------------------


# Module level so the process pool can pickle it.
_compile = functools.partial(compile_job, "matmul", ARCH)


def _census(config: dict):
    variant = FAMILY.build(config, CUBE, ARCH)
    (census,) = census_artifact(variant.artifact, block=variant.block, param_names=list(variant.param_names))
    return variant, census


def _compile_all(jobs: list[tuple[dict, dict]]) -> None:
    with ProcessPoolExecutor(2) as pool:
        errors = [e for e in pool.map(_compile, jobs) if e]
    assert not errors, f"{len(errors)} of {len(jobs)} configs failed to compile:\n" + "\n".join(errors[:5])


def _sample(shape: dict, count: int, seed: int, cover: bool) -> list[dict]:
    """`count` valid configs drawn with a fixed seed, plus (with `cover`) one for each knob value not yet drawn."""
    return sample_configs(FAMILY, shape, ARCH, count, seed=seed, cover=cover)


# --- 1. the space compiles -----------------------------------------------------------------------------------


def test_space_size_and_seed_configs_are_valid():
    assert FAMILY is get_family("matmul")
    assert FAMILY.space_size() == 4**6 * 3**5 * 2**3 * 5
    # raster and split_k constrain nothing: the space is the valid rest times their 4 * 5 values. Of the rest,
    # 332124 combinations take A by cp.async (a_trans 0 or 1) and 44460 through registers.
    combos = list(FAMILY.bound_combinations(CUBE, ARCH))
    assert len(combos) == 332124 + 44460
    a_trans = [k.name for k in FAMILY.knobs if not k.free].index("a_trans")
    assert sum(1 for c in combos if c[a_trans] == 2) == 44460
    first = list(itertools.islice(FAMILY.configs(CUBE, ARCH), 40))
    frees = itertools.product((0, 4, 8, 16), (1, 2, 3, 4, 8))
    assert first[:20] == [FAMILY.join_combination(combos[0], f) for f in frees]
    assert all(FAMILY.violations(c, CUBE, ARCH) == [] for c in first)
    for stages in (1, 2):
        assert FAMILY.violations({**SEED, "stages": stages}, CUBE, ARCH) == []
    assert FAMILY.launch(SEED, CUBE, get_arch("sm_90")).threads == 256


def test_sample_of_the_cube_space_compiles():
    configs = _sample(CUBE, 300, seed=1, cover=True)
    for knob in FAMILY.knobs:
        assert {c[knob.name] for c in configs} == set(knob.domain), knob.name
    _compile_all([(c, CUBE) for c in configs])


@pytest.mark.parametrize("dims", [(1000, 1000, 1000), (513, 257, 129)])
def test_sample_of_odd_shapes_compiles(dims):
    shape = dict(zip("mnk", dims, strict=True))
    configs = _sample(shape, 20, seed=2, cover=False)
    if dims == (513, 257, 129):  # rows of 129 and 257 floats start 4-byte aligned only
        assert {(c["a_vec"], c["b_vec"]) for c in configs} == {(4, 4)}
    _compile_all([(c, shape) for c in configs])


def test_compile_error_names_the_config(monkeypatch):
    monkeypatch.setattr(FAMILY, "render", lambda config, shape: "this is not CUDA;")
    error = _compile((BASE, CUBE))
    assert error is not None and config_label("matmul", BASE) in error


# --- 2. the census sees every knob ---------------------------------------------------------------------------


def _one_knob_pairs() -> list[tuple[str, dict, dict]]:
    """(knob, base, changed) for every other value of every knob, where a base admits the change."""
    pairs = []
    for knob in FAMILY.knobs:
        for value in knob.domain:
            if value == BASE[knob.name]:
                continue
            for base in (BASE, BASE_A4, BASE_SCALAR):
                changed = {**base, knob.name: value}
                if not FAMILY.violations(changed, CUBE, ARCH):
                    pairs.append((knob.name, base, changed))
                    break
    return pairs


@pytest.fixture(scope="module")
def censuses():
    """label -> (Variant, Census) for the bases, every one-knob change, and the seed's kernels."""
    configs = [BASE, BASE_A4, BASE_SCALAR, SEED, {**SEED, "stages": 1}, {**SEED, "stages": 3}, {**SEED, "smem_vec": 1}]
    configs += [changed for _, _, changed in _one_knob_pairs()]
    unique = list({config_label("matmul", c): c for c in configs}.values())
    with ProcessPoolExecutor(2) as pool:
        built = list(pool.map(_census, unique))
    return {variant.label: (variant, census) for variant, census in built}


def _get(censuses, config: dict):
    return censuses[config_label("matmul", config)]


def test_every_knob_value_changes_the_cubin(censuses):
    pairs = _one_knob_pairs()
    assert {knob for knob, _, _ in pairs} == {k.name for k in FAMILY.knobs}
    assert len(pairs) == sum(len(k.domain) - 1 for k in FAMILY.knobs)
    for knob, base, changed in pairs:
        before, after = _get(censuses, base)[0], _get(censuses, changed)[0]
        assert before.artifact.cubin_sha256 != after.artifact.cubin_sha256, f"{knob}={changed[knob]}"


def test_copy_width_follows_b_vec_and_a_vec(censuses):
    for b_vec in (4, 8, 16):
        _, c = _get(censuses, {**BASE, "b_vec": b_vec})
        bits = b_vec * 8
        assert set(c.ptx.params["B"].load_bits) == {bits}
        assert bits in c.ptx.cp_async and bits in c.sass.cp_async  # LDGSTS.128 for 16 bytes, plain LDGSTS for 4
    for a_vec in (4, 8, 16):
        _, c = _get(censuses, {**BASE, "a_vec": a_vec})
        assert set(c.ptx.params["A"].load_bits) == {a_vec * 8}


def test_stages_set_wait_depth_and_groups_in_flight(censuses):
    depth1 = _get(censuses, {**SEED, "stages": 1})[1]
    assert depth1.ptx.cp_async_wait == (0,) and depth1.sass.cp_async_wait == (0,)
    for stages in (2, 3):
        c = _get(censuses, {**SEED, "stages": stages})[1]
        for view, first in ((c.ptx, depth1.ptx), (c.sass, depth1.sass)):
            assert stages - 1 in view.cp_async_wait
            assert view.cp_async_groups_in_flight == first.cp_async_groups_in_flight + stages - 1


def test_smem_vec_sets_shared_load_width(censuses):
    for base in (BASE, SEED):  # A read along k (a_trans=0) and along m (a_trans=1)
        wide = _get(censuses, {**base, "smem_vec": 1})[1].sass.shared_loads
        narrow = _get(censuses, {**base, "smem_vec": 0})[1].sass.shared_loads
        assert wide.get(128, 0) > 0
        assert set(narrow) == {32}


def test_pipe_and_k_unroll_show_in_the_census():
    """pipe=1 reads the first fragments of each k-tile before the barrier-free group loop, so its SASS holds more
    shared loads; k_unroll=8 halves the unrolled body of a bk=16 tile, so the SASS is shorter by about its FMAs."""
    big = {**SEED, "bm": 128, "bn": 256, "bk": 16, "tm": 8, "tn": 16, "smem_vec": 1, "stages": 3}
    plain, piped, rolled = (_census(c)[1] for c in (big, {**big, "pipe": 1}, {**big, "k_unroll": 8}))
    assert sum(piped.sass.shared_loads.values()) > sum(plain.sass.shared_loads.values())
    assert piped.sass.barriers == plain.sass.barriers == 2  # one in the loop and one before it, against two in it
    assert plain.sass.instructions - rolled.sass.instructions > 8 * 128 * 0.9
    for c in (plain, piped, rolled):
        assert c.resources.spill_store_bytes == 0 and c.resources.stack_bytes == 0


def test_pad_and_stages_set_dynamic_shared_memory(censuses):
    # All shared memory is dynamic (extern __shared__), so the census reports it as dynamic_shared_bytes.
    seed = _get(censuses, SEED)[1].resources
    assert seed.dynamic_shared_bytes == 2 * (32 * (64 + 4) + 32 * 64) * 4 == 33792
    assert _get(censuses, {**SEED, "stages": 1})[1].resources.dynamic_shared_bytes == 33792 // 2
    unpadded = _get(censuses, {**BASE, "pad": 0})[1].resources.dynamic_shared_bytes
    assert unpadded < _get(censuses, BASE)[1].resources.dynamic_shared_bytes
    assert seed.spill_store_bytes == 0


def test_tiles_set_the_launch(censuses):
    base = _get(censuses, BASE)[0].launch
    assert (base.grid, base.threads) == ((16, 16, 1), 256)
    assert _get(censuses, {**BASE, "bm": 128})[0].launch.grid == (16, 8, 1)
    assert _get(censuses, {**BASE, "bn": 32})[0].launch.grid == (32, 16, 1)
    assert _get(censuses, {**BASE, "tm": 8})[0].launch.threads == 128
    assert _get(censuses, {**BASE, "tn": 8})[0].launch.threads == 128
    assert _get(censuses, {**BASE, "tm": 2})[0].launch.threads == 512


def test_traffic_is_attributed_to_parameters(censuses):
    for config in (BASE, SEED):
        params = _get(censuses, config)[1].ptx.params
        assert "?" not in params
        assert params["A"].loads > 0 and params["B"].loads > 0 and params["C"].stores > 0
        assert params["A"].stores == params["B"].stores == params["C"].loads == 0
    # float4 stores of C with smem_vec=1, one float per store without
    assert set(_get(censuses, BASE)[1].ptx.params["C"].store_bits) == {128}
    assert set(_get(censuses, SEED)[1].ptx.params["C"].store_bits) == {32}


# --- 3. configs outside the space are refused ------------------------------------------------------------------


def test_unknown_knob():
    with pytest.raises(ConfigError, match=r"unknown knob 'bq'.*knobs: bm, bn, bk"):
        FAMILY.parse_settings(["bq=64"], CUBE, ARCH)


def test_value_outside_domain():
    with pytest.raises(ConfigError, match=r"knob bm: '48' is not allowed; allowed: 64, 32, 128"):
        FAMILY.parse_settings(["bm=48"], CUBE, ARCH)


@pytest.mark.parametrize(
    ("settings", "shape", "message"),
    [
        (["a_trans=1", "a_vec=16"], CUBE, r"a_trans=1 needs a_vec=4"),
        (["smem_vec=1", "tn=2"], CUBE, r"smem_vec=1 needs tn % 4 == 0"),
        (["smem_vec=1", "a_trans=1", "tm=2"], CUBE, r"smem_vec=1 with a_trans>0 needs tm % 4 == 0"),
        (["a_trans=2", "pipe=1"], CUBE, r"a_trans=2 needs a_vec=16 .*pipe=0 and stages >= 2"),
        (["bm=32", "bn=32", "tm=8", "tn=8"], CUBE, r"threads = bm\*bn/\(tm\*tn\) = 16"),
        (["b_vec=16"], {"m": 513, "n": 257, "k": 129}, r"b_vec=16 needs N\*4 divisible by 16"),
    ],
)
def test_forbidden_combination(settings, shape, message):
    with pytest.raises(ConfigError, match=message):
        FAMILY.parse_settings(settings, shape, ARCH)


def test_shared_memory_limit_depends_on_arch():
    big = {**BASE, "bm": 128, "bn": 128, "bk": 32, "tm": 8, "tn": 8, "stages": 3}
    assert FAMILY.violations(big, CUBE, get_arch("sm_90")) == []
    (problem,) = FAMILY.violations(big, CUBE, get_arch("sm_86"))
    assert "104448 B exceeds" in problem


# --- the launcher's side ---------------------------------------------------------------------------------------


def test_launch_inputs_and_reference():
    shape = {"m": 513, "n": 257, "k": 129}
    launch = FAMILY.launch({**BASE, "bm": 128, "bn": 32}, shape, get_arch("sm_90"))
    assert launch.grid == (9, 5, 1) and launch.dynamic_shared == FAMILY.shared_bytes({**BASE, "bm": 128, "bn": 32})
    inputs = FAMILY.make_inputs(shape, np.random.default_rng(0))
    assert inputs["A"].shape == (513, 129) and inputs["B"].shape == (129, 257)
    assert inputs["A"].dtype == np.float32 and np.abs(inputs["A"]).max() <= 1
    ref = FAMILY.reference(inputs, shape)
    assert ref.dtype == np.float64 and ref.shape == FAMILY.output_shape(shape) == (513, 257)
    assert FAMILY.scalar_args(shape) == (513, 257, 129)
    assert all(isinstance(x, np.int32) for x in FAMILY.scalar_args(shape))
    assert FAMILY.bytes_moved(shape) == 4 * (513 * 129 + 129 * 257 + 513 * 257)
    assert FAMILY.flops(shape) == 2 * 513 * 257 * 129


# --- 4. without a GPU: the pipelines in a host emulation --------------------------------------------------------
#
# The rendered kernel compiled by g++ (tests/host_emulation.py): cp.async becomes a synchronous copy or zero-fill,
# commit and wait do nothing, dynamic shared memory is one host buffer. Index and barrier bugs of the pipelines fail
# here (wrong tile, wrong buffer, a fragment read from the wrong step, a barrier some thread skips hangs); races in
# time cannot show, which is what the GPU check before any timing is for.

HOST_FORMS = {
    "cp_async": "    if (in_bounds) std::memcpy(dst, src, BYTES); else std::memset(dst, 0, BYTES);",
    "lds32": "    return *p;",
    "cp_async_wait": "",
    # Blocks run one after another, z outermost, so a slice's turn has always come when it looks: a wrong turn
    # (never passed, or not reset for the next launch) aborts instead of hanging.
    "wait_turn": "    if (__atomic_load_n(turn, __ATOMIC_ACQUIRE) != z) std::abort();",
    "pass_turn": "    __atomic_store_n(turn, z, __ATOMIC_RELEASE);",
}
SPLIT_ONLY = ("wait_turn", "pass_turn")  # helpers rendered only with split_k > 1

HOST_MAIN = r"""
// argv: M N K threads grid.x grid.y grid.z shared_floats in_file out_file; the grid runs twice (two launches)
int main(int argc, char** argv) {
    const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
    blockDim.x = std::atoi(argv[4]);
    gridDim.x = std::atoi(argv[5]);
    gridDim.y = std::atoi(argv[6]);
    gridDim.z = std::atoi(argv[7]);
    host_smem.assign(std::atoi(argv[8]), NAN);
    std::vector<float> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, NAN);
    FILE* in = std::fopen(argv[9], "rb");
    for (auto* v : {&a, &b})
        if (std::fread(v->data(), sizeof(float), v->size(), in) != v->size()) return 2;
    std::fclose(in);
    // Split-K launches twice, C refilled with NaN between: slice 0 must overwrite, the turns must start over.
    for (int launch = 0; launch < (gridDim.z > 1 ? 2 : 1); ++launch) {
        std::fill(c.begin(), c.end(), NAN);
        for (unsigned bz = 0; bz < gridDim.z; ++bz)
            for (unsigned by = 0; by < gridDim.y; ++by)
                for (unsigned bx = 0; bx < gridDim.x; ++bx) {
                    block_barrier = std::make_unique<std::barrier<>>(blockDim.x);
                    std::vector<std::thread> threads;
                    for (unsigned t = 0; t < blockDim.x; ++t)
                        threads.emplace_back([&, t, bx, by, bz] {
                            threadIdx.x = t;
                            blockIdx.x = bx;
                            blockIdx.y = by;
                            blockIdx.z = bz;
                            matmul(a.data(), b.data(), c.data(), M, N, K);
                        });
                    for (auto& thread : threads) thread.join();
                }
    }
    FILE* out = std::fopen(argv[10], "wb");
    std::fwrite(c.data(), sizeof(float), c.size(), out);
    std::fclose(out);
    return 0;
}
"""


def _host_source(config: dict, shape: dict) -> str:
    source = FAMILY.render(config, shape)
    for name, body in HOST_FORMS.items():
        source, found = re.subn(
            rf"( {name}\(.*?\) \{{\n).*?\n\}}\n", rf"\g<1>{body}\n}}\n", source, count=1, flags=re.S
        )
        absent = (name == "lds32" and "lds32(" not in source) or (name in SPLIT_ONLY and config["split_k"] == 1)
        assert found == (0 if absent else 1), name
    source, found = re.subn(r"(void cp_async_commit\(\) \{).*?\}\n", r"\1}\n", source)
    assert found == 1
    source = source.replace("extern __shared__ __align__(16) float smem[];", "float* smem = host_smem.data();")
    return HOST_SHIM + "static std::vector<float> host_smem;\n" + source + HOST_MAIN


def _emulate_matmul(job: tuple[dict, tuple[int, int, int]]) -> str | None:
    config, (m, n, k) = job
    shape = {"m": m, "n": n, "k": k}
    label = f"{config_label('matmul', config)} {m}x{n}x{k}"
    launch = FAMILY.launch(config, shape, get_arch("sm_90"))
    inputs = FAMILY.make_inputs(shape, np.random.default_rng(m + n + k))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "k.cpp").write_text(_host_source(config, shape))
        build = [host_compiler(), "-std=c++20", "-O1", "-pthread", "-w", "-o", work / "k", work / "k.cpp"]
        subprocess.run(build, check=True)
        (work / "in.bin").write_bytes(inputs["A"].tobytes() + inputs["B"].tobytes())
        args = [m, n, k, launch.threads, *launch.grid, launch.dynamic_shared // 4]
        try:
            subprocess.run([work / "k", *map(str, args), work / "in.bin", work / "out.bin"], check=True, timeout=120)
        except subprocess.TimeoutExpired:
            return f"{label}: hung (a barrier some thread never reached)"
        c = np.fromfile(work / "out.bin", np.float32).reshape(m, n)
    ref = FAMILY.reference(inputs, shape)
    rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    return None if np.isfinite(c).all() and rel < FAMILY.tolerance else f"{label}: relative error {rel:.3g}"


PIPE = {**BASE, "bm": 64, "bn": 128, "tm": 8, "tn": 8, "stages": 3, "pipe": 1}
HOST_CASES = [
    (PIPE, (70, 136, 72)),  # five k-tiles, ragged M and N
    (PIPE, (66, 132, 4)),  # one partial k-tile: fewer tiles than the prologue issues
    ({**SEED, "bm": 128, "bn": 128, "bk": 8, "tm": 8, "tn": 8, "stages": 3, "smem_vec": 1, "pipe": 1}, (130, 132, 20)),
    ({**BASE_SCALAR, "bk": 8, "a_vec": 4, "b_vec": 4, "pad": 0, "pipe": 1}, (65, 67, 9)),  # 32-bit fragments
    ({**SEED, "bm": 256, "bn": 128, "bk": 8, "tm": 16, "tn": 8, "smem_vec": 1, "pipe": 1}, (260, 132, 24)),
    ({**BASE, "stages": 3}, (70, 68, 40)),  # pipe=0: checks the emulation itself
    ({**BASE, "bk": 32, "stages": 4, "k_unroll": 8}, (70, 68, 100)),  # a partly unrolled k loop, four stages
    ({**PIPE, "raster": 4}, (330, 260, 16)),  # grouped block order: 6 block rows = a group of 4 and one of 2
    ({**PIPE, "split_k": 3}, (70, 136, 132)),  # 9 k-tiles (the last partial) in shares of 3, ragged M and N
    ({**BASE_SCALAR, "split_k": 4, "raster": 4}, (130, 68, 80)),  # 5 k-tiles in shares of 2: the last share empty
    ({**BASE, "split_k": 8, "stages": 3}, (64, 64, 16)),  # one k-tile: slices 1..7 add nothing but take their turn
    ({**BASE, "a_trans": 2, "tm": 8, "stages": 3}, (70, 68, 100)),  # A through registers, ragged edges
    ({**BASE, "a_trans": 2, "bm": 32, "bk": 32, "tm": 4, "k_unroll": 8, "split_k": 2}, (40, 68, 72)),
]


def test_pipelines_match_the_reference_in_a_host_emulation():
    if host_compiler() is None:
        pytest.skip("needs g++ with C++20 <barrier>")
    for config, dims in HOST_CASES:
        assert FAMILY.violations(config, dict(zip("mnk", dims, strict=True)), ARCH) == [], config
    with ProcessPoolExecutor(2) as pool:
        failures = [f for f in pool.map(_emulate_matmul, HOST_CASES) if f]
    assert not failures, "\n".join(failures)


def test_census_veto_catches_fragments_demoted_to_local_memory():
    """With stages=2, NVVM leaves pipe=1's group loop rolled at this tile, so the double-buffered fragments are indexed
    at run time and live in local memory (no spill: a stack frame). Timed on the H200 it ran 4.4x slower than with
    stages=3 (the shapes campaign's matmul/mm_2048.json, records/README.md); the search's census veto prunes it
    before any GPU time."""
    from mage_tune.search.veto import census_veto

    slow = {**SEED, "bm": 128, "bn": 256, "bk": 16, "tm": 8, "tn": 16, "smem_vec": 1, "pipe": 1}
    _, rolled = _census({**slow, "stages": 2})
    _, unrolled = _census({**slow, "stages": 3})
    assert rolled.resources.spill_store_bytes == 0 and rolled.resources.stack_bytes > 0
    assert sum(rolled.sass.local_loads.values()) > 0
    assert "local-memory loads/stores" in census_veto(rolled)
    assert unrolled.resources.stack_bytes == 0 and census_veto(unrolled) == ""


def test_a_draw_no_two_changes_repair_is_redrawn_to_a_valid_config():
    """A draw that breaks several constraints at once (k_unroll with a pipeline, a transposing copy of float2s, a
    B copy the tile cannot take) has no valid config two knobs away; redrawing more of its knobs finds one, seeded,
    keeping most of its values."""
    sm90, shape = get_arch("sm_90"), {"m": 1536, "n": 1536, "k": 1536}
    draw = {"bm": 256, "bn": 64, "bk": 8, "tm": 8, "tn": 2, "stages": 3, "a_vec": 8, "b_vec": 4, "a_trans": 1,
            "pad": 0, "smem_vec": 1, "pipe": 0, "k_unroll": 8, "raster": 16, "split_k": 1}  # fmt: skip
    assert len(FAMILY.violations(draw, shape, sm90)) >= 3
    assert FAMILY.nearest_valid(draw, shape, sm90, min_changes=1) is None
    found = [FAMILY.redrawn_valid(draw, shape, sm90, random.Random(seed)) for seed in range(20)]
    assert all(c is not None and not FAMILY.violations(c, shape, sm90) for c in found)
    assert all(sum(c[k] != v for k, v in draw.items()) <= len(draw) // 2 for c in found)
    assert found[0] == FAMILY.redrawn_valid(draw, shape, sm90, random.Random(0))  # seeded: the same draw again
    assert len({tuple(sorted(c.items())) for c in found}) > 1
