"""The census of a trial as flat numbers: what the run record keeps per trial and what `explain` correlates."""

from __future__ import annotations

from mage_tune.census.model import Census


def _bits(counts: dict[int, int]) -> int:
    return sum(bits * n for bits, n in counts.items())


def features(c: Census) -> dict[str, float | str | None]:
    r, occ = c.resources, c.occupancy
    sass = c.sass
    ptx = c.ptx
    out: dict[str, float | str | None] = {
        "registers": r.registers,
        "shared_bytes": (r.shared_bytes or 0) + r.dynamic_shared_bytes,
        "spill_bytes": (r.spill_store_bytes or 0) + (r.spill_load_bytes or 0),
        "occupancy": occ.fraction if occ else None,
        "blocks_per_sm": occ.blocks_per_sm if occ else None,
        "limiter": occ.limiter if occ else None,
    }
    if sass:
        out |= {
            "global_loads": sum(sass.global_loads.values()),
            "global_load_bits": _bits(sass.global_loads) / max(1, sum(sass.global_loads.values())),
            "global_stores": sum(sass.global_stores.values()),
            "shared_loads": sum(sass.shared_loads.values()),
            "shared_load_bits": _bits(sass.shared_loads) / max(1, sum(sass.shared_loads.values())),
            "cp_async": sum(sass.cp_async.values()),
            "barriers": sass.barriers,
            "shuffles": sass.shuffles,
            "loads_in_flight": sass.loads_in_flight,
            "bytes_in_flight": sass.bytes_in_flight,
            "cp_async_groups_in_flight": sass.cp_async_groups_in_flight,
            "instructions": sass.instructions,
        }
    if ptx and ptx.params:
        for name, acc in ptx.params.items():
            out[f"loads[{name}]"] = acc.loads
    return out
