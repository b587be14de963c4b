"""GPU architectures as one value object: what an `sm_XY[a|f]` target is, and the per-SM limits that go with it.

Every per-arch fact mage-tune uses lives here: compile (which `-arch` to pass), the census (which arch a PTX's
`.target` names, what cuobjdump folds into SHARED), occupancy (the limits `cuda_occupancy.h` uses), the static
search model (SM count) and the CLI (`--arch` choices). The occupancy limits follow NVIDIA's host-only calculator,
`cuda_occupancy.h` (CUDA 13); tests/census/test_occupancy.py checks them against it for every arch listed here.

A feature suffix changes what code may run, not the hardware limits: `sm_90a` is `sm_90` with the
architecture-specific instructions (wgmma, setmaxnreg) that only run on that exact part; `f` marks a
family-portable target (Blackwell). Whether the local toolchain can assemble an arch is a property of the machine,
not of the arch: `assemblable(arch)` asks the ptxas copies found by `mage_tune.toolchain`.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass

from mage_tune import toolchain
from mage_tune.errors import InputError

__all__ = [
    "ARCH_NAMES",
    "DEFAULT_ARCH",
    "SM_COUNT_UNKNOWN_PART",
    "Arch",
    "NominalPart",
    "arch_of_ptx_target",
    "assemblable",
    "get_arch",
    "nominal_bandwidth_gbs",
    "parse_arch_name",
    "peak_tflops",
]

KB = 1024
SM_COUNT_UNKNOWN_PART = 132  # SMs to plan for where the part is unknown: the H200's (Arch.sms, records without one)

# Carveout steps (bytes) the SM's unified L1/shared memory can be configured to, ascending (cuda_occupancy.h).
_STEPS_100 = tuple(s * KB for s in (0, 8, 16, 32, 64, 100))  # cc 8.6, 8.9, 12.x
_STEPS_164 = tuple(s * KB for s in (0, 8, 16, 32, 64, 100, 132, 164))  # cc 8.0
_STEPS_228 = tuple(s * KB for s in (0, 8, 16, 32, 64, 100, 132, 164, 196, 228))  # cc 9.0, 10.0


@dataclass(frozen=True)
class NominalPart:
    """Datasheet figures of one representative part of an arch: the static search model's constants, not
    measurements (its SM count is the Arch's)."""

    name: str
    dram_gbs: float
    fp32_tflops: float
    tf32_tflops: float  # dense tensor-core rate with TF32 inputs; 16-bit inputs twice, 8-bit four times that
    fp32_lanes: int  # FP32 FMA lanes per SM: with fp32_tflops, they give the clock


# Base arch -> its representative part; a suffixed arch (sm_90a) is its base part. None for sm_120 (parts differ).
_NOMINAL_PARTS = {
    "sm_80": NominalPart("A100-SXM (nominal)", 2039.0, 19.5, 156.0, 64),
    "sm_86": NominalPart("RTX A6000 (nominal)", 768.0, 38.7, 77.4, 128),
    "sm_89": NominalPart("RTX 4090 (nominal)", 1008.0, 82.6, 82.6, 128),
    "sm_90": NominalPart("H200-SXM (nominal)", 4800.0, 67.0, 494.7, 128),
    "sm_100": NominalPart("B200 (nominal)", 8000.0, 80.0, 1100.0, 128),
}


@dataclass(frozen=True)
class Arch:
    """One compile target and the per-SM and per-block limits of the parts that run it."""

    name: str  # "sm_90a"
    capability: tuple[int, int]  # compute capability, (9, 0)
    suffix: str  # "" plain, "a" arch-specific features, "f" family-portable features
    sm_count: int | None  # SMs of the usual part (A100 108, H100/H200 SXM 132); None where parts differ widely
    max_warps_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int  # largest carveout, bytes
    smem_per_block_optin: int  # most shared memory one block may opt in to, bytes, without the reservation
    carveout_steps: tuple[int, ...]  # shared-memory sizes (bytes) the SM can be configured to, ascending
    barriers_per_sm: int | None  # named-barrier budget; None where the calculator models no barrier limit
    res_usage_reserved: int  # bytes of the per-block reservation that `cuobjdump -res-usage` folds into SHARED
    regs_per_sm: int = 64 * KB
    regs_per_block: int = 64 * KB
    max_regs_per_thread: int = 256  # the calculator's limit (ptxas itself stops at 255)
    reserved_smem_per_block: int = 1 * KB  # the driver's per-block reservation (cc 8.0 on)
    smem_per_block: int = 48 * KB  # static shared memory limit without opt-in
    max_threads_per_block: int = 1024
    warp_size: int = 32
    reg_alloc_unit: int = 256  # registers are granted per warp in multiples of this
    smem_alloc_unit: int = 128  # shared memory is granted per block in multiples of this, bytes
    sub_partitions: int = 4  # SM sub-partitions (schedulers); each holds a quarter of the register file
    max_cluster_size: int = 1  # portable thread-block cluster size (8 from cc 9.0); 1 where there are no clusters
    # (cluster size, SMs its clusters fill at one block per SM) on the usual part, as its driver answers
    # (cuOccupancyMaxActiveClusters × size): a cluster's blocks share one GPC, and where a GPC's SM count is not a
    # multiple of the size some of its SMs stay out. Sizes not listed are taken as whole clusters of every SM.
    cluster_sms: tuple[tuple[int, int], ...] = ()

    @property
    def base(self) -> str:
        """The name without the feature suffix: "sm_90a" -> "sm_90" (same hardware limits)."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def plain(self) -> Arch:
        """The same hardware without the feature suffix: sm_90a -> sm_90 (what Triton compiles for)."""
        return ARCHS[self.base]

    @property
    def compute(self) -> str:
        """The virtual architecture NVRTC and nvcc compile for: "compute_90a"."""
        return f"compute_{self.capability[0]}{self.capability[1]}{self.suffix}"

    @property
    def compute_major(self) -> int:
        return self.capability[0]

    @property
    def compute_minor(self) -> int:
        return self.capability[1]

    @property
    def sms(self) -> int:
        """SMs to plan a grid for: the usual part's, or for an arch whose parts differ widely the H200's (the part
        this project times on); a grid planned for the wrong count is only a little off, never wrong."""
        return self.sm_count or SM_COUNT_UNKNOWN_PART

    def resident_blocks(self, cluster: int = 1, blocks_per_sm: int = 1) -> int:
        """Blocks the usual part holds at once, `blocks_per_sm` to an SM, launched in clusters of `cluster` blocks:
        the SMs whole clusters fill (`cluster_sms`) times the blocks an SM holds, in whole clusters. With more than
        one block to an SM a cluster may share an SM, so this is a floor there; a launcher asks the driver."""
        if cluster <= 1:
            return blocks_per_sm * self.sms
        sms = dict(self.cluster_sms).get(cluster, self.sms)
        return blocks_per_sm * sms // cluster * cluster

    @property
    def nominal(self) -> NominalPart | None:
        """The representative part's datasheet figures (the static model's); None where the arch's parts differ
        too widely for one (sm_120) or it has no SM count."""
        return _NOMINAL_PARTS.get(self.base) if self.sm_count else None

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size

    # An Arch stands where an arch name stood (family plug-ins written before Arch compare and format the name they
    # were given): it formats as its name, equals its name, and hashes as it, so a dict keyed by either finds both.
    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Arch):
            return self.name == other.name
        if isinstance(other, str):
            return self.name == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)


def _family(
    capability: tuple[int, int],
    suffixes: tuple[str, ...],
    *,
    sm_count: int | None,
    warps: int,
    blocks: int,
    smem_kb: int,
    steps: tuple[int, ...],
    barriers_per_block_slot: int | None,
    res_usage_reserved: int,
    cluster_sms: tuple[tuple[int, int], ...] = (),
) -> list[Arch]:
    major, minor = capability
    return [
        Arch(
            name=f"sm_{major}{minor}{suffix}",
            capability=capability,
            suffix=suffix,
            sm_count=sm_count,
            max_warps_per_sm=warps,
            max_blocks_per_sm=blocks,
            smem_per_sm=smem_kb * KB,
            # The opt-in maximum leaves room for the reservation: one block may take the whole carveout.
            smem_per_block_optin=(smem_kb - 1) * KB,
            carveout_steps=steps,
            barriers_per_sm=barriers_per_block_slot * blocks if barriers_per_block_slot else None,
            res_usage_reserved=res_usage_reserved,
            max_cluster_size=8 if major >= 9 else 1,
            cluster_sms=cluster_sms,
        )
        for suffix in suffixes
    ]


# The calculator applies a barrier limit from cc 9.0 on: two barrier sets per block slot (one on cc 10.1, 12.x).
# sm_90's clusters, one 200 KB block to an SM: pairs fill all 132 SMs of an H100 SXM (66 clusters), 2 × 2 groups 120
# (30 clusters; records/h100-2026-12-06-launch-counted.tar.xz, the trials' resident_blocks). The H200 is the same
# die with as many SMs, but its GPCs' SM counts were not asked of its driver.
_ALL: tuple[Arch, ...] = (
    *_family((8, 0), ("",), sm_count=108, warps=64, blocks=32, smem_kb=164, steps=_STEPS_164,
             barriers_per_block_slot=None, res_usage_reserved=0),
    *_family((8, 6), ("",), sm_count=84, warps=48, blocks=16, smem_kb=100, steps=_STEPS_100,
             barriers_per_block_slot=None, res_usage_reserved=0),
    *_family((8, 9), ("",), sm_count=128, warps=48, blocks=24, smem_kb=100, steps=_STEPS_100,
             barriers_per_block_slot=None, res_usage_reserved=0),
    *_family((9, 0), ("", "a"), sm_count=132, warps=64, blocks=32, smem_kb=228, steps=_STEPS_228,
             barriers_per_block_slot=2, res_usage_reserved=1 * KB, cluster_sms=((2, 132), (4, 120))),
    *_family((10, 0), ("", "a", "f"), sm_count=148, warps=64, blocks=32, smem_kb=228, steps=_STEPS_228,
             barriers_per_block_slot=2, res_usage_reserved=1 * KB),
    *_family((12, 0), ("", "a", "f"), sm_count=None, warps=48, blocks=24, smem_kb=100, steps=_STEPS_100,
             barriers_per_block_slot=1, res_usage_reserved=1 * KB),
)  # fmt: skip

ARCHS: dict[str, Arch] = {a.name: a for a in _ALL}
ARCH_NAMES: tuple[str, ...] = tuple(ARCHS)
DEFAULT_ARCH = "sm_90"

_NAME = re.compile(r"^(?:sm_?|compute_)?(\d)(\d+)([af]?)$", re.I)


def parse_arch_name(name: str) -> str:
    """Normalise "90a", "sm90a", "SM_90A", "compute_90a" to "sm_90a" (known or not); InputError if not that shape."""
    m = _NAME.match(str(name).strip())
    if not m:
        raise InputError(f"not an arch name: {name!r}; expected sm_XY[a|f], one of {', '.join(ARCH_NAMES)}")
    return f"sm_{m.group(1)}{m.group(2)}{m.group(3).lower()}"


def get_arch(name: str | Arch) -> Arch:
    """The Arch called `name` ("sm_90a", "90a", "sm_100a", ...); InputError naming the choices otherwise."""
    if isinstance(name, Arch):
        return name
    key = parse_arch_name(name)
    try:
        return ARCHS[key]
    except KeyError:
        raise InputError(f"unknown arch {name!r}; supported: {', '.join(ARCH_NAMES)}") from None


# Peak dense rates in TFLOP/s by compute capability and input type, for the part this project times on (H100 / H200
# SXM for 9.0, at boost clock, NVIDIA's data sheet): the tensor cores' dense (not 2:4 sparse) rate for BF16, FP16 and
# TF32 inputs, and "FP32" the non-tensor FMA pipe. An arch or type not listed has no known peak (None).
PEAK_TFLOPS: dict[tuple[int, int], dict[str, float]] = {
    (9, 0): {"BF16": 989.4, "FP16": 989.4, "TF32": 494.7, "FP32": 66.9},
}
# Nominal DRAM bandwidth in GB/s by part, where an arch's parts differ (H100 SXM HBM3, H200 HBM3e); matched against
# the GPU's name as the driver reports it ("NVIDIA H200").
NOMINAL_GBS: dict[str, float] = {"H200": 4800.0, "H100": 3350.0}


def peak_tflops(arch: str | Arch, dtype: str) -> float | None:
    """The peak dense rate of `arch`'s part for `dtype` ("BF16", "FP16", "TF32", "FP32"); None where unknown."""
    return PEAK_TFLOPS.get(get_arch(arch).capability, {}).get(dtype)


def nominal_bandwidth_gbs(gpu: str | None) -> float | None:
    """The nominal DRAM bandwidth of the part named `gpu` ("NVIDIA H200"); None where unknown."""
    return next((gbs for part, gbs in NOMINAL_GBS.items() if part in str(gpu or "")), None)


def arch_of_ptx_target(target: str) -> Arch:
    """The Arch a PTX `.target` directive names: "sm_90a", "sm_90a, texmode_independent", "sm_80, debug"."""
    first = target.split(",")[0].strip()
    return get_arch(first)


@functools.cache
def _ptxas_archs() -> frozenset[str]:
    """Every `sm_` name some ptxas found here lists in its --help."""
    names: set[str] = set()
    for tool in toolchain.candidates("ptxas"):
        try:
            text = subprocess.run([tool.path, "--help"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        names.update(re.findall(r"\bsm_\d+[af]?\b", text))
    return frozenset(names)


def assemblable(arch: str | Arch) -> bool:
    """Whether a ptxas found on this machine can assemble for `arch`."""
    return get_arch(arch).name in _ptxas_archs()


def assembler_note(arch: str | Arch) -> str:
    """Why SASS for `arch` cannot be made here, and the fix; "" when it can."""
    a = get_arch(arch)
    if assemblable(a):
        return ""
    found = toolchain.candidates("ptxas")
    if not found:
        return f"no ptxas found, so no SASS view; {toolchain.FIXES['ptxas']}"
    versions = ", ".join(sorted({t.version or "?" for t in found}))
    return (
        f"no ptxas here can assemble {a.name} (found {versions}), so no SASS view; "
        "install a CUDA toolkit that supports it and set CUDA_HOME, or pass --arch for one it supports"
    )
