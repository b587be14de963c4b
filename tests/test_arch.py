"""The Arch value object: names, facts, errors, and whether this machine's ptxas can assemble each arch."""

from __future__ import annotations

import subprocess

import pytest
from conftest import tool

from mage_tune.arch import ARCH_NAMES, Arch, arch_of_ptx_target, assemblable, get_arch
from mage_tune.compile import check_arch
from mage_tune.errors import InputError

KB = 1024


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("sm_90a", "sm_90a"), ("90a", "sm_90a"), ("SM_90A", "sm_90a"), ("compute_90a", "sm_90a"), ("sm100a", "sm_100a")],
)
def test_spellings(spelling, name):
    assert get_arch(spelling).name == name
    assert check_arch(spelling) == name


def test_facts():
    h = get_arch("sm_90a")
    assert isinstance(h, Arch)
    assert (h.capability, h.suffix, h.base, h.compute) == ((9, 0), "a", "sm_90", "compute_90a")
    assert (h.sm_count, h.smem_per_block_optin, h.max_threads_per_sm) == (132, 227 * KB, 2048)
    assert {a: get_arch(a).sm_count for a in ("sm_80", "sm_86", "sm_89", "sm_90")} == {
        "sm_80": 108,
        "sm_86": 84,
        "sm_89": 128,
        "sm_90": 132,
    }
    assert get_arch("sm_120").sm_count is None
    assert get_arch("sm_86").smem_per_block_optin == get_arch("sm_89").smem_per_block_optin == 99 * KB
    assert get_arch("sm_80").smem_per_block_optin == 163 * KB
    # Same hardware: a feature suffix changes the code allowed, never the limits.
    plain = get_arch("sm_90")
    assert {k: v for k, v in vars(h).items() if k not in ("name", "suffix")} == {
        k: v for k, v in vars(plain).items() if k not in ("name", "suffix")
    }


@pytest.mark.parametrize("bad", ["sm_75", "sm_103a", "banana", ""])
def test_unknown_names_the_choices(bad):
    with pytest.raises(InputError) as info:
        get_arch(bad)
    assert "sm_90a" in str(info.value) and "sm_120" in str(info.value)


def test_ptx_target():
    assert arch_of_ptx_target("sm_90a").name == "sm_90a"
    assert arch_of_ptx_target("sm_80, debug").name == "sm_80"
    with pytest.raises(InputError):
        arch_of_ptx_target("sm_75")


def test_assemblable_matches_ptxas_help():
    listed = subprocess.run([tool("ptxas"), "--help"], capture_output=True, text=True).stdout
    for name in ARCH_NAMES:
        if f"{name} " in listed or f"{name}," in listed or f"{name}\n" in listed:
            assert assemblable(name), name
    assert assemblable("sm_90a")


# NVIDIA's published limits (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"):
# shared memory per SM and per block (opt-in), KB; resident warps per SM; SMs of the reference part where one is.
PUBLISHED = {
    (8, 0): (164, 163, 64, 108),  # A100
    (8, 6): (100, 99, 48, 84),  # A40 / full GA102
    (8, 9): (100, 99, 48, 128),  # RTX 4090
    (9, 0): (228, 227, 64, 132),  # H100 SXM / H200
    (10, 0): (228, 227, 64, 148),  # B200
    (12, 0): (100, 99, 48, None),  # parts differ widely
}


@pytest.mark.parametrize("name", ARCH_NAMES)
def test_every_arch_holds_nvidias_published_limits(name):
    a = get_arch(name)
    smem_sm, smem_block, warps, sms = PUBLISHED[a.capability]
    assert (a.smem_per_sm, a.smem_per_block_optin, a.max_warps_per_sm, a.sm_count) == (
        smem_sm * KB,
        smem_block * KB,
        warps,
        sms,
    )
    assert a.max_threads_per_block == 1024 and a.regs_per_sm == 64 * KB


def test_the_families_take_their_arch_facts_from_arch_py():
    """The families once kept copies of these facts that contradicted arch.py (sm_100 with 132 SMs, sm_120 with
    227 KB of shared memory a block)."""
    from mage_tune.kernels import get_family

    layernorm = get_family("layernorm")
    blackwell, hopper = get_arch("sm_100"), get_arch("sm_90")
    config = layernorm.complete({"persist": 2}, {"m": 1 << 20, "d": 768}, blackwell)
    assert layernorm.launch(config, {"m": 1 << 20, "d": 768}, blackwell).grid[0] == 2 * 148
    matmul = get_family("matmul")
    shape = {"m": 1024, "n": 1024, "k": 1024}
    big = next(c for c in matmul.configs(shape, hopper) if 99 * KB < matmul.shared_bytes(c) <= 227 * KB)
    assert any("exceeds" in v for v in matmul.copy_violations(big, shape, get_arch("sm_120")))
    assert not any("exceeds" in v for v in matmul.copy_violations(big, shape, hopper))


def test_an_arch_stands_where_its_name_stood():
    """Family plug-ins written when they were handed the arch's name compare, format and key by it still."""
    h = get_arch("sm_90a")
    assert str(h) == f"{h}" == f"{h:>6}".strip() == "sm_90a" and f"on {h}" == "on sm_90a"
    assert h == "sm_90a" and h == "sm_90a" and h != "sm_90" and h in ("sm_80", "sm_90a")
    assert h == get_arch("90a") and h != get_arch("sm_90") and h.plain == get_arch("sm_90")
    assert {"sm_90a": 1}[h] == 1 and {h: 1}["sm_90a"] == 1
    assert get_arch(h) is h  # already an Arch: nothing to convert


def test_the_static_models_part_figures_live_on_the_arch():
    from mage_tune.search.model import MACHINES

    assert get_arch("sm_120").nominal is None and "sm_120" not in MACHINES
    h200 = MACHINES["sm_90a"]
    assert (h200.name, h200.sms, h200.dram_gbs) == ("H200-SXM (nominal)", 132, 4800.0)
    assert {name for name in MACHINES} == {a for a in ARCH_NAMES if get_arch(a).nominal}


def test_clusters_hold_the_sms_whose_gpcs_take_whole_clusters():
    """Blocks resident at once in clusters: sm_90's part fills all 132 SMs with pairs and 120 with 2 × 2 clusters
    (what an H100 SXM's driver answered); a size it has no count for, whole clusters of every SM; with two blocks to
    an SM, twice the SMs' slots in whole clusters; no clusters, every SM's slots."""
    hopper = get_arch("sm_90a")
    assert [hopper.resident_blocks(size) for size in (1, 2, 4, 8)] == [132, 132, 120, 128]
    assert hopper.resident_blocks(4, blocks_per_sm=2) == 240 and hopper.resident_blocks(1, blocks_per_sm=3) == 396
    assert get_arch("sm_90").resident_blocks(4) == 120  # the same part, plain or suffixed
    assert get_arch("sm_100a").resident_blocks(4) == 148 and get_arch("sm_80").resident_blocks() == 108
