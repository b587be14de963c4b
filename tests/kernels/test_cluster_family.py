"""The example cluster layer norm (examples/layernorm_cluster) without a GPU: its space at a wide row, what the
census reads from its real compiled kernels (the cluster's dims, cluster barriers in PTX and SASS, the loads of a
slice), and clear errors for what it cannot take. Its correctness and time are tests/test_gpu_families.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.errors import ConfigError
from mage_tune.kernels import load_family

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "examples/layernorm_cluster/family.py")
WIDE = {"m": 8192, "d": 6144}


@pytest.fixture(scope="module")
def family():
    return load_family(SPEC)


def _census(family, config, shape):
    variant = family.build(family.complete(config, shape, get_arch("sm_90")), shape, get_arch("sm_90"))
    (census,) = census_artifact(
        variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )
    return variant, census.to_json()


@pytest.mark.parametrize(("cluster", "threads"), [(1, 512), (2, 128), (4, 256), (8, 64)])
def test_each_cta_loads_its_slice_and_meets_its_peers_at_three_cluster_barriers(family, cluster, threads):
    variant, census = _census(family, {"cluster": cluster, "threads": threads}, WIDE)
    chunks = -(-WIDE["d"] // cluster // (4 * threads))
    assert variant.launch.grid == (WIDE["m"] * cluster, 1, 1) and variant.threads == threads
    # __cluster_dims__ where the row is split; cluster=1 launches plain CTAs (each its own cluster of one)
    assert (census["cluster"] or {}).get("dims") == ([cluster, 1, 1] if cluster > 1 else None)
    for view in ("ptx", "sass"):
        # two reductions, each a block barrier then a cluster barrier, and the arrival that guards the exit; the
        # control (cluster=1) has block barriers where the cluster's are
        clustered = {"arrive": 3, "wait": 3} if cluster > 1 else {}
        assert census[view]["cluster_barriers"] == clustered, view
        assert census[view]["barriers"] == (2 if cluster > 1 else 4), view
    # every arrival a release, which ptxas gives a MEMBAR.ALL.GPU before each UCGABAR_ARV: a relaxed one before the
    # exit lets a peer leave while this CTA's read of its shared memory is still in flight
    assert "arrive.relaxed" not in variant.artifact.ptx
    assert census["ptx"]["memory_fences"] == {}
    assert census["sass"]["memory_fences"] == ({"MEMBAR.ALL.GPU": 3} if cluster > 1 else {})
    # x's slice in float4 loads (one per chunk), scale's and bias's beside the stores: 3 × chunks, all 128-bit
    assert census["sass"]["global_loads"]["128"] == 3 * chunks
    assert census["sass"]["global_stores"]["128"] == chunks


def test_the_space_at_a_wide_row_and_its_limits(family):
    configs = list(family.configs(WIDE, get_arch("sm_90")))
    assert configs and {c["cluster"] for c in configs} == {1, 2, 4, 8}
    assert all(family.chunks(c, WIDE) <= 16 and c["threads"] * 4 <= WIDE["d"] // c["cluster"] for c in configs)
    # a slice too wide for registers, a slice too narrow for the threads, a row that does not split into float4, more
    # CTAs than a grid holds
    with pytest.raises(ConfigError, match="over the 16 held in registers"):
        family.complete({"cluster": 1, "threads": 64}, WIDE, get_arch("sm_90"))
    with pytest.raises(ConfigError, match="some threads would hold nothing"):
        family.complete({"cluster": 8, "threads": 512}, WIDE, get_arch("sm_90"))
    with pytest.raises(ConfigError, match="multiple of 16"):
        family.complete({"cluster": 4}, {"m": 64, "d": 1000}, get_arch("sm_90"))
    with pytest.raises(ConfigError, match="over the grid's 2147483647 blocks"):
        family.complete({"cluster": 8, "threads": 128}, {"m": 2**28, "d": 6144}, get_arch("sm_90"))
    with pytest.raises(ConfigError, match="clusters need sm_90"):
        family.complete({"cluster": 2}, WIDE, get_arch("sm_80"))
