"""What a measurement batch is asked to do and what it returns (plain frozen dataclasses: they cross processes)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


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
class OutputCheck:
    """One output compared with the family's reference: `error` in `metric` (rel_l2, max_rel, ulp; NaN where some
    element was not written or not finite), accepted when it is at most `tolerance`."""

    name: str
    metric: str
    error: float
    tolerance: float
    ok: bool


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
    outputs: tuple[OutputCheck, ...] = ()  # each output's check; rel_err is the largest relative L2 error of them
    # Where its launcher says: the grid it launched where that is not the variant's (a persistent grid of clusters
    # fitted to those resident at once), and the blocks of its clusters the device holds at once (the driver's count)
    launched_grid: tuple[int, ...] | None = None
    resident_blocks: int | None = None

    def time(self, regime: str) -> float | None:
        for t in self.timings:
            if t.regime == regime:
                return t.median_us
        return None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Result:
        """A Result from to_json()'s dict; records written before `outputs` existed (or with keys a newer writer
        added) read too."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["timings"] = tuple(_from(Timing, t) for t in data.get("timings") or ())
        values["outputs"] = tuple(_from(OutputCheck, o) for o in data.get("outputs") or ())
        if values.get("launched_grid") is not None:
            values["launched_grid"] = tuple(values["launched_grid"])
        return cls(**values)


def _from(kind, data: dict):
    known = {f.name for f in fields(kind)}
    return kind(**{k: v for k, v in data.items() if k in known})


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
