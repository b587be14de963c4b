"""The static objective: a time estimate from the census alone, so search runs end to end without a GPU.

It is a model, documented and deliberately simple, not a prediction to trust over a measurement; studies record
which objective they use and never mix the two (docs/static-model.md):

    waves      = ceil(blocks / (blocks_per_sm * SMs));  wave_eff = blocks / (waves * blocks_per_sm * SMs)
    mlp_eff    = min(1, warps_per_sm * 32 * bytes_in_flight_per_thread / (DRAM bytes/s per SM * 0.8 µs))
    t_memory   = bytes_moved / (DRAM bandwidth * mlp_eff) + re-read bytes / (3 * DRAM bandwidth)
    t_compute  = flops / (FP32 rate * min(1, warps_per_sm / 16))                        (no matrix ops)
    t_compute  = (t_tensor + t_issue) / min(1, warps_per_sm / 4)                      (mma / wgmma kernels)
    time       = max(t_memory, t_compute) / wave_eff * (1 + spill_bytes / 256) + 2 µs launch

bytes in flight per thread is the larger of the SASS view's global bytes in flight and the cp.async groups in
flight times the bytes one group copies per thread. Re-read bytes are the global load bytes the SASS issues (its
static count times the threads launched: exact for fully unrolled kernels, a floor for looping ones) beyond the
bytes the problem must read; they are charged at an L2-like three times DRAM bandwidth.

A kernel whose SASS (or PTX) holds matrix ops is charged for its tensor-core work and for the instructions that
feed it. The products it issues are flops / 2 × the family's `mma_passes` (3 for 3xTF32); t_tensor is their FLOPs at
the arch's dense tensor rate for the ops' input type; t_issue is the warp instructions they take, at one per clock
per SM sub-partition: (static instructions ÷ static matrix ops) per op × ops issued. The ratio is the kernel's
operand-feed cost (fragment loads, conversions, addressing per op), the thing a bigger warp tile lowers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mage_tune.arch import ARCHS
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


# Nominal datasheet figures of one representative GPU per arch: the model's constants, not measurements. SM counts
# come from the Arch (mage_tune.arch); a suffixed arch (sm_90a) uses its base part's figures.
_NOMINAL = {  # base arch -> (part, DRAM GB/s, FP32 TFLOP/s, dense TF32 tensor TFLOP/s, FP32 lanes per SM)
    "sm_80": ("A100-SXM (nominal)", 2039.0, 19.5, 156.0, 64),
    "sm_86": ("RTX A6000 (nominal)", 768.0, 38.7, 77.4, 128),
    "sm_89": ("RTX 4090 (nominal)", 1008.0, 82.6, 82.6, 128),
    "sm_90": ("H200-SXM (nominal)", 4800.0, 67.0, 494.7, 128),
    "sm_100": ("B200 (nominal)", 8000.0, 80.0, 1100.0, 128),
}
MACHINES = {
    arch.name: Machine(_NOMINAL[arch.base][0], arch.sm_count, *_NOMINAL[arch.base][1:])
    for arch in ARCHS.values()
    if arch.base in _NOMINAL and arch.sm_count
}
LATENCY_S = 0.8e-6
LAUNCH_US = 2.0
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


def estimate_us(
    c: Census, grid: tuple[int, int, int], bytes_moved: int, flops: int, mma_passes: int = 1
) -> tuple[float, dict]:
    machine = MACHINES[c.arch]
    occ = c.occupancy
    if occ is None or occ.blocks_per_sm == 0:
        return math.inf, {"reason": "cannot launch"}
    blocks = grid[0] * grid[1] * grid[2]
    slots = occ.blocks_per_sm * machine.sms
    waves = math.ceil(blocks / slots)
    wave_eff = blocks / (waves * slots)
    in_flight = occ.warps_per_sm * 32 * bytes_in_flight_per_thread(c)
    needed = machine.dram_gbs * 1e9 / machine.sms * LATENCY_S
    mlp_eff = min(1.0, in_flight / needed)
    t_mem = bytes_moved / (machine.dram_gbs * 1e9 * mlp_eff) * 1e6
    view = c.sass or c.ptx
    issued = sum(bits * n for bits, n in view.global_loads.items()) / 8 * occ.block * blocks if view else 0
    reread = max(0.0, issued - bytes_moved)
    t_mem += reread / (3 * machine.dram_gbs * 1e9) * 1e6
    tensor = _tensor_compute_us(c, machine, flops, mma_passes)
    if tensor:
        t_comp = sum(tensor) / min(1.0, occ.warps_per_sm / TENSOR_WARPS)
    else:
        t_comp = flops / (machine.fp32_tflops * 1e12 * min(1.0, occ.warps_per_sm / 16)) * 1e6 if flops else 0.0
    spills = (c.resources.spill_store_bytes or 0) + (c.resources.spill_load_bytes or 0)
    time = max(t_mem, t_comp) / wave_eff * (1 + spills / 256) + LAUNCH_US
    return time, {
        "waves": waves,
        "wave_eff": wave_eff,
        "mlp_eff": mlp_eff,
        "t_memory_us": t_mem,
        "t_compute_us": t_comp,
        **({"t_tensor_us": tensor[0], "t_issue_us": tensor[1]} if tensor else {}),
        "machine": machine.name,
    }
