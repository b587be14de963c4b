"""The census of a kernel as flat numbers — what a run record keeps per trial — and the neutral arithmetic on them
that search reports and `explain` share: differences between two kernels, rank correlation with time.

Computed from the census's JSON form, so bench records, which store that form, give the same features as a live
census."""

from __future__ import annotations

import numpy as np

from mage_tune.census.model import Census


def _count(widths: dict) -> int:
    return sum(widths.values())


def _mean_bits(widths: dict) -> float:
    return sum(int(bits) * n for bits, n in widths.items()) / max(1, _count(widths))


def features(c: Census) -> dict[str, float | str | None]:
    return features_json(c.to_json())


def features_json(c: dict) -> dict[str, float | str | None]:
    occ, sass, ptx = c.get("occupancy"), c.get("sass"), c.get("ptx")
    out: dict[str, float | str | None] = {
        "registers": c["registers"],
        "shared_bytes": (c["shared_bytes"] or 0) + c["dynamic_shared_bytes"],
        "spill_bytes": (c["spill_store_bytes"] or 0) + (c["spill_load_bytes"] or 0),
        "occupancy": occ["fraction"] if occ else None,
        "blocks_per_sm": occ["blocks_per_sm"] if occ else None,
        "limiter": occ["limiter"] if occ else None,
    }
    if sass:
        out |= {
            "global_loads": _count(sass["global_loads"]),
            "global_load_bits": _mean_bits(sass["global_loads"]),
            "global_stores": _count(sass["global_stores"]),
            "shared_loads": _count(sass["shared_loads"]),
            "shared_load_bits": _mean_bits(sass["shared_loads"]),
            "cp_async": _count(sass["cp_async"]),
            "barriers": sass["barriers"],
            "shuffles": sass["shuffles"],
            "loads_in_flight": sass["loads_in_flight"],
            "bytes_in_flight": sass["bytes_in_flight"],
            "cp_async_groups_in_flight": sass["cp_async_groups_in_flight"],
            "instructions": sass["instructions"],
        }
    if ptx and ptx.get("params"):
        for name, acc in ptx["params"].items():
            out[f"loads[{name}]"] = acc["loads"]
    return out


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def diff(a: dict, b: dict) -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {fmt(a.get(key))} vs {fmt(b.get(key))}")
    return out


def _rank(values: np.ndarray) -> np.ndarray:
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    for v in np.unique(values):  # average ranks over ties
        tie = values == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(x: list[float], y: list[float]) -> float | None:
    a, b = np.asarray(x, float), np.asarray(y, float)
    if len(a) < 3 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    ra, rb = _rank(a), _rank(b)
    return float(np.corrcoef(ra, rb)[0, 1])
