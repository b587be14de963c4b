"""The census records: frozen dataclasses, and their versioned JSON form (docs/census-schema.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields

from mage_tune.census.occupancy import Occupancy
from mage_tune.errors import InputError
from mage_tune.records import schema

SCHEMA = "mage-tune.census/2"

Widths = dict[int, int]  # access width in bits -> instruction count


@dataclass(frozen=True)
class ParamAccess:
    """Global loads and stores whose address derives from one kernel parameter."""

    loads: int = 0
    stores: int = 0
    load_bits: Widths = field(default_factory=dict)
    store_bits: Widths = field(default_factory=dict)


@dataclass(frozen=True)
class View:
    """What one representation of a kernel (PTX or SASS) contains, instruction by instruction."""

    instructions: int
    global_loads: Widths
    global_stores: Widths
    shared_loads: Widths
    shared_stores: Widths
    local_loads: Widths
    local_stores: Widths
    generic_loads: Widths  # no state space: code that kept a generic pointer
    generic_stores: Widths
    global_load_hints: dict[str, int]  # cache qualifiers on global loads: "nc", "cs", "L1::evict_last" / "CONSTANT"
    cp_async: Widths
    cp_async_commits: int
    cp_async_wait: tuple[int, ...]  # depth of each wait, in program order; wait_all is 0
    bulk_copies: int  # bulk and tensor (TMA) copies of every direction; commit and wait groups are not copies
    predicated: dict[str, int]  # category -> instructions carrying a guard predicate
    barriers: int
    shuffles: int
    atomics: int
    special: dict[str, int]  # special-function op -> count ("rsqrt.approx", "MUFU.RSQ", ...)
    matrix: dict[str, int]  # mma / wgmma / HMMA / HGMMA opcode -> count
    loads_in_flight: int  # see flight.py: most global loads issued and not yet consumed at one point
    bytes_in_flight: int
    cp_async_groups_in_flight: int
    # Hopper and later (docs/census-schema.md says which PTX and SASS instruction each field counts).
    matrix_loads: dict[str, int] = field(default_factory=dict)  # ldmatrix / LDSM by "x1".."x4" (+ ".trans")
    matrix_stores: dict[str, int] = field(default_factory=dict)  # stmatrix / STSM, same keys
    shared_load_bytes: int = 0  # per thread, static: shared loads plus matrix loads (4 bytes per xN matrix)
    shared_store_bytes: int = 0  # per thread, static: shared stores plus matrix stores
    mbarrier: dict[str, int] = field(default_factory=dict)  # init, arrive, arrive_expect_tx, try_wait, ...
    bulk: dict[str, int] = field(default_factory=dict)  # load, store, prefetch, multicast, reduce, shared
    bulk_commits: int = 0  # cp.async.bulk.commit_group / UTMACMDFLUSH
    bulk_waits: tuple[int, ...] = ()  # cp.async.bulk.wait_group N / the DEPBAR.LE SB0 after a bulk commit
    matrix_shapes: dict[str, int] = field(default_factory=dict)  # matrix ops by shape and types
    global_store_hints: dict[str, int] = field(default_factory=dict)  # cache qualifiers on global stores: "cs" / "EF"
    wmma_loads: int | None = None  # wmma.load (PTX only: SASS has plain loads); None in SASS
    wmma_stores: int | None = None
    wgmma_fences: int = 0  # wgmma.fence / WARPGROUP.ARRIVE
    wgmma_commits: int = 0  # wgmma.commit_group / HGMMA closing a group (gsb0)
    wgmma_waits: tuple[int, ...] = ()  # wgmma.wait_group N / WARPGROUP.DEPBAR.LE gsb0, N
    setmaxnreg: tuple[tuple[str, int], ...] = ()  # ("dec", 40), ("inc", 232) in program order
    cluster_barriers: dict[str, int] = field(default_factory=dict)  # arrive / wait (barrier.cluster, UCGABAR_*)
    # membar / fence by full opcode (wgmma.fence is wgmma_fences); SASS also shows the fences ptxas adds, such as
    # the MEMBAR.ALL.GPU of a release barrier.cluster.arrive
    memory_fences: dict[str, int] = field(default_factory=dict)
    # programmatic dependent launch: wait / launch_dependents (griddepcontrol.*, SASS ACQBULK / PREEXIT)
    grid_dependency: dict[str, int] = field(default_factory=dict)
    elects: int = 0  # elect.sync / ELECT (SASS also has the ones ptxas adds around single-thread TMA / tcgen05 ops)
    # tcgen05 operations other than mma, by op: alloc, ld, st, cp, shift, commit, wait_ld, fence, ... (SASS: the
    # ones with an instruction of their own, LDTM / STTM / UTCCP / UTCSHIFT / UTCBAR)
    tensor_memory: dict[str, int] = field(default_factory=dict)
    # global loads and stores with memory-order semantics, "load.relaxed.gpu" / SASS "load.STRONG.GPU"
    global_ordering: dict[str, int] = field(default_factory=dict)
    params: dict[str, ParamAccess] | None = None  # PTX only
    registers_declared: dict[str, int] | None = None  # PTX only: .reg declarations by type
    shared_declared: dict[str, int] | None = None  # PTX only: name -> bytes (-1 for extern/dynamic)


@dataclass(frozen=True)
class Resources:
    """Per-kernel resources as NVIDIA's tools report them; `sources` says which tool gave each number."""

    registers: int | None
    shared_bytes: int | None  # static shared memory of the kernel, without the per-block reservation
    dynamic_shared_bytes: int
    stack_bytes: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    local_bytes: int | None
    barriers_used: int | None
    sources: dict[str, str]


@dataclass(frozen=True)
class Cluster:
    """The thread-block cluster a kernel declares (sm_90+)."""

    dims: tuple[int, int, int] | None  # .reqnctapercluster / __cluster_dims__; None where the launch decides
    explicit: bool  # .explicitcluster: must be launched as a cluster
    max_rank: int | None  # .maxclusterrank: most blocks a launch's cluster may have
    source: str  # "PTX" or "cubin ELF"


@dataclass(frozen=True)
class Census:
    kernel: str  # name as in the binary (mangled where the source was C++)
    demangled: str
    source: str  # file or variant label
    arch: str  # the arch's name, as the binary names it (a record field)
    resources: Resources
    occupancy: Occupancy | None
    launch_bounds: dict[str, int]  # reqntid / maxntid / minnctapersm found in PTX
    ptx: View | None
    sass: View | None
    tools: dict[str, str]
    notes: tuple[str, ...] = ()  # one line each: what could not be done for this input (no SASS view: why, fix)
    cluster: Cluster | None = None
    block_dims: tuple[int, int, int] | None = None  # the block's (x, y, z) where known; occupancy counts threads

    def to_json(self) -> dict:
        """The documented JSON record (docs/census-schema.md; census_from_json reads it back)."""
        res = self.resources
        out = {
            "schema": SCHEMA,
            "kernel": self.kernel,
            "demangled": self.demangled,
            "source": self.source,
            "arch": self.arch,
            "registers": res.registers,
            "shared_bytes": res.shared_bytes,
            "dynamic_shared_bytes": res.dynamic_shared_bytes,
            "stack_bytes": res.stack_bytes,
            "spill_store_bytes": res.spill_store_bytes,
            "spill_load_bytes": res.spill_load_bytes,
            "local_bytes": res.local_bytes,
            "barriers_used": res.barriers_used,
            "resource_sources": res.sources,
            "occupancy": self._occupancy_json(),
            "launch_bounds": self.launch_bounds,
            "tools": self.tools,
            "notes": list(self.notes),
            "cluster": None
            if self.cluster is None
            else {**asdict(self.cluster), "dims": list(self.cluster.dims) if self.cluster.dims else None},
        }
        for name in ("ptx", "sass"):
            view = getattr(self, name)
            out[name] = _view_json(view) if view else None
        return out

    def _occupancy_json(self) -> dict | None:
        """`block` stays the thread count (what the occupancy is of); `block_dims` [x, y, z] where known."""
        if self.occupancy is None:
            return None
        dims = {"block_dims": list(self.block_dims)} if self.block_dims else {}
        return {**asdict(self.occupancy), **dims}


def _view_json(view: View) -> dict:
    data = asdict(view)
    for key in ("cp_async_wait", "bulk_waits", "wgmma_waits"):
        data[key] = list(getattr(view, key))
    data["setmaxnreg"] = [{"action": action, "registers": regs} for action, regs in view.setmaxnreg]
    for key, value in list(data.items()):
        if isinstance(value, dict) and value and all(isinstance(k, int) for k in value):
            data[key] = {str(k): v for k, v in sorted(value.items())}
    if view.params is not None:
        data["params"] = {
            name: {
                "loads": acc.loads,
                "stores": acc.stores,
                "load_bits": {str(k): v for k, v in sorted(acc.load_bits.items())},
                "store_bits": {str(k): v for k, v in sorted(acc.store_bits.items())},
            }
            for name, acc in view.params.items()
        }
    return data


def census_from_json(data: object, file: str) -> Census:
    """A census record (to_json's form, as a bench record keeps one per variant and a run directory its winner's in
    best/census.json) back as a Census, checked first by its schema; InputError naming `file` for one that is not
    sound. Keys it does not know (a newer writer's) are left out."""
    problem = schema.problem("census", data)
    if problem:
        raise InputError(f"damaged census record: {problem}", file=file)
    assert isinstance(data, dict)  # the schema said so
    resources = Resources(
        **{f.name: data[f.name] for f in fields(Resources) if f.name != "sources"}, sources=data["resource_sources"]
    )
    occ = data["occupancy"]
    occupancy = None if occ is None else Occupancy(**{f.name: occ[f.name] for f in fields(Occupancy)})
    cluster = data.get("cluster")
    return Census(
        kernel=data["kernel"],
        demangled=data["demangled"],
        source=data["source"],
        arch=data["arch"],
        resources=resources,
        occupancy=occupancy,
        launch_bounds=data["launch_bounds"],
        ptx=_view_from_json(data["ptx"]),
        sass=_view_from_json(data["sass"]),
        tools=data["tools"],
        notes=tuple(data.get("notes") or ()),
        cluster=None if cluster is None else _cluster_from_json(cluster),
        block_dims=tuple(occ["block_dims"]) if occ is not None and occ.get("block_dims") else None,
    )


def _cluster_from_json(data: dict) -> Cluster:
    dims = tuple(data["dims"]) if data["dims"] else None
    return Cluster(dims=dims, explicit=data["explicit"], max_rank=data["max_rank"], source=data["source"])


_WIDTH_FIELDS = frozenset(f.name for f in fields(View) if f.type == "Widths")
_DEPTH_FIELDS = ("cp_async_wait", "bulk_waits", "wgmma_waits")


def _view_from_json(data: dict | None) -> View | None:
    """_view_json's inverse: width maps keyed by ints again, depths as tuples, params as ParamAccess."""
    if data is None:
        return None
    known = {f.name for f in fields(View)}
    out = {key: value for key, value in data.items() if key in known}
    for key in _WIDTH_FIELDS & out.keys():
        out[key] = _widths(out[key])
    for key in _DEPTH_FIELDS:
        if key in out:
            out[key] = tuple(out[key])
    if "setmaxnreg" in out:
        out["setmaxnreg"] = tuple((step["action"], step["registers"]) for step in out["setmaxnreg"])
    if out.get("params") is not None:
        out["params"] = {
            name: ParamAccess(
                loads=acc["loads"],
                stores=acc["stores"],
                load_bits=_widths(acc["load_bits"]),
                store_bits=_widths(acc["store_bits"]),
            )
            for name, acc in out["params"].items()
        }
    return View(**out)


def _widths(data: dict[str, int]) -> Widths:
    return {int(bits): n for bits, n in data.items()}


# Counter fields a view shows only where a kernel has any: the Hopper-era ones and the memory fences.
OPTIONAL_COUNTERS = (
    "matrix_loads",
    "matrix_stores",
    "mbarrier",
    "bulk",
    "matrix_shapes",
    "cluster_barriers",
    "memory_fences",
    "grid_dependency",
    "tensor_memory",
    "global_ordering",
)


def optional_tallies() -> dict:
    """Scalar tallies a view keeps beside its counters for the optional fields (see optional_fields)."""
    return {
        "bulk_commits": 0,
        "bulk_waits": [],
        "wgmma_fences": 0,
        "wgmma_commits": 0,
        "wgmma_waits": [],
        "setmaxnreg": [],
        "matrix_load_bytes": 0,
        "matrix_store_bytes": 0,
        "elects": 0,
    }


COUNTED_FIELDS = (
    "global_loads",
    "global_stores",
    "shared_loads",
    "shared_stores",
    "local_loads",
    "local_stores",
    "generic_loads",
    "generic_stores",
    "cp_async",
    "predicated",
    "special",
    "matrix",
)  # View fields that are a view's counter of the same name


def new_counters() -> dict[str, Counter]:
    """The empty counters a view fills as it reads a kernel, by name: COUNTED_FIELDS', the load and store hints' and
    OPTIONAL_COUNTERS'."""
    return {name: Counter() for name in (*COUNTED_FIELDS, "hints", "store_hints", *OPTIONAL_COUNTERS)}


@dataclass(frozen=True)
class InFlight:
    """The most a kernel's walk (census/flight.py) found in flight at once: global loads, their bytes, cp.async
    groups."""

    loads: int
    bytes: int
    groups: int


def counted_fields(counters: dict, tallies: dict, in_flight: InFlight) -> dict:
    """The View fields both views fill the same way: counters by name, load hints, what the in-flight walk found
    and the optional fields."""
    return {
        **{name: dict(counters[name]) for name in COUNTED_FIELDS},
        "global_load_hints": dict(counters["hints"]),
        "global_store_hints": dict(counters["store_hints"]),
        "loads_in_flight": in_flight.loads,
        "bytes_in_flight": in_flight.bytes,
        "cp_async_groups_in_flight": in_flight.groups,
        **optional_fields(counters, tallies),
    }


def optional_fields(counters: dict, tallies: dict) -> dict:
    """The optional View fields of one view from its counters by name and its tallies: matrix loads and stores
    count into shared traffic per thread; lists become tuples; PTX-only tallies (wmma) pass through."""
    tallies = dict(tallies)
    load_bytes = sum(b * n for b, n in counters["shared_loads"].items()) // 8 + tallies.pop("matrix_load_bytes")
    store_bytes = sum(b * n for b, n in counters["shared_stores"].items()) // 8 + tallies.pop("matrix_store_bytes")
    return {
        **{name: dict(counters[name]) for name in OPTIONAL_COUNTERS},
        "shared_load_bytes": load_bytes,
        "shared_store_bytes": store_bytes,
        **{name: tuple(v) if isinstance(v, list) else v for name, v in tallies.items()},
    }
