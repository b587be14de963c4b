"""Theoretical occupancy: how many blocks of a kernel fit on one SM, and which resource binds.

The rules re-implement NVIDIA's host-only calculator, `cuda_occupancy.h` (CUDA 13), for the archs mage-tune targets.
That header is the reference and tests/census/test_occupancy.py checks this module against it case by case; each rule
below says which of the header's limits it mirrors. Like `cudaOccupancyMaxActiveBlocksPerMultiprocessor` with no
cache preference set, the calculation assumes the default shared-memory carveout, which is the largest one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mage_tune.arch import ARCHS, Arch, get_arch

__all__ = ["ARCHS", "LIMITERS", "UNLIMITED", "ArchLimits", "Occupancy", "arch_limits", "occupancy"]

# The header reports a resource the kernel does not use (no registers, no barriers) as INT_MAX blocks.
UNLIMITED = 2**31 - 1

# Order in which a tie between equally binding limits is resolved.
LIMITERS = ("warps", "blocks", "registers", "shared", "barriers")

# The per-SM limits live on the Arch value object (mage_tune.arch); the old name stays for callers.
ArchLimits = Arch


@dataclass(frozen=True)
class Occupancy:
    """Blocks of one launch configuration resident on one SM."""

    block: int  # threads per block
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float  # warps_per_sm / max_warps_per_sm
    limiter: str  # one of LIMITERS, or "invalid" when a block cannot launch at all
    limits: dict[str, int] = field(hash=False)  # blocks per SM each resource allows; UNLIMITED when unconstrained


def arch_limits(arch: str | Arch) -> Arch:
    """The limits of `arch` (any name `mage_tune.arch.get_arch` takes); InputError naming the choices otherwise."""
    return get_arch(arch)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _warps_limit(lim: ArchLimits, block: int) -> int:
    # Warp slots are granted whole: a block of 100 threads holds 4 warp slots.
    if block <= 0 or block > lim.max_threads_per_block:
        return 0
    return lim.max_warps_per_sm // -(-block // lim.warp_size)


def _registers_limit(lim: ArchLimits, block: int, registers: int) -> int:
    if block <= 0 or registers < 0:
        return 0
    warps = -(-block // lim.warp_size)
    # Registers are granted per warp, rounded up to the allocation unit.
    per_warp = _round_up(registers * lim.warp_size, lim.reg_alloc_unit)
    # The hardware launch check assumes the block's warps are spread over all sub-partitions at once, so it rounds
    # the warp count up to a multiple of the sub-partition count; the plain per-block total must fit as well.
    assumed = per_warp * _round_up(warps, lim.sub_partitions)
    if assumed > lim.regs_per_block or per_warp * warps > lim.regs_per_block or registers > lim.max_regs_per_thread:
        return 0
    if per_warp == 0:
        return UNLIMITED
    # Each sub-partition owns a quarter of the register file, and a warp's registers live in one sub-partition:
    # count whole warps per sub-partition before pooling them into blocks.
    warps_per_sm = (lim.regs_per_sm // lim.sub_partitions // per_warp) * lim.sub_partitions
    return warps_per_sm // warps


def _carveout(lim: ArchLimits, size: int) -> int | None:
    """The smallest carveout step holding `size` bytes, or None when none does."""
    return next((step for step in lim.carveout_steps if size <= step), None)


def _shared_limit(lim: ArchLimits, shared_bytes: int, carveout_percent: int | None = None) -> int:
    """Blocks per SM allowed by shared memory; `carveout_percent` None is the default (no preference) carveout."""
    if shared_bytes < 0:
        return 0
    # The driver reserves shared memory for every block on top of what the kernel asks for, and grants the sum in
    # allocation units.
    per_block = _round_up(shared_bytes + lim.reserved_smem_per_block, lim.smem_alloc_unit)
    # A block may use up to the opt-in maximum (the kernel is assumed to have opted in) plus the reservation.
    if per_block > lim.smem_per_block_optin + lim.reserved_smem_per_block:
        return 0
    # No preference means the largest carveout; a preference is a percentage of it, rounded up to a carveout step.
    preferred = lim.smem_per_sm if carveout_percent is None else carveout_percent * lim.smem_per_sm // 100
    preferred = _carveout(lim, preferred)
    # The preference yields to a block that does not fit it: the SM then takes the smallest step that holds one.
    per_sm = preferred if preferred is not None and preferred >= per_block else _carveout(lim, per_block)
    if per_sm is None:
        return 0
    return per_sm // per_block


def _barriers_limit(lim: ArchLimits, barriers: int) -> int:
    if barriers < 0:
        return 0
    if lim.barriers_per_sm is None or barriers == 0:
        return UNLIMITED
    return lim.barriers_per_sm // barriers


def occupancy(arch: str | Arch, block: int, registers: int, shared_bytes: int, barriers: int = 1) -> Occupancy:
    """Theoretical occupancy of a kernel launched with `block` threads per block on `arch`.

    `registers` is registers per thread and `shared_bytes` the kernel's static plus dynamic shared memory per block as
    ptxas reports it, without the driver's per-block reservation (added here). `barriers` is named barriers per block.
    A configuration that cannot launch (no threads, more than 1024 threads, too many registers or too much shared
    memory for one block, negative counts) gives 0 blocks and limiter "invalid" rather than an error.
    """
    lim = arch_limits(arch)
    limits = {
        "warps": _warps_limit(lim, block),
        "blocks": lim.max_blocks_per_sm,
        "registers": _registers_limit(lim, block, registers),
        "shared": _shared_limit(lim, shared_bytes),
        "barriers": _barriers_limit(lim, barriers),
    }
    blocks_per_sm = min(limits.values())
    if blocks_per_sm == 0:
        return Occupancy(block, 0, 0, 0.0, "invalid", limits)
    limiter = next(name for name in LIMITERS if limits[name] == blocks_per_sm)
    warps_per_sm = blocks_per_sm * -(-block // lim.warp_size)
    return Occupancy(block, blocks_per_sm, warps_per_sm, warps_per_sm / lim.max_warps_per_sm, limiter, limits)
