"""The census records: frozen dataclasses, and their versioned JSON form (docs/census-schema.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from mage_tune.census.occupancy import Occupancy

SCHEMA = "mage-tune.census/1"

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
    bulk_copies: int  # cp.async.bulk / UTMALDG (tensor-memory-accelerator copies)
    predicated: dict[str, int]  # category -> instructions carrying a guard predicate
    barriers: int
    shuffles: int
    atomics: int
    special: dict[str, int]  # special-function op -> count ("rsqrt.approx", "MUFU.RSQ", ...)
    matrix: dict[str, int]  # mma / wgmma / HMMA / HGMMA opcode -> count
    loads_in_flight: int  # see flight.py: most global loads issued and not yet consumed at one point
    bytes_in_flight: int
    cp_async_groups_in_flight: int
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
class Census:
    kernel: str  # name as in the binary (mangled where the source was C++)
    demangled: str
    source: str  # file or variant label
    arch: str
    resources: Resources
    occupancy: Occupancy | None
    launch_bounds: dict[str, int]  # reqntid / maxntid / minnctapersm found in PTX
    ptx: View | None
    sass: View | None
    tools: dict[str, str]

    def to_json(self) -> dict:
        """The documented JSON record (schema `mage-tune.census/1`)."""
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
            "occupancy": asdict(self.occupancy) if self.occupancy else None,
            "launch_bounds": self.launch_bounds,
            "tools": self.tools,
        }
        for name in ("ptx", "sass"):
            view = getattr(self, name)
            out[name] = _view_json(view) if view else None
        return out


def _view_json(view: View) -> dict:
    data = asdict(view)
    data["cp_async_wait"] = list(view.cp_async_wait)
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
