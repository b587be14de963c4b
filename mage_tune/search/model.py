"""The static objective: a time estimate from the census alone, so search runs end to end without a GPU.

It is a model, documented and deliberately simple, not a prediction to trust over a measurement; studies record
which objective they use and never mix the two (docs/static-model.md):

    k          = ceil(blocks / SMs): the blocks of the busiest SM (the scheduler spreads a grid over the SMs first),
                 run in rounds of c = blocks_per_sm blocks at once, the last round the rest; a kernel in clusters
                 spreads over the SMs whose GPCs hold whole clusters (sm_90's 2 × 2 clusters: 120 of 132)
    mlp_eff(c) = min(1, c * warps_per_block * 32 * bytes_in_flight_per_thread / (DRAM bytes/s per SM * 0.8 µs))
    t_memory   = bytes_moved / DRAM bandwidth + re-read bytes / (3 * DRAM bandwidth)      (at full efficiency)
    t_compute  = flops / FP32 rate,  efficiency min(1, c * warps_per_block / 16)          (no matrix ops)
    t_compute  = t_tensor + t_issue,  efficiency min(1, c * warps_per_block / 4)          (mma / wgmma kernels)
    time       = sum over the busiest SM's rounds of c * SMs / blocks * max(t_memory / mlp_eff(c),
                 t_compute / compute_eff(c)) * (1 + spill_bytes / 256), at least walk_steps * 3.5 µs,
                 + serial_turns * 6 µs + 2 µs launch; a walking kernel at least its twin's time (below)

serial_turns is the family's count of the turns one output tile waits for other blocks' parts, in order (serial
split-K: split_k - 1); a turn is a tile's read-modify-write through L2 and a flag's round trip. walk_steps is the
family's count of the pieces of work one block does one after another (a persistent layer norm's row groups): each
is a dependent round trip (load, reduce, store), so no grid finishes faster than its longest walk. The census counts
a walking kernel's loop once, so its re-reads (a layer norm's scale and bias, read again for every row group) escape
the count: the family names its twin, the same work a piece per block, and a walker costs at least the twin's time.

A grid of full rounds everywhere costs what it did when the model counted waves of blocks_per_sm × SMs slots; a grid
smaller than that (128 blocks with two slots per SM run one per SM) or a short last round is charged at the
concurrency it really has, which costs nothing where that concurrency still saturates the SM.

bytes in flight per thread is the larger of the SASS view's global bytes in flight and the cp.async groups in
flight times the bytes one group copies per thread. Re-read bytes are the global bytes the SASS reads, by loads and by
cp.async copies (its static count times the threads launched: exact for fully unrolled kernels, a floor for looping
ones), beyond the bytes the problem must read; they are charged at an L2-like three times DRAM bandwidth.

A kernel whose SASS (or PTX) holds matrix ops is charged for its tensor-core work and for the instructions that
feed it. The products it issues are flops / 2 × the family's `mma_passes` (3 for 3xTF32); t_tensor is their FLOPs at
the arch's dense tensor rate for the ops' input type; t_issue is the warp instructions they take, at one per clock
per SM sub-partition: (static instructions ÷ static matrix ops) per op × ops issued. The ratio is the kernel's
operand-feed cost (fragment loads, conversions, addressing per op), the thing a bigger warp tile lowers.
"""

from __future__ import annotations

import math
import re
from dataclasses import astuple, dataclass

from mage_tune.arch import ARCHS
from mage_tune.census import census_variant
from mage_tune.census.model import Census


@dataclass(frozen=True)
class Machine:
    name: str
    sms: int
    dram_gbs: float
    fp32_tflops: float
    tf32_tflops: float  # dense tensor-core rate with TF32 inputs; 16-bit inputs twice, 8-bit four times that
    fp32_lanes: int  # FP32 FMA lanes per SM: with fp32_tflops, they give the clock

    @property
    def warp_issues_per_s(self) -> float:
        """Warp instructions per second: one per clock in each of an SM's four sub-partitions."""
        clock = self.fp32_tflops * 1e12 / (2 * self.fp32_lanes * self.sms)
        return 4 * clock * self.sms


# The nominal figures of each arch's representative part (mage_tune.arch): the model's constants, not measurements.
MACHINES = {
    arch.name: Machine(arch.nominal.name, arch.sm_count, *astuple(arch.nominal)[1:])
    for arch in ARCHS.values()
    if arch.nominal
}
LATENCY_S = 0.8e-6
LAUNCH_US = 2.0
TURN_US = 6.0  # per serial turn; each extra split-K slice added 6-8 µs in the 512³ searches on an H200
# per step of a block's walk: the fastest persistent layer norm of ten H200 searches took 3.6 µs per row group it
# walked, launch included (records/h200-2026-11-30-warm-start.tar.xz member layernorm/)
STEP_US = 3.5
TENSOR_WARPS = 4  # one warp per SM sub-partition keeps its tensor core busy; independent mma chains do the rest
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)|(\d+)x(\d+)x(\d+)")  # PTX m16n8k8; SASS HGMMA 64x16x16
_HMMA_PRODUCTS = {"884": 8 * 8 * 4, "1684": 16 * 8 * 4, "1688": 16 * 8 * 8, "16816": 16 * 8 * 16, "16832": 16 * 8 * 32}


def _speed(name: str) -> float | None:
    """The op's tensor rate over TF32's, from its input type (SASS HMMA without a type suffix is f16); None for FP64
    (DMMA), whose rate the constants do not hold."""
    types = set(name.lower().split(".")[1:])
    if "f64" in types or name.startswith("DMMA"):
        return None
    if "tf32" in types:
        return 1
    if types & {"s8", "u8", "e4m3", "e5m2"}:
        return 4
    return 2 if types & {"f16", "bf16"} or name.startswith(("HMMA", "HGMMA")) else 1


def _matrix_op(view) -> tuple[int, float, float] | None:
    """(static matrix ops, products one warp's op does, its speed over TF32) of the view's most frequent matrix op;
    None where the op's shape or type is not one the model knows."""
    if not view.matrix_shapes:
        return None
    name = max(view.matrix_shapes, key=view.matrix_shapes.get)
    found = _SHAPE.search(name)
    if found:
        m, n, k = (int(g) for g in found.groups() if g)
        products = m * n * k
    else:
        products = _HMMA_PRODUCTS.get(name.split(".")[1] if "." in name else "")
    speed = _speed(name)
    if not products or speed is None:
        return None
    if name.startswith(("HGMMA", "wgmma")):
        products /= 4  # a warpgroup's op: each of its four warps issues it
    return sum(view.matrix_shapes.values()), products, speed


def _tensor_compute_us(c: Census, machine: Machine, flops: int, mma_passes: int) -> tuple[float, float] | None:
    view = c.sass or c.ptx
    op = _matrix_op(view) if view is not None else None
    if op is None or not flops:
        return None
    static_ops, products_per_op, speed = op
    issued = flops / 2 * mma_passes
    t_tensor = 2 * issued / (machine.tf32_tflops * 1e12 * speed) * 1e6
    t_issue = issued / products_per_op * (view.instructions / static_ops) / machine.warp_issues_per_s * 1e6
    return t_tensor, t_issue


def bytes_in_flight_per_thread(c: Census) -> float:
    view = c.sass or c.ptx
    if view is None:
        return 4.0
    copied = sum(bits * n for bits, n in view.cp_async.items()) / 8
    per_group = copied / max(1, view.cp_async_commits)
    return max(float(view.bytes_in_flight), view.cp_async_groups_in_flight * per_group, 4.0)


def busiest_sm_rounds(blocks: int, sms: int, blocks_per_sm: int) -> list[int]:
    """Blocks resident at once on the busiest SM, round after round: ceil(blocks / SMs) of them in all."""
    k = -(-blocks // sms)
    return [blocks_per_sm] * (k // blocks_per_sm) + ([k % blocks_per_sm] if k % blocks_per_sm else [])


def _cluster_sms(c: Census) -> int:
    """The SMs a grid spreads over: every SM alone, in clusters those whose GPCs hold whole clusters
    (Arch.resident_blocks; the machine's SMs are its arch's)."""
    dims = c.cluster.dims if c.cluster else None
    return ARCHS[c.arch].resident_blocks(math.prod(dims) if dims else 1)


def estimate_us(
    c: Census,
    grid: tuple[int, int, int],
    bytes_moved: int,
    flops: int,
    mma_passes: int = 1,
    serial_turns: int = 0,
    walk_steps: int = 0,
) -> tuple[float, dict]:
    machine = MACHINES[c.arch]
    occ = c.occupancy
    if occ is None or occ.blocks_per_sm == 0:
        return math.inf, {"reason": "cannot launch"}
    blocks = grid[0] * grid[1] * grid[2]
    rounds = busiest_sm_rounds(blocks, _cluster_sms(c), occ.blocks_per_sm)
    warps_per_block = occ.warps_per_sm / occ.blocks_per_sm
    needed = machine.dram_gbs * 1e9 / machine.sms * LATENCY_S
    per_warp_in_flight = 32 * bytes_in_flight_per_thread(c)
    t_mem = bytes_moved / (machine.dram_gbs * 1e9) * 1e6
    view = c.sass or c.ptx
    # global reads: plain loads and cp.async copies (into shared memory, from global all the same)
    issued = sum(bits * n for loads in (view.global_loads, view.cp_async) for bits, n in loads.items()) if view else 0
    issued *= occ.block * blocks / 8
    reread = max(0.0, issued - bytes_moved)
    t_mem += reread / (3 * machine.dram_gbs * 1e9) * 1e6
    tensor = _tensor_compute_us(c, machine, flops, mma_passes)
    if tensor:
        t_comp, saturating_warps = sum(tensor), TENSOR_WARPS
    else:
        t_comp, saturating_warps = (flops / (machine.fp32_tflops * 1e12) * 1e6 if flops else 0.0), 16

    def round_us(resident: int) -> float:
        warps = resident * warps_per_block
        mlp_eff = min(1.0, warps * per_warp_in_flight / needed)
        return resident * machine.sms / blocks * max(t_mem / mlp_eff, t_comp / min(1.0, warps / saturating_warps))

    spills = (c.resources.spill_store_bytes or 0) + (c.resources.spill_load_bytes or 0)
    t_turns, t_walk = serial_turns * TURN_US, walk_steps * STEP_US
    time = max(sum(round_us(r) for r in rounds) * (1 + spills / 256), t_walk) + t_turns + LAUNCH_US
    full_warps = occ.warps_per_sm
    return time, {
        "waves": len(rounds),
        "blocks_per_busiest_sm": sum(rounds),
        "wave_eff": blocks / (machine.sms * sum(rounds)),
        "mlp_eff": min(1.0, rounds[0] * warps_per_block * per_warp_in_flight / needed),
        "t_memory_us": t_mem / min(1.0, full_warps * per_warp_in_flight / needed),
        "t_compute_us": t_comp / min(1.0, full_warps / saturating_warps),
        **({"t_turns_us": t_turns} if serial_turns else {}),
        **({"t_walk_us": t_walk} if walk_steps else {}),
        **({"t_tensor_us": tensor[0], "t_issue_us": tensor[1]} if tensor else {}),
        "machine": machine.name,
    }


def estimate_variant(family, variant, census: Census) -> tuple[float, dict]:
    """estimate_us for one built variant of `family`, with the family's own counts for its shape and config; a
    walking kernel costs at least its twin (`Family.walk_twin`), whose census counts the loads its loop counts once."""
    shape = variant.shape
    time, parts = estimate_us(
        census,
        variant.launch.grid,
        family.bytes_moved(shape),
        family.flops(shape),
        family.mma_passes,
        family.serial_turns(variant.config),
        family.walk_steps(variant.config, shape, math.prod(variant.launch.grid)),
    )
    twin = family.walk_twin(variant.config)
    if twin is not None and not family.config_problems(twin) and not family.violations(twin, shape, variant.arch):
        built = family.build(twin, shape, variant.arch, checked=True)
        twin_time, _ = estimate_variant(family, built, census_variant(built))
        time, parts = max(time, twin_time), {**parts, "t_twin_us": twin_time}
    return time, parts
