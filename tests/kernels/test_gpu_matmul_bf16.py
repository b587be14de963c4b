"""The Hopper BF16 matmul family on a GPU (sm_90a): every knob value checked against the float64 reference at ragged
shapes, through the harness (its own tensor maps and launch, in the worker process), beside cuBLAS; both output
dtypes, and FP16 inputs (matmul-f16); both epilogues (the TMA-store one on its own too, where it is new); multicast
pairs, an odd last row of tiles among them; 2 × 2 clusters sharing A and B, with odd last rows and columns of tiles;
persistent blocks that walk many tiles and lap the stage ring; shapes under one box; K or N off a tensor map's
16-byte pitch (run on padded copies); repeated launches bit-identical; Triton's persistent TMA matmul (a baseline)
at every config at ragged shapes; and a timed run beside both Triton matmuls and cuBLAS, which also shows that a CUDA
graph captures the family's own launches. Skipped where no CUDA device is present; what holds without one is
tests/kernels/test_matmul_bf16_family.py's and tests/kernels/test_matmul_bf16_triton_tma.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_matmul_bf16_family import FINE_COLUMNS

from mage_tune.arch import get_arch
from mage_tune.problem import Problem

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "mage_tune" / "kernels" / "matmul_bf16.py"
SPEC = str(FILE)  # by path, so the worker process loads the same family again
SPEC_FP32 = f"{FILE}:FP32_OUT"
SPEC_F16 = f"{FILE}:F16"  # FP16 inputs and output
ARCH = get_arch("sm_90a")
RAGGED = [{"m": 200, "n": 136, "k": 72}, {"m": 1000, "n": 520, "k": 264}]

pytestmark = pytest.mark.gpu


def _two_per_width(settings: list[dict]) -> list[dict]:
    """Two of the CPU cover's configs for each fine bn value, their wgmma loops and other knobs taken in turn: one
    with each epilogue (the TMA store's tail of C from registers, the direct stores' last partial column groups)."""
    by_width: dict[int, list[dict]] = {}
    for s in settings:
        by_width.setdefault(s["bn"], []).append(s)
    out = []
    for bn, group in by_width.items():
        first = (bn // 8) % len(group)
        out.append({**group[first], "epilogue": "tma"})
        out.append({**group[(first + 1) % len(group)], "epilogue": "direct"})
    return out


# bn values not a multiple of 32 (and 96): the last B box read in part, C's tail from registers
FINE = _two_per_width(FINE_COLUMNS)

# Every value of every knob at least once, and every (bm, consumers, bn) (as in the CPU tests).
COVER = [
    {},
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
    {"epilogue": "tma"},
    {"bm": 64, "bn": 192, "consumers": 1, "stages": 3, "cluster": 2, "multicast": 1, "epilogue": "tma"},
    {"bm": 256, "bn": 64, "consumers": 1, "stages": 4, "raster": 0, "epilogue": "tma"},
    {"bm": 64, "bn": 256, "schedule": "pingpong"},
    {"bm": 128, "bn": 128, "raster": 16, "schedule": "pingpong", "epilogue": "tma"},
    {"stream_k": 1},
    {"bm": 64, "bn": 128, "consumers": 1, "stages": 3, "epilogue": "direct", "stream_k": 1},
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
    # bn not a multiple of 64: the last B box copied whole, wgmma reads part of it; C's columns past the last whole
    # store chunk stored from registers
    {"bn": 224},
    {"bn": 160, "stages": 5, "cluster": 4, "multicast": 1, "epilogue": "direct"},  # 5 stages: room for 1 chunk at most
    {"bm": 64, "bn": 224, "consumers": 1, "stages": 3, "cluster": 2, "multicast": 1, "epilogue": "direct"},
    {"bm": 64, "bn": 160, "consumers": 1, "stages": 6, "cluster": 2, "persistent": 0},
    {"bm": 64, "bn": 224, "stages": 3, "schedule": "pingpong"},
    {"bm": 64, "bn": 160, "schedule": "pingpong", "epilogue": "direct"},
    {"bn": 160, "stream_k": 1},
    *FINE,
    # the kernel of Cᵀ's tiles: wgmma's A operand from B's boxes (N-major), its B operand from A's rows (K-major)
    {"transposed": 1, "bn": 208},
    # pairs side by side, sharing the tile row's operand
    {"bn": 224, "cluster": 2, "multicast": 1, "pairing": "beside"},
    # one staging chunk per consumer warpgroup, overwritten once its last store has read it
    {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "raster": 0, "staging": 1},
    # four, each overwritten once the store three chunks back has read it
    {"bn": 256, "stages": 3, "staging": 4, "raster": 0},
    # consumers splitting the tile's columns: a 192-row tile
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1},
    # the second consumer started stagger k-tiles behind the first
    {"stagger": 1},
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "stagger": 2},
    {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "raster": 0, "staging": 1, "stagger": 3},
    # three consumer warpgroups, one m64 of a 192-row tile each: alone, paired (one staging chunk), a quad, Cᵀ's tiles
    {"bm": 192, "bn": 192, "consumers": 3, "stages": 3},
    {"bm": 192, "bn": 192, "consumers": 3, "stages": 4, "staging": 1, "cluster": 2, "multicast": 1},
    {"bm": 192, "bn": 176, "consumers": 3, "stages": 3, "cluster": 4, "multicast": 1, "epilogue": "direct"},
    {"bm": 192, "bn": 160, "consumers": 3, "stages": 3, "cluster": 2, "multicast": 1, "transposed": 1},
]
# Stream-K over the wgmma loop shapes and both epilogues: the partial sums' slot layout follows (bm, consumers, bn)
STREAM_K = [
    {"stream_k": 1},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "stream_k": 1},
    {"bn": 192, "stages": 3, "epilogue": "direct", "stream_k": 1},
    {"bm": 256, "bn": 128, "stages": 3, "raster": 0, "stream_k": 1},
    {"bm": 128, "bn": 64, "consumers": 1, "stages": 5, "epilogue": "direct", "raster": 16, "stream_k": 1},
    {"bm": 192, "bn": 192, "consumers": 3, "stages": 3, "stream_k": 1},
    {
        "bm": 192,
        "bn": 128,
        "consumers": 3,
        "stages": 4,
        "epilogue": "direct",
        "cluster": 2,
        "multicast": 1,
        "stream_k": 1,
    },
    # clusters: blocks in pairs each walking its own tiles; a pair or a quad walking its tiles together, the slot
    # and flag of each block of a walker, the lower block of an odd pair and the quad's blocks past M or N idle
    {"bm": 64, "bn": 128, "consumers": 1, "stages": 3, "cluster": 2, "stream_k": 1},
    {"cluster": 2, "multicast": 1, "stream_k": 1},
    {"bn": 224, "stages": 3, "cluster": 2, "multicast": 1, "epilogue": "direct", "stream_k": 1},
    {"bn": 224, "cluster": 4, "multicast": 1, "stream_k": 1},
    {
        "bm": 64,
        "bn": 64,
        "consumers": 1,
        "stages": 2,
        "cluster": 4,
        "multicast": 1,
        "epilogue": "direct",
        "stream_k": 1,
    },
]
# Ping-pong consumers over its wgmma loop shapes, both epilogues, a cluster with and without multicast, one tile per
# block (persistent=0)
PINGPONG = [
    {"bm": 64, "bn": 256, "schedule": "pingpong"},
    {"bm": 64, "bn": 64, "stages": 2, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 64, "bn": 128, "stages": 3, "cluster": 2, "schedule": "pingpong"},
    {"bm": 64, "bn": 192, "stages": 5, "persistent": 0, "schedule": "pingpong"},
    {"bm": 128, "bn": 128, "raster": 16, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 256, "bn": 64, "stages": 3, "schedule": "pingpong"},
    {"bm": 64, "bn": 256, "cluster": 2, "multicast": 1, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 128, "bn": 128, "stages": 3, "cluster": 2, "multicast": 1, "raster": 0, "schedule": "pingpong"},
    {"bm": 64, "bn": 192, "stages": 5, "schedule": "pingpong", "epilogue": "tma", "staging": 1},
]
# The TMA-store epilogue over every wgmma loop shape and the cluster modes: its chunks (one to four per m64 tile, an
# odd count per tile with bn=192, so the staging buffer alternates across tiles), clipped at ragged M and N.
TMA = [
    {"epilogue": "tma"},
    {"bm": 128, "bn": 64, "consumers": 2, "stages": 6, "epilogue": "tma"},
    {"bm": 128, "bn": 192, "consumers": 2, "stages": 3, "persistent": 0, "epilogue": "tma"},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 2, "epilogue": "tma"},
    {"bm": 64, "bn": 192, "consumers": 1, "stages": 3, "cluster": 2, "multicast": 1, "epilogue": "tma"},
    {"bm": 256, "bn": 64, "consumers": 1, "stages": 4, "raster": 0, "epilogue": "tma"},
    {"bm": 256, "bn": 128, "consumers": 2, "stages": 3, "cluster": 2, "epilogue": "tma"},
    # one staging chunk per consumer warpgroup: odd and even chunk counts per tile, both schedules, a tail of C
    {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "staging": 1},
    {"bm": 256, "bn": 64, "consumers": 1, "stages": 4, "staging": 1},
    {"bm": 64, "bn": 128, "stages": 3, "schedule": "pingpong", "epilogue": "tma", "staging": 1},
    {"bn": 224, "staging": 1, "stream_k": 1},
    # four staging chunks: a 64 × 256 part of C whole, three chunks a tile (the turn wraps within tiles), one a tile
    # (it wraps across them), ping-pong, a tail of C
    {"bn": 256, "stages": 3, "staging": 4, "raster": 4},
    {"bn": 192, "stages": 3, "cluster": 2, "multicast": 1, "staging": 4},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "staging": 4},
    {"bm": 64, "bn": 256, "stages": 4, "schedule": "pingpong", "epilogue": "tma", "staging": 4},
    {"bn": 224, "stages": 3, "staging": 4, "stream_k": 1},
]


def _variants(spec: str, shape: dict, settings: list[dict]):
    from mage_tune.kernels import load_family
    from mage_tune.kernels.select import build_all

    family = load_family(spec)
    configs = [family.complete(s, shape, ARCH) for s in settings]
    return family, build_all(family, shape, ARCH, configs, lambda error: pytest.fail(str(error)))


def _check(spec: str, shape: dict, settings: list[dict], baselines=("torch",), timed=False) -> list:
    from mage_tune.measure import bench

    family, variants = _variants(spec, shape, settings)
    run = bench(Problem(family, shape, ARCH), variants, baselines=baselines, timed=timed, rounds=3, job_timeout_s=120)
    failed = [(r.label, r.error, r.rel_err) for r in run.results if not r.ok]
    assert not failed, failed
    assert sum(r.kind == "variant" for r in run.results) == len(settings)
    return list(run.results)


def test_the_cover_holds_every_knob_value():
    from mage_tune.kernels import load_family

    family = load_family(SPEC)
    configs = [family.complete(s, RAGGED[1], ARCH) for s in COVER]
    for knob in family.knobs:
        assert {c[knob.name] for c in configs} == set(knob.domain), knob.name


@pytest.mark.parametrize("spec", [SPEC, SPEC_F16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", RAGGED, ids=lambda s: "x".join(map(str, s.values())))
def test_every_knob_value_is_correct_at_ragged_shapes(spec, shape):
    _check(spec, shape, COVER)


@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("shape", RAGGED, ids=lambda s: "x".join(map(str, s.values())))
def test_the_tma_epilogue_is_correct_at_ragged_shapes(spec, shape):
    """Check first, where the TMA-store epilogue is new: the swizzle of the staging chunks against C's map, the
    proxy fence and the named barrier, the double buffer or the one chunk (staging=1); for both output dtypes (FP32
    chunks are 32 columns)."""
    _check(spec, shape, TMA)


@pytest.mark.parametrize("shape", RAGGED, ids=lambda s: "x".join(map(str, s.values())))
def test_fp32_output_is_within_fp32_s_bound(shape):
    results = _check(SPEC_FP32, shape, COVER[:4] + COVER[6:8] + COVER[10:12] + COVER[16:])
    variants = [r for r in results if r.kind == "variant"]
    assert max(r.rel_err for r in variants) < 1e-5  # far under one bf16 rounding: C really is FP32


def test_a_measurement_keeps_the_resident_clusters_and_the_grid_launched():
    """The driver's count of resident blocks in clusters (cuOccupancyMaxActiveClusters × the cluster's size) comes
    back with each measurement in clusters, and a persistent grid fitted to it (up to a block per work item and per
    SM) as the grid launched; a grid of a block per tile and a kernel without clusters keep the variant's grid."""
    shape = {"m": 2056, "n": 2056, "k": 520}
    settings = [
        {"cluster": 4, "multicast": 1},
        {"cluster": 2, "multicast": 1},
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 2, "multicast": 1, "persistent": 0},
        {},
    ]
    import torch

    family, variants = _variants(SPEC, shape, settings)
    grids = {v.label: v.launch.grid[0] for v in variants}  # the variants' own, planned on the part's SMs
    work = {v.label: family.work_blocks(v.config, shape) for v in variants}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    quad, pair, per_tile, plain = [r for r in _check(SPEC, shape, settings) if r.kind == "variant"]
    for result, size in ((quad, 4), (pair, 2), (per_tile, 2)):
        assert result.resident_blocks and result.resident_blocks % size == 0, result
    for result, size in ((quad, 4), (pair, 2)):  # persistent: as many as resident, never more than one an SM
        launched = result.launched_grid[0] if result.launched_grid else grids[result.label]
        assert launched == min(work[result.label], result.resident_blocks, sms // size * size), result
    assert per_tile.launched_grid is None and plain.launched_grid is None and plain.resident_blocks is None


def test_persistent_blocks_walk_many_tiles_and_lap_the_ring():
    """1024+ tiles of 64 × 64 over 132 blocks (eight or more tiles each), K of 9 k-tiles over 2 or 3 stages: the
    ring's parity flips many times within and across tiles; ragged in all three dimensions."""
    shape = {"m": 2056, "n": 2056, "k": 520}
    settings = [
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2},
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 3, "cluster": 2, "raster": 0},
        {"bm": 128, "bn": 64, "consumers": 2, "stages": 2, "raster": 16},
        {"bm": 64, "bn": 128, "consumers": 1, "stages": 2, "cluster": 2, "multicast": 1},
        {"cluster": 2, "multicast": 1, "raster": 4},
        {},
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "epilogue": "tma"},
        {"bm": 64, "bn": 192, "consumers": 1, "stages": 3, "epilogue": "tma"},  # 3 chunks a tile: buffers alternate
        {"cluster": 2, "multicast": 1, "epilogue": "tma"},
        # one staging chunk, one chunk of C a tile: each reuse of it waits on the previous tile's store
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "epilogue": "tma", "staging": 1},
        {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "staging": 1},
        # a consumer behind the other through every tile, the leader's ring shorter by as many stages
        {"bm": 128, "bn": 64, "consumers": 2, "stages": 3, "stagger": 1},
        {"bn": 128, "cluster": 2, "multicast": 1, "stagger": 2},
        {"bm": 192, "bn": 64, "consumers": 3, "stages": 2},  # three consumers, each one m64 of the tile
    ]
    _check(SPEC, shape, settings)


@pytest.mark.parametrize(
    "shape", [*RAGGED, {"m": 2056, "n": 2056, "k": 520}], ids=lambda s: "x".join(map(str, s.values()))
)
def test_pingpong_consumers_take_tiles_in_turn(shape):
    """Each consumer skips the other's k-tiles in the ring (9 k-tiles over 2 to 5 stages at the last shape: the skip
    wraps the ring at every offset, many tiles per block) and waits for its turn; blocks with an odd number of tiles,
    and one tile per block (persistent=0: the second consumer has none)."""
    _check(SPEC, shape, PINGPONG)


@pytest.mark.parametrize(
    "shape",
    [*RAGGED, {"m": 2056, "n": 2056, "k": 520}, {"m": 448, "n": 1216, "k": 520}],
    ids=lambda s: "x".join(map(str, s.values())),
)
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32], ids=["bf16", "fp32"])
def test_stream_k_shares_the_last_wave(spec, shape):
    """The k-tiles of the tiles left over from the full waves dealt out to every block, partial sums exchanged
    through the workspace: fewer tiles than SMs (1000 × 520 × 264 at 128 × 256: 24 tiles of 5 k-tiles over 120
    blocks, five blocks to a tile), full waves and a tail (2056² × 520 at 64 × 64: 1056 whole tiles, 33 of 9 k-tiles
    shared, two or three k-tiles a block), and a tail of fewer k-tiles than blocks (448 × 1216 × 520 at 64 × 64: 133
    tiles, one of 9 k-tiles shared: most blocks' shares are empty, and the finishing block skips them)."""
    _check(spec, shape, STREAM_K)


@pytest.mark.parametrize("m", [300, 136, 1], ids=lambda m: f"m{m}")
def test_multicast_pairs_with_an_odd_last_row_of_tiles(m):
    """An odd number of tile rows leaves the lower block of the last pair without rows of A: it copies its half of
    B's boxes for its partner, keeps the barrier protocol and stores nothing."""
    shape = {"m": m, "n": 200, "k": 136}
    settings = [
        {"cluster": 2, "multicast": 1},
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 2, "multicast": 1, "persistent": 0},
        {"bm": 128, "bn": 192, "consumers": 2, "stages": 3, "cluster": 2, "multicast": 1},
        {"cluster": 2, "multicast": 1, "epilogue": "tma"},  # the idle lower block stores no chunk
        {"bm": 64, "bn": 128, "stages": 3, "cluster": 2, "multicast": 1, "schedule": "pingpong"},
    ]
    _check(SPEC, shape, settings)


# The kernel of Cᵀ's tiles (bm rows along C's N, bn columns along its M) over the wgmma loop shapes, both epilogues
# (stmatrix .trans into C's chunks, a tail of C's rows from registers, element by element), both schedules, pairs
# sharing A's rows (halves of bn rows each), quads, stream-K, one tile per block
TRANSPOSED = [
    {"transposed": 1},
    {"transposed": 1, "bn": 208},
    {"transposed": 1, "bn": 224, "epilogue": "direct"},
    {"transposed": 1, "bm": 64, "bn": 128, "consumers": 1, "stages": 3, "persistent": 0},
    {"transposed": 1, "bm": 256, "bn": 128, "stages": 3, "raster": 0},
    {"transposed": 1, "bm": 64, "bn": 256, "schedule": "pingpong"},
    {"transposed": 1, "bn": 208, "cluster": 2},
    {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1},
    {"transposed": 1, "bn": 160, "cluster": 2, "multicast": 1, "epilogue": "direct"},
    {"transposed": 1, "bm": 64, "bn": 192, "cluster": 2, "multicast": 1, "schedule": "pingpong"},
    {"transposed": 1, "bn": 208, "cluster": 4, "multicast": 1},
    {"transposed": 1, "bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 4, "multicast": 1},
    {"transposed": 1, "bn": 208, "stream_k": 1},
    {"transposed": 1, "bn": 224, "cluster": 2, "multicast": 1, "stream_k": 1},
    {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"transposed": 1, "bm": 64, "bn": 128, "consumers": 1, "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"transposed": 1, "bm": 256, "bn": 128, "cluster": 2, "multicast": 1, "pairing": "beside", "stream_k": 1},
]
# Pairs side by side (pairing=beside) sharing the tile row's operand, A's rows in halves (untransposed) or B's boxes
# (transposed), over the wgmma loops, both epilogues and schedules, stream-K, one tile per block
BESIDE = [
    {"cluster": 2, "multicast": 1, "pairing": "beside"},
    {"bn": 224, "cluster": 2, "multicast": 1, "pairing": "beside", "epilogue": "direct"},
    {"bm": 64, "bn": 128, "consumers": 1, "stages": 2, "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"bm": 256, "bn": 128, "stages": 3, "cluster": 2, "multicast": 1, "pairing": "beside", "persistent": 0},
    {"bm": 64, "bn": 256, "cluster": 2, "multicast": 1, "pairing": "beside", "schedule": "pingpong"},
    {"bn": 160, "cluster": 2, "multicast": 1, "pairing": "beside", "stream_k": 1},
    {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1, "pairing": "beside", "epilogue": "direct"},
]


@pytest.mark.parametrize(
    "shape",
    [
        *RAGGED,
        {"m": 300, "n": 520, "k": 1000},  # 3 tile columns of 192 or 224: an odd last pair whose right block idles
        {"m": 2056, "n": 2056, "k": 520},  # many pairs per cluster, the ring lapped
        {"m": 1, "n": 8, "k": 8},
    ],
    ids=lambda s: "x".join(map(str, s.values())),
)
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_pairs_side_by_side_share_the_tile_row_s_operand(spec, shape):
    """Each block of a pair copies its share of the tile row's k-tiles into both; the right block of an odd last
    pair copies its share for its partner, keeps the barriers and stores nothing. For each dtype (an FP32 C's
    chunks are 32 columns; the transposed config's completion takes the direct epilogue)."""
    _check(spec, shape, BESIDE)


# Consumers splitting the tile's columns (split=columns: every row, bn / 2 columns each, at column offset
# consumer · bn / 2): 192-row tiles alone, in pairs, quads, with stream-K, both epilogues and a tail of C per
# consumer (bn / 2 not a multiple of a chunk), one staging chunk; untransposed with bn / 2 of whole B boxes
COLUMNS = [
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1},
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1},
    {"bm": 192, "bn": 176, "split": "columns", "transposed": 1, "cluster": 4, "multicast": 1},
    {"bm": 192, "bn": 160, "split": "columns", "transposed": 1, "stream_k": 1},
    {"bm": 192, "bn": 144, "split": "columns", "transposed": 1, "epilogue": "direct", "persistent": 0},
    {"bm": 192, "bn": 112, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"bm": 192, "bn": 128, "split": "columns", "cluster": 2, "multicast": 1, "staging": 1},
    {"bm": 128, "bn": 256, "split": "columns", "epilogue": "direct", "stream_k": 1},
    {"bm": 256, "bn": 144, "split": "columns", "transposed": 1, "epilogue": "direct"},
    {"bm": 64, "bn": 128, "split": "columns", "stages": 3},
    {"bm": 192, "bn": 128, "split": "columns", "cluster": 2, "multicast": 1, "pairing": "beside"},
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1, "stream_k": 1},
    {"bm": 128, "bn": 256, "split": "columns", "cluster": 4, "multicast": 1, "stream_k": 1},
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "staging": 1, "stages": 3},
    {"bm": 128, "bn": 256, "split": "columns"},
    {"bm": 128, "bn": 64, "split": "columns", "transposed": 1},  # 32 columns a consumer: the direct epilogue
]
# An FP32 C's transposed configs take the direct epilogue, which has no staging chunks to count.
COLUMNS_FP32 = [c for c in COLUMNS if not (c.get("transposed") and c.get("staging") == 1)]


STAGGER = [
    {"stagger": 1},
    {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "raster": 0, "staging": 1, "stagger": 3},
    {"bn": 224, "stages": 4, "cluster": 2, "multicast": 1, "stagger": 2, "epilogue": "direct"},
    {"bm": 64, "bn": 256, "consumers": 1, "stages": 4, "stagger": 0},  # beside them: one consumer, no stagger
    {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1, "pairing": "beside", "stagger": 2},
    {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1, "stagger": 2},
    {"bm": 192, "bn": 128, "split": "columns", "cluster": 2, "multicast": 1, "staging": 1, "stagger": 1},
    {"bm": 256, "bn": 64, "stages": 5, "epilogue": "direct", "stagger": 3},
]
# An FP32 C's transposed configs take the direct epilogue, which has no staging chunks to count.
STAGGER_FP32 = [c for c in STAGGER if not (c.get("transposed") and c.get("staging") == 1)]


@pytest.mark.parametrize(
    "shape",
    [
        *RAGGED,  # 72: two k-tiles, fewer than a stagger of 3 (the leader arrives after its last)
        {"m": 2056, "n": 2056, "k": 520},  # many tiles per block, the lag carried from tile to tile
        {"m": 1, "n": 8, "k": 8},  # one tile, one k-tile
        {"m": 1000, "n": 517, "k": 261},  # off the pitch: padded copies
    ],
    ids=lambda s: "x".join(map(str, s.values())),
)
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_a_staggered_second_consumer_stores_its_part_behind_the_first(spec, shape):
    """stagger > 0: consumer 1 waits for consumer 0's arrival before its first k-tile and walks the tiles that far
    behind; both parts of every tile land, the leader's ring is that many stages shorter without a hang."""
    _check(spec, shape, STAGGER_FP32 if spec == SPEC_FP32 else STAGGER)


@pytest.mark.parametrize(
    "shape",
    [
        *RAGGED,
        {"m": 300, "n": 520, "k": 1000},  # odd last pairs and quads' idle blocks
        {"m": 2056, "n": 2056, "k": 520},  # many tiles per block
        {"m": 1, "n": 8, "k": 8},
        {"m": 1000, "n": 517, "k": 261},  # off the pitch: padded copies
    ],
    ids=lambda s: "x".join(map(str, s.values())),
)
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_consumers_splitting_the_columns_store_their_halves(spec, shape):
    """Each consumer's wgmma read A's rows (or B's boxes) from its own column offset and its part of C lands at that
    offset, whole chunks through C's map and the rest from registers (an FP32 C's transposed configs take the
    direct epilogue: completion picks it)."""
    _check(spec, shape, COLUMNS_FP32 if spec == SPEC_FP32 else COLUMNS)


@pytest.mark.parametrize(
    "shape",
    [
        *RAGGED,
        {"m": 1001, "n": 200, "k": 136},  # an odd M: C's last row alone in its 8-row group
        {"m": 300, "n": 520, "k": 1000},  # 5 tile rows along N (an odd last pair, a quad's idle blocks)
        {"m": 1, "n": 8, "k": 8},
        {"m": 1000, "n": 517, "k": 261},  # off the pitch: padded copies
    ],
    ids=lambda s: "x".join(map(str, s.values())),
)
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_the_transposed_kernel_stores_c_from_its_transpose(spec, shape):
    """Every transposed config against the float64 reference (an FP32 C takes the direct epilogue: completion
    picks it; four staging chunks, which need the TMA epilogue, only for 2-byte C): the roles of A's and B's maps
    exchanged, the stores of Dᵀ into C at ragged edges."""
    four_chunks = [{"transposed": 1, "bn": 256, "stages": 3, "staging": 4, "raster": 0}] if spec != SPEC_FP32 else []
    _check(spec, shape, TRANSPOSED + four_chunks)


# 2 × 2 clusters over the wgmma loop shapes (A's halves of 32, 64 and 128 rows), both epilogues, both schedules, one
# group per cluster (persistent=0) and many
QUAD = [
    {"cluster": 4, "multicast": 1},
    {"cluster": 4, "multicast": 1, "epilogue": "direct"},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 4, "multicast": 1, "persistent": 0},
    {"bm": 64, "bn": 192, "consumers": 1, "stages": 3, "cluster": 4, "multicast": 1, "raster": 0},
    {"bm": 256, "bn": 128, "stages": 3, "cluster": 4, "multicast": 1, "raster": 4},
    {"bm": 128, "bn": 128, "stages": 3, "cluster": 4, "multicast": 1, "schedule": "pingpong"},
    {"bm": 64, "bn": 256, "cluster": 4, "multicast": 1, "schedule": "pingpong", "epilogue": "direct"},
]


@pytest.mark.parametrize(
    "shape",
    [
        {"m": 300, "n": 200, "k": 136},  # odd tile rows (3 of 128) and one tile column: half the quad idles
        {"m": 136, "n": 520, "k": 264},  # an odd last column of tiles (3 of 192 or 256); A's second half past M
        {"m": 1, "n": 8, "k": 8},  # one tile: three blocks of the quad copy nothing for themselves
        {"m": 1800, "n": 2000, "k": 200},  # 64 × 64 tiles: 15 × 16 groups, the persistent clusters walk many
        # odd × odd tiles, the diagonal block past M and N (it receives nothing), k-tiles lapping the ring many times
        {"m": 300, "n": 200, "k": 4096},
    ],
    ids=lambda s: "x".join(map(str, s.values())),
)
def test_quads_share_a_along_rows_and_b_along_columns_at_ragged_edges(shape):
    """A block of a 2 × 2 cluster copies half of A's rows into both blocks of its tile row and half of B's boxes
    into both of its tile column; where a tile lies past M or N its block still copies for its peers, keeps the
    barriers and stores nothing."""
    _check(SPEC, shape, QUAD)


# Over 128 accumulators a consumer thread (split by rows, up to 192): 256-row tiles of 160 to 192 columns over two
# consumers with both epilogues, transposed, in pairs and quads, four staging chunks; 128 × 192 ping-pong, one consumer
WIDE = [
    {"bm": 256, "bn": 160, "stages": 3},
    {"bm": 256, "bn": 192, "stages": 3, "epilogue": "direct"},
    {"bm": 256, "bn": 176, "stages": 3, "transposed": 1},
    {"bm": 256, "bn": 160, "stages": 3, "cluster": 2, "multicast": 1, "raster": 0},
    {"bm": 256, "bn": 192, "stages": 3, "cluster": 4, "multicast": 1},
    {"bm": 256, "bn": 160, "stages": 3, "staging": 4, "transposed": 1},
    {"bm": 128, "bn": 192, "schedule": "pingpong", "epilogue": "tma"},
    {"bm": 128, "bn": 176, "consumers": 1, "stages": 5},
    {"bm": 256, "bn": 96, "consumers": 1, "stages": 4, "epilogue": "direct"},
]


@pytest.mark.parametrize(
    "shape",
    [*RAGGED, {"m": 300, "n": 520, "k": 1000}, {"m": 2056, "n": 2056, "k": 520}],
    ids=lambda s: "x".join(map(str, s.values())),
)
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_tiles_over_128_accumulators_a_thread(spec, shape):
    """The tiles whose consumers hold 144 to 192 accumulators a thread (ptxas fits them in 232 or 240 registers with
    no spill) against the float64 reference (an FP32 C's transposed config takes the direct epilogue: completion
    picks it; four chunks need a 2-byte C)."""
    settings = [s for s in WIDE if spec != SPEC_FP32 or s.get("staging") != 4]
    _check(spec, shape, settings)


@pytest.mark.parametrize("shape", [{"m": 1, "n": 8, "k": 8}, {"m": 77, "n": 24, "k": 40}], ids=["1x8x8", "77x24x40"])
def test_shapes_under_one_box(shape):
    settings = [{}, {"bm": 64, "bn": 64, "consumers": 1, "stages": 2}, {"bm": 256, "bn": 64}]
    tma = [{"epilogue": "tma"}, {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "epilogue": "tma"}]
    _check(SPEC, shape, [*settings, {"cluster": 2, "multicast": 1}, *tma])
    _check(SPEC_FP32, shape, tma)


# K or N off a tensor map's 16-byte pitch (not multiples of 8): run on zero-padded copies (PaddedLauncher), made by the
# row-pitch copy kernel (pitch_copy.py)
OFF_PITCH = [{"m": 1000, "n": 517, "k": 261}, {"m": 333, "n": 200, "k": 101}, {"m": 130, "n": 67, "k": 64}]
PADDED = [
    {},
    {"epilogue": "direct"},
    {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 2, "multicast": 1},
    {"cluster": 4, "multicast": 1},
    {"bm": 64, "bn": 128, "schedule": "pingpong"},
    {"stream_k": 1},
]


@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
@pytest.mark.parametrize("shape", OFF_PITCH, ids=lambda s: "x".join(map(str, s.values())))
def test_a_k_or_n_off_a_16_byte_pitch_runs_on_padded_copies(spec, shape):
    """K and N not multiples of 8 (both, K alone, N alone): the variant runs on zero-padded copies, each config
    within the tolerance of the float64 reference at the true shape, beside cuBLAS at the same shape."""
    results = _check(spec, shape, PADDED)
    assert [r.kind for r in results].count("torch") == 1


@pytest.mark.parametrize(
    "rows,width,columns,pitch,dtype",
    [
        (3, 5, 8, 5, "bfloat16"),  # a row narrower than a block, padded out
        (70_000, 13, 16, 13, "float16"),  # more rows than a grid has (gridDim.y 65535): the blocks walk the rest
        (7, 1500, 1500, 1504, "bfloat16"),  # cropped: a padded C's first N columns out, over blocks of 1024
        (5, 3, 4, 3, "float32"),  # 4-byte elements (an FP32 C)
    ],
)  # fmt: skip
def test_the_pitch_copies_match_the_host_copy_bit_for_bit(rows, width, columns, pitch, dtype):
    """PitchCopier against pitch_copy.host_copy: the width copied, the columns past it zero, nothing past `columns`
    written, on torch's current stream."""
    import numpy as np
    import torch

    from mage_tune.kernels import pitch_copy
    from mage_tune.kernels.matmul_bf16 import _pitch_copier

    kind = getattr(torch, dtype)
    src = torch.randn(rows, pitch, device="cuda").to(kind)[:, :width]  # rows `pitch` apart
    dst = torch.full((rows, columns + 3), float("nan"), device="cuda").to(kind)
    _pitch_copier(ARCH).copy(src, dst, rows, width, columns)
    torch.cuda.synchronize()
    bits = torch.int32 if dtype == "float32" else torch.int16
    expected = dst.view(bits).cpu().numpy().copy()
    pitch_copy.host_copy(src.view(bits).cpu().numpy(), expected, rows, width, columns)
    np.testing.assert_array_equal(dst.view(bits).cpu().numpy(), expected)
    assert torch.isnan(dst[:, columns:].float()).all()


REPEAT = """
import json, sys, torch
from mage_tune.arch import get_arch
from mage_tune.kernels import load_family
from mage_tune.measure import variant_job
family = load_family(sys.argv[1])
shape = json.loads(sys.argv[2])
out = []
for settings in json.loads(sys.argv[3]):
    config = family.complete(settings, shape, get_arch("sm_90a"))
    variant = family.build(config, shape, get_arch("sm_90a"))
    launch = family.launcher(variant_job(variant), shape)
    g = torch.Generator(device="cpu").manual_seed(7)
    inputs = getattr(torch, family.device_dtype("A"))
    a = (torch.rand(shape["m"], shape["k"], generator=g) * 2 - 1).to(inputs).cuda()
    b = (torch.rand(shape["k"], shape["n"], generator=g) * 2 - 1).to(inputs).cuda()
    dtype = getattr(torch, family.device_dtype("__out__"))
    runs = []
    for _ in range(3):
        c = torch.full((shape["m"], shape["n"]), float("nan"), dtype=dtype, device="cuda")
        if getattr(launch, "c", None) is not None:  # a padded launcher's own C, reused: NaN too, so nothing is stale
            launch.c.fill_(float("nan"))
        launch({"A": a, "B": b, "__out__": c})
        torch.cuda.synchronize()
        runs.append(c)
    ref = a.double() @ b.double()
    rel = float((runs[0].double() - ref).norm() / ref.norm())
    same = all(torch.equal(runs[0], r) for r in runs[1:])
    unwritten = int(torch.isnan(runs[0].float()).sum())
    row = {"label": variant.label, "same": same, "rel": rel, "tol": family.tolerance_for(shape)}
    out.append({**row, "unwritten": unwritten})
print(json.dumps(out))
"""


@pytest.mark.parametrize("shape", [RAGGED[1], OFF_PITCH[0]], ids=["1000x520x264", "1000x517x261"])
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_repeated_launches_are_bit_identical(spec, shape):
    """Three launches on the same buffers give the same bits (a fixed order of the sums, stream-K's too), each within
    the tolerance and with every element of C written (C, and a padded launcher's own C, NaN before each launch),
    on the caller's buffers and on padded copies; run in a process of its own so that a hang is a timeout, not a
    stuck test."""
    settings = [
        {},
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "cluster": 2},
        {"persistent": 0},
        {"cluster": 2, "multicast": 1},
        {"epilogue": "tma"},
        {"cluster": 2, "multicast": 1, "epilogue": "tma"},
        {"cluster": 4, "multicast": 1},
        {"stream_k": 1},  # split K, but summed in a fixed order: still the same bits
        {"bm": 64, "bn": 64, "consumers": 1, "stages": 2, "epilogue": "direct", "stream_k": 1},
        {"bn": 224, "cluster": 4, "multicast": 1},  # a last B box copied whole, a tail of C from registers
        {"bn": 224, "cluster": 2, "multicast": 1, "stream_k": 1},  # stream-K walked by pairs, then quads
        {"cluster": 4, "multicast": 1, "stream_k": 1},
        {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1},  # Cᵀ's tiles, pairs sharing A's rows
        {"transposed": 1, "bn": 224, "stream_k": 1, "epilogue": "direct"},
        {"transposed": 1, "bn": 208, "cluster": 2, "multicast": 1, "pairing": "beside"},
        {"transposed": 1, "bn": 208},  # C's chunks through its map, the tail element-wise (an FP32 C: direct)
        {"transposed": 1, "bn": 192, "cluster": 4, "multicast": 1},
        {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "staging": 1},  # one staging chunk per consumer
        {"bm": 192, "bn": 192, "split": "columns", "transposed": 1, "cluster": 2, "multicast": 1},  # columns split
        {"bm": 192, "bn": 160, "split": "columns", "transposed": 1, "stream_k": 1, "epilogue": "direct"},
        {"bm": 192, "bn": 192, "consumers": 3, "stages": 4, "staging": 1, "cluster": 2, "multicast": 1},  # three
        {"bm": 192, "bn": 192, "consumers": 3, "stages": 3, "cluster": 2, "multicast": 1, "stream_k": 1},
        {"stagger": 2},  # the second consumer two k-tiles behind
        {"bn": 192, "stages": 5, "cluster": 4, "multicast": 1, "staging": 1, "stagger": 3},
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", REPEAT, spec, json.dumps(shape), json.dumps(settings)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(rows) == len(settings)
    for row in rows:
        assert row["unwritten"] == 0, row  # C's elements the launch left NaN
        assert row["same"], row
        assert row["rel"] <= row["tol"], row


def _persistent_tma(spec: str, results: list) -> list:
    """The results of Triton's persistent TMA matmul, one per config the family lists."""
    from mage_tune.kernels import load_family

    tma = [r for r in results if r.label.startswith("triton-tma[")]
    assert len(tma) == len(load_family(spec).tma_reference_configs())
    assert all(r.kind == "triton" for r in tma)
    return tma


@pytest.mark.parametrize("shape", [RAGGED[1], {"m": 2056, "n": 2056, "k": 520}], ids=["1000x520x264", "2056x2056x520"])
@pytest.mark.parametrize("spec", [SPEC, SPEC_FP32, SPEC_F16], ids=["bf16", "fp32", "fp16"])
def test_the_persistent_tma_triton_baselines_pass_at_ragged_shapes(spec, shape):
    """Triton's persistent TMA matmul at every config, ragged in M, N and K (zero-filled loads, clipped stores), with
    fewer tiles than SMs (one each) and with more (programs walk several tiles): each within the family's tolerance
    (_check) and timed."""
    results = _check(spec, shape, [{}], baselines=None, timed=True)
    assert all(r.time("cold") > 0 for r in _persistent_tma(spec, results))


@pytest.mark.parametrize("spec", [SPEC, SPEC_F16], ids=["bf16", "fp16"])
def test_timed_beside_triton_and_cublas(spec):
    """The default config at 4096³ with each epilogue, timed (CUDA graphs of the family's own launches) beside the
    Triton tutorial matmul and Triton's persistent TMA matmul at their configs and cuBLAS, in the family's input
    type; every one correct, every one timed."""
    shape = {"m": 4096, "n": 4096, "k": 4096}
    results = _check(spec, shape, [{}, {"epilogue": "direct"}], baselines=None, timed=True)
    kinds = {r.kind for r in results}
    assert kinds == {"variant", "triton", "torch"}
    assert all(r.time("cold") > 0 for r in results)
    assert _persistent_tma(spec, results) and [r.kind for r in results].count("torch") == 1
