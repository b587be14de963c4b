"""matmul-bf16's stream-K share (knob stream_k) on the CPU: the kernel's own walk over tiles and k-tiles, cut out of
the rendered source and compiled for the host, checked over many grids; the constraints, the launch and the launcher's
workspace. What only the GPU confirms (the partial sums' exchange through the workspace, its flags' release and
acquire) is in test_gpu_matmul_bf16.py."""

from __future__ import annotations

import ctypes
import itertools
import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from host_emulation import host_compiler
from test_matmul_bf16_family import Buffer

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.errors import ConfigError
from mage_tune.kernels import matmul_bf16
from mage_tune.kernels.matmul_bf16 import FAMILY, TensorMapLauncher

ARCH = get_arch("sm_90a")
FAMILY_FILE = Path(matmul_bf16.__file__)
STREAM_K = {"stream_k": 1}

# Drives the kernel's walk: for each block of a grid, the segments it visits in order (tile, k0, k1, whether it
# finishes the tile), and for each finishing segment that starts past k-tile 0 the blocks it adds, in order.
HOST_MAIN = r"""
#include <algorithm>
#include <cstdio>
using std::max;
struct Dim { unsigned x; };
static Dim gridDim, blockIdx;
#define __device__
#define __forceinline__ inline
%(walk)s
int main(int argc, char** argv) {
    int cases[][3] = {%(cases)s};
    printf("[");
    bool first_case = true;
    for (auto& c : cases) {
        const int works = c[0], k_tiles = c[2];
        gridDim.x = c[1];
        const int whole = works / gridDim.x * gridDim.x;
        const long long tail = static_cast<long long>(works - whole) * k_tiles;
        printf("%%s{\"works\": %%d, \"grid\": %%d, \"k_tiles\": %%d, \"blocks\": [", first_case ? "" : ",", works, c[1],
               k_tiles);
        first_case = false;
        for (int block = 0; block < c[1]; ++block) {
            blockIdx.x = block;
            const long long first = share_start(tail, block, gridDim.x), end = share_start(tail, block + 1, gridDim.x);
            const int first_work = block, work_step = gridDim.x;  // the kernel's names for the walker and the count
            int walk = block, tile, k0, k1;
            long long cursor = end;
            printf("%%s[", block ? "," : "");
            bool first_segment = true;
            while (next_segment(walk, work_step, whole, cursor, first, k_tiles, tile, k0, k1)) {
                printf("%%s[%%d, %%d, %%d, [", first_segment ? "" : ",", tile, k0, k1);
                first_segment = false;
                if (k1 == k_tiles && k0 > 0) {  // the finishing block's additions, as the kernel loops over them
                    const long long tile_first = static_cast<long long>(tile - whole) * k_tiles;
                    bool first_add = true;
%(additions)s
                }
                printf("]]");
            }
            printf("]");
        }
        printf("]}");
    }
    printf("]\n");
}
"""

# (tiles, blocks, k-tiles): the shapes of interest (8192 × 8192 × 2048 at 128 × 256: 2048 tiles of 32 k-tiles on
# 132 SMs), fewer tiles than blocks, fewer k-tiles than blocks, whole waves, one k-tile, a prime count.
CASES = [(2048, 132, 32), (297, 132, 64), (33, 132, 64), (5, 132, 3), (264, 132, 16), (1, 132, 1), (7, 3, 5),
         (131, 132, 7), (400, 132, 1), (1000, 114, 97)]  # fmt: skip


@pytest.fixture(scope="module")
def walks(tmp_path_factory):
    if host_compiler() is None:
        pytest.skip("no g++ with C++20 <barrier> here")
    source = FAMILY.render(FAMILY.with_defaults(STREAM_K), {"m": 8192, "n": 8192, "k": 2048})
    start = source.index("// Tail k-tile where walker b's share starts")
    end = source.index("// The consumer warpgroups' own barrier")
    walk = source[start:end]
    assert "share_start" in walk and "next_segment" in walk
    # the finishing segment's loop over the blocks it adds, as the kernel has it, each addition recorded instead
    start = source.index("for (int b = first_work - 1;; --b) {")
    loop = source[start : source.index("if (b_first <= tile_first) break;", start)]
    assert "wait_flag(flags + giver)" in loop and "continue;" in loop
    adds = loop.split("const int giver =")[0]
    additions = (
        adds + 'printf("%s%d", first_add ? "" : ",", b);\nfirst_add = false;\nif (b_first <= tile_first) break;\n}'
    )
    cases = ", ".join("{{{}, {}, {}}}".format(*c) for c in CASES)
    folder = tmp_path_factory.mktemp("stream-k")
    (folder / "walk.cpp").write_text(HOST_MAIN % {"walk": walk, "cases": cases, "additions": additions})
    program = folder / "walk"
    subprocess.run([host_compiler(), "-std=c++20", "-O1", "-o", program, folder / "walk.cpp"], check=True)
    return json.loads(subprocess.run([program], capture_output=True, text=True, check=True).stdout)


def test_every_k_tile_of_every_tile_is_taken_once_and_the_shares_are_even(walks):
    for case in walks:
        works, grid, k_tiles = case["works"], case["grid"], case["k_tiles"]
        taken = {}
        loads = []
        for b, segments in enumerate(case["blocks"]):
            loads.append(sum(k1 - k0 for _, k0, k1, _ in segments))
            for tile, k0, k1, _ in segments:
                assert 0 <= k0 < k1 <= k_tiles and 0 <= tile < works
                for kt in range(k0, k1):
                    assert (tile, kt) not in taken, (case["works"], grid, tile, kt)
                    taken[(tile, kt)] = b
        assert len(taken) == works * k_tiles
        assert max(loads) - min(loads) <= 1, (works, grid, k_tiles)  # whole waves alike, shares within a k-tile


def test_a_block_gives_away_at_most_one_partial_sum_before_it_waits_and_waits_only_on_lower_blocks(walks):
    for case in walks:
        whole = case["works"] // case["grid"] * case["grid"]
        owner = {}
        for b, segments in enumerate(case["blocks"]):
            for tile, k0, k1, _ in segments:
                owner.setdefault(tile, []).append((k0, k1, b))
        for b, segments in enumerate(case["blocks"]):
            shared = [s for s in segments if s[0] >= whole]
            assert [s[0] for s in segments[: len(segments) - len(shared)]] == sorted(
                s[0] for s in segments[: len(segments) - len(shared)]
            )  # whole tiles first, in grid steps
            unfinished = [i for i, (_, _, k1, _) in enumerate(shared) if k1 < case["k_tiles"]]
            assert unfinished in ([], [0])  # its one partial sum, given first: it waits on nothing before
            for tile, k0, k1, added in shared:
                if k1 < case["k_tiles"] or k0 == 0:
                    assert added == []
                    continue
                earlier = sorted((p for p in owner[tile] if p[0] < k0), reverse=True)  # nearest part first
                assert added == [p[2] for p in earlier] and all(p[2] < b for p in earlier)
                assert earlier[-1][0] == 0 and all(
                    hi[0] == lo[1] for hi, lo in itertools.pairwise([(k0, k1), *earlier])
                )  # contiguous down to k-tile 0
                for _, _, giver in earlier:  # each giver's partial sum is of this tile: its first shared segment
                    given = next(s for s in case["blocks"][giver] if s[0] >= whole)
                    assert given[0] == tile and given[2] < case["k_tiles"]


PAIR = {"cluster": 2, "multicast": 1}
QUAD = {"cluster": 4, "multicast": 1}


def test_stream_k_needs_a_persistent_cooperative_grid():
    shape = {"m": 8192, "n": 8192, "k": 2048}
    for clusters in ({}, {"cluster": 2}, PAIR, QUAD):  # the walkers: blocks, or clusters that share copies
        assert FAMILY.violations(FAMILY.with_defaults({**STREAM_K, **clusters}), shape, ARCH) == []
    for change in ({"persistent": 0}, {"schedule": "pingpong", "bn": 128}):
        problems = FAMILY.violations(FAMILY.with_defaults({**STREAM_K, **change}), shape, ARCH)
        (knob,) = change.keys() - {"bn"}
        assert any("stream_k=1" in p and f"{knob}={change[knob]}" in p for p in problems), problems


@pytest.mark.parametrize(
    ("shape", "blocks"),
    [({"m": 8192, "n": 8192, "k": 2048}, 132), ({"m": 256, "n": 512, "k": 4096}, 132),
     ({"m": 256, "n": 512, "k": 1024}, 4 * 16), ({"m": 128, "n": 256, "k": 64}, 1)],
)  # fmt: skip
def test_the_grid_is_every_sm_however_few_the_tiles(shape, blocks):
    """Every SM, or one block per k-tile where the tiles have fewer k-tiles than the GPU has SMs."""
    assert FAMILY.launch(FAMILY.with_defaults(STREAM_K), shape, ARCH).grid == (blocks, 1, 1)


@pytest.mark.parametrize(
    ("clusters", "shape", "blocks"),
    [(PAIR, {"m": 2900, "n": 4704, "k": 3104}, 132), (QUAD, {"m": 2900, "n": 4704, "k": 3104}, 120),
     (PAIR, {"m": 256, "n": 256, "k": 128}, 2 * 2), (QUAD, {"m": 128, "n": 256, "k": 128}, 4 * 2),
     ({"cluster": 2}, {"m": 128, "n": 256, "k": 192}, 4)],
)  # fmt: skip
def test_clusters_of_stream_k_fill_the_sms_in_whole_clusters(clusters, shape, blocks):
    """Whole clusters over the SMs the part holds them on (pairs: all 132; quads: 120), or a walker per k-tile of
    the work items (a pair's two tiles, a quad's four, the lower or past-the-edge ones idle) where there are fewer
    (the launcher fits it to the device: test_matmul_bf16_family's quad test)."""
    config = FAMILY.with_defaults({**STREAM_K, **clusters})
    assert FAMILY.launch(config, shape, ARCH).grid == (blocks, 1, 1)


@pytest.mark.parametrize(
    "config",
    [STREAM_K, {**STREAM_K, "epilogue": "direct", "bn": 192}, {**STREAM_K, "bm": 64, "bn": 128, "consumers": 1},
     {**STREAM_K, **PAIR, "bn": 224}, {**STREAM_K, **QUAD}],
    ids=["tma", "direct", "one-consumer", "pair", "quad"],
)  # fmt: skip
def test_stream_k_compiles_its_exchange_without_spills(config):
    """The partial sums go out and come back as plain global stores and loads (one per accumulator), the flag up by
    a GPU-scope release (a MEMBAR.GPU before a strong store) and polled by a GPU-scope acquire; nothing spills."""
    shape = {"m": 1000, "n": 520, "k": 264}
    variant = FAMILY.build(FAMILY.with_defaults(config), shape, ARCH)
    census = census_variant(variant)
    assert census.resources.spill_store_bytes == 0 and census.resources.stack_bytes == 0
    assert census.sass.local_loads == {}
    sass = variant.artifact.sass
    accumulators = FAMILY.accumulators(FAMILY.with_defaults(config))
    plain = lambda op: len(re.findall(rf"\b{op}\.E(?:\.64)? ", sass))  # noqa: E731
    assert plain("STG") >= accumulators and plain("LDG") >= accumulators
    assert "MEMBAR.ALL.GPU" in sass and "STG.E.STRONG.GPU" in sass and "LDG.E.STRONG.GPU" in sass
    assert re.search(r"HGMMA\.64x\d+x16\.F32\.BF16", sass)


def test_the_parameters_end_with_the_workspace_and_are_checked():
    shape = {"m": 1000, "n": 520, "k": 264}
    variant = FAMILY.build(FAMILY.with_defaults(STREAM_K), shape, ARCH)
    ptx = variant.artifact.ptx
    FAMILY.check_parameters(ptx, shape, maps=3, workspace=True)
    FAMILY.check_parameters(ptx, shape)  # either, where not said
    with pytest.raises(ConfigError, match="takes"):
        FAMILY.check_parameters(ptx, shape, maps=3, workspace=False)


class Recorder:
    """Stands in for the driver: each call recorded; a launch's parameters after the three maps read back: C's
    pointer, M, N, K, then the workspace's two pointers."""

    def __init__(self):
        self.calls = []

    def call(self, name, *args):
        if name == "cuLaunchKernel":
            params = args[-2]
            words = [ctypes.c_uint64.from_address(params[3]).value]
            words += [ctypes.c_int.from_address(p).value for p in params[4:7]]
            words += [ctypes.c_uint64.from_address(p).value for p in params[7:]]
            self.calls.append((name, words))
        else:
            self.calls.append((name,))


def test_the_launcher_allocates_one_workspace_and_passes_its_pointers_last():
    shape = {"m": 1000, "n": 520, "k": 264}
    config = FAMILY.with_defaults(STREAM_K)
    launch = FAMILY.launch(config, shape, ARCH)
    job = SimpleNamespace(
        kind="variant", config=config, cubin=b"\x7fELF-stand-in", kernel_name="matmul_bf16",
        grid=launch.grid, block=launch.block, dynamic_shared=launch.dynamic_shared,
    )  # fmt: skip
    made = []

    def allocate(slots, floats):
        made.append((slots, floats))
        return Buffer(0x7E0000000000), Buffer(0x7E0001000000)

    driver = Recorder()
    launcher = TensorMapLauncher(job, shape, driver, lambda: 0, lambda: None, "bfloat16", allocate)
    launcher.encode = lambda *args: None  # no driver to encode with here
    bufs = {"A": Buffer(0x7F0000000000), "B": Buffer(0x7F0000100000), "__out__": Buffer(0x7F0000200000)}
    launcher(bufs)
    launcher(bufs)
    assert made == [(launch.grid[0], 128 * 256)]  # one slot of bm × bn per block, once
    launches = [c for c in driver.calls if c[0] == "cuLaunchKernel"]
    assert len(launches) == 2
    assert launches[0][1] == [0x7F0000200000, 1000, 520, 264, 0x7E0000000000, 0x7E0001000000]

    with pytest.raises(ConfigError, match="workspace"):
        TensorMapLauncher(job, shape, Recorder(), lambda: 0, lambda: None)
    assert matmul_bf16.FAMILY.launcher(SimpleNamespace(kind="other", config={}), shape) is None


def test_explain_counts_the_shared_k_tiles_as_the_tail():
    """At 8192 × 8192 × 2048 with 128 × 256 tiles, 2048 tiles over 132 blocks leave the last wave 52 % full; with
    stream-K the blocks share the last wave's 2176 k-tiles, so what idles is under one k-tile a block."""
    from mage_tune.measure.explain import _tail

    shape = {"m": 8192, "n": 8192, "k": 2048}
    record = {"environment": {"sm_count": 132}, "shape": shape, "family": FAMILY.name, "arch": "sm_90a"}
    census = {"occupancy": {"blocks_per_sm": 1}}
    whole = _tail(record, {"label": "x", "config": {}}, census, str(FAMILY_FILE))
    shared = _tail(record, {"label": "x", "config": STREAM_K}, census, str(FAMILY_FILE))
    assert whole["what"] == "tiles" and whole["units"] == 2048 and round(whole["last_full"], 2) == 0.52
    assert shared["what"] == "k-tiles (stream-K)" and shared["units"] == 2048 * 32
    assert whole["idle"] > 0.03 and shared["idle"] < 0.002
    assert FAMILY.work_units(FAMILY.with_defaults({}), shape) == (2048, "tiles")


def test_a_cluster_s_tiles_past_the_edges_still_take_block_slots():
    """At 2900 × 4704 with 128 × 224 tiles (23 × 21), a multicast pair walks two tile rows at once (12 pairs of rows:
    the last pair's lower tile past M) and a quad 2 × 2 groups (12 × 11: a last column past N too), so the waves are
    of the clusters' block slots: 504 and 528 where the tiles are 483."""
    shape = {"m": 2900, "n": 4704, "k": 3104}
    units = lambda settings: FAMILY.work_units(FAMILY.with_defaults({"bn": 224, **settings}), shape)  # noqa: E731
    assert units({}) == (483, "tiles") and units({"cluster": 2}) == (483, "tiles")
    assert units(PAIR) == (12 * 21 * 2, "tiles in clusters of 2")
    assert units(QUAD) == (12 * 11 * 4, "tiles in clusters of 4")
    assert units({**QUAD, **STREAM_K}) == (12 * 11 * 4 * 49, "k-tiles in clusters of 4 (stream-K)")


def test_a_device_with_fewer_sms_than_the_grid_is_refused_before_any_launch(monkeypatch):
    """The grid is one block per SM of the arch's part (132 on sm_90) and its blocks wait on lower ones: on a device
    with fewer SMs (an H100 PCIe's 114, a MIG slice) a wait could never end, so the workspace is never made."""
    made = []

    class Cuda:
        sms = 114

        @staticmethod
        def current_device():
            return 0

        @classmethod
        def get_device_properties(cls, index):
            return SimpleNamespace(multi_processor_count=cls.sms)

    fake = SimpleNamespace(
        cuda=Cuda, float32="f32", int32="i32",
        empty=lambda *a, **k: made.append("partials") or "partials",
        zeros=lambda *a, **k: made.append("flags") or "flags",
    )  # fmt: skip
    monkeypatch.setattr(matmul_bf16.gpu, "torch", lambda: fake)
    with pytest.raises(ConfigError, match=r"launches 132 blocks.*this GPU has 114 SMs"):
        matmul_bf16._torch_workspace(132, 128 * 256)
    assert made == []
    Cuda.sms = 132
    assert matmul_bf16._torch_workspace(132, 128 * 256) == ("partials", "flags")
