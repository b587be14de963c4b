"""Census records as rows for people: one row per property, one column per kernel, differences marked."""

from __future__ import annotations

import re

from mage_tune.arch import ARCH_NAMES
from mage_tune.census.model import Census, View
from mage_tune.textwidth import fits_whole_items
from mage_tune.textwidth import table as fit_table  # fits 100 columns (or the terminal); --wide: all of it


def widths(counts: dict[int, int]) -> str:
    if not counts:
        return "0"
    return " + ".join(f"{n}×{bits}b" for bits, n in sorted(counts.items(), reverse=True))


def _mapping(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def _params(view: View) -> str:
    if not view.params:
        return "-"
    cells = []
    for name, acc in view.params.items():
        bits = sorted({*acc.load_bits, *acc.store_bits})
        parts = []
        if acc.loads:
            parts.append(f"ld {acc.loads}")
        if acc.stores:
            parts.append(f"st {acc.stores}")
        cells.append(f"{name}: {' '.join(parts)} ({'/'.join(f'{b}b' for b in bits)})")
    return "; ".join(cells)


def _view_rows(prefix: str, view: View | None) -> list[tuple[str, str]]:
    if view is None:
        return []
    rows = [
        ("global loads", widths(view.global_loads)),
        ("global load hints", _mapping(view.global_load_hints)),
        ("global stores", widths(view.global_stores)),
        ("global store hints", _mapping(view.global_store_hints)),
        ("shared loads / stores", f"{widths(view.shared_loads)} / {widths(view.shared_stores)}"),
        ("local loads / stores", f"{widths(view.local_loads)} / {widths(view.local_stores)}"),
        ("cp.async copies", widths(view.cp_async)),
        ("cp.async commits / waits", f"{view.cp_async_commits} / {list(view.cp_async_wait) or '-'}"),
        ("predicated", _mapping(view.predicated)),
        ("barriers", str(view.barriers)),
        ("shuffles", str(view.shuffles)),
        ("special functions", _mapping(view.special)),
        ("matrix ops", _mapping(view.matrix)),
        ("loads in flight (bytes)", f"{view.loads_in_flight} ({view.bytes_in_flight} B)"),
        ("cp.async groups in flight", str(view.cp_async_groups_in_flight)),
    ]
    rows += _optional_rows(view)
    if view.generic_loads or view.generic_stores:
        rows.append(("generic loads / stores", f"{widths(view.generic_loads)} / {widths(view.generic_stores)}"))
    if view.params is not None:
        rows.append(("global traffic by parameter", _params(view)))
    return [(f"{prefix} {name}", value) for name, value in rows]


def _optional_rows(view: View) -> list[tuple[str, str]]:
    """Rows for the optional fields (Hopper-era ones, memory fences), only where the kernel has any of them."""
    rows = []
    if view.matrix_loads or view.matrix_stores:
        rows.append(
            ("matrix loads / stores (ldmatrix)", f"{_mapping(view.matrix_loads)} / {_mapping(view.matrix_stores)}")
        )
        rows.append(("shared bytes per thread (ld / st)", f"{view.shared_load_bytes} / {view.shared_store_bytes}"))
    if view.matrix_shapes:
        rows.append(("matrix shapes", _mapping(view.matrix_shapes)))
    if view.wmma_loads or view.wmma_stores:
        rows.append(("wmma loads / stores", f"{view.wmma_loads} / {view.wmma_stores}"))
    if view.wgmma_fences or view.wgmma_commits or view.wgmma_waits:
        waits = list(view.wgmma_waits) or "-"
        rows.append(("wgmma fences / commits / waits", f"{view.wgmma_fences} / {view.wgmma_commits} / {waits}"))
    if view.mbarrier:
        rows.append(("mbarrier ops", _mapping(view.mbarrier)))
    if view.bulk or view.bulk_commits or view.bulk_waits:
        rows.append(("bulk copies", _mapping(view.bulk)))
        rows.append(("bulk commits / waits", f"{view.bulk_commits} / {list(view.bulk_waits) or '-'}"))
    if view.setmaxnreg:
        rows.append(("setmaxnreg", ", ".join(f"{action} {regs}" for action, regs in view.setmaxnreg)))
    rows += [(label, _mapping(getattr(view, key))) for key, label in _COUNTER_ROWS if getattr(view, key)]
    if view.elects:
        rows.append(("elects", str(view.elects)))
    return rows


_COUNTER_ROWS = (  # optional counters shown as they are, in this order
    ("cluster_barriers", "cluster barriers"),
    ("memory_fences", "memory fences"),
    ("global_ordering", "ordered global loads / stores"),
    ("grid_dependency", "dependent launch"),
    ("tensor_memory", "tensor memory ops"),
)


_SHAPE = re.compile(r"(?:^wgmma\.(m\d+n\d+k\d+)|^[A-Z]*GMMA\.(\d+)x(\d+)x(\d+))")


def wgmma_shapes(view: View) -> dict[str, int]:
    """Warpgroup matrix ops by shape, "m64n128k16" -> count, from `matrix_shapes` (PTX `wgmma.m64n128k16.…` or SASS
    `HGMMA.64x128x16.…`; the types are dropped, mma.sync and HMMA are not warpgroup ops)."""
    shapes: dict[str, int] = {}
    for key, n in view.matrix_shapes.items():
        m = _SHAPE.match(key)
        if m:
            shape = m.group(1) or "m{}n{}k{}".format(*m.group(2, 3, 4))
            shapes[shape] = shapes.get(shape, 0) + n
    return shapes


def hopper_rows(c: Census) -> list[tuple[str, str]]:
    """The Hopper profile of a kernel, from census fields alone, in the SASS view where there is one (what runs; the
    PTX view otherwise): tensor (TMA) and bulk copies, wgmma by shape with its fences / commits / waits, mbarrier
    waits and arrives, setmaxnreg, the cluster. No rows for a kernel that uses none of them."""
    view = c.sass or c.ptx
    if view is None:
        return []
    tag = "SASS" if c.sass is not None else "PTX"
    out = []
    bulk = view.bulk
    if bulk:
        cells = [f"{bulk.get('load', 0) + bulk.get('multicast', 0)} loads"]
        cells += [f"{bulk['multicast']} multicast"] if bulk.get("multicast") else []
        cells += [f"{bulk.get('store', 0)} stores"]
        cells += [f"{bulk[k]} {k}" for k in ("prefetch", "reduce", "shared") if bulk.get(k)]
        out.append((f"Hopper TMA / bulk copies [{tag}]", ", ".join(cells)))
    shapes = wgmma_shapes(view)
    if shapes or view.wgmma_fences or view.wgmma_commits or view.wgmma_waits:
        by_shape = ", ".join(f"{shape} ×{n}" for shape, n in sorted(shapes.items())) or "no wgmma"
        waits = "/".join(map(str, view.wgmma_waits)) or "-"
        fences = f"fences {view.wgmma_fences}, commits {view.wgmma_commits}, waits {waits}"
        out.append((f"Hopper wgmma [{tag}]", f"{by_shape}; {fences}"))
    if view.mbarrier:
        mb = view.mbarrier
        waits = sum(n for k, n in mb.items() if k.endswith("_wait"))
        arrives = sum(n for k, n in mb.items() if k.startswith("arrive") or k == "cp_async_arrive")
        out.append((f"Hopper mbarrier [{tag}]", f"{waits} waits, {arrives} arrives ({_mapping(mb)})"))
    if view.setmaxnreg:
        regs = ", ".join(f"{action} {n}" for action, n in sorted(view.setmaxnreg))
        out.append((f"Hopper setmaxnreg [{tag}]", regs))
    if c.cluster is not None or view.cluster_barriers or bulk.get("multicast"):
        dims = "none declared"
        if c.cluster is not None:
            dims = "x".join(map(str, c.cluster.dims)) if c.cluster.dims else "set at launch"
        cells = [dims, f"{bulk.get('multicast', 0)} multicast loads"]
        if view.cluster_barriers:
            cells.append(f"barriers {_mapping(view.cluster_barriers)}")
        out.append((f"Hopper cluster [{tag}]", ", ".join(cells)))
    return out


def hopper_profile(c: Census, what: str) -> list[str]:
    """hopper_rows as lines under a heading ("Hopper profile of {what}:"); none for a kernel without a Hopper row."""
    found = hopper_rows(c)
    if not found:
        return []
    return [f"Hopper profile of {what}:"] + [f"  {key.removeprefix('Hopper ')}: {value}" for key, value in found]


def block_cell(threads: int, dims: tuple[int, int, int] | None) -> str:
    """256 for a 1-D block; 32×8 (256 threads) for a block of 2 or 3 dimensions."""
    if not dims or dims[1:] == (1, 1):
        return str(threads)
    shown = dims if dims[2] > 1 else dims[:2]
    return f"{'×'.join(map(str, shown))} ({threads} threads)"


def _na(value) -> str:
    return "?" if value is None else str(value)


def rows(c: Census) -> list[tuple[str, str]]:
    r = c.resources
    src = r.sources
    out = [
        ("arch", c.arch),
        ("registers", f"{_na(r.registers)} [{src.get('registers', 'unknown')}]"),
        ("shared bytes (static + dynamic)", f"{_na(r.shared_bytes)} + {r.dynamic_shared_bytes}"),
        ("stack bytes", _na(r.stack_bytes)),
        ("spill stores / loads (bytes)", f"{_na(r.spill_store_bytes)} / {_na(r.spill_load_bytes)}"),
        ("barriers used", _na(r.barriers_used)),
    ]
    occ = c.occupancy
    if occ:
        out += [
            ("block", block_cell(occ.block, c.block_dims)),
            ("blocks / warps per SM", f"{occ.blocks_per_sm} / {occ.warps_per_sm}"),
            ("occupancy (limiter)", f"{occ.fraction:.0%} ({occ.limiter})"),
        ]
    else:
        why = "needs --block (no .reqntid/.maxntid)"
        if r.registers is None:
            why = "needs the register count (no ptxas report, cubin or -res-usage lines)"
        elif c.arch not in ARCH_NAMES:
            why = f"unknown for {c.arch}"
        out.append(("occupancy (limiter)", why))  # the row of the kernels beside it that have one
    if c.cluster:
        cl = c.cluster
        dims = "x".join(map(str, cl.dims)) if cl.dims else "set at launch"
        extra = (", explicit" if cl.explicit else "") + (f", at most {cl.max_rank}" if cl.max_rank else "")
        out.append(("cluster", f"{dims}{extra} [{cl.source}]"))
    out += hopper_rows(c)
    if "ptxas options" in c.tools:
        out.append(("ptxas options", c.tools["ptxas options"]))
    out += [("note" if i == 0 else f"note {i + 1}", note) for i, note in enumerate(c.notes)]  # a row each
    return out + _view_rows("PTX", c.ptx) + _view_rows("SASS", c.sass)


def render(columns: list[tuple[str, list[tuple[str, str]]]], mark_differences: bool = True) -> str:
    """columns: (header, rows) per kernel; a row whose values differ across columns is marked with '≠'. Where the
    kernels are too many to fit the width without splitting a word, they are shown in groups, each beside the first
    (ours), the marks still saying what differs across all of them."""
    keys: list[str] = []
    for _, column in columns:
        for key, _ in column:
            if key not in keys:
                keys.append(key)
    values = {key: [dict(column).get(key, "-") for _, column in columns] for key in keys}
    marks = {}
    for key in keys:
        # Equal values are equal whatever their source: "32 [ptxas -v]" and "32 [cuobjdump]" are not marked.
        same = {re.sub(r"\s*\[[^\]]*\]$", "", str(v)) for v in values[key]}
        marks[key] = "≠" if mark_differences and len(columns) > 1 and len(same) > 1 else ""

    def rows_of(group: list[int]) -> tuple[list[list], list[str]]:
        table = [[marks[key], key, *(values[key][i] for i in group)] for key in keys]
        return table, ["", "property", *(columns[i][0] for i in group)]

    groups, rest = [], list(range(1, len(columns)))
    while rest:
        n = len(rest)
        while n > 1 and not fits_whole_items(*rows_of([0, *rest[:n]])):
            n -= 1
        groups.append([0, *rest[:n]])
        rest = rest[n:]
    return "\n\n".join(fit_table(*rows_of(group)) for group in groups or [[0]])
