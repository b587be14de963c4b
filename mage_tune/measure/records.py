"""What a measurement batch is asked to do and what it returns (plain frozen dataclasses: they cross processes)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Job:
    """One kernel to check and time. `kind` is variant (a built config), copy, or a family's baseline kind (triton,
    torch, ...). `expect` names an input the output must equal (a copy), else the family's reference is expected."""

    label: str
    kind: str
    config: dict = field(default_factory=dict)
    cubin: bytes | None = None
    cubin_sha256: str | None = None
    kernel_name: str = ""
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    dynamic_shared: int = 0
    expect: str = ""


@dataclass(frozen=True)
class Plan:
    family: str  # how the registry finds the family (its origin): a worker process loads it again from this
    shape: dict
    jobs: tuple[Job, ...]
    regimes: tuple[str, ...] = ("cold",)
    rounds: int = 7
    seed: int = 0
    job_timeout_s: float = 60.0
    cold_bytes: int = 256 * 2**20  # rotate over at least this much so every launch reads from DRAM
    timed: bool = True  # False: correctness only (a space-wide check)


@dataclass(frozen=True)
class Timing:
    regime: str
    median_us: float
    min_us: float
    max_us: float
    launches_per_graph: int
    buffer_sets: int
    rounds: int


@dataclass(frozen=True)
class Result:
    label: str
    kind: str
    session: int  # worker process that measured it: compare only within one session
    ok: bool
    error: str = ""
    rel_err: float | None = None
    max_abs_err: float | None = None
    timings: tuple[Timing, ...] = ()
    single_launch_us: float | None = None
    config: dict = field(default_factory=dict)
    cubin_sha256: str | None = None

    def time(self, regime: str) -> float | None:
        for t in self.timings:
            if t.regime == regime:
                return t.median_us
        return None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Session:
    """Per worker process: the control kernel and ceilings measured there, so its results can be compared."""

    index: int
    control_us: float  # fixed float4 copy of 256 MB, cold: drift between sessions and runs shows here
    copy_gbs: float  # best copy bandwidth (bytes read + written) of several copy kernels
    copy_kernels: dict  # name -> GB/s
    fp32_tflops: float  # FMA throughput kernel, this run
    environment: dict


@dataclass(frozen=True)
class BenchRun:
    family: str
    shape: dict
    sessions: tuple[Session, ...]
    results: tuple[Result, ...]
    bytes_moved: int
    flops: int
    environment: dict
    family_origin: str = ""  # how to load the family again (registry spec)
