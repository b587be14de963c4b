"""The Hopper 3xTF32 matmul family without a GPU: every knob value compiles for sm_90a, and the census of the real
binaries shows what the design promises (three HGMMA .TF32 per m64 tile and k8 step, four tensor copies per k-tile,
the mbarrier protocol, setmaxnreg at the count the block launches with, no local memory, and the pre-pass kernel
beside the main one with its TF32 conversions); its space refuses other archs, tiles over the registers or the shared
memory, and chains too long for the tolerance, each in a sentence; its problem is matmul-3xtf32's; numpy's TF32
rounding agrees with an independent oracle and the split recipe holds the tolerance; its launcher takes a scratch
per call and lets it go once both kernels are launched, encodes its four tensor maps once per scratch address (a
bounded cache) and launches the pre-pass then the main kernel (a stand-in driver records the calls). Its
correctness on a GPU is tests/kernels/test_gpu_matmul_3xtf32_sm90.py's."""

from __future__ import annotations

import ctypes
import itertools
import weakref
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact, census_variant
from mage_tune.cli import cli
from mage_tune.cuda_driver import Driver
from mage_tune.errors import ConfigError
from mage_tune.kernels import matmul_3xtf32_sm90 as module
from mage_tune.kernels.matmul_3xtf32 import FAMILY as PROBLEM
from mage_tune.kernels.matmul_3xtf32_sm90 import FAMILY, SplitLauncher, tf32_round, tf32_split
from mage_tune.kernels.matmul_bf16 import ARGUMENT_SETS
from mage_tune.kernels.select import build_all

ARCH = get_arch("sm_90a")
SHAPE = {"m": 4096, "n": 4096, "k": 4096}
RAGGED = {"m": 1000, "n": 520, "k": 263}
FILE = str(Path(module.__file__))

# Every value of every knob at least once, and every valid (bm, consumers, bn): the shapes of the wgmma loop.
COVER = [
    {},  # the defaults: 128 × 128 over two consumers, three stages, chains of two k-tiles
    {"bn": 64, "stages": 4, "chain": 1, "raster": 0},
    {"bm": 64, "bn": 128, "consumers": 1, "stages": 4, "chain": 4, "persistent": 0},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 6, "raster": 4},
    {"bm": 128, "bn": 64, "consumers": 1, "stages": 2},
    {"bm": 256, "bn": 64, "consumers": 2, "stages": 2, "chain": 4},
]


def _configs(settings_list, shape=SHAPE):
    return [FAMILY.complete(settings, shape, ARCH) for settings in settings_list]


@pytest.fixture(scope="module")
def covered():
    """(config, variant, census) for each COVER config, compiled in parallel."""
    variants = build_all(FAMILY, SHAPE, ARCH, _configs(COVER), lambda error: pytest.fail(str(error)))
    assert len(variants) == len(COVER)
    return [(v.config, v, census_variant(v)) for v in variants]


def test_the_cover_holds_every_knob_value_and_every_wgmma_loop_shape():
    configs = _configs(COVER)
    for knob in FAMILY.knobs:
        assert {c[knob.name] for c in configs} == set(knob.domain), knob.name
    loops = {(c["bm"], c["consumers"], c["bn"]) for c in FAMILY.configs(SHAPE, ARCH)}
    assert {(c["bm"], c["consumers"], c["bn"]) for c in configs} == loops


def test_every_knob_value_compiles_with_tf32_hgmma_tensor_copies_mbarriers_and_no_local_memory(covered):
    for config, variant, census in covered:
        m_sub, label = FAMILY.m_sub(config), variant.label
        # the k-tile's 4 k8 steps, each M_SUB m64 tiles × 3 products, of the block's full width, both operands K-major
        assert census.sass.matrix_shapes == {f"HGMMA.64x{config['bn']}x8.F32.TF32": 12 * m_sub}, label
        assert census.ptx.matrix_shapes == {f"wgmma.m64n{config['bn']}k8.f32.tf32.tf32": 12 * m_sub}, label
        assert ".tnsp" not in variant.artifact.sass and "p, 1, 1;" in variant.source, label
        # A_big, A_small, B_big^T, B_small^T: four tensor copies per k-tile
        assert census.sass.bulk == census.ptx.bulk == {"load": 4}, label
        mbarrier = census.sass.mbarrier
        assert mbarrier["init"] == 2 * config["stages"] and mbarrier["arrive_expect_tx"] == 1, label
        assert mbarrier["arrive"] == 2 and mbarrier["try_wait"] >= 2, label  # in the chain and at its end
        # one commit group per k-tile, one left in flight within a chain, all drained at its end
        assert (census.sass.wgmma_commits, census.sass.wgmma_waits) == (1, (1, 0)), label
        assert census.sass.local_loads == {} and census.sass.local_stores == {}, label
        assert census.resources.spill_store_bytes == 0 and census.resources.stack_bytes == 0, label
        # no wait_group ptxas had to add (C7517), no serialized wgmma, no ignored setmaxnreg
        assert "C75" not in (variant.artifact.ptxas_log or ""), label
        # two sets of accumulators, the chain's and the total's, added by FADD
        assert "total[mi][i] += part[mi][i]" in variant.source and f"CHAIN = {config['chain']};" in variant.source


def test_setmaxnreg_hands_the_producers_registers_to_the_consumers(covered):
    for config, variant, census in covered:
        wanted = FAMILY.consumer_registers(config)
        assert sorted(census.sass.setmaxnreg) == sorted(census.ptx.setmaxnreg) == [("dec", 40), ("inc", wanted)]
        assert census.resources.registers == FAMILY.launch_registers(config), variant.label
        assert variant.threads * census.resources.registers >= 128 * (40 + config["consumers"] * wanted)


def test_the_pre_pass_kernel_splits_with_tf32_rounding(covered):
    """The module holds tf32_split beside the main kernel: two cvt.rna.tf32.f32 per element of A and of B, a 32 × 33
    shared tile for B's transpose, no local memory."""
    _, variant, _ = covered[0]
    (split,) = census_artifact(variant.artifact, kernel="tf32_split")
    assert variant.artifact.ptx.count("cvt.rna.tf32.f32") >= 4
    assert split.resources.spill_store_bytes == 0 and split.sass.local_loads == {}
    assert split.sass.matrix == {} and split.sass.bulk == {}
    assert split.sass.barriers == 1  # between B's tile read along N and written along K
    FAMILY.check_parameters(variant.artifact.ptx, SHAPE)
    without = variant.artifact.ptx.replace(".entry tf32_split", ".entry renamed_split")
    with pytest.raises(ConfigError, match="no kernel 'tf32_split'"):
        FAMILY.check_parameters(without, SHAPE)


def test_the_default_config_census(covered):
    config, variant, census = covered[0]
    assert config == FAMILY.default_config(SHAPE, ARCH)
    assert (config["bm"], config["bn"], config["consumers"], config["stages"], config["chain"]) == (128, 128, 2, 3, 2)
    assert census.sass.global_stores == {64: 32} and census.sass.predicated["global_stores"] == 32
    assert "UTMALDG.2D" in variant.artifact.sass and "USETMAXREG" in variant.artifact.sass
    assert variant.launch.block == (384, 1, 1) and variant.launch.grid == (132, 1, 1)
    assert variant.launch.dynamic_shared == 1024 + 3 * (2 * (128 + 128) * 128 + 16) <= 227 * 1024


def test_odd_n_stores_single_floats():
    shape = {"m": 200, "n": 135, "k": 72}
    (variant,) = build_all(FAMILY, shape, ARCH, _configs([{}], shape), pytest.fail)
    census = census_variant(variant)
    assert census.sass.global_stores == {32: 64} and census.resources.spill_store_bytes == 0


# --- the space --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100a"])
def test_other_archs_are_refused(arch):
    problems = FAMILY.violations(FAMILY.with_defaults({}), SHAPE, get_arch(arch))
    assert any("sm_90a only" in p for p in problems), problems
    assert FAMILY.count_configs(SHAPE, get_arch(arch)) == 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"bm": 128, "bn": 128, "consumers": 1}, "would hold 256 FP32 accumulators (part and total"),
        ({"bm": 64, "consumers": 2}, "does not split into 64-row wgmma tiles over 2 consumer warpgroups"),
        ({"stages": 4}, "= 263232 B exceeds the 232448 B a block may opt into on sm_90a"),
        ({"bm": 256, "bn": 64, "stages": 3}, "exceeds the 232448 B"),
    ],
)
def test_the_space_refuses_what_cannot_launch(settings, message):
    config = FAMILY.with_defaults(settings)
    problems = FAMILY.violations(config, SHAPE, ARCH)
    assert any(message in p for p in problems), problems
    with pytest.raises(ConfigError):
        FAMILY.check_valid(config, SHAPE, ARCH)


def test_every_valid_config_fits_the_shared_memory_and_the_registers():
    valid = list(FAMILY.configs(SHAPE, ARCH))
    assert valid and all(FAMILY.shared_bytes(c) <= ARCH.smem_per_block_optin for c in valid)
    assert all(FAMILY.accumulators(c) <= 128 for c in valid)
    assert {c["stages"] for c in valid} == {2, 3, 4, 6}


@pytest.mark.parametrize(
    ("k", "chains"),
    [(8, {1, 2, 4}), (72, {1, 2}), (263, {1, 2}), (1023, {1, 2}), (1024, {1, 2, 4}), (4096, {1, 2, 4})],
)
def test_a_chain_is_admitted_only_where_its_drift_is_within_the_tolerance(k, chains):
    """min(32·chain, K) products × 2^-26 <= u·max(√K, 16): chain 2 sits at the floor 16 u, chain 4 needs √K >= 32."""
    shape = {"m": 64, "n": 64, "k": k}
    admitted = {
        c for c in FAMILY.knob("chain").domain if not FAMILY.violations(FAMILY.with_defaults({"chain": c}), shape, ARCH)
    }
    assert admitted == chains
    if 4 not in chains:
        problems = FAMILY.violations(FAMILY.with_defaults({"chain": 4}), shape, ARCH)
        sentence = f"chain=4 sums {min(128, k)} products in one truncating wgmma chain"
        assert any(sentence in p for p in problems), problems


def test_free_knobs_change_no_verdict():
    free = [k for k in FAMILY.knobs if k.free]
    assert {k.name for k in free} == {"raster", "persistent"}
    bound = [k for k in FAMILY.knobs if not k.free]
    for values in itertools.product(*(k.domain for k in bound)):
        base = dict(zip((k.name for k in bound), values, strict=True))
        verdicts = {
            bool(FAMILY.violations({**base, **dict(zip((k.name for k in free), f, strict=True))}, SHAPE, ARCH))
            for f in itertools.product(*(k.domain for k in free))
        }
        assert len(verdicts) == 1, base


def test_any_shape_is_valid():
    """The pre-pass pads the split rows, so no M, N or K is refused (chains aside)."""
    for shape in ({"m": 1, "n": 1, "k": 1}, {"m": 77, "n": 25, "k": 41}, RAGGED):
        assert FAMILY.violations(FAMILY.with_defaults({"chain": 1}), shape, ARCH) == []


@pytest.mark.parametrize(
    ("shape", "settings", "grid"),
    [
        (SHAPE, {}, 132),
        (SHAPE, {"persistent": 0}, 32 * 32),
        ({"m": 200, "n": 136, "k": 72}, {}, 4),
        ({"m": 200, "n": 136, "k": 72}, {"bm": 256, "bn": 64, "stages": 2}, 3),
    ],
)
def test_launch_geometry(shape, settings, grid):
    config = FAMILY.complete(settings, shape, ARCH)
    launch = FAMILY.launch(config, shape, ARCH)
    assert launch.grid == (grid, 1, 1)
    assert launch.block == (128 * (1 + config["consumers"]), 1, 1)
    assert launch.dynamic_shared == FAMILY.shared_bytes(config)


# --- the problem: matmul-3xtf32's ----------------------------------------------------------------------------------


def test_the_problem_is_matmul_3xtf32_s():
    for shape in ({"m": 1, "n": 8, "k": 8}, RAGGED, SHAPE, {"m": 64, "n": 64, "k": 16384}):
        assert FAMILY.tolerance_for(shape) == PROBLEM.tolerance_for(shape)
        assert FAMILY.bytes_moved(shape) == PROBLEM.bytes_moved(shape) and FAMILY.flops(shape) == PROBLEM.flops(shape)
    ours = FAMILY.make_inputs(RAGGED, np.random.default_rng(3))
    theirs = PROBLEM.make_inputs(RAGGED, np.random.default_rng(3))
    assert ours.keys() == theirs.keys() and all(np.array_equal(ours[k], theirs[k]) for k in ours)
    assert np.array_equal(FAMILY.reference(ours, RAGGED), PROBLEM.reference(theirs, RAGGED))
    assert FAMILY.output_shape(RAGGED) == (1000, 520)
    assert FAMILY.device_dtype("A") == FAMILY.device_dtype("__out__") == "float32"
    assert [b.label for b in FAMILY.baseline_kernels(RAGGED)] == [b.label for b in PROBLEM.baseline_kernels(RAGGED)]
    assert [(b.label, b.kind) for b in FAMILY.baseline_kernels(RAGGED)[-2:]] == [
        ("torch.matmul (cuBLAS FP32)", "torch"),
        ("torch.matmul (cuBLAS TF32, context only)", "context"),
    ]
    assert FAMILY.mma_passes == 3 and FAMILY.baselines == ("triton", "torch", "context")


# --- TF32 in numpy --------------------------------------------------------------------------------------------------


def _tf32_oracle(x: np.ndarray) -> np.ndarray:
    """Round to 10 explicit significand bits, nearest, ties away from zero, by float64 arithmetic: the two TF32
    neighbours of |x| and the nearer one."""
    x64 = x.astype(np.float64)
    mag = np.abs(x64)
    exponent = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    ulp = 2.0 ** (exponent - 10)
    below = np.floor(mag / ulp) * ulp
    above = below + ulp
    rounded = np.where(mag - below >= above - mag, above, below)  # a tie goes up in magnitude: away from zero
    return (np.sign(x64) * rounded).astype(np.float32)


def test_tf32_round_matches_the_oracle_and_rounds_ties_away_from_zero():
    rng = np.random.default_rng(11)
    x = np.concatenate(
        [
            rng.uniform(-1, 1, 100_000).astype(np.float32),
            (rng.standard_normal(10_000) * 1e6).astype(np.float32),
            np.float32([1 + 2**-11, -(1 + 2**-11), 1 + 3 * 2**-11, 2**-11 * 3, 0.0, -0.0]),
        ]
    )
    got = tf32_round(x)
    assert np.array_equal(got, _tf32_oracle(x))
    assert not np.any(got.view(np.uint32) & np.uint32(0x1FFF))  # the 13 dropped bits are zero
    ties = tf32_round(np.float32([1 + 2**-11, -(1 + 2**-11), 1 + 3 * 2**-11]))
    assert list(ties) == [1 + 2**-10, -(1 + 2**-10), 1 + 2 * 2**-10]  # both ties away from zero, not to even
    assert np.array_equal(tf32_round(got), got)
    special = np.float32([np.inf, -np.inf, np.nan])
    assert np.array_equal(tf32_round(special), special, equal_nan=True)


def test_the_split_holds_22_bits_and_the_recipe_holds_the_tolerance():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 100_000).astype(np.float32)
    big, small = tf32_split(x)
    assert np.array_equal(tf32_round(small), small)
    rest = np.abs(x.astype(np.float64) - big - small)
    assert np.all(rest <= 2.0**-22 * np.abs(x.astype(np.float64)))
    for shape in ({"m": 200, "n": 136, "k": 72}, RAGGED, {"m": 64, "n": 48, "k": 4096}):
        inputs = FAMILY.make_inputs(shape, rng)
        ref = FAMILY.reference(inputs, shape)
        emulated = module.emulate_3xtf32(inputs["A"], inputs["B"])
        error = np.linalg.norm(emulated - ref) / np.linalg.norm(ref)
        assert error < FAMILY.tolerance_for(shape) / 8, shape  # room left for the FP32 sums and the chains' drift
        one_pass = tf32_round(inputs["A"]).astype(np.float64) @ tf32_round(inputs["B"]).astype(np.float64)
        assert np.linalg.norm(one_pass - ref) / np.linalg.norm(ref) > FAMILY.tolerance_for(shape)  # TF32 alone fails


# --- the launcher, with a stand-in driver -------------------------------------------------------------------------


class Recorder(Driver):
    """Records each driver call with what its arguments point at, and succeeds."""

    def __init__(self):
        super().__init__(lib=object())
        self.calls = []

    def call(self, name, *args):
        if name == "cuTensorMapEncodeTiled":
            target, dtype, rank, address, dims, strides, box, element_strides, *modes = args
            self.calls.append(
                (name, target.value, dtype, rank, address.value, list(dims), list(strides), list(box),
                 list(element_strides), modes)
            )  # fmt: skip
        elif name == "cuLaunchKernel":
            function, *geometry, stream, params, extra = args
            self.calls.append((name, function, tuple(geometry), stream.value, params, extra))
        elif name == "cuModuleGetFunction":
            args[0]._obj.value = 0x100 + len(self.calls)  # a distinct handle per function
            self.calls.append((name, args[2]))
        elif name == "cuFuncSetAttribute":
            self.calls.append((name, args[0].value, args[1], args[2]))
        else:
            self.calls.append((name,))


class Buffer:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def _u64(address):
    return ctypes.c_uint64.from_address(address).value


def _int(address):
    return ctypes.c_int.from_address(address).value


class Scratch:
    """A stand-in for the scratch tensor: only its lifetime matters (weakly referenced by the tests)."""


def _split_launcher(allocate, shape=RAGGED):
    config = FAMILY.complete({"bm": 64, "bn": 128, "consumers": 1, "chain": 1}, shape, ARCH)
    launch = FAMILY.launch(config, shape, ARCH)
    job = SimpleNamespace(
        kind="variant", config=config, cubin=b"\x7fELF-stand-in", kernel_name="matmul_3xtf32_sm90",
        grid=launch.grid, block=launch.block, dynamic_shared=launch.dynamic_shared,
    )  # fmt: skip
    driver = Recorder()
    return SplitLauncher(job, shape, driver, lambda: 0x5EED, lambda: None, allocate), driver, launch


def test_the_launcher_takes_a_scratch_per_call_encodes_its_maps_once_and_launches_the_split_then_the_matmul():
    scratch, allocated, kept = 0x7F0000400000, [], []

    def allocate(nbytes):
        buffer = Scratch()
        allocated.append(nbytes)
        kept.append(weakref.ref(buffer))
        return buffer, scratch

    launcher, driver, launch = _split_launcher(allocate)  # RAGGED: K = 263, rows padded to 264 floats
    m, n, k, kp = 1000, 520, 263, 264
    assert module.padded_k(k) == kp and module.scratch_bytes(RAGGED) == 2 * (m + n) * kp * 4
    assert allocated == []  # nothing is allocated before a call
    names = [c[0] for c in driver.calls]
    assert names == ["cuInit", "cuModuleLoadData", "cuModuleGetFunction", "cuModuleGetFunction", "cuFuncSetAttribute"]
    assert [c[1] for c in driver.calls if c[0] == "cuModuleGetFunction"] == [b"matmul_3xtf32_sm90", b"tf32_split"]
    main_handle = launcher.function.value
    assert driver.calls[4] == ("cuFuncSetAttribute", main_handle, 8, launch.dynamic_shared)
    driver.calls.clear()

    a, b, c = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000
    bufs = {"A": Buffer(a), "B": Buffer(b), "__out__": Buffer(c)}
    launcher(bufs)
    assert allocated == [2 * (m + n) * kp * 4]
    assert kept[0]() is None  # the launcher let the scratch go once both kernels were launched
    encodes = [c for c in driver.calls if c[0] == "cuTensorMapEncodeTiled"]
    assert [call[0] for call in driver.calls] == ["cuTensorMapEncodeTiled"] * 4 + ["cuLaunchKernel"] * 2
    modes = [0, 3, 3, 0]  # no interleave, 128-byte swizzle, 256-byte L2 promotion, zero fill
    offsets = [0, m * kp * 4, 2 * m * kp * 4, (2 * m + n) * kp * 4]
    boxes = (64, 64, 128, 128)  # bm rows of A's splits, bn of B's
    for (_, target, *rest), offset, rows, box_rows in zip(encodes, offsets, (m, m, n, n), boxes, strict=True):
        assert rest == [7, 2, scratch + offset, [kp, rows], [kp * 4], [32, box_rows], [1, 1], modes]
        assert target % 64 == 0 and offset % 16 == 0
    assert [e[1] for e in encodes] == [encodes[0][1] + 128 * i for i in range(4)]
    (_, split_fn, split_geometry, stream, split_params, _), (_, main_fn, main_geometry, _, main_params, _) = (
        driver.calls[4:]
    )
    assert split_fn.value != main_fn.value and main_fn.value == main_handle and stream == 0x5EED
    tiles = (-(-m // 32) + -(-n // 32)) * -(-kp // 32)
    assert module.split_grid(RAGGED) == tiles and split_geometry == (tiles, 1, 1, 256, 1, 1, 0)
    assert [_u64(p) for p in split_params[:3]] == [a, b, scratch]
    assert [_int(p) for p in split_params[3:7]] == [m, n, k, kp]
    assert main_geometry == (*launch.grid, *launch.block, launch.dynamic_shared)
    assert list(main_params[:4]) == [e[1] for e in encodes]
    assert _u64(main_params[4]) == c and [_int(p) for p in main_params[5:8]] == [m, n, k]

    driver.calls.clear()
    launcher(bufs)  # the allocator returned the same block: nothing encoded again
    assert [call[0] for call in driver.calls] == ["cuLaunchKernel"] * 2 and len(allocated) == 2
    driver.calls.clear()
    launcher({"A": Buffer(a + 256), "B": Buffer(b), "__out__": Buffer(c)})  # new inputs: new split parameters only
    assert [call[0] for call in driver.calls] == ["cuLaunchKernel"] * 2
    assert _u64(driver.calls[0][4][0]) == a + 256
    driver.calls.clear()
    launcher(bufs, main=False)  # the pre-pass alone, as benchmarks/gpu/split_share.py times it
    assert [(call[0], call[1].value) for call in driver.calls] == [("cuLaunchKernel", split_fn.value)]
    assert all(ref() is None for ref in kept) and len(kept) == 4


def test_a_new_scratch_address_gets_its_own_maps_and_split_parameters():
    addresses = iter([0x7F0000400000, 0x7F0008000000, 0x7F0000400000])
    launcher, driver, _ = _split_launcher(lambda nbytes: (Scratch(), next(addresses)))
    bufs = {"A": Buffer(0x7F0000000000), "B": Buffer(0x7F0000100000), "__out__": Buffer(0x7F0000200000)}
    launches = []
    for _ in range(3):
        driver.calls.clear()
        launcher(bufs)
        encodes = [c for c in driver.calls if c[0] == "cuTensorMapEncodeTiled"]
        split, main = (c[4] for c in driver.calls if c[0] == "cuLaunchKernel")
        launches.append(([e[4] for e in encodes], _u64(split[2]), list(main[:4])))
    (first_bases, first_scratch, first_maps), (bases, scratch, maps), (again, back, back_maps) = launches
    assert first_scratch == 0x7F0000400000 and first_bases[0] == first_scratch
    assert scratch == 0x7F0008000000 and bases[0] == scratch and maps != first_maps
    assert again == [] and back == first_scratch and back_maps == first_maps  # the first address's maps, kept
    assert set(launcher.tensor_maps) == {0x7F0000400000, 0x7F0008000000}


def test_the_maps_and_parameter_caches_stay_bounded_and_evicted_maps_stay_valid():
    count = ARGUMENT_SETS + 8
    addresses = iter(0x7F0000000000 + i * (1 << 24) for i in range(count))
    launcher, _, _ = _split_launcher(lambda nbytes: (Scratch(), next(addresses)))
    bufs = {"A": Buffer(0x7E0000000000), "B": Buffer(0x7E0000100000), "__out__": Buffer(0x7E0000200000)}
    for _ in range(count):
        launcher(bufs)
    assert len(launcher.tensor_maps) == ARGUMENT_SETS and len(launcher.arguments) == ARGUMENT_SETS
    assert min(launcher.tensor_maps) == 0x7F0000000000 + 8 * (1 << 24)  # the oldest went first
    # A parameter list keeps its maps' storage alive, so a list outliving its maps' cache entry still points at them.
    launcher.tensor_maps.clear()
    (_, _, maps), _, main = next(iter(launcher.arguments.values()))
    first = ctypes.addressof(maps) + (-ctypes.addressof(maps)) % 64
    assert main[0] == first


def test_a_scratch_not_16_byte_aligned_is_refused():
    launcher, _, _ = _split_launcher(lambda nbytes: (Scratch(), 0x7F0000400008))
    bufs = {"A": Buffer(0x7F0000000000), "B": Buffer(0x7F0000100000), "__out__": Buffer(0x7F0000200000)}
    with pytest.raises(ConfigError, match="not 16-byte aligned"):
        launcher(bufs)


def test_the_family_s_launcher_for_variants_and_baselines(monkeypatch):
    monkeypatch.setattr(module, "Driver", Recorder)
    monkeypatch.setattr(module, "_torch_stream", lambda: 0)
    monkeypatch.setattr(module, "_torch_context", lambda: None)
    monkeypatch.setattr(module, "_torch_scratch", lambda nbytes: (None, 0x7F0000400000))
    config = FAMILY.complete({}, RAGGED, ARCH)
    launch = FAMILY.launch(config, RAGGED, ARCH)
    job = SimpleNamespace(
        kind="variant", config=config, cubin=b"\x7fELF", kernel_name="matmul_3xtf32_sm90",
        grid=launch.grid, block=launch.block, dynamic_shared=launch.dynamic_shared,
    )  # fmt: skip
    assert isinstance(FAMILY.launcher(job, RAGGED), SplitLauncher)
    assert FAMILY.launcher(SimpleNamespace(kind="other"), RAGGED) is None
    assert FAMILY.launcher(SimpleNamespace(kind="context"), RAGGED) is PROBLEM.launcher(
        SimpleNamespace(kind="context"), RAGGED
    )  # matmul-3xtf32's cuBLAS TF32


# --- the command line ------------------------------------------------------------------------------------------------


def test_space_and_census_on_the_command_line():
    out = CliRunner().invoke(cli, ["space", FILE, "--arch", ARCH, "--shape", "m=1000,n=520,k=264", "--wide"])
    assert out.exit_code == 0, out.output
    assert "matmul-3xtf32-sm90" in out.output and "chain" in out.output and "sm_90a only" in out.output
    assert f"{FAMILY.count_configs({'m': 1000, 'n': 520, 'k': 264}, ARCH)} valid configs" in out.output
    args = ["census", FILE, "--arch", ARCH, "--shape", "m=1000,n=520,k=264", "--set", "bn=64", "--wide"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert "HGMMA.64x64x8.F32.TF32 12" in out.output and "inc 232, dec 40" in out.output
