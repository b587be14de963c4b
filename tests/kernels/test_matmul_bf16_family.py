"""The Hopper BF16 matmul family without a GPU: every knob value compiles for sm_90a, and the census of the real
binaries shows what the design promises (HGMMA of the tile's shape, the tensor copies of A and B, the mbarrier
protocol, the register hand-over by setmaxnreg at the count the block launches with, no local memory); its space
refuses other archs and tiles over the shared memory or the registers, each in a sentence; a K or N off a tensor
map's 16-byte pitch runs on zero-padded copies (PaddedLauncher); its launcher encodes the tensor maps and packs the
kernel's parameters as the kernel declares them (a stand-in driver records the calls); `mage-tune space` and
`mage-tune census` take it. Its correctness on a GPU is tests/kernels/test_gpu_matmul_bf16.py's."""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import random
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.cli import cli
from mage_tune.compile import build_from_cu
from mage_tune.errors import ConfigError
from mage_tune.kernels import load_family, matmul_bf16, pitch_copy
from mage_tune.kernels.base import (
    builtin_template_dir,
    output_tiles,
    tile_area_inside,
    tile_extents,
    value_distance,
)
from mage_tune.kernels.matmul_bf16 import F16, FAMILY, FP32_OUT, Driver, TensorMapLauncher
from mage_tune.kernels.select import build_all
from mage_tune.problem import Problem
from mage_tune.tuning.learned import work_features

ARCH = get_arch("sm_90a")
SHAPE = {"m": 4096, "n": 4096, "k": 4096}
RAGGED = {"m": 1000, "n": 520, "k": 264}
FILE = str(Path(matmul_bf16.__file__))
BESIDE = {"cluster": 2, "multicast": 1, "pairing": "beside"}  # a multicast pair side by side


@functools.cache
def _valid(dims: tuple) -> tuple[dict, ...]:
    return tuple(FAMILY.configs(dict(dims), ARCH))


def valid_at(shape: dict) -> tuple[dict, ...]:
    """Every valid config at `shape`, listed once per test session: each listing checks all 3.2 million
    combinations of the constrained knobs (tens of seconds), so the tests share one per shape."""
    return _valid(tuple(shape.items()))


def assert_the_space_at(shape: dict, family=FAMILY) -> None:
    """`family`'s space at `shape` is FAMILY's at SHAPE, without listing it again: every config valid there is valid
    here, and a seeded sample of the knobs' combinations gets the same verdict at both."""
    assert all(family.violations(c, shape, ARCH) == [] for c in valid_at(SHAPE))
    rng = random.Random(0)
    for _ in range(5000):
        config = {k.name: rng.choice(k.domain) for k in FAMILY.knobs}
        assert bool(family.violations(config, shape, ARCH)) == bool(FAMILY.violations(config, SHAPE, ARCH)), config


# The wgmma loops of each (bm, consumers, schedule), with the widest bn its accumulators allow.
LOOPS = [
    ({"bm": 128, "consumers": 2}, 256),
    ({"bm": 64, "consumers": 1}, 256),
    ({"bm": 64, "consumers": 2, "schedule": "pingpong"}, 256),
    ({"bm": 128, "consumers": 1}, 192),
    ({"bm": 256, "consumers": 2}, 192),
    ({"bm": 256, "consumers": 1}, 96),
    ({"bm": 128, "consumers": 2, "schedule": "pingpong"}, 192),
    ({"bm": 192, "consumers": 3}, 192),
]
# The other knobs' settings the fine widths' configs take in turn: both epilogues, every cluster mode, stream-K (not
# with ping-pong), one tile per block.
TURNS = [
    {},
    {"epilogue": "direct", "cluster": 2, "multicast": 1},
    {"cluster": 4, "multicast": 1, "stages": 3},
    {"stream_k": 1, "epilogue": "direct"},
    {"cluster": 2, "multicast": 1, "raster": 0},
    {"persistent": 0, "stages": 2, "epilogue": "direct"},
]


def _fine_columns() -> list[dict]:
    """bn values other than the multiples of 32 the cover below names, each with every wgmma loop it fits (the last
    B box read in part, 16 to 48 of its columns; C's columns past the last whole store chunk from registers). The
    turns are dealt over every multiple of 8, which wgmma takes and the GPU ran, and the knob's widths kept."""
    out = []
    for bn in (bn for bn in range(72, 256, 8) if bn not in (128, 160, 192, 224)):
        for loop, widest in LOOPS:
            if bn <= widest:
                turn = TURNS[len(out) % len(TURNS)]
                # stream-K keeps 128 accumulators a thread (its fix-up's registers), ping-pong none
                wide = FAMILY.accumulators(FAMILY.with_defaults({**loop, "bn": bn})) > 128
                skip = "stream_k" in turn and ("schedule" in loop or wide)
                out.append({**loop, "bn": bn, **({} if skip else turn)})
    widths = set(FAMILY.knob("bn").domain)
    return [c for c in out if c["bn"] in widths]


FINE_COLUMNS = _fine_columns()

# Every value of every knob at least once, and every (bm, consumers, bn): the shapes of the wgmma loop.
COVER = [
    {},  # the defaults: 128 × 256, two consumers, four stages, the TMA-store epilogue (230464 B, just inside 227 KB)
    {"bm": 128, "bn": 64, "consumers": 2, "stages": 6, "raster": 0},
    {"bm": 128, "bn": 128, "consumers": 2, "stages": 5, "cluster": 2},
    {"bm": 128, "bn": 192, "consumers": 2, "stages": 3, "persistent": 0},
    {"bm": 128, "bn": 64, "consumers": 1, "stages": 2, "raster": 4},
    {"bm": 128, "bn": 128, "consumers": 1, "stages": 6, "raster": 16, "cluster": 2},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 6},
    {"bm": 64, "bn": 128, "consumers": 1, "stages": 3},
    {"bm": 64, "bn": 192, "consumers": 1, "stages": 5, "cluster": 2, "persistent": 0},
    {"bm": 64, "bn": 256, "consumers": 1, "stages": 4},
    {"bm": 256, "bn": 64, "consumers": 1, "stages": 5},
    {"bm": 256, "bn": 64, "consumers": 2, "stages": 2},
    {"bm": 256, "bn": 128, "consumers": 2, "stages": 4, "cluster": 2},
    {"cluster": 2, "multicast": 1},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 2, "multicast": 1, "persistent": 0},
    {"bm": 128, "bn": 192, "consumers": 2, "stages": 3, "cluster": 2, "multicast": 1, "raster": 0},
    {"epilogue": "direct"},  # the defaults storing from registers
    {"bm": 64, "bn": 192, "consumers": 1, "stages": 3, "cluster": 2, "multicast": 1, "epilogue": "tma"},  # 3 chunks
    {"bm": 256, "bn": 64, "consumers": 1, "stages": 4, "raster": 0, "epilogue": "tma"},  # 4 m64 tiles, 1 chunk each
    # ping-pong: each consumer takes whole tiles in turn (bm = 64 with two consumers only here)
    {"bm": 64, "bn": 256, "schedule": "pingpong"},
    {"bm": 64, "bn": 64, "stages": 6, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 64, "bn": 128, "cluster": 2, "schedule": "pingpong"},
    {"bm": 64, "bn": 192, "stages": 5, "persistent": 0, "schedule": "pingpong"},
    {"bm": 128, "bn": 128, "raster": 16, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 256, "bn": 64, "stages": 3, "schedule": "pingpong"},
    {"bm": 64, "bn": 256, "cluster": 2, "multicast": 1, "schedule": "pingpong", "epilogue": "tma"},
    # stream-K: the last wave's k-tiles shared out, partial sums through a workspace
    {"stream_k": 1},
    {"bm": 64, "bn": 128, "consumers": 1, "stages": 3, "epilogue": "direct", "stream_k": 1},
    # 2 × 2 clusters: A shared along the tile row (halves of bm rows), B along the tile column
    {"cluster": 4, "multicast": 1},
    {
        "bm": 64,
        "bn": 64,
        "consumers": 1,
        "stages": 2,
        "cluster": 4,
        "multicast": 1,
        "persistent": 0,
        "epilogue": "direct",
    },
    {"bm": 128, "bn": 128, "stages": 3, "cluster": 4, "multicast": 1, "schedule": "pingpong"},
    # bn not a multiple of 64: the last B box copied whole, wgmma reads part of it; C's columns past the last whole
    # store chunk stored from registers
    {"bn": 224},
    {"bn": 160, "stages": 5, "cluster": 4, "multicast": 1, "epilogue": "direct"},  # 5 stages: room for 1 chunk at most
    {"bm": 64, "bn": 224, "consumers": 1, "stages": 3, "cluster": 2, "multicast": 1, "epilogue": "direct"},
    {"bm": 64, "bn": 160, "consumers": 1, "stages": 6, "cluster": 2, "persistent": 0},
    {"bm": 64, "bn": 224, "stages": 3, "schedule": "pingpong"},
    {"bm": 64, "bn": 160, "schedule": "pingpong", "epilogue": "direct"},
    {"bn": 160, "stream_k": 1},
    *FINE_COLUMNS,
    # over 128 accumulators a consumer thread (split by rows): 256 × 160 and 256 × 192 over two consumers (one wave
    # of fewer, larger tiles), 256 × 96 over one, 128 × 192 ping-pong and over one consumer
    {"bm": 256, "bn": 160, "stages": 3},
    {"bm": 256, "bn": 192, "stages": 3, "cluster": 4, "multicast": 1, "epilogue": "direct"},
    {"bm": 256, "bn": 176, "stages": 3, "transposed": 1},
    {"bm": 256, "bn": 160, "stages": 3, "cluster": 2, "multicast": 1, "raster": 16},
    {"bm": 256, "bn": 96, "consumers": 1, "stages": 4},
    {"bm": 128, "bn": 160, "consumers": 1, "stages": 5, "cluster": 2},
    {"bm": 128, "bn": 192, "consumers": 1, "stages": 4, "epilogue": "direct"},
    {"bm": 128, "bn": 192, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 256, "bn": 160, "stages": 3, "stagger": 1},
    {"bm": 256, "bn": 160, "stages": 3, "cluster": 2, "multicast": 1, "pairing": "beside", "epilogue": "direct"},
    # the kernel of Cᵀ's tiles: wgmma's A operand from B's boxes (N-major), its B operand from A's rows (K-major)
    {"transposed": 1, "bn": 208},
    {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1},  # A's rows in halves
    {"transposed": 1, "bm": 256, "bn": 128, "stages": 3, "cluster": 4, "multicast": 1, "epilogue": "direct"},
    # pairs side by side, sharing the tile row's operand: A's rows in halves, or with transposed=1 B's boxes
    {"bn": 224, "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"bm": 64, "bn": 128, "consumers": 1, "cluster": 2, "multicast": 1, "pairing": "beside", "epilogue": "direct"},
    {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1, "pairing": "beside", "stream_k": 1},
    {"transposed": 1, "bm": 64, "bn": 256, "cluster": 2, "multicast": 1, "pairing": "beside", "schedule": "pingpong"},
    # one staging chunk per consumer warpgroup: a fifth stage of 128 × 192 tiles
    {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "raster": 0, "staging": 1},
    {"bm": 64, "bn": 128, "schedule": "pingpong", "epilogue": "tma", "staging": 1},
    {"transposed": 1, "bn": 208, "staging": 1, "stream_k": 1},
    # four staging chunks per consumer warpgroup, each overwritten once the store three chunks back has read it: a
    # 64 × 256 part of C whole (untransposed and transposed), three chunks a tile (the turn wraps within tiles), one
    # chunk a tile, ping-pong
    {"bn": 256, "stages": 3, "staging": 4},
    {"transposed": 1, "bn": 256, "stages": 3, "staging": 4, "raster": 0},
    {"bn": 192, "stages": 3, "cluster": 2, "multicast": 1, "staging": 4},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "staging": 4},
    {"bm": 64, "bn": 256, "stages": 4, "schedule": "pingpong", "epilogue": "tma", "staging": 4},
    # consumers splitting the tile's columns (every row, bn / 2 columns each): 192-row tiles of every width that
    # fits (transposed: the second consumer's A rows from row bn / 2, whole swizzle atoms), and without transposed=1
    # bn / 2 of whole B boxes
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1},
    {"bm": 192, "bn": 176, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1},
    {"bm": 192, "bn": 160, "split": "columns", "transposed": 1, "cluster": 4, "multicast": 1, "epilogue": "direct"},
    {"bm": 192, "bn": 144, "split": "columns", "transposed": 1, "stream_k": 1, "staging": 1},
    {"bm": 192, "bn": 128, "split": "columns", "stages": 3, "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"bm": 192, "bn": 112, "split": "columns", "transposed": 1},  # 56 columns each: the direct epilogue
    {"bm": 192, "bn": 96, "split": "columns", "transposed": 1, "persistent": 0},
    {"bm": 192, "bn": 80, "split": "columns", "transposed": 1, "epilogue": "direct", "stream_k": 1},
    {"bm": 192, "bn": 64, "split": "columns", "transposed": 1, "cluster": 2},
    {"bm": 128, "bn": 256, "split": "columns", "cluster": 4, "multicast": 1},
    {"bm": 256, "bn": 128, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1},
    {"bm": 256, "bn": 144, "split": "columns", "transposed": 1, "epilogue": "direct"},  # 144 accumulators
    # the second consumer started stagger k-tiles behind the first (rows, columns, transposed; both epilogues)
    {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "raster": 0, "staging": 1, "stagger": 3},
    {"stagger": 1},
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1, "stagger": 2},
    {"bn": 128, "stages": 6, "cluster": 2, "multicast": 1, "pairing": "beside", "epilogue": "direct", "stagger": 2},
    # three consumer warpgroups, one m64 of a 192-row tile each (152 registers, at most 96 accumulators)
    {"bm": 192, "bn": 192, "consumers": 3, "stages": 3},
    {"bm": 192, "bn": 192, "consumers": 3, "stages": 4, "staging": 1, "cluster": 2, "multicast": 1},
    {"bm": 192, "bn": 176, "consumers": 3, "stages": 3, "cluster": 4, "multicast": 1, "epilogue": "direct"},
    {"bm": 192, "bn": 160, "consumers": 3, "stages": 3, "cluster": 2, "multicast": 1, "transposed": 1},
    {"bm": 192, "bn": 128, "consumers": 3, "stages": 4, "cluster": 2, "multicast": 1, "stream_k": 1},
    {"bm": 192, "bn": 64, "consumers": 3, "stages": 5, "cluster": 2, "multicast": 1, "epilogue": "direct"},
    # the column split's other wgmma loops (m64 tiles per consumer, N = bn / 2), transposed (any bn / 2 of 8s)
    *(
        {"bm": 64 * m_sub, "bn": 2 * n, "split": "columns", "transposed": 1}
        for m_sub, ns in (
            (1, (32, 40, 48, 56, 72, 88, 104, 120)),
            (2, (32, 40, 48, 56, 72, 88, 104, 120)),
            (4, (32, 40, 48, 56)),
        )
        for n in ns
    ),
]


def _configs(family, settings_list, shape=SHAPE):
    return [family.complete(settings, shape, ARCH) for settings in settings_list]


@pytest.fixture(scope="module")
def covered():
    """(config, variant, census) for each COVER config of the BF16-output family, compiled in parallel."""
    configs = _configs(FAMILY, COVER)
    variants = build_all(FAMILY, SHAPE, ARCH, configs, lambda error: pytest.fail(str(error)))
    assert len(variants) == len(configs)
    return [(v.config, v, census_variant(v)) for v in variants]


def test_the_cover_holds_every_knob_value_and_every_wgmma_loop_shape():
    configs = _configs(FAMILY, COVER)
    for knob in FAMILY.knobs:
        assert {c[knob.name] for c in configs} == set(knob.domain), knob.name
    valid = valid_at(SHAPE)
    assert {(c["cluster"], c["multicast"]) for c in configs} == {(1, 0), (2, 0), (2, 1), (4, 1)}
    assert {(c["bm"], c["consumers"], c["bn"]) for c in configs} == {(c["bm"], c["consumers"], c["bn"]) for c in valid}
    # the wgmma loops themselves: m64 tiles per consumer and N (bn, or bn / 2 with split=columns)
    loops = {(FAMILY.m_sub(c), FAMILY.wgmma_n(c)) for c in valid}
    assert {(FAMILY.m_sub(c), FAMILY.wgmma_n(c)) for c in configs} == loops


def test_every_knob_value_compiles_with_hgmma_tensor_copies_mbarriers_and_no_local_memory(covered):
    for config, variant, census in covered:
        m_sub, wn = FAMILY.m_sub(config), FAMILY.wgmma_n(config)
        label = variant.label
        # the k-tile's 4 k16 steps, each M_SUB wgmma of the consumer's width (the block's, or with split=columns
        # half of it), with B transposed (N-major), or with transposed=1 wgmma's A (B's boxes) transposed
        assert wn == (config["bn"] // 2 if config["split"] == "columns" else config["bn"]), label
        assert census.sass.matrix_shapes == {f"HGMMA.64x{wn}x16.F32.BF16": 4 * m_sub}, label
        assert census.ptx.matrix_shapes == {f"wgmma.m64n{wn}k16.f32.bf16.bf16": 4 * m_sub}, label
        transposed, quad = config["transposed"], config["cluster"] == 4
        flags, mark, other = ("1, 0", ".tnspA", ".tnspB") if transposed else ("0, 1", ".tnspB", ".tnspA")
        assert f"p, 1, 1, {flags};" in variant.source, label
        assert mark in variant.artifact.sass and other not in variant.artifact.sass, label
        # one tensor copy of A and one per 64-column box of B (multicast into both blocks of a pair; in a 2 × 2
        # cluster A's half too, into both blocks of the tile row); transposed, one per 64-row box of the tile's
        # rows (B's columns) and A's bn rows (halves multicast into both blocks of a pair or a quad's tile column);
        # a pair multicasts the copies of the operand it shares: the tile column's (above) or the tile row's (beside)
        row_copies = config["bm"] // 64 if transposed else 1
        column_copies = 1 if transposed else -(-config["bn"] // 64)
        if quad:
            copies = {"multicast": row_copies + column_copies}
        elif config["multicast"] and config["pairing"] == "beside":
            copies = {"load": column_copies, "multicast": row_copies}
        elif config["multicast"]:
            copies = {"load": row_copies, "multicast": column_copies}
        else:
            copies = {"load": row_copies + column_copies}
        if config["epilogue"] == "tma" and wn >= 64:  # and one tensor store per whole 64 × 64 chunk of the
            copies["store"] = m_sub * (wn // 64)  # consumer's part (a last, narrower one is stored from registers)
        assert census.sass.bulk == census.ptx.bulk == copies, label
        # full and empty barriers per stage, the producer's arrival with its bytes, the consumers' releases (in the
        # loop and at the tile's end; into both blocks of a pair with multicast, through mapa)
        # (with pingpong two more, the consumers' turns: each waits on its own and arrives on the other's)
        mbarrier, turns = census.sass.mbarrier, int(config["schedule"] == "pingpong")
        assert mbarrier["init"] == 2 * config["stages"] + 2 * turns and mbarrier["arrive_expect_tx"] == 1, label
        releases = 4 if quad else 2 if config["multicast"] else 1  # blocks each consumer warp releases a stage in
        assert mbarrier["arrive"] == 2 * releases + turns, label
        assert mbarrier["try_wait"] >= 2 + turns, label
        assert ("mapa.shared::cluster" in variant.artifact.ptx) == bool(config["multicast"]), label
        # a pair meets at cluster barriers after the initialization and before leaving
        pair = {"arrive": 2, "wait": 2} if config["multicast"] else {}
        assert census.sass.cluster_barriers == census.ptx.cluster_barriers == pair, label
        # one commit group per k-tile, one left in flight, all drained at the tile's end
        assert (census.sass.wgmma_commits, census.sass.wgmma_waits) == (1, (1, 0)), label
        assert census.sass.local_loads == {} and census.sass.local_stores == {}, label
        assert census.resources.spill_store_bytes == 0 and census.resources.stack_bytes == 0, label
        dims = (config["cluster"], 1, 1) if config["cluster"] > 1 else None
        assert ("__cluster_dims__(" in variant.source) == bool(dims), label
        assert (census.cluster.dims if census.cluster else None) == dims, label


def test_setmaxnreg_hands_the_producers_registers_to_the_consumers(covered):
    """The producer drops to 40, the consumers rise to 232 (two) or 240 (one), and the block launches with as many
    registers as the consumers get (168 at 384 threads: the cap; 240 at 256), so the pool covers every request (an
    .inc the pool cannot cover would wait forever)."""
    for config, variant, census in covered:
        wanted = FAMILY.consumer_registers(config)
        assert sorted(census.sass.setmaxnreg) == sorted(census.ptx.setmaxnreg) == [("dec", 40), ("inc", wanted)]
        assert census.resources.registers == FAMILY.launch_registers(config), variant.label
        pool = variant.threads * census.resources.registers
        assert pool >= 128 * (40 + config["consumers"] * wanted), variant.label
        assert variant.threads == 128 * (1 + config["consumers"])
        assert "C7508" not in (variant.artifact.ptxas_log or "")  # ptxas ignored no setmaxnreg


def test_the_default_config_census(covered):
    config, variant, census = covered[0]
    assert config == FAMILY.default_config(SHAPE, ARCH)
    assert (config["bm"], config["bn"], config["consumers"], config["stages"]) == (128, 256, 2, 4)
    assert census.sass.matrix == {"HGMMA": 4}
    assert census.sass.mbarrier.keys() >= {"init", "arrive_expect_tx", "arrive", "try_wait"}
    assert re.search(r"UTMALDG\.2D", variant.artifact.sass) and "USETMAXREG" in variant.artifact.sass
    assert census.sass.local_loads == {} and census.resources.spill_load_bytes == 0
    # the TMA-store epilogue: a consumer's 64 rows in four chunks of 64 bf16 columns, each one tensor store
    assert census.sass.global_stores == {} and census.sass.bulk["store"] == 4
    assert variant.launch.block == (384, 1, 1) and variant.launch.grid == (132, 1, 1)
    staging = 2 * 2 * 8192  # two 8 KB chunks per consumer warpgroup
    assert variant.launch.dynamic_shared == 1024 + 4 * ((128 + 256) * 128 + 16) + staging == 230464 <= 227 * 1024
    warnings = [line for line in (variant.artifact.ptxas_log or "").splitlines() if "arning" in line]
    assert warnings == []  # no wgmma serialization, no ignored setmaxnreg


def test_fp32_output_compiles_to_float2_stores():
    configs = _configs(
        FP32_OUT, [{"epilogue": "direct"}, {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "epilogue": "direct"}]
    )
    for variant in build_all(FP32_OUT, SHAPE, ARCH, configs, lambda error: pytest.fail(str(error))):
        census = census_variant(variant)
        pairs = FP32_OUT.m_sub(variant.config) * 2 * variant.config["bn"] // 8
        assert census.sass.global_stores == {64: pairs}
        assert census.sass.local_loads == {} and census.resources.spill_store_bytes == 0
        assert "cvt.rn.bf16x2.f32" not in variant.source and "float* __restrict__ C" in variant.source


# --- the epilogues -------------------------------------------------------------------------------------------------
EPILOGUE_SETTINGS = [{}, {"bm": 64, "bn": 192, "consumers": 1, "stages": 2}]


@pytest.fixture(scope="module")
def epilogues():
    """{(family name, epilogue, settings index): (variant, census)} for every epilogue value of both output dtypes."""
    built = {}
    for family in (FAMILY, FP32_OUT):
        settings = [{**s, "epilogue": e} for e in family.knob("epilogue").domain for s in EPILOGUE_SETTINGS]
        for variant in build_all(family, RAGGED, ARCH, _configs(family, settings, RAGGED), pytest.fail):
            key = (family.name, variant.config["epilogue"], _index(variant.config))
            built[key] = (variant, census_variant(variant))
    return built


def _index(config):
    """Which of EPILOGUE_SETTINGS a config completes (they differ in bm)."""
    return 0 if config["bm"] == 128 else 1


def test_every_epilogue_builds_for_both_output_dtypes(epilogues):
    domain = FAMILY.knob("epilogue").domain
    assert domain == FP32_OUT.knob("epilogue").domain == ("tma", "direct")
    assert set(epilogues) == {
        (f.name, e, i) for f in (FAMILY, FP32_OUT) for e in domain for i in range(len(EPILOGUE_SETTINGS))
    }
    for (name, epilogue, _), (variant, census) in epilogues.items():
        label = f"{name} {variant.label}"
        assert census.sass.local_loads == {} and census.resources.spill_store_bytes == 0, label
        assert ("const __grid_constant__ TensorMap c_map" in variant.source) == (epilogue == "tma"), label
        warnings = [line for line in (variant.artifact.ptxas_log or "").splitlines() if "arning" in line]
        assert warnings == [], label


def test_the_tma_epilogue_stores_through_tensor_stores_not_global_stores(epilogues):
    """Per chunk of 64 rows × 128 bytes (64 bf16 or 32 FP32 columns): the thread's 32 values into shared memory
    (4 stmatrix.x4 for bf16, 16 float2 stores for FP32), a proxy fence, the warpgroup's named barrier, one tensor
    store and its commit group, with a wait for the previous store's reads before the barrier; no global store at all
    where direct has one per value pair."""
    tma = [(name, variant, census) for (name, epilogue, _), (variant, census) in epilogues.items() if epilogue == "tma"]
    assert len(tma) == 2 * len(EPILOGUE_SETTINGS)
    for name, variant, census in tma:
        family, config, label = (FAMILY if name == FAMILY.name else FP32_OUT), variant.config, variant.label
        chunks = FAMILY.m_sub(config) * config["bn"] * family.out_bytes // 128
        direct, direct_census = epilogues[(name, "direct", _index(config))]
        pairs = FAMILY.m_sub(config) * 2 * config["bn"] // 8
        assert sum(direct_census.sass.global_stores.values()) == pairs, label
        assert census.sass.global_stores == census.ptx.global_stores == {}, label
        assert census.sass.bulk["store"] == census.ptx.bulk["store"] == chunks, label
        assert len(re.findall(r"UTMASTG\.2D", variant.artifact.sass)) == chunks, label
        stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", variant.artifact.ptx)
        assert len(stores) == chunks, label
        if family is FAMILY:  # bf16: stmatrix.x4, four 8 × 8 blocks a warp (16 of the thread's values) at a time
            assert census.sass.matrix_stores == census.ptx.matrix_stores == {"x4": pairs // 4}, label
            assert census.sass.shared_stores == census.ptx.shared_stores == {}, label
            assert "STSM.16.M88.4" in variant.artifact.sass, label
        else:  # FP32: a float2 per value pair
            assert census.sass.shared_stores == census.ptx.shared_stores == {64: pairs}, label
            assert census.sass.matrix_stores == census.ptx.matrix_stores == {}, label
        assert census.sass.bulk_commits == census.ptx.bulk_commits == chunks, label
        assert census.sass.bulk_waits == census.ptx.bulk_waits == (0,) * (chunks + 1), label  # reads, then the end
        assert census.ptx.memory_fences.get("fence.proxy.async.shared::cta") == chunks, label
        assert census.sass.barriers == census.ptx.barriers == 1 + chunks, label  # __syncthreads + one per chunk
        assert "bar.sync %0, 128;" in variant.source and "cp.async.bulk.wait_group.read 0;" in variant.source
        assert variant.launch.dynamic_shared == direct.launch.dynamic_shared + config["consumers"] * 2 * 8192, label


def test_the_tma_epilogue_refuses_configs_whose_staging_passes_the_shared_memory():
    """The defaults fit with their staging (230464 B); five stages of 128 × 192 fit only without it."""
    assert FAMILY.with_defaults({})["epilogue"] == "tma"
    assert FAMILY.violations(FAMILY.with_defaults({}), SHAPE, ARCH) == []
    direct = FAMILY.with_defaults({"bn": 192, "stages": 5, "epilogue": "direct"})
    assert FAMILY.violations(direct, SHAPE, ARCH) == [] and FAMILY.shared_bytes(direct) == 205904
    tma = {**direct, "epilogue": "tma"}
    sentence = (
        "shared memory stages × (bm + 192) × 64 × 2 bytes, plus epilogue=tma's staging, "
        "consumers × 2 × 8192 = 32768 bytes, with barriers and alignment, = 238672 B exceeds the 232448 B a block "
        "may opt into on sm_90a"
    )
    assert FAMILY.violations(tma, SHAPE, ARCH) == [sentence]
    with pytest.raises(ConfigError, match="epilogue=tma's staging"):
        FAMILY.check_valid(tma, SHAPE, ARCH)
    assert any("staging × 8192 bytes with epilogue=tma" in line for line in FAMILY.constraint_text())
    one = {**tma, "staging": 1}  # one chunk per consumer warpgroup: the fifth stage fits
    assert FAMILY.violations(one, SHAPE, ARCH) == [] and FAMILY.shared_bytes(one) == 205904 + 2 * 8192
    valid = valid_at(SHAPE)
    assert tma not in valid and direct in valid
    assert {c["epilogue"] for c in valid} == {"direct", "tma"}
    assert all(FAMILY.shared_bytes(c) <= ARCH.smem_per_block_optin for c in valid)


# --- the space --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90", "sm_100a"])
def test_other_archs_are_refused_in_a_sentence(arch):
    arch = get_arch(arch)
    problems = FAMILY.violations(FAMILY.with_defaults({}), SHAPE, arch)
    assert any(f"sm_90a only (Hopper's arch-specific target); {arch} cannot" in p for p in problems), problems
    assert list(FAMILY.configs(SHAPE, arch)) == []
    with pytest.raises(ConfigError, match="sm_90a only"):
        FAMILY.complete({}, SHAPE, arch)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"bm": 256, "bn": 128, "stages": 5, "epilogue": "direct"},
            "= 246864 B exceeds the 232448 B a block may opt into on sm_90a",
        ),
        ({"bm": 128, "bn": 256, "stages": 5}, "exceeds the 232448 B"),
        ({"bm": 128, "bn": 192, "stages": 6}, "exceeds the 232448 B"),
        ({"bm": 256, "bn": 128, "consumers": 1}, "would hold 256 FP32 accumulators"),
        ({"bm": 128, "bn": 256, "consumers": 1}, "would hold 256 FP32 accumulators"),
        ({"bm": 256, "bn": 208, "stages": 3}, "would hold 208 FP32 accumulators"),
        ({"bm": 256, "bn": 192, "stages": 3}, None),  # 192 accumulators
        ({"bm": 256, "bn": 160, "stages": 3, "stream_k": 1}, "the 128 that fit its 232 registers beside stream-K's"),
        ({"bm": 256, "bn": 128, "stream_k": 1}, None),
        ({"bm": 192, "bn": 208, "consumers": 3, "stream_k": 1}, "over the 96 that fit its 152 registers"),
        ({"bm": 64, "consumers": 2}, "bm=64 does not split into 64-row wgmma tiles over 2 consumer warpgroups"),
        ({"multicast": 1, "cluster": 1}, "multicast=1 shares copies between the blocks of a cluster: it needs "),
        ({"multicast": 0, "cluster": 4}, "cluster=4 is the 2 × 2 group of tiles whose blocks share A and B"),
        ({"persistent": 0, "stream_k": 1}, "stream_k=1 shares the last wave's k-tiles"),
        ({"bm": 128, "bn": 256, "stages": 4}, None),
        ({"bm": 64, "bn": 64, "consumers": 1, "stages": 6}, None),
        ({"split": "columns", "consumers": 1, "bm": 64, "bn": 128}, "it needs consumers=2 and schedule=cooperative"),
        ({"split": "columns", "schedule": "pingpong", "bm": 64}, "split=columns shares each tile's columns"),
        ({"split": "columns", "bn": 192}, "column bn / 2 = 96, which without transposed=1 must be a whole 64-column"),
        ({"bm": 192, "bn": 64, "consumers": 1}, "bm=192 (three m64 tiles) is for split=columns"),
        ({"bm": 192, "bn": 208, "split": "columns", "transposed": 1}, "would hold 156 FP32 accumulators"),
        ({"bm": 192, "bn": 192, "split": "columns", "transposed": 1}, None),  # 144 accumulators
        ({"bm": 192, "bn": 128, "split": "columns"}, None),
    ],
)
def test_the_space_refuses_what_cannot_launch(settings, message):
    config = FAMILY.with_defaults(settings)
    problems = FAMILY.violations(config, SHAPE, ARCH)
    if message is None:
        assert problems == []
        assert FAMILY.shared_bytes(config) <= 227 * 1024
    else:
        assert any(message in p for p in problems), problems
        with pytest.raises(ConfigError):
            FAMILY.check_valid(config, SHAPE, ARCH)


def test_only_stream_k_s_own_limit_is_said_to_be_stream_k_s():
    """Three consumers' limit (96) holds with or without stream-K: its refusal does not blame stream-K's fix-up."""
    three = FAMILY.violations(FAMILY.with_defaults({"bm": 192, "bn": 208, "consumers": 3, "stream_k": 1}), SHAPE, ARCH)
    rows = FAMILY.violations(FAMILY.with_defaults({"bm": 256, "bn": 160, "stream_k": 1}), SHAPE, ARCH)
    assert any("over the 96" in p for p in three) and not any("stream-K's fix-up" in p for p in three)
    assert any("over the 128 that fit its 232 registers beside stream-K's fix-up" in p for p in rows)


def test_every_valid_config_fits_the_shared_memory_and_the_registers():
    configs = valid_at(SHAPE)
    assert len(configs) > 100
    for c in configs:
        limit = 144 if c["split"] == "columns" else 96 if c["consumers"] == 3 else 128 if c["stream_k"] else 192
        assert FAMILY.shared_bytes(c) <= 227 * 1024 and FAMILY.accumulators(c) <= limit
        if c["schedule"] == "pingpong" or c["split"] == "columns":  # each consumer takes whole tiles or every row
            assert c["consumers"] == 2 and c["bm"] % 64 == 0
        else:
            assert c["bm"] % (64 * c["consumers"]) == 0
    assert {(c["schedule"], c["multicast"]) for c in configs} == {
        (s, m) for s in ("cooperative", "pingpong") for m in (0, 1)
    }


def test_a_broken_config_is_repaired_to_the_nearest_widths_not_the_first_in_the_domain():
    """192 rows on two consumers splitting rows break a constraint; of the two-knob repairs the nearest keeps the most
    of the tile: three consumers at bn=192 where 192 x 192 fits (one staging chunk), bn=128 where it does not, never
    bn=64 (the first valid width in the knob's order). A number's move counts by its size, a name's as 1."""
    one_chunk = {**FAMILY.defaults(), "bm": 192, "staging": 1}
    assert FAMILY.violations(one_chunk, SHAPE, ARCH)
    repaired = FAMILY.nearest_valid(one_chunk, SHAPE, ARCH, keep=("bm",))
    assert {k: v for k, v in repaired.items() if v != one_chunk[k]} == {"bn": 192, "consumers": 3}
    two_chunks = {**FAMILY.defaults(), "bm": 192}
    repaired = FAMILY.nearest_valid(two_chunks, SHAPE, ARCH, keep=("bm",))
    assert {k: v for k, v in repaired.items() if v != two_chunks[k]} == {"bn": 128, "consumers": 3}
    assert value_distance(256, 192) < value_distance(256, 128) < value_distance(256, 64) < 1
    assert value_distance("rows", "columns") == value_distance(0, 1) == 1 and value_distance(4, 4) == 0


OFF_PITCH = [{"m": 1000, "n": 520, "k": 260}, {"m": 1000, "n": 522, "k": 264}, {"m": 2900, "n": 4700, "k": 3100}]


@pytest.mark.parametrize("shape", OFF_PITCH, ids=lambda s: "x".join(map(str, s.values())))
def test_k_or_n_off_a_16_byte_pitch_runs_at_the_padded_shape_on_the_same_grid(shape):
    """No config is refused for its K or N: the variant runs at K and N rounded up to multiples of 8, and every
    config's grid there is the one the search built (tile sizes and BK are multiples of 8: no tile is added)."""
    padded = matmul_bf16.pitch_padded(shape)
    assert padded["m"] == shape["m"] and padded["k"] % 8 == 0 and padded["n"] % 8 == 0
    assert 0 <= padded["k"] - shape["k"] < 8 and 0 <= padded["n"] - shape["n"] < 8 and padded != shape
    assert FAMILY.shape_from(**shape) == shape  # not refused
    assert_the_space_at(shape)  # the same space as at an aligned shape
    for config in valid_at(SHAPE):
        assert FAMILY.launch(config, shape, ARCH) == FAMILY.launch(config, padded, ARCH), config


def test_triton_s_tma_matmul_is_left_out_off_the_pitch_and_the_tutorial_s_kept():
    labels = [b.label for b in FAMILY.baseline_kernels(OFF_PITCH[2])]
    assert not any(label.startswith("triton-tma[") for label in labels)
    assert any(label.startswith("triton[") for label in labels) and labels[-1].startswith("torch.matmul")
    assert any(b.label.startswith("triton-tma[") for b in FAMILY.baseline_kernels(RAGGED))


class Matrix(np.ndarray):
    """A host array standing in for a device tensor: its address, as a tensor's data_ptr gives it."""

    def data_ptr(self):
        return self.ctypes.data


def _host_zeros(rows, columns, dtype):
    return np.zeros((rows, columns), dtype=np.float64).view(Matrix)


def _host_nans(rows, columns, dtype):
    """Copies made as NaN: what the copies do not write shows."""
    return np.full((rows, columns), np.nan).view(Matrix)


class PaddedProduct:
    """Stands in for the variant's launcher at the padded shape: checks the buffers' shapes, then multiplies, B's
    rows past the true K read as zeros (its tensor map's fill)."""

    def __init__(self, padded, k):
        self.padded, self.k, self.calls = padded, k, []

    def __call__(self, bufs):
        a, b, c = bufs["A"], bufs["B"], bufs["__out__"]
        m, n, k = self.padded["m"], self.padded["n"], self.padded["k"]
        assert a.shape == (m, k) and b.shape == (self.k, n) and c.shape == (m, n)
        self.calls.append((a, b, c))
        filled = np.zeros((k, n))
        filled[: self.k] = b
        c[...] = a @ filled


@pytest.mark.parametrize(
    "shape", [{"m": 37, "n": 21, "k": 13}, {"m": 37, "n": 24, "k": 13}, {"m": 37, "n": 21, "k": 16}],
    ids=["k-and-n", "k", "n"],
)  # fmt: skip
def test_the_padded_launcher_copies_in_runs_at_the_padded_shape_and_copies_c_out(shape):
    m, n, k = shape["m"], shape["n"], shape["k"]
    padded = matmul_bf16.pitch_padded(shape)
    inner = PaddedProduct(padded, k)
    launcher = matmul_bf16.PaddedLauncher(inner, shape, "bfloat16", _host_nans, pitch_copy.host_copy)
    rng = np.random.default_rng(3)
    for _ in range(2):  # new inputs each call, into copies made as NaN: the copy writes the padding's zeros
        a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
        c = np.full((m, n), np.nan)
        launcher({"A": a, "B": b, "__out__": c})
        np.testing.assert_allclose(c, a @ b, rtol=1e-12)
    a_used, b_used, c_used = inner.calls[-1]
    assert (a_used is a) == (padded["k"] == k)  # A copied only where K is off the pitch
    assert (b_used is b) == (c_used is c) == (padded["n"] == n)  # B read and C written in place where N is on it
    assert not b_used[:, n:].any() and not a_used[:, k:].any()  # the padding's zeros


def test_host_copy_copies_the_width_and_zeroes_the_rest_of_the_columns():
    src, dst = np.arange(12.0).reshape(3, 4), np.full((3, 8), np.nan)
    pitch_copy.host_copy(src, dst, 3, 3, 6)
    np.testing.assert_array_equal(dst[:, :3], src[:, :3])
    assert not dst[:, 3:6].any() and np.isnan(dst[:, 6:]).all()  # past `columns`: not written


def test_the_pitch_copy_grid_covers_every_column_and_row_within_the_launch_limits():
    span = pitch_copy.THREADS * pitch_copy.PER_THREAD
    assert pitch_copy.grid(2900, 3104) == (-(-3104 // span), 2900, 1)
    assert pitch_copy.grid(100_000, 8) == (1, pitch_copy.MAX_GRID_ROWS, 1)  # the blocks walk the rows past it
    assert pitch_copy.grid(0, 0) == (1, 1, 1)  # an empty copy still launches a legal grid
    source = (builtin_template_dir() / pitch_copy.SOURCE).read_text()
    assert f"#define THREADS {pitch_copy.THREADS}" in source and f"#define PER_THREAD {pitch_copy.PER_THREAD}" in source
    assert all(f"void __launch_bounds__(THREADS) {name}(" in source for name in pitch_copy.KERNELS.values())


def test_the_pitch_copy_kernels_compile_for_hopper_with_one_load_and_store_width_each():
    source = (builtin_template_dir() / pitch_copy.SOURCE).read_text()
    sass = build_from_cu(source, ARCH, pitch_copy.SOURCE).sass
    assert "LDG.E.U16" in sass and "STG.E.U16" in sass  # 2-byte elements: bf16, fp16
    assert re.search(r"LDG\.E(\.CONSTANT)? ", sass) and re.search(r"STG\.E ", sass)  # 4-byte: FP32 C


def test_the_family_s_launcher_pads_only_where_a_pitch_is_off(monkeypatch):
    """At an off-pitch shape the launcher encodes the padded copies' maps and passes the padded N and K; at an
    aligned one it is the variant's launcher itself."""
    monkeypatch.setattr(matmul_bf16, "Driver", Recorder)
    monkeypatch.setattr(matmul_bf16, "_torch_stream", lambda: 0x5EED)
    monkeypatch.setattr(matmul_bf16, "_torch_context", lambda: None)
    monkeypatch.setattr(matmul_bf16, "_torch_zeros", _host_zeros)
    monkeypatch.setattr(matmul_bf16, "_pitch_copier", lambda arch: SimpleNamespace(copy=pitch_copy.host_copy))
    shape = {"m": 200, "n": 131, "k": 70}
    config = FAMILY.complete({"bm": 64, "bn": 128, "consumers": 1, "epilogue": "direct"}, shape, ARCH)
    launch, job = _stand_in_job(FAMILY, config, shape)
    assert isinstance(FAMILY.launcher(job, RAGGED), TensorMapLauncher)
    launcher = FAMILY.launcher(job, shape)
    assert isinstance(launcher, matmul_bf16.PaddedLauncher)
    c = np.zeros((200, 131)).view(Matrix)
    launcher({"A": np.ones((200, 70)).view(Matrix), "B": np.ones((70, 131)).view(Matrix), "__out__": c})
    calls = launcher.inner.driver.calls
    (_, _, *rest_a), (_, _, *rest_b) = [call for call in calls if call[0] == "cuTensorMapEncodeTiled"]
    assert rest_a[2] == launcher.a.data_ptr() and rest_a[3:5] == [[72, 200], [144]]  # A: 200 rows of 72
    assert rest_b[2] == launcher.b.data_ptr() and rest_b[3:5] == [[136, 70], [272]]  # B: 70 rows of 136
    (_, geometry, _, values, _) = next(call for call in calls if call[0] == "cuLaunchKernel")
    assert values[2:] == [launcher.c.data_ptr(), 200, 136, 72] and geometry[:3] == launch.grid
    # K alone off the pitch: only A is copied; B's map is the caller's K rows (the padded k-tile's rest is its fill)
    shape = {"m": 200, "n": 136, "k": 70}
    launcher = FAMILY.launcher(job, shape)
    assert launcher.a is not None and launcher.b is None and launcher.c is None
    b, c = np.ones((70, 136)).view(Matrix), np.zeros((200, 136)).view(Matrix)
    launcher({"A": np.ones((200, 70)).view(Matrix), "B": b, "__out__": c})
    (_, _, *rest_a), (_, _, *rest_b) = [c for c in launcher.inner.driver.calls if c[0] == "cuTensorMapEncodeTiled"]
    assert rest_a[2] == launcher.a.data_ptr() and rest_b[2] == b.data_ptr() and rest_b[3:5] == [[136, 70], [272]]


def test_ragged_m_and_the_brief_s_shapes_are_valid():
    for shape in ({"m": 200, "n": 136, "k": 72}, RAGGED, {"m": 1, "n": 8, "k": 8}):
        assert FAMILY.violations(FAMILY.with_defaults({}), shape, ARCH) == []
        assert_the_space_at(shape)


def test_free_knobs_change_no_verdict():
    """raster is declared free: no value of it changes which configs are valid (persistent is not: stream_k=1
    needs persistent=1)."""
    free = [k for k in FAMILY.knobs if k.free]
    assert {k.name for k in free} == {"raster"}
    bound = [k for k in FAMILY.knobs if not k.free]
    for values in itertools.islice(itertools.product(*(k.domain for k in bound)), 0, None, 61):
        base = dict(zip((k.name for k in bound), values, strict=True))
        verdicts = {
            bool(FAMILY.violations({**base, **dict(zip((k.name for k in free), f, strict=True))}, SHAPE, ARCH))
            for f in itertools.product(*(k.domain for k in free))
        }
        assert len(verdicts) == 1, base


# --- launch geometry, tolerance, problem --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "settings", "grid"),
    [
        (SHAPE, {}, 132),  # 512 tiles, persistent: one block per SM
        (SHAPE, {"persistent": 0}, 32 * 16),
        ({"m": 200, "n": 136, "k": 72}, {}, 2),  # 2 × 1 tiles of 128 × 256
        ({"m": 300, "n": 136, "k": 72}, {"cluster": 2}, 4),  # 3 tiles, padded to whole pairs
        ({"m": 300, "n": 136, "k": 72}, {"cluster": 2, "persistent": 0}, 4),
        (SHAPE, {"cluster": 2}, 132),
        ({"m": 300, "n": 136, "k": 72}, {"cluster": 2, "multicast": 1, "persistent": 0}, 4),  # 2 pairs of rows
        ({"m": 200, "n": 520, "k": 72}, {"cluster": 2, "multicast": 1}, 6),  # 1 pair × 3 columns
        (SHAPE, {"cluster": 2, "multicast": 1, "persistent": 0}, 512),
        ({"m": 300, "n": 520, "k": 72}, {"cluster": 4, "multicast": 1, "persistent": 0}, 16),  # 2 × 2 groups of 4
        ({"m": 200, "n": 136, "k": 72}, {"cluster": 4, "multicast": 1}, 4),  # one group: three of its tiles idle
        (SHAPE, {"cluster": 4, "multicast": 1}, 120),  # the 30 groups the part holds at once (its GPCs)
        (SHAPE, {"cluster": 4, "multicast": 1, "persistent": 0}, 512),
        ({"m": 8192, "n": 8192, "k": 64}, {"bm": 64, "bn": 64, "consumers": 1}, 132),
        # transposed: bm rows along N, bn columns along M (2900 × 4704: 37 × 14 tiles of 128 × 208)
        ({"m": 2900, "n": 4704, "k": 64}, {"transposed": 1, "bn": 208, "persistent": 0}, 37 * 14),
        ({"m": 200, "n": 520, "k": 72}, {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1}, 2 * 3),
        ({"m": 200, "n": 520, "k": 72}, {"transposed": 1, "bn": 128, "cluster": 4, "multicast": 1}, 4 * 3 * 1),
        # pairs side by side: one tile row × pairs of tile columns
        ({"m": 300, "n": 520, "k": 72}, {"cluster": 2, "multicast": 1, "pairing": "beside", "persistent": 0}, 12),
        ({"m": 2900, "n": 4704, "k": 64}, {"transposed": 1, "bn": 208, **BESIDE, "persistent": 0}, 37 * 7 * 2),
    ],
)
def test_launch_geometry(shape, settings, grid):
    config = FAMILY.complete(settings, shape, ARCH)
    launch = FAMILY.launch(config, shape, ARCH)
    assert launch.grid == (grid, 1, 1)
    assert launch.grid[0] % config["cluster"] == 0 and launch.cluster == config["cluster"]
    assert launch.block == (128 * (1 + config["consumers"]), 1, 1)
    assert launch.dynamic_shared == FAMILY.shared_bytes(config)


def test_tolerances_bound_one_bf16_rounding_and_the_fp32_sums():
    for k in (8, 72, 264, 4096, 16384):
        fp32 = 2.0**-24 * max(math.sqrt(k), 16) + k * 2.0**-26
        assert FP32_OUT.tolerance_for({"m": 1, "n": 8, "k": k}) == pytest.approx(fp32)
        assert FAMILY.tolerance_for({"m": 1, "n": 8, "k": k}) == pytest.approx(2.0**-8 + fp32)
    assert FAMILY.tolerance_for(SHAPE) < 4.0e-3 + 1e-4 and FP32_OUT.tolerance_for(SHAPE) < 1e-4


def test_problem_dtypes_and_costs():
    assert FAMILY.name == "matmul-bf16" and FP32_OUT.name == "matmul-bf16-f32out"
    assert FAMILY.device_dtype("A") == FAMILY.device_dtype("B") == "bfloat16"
    assert FAMILY.device_dtype("__out__") == "bfloat16" and FP32_OUT.device_dtype("__out__") == "float32"
    m, n, k = RAGGED.values()
    assert FAMILY.bytes_moved(RAGGED) == 2 * (m * k + k * n + m * n)
    assert FP32_OUT.bytes_moved(RAGGED) == 2 * (m * k + k * n) + 4 * m * n
    assert FAMILY.flops(RAGGED) == 2 * m * n * k
    assert FAMILY.output_shape(RAGGED) == (m, n)
    assert [s.ctype for s in FAMILY.scalar_declarations(RAGGED)] == ["int"] * 3
    with pytest.raises(ConfigError, match="not bfloat16 or float32"):
        matmul_bf16.MatmulBF16("float16")


def test_baselines_are_the_tutorial_configs_for_two_byte_inputs_and_cublas():
    baselines = FAMILY.baseline_kernels(SHAPE)
    assert [b.kind for b in baselines].count("torch") == 1 and baselines[-1].label == "torch.matmul (cuBLAS BF16)"
    triton = [b for b in baselines if b.kind == "triton"]
    assert triton and triton[0].config["BLOCK_K"] == 64 and all(b.config["BLOCK_K"] >= 32 for b in triton)
    assert FP32_OUT.baseline_kernels(SHAPE)[-1].label == "torch.mm (cuBLAS BF16→FP32)"


def test_the_parameter_check_wants_the_epilogue_s_tensor_maps_a_pointer_and_three_ints(covered):
    variant = next(v for c, v, _ in covered if c["epilogue"] == "direct")
    FAMILY.check_parameters(variant.artifact.ptx, SHAPE)  # as built
    FAMILY.check_parameters(variant.artifact.ptx, SHAPE, maps=2)
    pointers_only = variant.artifact.ptx.replace(".param .align 64 .b8 matmul_bf16_param_1[128]", ".param .u64 x")
    assert pointers_only != variant.artifact.ptx
    with pytest.raises(ConfigError, match="two or three 128-byte tensor maps"):
        FAMILY.check_parameters(pointers_only, SHAPE)
    with pytest.raises(ConfigError, match="passes three 128-byte tensor maps"):
        FAMILY.check_parameters(variant.artifact.ptx, SHAPE, maps=3)  # a direct kernel where tma's launcher runs
    tma = next(v for c, v, _ in covered if c["epilogue"] == "tma")
    FAMILY.check_parameters(tma.artifact.ptx, SHAPE, maps=3)
    with pytest.raises(ConfigError, match="passes two 128-byte tensor maps"):
        FAMILY.check_parameters(tma.artifact.ptx, SHAPE, maps=2)


# --- the launcher, with a stand-in driver --------------------------------------------------------------------------


def test_enum_values_match_the_driver_bindings():
    driver = pytest.importorskip("cuda.bindings.driver")
    assert matmul_bf16.TENSOR_MAP_BFLOAT16 == driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert matmul_bf16.TENSOR_MAP_FLOAT32 == driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    assert matmul_bf16.TENSOR_MAP_SWIZZLE_128B == driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert matmul_bf16.TENSOR_MAP_INTERLEAVE_NONE == driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert matmul_bf16.TENSOR_MAP_L2_PROMOTION_256B == driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B
    assert matmul_bf16.TENSOR_MAP_OOB_FILL_NONE == driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    assert (
        matmul_bf16.FUNC_MAX_DYNAMIC_SHARED
        == driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    )
    assert matmul_bf16.DEVICE_MULTIPROCESSOR_COUNT == driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT


def _stand_in_job(family, config, shape):
    """(the config's launch, a job as the harness hands a launcher: the config's geometry, a stand-in cubin)."""
    launch = family.launch(config, shape, ARCH)
    job = SimpleNamespace(
        kind="variant", config=config, cubin=b"\x7fELF-stand-in", kernel_name="matmul_bf16",
        grid=launch.grid, block=launch.block, dynamic_shared=launch.dynamic_shared,
    )  # fmt: skip
    return launch, job


class Recorder(Driver):
    """Records each driver call with what its arguments point at, and succeeds."""

    def __init__(self, resident_clusters=30, sms=132):
        """`resident_clusters`: what cuOccupancyMaxActiveClusters answers (an H100 SXM's 2 × 2 clusters: 30);
        `sms`: the device's multiprocessor count."""
        super().__init__(lib=object())
        self.calls = []
        self.resident_clusters, self.sms = resident_clusters, sms

    def call(self, name, *args):
        if name == "cuTensorMapEncodeTiled":
            target, dtype, rank, address, dims, strides, box, element_strides, *modes = args
            self.calls.append(
                (name, target.value, dtype, rank, address.value, list(dims), list(strides), list(box),
                 list(element_strides), modes)
            )  # fmt: skip
        elif name == "cuLaunchKernel":
            _, *geometry, stream, params, extra = args
            maps = len(params) - 4  # the tensor maps' addresses, then C's pointer and M, N, K
            values = [
                *params[:maps],
                ctypes.c_uint64.from_address(params[maps]).value,
                *(ctypes.c_int.from_address(p).value for p in params[maps + 1 :]),
            ]
            self.calls.append((name, tuple(geometry), stream.value, values, extra))
        elif name == "cuModuleGetFunction":
            self.calls.append((name, args[2]))
        elif name == "cuDeviceGetAttribute":
            count, attribute, _ = args
            count._obj.value = self.sms if attribute == matmul_bf16.DEVICE_MULTIPROCESSOR_COUNT else 0
            self.calls.append((name, attribute))
        elif name == "cuFuncSetAttribute":
            self.calls.append((name, args[1], args[2]))
        elif name == "cuOccupancyMaxActiveClusters":
            count, _, config = args
            count._obj.value = self.resident_clusters
            c = config._obj
            self.calls.append((name, tuple(c.grid), tuple(c.block), c.shared_bytes, c.attr_count))
        else:
            self.calls.append((name,))


class Buffer:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def test_the_launcher_encodes_both_tensor_maps_once_per_buffer_set_and_packs_the_parameters():
    shape = RAGGED
    config = FAMILY.complete({"bm": 64, "bn": 128, "consumers": 1, "epilogue": "direct"}, shape, ARCH)
    launch, job = _stand_in_job(FAMILY, config, shape)
    driver = Recorder()
    launcher = TensorMapLauncher(job, shape, driver, lambda: 0x5EED, lambda: None)
    assert [c[0] for c in driver.calls] == ["cuInit", "cuModuleLoadData", "cuModuleGetFunction", "cuFuncSetAttribute"]
    assert driver.calls[2] == ("cuModuleGetFunction", b"matmul_bf16")
    assert driver.calls[3] == ("cuFuncSetAttribute", 8, launch.dynamic_shared)
    driver.calls.clear()

    a, b, c = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000
    bufs = {"A": Buffer(a), "B": Buffer(b), "__out__": Buffer(c)}
    launcher(bufs)
    launcher(bufs)  # the same buffers: encoded once
    encodes = [call for call in driver.calls if call[0] == "cuTensorMapEncodeTiled"]
    launches = [call for call in driver.calls if call[0] == "cuLaunchKernel"]
    assert len(encodes) == 2 and len(launches) == 2
    m, n, k = shape["m"], shape["n"], shape["k"]
    modes = [0, 3, 3, 0]  # no interleave, 128-byte swizzle, 256-byte L2 promotion, zero fill
    (_, map_a, *rest_a), (_, map_b, *rest_b) = encodes
    assert rest_a == [9, 2, a, [k, m], [2 * k], [64, 64], [1, 1], modes]  # bf16, 2-D; boxes 64 wide × bm rows
    assert rest_b == [9, 2, b, [n, k], [2 * n], [64, 64], [1, 1], modes]  # boxes 64 × 64
    assert map_a % 64 == 0 and map_b == map_a + 128
    _, geometry, stream, values, extra = launches[0]
    assert geometry == (*launch.grid, *launch.block, launch.dynamic_shared) and stream == 0x5EED and extra is None
    assert values == [map_a, map_b, c, m, n, k]

    other = {"A": Buffer(a + 256), "B": Buffer(b), "__out__": Buffer(c)}
    launcher(other)
    assert sum(call[0] == "cuTensorMapEncodeTiled" for call in driver.calls) == 4
    with pytest.raises(ConfigError, match="not 16-byte aligned"):
        launcher({"A": Buffer(a + 8), "B": Buffer(b), "__out__": Buffer(c)})


def _launched(config, shape, driver=None):
    """(driver calls at the launcher's making, A's box, the grid launched, the launcher) for `config` through a
    recording driver (an H100 SXM's answers unless `driver` is given); a stream-K launcher's workspace slots are
    kept in its `slots`."""
    _, job = _stand_in_job(FAMILY, config, shape)
    driver = driver or Recorder()
    slots = []

    def allocate(count, floats):
        slots.append(count)
        return Buffer(0x7E0000000000), Buffer(0x7E0001000000)

    launcher = TensorMapLauncher(job, shape, driver, lambda: 0x5EED, lambda: None, allocate=allocate)
    launcher.slots = slots
    made = list(driver.calls)
    launcher({"A": Buffer(0x7F0000000000), "B": Buffer(0x7F0000100000), "__out__": Buffer(0x7F0000200000)})
    box_a = next(call for call in driver.calls if call[0] == "cuTensorMapEncodeTiled")[7]
    geometry = next(call for call in driver.calls if call[0] == "cuLaunchKernel")[1]
    assert geometry[:3] == launcher.grid  # what the launcher says it launches, a measurement keeps
    return made, box_a, geometry[0], launcher


def test_a_quad_copies_half_of_a_s_rows_and_launches_no_more_clusters_than_are_resident():
    """In a 2 × 2 cluster each block of a tile row copies half of A's k-tile (A's box: bm / 2 rows). A persistent
    grid of quads is planned on the 120 blocks an H100 SXM holds at once in them (30 clusters), and launched on what
    the device's driver answers: 120 there, 128 where 32 clusters fit (never past one block per SM), 112 where 28
    do, so that no cluster waits for another to finish and no SM a cluster could use idles (stream-K's too, its
    workspace made for the grid launched); pairs fill all 132.
    Every launcher in clusters keeps the driver's count of its resident blocks; one grid of a block per tile is not
    cut."""
    quad = FAMILY.complete({"cluster": 4, "multicast": 1}, SHAPE, ARCH)
    assert FAMILY.work_blocks(quad, SHAPE) > 132 and FAMILY.launch(quad, SHAPE, ARCH).grid[0] == 120
    made, box_a, blocks, launcher = _launched(quad, SHAPE)
    assert box_a == [64, quad["bm"] // 2] and blocks == launcher.resident_blocks == 120
    asked = [call for call in made if call[0] == "cuOccupancyMaxActiveClusters"]
    assert asked == [("cuOccupancyMaxActiveClusters", (120, 1, 1), (384, 1, 1), FAMILY.shared_bytes(quad), 0)]
    assert _launched(quad, SHAPE, Recorder(resident_clusters=32))[2] == 128  # grown to the device's
    assert _launched(quad, SHAPE, Recorder(resident_clusters=40))[2] == 132  # one block per SM at most
    assert _launched(quad, SHAPE, Recorder(resident_clusters=40, sms=0))[2] == 120  # SMs unknown: the plan
    assert _launched(quad, SHAPE, Recorder(resident_clusters=28))[2] == 112
    stream_k = FAMILY.complete({"cluster": 4, "multicast": 1, "stream_k": 1}, SHAPE, ARCH)
    assert FAMILY.launch(stream_k, SHAPE, ARCH).grid[0] == 120
    *_, blocks, launcher = _launched(stream_k, SHAPE, Recorder(resident_clusters=32))
    assert blocks == 128 and launcher.slots == [128]  # grown too, its workspace a slot a block launched
    pair = FAMILY.complete({"cluster": 2, "multicast": 1}, SHAPE, ARCH)
    assert FAMILY.launch(pair, SHAPE, ARCH).grid[0] == 132
    made, box_a, blocks, launcher = _launched(pair, SHAPE, Recorder(resident_clusters=66))
    assert box_a == [64, pair["bm"]] and blocks == launcher.resident_blocks == 132
    assert _launched(pair, SHAPE, Recorder(resident_clusters=60))[2] == 120  # the same cap for pairs
    per_tile = FAMILY.complete({"cluster": 4, "multicast": 1, "persistent": 0}, SHAPE, ARCH)
    made, _, blocks, launcher = _launched(per_tile, SHAPE)
    assert any(call[0] == "cuOccupancyMaxActiveClusters" for call in made)
    assert blocks == FAMILY.launch(per_tile, SHAPE, ARCH).grid[0] == FAMILY.work_blocks(per_tile, SHAPE) > 120
    assert launcher.resident_blocks == 120
    made, _, blocks, launcher = _launched(FAMILY.complete({}, SHAPE, ARCH), SHAPE)  # no cluster: nothing asked
    assert not any(call[0] == "cuOccupancyMaxActiveClusters" for call in made)
    assert blocks == 132 and launcher.resident_blocks is None


def test_the_transposed_kernel_counts_its_tiles_along_n_and_m():
    """Transposed, the tile's bm rows run along C's N and its bn columns along C's M: tiles, a multicast cluster's
    block slots, explain's and the time model's share of tile area inside C, and the stage (bn whole rows of A, not
    rounded to 64-column boxes) all follow."""
    shape = {"m": 2900, "n": 4704, "k": 3104}
    config = FAMILY.complete({"transposed": 1, "bn": 208}, shape, ARCH)
    assert tile_extents(config, shape) == (4704, 2900)
    assert FAMILY.tiles(config, shape) == 37 * 14 == 518
    assert FAMILY.work_units(config, shape) == (518, "tiles")
    pair = {**config, "cluster": 2, "multicast": 1}
    assert FAMILY.cluster_blocks(pair, shape) == 19 * 14 * 2  # pairs of tile rows along N
    quad = {**config, "cluster": 4, "multicast": 1}
    assert FAMILY.cluster_blocks(quad, shape) == 19 * 7 * 4
    inside = tile_area_inside(config, shape)
    assert inside == pytest.approx(2900 * 4704 / (37 * 128 * 14 * 208))
    # explain's count where no family code serves a record, and the time model's work features, in that orientation
    assert output_tiles(config, shape) == 518 and output_tiles({**config, "transposed": 0}, shape) == 23 * 23
    features = work_features(Problem(FAMILY, shape, ARCH), config, 132)
    assert features == {"work_waves": 518 / 132, "work_last_wave_share": 518 / 528, "tile_area_inside": inside}
    assert tile_area_inside({**config, "transposed": 0}, shape) == pytest.approx(2900 * 4704 / (23 * 128 * 23 * 208))
    plain = {**config, "transposed": 0}
    assert FAMILY.shared_bytes(plain) - FAMILY.shared_bytes(config) == 4 * (256 - 208) * 64 * 2


def test_pairs_beside_each_other_share_the_tile_row_s_operand():
    """pairing=beside lays a multicast pair's tiles side by side: the clusters count pairs of tile columns, A's
    map carries half of the tile's rows (transposed=1: A's rows are the tile's columns, whole, and B's boxes are
    what the pair shares), and the knob is refused in a sentence outside a multicast pair."""
    shape = {"m": 2900, "n": 4704, "k": 3104}
    config = FAMILY.complete({"transposed": 1, "bn": 208, **BESIDE}, shape, ARCH)
    assert FAMILY.cluster_blocks(config, shape) == 37 * 7 * 2
    assert FAMILY.work_units(config, shape) == (518, "tiles in clusters of 2")
    assert FAMILY.a_box_rows(config) == 208
    plain = FAMILY.complete({"bn": 224, **BESIDE}, SHAPE, ARCH)
    assert FAMILY.a_box_rows(plain) == 64 and FAMILY.cluster_blocks(plain, SHAPE) == 32 * 10 * 2  # 19 tile columns
    _, box_a, _, _ = _launched(plain, SHAPE)
    assert box_a == [64, 64]
    for settings in ({"pairing": "beside"}, {"pairing": "beside", "cluster": 2}, {**BESIDE, "cluster": 4}):
        problems = FAMILY.violations(FAMILY.with_defaults(settings), SHAPE, ARCH)
        assert any("pairing=beside lays out a multicast pair's tiles" in p for p in problems), settings


def test_the_transposed_kernel_boxes_a_by_its_columns_and_refuses_fp32_chunks():
    """A's map carries the tile's columns (bn rows of A, half of them where a pair or a quad's tile column shares
    A), and stmatrix .trans moves 2-byte elements only: an FP32 C with epilogue=tma is refused in a sentence."""
    for settings, rows in (
        ({"transposed": 1, "bn": 208}, 208),
        ({"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1}, 104),
        ({"transposed": 1, "bn": 160, "cluster": 4, "multicast": 1}, 80),
        ({"transposed": 1, "bn": 208, "cluster": 2}, 208),
    ):
        config = FAMILY.complete(settings, SHAPE, ARCH)
        assert FAMILY.a_box_rows(config) == rows
        _, box_a, _, _ = _launched(config, SHAPE)
        assert box_a == [64, rows]
    config = FP32_OUT.with_defaults({"transposed": 1})
    assert any("stmatrix .trans" in p for p in FP32_OUT.violations(config, SHAPE, ARCH))
    assert FP32_OUT.complete({"transposed": 1}, SHAPE, ARCH)["epilogue"] == "direct"
    assert FAMILY.violations(FAMILY.with_defaults({"transposed": 1}), SHAPE, ARCH) == []


def test_the_box_of_a_follows_bm():
    fields = matmul_bf16.tensor_map_fields(rows=1000, columns=264, box_rows=256)
    assert fields["dims"] == (264, 1000) and fields["strides"] == (528,) and fields["box"] == (64, 256)


def test_an_fp32_map_holds_32_columns_per_swizzled_row():
    fields = matmul_bf16.tensor_map_fields(rows=1000, columns=520, box_rows=64, dtype="float32")
    assert fields["dims"] == (520, 1000) and fields["strides"] == (2080,) and fields["box"] == (32, 64)
    assert fields["dtype"] == 7 and fields["swizzle"] == 3
    assert matmul_bf16.tensor_map_fields(rows=8, columns=8, box_rows=8, dtype="float16")["dtype"] == 6
    with pytest.raises(ConfigError, match="not 'float64'"):
        matmul_bf16.tensor_map_fields(rows=8, columns=8, box_rows=8, dtype="float64")


@pytest.mark.parametrize("family", [FAMILY, FP32_OUT], ids=["bf16", "fp32"])
def test_the_tma_launcher_encodes_c_s_map_and_passes_seven_parameters(family, monkeypatch):
    """The family's own launcher (its driver, stream and context stood in for) encodes C's map in C's dtype."""
    monkeypatch.setattr(matmul_bf16, "Driver", Recorder)
    monkeypatch.setattr(matmul_bf16, "_torch_stream", lambda: 0x5EED)
    monkeypatch.setattr(matmul_bf16, "_torch_context", lambda: None)
    shape = RAGGED
    config = family.complete({"bm": 128, "bn": 128, "consumers": 2, "epilogue": "tma"}, shape, ARCH)
    launch, job = _stand_in_job(family, config, shape)
    launcher = family.launcher(job, shape)
    assert isinstance(launcher, TensorMapLauncher) and launcher.out_dtype == family.out_dtype
    driver = launcher.driver
    assert ("cuFuncSetAttribute", 8, FAMILY.shared_bytes(config)) in driver.calls
    driver.calls.clear()

    a, b, c = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000
    bufs = {"A": Buffer(a), "B": Buffer(b), "__out__": Buffer(c)}
    launcher(bufs)
    launcher(bufs)  # the same buffers: encoded once
    encodes = [call for call in driver.calls if call[0] == "cuTensorMapEncodeTiled"]
    launches = [call for call in driver.calls if call[0] == "cuLaunchKernel"]
    assert len(encodes) == 3 and len(launches) == 2
    m, n, k = shape["m"], shape["n"], shape["k"]
    modes = [0, 3, 3, 0]  # no interleave, 128-byte swizzle (the staging chunk's), 256-byte L2 promotion, zero fill
    (_, map_a, *rest_a), (_, map_b, *rest_b), (_, map_c, *rest_c) = encodes
    assert rest_a == [9, 2, a, [k, m], [2 * k], [64, 128], [1, 1], modes]
    assert rest_b == [9, 2, b, [n, k], [2 * n], [64, 64], [1, 1], modes]
    if family is FAMILY:  # C: M rows of N bf16, boxes of 64 columns × 64 rows (one 8 KB chunk)
        assert rest_c == [9, 2, c, [n, m], [2 * n], [64, 64], [1, 1], modes]
    else:  # FP32: 32 columns make the chunk's 128-byte row
        assert rest_c == [7, 2, c, [n, m], [4 * n], [32, 64], [1, 1], modes]
    assert map_a % 64 == 0 and map_b == map_a + 128 and map_c == map_a + 256
    _, geometry, stream, values, extra = launches[0]
    assert geometry == (*launch.grid, *launch.block, launch.dynamic_shared) and stream == 0x5EED and extra is None
    assert values == [map_a, map_b, map_c, c, m, n, k]  # 7 parameters, as the tma kernel declares them

    launcher({"A": Buffer(a), "B": Buffer(b), "__out__": Buffer(c + 4096)})  # a new C: all three maps again
    assert sum(call[0] == "cuTensorMapEncodeTiled" for call in driver.calls) == 6
    with pytest.raises(ConfigError, match=r"C at 0x\w+ is not 16-byte aligned"):
        launcher({"A": Buffer(a), "B": Buffer(b), "__out__": Buffer(c + 4)})


# --- the command line ------------------------------------------------------------------------------------------------


def test_space_lists_the_knobs_and_constraints():
    out = CliRunner().invoke(cli, ["space", FILE, "--arch", ARCH, "--shape", "m=1000,n=520,k=264", "--wide"])
    assert out.exit_code == 0, out.output
    assert "matmul-bf16" in out.output and "consumers" in out.output and "sm_90a only" in out.output
    # an estimate (3.2 million combinations: --exact takes a minute), whose interval holds the count (test below)
    assert "about " in out.output and "--exact counts them all" in out.output
    refused = CliRunner().invoke(cli, ["space", FILE, "--arch", "sm_90", "--shape", "m=1000,n=520,k=264"])
    # refused (exit 2 from the command line), not counted as "about 0"
    assert isinstance(refused.exception, ConfigError) and "valid configs" not in refused.output
    assert "on sm_90: wgmma and setmaxnreg run on sm_90a only" in str(refused.exception)


@pytest.mark.parametrize("command", ["space", "render", "census"])
def test_without_arch_the_commands_take_the_family_s_target(command):
    """--arch left at its default (sm_90) means the family's own target there, sm_90a, as a search on an H100 or H200
    builds it; --arch sm_90 given is taken as it is (space and census refuse it, above)."""
    out = CliRunner().invoke(cli, [command, FILE, "--shape", "m=1000,n=520,k=264"])
    assert out.exit_code == 0, out.output
    first = out.output.splitlines()[0]
    if command == "space":
        # the space is big enough to be estimated: the exact count lies within its interval
        low, high = re.search(r"95%: ([\d.]+)\s+to\s+([\d.]+)\s+thousand", out.output).groups()
        assert "sm_90a)" in first and float(low) * 1000 <= len(valid_at(SHAPE)) <= float(high) * 1000
    elif command == "render":
        assert first.endswith(" sm_90a") and "wgmma.mma_async" in out.output
    else:
        assert re.search(r"arch\s+sm_90a", out.output) and "HGMMA.64x256x16.F32.BF16" in out.output


def test_census_of_a_variant_on_the_command_line():
    args = ["census", FILE, "--arch", ARCH, "--shape", "m=1000,n=520,k=264", "--set", "bm=64", "--set", "consumers=1"]
    out = CliRunner().invoke(cli, [*args, "--set", "bn=128", "--wide"])
    assert out.exit_code == 0, out.output
    assert "HGMMA.64x128x16.F32.BF16 4" in out.output and "inc 240, dec 40" in out.output
    assert re.search(r"SASS bulk copies\s+load 3", out.output)
    refused = CliRunner().invoke(cli, ["census", FILE, "--arch", "sm_90", "--shape", "m=1000,n=520,k=264"])
    assert isinstance(refused.exception, ConfigError) and "sm_90a only" in str(refused.exception)


def test_a_launcher_keeps_a_bounded_number_of_parameter_lists():
    """An operator called on ever new buffers: the launcher's parameter lists stay at ARGUMENT_SETS, oldest out."""
    from mage_tune.kernels.matmul_bf16 import ARGUMENT_SETS, forget_oldest

    kept: dict = {}
    for address in range(3 * ARGUMENT_SETS):
        forget_oldest(kept)
        kept[address] = address
    assert list(kept) == list(range(2 * ARGUMENT_SETS, 3 * ARGUMENT_SETS))


def test_a_cluster_of_two_without_multicast_is_a_run_of_its_own():
    """cluster=2 without multicast compiles to cluster=1's instructions (the cluster shape is a cubin attribute, not
    SASS), yet runs its blocks in pairs: the search's duplicate check must not take one for the other."""
    from mage_tune.search.runner import run_key

    single, pair = build_all(
        FAMILY, SHAPE, ARCH, _configs(FAMILY, [{"cluster": 1}, {"cluster": 2}]), lambda e: pytest.fail(str(e))
    )
    census = [census_variant(v) for v in (single, pair)]
    assert census[0].cluster is None and census[1].cluster.dims == (2, 1, 1)
    sass = [v.artifact.sass for v in (single, pair)]
    keys = [run_key("same", v, c) for v, c in zip((single, pair), census, strict=True)]
    assert keys[0] != keys[1], (sass[0] == sass[1], keys)


# --- FP16 inputs (matmul-f16): the same kernels on another 2-byte type ----------------------------------------------


def test_the_fp16_family_is_the_same_space_on_fp16_types():
    assert F16.name == "matmul-f16" and load_family("matmul-f16") is F16 and F16.tuned_as == "matmul-bf16"
    assert F16.device_dtype("A") == F16.device_dtype("B") == F16.device_dtype("__out__") == "float16"
    assert_the_space_at(SHAPE, F16)
    for k in (8, 264, 4096):  # one FP16 rounding of the output instead of a BF16 one
        shape = {"m": 1, "n": 8, "k": k}
        assert F16.tolerance_for(shape) == pytest.approx(FP32_OUT.tolerance_for(shape) + 2.0**-11)
    assert F16.baseline_kernels(RAGGED)[-1].label == "torch.matmul (cuBLAS FP16)"
    with pytest.raises(ConfigError, match="output dtype 'bfloat16' is not float16 or float32"):
        matmul_bf16.MatmulBF16("bfloat16", "float16")


@pytest.mark.parametrize(
    "settings", [{}, {"epilogue": "direct"}, {"cluster": 4, "multicast": 1}], ids=["tma", "direct", "quad"]
)
def test_fp16_variants_run_wgmma_on_f16_and_store_fp16(settings):
    """The source multiplies .f16 by .f16 into .f32 and converts pairs by cvt.rn.f16x2.f32; the SASS holds HGMMA on
    FP16 (ptxas names no input type for it, where it names BF16) as many times as the bf16 variant's, with the same
    tensor copies."""
    config = F16.complete(settings, SHAPE, ARCH)
    variant = F16.build(config, SHAPE, ARCH)
    assert "cvt.rn.f16x2.f32" in variant.source and ".bf16" not in variant.source  # the kernel keeps its name
    census = census_variant(variant)
    bf16 = census_variant(FAMILY.build(FAMILY.complete(settings, SHAPE, ARCH), SHAPE, ARCH))
    steps = 4 * FAMILY.m_sub(config)
    assert census.ptx.matrix_shapes == {f"wgmma.m64n{config['bn']}k16.f32.f16.f16": steps}
    assert census.sass.matrix_shapes == {f"HGMMA.64x{config['bn']}x16.F32": steps}
    assert bf16.sass.matrix_shapes == {f"HGMMA.64x{config['bn']}x16.F32.BF16": steps}
    assert census.sass.bulk == bf16.sass.bulk and census.ptx.bulk == bf16.ptx.bulk


def test_the_fp16_launcher_encodes_fp16_maps(monkeypatch):
    monkeypatch.setattr(matmul_bf16, "Driver", Recorder)
    monkeypatch.setattr(matmul_bf16, "_torch_stream", lambda: 0x5EED)
    monkeypatch.setattr(matmul_bf16, "_torch_context", lambda: None)
    config = F16.complete({"epilogue": "tma"}, RAGGED, ARCH)
    _, job = _stand_in_job(F16, config, RAGGED)
    launcher = F16.launcher(job, RAGGED)
    launcher({"A": Buffer(0x7F0000000000), "B": Buffer(0x7F0000100000), "__out__": Buffer(0x7F0000200000)})
    encodes = [call for call in launcher.driver.calls if call[0] == "cuTensorMapEncodeTiled"]
    assert [call[2] for call in encodes] == [6, 6, 6]  # FLOAT16 for A, B and C


def test_fp16_enum_value_matches_the_driver_bindings():
    driver = pytest.importorskip("cuda.bindings.driver")
    assert matmul_bf16.TENSOR_MAP_FLOAT16 == driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16


def test_one_staging_chunk_is_written_once_the_last_store_has_read_it(covered):
    """staging=1: per chunk the issuing thread's wait for the previous store's read and a first barrier come before
    the chunk is written, a second barrier before its store (two named barriers per chunk, where two chunks take
    one); 8 KB of staging per consumer warpgroup, which leaves the fifth stage of a 128 × 192 quad its room."""
    ones = [(c, v, census) for c, v, census in covered if c["staging"] == 1 and c["split"] == "rows"]
    ones = [(c, v, census) for c, v, census in ones if not c["stream_k"] and not c["stagger"]]
    # a 128 × 192 quad, a 64-row ping-pong tile, three consumers' 192 × 192 pair, a transposed 256 × 144 pair (two
    # whole chunks an m64 tile, its last 16 columns from registers)
    assert len(ones) == 4
    for config, variant, census in ones:
        chunks, label = FAMILY.m_sub(config) * config["bn"] // 64, variant.label  # 64 bf16 columns a chunk
        assert census.sass.bulk["store"] == census.ptx.bulk["store"] == chunks, label
        assert census.sass.bulk_waits == census.ptx.bulk_waits == (0,) * (chunks + 1), label  # reads, then the end
        assert census.ptx.memory_fences.get("fence.proxy.async.shared::cta") == chunks, label
        # two chunks each: with three consumers, room for three stages only
        two = FAMILY.with_defaults({**config, "staging": 2, "stages": 3 if config["consumers"] == 3 else 4})
        if FAMILY.violations(two, SHAPE, ARCH):  # 256 × 144: room for three stages beside two chunks
            two = {**two, "stages": 3}
        two_census = census_variant(FAMILY.build(two, SHAPE, ARCH))
        assert census.sass.barriers == census.ptx.barriers == two_census.ptx.barriers + chunks, label
        for source, first in ((variant.source, "store_wait_read();"), (FAMILY.render(two, SHAPE), "stage_chunk(chunk")):
            loop = source[source.index("const unsigned chunk = my_staging") :]  # the epilogue's loop over chunks
            other = ({"store_wait_read();", "stage_chunk(chunk"} - {first}).pop()
            assert loop.index(first) < loop.index(other), label  # one chunk: the wait before the writes
        assert FAMILY.staging_bytes(config) == config["consumers"] * 8192 == FAMILY.staging_bytes(two) // 2, label
    quad = next(c for c, _, _ in ones if c["cluster"] == 4)
    assert quad["stages"] == 5 and FAMILY.shared_bytes(quad) <= ARCH.smem_per_block_optin
    assert FAMILY.violations({**quad, "staging": 2}, SHAPE, ARCH)  # two chunks leave no room for a fifth stage
    with pytest.raises(ConfigError, match="staging=1 counts epilogue=tma's chunks of C: it needs epilogue=tma"):
        FAMILY.check_valid({**quad, "epilogue": "direct"}, SHAPE, ARCH)


def test_four_staging_chunks_wait_for_the_store_three_chunks_back(covered):
    """staging=4: the chunks taken in turn, each chunk's wait before its barrier lets the latest two stores read on
    (cp.async.bulk.wait_group.read 2: the chunk the next one overwrites was read by the store three chunks back),
    one named barrier a chunk as with two, and 32 KB of staging per consumer warpgroup, which costs 128 × 256 its
    fourth stage."""
    fours = [(c, v, census) for c, v, census in covered if c["staging"] == 4]
    assert len(fours) == 5
    for config, variant, census in fours:
        chunks, label = FAMILY.m_sub(config) * config["bn"] // 64, variant.label  # 64 bf16 columns a chunk
        assert census.sass.bulk["store"] == census.ptx.bulk["store"] == chunks, label
        assert census.ptx.bulk_waits == (2,) * chunks + (0,), label  # the reads, then the block's end
        assert re.findall(r"cp\.async\.bulk\.wait_group\.read (\d+)", variant.artifact.ptx) == ["2"] * chunks, label
        two = FAMILY.with_defaults({**config, "staging": 2})
        assert census.ptx.barriers == census_variant(FAMILY.build(two, SHAPE, ARCH)).ptx.barriers, label
        assert FAMILY.staging_bytes(config) == config["consumers"] * 4 * 8192 == 2 * FAMILY.staging_bytes(two), label
        source = variant.source[variant.source.index("const unsigned chunk = my_staging") :]
        assert source.index("stage_chunk(chunk") < source.index("store_wait_read();"), label  # the writes first
    wide = FAMILY.with_defaults({"bn": 256, "staging": 4})
    assert FAMILY.violations(wide, SHAPE, ARCH) and not FAMILY.violations({**wide, "stages": 3}, SHAPE, ARCH)


def test_a_staggered_second_consumer_waits_once_for_the_first_s_arrival(covered):
    """stagger > 0: consumer 0 arrives at named barrier CONSUMERS + 2 once it has issued its first tile's k-tile
    stagger - 1 (its last where K is shorter), consumer 1 waits there before its first k-tile: one bar.arrive and one
    bar.sync of 256 threads more than the same config without it, and nothing else changed in the census."""
    staggered = [(c, v, census) for c, v, census in covered if c["stagger"]]
    assert {c["stagger"] for c, _, _ in staggered} == {1, 2, 3}
    assert {c["split"] for c, _, _ in staggered} == {"rows", "columns"}
    for config, variant, census in staggered:
        label = variant.label
        together = FAMILY.with_defaults({**config, "stagger": 0})
        twin = census_variant(FAMILY.build(together, SHAPE, ARCH))
        assert census.sass.barriers == census.ptx.barriers == twin.ptx.barriers + 2, label
        named = sorted(re.findall(r"bar\.(?:arrive|sync) 4, 256;", variant.artifact.ptx))
        assert named == ["bar.arrive 4, 256;", "bar.sync 4, 256;"], label
        assert len(re.findall(r"BAR\.ARV 0x4, 0x100", variant.artifact.sass)) == 1, label
        assert len(re.findall(r"BAR\.SYNC\S* 0x4, 0x100", variant.artifact.sass)) == 1, label
        same = ("bulk", "wgmma_commits", "wgmma_waits", "cluster_barriers", "local_loads", "local_stores")
        for field in same:
            assert getattr(census.sass, field) == getattr(twin.sass, field), (label, field)
        assert census.ptx.mbarrier == twin.ptx.mbarrier, label  # (ptxas may lay out a wait loop once more or less)
        loop = variant.source[variant.source.index("for (int kt = 0; kt < k_tiles; ++kt)") :]
        assert loop.index("stagger_wait()") < loop.index("wait_parity(full") < loop.index("wgmma_commit();")
        assert loop.index("wgmma_commit();") < loop.index("stagger_arrive()") < loop.index("wgmma_wait<1>();")
        assert "consumer == 0 ? min(STAGGER, k_tiles) - 1 : -1" in variant.source, label
        assert not re.search(r"STAGGER|stagger_", FAMILY.render(together, SHAPE)), label  # stagger=0: none of it


@pytest.mark.parametrize(
    "settings, refused",
    [
        ({"schedule": "pingpong", "bm": 64, "stagger": 1}, "schedule=pingpong"),
        ({"consumers": 1, "bn": 128, "stagger": 1}, "consumers=1"),
        ({"persistent": 0, "stagger": 1}, "persistent=0"),
        ({"stream_k": 1, "stagger": 2}, "stream_k=1"),
        ({"stages": 4, "stagger": 3}, "stagger <= stages - 2 = 2"),
        ({"stages": 2, "bn": 128, "stagger": 1}, "stagger <= stages - 2 = 0"),
    ],
)
def test_stagger_is_refused_where_two_cooperative_consumers_do_not_walk_a_ring_of_tiles(settings, refused):
    config = FAMILY.with_defaults(settings)
    problems = FAMILY.violations(config, SHAPE, ARCH)
    assert any(refused in p and f"stagger={settings['stagger']}" in p for p in problems), problems
    with pytest.raises(ConfigError, match="stagger"):
        FAMILY.complete(config, SHAPE, ARCH)
