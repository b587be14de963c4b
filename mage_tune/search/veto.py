"""The census veto: what a binary shows before any GPU time that rules it out (spills, local memory, no launch)."""

from __future__ import annotations


def census_veto(census) -> str:
    """Decided before any GPU time: what the binary shows cannot be fast or cannot run."""
    r = census.resources
    spills = (r.spill_store_bytes or 0) + (r.spill_load_bytes or 0)
    if spills:
        return f"spills {spills} bytes to local memory"
    local = census.sass and sum(census.sass.local_loads.values()) + sum(census.sass.local_stores.values())
    if local:  # an array the compiler could not keep in registers (e.g. indexed by a loop it did not unroll)
        return f"{local} local-memory loads/stores in the SASS (stack frame {r.stack_bytes} bytes)"
    if census.occupancy is None:
        return "no launch shape to compute occupancy"
    if census.occupancy.blocks_per_sm == 0:
        return f"cannot launch: {census.occupancy.limiter} (registers {r.registers}, shared {r.shared_bytes})"
    return ""
