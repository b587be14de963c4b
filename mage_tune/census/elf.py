"""Per-function facts a cubin's ELF holds, read from `cuobjdump -elf`: launch bounds, cluster shape, registers.

Each `.nv.info.NAME` section lists EIATTR_* attributes of function NAME; the module-wide `.nv.info` section names
its function in each value (`function: k(0xa) register count: 38`). Only what the census uses is kept.

The symbol table says which functions are kernels (entry_functions): relocatable (-rdc) and -G code keeps its
device functions apart, and cuobjdump lists those too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SECTION = re.compile(r"^\.(?:section\s+)?(\.?nv\.info(?:\.([\w$.]+))?|\S+)")
_ATTR = re.compile(r"^\s*Attribute:\s*(EIATTR_\w+)")
_VALUE = re.compile(r"^\s*Value:\s*(.*)")
_NVAL = re.compile(r"^\s*<0x[0-9a-f]+>\s*$")
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\b\d+\b")


@dataclass(frozen=True)
class ElfFacts:
    """What the ELF says about one kernel; None where it holds no such attribute."""

    max_threads: tuple[int, ...] | None = None  # EIATTR_MAX_THREADS (.maxntid / __launch_bounds__)
    reqntid: tuple[int, ...] | None = None  # EIATTR_REQNTID (.reqntid: the block size the kernel requires)
    cluster_dims: tuple[int, ...] | None = None  # EIATTR_CTA_PER_CLUSTER (.reqnctapercluster)
    explicit_cluster: bool = False  # EIATTR_EXPLICIT_CLUSTER (.explicitcluster)
    max_cluster_rank: int | None = None  # EIATTR_MAX_CLUSTER_RANK (.maxclusterrank)
    min_ctas_per_sm: int | None = None  # EIATTR_MIN_CTA_PER_SM (.minnctapersm), where ptxas writes it
    registers: int | None = None  # EIATTR_REGCOUNT
    max_registers: int | None = None  # EIATTR_MAXREG_COUNT
    barriers: int | None = None  # EIATTR_NUM_BARRIERS


_TUPLES = {"EIATTR_MAX_THREADS": "max_threads", "EIATTR_REQNTID": "reqntid", "EIATTR_CTA_PER_CLUSTER": "cluster_dims"}
_SCALARS = {
    "EIATTR_MAX_CLUSTER_RANK": "max_cluster_rank",
    "EIATTR_MIN_CTA_PER_SM": "min_ctas_per_sm",
    "EIATTR_MAXREG_COUNT": "max_registers",
    "EIATTR_NUM_BARRIERS": "barriers",
}


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v, 0) for v in _NUMBERS.findall(text))


def parse_elf(text: str) -> dict[str, ElfFacts]:
    """Function name -> ElfFacts, from `cuobjdump -elf` text (anything else in `text` is ignored)."""
    found: dict[str, dict] = {}
    section: str | None = None  # function name of the current .nv.info.NAME, "" for the module-wide .nv.info
    attr: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            head = _SECTION.match(line)
            is_info = bool(head) and head.group(1).lstrip(".").startswith("nv.info")
            section = (head.group(2) or "") if is_info else None
            attr = None
            continue
        if section is None:
            continue
        a = _ATTR.match(line)
        if a:
            attr = a.group(1)
            if attr == "EIATTR_EXPLICIT_CLUSTER" and section:
                found.setdefault(section, {})["explicit_cluster"] = True
            continue
        v = _VALUE.match(line)
        if not v or attr is None:
            continue
        value = v.group(1)
        if section == "":  # module-wide: the value names its function
            fn = re.search(r"function:\s*([\w$.]+)\(", value)
            if fn and attr == "EIATTR_REGCOUNT":
                count = re.search(r"register count:\s*(\d+)", value)
                if count:
                    found.setdefault(fn.group(1), {})["registers"] = int(count.group(1))
            continue
        facts = found.setdefault(section, {})
        if attr in _TUPLES:
            facts[_TUPLES[attr]] = _ints(value)
        elif attr in _SCALARS and _ints(value):
            facts[_SCALARS[attr]] = _ints(value)[0]
    return {name: ElfFacts(**facts) for name, facts in found.items()}


# A `.symtab` row of `cuobjdump -elf`: index, value, size, info, other, shndx, name
_SYMBOL = re.compile(r"^\s*(?:0x)?[0-9a-f]+\s+(?:0x)?[0-9a-f]+\s+(?:0x)?[0-9a-f]+\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)\s*$")
# nvdisasm writes a kernel's symbol flags as `.other NAME,@"STO_CUDA_ENTRY STV_DEFAULT"`
_NVDISASM_ENTRY = re.compile(r'^\s*\.other\s+([\w$.]+)\s*,\s*@"[^"]*\bSTO_CUDA_ENTRY\b', re.M)
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10


def entry_functions(text: str) -> frozenset[str] | None:
    """The kernels (entry functions) that `cuobjdump -elf` text or an nvdisasm listing names: symbols of type FUNC
    whose `other` has STO_CUDA_ENTRY. None where `text` holds no symbol table to tell (a cuobjdump -sass listing)."""
    in_symtab, seen_symtab, found = False, False, set()
    for line in text.splitlines():
        if line and not line[0].isspace():
            in_symtab = line.startswith(".section .symtab")
            seen_symtab = seen_symtab or in_symtab
            continue
        row = _SYMBOL.match(line) if in_symtab else None
        if row and _entry(row.group(1), row.group(2)):
            found.add(row.group(3))
    if seen_symtab:
        return frozenset(found)
    marked = _NVDISASM_ENTRY.findall(text)
    return frozenset(marked) if marked else None


def _entry(info: str, other: str) -> bool:
    try:
        return int(info, 0) & 0xF == _STT_FUNC and bool(int(other, 0) & _STO_CUDA_ENTRY)
    except ValueError:  # a header row
        return False
