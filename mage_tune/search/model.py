"""The static objective: a time estimate from the census alone, so search runs end to end without a GPU.

It is a model, documented and deliberately simple, not a prediction to trust over a measurement; studies record
which objective they use and never mix the two (docs/static-model.md):

    waves      = ceil(blocks / (blocks_per_sm * SMs));  wave_eff = blocks / (waves * blocks_per_sm * SMs)
    mlp_eff    = min(1, warps_per_sm * 32 * bytes_in_flight_per_thread / (DRAM bytes/s per SM * 0.8 µs))
    t_memory   = bytes_moved / (DRAM bandwidth * mlp_eff) + re-read bytes / (3 * DRAM bandwidth)
    t_compute  = flops / (FP32 rate * min(1, warps_per_sm / 16))
    time       = max(t_memory, t_compute) / wave_eff * (1 + spill_bytes / 256) + 2 µs launch

bytes in flight per thread is the larger of the SASS view's global bytes in flight and the cp.async groups in
flight times the bytes one group copies per thread. Re-read bytes are the global load bytes the SASS issues (its
static count times the threads launched: exact for fully unrolled kernels, a floor for looping ones) beyond the
bytes the problem must read; they are charged at an L2-like three times DRAM bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mage_tune.arch import ARCHS
from mage_tune.census.model import Census


@dataclass(frozen=True)
class Machine:
    name: str
    sms: int
    dram_gbs: float
    fp32_tflops: float


# Nominal datasheet figures of one representative GPU per arch: the model's constants, not measurements. SM counts
# come from the Arch (mage_tune.arch); a suffixed arch (sm_90a) uses its base part's figures.
_NOMINAL = {  # base arch -> (part, DRAM GB/s, FP32 TFLOP/s)
    "sm_80": ("A100-SXM (nominal)", 2039.0, 19.5),
    "sm_86": ("RTX A6000 (nominal)", 768.0, 38.7),
    "sm_89": ("RTX 4090 (nominal)", 1008.0, 82.6),
    "sm_90": ("H200-SXM (nominal)", 4800.0, 67.0),
    "sm_100": ("B200 (nominal)", 8000.0, 80.0),
}
MACHINES = {
    arch.name: Machine(_NOMINAL[arch.base][0], arch.sm_count, *_NOMINAL[arch.base][1:])
    for arch in ARCHS.values()
    if arch.base in _NOMINAL and arch.sm_count
}
LATENCY_S = 0.8e-6
LAUNCH_US = 2.0


def bytes_in_flight_per_thread(c: Census) -> float:
    view = c.sass or c.ptx
    if view is None:
        return 4.0
    copied = sum(bits * n for bits, n in view.cp_async.items()) / 8
    per_group = copied / max(1, view.cp_async_commits)
    return max(float(view.bytes_in_flight), view.cp_async_groups_in_flight * per_group, 4.0)


def estimate_us(c: Census, grid: tuple[int, int, int], bytes_moved: int, flops: int) -> tuple[float, dict]:
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
    t_comp = flops / (machine.fp32_tflops * 1e12 * min(1.0, occ.warps_per_sm / 16)) * 1e6 if flops else 0.0
    spills = (c.resources.spill_store_bytes or 0) + (c.resources.spill_load_bytes or 0)
    time = max(t_mem, t_comp) / wave_eff * (1 + spills / 256) + LAUNCH_US
    return time, {
        "waves": waves,
        "wave_eff": wave_eff,
        "mlp_eff": mlp_eff,
        "t_memory_us": t_mem,
        "t_compute_us": t_comp,
        "machine": machine.name,
    }
