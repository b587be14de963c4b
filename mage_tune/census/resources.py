"""Per-function resources from `ptxas -v` and `cuobjdump -res-usage`, each number tagged with its source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mage_tune.arch import get_arch

_PTXAS_FN = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(.*)")
_RES_FN = re.compile(r"^\s*Function ([\w$.]+):")
_RES_KV = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


@dataclass(frozen=True)
class PtxasReport:
    registers: int | None = None
    barriers: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None


def parse_ptxas(log: str) -> dict[str, PtxasReport]:
    """Function name -> what `ptxas -v` said about it. Any clause may be missing (older ptxas has no barriers)."""
    found: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        fn = _PTXAS_FN.search(line)
        if fn:
            current = found.setdefault(fn.group(1), {})
            continue
        if current is None:
            continue
        stack = _PTXAS_STACK.search(line)
        if stack:
            current["stack_bytes"], current["spill_store_bytes"], current["spill_load_bytes"] = map(int, stack.groups())
            continue
        used = _PTXAS_USED.search(line)
        if used:
            current["registers"] = int(used.group(1))
            rest = used.group(2)
            bars = re.search(r"used (\d+) barriers", rest)
            smem = re.search(r"(\d+) bytes smem", rest)
            # A kernel that calls functions needs their frames too: cuobjdump's STACK is this, not the entry's frame
            # (a -G build's entry has a 0-byte frame and 24 bytes cumulative), so a cubin says the same as its PTX.
            cumulative = re.search(r"(\d+) bytes cumulative stack size", rest)
            if cumulative:
                current["stack_bytes"] = int(cumulative.group(1))
            current["barriers"] = int(bars.group(1)) if bars else None
            current["shared_bytes"] = int(smem.group(1)) if smem else 0
    return {name: PtxasReport(**fields) for name, fields in found.items()}


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """Function name -> {REG, STACK, SHARED, LOCAL, ...} from `cuobjdump -res-usage`."""
    found: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        fn = _RES_FN.match(line)
        if fn:
            current = found.setdefault(fn.group(1), {})
            continue
        if current is not None and "REG:" in line:
            current.update({k: int(v) for k, v in _RES_KV.findall(line)})
    return found


def reserved_in_res_usage(arch_name: str) -> int:
    """Bytes of the per-block reservation that cuobjdump -res-usage folds into SHARED for the arch a binary names."""
    return get_arch(arch_name).res_usage_reserved
