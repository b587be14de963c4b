"""The occupancy calculator against NVIDIA's own: cuda_occupancy.h, compiled into a host program, is the oracle."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from mage_tune.census.occupancy import ARCHS, UNLIMITED, _shared_limit, arch_limits, occupancy
from mage_tune.errors import InputError

KB = 1024

# Reads one case per line: the device's properties, the carveout preference (-1: none), the launch; prints one line
# per case: status, active blocks, limiting-factor bits, then the warp, block, register, shared and barrier limits.
ORACLE_SOURCE = r"""
#include <cstdio>
#include <cuda_occupancy.h>

int main() {
    int major, minor, regsSm, threadsSm, regsBlock, carveout, block, regs, barriers;
    unsigned long smemSm, optin, reserved, shared;
    while (std::scanf("%d %d %d %d %lu %lu %d %lu %d %d %d %lu %d", &major, &minor, &regsSm, &threadsSm, &smemSm,
                      &optin, &regsBlock, &reserved, &carveout, &block, &regs, &shared, &barriers) == 13) {
        cudaOccDeviceProp prop;
        prop.computeMajor = major;
        prop.computeMinor = minor;
        prop.maxThreadsPerBlock = 1024;
        prop.maxThreadsPerMultiprocessor = threadsSm;
        prop.regsPerBlock = regsBlock;
        prop.regsPerMultiprocessor = regsSm;
        prop.warpSize = 32;
        prop.sharedMemPerBlock = 48 * 1024;
        prop.sharedMemPerMultiprocessor = smemSm;
        prop.numSms = 100;
        prop.sharedMemPerBlockOptin = optin;
        prop.reservedSharedMemPerBlock = reserved;

        // A kernel that opted in to the largest dynamic shared memory; its shared memory is passed as dynamic.
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = 1024;
        attr.numRegs = regs;
        attr.sharedSizeBytes = 0;
        attr.partitionedGCConfig = PARTITIONED_GC_OFF;
        attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = optin;
        attr.numBlockBarriers = barriers;
        attr.virtualResourceCount = 0;

        cudaOccDeviceState state;
        state.cacheConfig = CACHE_PREFER_NONE;
        state.carveoutConfig = carveout;

        cudaOccResult res;
        memset(&res, 0, sizeof res);
        cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&res, &prop, &attr, &state, block, shared);
        std::printf("%d %d %u %d %d %d %d %d\n", (int)err, res.activeBlocksPerMultiprocessor, res.limitingFactors,
                    res.blockLimitWarps, res.blockLimitBlocks, res.blockLimitRegs, res.blockLimitSharedMem,
                    res.blockLimitBarriers);
    }
    return 0;
}
"""

# cudaOccLimitingFactor bits, in the order ties are resolved.
FACTOR_BITS = {"warps": 0x01, "blocks": 0x08, "registers": 0x02, "shared": 0x04, "barriers": 0x10}

BLOCKS = [0, 32, 64, 96, 100, 128, 160, 192, 200, 224, 256, 288, 320, 352, 384, 416, 480, 500, 512, 544, 640]
BLOCKS += [736, 768, 800, 896, 960, 992, 1000, 1023, 1024, 1025, 1056, 2048]
REGISTERS = [0, 16, 24, 32, 40, 48, 56, 63, 64, 65, 72, 80, 96, 112, 128, 152, 168, 192, 200, 224, 232, 255, 256, 257]


def shared_sizes(lim) -> list[int]:
    """Small sizes, the allocation unit's edges, and sizes whose allocation lands just around each carveout step."""
    sizes = {0, 1, 127, 128, 129, 4 * KB, 12 * KB, 47 * KB, 48 * KB, 48 * KB + 1}
    for step in lim.carveout_steps[1:]:
        for delta in (-129, -128, -1, 0, 1, 128):
            sizes.add(step - lim.reserved_smem_per_block + delta)
    for delta in (-128, -1, 0, 1, 128):
        sizes.add(lim.smem_per_block_optin + delta)
    for divisor in (2, 3, 5, 7):
        sizes.add(lim.smem_per_block_optin // divisor)
    return sorted(s for s in sizes if s >= 0)


def grid(lim) -> list[tuple[int, int, int, int]]:
    """(block, registers, shared, barriers): every block size with every register count, shared sizes mixed in."""
    rng = random.Random(f"occupancy-{lim.name}")
    shared = shared_sizes(lim)
    barriers = [1] * 6 + [0, 2, 3, 4, 16]
    cases = [(b, r, rng.choice(shared), rng.choice(barriers)) for b in BLOCKS for r in REGISTERS]
    cases += [(rng.choice(BLOCKS[1:30]), rng.choice(REGISTERS[1:22]), s, 1) for s in shared for _ in range(3)]
    cases += [(b, r, s, n) for b in (32, 64) for r in (16, 32) for s in (0, 1024) for n in (0, 1)]  # block-slot bound
    return cases


def header_dir() -> Path | None:
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda_occupancy.h").is_file():
            return Path(root) / "include"
    return None


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """Runs the header over many cases at once: [(arch, carveout, block, registers, shared, barriers)] -> lines."""
    include = header_dir()
    if include is None:
        pytest.skip("cuda_occupancy.h not found under $CUDA_HOME or /usr/local/cuda")
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    work = tmp_path_factory.mktemp("occupancy_oracle")
    (work / "oracle.cpp").write_text(ORACLE_SOURCE)
    exe = work / "oracle"
    subprocess.run(["g++", "-std=c++11", "-O1", f"-I{include}", "-o", str(exe), str(work / "oracle.cpp")], check=True)

    def run(cases):
        lines = []
        for arch, carveout, block, registers, shared, barriers in cases:
            lim = ARCHS[arch]
            lines.append(
                f"{lim.compute_major} {lim.compute_minor} {lim.regs_per_sm} {lim.max_threads_per_sm} "
                f"{lim.smem_per_sm} {lim.smem_per_block_optin} {lim.regs_per_block} {lim.reserved_smem_per_block} "
                f"{carveout} {block} {registers} {shared} {barriers}"
            )
        out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
        rows = [list(map(int, line.split())) for line in out.stdout.splitlines()]
        assert len(rows) == len(cases)
        return rows

    return run


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_matches_header(oracle, arch):
    lim = ARCHS[arch]
    cases = grid(lim)
    assert len(cases) > 500
    rows = oracle([(arch, -1, *case) for case in cases])
    mismatches = []
    for (block, registers, shared, barriers), row in zip(cases, rows, strict=True):
        status, active, bits, *header_limits = row
        occ = occupancy(arch, block, registers, shared, barriers)
        if status != 0:  # the header rejects the input outright (a block of no threads)
            got, want = (occ.blocks_per_sm, occ.limiter), (0, "invalid")
        else:
            header = dict(zip(FACTOR_BITS, header_limits, strict=True))
            # The header sets the barrier bit after the others, leaving theirs set even when barriers bind lower:
            # a factor binds when its bit is set and its limit is the final count.
            binding = [name for name, bit in FACTOR_BITS.items() if bits & bit and header[name] == active]
            want = (active, binding[0] if active else "invalid", header)
            got = (occ.blocks_per_sm, occ.limiter, occ.limits)
        if got != want:
            mismatches.append(f"block={block} regs={registers} shared={shared} bars={barriers}: {got} != {want}")
        warps = occ.blocks_per_sm * -(-block // 32) if occ.blocks_per_sm else 0
        assert (occ.warps_per_sm, occ.fraction) == (warps, warps / lim.max_warps_per_sm)
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ, e.g.\n" + "\n".join(mismatches[:10])


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_carveout_preferences_match_header(oracle, arch):
    """The carveout-step rule, checked with explicit preferences (the public calculator always uses the default)."""
    lim = ARCHS[arch]
    cases = [(arch, pct, 128, 32, s, 1) for pct in (0, 10, 25, 33, 50, 75, 100) for s in shared_sizes(lim)]
    rows = oracle(cases)
    got = [_shared_limit(lim, shared, pct) for _, pct, _, _, shared, _ in cases]
    want = [row[6] if row[0] == 0 else 0 for row in rows]
    assert got == want


@pytest.mark.parametrize(("arch", "fraction"), [("sm_80", 0.75), ("sm_86", 1.0), ("sm_89", 1.0), ("sm_90", 0.75)])
def test_documented_example(arch, fraction):
    occ = occupancy(arch, 256, 40, 0)
    assert occ.blocks_per_sm == 6
    assert occ.warps_per_sm == 48
    assert occ.fraction == fraction
    assert occ.limits["registers"] == 6
    # On the 48-warp parts the warp slots bind just as hard; ties go to "warps", the first in order.
    assert occ.limiter == ("registers" if fraction < 1 else "warps")


def test_arch_facts():
    facts = {  # max warps, max blocks, shared per SM (KB), opt-in per block (KB)
        "sm_80": (64, 32, 164, 163),
        "sm_86": (48, 16, 100, 99),
        "sm_89": (48, 24, 100, 99),
        "sm_90": (64, 32, 228, 227),
        "sm_90a": (64, 32, 228, 227),
        "sm_100a": (64, 32, 228, 227),
        "sm_120": (48, 24, 100, 99),
    }
    for arch, (warps, blocks, smem, optin) in facts.items():
        lim = arch_limits(arch)
        assert lim.name == arch
        assert lim.base == arch.rstrip("af")
        assert (lim.max_warps_per_sm, lim.max_blocks_per_sm) == (warps, blocks)
        assert (lim.smem_per_sm, lim.smem_per_block_optin) == (smem * KB, optin * KB)
        assert (lim.regs_per_sm, lim.regs_per_block, lim.reserved_smem_per_block) == (65536, 65536, 1024)
        assert lim.carveout_steps[-1] == lim.smem_per_sm


def test_unknown_arch():
    with pytest.raises(InputError) as info:
        arch_limits("sm_75")
    assert str(info.value) == f"unknown arch 'sm_75'; supported: {', '.join(ARCHS)}"
    assert "sm_90a" in str(info.value)
    with pytest.raises(InputError):
        occupancy("sm_75", 128, 32, 0)


@pytest.mark.parametrize(
    ("block", "registers", "shared", "zero_limit"),
    [
        (0, 32, 0, "warps"),
        (1025, 32, 0, "warps"),
        (128, 257, 0, "registers"),
        (1024, 65, 0, "registers"),  # 2304 registers per warp x 32 warps > 64K
        (288, 224, 0, "registers"),  # 63 K registers fit 64 K, but 9 warps of 7 K don't fit 4 quarters of 16 K
        (128, 32, 227 * KB + 1, "shared"),
        (128, 32, -1, "shared"),
    ],
)
def test_invalid_launches(block, registers, shared, zero_limit):
    occ = occupancy("sm_90", block, registers, shared)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.fraction, occ.limiter) == (0, 0, 0.0, "invalid")
    assert occ.limits[zero_limit] == 0


def test_shared_reservation_added_once():
    # 227 KB + the 1 KB reservation is exactly the 228 KB carveout: one block fits, a byte more does not.
    assert occupancy("sm_90", 128, 32, 227 * KB).blocks_per_sm == 1
    # 48 KB + 1 KB reserved per block: four blocks in 228 KB, limited by shared memory.
    occ = occupancy("sm_90", 128, 32, 48 * KB)
    assert (occ.blocks_per_sm, occ.limiter) == (4, "shared")
    # Allocation is in 128-byte units: 1 byte costs 1152 bytes with the reservation, so 164 KB holds 145 blocks.
    assert occupancy("sm_80", 32, 16, 1).limits["shared"] == 164 * KB // 1152


def test_unused_resources_are_unlimited():
    occ = occupancy("sm_90", 128, 0, 0, barriers=0)
    assert occ.limits["registers"] == UNLIMITED
    assert occ.limits["barriers"] == UNLIMITED
    assert occupancy("sm_80", 128, 32, 0, barriers=4).limits["barriers"] == UNLIMITED  # no barrier limit before 9.0
    occ = occupancy("sm_90", 32, 16, 0, barriers=4)
    assert (occ.blocks_per_sm, occ.limiter) == (16, "barriers")
