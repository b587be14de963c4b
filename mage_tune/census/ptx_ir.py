"""What PTX is parsed into (instructions, kernels, a module) and how one instruction's opcode reads: its parts,
access width, state space, copy size and wait depth. The census's PTX view (ptx.py) and its loads-in-flight
walk (flight.py) both stand on it."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

_TYPE_BITS = re.compile(r"^[bsuf](8|16|32|64|128)$|^(?:bf16|f16|e4m3|e5m2)(?:x2)?$")
_SPACES = ("global", "shared", "local", "param", "const")


class Instr(NamedTuple):  # a named tuple: a module holds a hundred thousand of these, built fastest this way
    line: int
    guard: str | None  # "%p1", "!%p1"; None when unguarded
    opcode: str
    operands: str


_new_instr = tuple.__new__


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[tuple[str, str], ...]  # (name, type) in order
    instrs: tuple[Instr, ...]
    launch_bounds: dict[str, int]
    registers_declared: dict[str, int]
    shared_declared: dict[str, int]
    block_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)  # reqntid / maxntid as written (x, y, z)
    cluster: dict[str, tuple[int, ...]] = field(default_factory=dict)  # reqnctapercluster, maxclusterrank, explicit..
    called: tuple[Instr, ...] = ()  # the instructions of the device functions it calls (directly or not), once each


@dataclass(frozen=True)
class Module:
    version: str
    target: str
    kernels: tuple[Kernel, ...]


@functools.lru_cache(maxsize=8192)
def opcode_parts(opcode: str) -> tuple[str, ...]:
    """`ld.global.nc.v4.f32` -> ("ld", "global", "nc", "v4", "f32")."""
    return tuple(opcode.split("."))


def access_bits(parts: tuple[str, ...] | list[str]) -> int:
    """Width in bits of a load/store from its opcode parts: vector count times element type."""
    return _access_bits(tuple(parts))


@functools.lru_cache(maxsize=8192)
def _access_bits(parts: tuple[str, ...]) -> int:
    vec = 1
    bits = 0
    for part in parts[1:]:
        if part.startswith("v") and part[1:].isdigit():
            vec = int(part[1:])
        else:
            t = _TYPE_BITS.match(part)
            if t:
                bits = int(t.group(1)) if t.group(1) else 16 * (2 if part.endswith("x2") else 1)
    return vec * bits


_PTX_INT = re.compile(r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|0[bB]([01]+)|0([0-7]+)|(\d+))[uU]?")


def ptx_int(text: str) -> int | None:
    """A PTX integer literal in any form the ISA allows (`2`, `0x2`, `2U`, `0b10`, `02`); None if not a literal."""
    m = _PTX_INT.fullmatch(text.strip())
    if not m:
        return None
    sign, hexa, binary, octal, dec = m.groups()
    value = int(hexa, 16) if hexa else int(binary, 2) if binary else int(octal, 8) if octal else int(dec)
    return -value if sign == "-" else value


def wait_depth(operands: str) -> int | None:
    """The N of `cp.async.wait_group N` / `cp.async.bulk.wait_group N`, whatever its literal form."""
    return ptx_int(operands.split(",")[0])


def copy_bits(size: str) -> int:
    """Bits one cp.async copies, from its size operand (`16` from nvcc, `0x10` from Triton); 0 if not a literal."""
    try:
        return int(size.strip(), 0) * 8
    except ValueError:
        return 0


def space_of(parts: tuple[str, ...] | list[str]) -> str:
    for part in parts[1:]:
        base = part.split("::")[0]
        if base in _SPACES:
            return base
    return "generic"
