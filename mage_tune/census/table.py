"""Census records as rows for people: one row per property, one column per kernel, differences marked."""

from __future__ import annotations

import re

from mage_tune.census.model import Census, View


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
    if view.generic_loads or view.generic_stores:
        rows.append(("generic loads / stores", f"{widths(view.generic_loads)} / {widths(view.generic_stores)}"))
    if view.params is not None:
        rows.append(("global traffic by parameter", _params(view)))
    return [(f"{prefix} {name}", value) for name, value in rows]


def _na(value) -> str:
    return "?" if value is None else str(value)


def rows(c: Census) -> list[tuple[str, str]]:
    r = c.resources
    src = r.sources
    out = [
        ("arch", c.arch),
        ("registers", f"{_na(r.registers)} [{src.get('registers', 'unknown')}]"),
        ("shared bytes (static + dynamic)", f"{_na(r.shared_bytes)} + {r.dynamic_shared_bytes}"),
        ("stack frame bytes", _na(r.stack_bytes)),
        ("spill stores / loads (bytes)", f"{_na(r.spill_store_bytes)} / {_na(r.spill_load_bytes)}"),
        ("barriers used", _na(r.barriers_used)),
    ]
    occ = c.occupancy
    if occ:
        out += [
            ("block", str(occ.block)),
            ("blocks / warps per SM", f"{occ.blocks_per_sm} / {occ.warps_per_sm}"),
            ("occupancy (limiter)", f"{occ.fraction:.0%} ({occ.limiter})"),
        ]
    else:
        out.append(("occupancy", "needs --block (no .reqntid/.maxntid)"))
    return out + _view_rows("PTX", c.ptx) + _view_rows("SASS", c.sass)


def render(columns: list[tuple[str, list[tuple[str, str]]]], mark_differences: bool = True) -> str:
    """columns: (header, rows) per kernel; a row whose values differ across columns is marked with '≠'."""
    keys: list[str] = []
    for _, column in columns:
        for key, _ in column:
            if key not in keys:
                keys.append(key)
    table = []
    for key in keys:
        values = [dict(column).get(key, "-") for _, column in columns]
        # Equal values are equal whatever their source: "32 [ptxas -v]" and "32 [cuobjdump]" are not marked.
        same = {re.sub(r"\s*\[[^\]]*\]$", "", str(v)) for v in values}
        mark = "≠" if mark_differences and len(columns) > 1 and len(same) > 1 else ""
        table.append([mark, key, *values])
    headers = ["", "property", *[header for header, _ in columns]]
    from mage_tune.textwidth import table as fit_table  # fits 100 columns (or the terminal); --wide: all of it

    return fit_table(table, headers)
