"""The layer-norm family on real compiles: the whole d=768 space renders and compiles, odd widths do too, the census
sees what every knob does to the binary, and configs outside the space are refused with a message that says why.
The persistent kernels (persist > 0) also run, without a GPU, in a host emulation against the float64 reference.
Two tests (marked gpu) run variants against the float64 reference where a GPU is present."""

from __future__ import annotations

import functools
import json
import math
import os
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
from mage_tune.compile import nvrtc_ptx, ptxas
from mage_tune.errors import ConfigError, MageError
from mage_tune.kernels import get_family
from mage_tune.kernels.base import config_label
from mage_tune.kernels.layernorm import EPS, FAMILY, X_MEAN

ARCH = get_arch("sm_90")
D768 = {"m": 4096, "d": 768}
# The seed: one 128-thread block per row, float4 accesses (at d=768 one full quad and one masked quad per thread),
# the row held in registers, four warps meeting once in shared memory per reduction.
SEED = {
    "threads": 128,
    "rows": 1,
    "vec": 16,
    "passes": "regs",
    "reduce": "shfl",
    "rsqrt": "approx",
    "hint": "none",
    "y_hint": "none",
    "persist": 0,
    "full_occupancy": 0,
    "affine": "late",
    "x_prefetch": 0,
    "l2_ahead": 0,
}
# The fastest config of the d=768 walk on an H200 (8.01 µs, one block per row group): 64 threads per row, two rows per
# block, 8-byte streaming accesses, so 6 chunks of x per thread.
BEST = {**SEED, "threads": 64, "rows": 2, "vec": 8, "hint": "cs"}
READS = {"regs": 1, "welford": 2, "twopass": 3}  # passes over x
WALK_LIMIT = 3500  # the most distinct kernels the whole-space test compiles one by one


# --- workers (module level, so the process pool can pickle them) ------------------------------------------------


# Module level so the process pool can pickle it.
_compile = functools.partial(compile_job, "layernorm", ARCH)


def _compile_batch(job: tuple[list[dict], dict]) -> list[str]:
    """Compile several configs as one NVRTC program and one ptxas run, each rendered source in a namespace of its own
    with its kernel renamed: NVRTC's and ptxas's start-up, about half of a small kernel's compile, is paid once.
    When the batch fails, each config is compiled alone, so every error names its config."""
    configs, shape = job
    parts = []
    for i, config in enumerate(configs):
        source = FAMILY.render(config, shape)
        assert source.count("void layernorm(") == 1  # else the renamed kernels would clash and every batch fall back
        parts.append(f"namespace v{i} {{\n{source.replace('void layernorm(', f'void layernorm_{i}(')}\n}}\n")
    label = f"{len(configs)} layernorm configs at {shape}"
    try:
        ptxas(nvrtc_ptx("".join(parts), ARCH, label), ARCH, label)
    except MageError:
        return [error for error in map(_compile, [(c, shape) for c in configs]) if error]
    return []


def _census(job: tuple[dict, dict]):
    config, shape = job
    variant = FAMILY.build(config, shape, ARCH)
    (census,) = census_artifact(variant.artifact, block=variant.block, param_names=list(variant.param_names))
    return variant, census


def _compile_all(configs: list[dict], shape: dict, batch: int = 12) -> None:
    batches = [(configs[i : i + batch], shape) for i in range(0, len(configs), batch)]
    with ProcessPoolExecutor(2) as pool:
        errors = [e for found in pool.map(_compile_batch, batches) for e in found]
    assert not errors, f"{len(errors)} of {len(configs)} configs failed to compile:\n" + "\n".join(errors[:5])


def _sample(shape: dict, count: int, seed: int) -> list[dict]:
    """`count` valid configs drawn with a fixed seed, plus one for each knob value no draw took (where one is valid)."""
    valid = list(FAMILY.configs(shape, ARCH))
    rng = random.Random(seed)
    picked = rng.sample(valid, min(count, len(valid)))
    rng.shuffle(valid)
    for knob in FAMILY.knobs:
        for value in knob.domain:
            if not any(c[knob.name] == value for c in picked):
                picked += [c for c in valid if c[knob.name] == value][:1]
    return picked


# --- 1. the space compiles -----------------------------------------------------------------------------------


def test_seed_is_valid_and_the_default():
    assert FAMILY is get_family("layernorm")
    assert FAMILY.violations(SEED, D768, ARCH) == []
    assert FAMILY.parse_settings([], D768, ARCH) == SEED  # each domain lists the seed's value first
    assert FAMILY.launch(SEED, D768, ARCH).grid == (4096, 1, 1) and FAMILY.launch(SEED, D768, ARCH).threads == 128
    source = FAMILY.render(SEED, D768)
    assert 'extern "C" __global__' in source and "void layernorm(" in source
    assert "constexpr int CHUNKS = 2;" in source and "constexpr int FULL = 1;" in source  # one quad, one masked


def test_space_size_at_768():
    assert FAMILY.space_size() == 13 * 4 * 3 * 3 * 3 * 2 * 4 * 2 * 4 * 2 * 3 * 3 * 4
    every = list(FAMILY.configs(D768, ARCH))
    # l2_ahead=1, 2, 4: one more for each one-group (persist=0) config, d=768 being a multiple of 4 on sm_90
    ahead = [c for c in every if c["l2_ahead"] == 0]
    for mib in (1, 2, 4):
        assert sum(1 for c in every if c["l2_ahead"] == mib) == sum(1 for c in ahead if c["persist"] == 0)
    # full_occupancy=1, y_hint=cs and x_prefetch=128, 256 (which constrain nothing) make twelve of each
    plain = [c for c in ahead if c["full_occupancy"] == 0 and c["y_hint"] == "none" and c["x_prefetch"] == 0]
    assert 12 * len(plain) == len(ahead)
    # affine=early: one more config for each one-group (persist=0) config that holds its row in registers
    valid = [c for c in plain if c["affine"] == "late"]
    early = [c for c in plain if c["affine"] == "early"]
    assert len(early) == sum(1 for c in valid if c["passes"] == "regs" and c["persist"] == 0) == 2288
    # affine=smem: one more for each persist=0 config (its copies of scale and bias fit a block at d=768)
    assert sum(1 for c in plain if c["affine"] == "smem") == sum(1 for c in valid if c["persist"] == 0) == 6992
    # persist=0: 34 (threads, rows) pairs within 1024 threads a block (4 rows values up to 128 threads, 3 for 160-256,
    # 2 for 320-512, 1 above), × 3 vec × 3 passes × 2 rsqrt × 4 hint; less, for shfl and smem, passes=regs at
    # threads=32 with vec=4 (24 chunks > 16): 34 · 72 · 2 − 64 = 4832; shfl2 needs threads ≥ 64: 30 pairs, 2160.
    assert sum(1 for c in valid if c["persist"] == 0 and c["reduce"] != "shfl2") == 34 * 72 * 2 - 64 == 4832
    assert sum(1 for c in valid if c["persist"] == 0) == 4832 + 30 * 72 == 6992
    # persist=2, 4, 8: passes=regs only, and at most 8 chunks, which excludes threads=32 with vec=8 and vec=4 and
    # threads=64 with vec=4 (12 or 24 chunks): 2128 configs for each value, 688 of them shfl2.
    for persist in (2, 4, 8):
        configs = [c for c in valid if c["persist"] == persist]
        assert {c["passes"] for c in configs} == {"regs"} and len(configs) == 2128
        assert sum(1 for c in configs if c["reduce"] == "shfl2") == 688
    assert len(valid) == 6992 + 3 * 2128 == 13376


@pytest.mark.parametrize(("d", "arch"), [(768, "sm_90"), (770, "sm_90"), (768, "sm_80")])
def test_valid_tuples_are_the_generic_walks(d, arch):
    """The family's shortcut over l2_ahead yields exactly the tuples, in the order, of the generic walk that checks
    every combination (with the prefetch allowed, refused by the row width, refused by the arch)."""
    arch = get_arch(arch)
    shape = {"m": 4096, "d": d}
    generic = super(type(FAMILY), FAMILY).bound_combinations(shape, arch)
    assert list(FAMILY.bound_combinations(shape, arch)) == list(generic)


def _kernel_text(config: dict, shape: dict) -> str:
    """The rendered source without its first line, the label: configs that differ only in their launch share it."""
    return FAMILY.render(config, shape).split("\n", 1)[1]


def test_whole_d768_space_compiles():
    """Every distinct kernel with power-of-two threads, hint none/nc/cs and full_occupancy=0, y_hint=none,
    affine=late, x_prefetch=0, l2_ahead=0 compiled once, and a sample of the rest (other thread counts, the
    no-allocate hint, the launch bounds, the store of y, where scale and bias are loaded, the prefetch size, the bulk
    prefetch ahead): persist=2, 4 and 8 render the same kernel (the value only sets the grid), so the walk is 2652
    persist=0 kernels and 732 persistent ones."""
    valid = list(FAMILY.configs(D768, ARCH))
    persistent = [c for c in valid if c["persist"]]
    for config in random.Random(0).sample(persistent, 40):
        assert _kernel_text(config, D768) == _kernel_text({**config, "persist": 2}, D768)
    kernels: dict[str, dict] = {}
    for config in valid:  # one config per kernel: persist > 0 counted as persist=2
        kernels.setdefault(json.dumps({**config, "persist": min(config["persist"], 2)}, sort_keys=True), config)
    assert len(kernels) == 12 * (6992 + 2128 + 2288 + 6992) + 3 * 12 * (6992 + 2288 + 6992)  # l2_ahead > 0: persist=0

    def walked(c: dict) -> bool:
        return (
            c["threads"] in (32, 64, 128, 256, 512, 1024)
            and c["hint"] != "nc_na"
            and (c["full_occupancy"], c["y_hint"], c["affine"], c["x_prefetch"], c["l2_ahead"])
            == (0, "none", "late", 0, 0)
        )

    walk = [c for c in kernels.values() if walked(c)]
    assert len(walk) == 2652 + 732 <= WALK_LIMIT
    rest = [c for c in kernels.values() if not walked(c)]
    _compile_all(walk + random.Random(0).sample(rest, 400), D768)


def test_compile_error_names_the_config(monkeypatch):
    broken = {**SEED, "hint": "cs"}
    render, bad = FAMILY.render, 'extern "C" __global__ void layernorm() { this is not CUDA; }'
    monkeypatch.setattr(FAMILY, "render", lambda c, shape: bad if c == broken else render(c, shape))
    error = _compile((broken, D768))
    assert error is not None and config_label("layernorm", broken) in error
    (error,) = _compile_batch(([SEED, broken, {**SEED, "hint": "nc"}], D768))  # the batch finds its culprit
    assert config_label("layernorm", broken) in error


# --- 2. odd widths ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 700, 769, 1000, 4100])
def test_odd_widths_have_valid_configs_that_compile(d):
    shape = {"m": 4096, "d": d}
    configs = _sample(shape, 8, seed=d)
    assert configs
    if d * 4 % 8:  # rows start only 4-byte aligned
        assert {c["vec"] for c in configs} == {4}
    _compile_all(configs, shape)


@pytest.mark.parametrize("d", [*range(1, 65), 767, 769, 4097, 65537, 1 << 20])
def test_every_width_has_a_valid_config(d):
    shape = {"m": 1, "d": d}
    assert FAMILY.default_config(shape, ARCH)
    for passes in ("welford", "twopass"):  # no cap on chunks without the row in registers
        assert FAMILY.violations({**SEED, "vec": 4, "passes": passes}, shape, ARCH) == []


# --- 3. the census sees every knob ---------------------------------------------------------------------------


def _one_knob_pairs() -> list[tuple[str, dict]]:
    """(knob, the seed with only that knob changed) for every other value of every knob."""
    return [(k.name, {**SEED, k.name: v}) for k in FAMILY.knobs for v in k.domain if v != SEED[k.name]]


# Beyond the one-knob changes: warp-wide rows re-reading x with no block barrier, the tree with Welford triples,
# surplus rows in the last block (M=4096 is a multiple of every rows value, so M=4093 for those), a ragged d.
EXTRAS = [
    ({**SEED, "threads": 32, "passes": "twopass"}, D768),
    ({**SEED, "threads": 32, "passes": "welford"}, D768),
    ({**SEED, "threads": 32, "reduce": "smem", "passes": "twopass"}, D768),
    ({**SEED, "reduce": "smem", "passes": "welford"}, D768),
    ({**SEED, "threads": 64, "reduce": "smem"}, D768),
    ({**SEED, "passes": "welford", "rows": 4}, {"m": 4093, "d": 768}),
    ({**SEED, "threads": 32, "rows": 8, "vec": 4, "passes": "twopass"}, D768),
    ({**SEED, "passes": "welford", "reduce": "shfl2"}, D768),
    ({**SEED, "vec": 4}, {"m": 4096, "d": 769}),  # last: a test reads it as EXTRAS[-1]
]
# affine=smem with every passes mode: ragged rows (d=769 by 4-byte accesses), surplus rows that redo the last row.
SMEM_AFFINE = [
    ({**SEED, "affine": "smem"}, D768),
    ({**SEED, "vec": 4, "passes": "twopass", "affine": "smem"}, {"m": 4096, "d": 769}),
    ({**SEED, "passes": "welford", "rows": 4, "vec": 8, "affine": "smem"}, {"m": 4093, "d": 768}),
    ({**SEED, "threads": 32, "rows": 2, "affine": "smem"}, D768),
]
# persist: the fastest one-block-per-group config made persistent, and persistent kernels with warp-wide rows (no block
# barrier) and with the shared-memory tree.
PERSISTENT = [
    ({**BEST, "persist": 4}, D768),
    (BEST, D768),
    ({**SEED, "threads": 32, "rows": 4, "persist": 4}, D768),
    ({**SEED, "threads": 32, "rows": 4}, D768),
    ({**SEED, "reduce": "smem", "persist": 4}, D768),
]


@pytest.fixture(scope="module")
def censuses():
    """(label, shape) -> (Variant, Census) for the seed, every one-knob change and the extras."""
    jobs = [(SEED, D768)] + [(changed, D768) for _, changed in _one_knob_pairs()] + EXTRAS + PERSISTENT
    jobs += SMEM_AFFINE[1:]  # the first is a one-knob change
    jobs += [({**SEED, "threads": t, "reduce": "smem"}, D768) for t in (96, 192, 384, 768, 160, 640)]
    jobs += [({**SEED, "threads": 160, "reduce": "shfl2"}, D768)]
    jobs += [({**SEED, "hint": h, "x_prefetch": p}, D768) for h in ("nc", "cs") for p in (128, 256)]
    with ProcessPoolExecutor(2) as pool:
        built = list(pool.map(_census, jobs))
    return {(variant.label, str(variant.shape)): (variant, census) for variant, census in built}


def _get(censuses, config: dict, shape: dict = D768):
    return censuses[config_label("layernorm", config), str(shape)]


def test_every_knob_value_changes_the_cubin(censuses):
    pairs = _one_knob_pairs()
    assert len(pairs) == sum(len(k.domain) - 1 for k in FAMILY.knobs)
    seed = _get(censuses, SEED)[0].artifact.cubin_sha256
    for knob, changed in pairs:
        assert _get(censuses, changed)[0].artifact.cubin_sha256 != seed, f"{knob}={changed[knob]}"


def test_vec_sets_the_width_of_every_global_access(censuses):
    for vec in (4, 8, 16):
        config = {**SEED, "vec": vec}
        _, c = _get(censuses, config)
        bits, chunks = vec * 8, FAMILY.chunks(config, D768)
        assert c.ptx.params["x"].load_bits == {bits: chunks}
        assert c.ptx.params["y"].store_bits == {bits: chunks}
        for view in (c.ptx, c.sass):  # scale and bias follow vec too
            assert set(view.global_loads) == {bits} and set(view.global_stores) == {bits}


def test_passes_set_the_reads_of_x(censuses):
    jobs = [({**SEED, "passes": p}, D768) for p in READS] + EXTRAS
    for config, shape in jobs:
        _, c = _get(censuses, config, shape)
        chunks = FAMILY.chunks(config, shape)
        params = c.ptx.params
        assert "?" not in params
        assert params["x"].loads == READS[config["passes"]] * chunks, config_label("layernorm", config)
        assert params["scale"].loads == params["bias"].loads == params["y"].stores == chunks
        assert params["x"].stores == params["y"].loads == 0
        # ptxas merged no re-read into an earlier pass's load, with or without a barrier between them
        assert sum(c.sass.global_loads.values()) == sum(c.ptx.global_loads.values())
    assert FAMILY.chunks(EXTRAS[-1][0], EXTRAS[-1][1]) == 7  # d=769 by 128 threads: six full chunks and a ragged one


def test_affine_smem_copies_scale_and_bias_by_cp_async(censuses):
    """affine=smem: every chunk's scale and bias come by cp.async (LDGSTS, at the access width) into shared memory,
    in one commit group waited for whole (wait_all) before the stores, which read them back by shared loads; x and y
    keep their accesses and no global load of scale or bias is left."""
    for config, shape in SMEM_AFFINE:
        variant, c = _get(censuses, config, shape)
        label, chunks, bits = config_label("layernorm", config), FAMILY.chunks(config, shape), config["vec"] * 8
        # cached in L1 (.ca) at every width: every block copies the same scale and bias
        assert re.findall(r"cp\.async\.(c[ag])\.", variant.artifact.ptx) == ["ca"] * 2 * chunks, label
        late = FAMILY.build({**config, "affine": "late"}, shape, ARCH)
        (late_census,) = census_artifact(late.artifact, block=late.block, param_names=list(late.param_names))
        for view in (c.ptx, c.sass):
            assert view.cp_async == {bits: 2 * chunks}, label
            assert view.cp_async_wait == (0,), label
        params = c.ptx.params
        assert params["scale"].loads == params["bias"].loads == chunks, label  # read by the copies
        assert params["x"].loads == late_census.ptx.params["x"].loads and params["y"].stores == chunks, label
        assert sum(c.ptx.global_loads.values()) == params["x"].loads, label  # the only plain global loads: x's
        assert c.sass.shared_loads.get(bits, 0) >= 2 * chunks, label  # scale and bias read back, reductions aside
        assert c.resources.dynamic_shared_bytes == FAMILY.affine_bytes(config, shape), label


def test_rsqrt_approx_uses_mufu_rsq_and_precise_does_not(censuses):
    approx = _get(censuses, SEED)[1]
    assert approx.ptx.special == {"rsqrt.approx": 1} and approx.sass.special == {"MUFU.RSQ": 1}
    precise = _get(censuses, {**SEED, "rsqrt": "precise"})[1]
    assert precise.ptx.special == {"sqrt.approx": 1, "div.full": 1}
    assert "MUFU.RSQ" not in precise.sass.special and precise.sass.special["MUFU.SQRT"] == 1


def test_threads_set_the_block_and_occupancy(censuses):
    for threads in FAMILY.knob("threads").domain:
        variant, c = _get(censuses, {**SEED, "threads": threads})
        assert variant.launch.threads == c.occupancy.block == c.launch_bounds["maxntid"] == threads


def test_rows_set_the_launch(censuses):
    for rows in FAMILY.knob("rows").domain:
        variant, c = _get(censuses, {**SEED, "rows": rows})
        assert variant.launch.grid == (4096 // rows, 1, 1)
        assert variant.launch.threads == c.occupancy.block == 128 * rows
    config, shape = EXTRAS[5]
    assert _get(censuses, config, shape)[0].launch.grid == (math.ceil(4093 / 4), 1, 1)


def test_y_hint_sets_the_cache_qualifier_of_y(censuses):
    for y_hint in FAMILY.knob("y_hint").domain:
        _, c = _get(censuses, {**SEED, "y_hint": y_hint})
        y = c.ptx.params["y"].stores
        assert y > 0 and c.ptx.global_store_hints == ({"cs": y} if y_hint == "cs" else {}), y_hint
        assert c.sass.global_store_hints == ({"EF": y} if y_hint == "cs" else {}), y_hint


def test_hint_sets_the_cache_qualifier_of_x(censuses):
    for hint in FAMILY.knob("hint").domain:
        _, c = _get(censuses, {**SEED, "hint": hint})
        x = c.ptx.params["x"].loads
        read_only = c.ptx.params["scale"].loads + c.ptx.params["bias"].loads  # always __ldg
        expected = {
            "none": {"nc": read_only},
            "nc": {"nc": x + read_only},
            "cs": {"nc": read_only, "cs": x},
            "nc_na": {"nc": x + read_only, "L1::no_allocate": x},
        }
        assert c.ptx.global_load_hints == expected[hint], hint
        sass = {
            "none": {"CONSTANT": read_only},
            "nc": {"CONSTANT": x + read_only},
            "cs": {"CONSTANT": read_only, "EF": x},
            "nc_na": {"CONSTANT": x + read_only, "NA": x},
        }
        assert c.sass.global_load_hints == sass[hint], hint


def _tree_barriers(threads: int) -> int:
    """Block barriers of one shared-memory tree: after the stores, after the fold onto a power of two (where threads
    is none), after each further level read by another warp, at the end."""
    base = 1 << (threads.bit_length() - 1)
    return 2 + (base != threads) + max(0, int(math.log2(base)) - 6) if threads > 32 else 0


def test_reduce_sets_barriers_and_shuffles(censuses):
    for threads in FAMILY.knob("threads").domain:  # shfl: one barrier per reduction, none for a warp-wide row
        _, c = _get(censuses, {**SEED, "threads": threads})
        expected = 2 if threads > 32 else 0
        assert c.ptx.barriers == c.sass.barriers == expected and c.ptx.shuffles == 10, threads
    welford = _get(censuses, {**SEED, "passes": "welford"})[1]
    assert welford.ptx.barriers == welford.sass.barriers == 1  # one reduction, of (count, mean, M2)
    for threads in (64, 128):
        _, c = _get(censuses, {**SEED, "threads": threads, "reduce": "smem"})
        assert c.ptx.barriers == c.sass.barriers == 2 * _tree_barriers(threads), threads
        assert c.ptx.shuffles == 0 and c.sass.shared_stores
    tree_welford = _get(censuses, {**SEED, "reduce": "smem", "passes": "welford"})[1]
    assert tree_welford.ptx.barriers == _tree_barriers(128)
    warp_tree = _get(censuses, {**SEED, "threads": 32, "reduce": "smem", "passes": "twopass"})[1]
    assert warp_tree.ptx.barriers == warp_tree.sass.barriers == 0  # warp barriers only
    # shfl2: the same barriers; each thread reads one 32-bit partial where shfl reads the four as one float4, and
    # adds them with log2(4) = 2 more shuffles per reduction.
    vector, butterfly = _get(censuses, SEED)[1], _get(censuses, {**SEED, "reduce": "shfl2"})[1]
    assert butterfly.ptx.barriers == butterfly.sass.barriers == 2
    assert butterfly.ptx.shuffles == butterfly.sass.shuffles == 10 + 2 * 2
    assert vector.sass.shared_loads == {128: 2} and butterfly.sass.shared_loads == {32: 2}
    welford_butterfly = _get(censuses, {**SEED, "passes": "welford", "reduce": "shfl2"})[1]
    assert welford_butterfly.sass.shared_loads == {128: 1} and welford_butterfly.ptx.barriers == 1


def test_warp_counts_off_a_power_of_two(censuses):
    """3, 5, 6, 10, 12, 20 or 24 warps a row. shfl: each reduction reads the row's partials as float4s, then a float2
    and a float for what is left (3 warps: one float2 and one float; 20: five float4s). shfl2: the butterfly spans the
    power of two above the warps (5 warps: 8 lanes, 3 more shuffles). smem: the tree first folds the slots past the
    power of two below the threads (a barrier more), then halves as before."""
    three, twenty = _get(censuses, {**SEED, "threads": 96})[1], _get(censuses, {**SEED, "threads": 640})[1]
    assert twenty.ptx.shared_loads == twenty.sass.shared_loads == {128: 10}
    assert three.ptx.shared_loads[64] == 2  # the float2 of each reduction
    assert three.sass.shared_loads == {128: 2}  # ptxas reads the padded, 16-byte aligned row's three floats at once
    assert three.ptx.barriers == twenty.ptx.barriers == 2
    five = _get(censuses, {**SEED, "threads": 160, "reduce": "shfl2"})[1]
    assert five.ptx.shuffles == five.sass.shuffles == 10 + 2 * 3 and five.sass.shared_loads == {32: 2}
    for threads, barriers in ((96, 3), (192, 4), (384, 5), (768, 6), (160, 4), (640, 6)):
        _, c = _get(censuses, {**SEED, "threads": threads, "reduce": "smem"})
        assert _tree_barriers(threads) == barriers
        assert c.ptx.barriers == c.sass.barriers == 2 * barriers, threads
        assert c.ptx.shuffles == 0 and c.sass.shared_stores


def test_x_prefetch_sets_the_prefetch_size_of_x(censuses):
    """x_prefetch=128/256 put .L2::128B/.L2::256B on every load of x (LDG….LTC128B/LTC256B), and on nothing else."""
    for prefetch in (128, 256):
        for hint in ("nc", "cs"):
            _, c = _get(censuses, {**SEED, "hint": hint, "x_prefetch": prefetch})
            x = c.ptx.params["x"].loads
            assert c.ptx.global_load_hints[f"L2::{prefetch}B"] == c.sass.global_load_hints[f"LTC{prefetch}B"] == x


def test_l2_ahead_prefetches_the_row_that_far_on(censuses):
    """l2_ahead=1, 2, 4: one bulk prefetch into L2 (cp.async.bulk.prefetch.L2, UBLKPF) of a whole row that many MiB of x
    on, and nothing else changed in x's traffic; none without it."""
    seed = _get(censuses, SEED)[1]
    assert seed.ptx.bulk == seed.sass.bulk == {}
    for mib, rows in ((1, 341), (2, 682), (4, 1365)):  # MiB of 3072-byte rows, rounded down
        config = {**SEED, "l2_ahead": mib}
        _, c = _get(censuses, config)
        assert c.ptx.bulk == c.sass.bulk == {"prefetch": 1}, mib
        assert c.ptx.params["x"].loads == seed.ptx.params["x"].loads
        assert FAMILY.ahead_rows(config, D768) == rows
        source = FAMILY.render(config, D768)
        assert f"x_offset(row + {rows})" in source and '"r"(3072u)' in source  # the whole row
    wide = {**SEED, "vec": 4, "passes": "twopass", "l2_ahead": 1}  # a row of 4 MiB: the next row, its first MiB
    assert FAMILY.ahead_rows(wide, {"m": 8, "d": 1 << 20}) == 1
    assert f'"r"({1 << 20}u)' in FAMILY.render(wide, {"m": 8, "d": 1 << 20})


def test_shared_memory_is_what_the_constraint_counts(censuses):
    for variant, c in censuses.values():
        assert c.resources.shared_bytes == FAMILY.shared_bytes(variant.config), variant.label
        assert c.resources.dynamic_shared_bytes == FAMILY.affine_bytes(variant.config, variant.shape), variant.label
        assert c.resources.spill_store_bytes == 0 and not c.ptx.local_loads, variant.label


def test_persist_sets_a_persistent_grid(censuses):
    """min(row groups, persist × SMs) blocks of an unchanged size. The persistent kernel is another cubin than
    persist=0's, and persist=2, 4 and 8 share one: the value only sets the grid."""
    seed = _get(censuses, SEED)[0]
    cubins = set()
    for persist in (2, 4, 8):
        variant = _get(censuses, {**SEED, "persist": persist})[0]
        assert variant.launch.grid == (min(4096, persist * 132), 1, 1)
        assert variant.launch.threads == seed.launch.threads == 128
        cubins.add(variant.artifact.cubin_sha256)
    assert len(cubins) == 1 and seed.artifact.cubin_sha256 not in cubins
    best, persistent = _get(censuses, BEST)[0], _get(censuses, {**BEST, "persist": 4})[0]
    assert best.launch.grid == (2048, 1, 1) and persistent.launch.grid == (4 * 132, 1, 1)  # 2048 groups of 2 rows
    assert persistent.artifact.cubin_sha256 != best.artifact.cubin_sha256
    # Fewer groups than persist × SMs: a block per group, as with persist=0. Another arch counts its own SMs, and
    # build passes its arch to the launch.
    for m, rows, arch, grid in (
        (100, 1, get_arch("sm_90"), 100),
        (4093, 4, get_arch("sm_90"), 528),
        (4093, 1, get_arch("sm_80"), 432),
    ):
        config = {**SEED, "rows": rows, "persist": 4}
        assert FAMILY.launch(config, {"m": m, "d": 768}, arch).grid == (grid, 1, 1)
    assert FAMILY.launch({**SEED, "persist": 2}, {"m": 1 << 20, "d": 768}, get_arch("sm_100")).grid == (2 * 148, 1, 1)
    assert FAMILY.build({**SEED, "persist": 2}, D768, get_arch("sm_80")).launch.grid == (216, 1, 1)


def test_full_occupancy_caps_registers_for_64_warps():
    """full_occupancy=1 puts .minnctapersm 2048/block in the PTX, and ptxas keeps to 32 registers, so the census's
    occupancy is 64 warps an SM; at d=4096 with 512 threads the plain kernel takes 36 registers and 75%."""
    shape = {"m": 16384, "d": 4096}
    wide = {**SEED, "threads": 512, "hint": "cs"}
    (_, plain), (_, capped) = (_census(({**wide, "full_occupancy": f}, shape)) for f in (0, 1))
    assert "minnctapersm" not in plain.launch_bounds and capped.launch_bounds["minnctapersm"] == 4
    assert plain.resources.registers > 32 and plain.occupancy.fraction == 0.75
    assert capped.resources.registers <= 32 and capped.occupancy.fraction == 1.0
    assert capped.resources.spill_store_bytes == 0


def test_persist_keeps_the_next_groups_loads_in_flight(censuses):
    """The census walks the listing in program order (census/flight.py). With persist=0 a row's chunks of x are in
    flight until the first reduction consumes them; the persistent kernel issues its first two row groups' loads,
    one into each register set, before its first reduction, so twice the loads and bytes are in flight, in PTX and in
    SASS alike (ptxas keeps the loads ahead of the first use). Each group is still read once, one pass."""
    for config in (BEST, SEED, {**SEED, "threads": 32, "rows": 4}):
        chunks, label = FAMILY.chunks(config, D768), config_label("layernorm", config)
        _, before = _get(censuses, config)
        _, after = _get(censuses, {**config, "persist": 4})
        assert before.ptx.loads_in_flight == before.sass.loads_in_flight == chunks, label
        assert before.ptx.bytes_in_flight == before.sass.bytes_in_flight == chunks * config["vec"], label
        assert after.ptx.loads_in_flight == after.sass.loads_in_flight == 2 * chunks, label
        assert after.ptx.bytes_in_flight == after.sass.bytes_in_flight == 2 * chunks * config["vec"], label
        assert after.resources.registers > before.resources.registers  # the second register set
        # x's static loads: the first two groups' before the loop, then one refill in each of the loop's two bodies
        # (one body per register set, each normalizing one group): 4 × chunks, against chunks with persist=0.
        params = after.ptx.params
        assert before.ptx.params["x"].loads == chunks and params["x"].loads == 4 * chunks, label
        # scale, bias and y: one pass per body; ptxas merged no load
        assert params["scale"].loads == params["bias"].loads == params["y"].stores == 2 * chunks, label
        assert sum(after.sass.global_loads.values()) == sum(after.ptx.global_loads.values()) == 8 * chunks, label
        # two reductions per body: twice persist=0's barriers and shuffles
        assert after.ptx.barriers == after.sass.barriers == 2 * before.ptx.barriers, label
        assert after.ptx.shuffles == 2 * before.ptx.shuffles == 20, label
    # The hint is on every x load, the first two groups' and the refills: 24 streaming loads at 6 chunks.
    _, best = _get(censuses, {**BEST, "persist": 4})
    assert best.ptx.global_load_hints == {"cs": 24, "nc": 24} and best.sass.global_load_hints == {
        "EF": 24,
        "CONSTANT": 24,
    }
    _, tree = _get(censuses, {**SEED, "reduce": "smem", "persist": 4})
    assert tree.ptx.barriers == tree.sass.barriers == 2 * 2 * _tree_barriers(128)


# --- 4. configs outside the space are refused ------------------------------------------------------------------


def test_unknown_knob():
    with pytest.raises(ConfigError, match=r"unknown knob 'warps'.*knobs: threads, rows, vec, passes, reduce"):
        FAMILY.parse_settings(["warps=4"], D768, ARCH)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("threads=48", r"knob threads: '48' is not allowed; allowed: 128, 256, 512, 1024, 64, 32, 96, 192"),
        ("passes=onepass", r"knob passes: 'onepass' is not allowed; allowed: regs, welford, twopass"),
        ("vec=2", r"knob vec: '2' is not allowed; allowed: 16, 8, 4"),
        ("persist=3", r"knob persist: '3' is not allowed; allowed: 0, 2, 4, 8"),
    ],
)
def test_value_outside_domain(setting, message):
    with pytest.raises(ConfigError, match=message):
        FAMILY.parse_settings([setting], D768, ARCH)


@pytest.mark.parametrize(
    ("settings", "d", "message"),
    [
        (["threads=1024", "rows=2"], 768, r"threads=1024 × rows=2 is 2048 threads per block, over 1024"),
        (["vec=16"], 770, r"vec=16 needs every row to start 16-byte aligned, but a row of d=770 floats is 3080 bytes"),
        (["threads=32", "vec=4", "passes=regs"], 768, r"passes=regs holds the row in registers.* 24 chunks per thread"),
        (["persist=4", "passes=welford"], 768, r"persist=4 prefetches .* needs passes=regs, not passes=welford"),
        (["persist=8", "passes=twopass"], 768, r"persist=8 prefetches .* needs passes=regs, not passes=twopass"),
        (
            ["persist=2", "threads=64", "vec=4"],
            768,
            r"persist=2 holds two row groups in registers .* 12 chunks per thread",
        ),
        (["persist=2", "threads=32", "vec=8"], 768, r"over 8; use more threads, a wider vec, or persist=0"),
        (["persist=2", "l2_ahead=1"], 768, r"l2_ahead=1 prefetches the row a later block reads.* not persist=2"),
        (["vec=8", "l2_ahead=2"], 770, r"l2_ahead=2 prefetches whole rows in 16-byte units.* 3080 bytes"),
    ],
)
def test_forbidden_combination(settings, d, message):
    with pytest.raises(ConfigError, match=message):
        FAMILY.parse_settings(settings, {"m": 4096, "d": d}, ARCH)


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_l2_ahead_needs_sm_90(arch):
    arch = get_arch(arch)
    with pytest.raises(
        ConfigError, match=rf"l2_ahead=4 prefetches by cp.async.bulk.prefetch.L2, which needs sm_90, not {arch}"
    ):
        FAMILY.parse_settings(["l2_ahead=4"], D768, arch)
    assert FAMILY.parse_settings(["l2_ahead=4"], D768, get_arch("sm_90a"))["l2_ahead"] == 4


def test_persist_completes_to_passes_regs():
    assert FAMILY.parse_settings(["persist=4"], D768, ARCH) == {**SEED, "persist": 4}
    assert FAMILY.violations({**SEED, "passes": "welford", "persist": 2}, D768, ARCH) == [
        "persist=2 prefetches the next row group into registers while the current one reduces, which needs "
        "passes=regs, not passes=welford; use passes=regs or persist=0"
    ]
    assert FAMILY.violations({**SEED, "passes": "welford"}, D768, ARCH) == []  # persist=0: any passes


def test_constraints_are_stated():
    text = " ".join(FAMILY.constraint_text())
    for word in ("threads × rows", "vec", "passes=regs", "shared memory", "persist > 0"):
        assert word in text
    # Three floats per thread for a Welford tree at 1024 threads: far inside 48 KB, so the limit never bites.
    assert max(FAMILY.shared_bytes(c) for c in FAMILY.configs(D768, ARCH)) == 12 * 1024
    # affine=smem's copies of scale and bias (dynamic shared memory) stop at what a block may have: 8 rows of 8192
    # floats, twice, are 512 KB (and the reductions' 256 bytes); 1 row is 64 KB
    wide = {"m": 1024, "d": 8192}
    (problem,) = FAMILY.violations({**SEED, "rows": 8, "affine": "smem"}, wide, ARCH)
    assert "affine=smem at d=8192 with rows=8 needs 524544 bytes of shared memory per block" in problem
    assert FAMILY.violations({**SEED, "threads": 512, "affine": "smem"}, wide, ARCH) == []
    assert FAMILY.launch({**SEED, "threads": 512, "affine": "smem"}, wide, ARCH).dynamic_shared == 64 * 1024


# --- 5. the launcher's side ---------------------------------------------------------------------------------


def test_inputs_reference_and_scalars():
    shape = {"m": 37, "d": 769}
    inputs = FAMILY.make_inputs(shape, np.random.default_rng(0))
    assert set(inputs) == {"x", "scale", "bias"}
    assert inputs["x"].shape == (37, 769) and inputs["scale"].shape == inputs["bias"].shape == (769,)
    assert all(a.dtype == np.float32 for a in inputs.values())
    assert abs(inputs["x"].mean() - X_MEAN) < 0.1 and abs(inputs["x"].std() - 1) < 0.1
    ref = FAMILY.reference(inputs, shape)
    assert ref.dtype == np.float64 and ref.shape == FAMILY.output_shape(shape) == (37, 769)
    normed = (ref - inputs["bias"]) / inputs["scale"]
    assert np.allclose(normed.mean(axis=1), 0, atol=1e-9)
    x = inputs["x"].astype(np.float64)
    assert np.allclose(normed.var(axis=1), x.var(axis=1) / (x.var(axis=1) + EPS))  # the biased variance
    m, eps = FAMILY.scalar_args(shape)
    assert isinstance(m, np.int32) and m == 37 and isinstance(eps, np.float32) and eps == np.float32(1e-5)
    assert FAMILY.bytes_moved(shape) == 4 * (2 * 37 * 769 + 2 * 769)
    assert FAMILY.param_names == ("x", "scale", "bias", "y") and FAMILY.kernel_name == "layernorm"


def test_inputs_fail_a_careless_variance():
    """In FP32, E[x²] - mean² misses the tolerance on these inputs; deviations around the mean meet it."""
    shape = {"m": 64, "d": 768}
    inputs = FAMILY.make_inputs(shape, np.random.default_rng(1))
    x, d = inputs["x"], np.float32(768)
    mean = x.sum(axis=1, dtype=np.float32, keepdims=True) / d
    careless = (x * x).sum(axis=1, dtype=np.float32, keepdims=True) / d - mean * mean
    centered = ((x - mean) ** 2).sum(axis=1, dtype=np.float32, keepdims=True) / d
    ref = FAMILY.reference(inputs, shape)
    for var, ok in ((careless, False), (centered, True)):
        y = (x - mean) / np.sqrt(np.maximum(var, 0) + np.float32(EPS)) * inputs["scale"] + inputs["bias"]
        assert (np.linalg.norm(y - ref) / np.linalg.norm(ref) < FAMILY.tolerance) == ok


# --- 6. on a GPU: every knob value against the float64 reference --------------------------------------------


@pytest.mark.gpu
def test_variants_match_the_reference_on_a_gpu():
    """A covering sample at several widths, with M not a multiple of rows; rows past M must stay untouched."""
    jobs = []
    for d in (1, 64, 700, 768, 769, 1000, 4100):
        shape = {"m": 37, "d": d}
        jobs += [(c, shape) for c in _sample(shape, 12, seed=d)]
    jobs += [(SEED, {"m": 37, "d": 768}), ({**SEED, "passes": "welford", "rows": 8}, {"m": 37, "d": 768})]
    jobs += [(c, {"m": 37, "d": d}) for c, d in NOT_POW2]  # the host emulation's, on the GPU
    failures = _gpu_failures(jobs)
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_l2_ahead_variants_match_the_reference_on_a_gpu():
    """Rows far enough on that every l2_ahead value prefetches (341 to 1365 rows ahead at d=768, 42 to 170 at
    d=6144), with surplus rows that redo the last one (rows=2) and a last block with rows past M (M=4093)."""
    jobs = [
        ({**SEED, **extra, "l2_ahead": mib}, shape)
        for mib in (1, 2, 4)
        for extra, shape in (
            ({}, {"m": 4093, "d": 768}),
            ({"rows": 2, "reduce": "smem", "affine": "early"}, {"m": 4093, "d": 768}),
            ({"affine": "early", "x_prefetch": 128}, {"m": 1031, "d": 6144}),
            ({"passes": "welford", "vec": 8}, {"m": 1031, "d": 6144}),
        )
    ]
    failures = _gpu_failures(jobs)
    assert not failures, "\n".join(failures)


def _gpu_failures(jobs: list[tuple[dict, dict]]) -> list[str]:
    """Each (config, shape) run on the GPU against the float64 reference: the variants whose y is off, or that wrote
    past the last row (8 spare rows must stay NaN)."""
    import cupy

    with ProcessPoolExecutor(os.cpu_count()) as pool:
        variants = [v for v, _ in pool.map(_census, jobs)]
    failures = []
    for variant in variants:
        shape = variant.shape
        inputs = FAMILY.make_inputs(shape, np.random.default_rng(shape["d"]))
        ref = FAMILY.reference(inputs, shape)
        y = cupy.full((shape["m"] + 8, shape["d"]), np.nan, dtype=np.float32)
        args = [cupy.asarray(inputs[name]) for name in ("x", "scale", "bias")] + [y]
        kernel = _kernel(variant)
        kernel(
            variant.launch.grid,
            variant.launch.block,
            (*args, *FAMILY.scalar_args(shape)),
            shared_mem=variant.launch.dynamic_shared,
        )
        got = cupy.asnumpy(y)
        rel = np.linalg.norm(got[: shape["m"]] - ref) / np.linalg.norm(ref)
        if not rel < FAMILY.tolerance or not np.isnan(got[shape["m"] :]).all():
            failures.append(f"{variant.label} d={shape['d']}: relative error {rel:.3g}")
    return failures


def _kernel(variant):
    """The variant's kernel, loaded as the harness loads it (dynamic shared memory allowed)."""
    from mage_tune.measure.harness import load_kernel

    return load_kernel(variant.artifact.cubin, "layernorm", variant.launch.dynamic_shared)[1]


@pytest.mark.gpu
def test_persistent_variants_on_any_grid_on_a_gpu():
    """Persistent kernels on their own grid and on small grids (1, 3, 7 blocks), where each block walks many row
    groups and blocks take unequal shares; M=4093 leaves the last group short for every rows value."""
    import cupy

    jobs = []
    for d in (64, 768, 769):
        shape = {"m": 4093, "d": d}
        persistent = [c for c in _sample(shape, 16, seed=d) if c["persist"]]
        jobs += [(c, shape) for c in persistent] + [(c, {"m": 37, "d": d}) for c in persistent[:4]]
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        variants = [v for v, _ in pool.map(_census, jobs)]
    failures = []
    for variant in variants:
        shape = variant.shape
        inputs = FAMILY.make_inputs(shape, np.random.default_rng(shape["d"]))
        ref = FAMILY.reference(inputs, shape)
        kernel = _kernel(variant)
        for grid in sorted({1, 3, 7, variant.launch.grid[0]}):
            y = cupy.full((shape["m"] + 8, shape["d"]), np.nan, dtype=np.float32)
            args = [cupy.asarray(inputs[name]) for name in ("x", "scale", "bias")] + [y]
            kernel(
                (grid, 1, 1),
                variant.launch.block,
                (*args, *FAMILY.scalar_args(shape)),
                shared_mem=variant.launch.dynamic_shared,
            )
            got = cupy.asnumpy(y)
            rel = np.linalg.norm(got[: shape["m"]] - ref) / np.linalg.norm(ref)
            if not rel < FAMILY.tolerance or not np.isnan(got[shape["m"] :]).all():
                failures.append(f"{variant.label} m={shape['m']} d={shape['d']} grid={grid}: relative error {rel:.3g}")
    assert not failures, "\n".join(failures)


# --- 7. without a GPU: the persistent kernel in a host emulation ------------------------------------------------
#
# The rendered source, compiled by g++ for the host: one OS thread per CUDA thread, blocks one after another (so a
# function-static array is the block's shared memory), std::barrier for __syncthreads and per-warp barriers for
# __syncwarp and the shuffles, and host forms of the two inline-PTX helpers (the load is a copy, rsqrt a division).
# A barrier that some thread of the block (or warp) never reaches hangs the emulation, as it would hang the GPU, so
# a trip count that is not uniform fails here; so does a store past M (the spare rows must stay NaN), a wrong row
# group or the wrong register set (the float64 reference).

HOST_MAIN = r"""
// argv: M, d, block, file of x, scale, bias and y (M + spare rows); then grids, each run on a fresh copy of y,
// written one after another to the output file.
int main(int argc, char** argv) {
    const int M = std::atoi(argv[1]), d = std::atoi(argv[2]), spare = 8;
    blockDim.x = std::atoi(argv[3]);
    std::vector<float> x(size_t(M) * d), scale(d), bias(d), y0(size_t(M + spare) * d);
    FILE* in = std::fopen(argv[4], "rb");
    for (auto* v : {&x, &scale, &bias, &y0})
        if (std::fread(v->data(), sizeof(float), v->size(), in) != v->size()) return 2;
    std::fclose(in);
    FILE* out = std::fopen(argv[5], "wb");
    for (int a = 6; a < argc; ++a) {
        gridDim.x = std::atoi(argv[a]);
        std::vector<float> y = y0;
        for (unsigned b = 0; b < gridDim.x; ++b) {
            block_barrier = std::make_unique<std::barrier<>>(blockDim.x);
            warp_barriers.clear();
            for (unsigned w = 0; w < blockDim.x / 32; ++w)
                warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < blockDim.x; ++t)
                threads.emplace_back([&, t, b] {
                    threadIdx.x = t;
                    blockIdx.x = b;
                    layernorm(x.data(), scale.data(), bias.data(), y.data(), M, 1e-5f);
                });
            for (auto& thread : threads) thread.join();
        }
        std::fwrite(y.data(), sizeof(float), y.size(), out);
    }
    std::fclose(out);
    return 0;
}
"""


def _host_source(config: dict, shape: dict) -> str:
    source = FAMILY.render(config, shape)
    host_forms = {
        "load_x": "    for (int k = 0; k < V; ++k) v[k] = p[k];",
        "inv_sqrt": "    return 1.0f / std::sqrt(v);",
    }
    if config["affine"] == "early":  # scale and bias by the same inline-PTX load as x
        host_forms["load_early"] = host_forms["load_x"]
    if config["affine"] == "smem":  # the asynchronous copies done at once; nothing left to commit or wait for
        host_forms["copy_async"] = "    for (int k = 0; k < V; ++k) dst[k] = src[k];"
        source = re.sub(r'\n *asm volatile\("cp\.async\.(commit_group|wait_all);" ::: "memory"\);', "", source)
        floats = FAMILY.affine_bytes(config, shape) // 4
        source = source.replace("extern __shared__", "__shared__").replace("affine_s[];", f"affine_s[{floats}];")
    for name, body in host_forms.items():
        source, found = re.subn(
            rf"( {name}\(.*?\) \{{\n).*?\n\}}\n", rf"\g<1>{body}\n}}\n", source, count=1, flags=re.S
        )
        assert found == 1, name
    return HOST_SHIM + source + HOST_MAIN


def _emulate(job: tuple[dict, int]) -> list[str]:
    """Build `config` at width d for the host once, then run it at M=37 and M=5 rows (M is a runtime argument), each
    on the family's grid and, when persistent, on grids of 1, 3 and 7 blocks; the failures, as sentences."""
    config, d = job
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        source, program = Path(tmp) / "k.cpp", Path(tmp) / "k"
        source.write_text(_host_source(config, {"m": 37, "d": d}))
        subprocess.run([host_compiler(), "-std=c++20", "-O1", "-pthread", "-w", "-o", program, source], check=True)
        for m in (37, 5):
            grid = FAMILY.launch(config, {"m": m, "d": d}, ARCH).grid[0]
            grids = sorted({1, 3, 7, grid}) if config["persist"] else [grid]  # persist=0 needs a block per group
            failures += _run_on_host(program, config, {"m": m, "d": d}, grids, Path(tmp))
    return failures


def _run_on_host(program: Path, config: dict, shape: dict, grids: list[int], work: Path) -> list[str]:
    m, d = shape["m"], shape["d"]
    label = f"{config_label('layernorm', config)} m={m} d={d}"
    inputs = FAMILY.make_inputs(shape, np.random.default_rng(m + d))
    with open(work / "in.bin", "wb") as f:
        for array in (inputs["x"], inputs["scale"], inputs["bias"], np.full((m + 8, d), np.nan, np.float32)):
            f.write(array.tobytes())
    block = config["threads"] * config["rows"]
    try:
        subprocess.run(
            [program, str(m), str(d), str(block), work / "in.bin", work / "out.bin", *map(str, grids)],
            check=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return [f"{label}: hung (a barrier some thread never reached)"]
    ys = np.fromfile(work / "out.bin", np.float32).reshape(len(grids), m + 8, d)
    ref = FAMILY.reference(inputs, shape)
    failures = []
    for grid, y in zip(grids, ys, strict=True):
        rel = np.linalg.norm(y[:m] - ref) / np.linalg.norm(ref)
        if not rel < FAMILY.tolerance or not np.isnan(y[m:]).all():
            failures.append(
                f"{label} grid={grid}: relative error {rel:.3g}; spare rows untouched: {np.isnan(y[m:]).all()}"
            )
    return failures


# Warp counts that are no power of two, with every reduction: shfl's float4 reads of a padded row of partials with
# a float2 and a float left over (3 warps), or none (20); butterflies over 8 and 16 lanes for 5 and 10 warps (-0 sums
# and empty Welford parts in the lanes past the last warp); trees that first fold 32, 64 or 256 slots.
NOT_POW2 = [
    ({**SEED, "threads": 96}, 768),
    ({**SEED, "threads": 96, "rows": 2, "passes": "welford"}, 1000),
    ({**SEED, "threads": 160, "vec": 8, "reduce": "shfl2"}, 1000),
    ({**SEED, "threads": 320, "passes": "welford", "reduce": "shfl2"}, 1000),
    ({**SEED, "threads": 192, "rows": 2, "vec": 4, "reduce": "smem"}, 769),
    ({**SEED, "threads": 384, "passes": "welford", "reduce": "smem"}, 768),
    ({**SEED, "threads": 768, "vec": 4, "passes": "twopass", "reduce": "smem"}, 1000),
    ({**SEED, "threads": 640, "persist": 2}, 2560),
]
# Persistent kernels of every shape of reduction: a block of warp-wide rows (no block barrier), shuffles across warps,
# the shared-memory tree, a ragged last chunk (d=769, d=1000); the seed with persist=0 checks the emulation itself,
# and two one-block-per-group kernels the butterfly exchange (shfl2), of sums and of Welford triples.
HOST_CONFIGS = [
    ({**BEST, "persist": 4}, 768),
    ({**SEED, "threads": 32, "rows": 4, "persist": 2}, 768),
    ({**SEED, "vec": 4, "reduce": "smem", "persist": 8}, 769),
    ({**SEED, "threads": 64, "rows": 8, "reduce": "smem", "rsqrt": "precise", "persist": 4}, 768),
    ({**SEED, "threads": 256, "rows": 2, "hint": "nc", "persist": 2}, 1000),
    ({**SEED, "threads": 256, "rows": 2, "reduce": "shfl2", "persist": 2}, 1000),  # a butterfly over 8 warps
    ({**SEED, "threads": 512, "reduce": "shfl2", "passes": "welford"}, 1000),  # Welford triples over 16 warps
    ({**SEED, "threads": 128, "rows": 2, "vec": 8, "y_hint": "cs", "persist": 2}, 1000),  # streaming stores of y
    ({**SEED, "rows": 2, "vec": 4, "passes": "twopass", "affine": "smem"}, 769),  # scale, bias in shared memory
    ({**SEED, "threads": 32, "rows": 4, "affine": "smem"}, 1000),
    (SEED, 768),
    *NOT_POW2,
]


def test_kernels_match_the_reference_in_a_host_emulation():
    """M=37 and M=5 rows (short last groups for rows > 1; at M=5 and rows=8 a single group), each on grids of 1, 3 and 7
    blocks (one block walking every group, unequal shares, blocks with no group at all) and on the family's grid."""
    if host_compiler() is None:
        pytest.skip("needs g++ with C++20 <barrier>")
    with ProcessPoolExecutor(2) as pool:
        failures = [f for found in pool.map(_emulate, HOST_CONFIGS) for f in found]
    assert not failures, "\n".join(failures)
