"""Static memory-level parallelism and per-parameter traffic, from def-use relations between registers.

Loads in flight (documented in docs/census-schema.md): walk the kernel's instructions in program order, as laid
out in the listing. A global load is *in flight* from its issue until the first later instruction that names one
of its destination registers (a use, or the scoreboard wait a write implies). `loads` is the most loads in flight
at any point, `bytes` the bytes they carry at that point. cp.async groups are *in flight* from their
`commit_group` until a `wait_group N` leaves at most N outstanding (`wait_all`: none); `groups` is the most at
any point. The walk follows the listing, not the control flow: a loop body is walked once, so a pipelined loop
counts its prologue's groups plus one iteration's, which is what separates a kernel that waits on one copy at a
time (1) from one that keeps the next tile's copy outstanding (2 or more).

Parameter attribution: a def-use graph (adjacency sets) whose edges carry pointers (mov, cvta, add/sub, the addend of
mad, selp) from each 64-bit kernel parameter to the registers derived from it; a global access is attributed to
every parameter that reaches a register in its address. Multiplications and shifts carry no pointer, so an index
computed from a size parameter does not claim the access.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import networkx as nx

from mage_tune.census.model import InFlight, ParamAccess
from mage_tune.census.ptx_ir import Kernel, access_bits, copy_bits, opcode_parts, space_of, wait_depth

_PTX_REG = re.compile(r"%[\w$]+")
_NO_DEST = {"st", "cp", "bar", "barrier", "bra", "ret", "exit", "membar", "fence", "prefetch", "red", "trap", "call"}
_POINTER_OPS = {"mov", "cvta", "add", "sub", "mad", "selp", "ld"}


class _Walk:
    """Program-order bookkeeping shared by the PTX and SASS views."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {}  # register -> load id
        self.bits: dict[int, int] = {}  # live load id -> width
        self.next_id = 0
        self.max_loads = self.max_bytes = 0
        self.groups = self.max_groups = 0

    def touch(self, regs: list[str]) -> None:
        for reg in regs:
            load = self.pending.get(reg)
            if load is not None and load in self.bits:
                del self.bits[load]
        if len(self.pending) > 4 * len(self.bits) + 64:  # drop dead entries now and then
            self.pending = {r: i for r, i in self.pending.items() if i in self.bits}

    def issue(self, dests: list[str], bits: int) -> None:
        self.next_id += 1
        self.bits[self.next_id] = bits
        for reg in dests:
            self.pending[reg] = self.next_id
        if len(self.bits) > self.max_loads:
            self.max_loads = len(self.bits)
            self.max_bytes = sum(self.bits.values()) // 8

    def commit(self) -> None:
        self.groups += 1
        self.max_groups = max(self.max_groups, self.groups)

    def wait(self, depth: int) -> None:
        self.groups = min(self.groups, depth)

    def result(self) -> InFlight:
        return InFlight(self.max_loads, self.max_bytes, self.max_groups)


_OPERAND_MARKS = re.compile(r"[{}\[\]()]|,")
_NESTING = re.compile(r"[{}\[\]()]")


def _split_operands(operands: str) -> list[str]:
    """Split on commas outside braces and brackets."""
    if not _NESTING.search(operands):
        return [o.strip() for o in operands.split(",")]
    out, depth, start = [], 0, 0
    for mark in _OPERAND_MARKS.finditer(operands):
        ch = mark.group()
        if ch == ",":
            if depth == 0:
                out.append(operands[start : mark.start()])
                start = mark.end()
        elif ch in "{[(":
            depth += 1
        else:
            depth -= 1
    out.append(operands[start:])
    return [o.strip() for o in out]


def ptx_in_flight(kernel: Kernel) -> InFlight:

    walk = _Walk()
    live = walk.bits  # the walk's own dict of loads in flight (never rebound)
    regs_in = _PTX_REG.findall
    kinds: dict[str, tuple[str, ...] | None] = {}  # opcode -> its parts for global loads and cp.async, else None
    kind_of = kinds.get
    for ins in kernel.instrs:
        if live:  # with no load in flight there is nothing an operand could consume
            regs = regs_in(ins.operands)
            if ins.guard:
                regs.append(ins.guard.lstrip("!"))
            walk.touch(regs)
        parts = kind_of(ins.opcode, ())
        if parts == ():
            parts = opcode_parts(ins.opcode)
            load = parts[0] in ("ld", "ldu") and space_of(parts) == "global"
            copy = parts[0] == "cp" and "async" in parts and "bulk" not in parts
            parts = kinds[ins.opcode] = parts if load or copy else None
        if parts is None:
            continue
        if parts[0] in ("ld", "ldu"):
            walk.issue(_PTX_REG.findall(_split_operands(ins.operands)[0]), access_bits(parts))
        elif parts[0] == "cp" and "async" in parts:
            if "commit_group" in parts:
                walk.commit()
            elif "wait_group" in parts and "bulk" not in parts:
                depth = wait_depth(ins.operands)
                if depth is not None:
                    walk.wait(depth)
            elif "wait_all" in parts:
                walk.wait(0)
    return walk.result()


def _def_use_graph(kernel: Kernel) -> nx.DiGraph:
    """Edges register (or `param:NAME`) -> the registers an instruction derives from it, as pointers flow."""

    graph: dict[str, set[str]] = defaultdict(set)
    regs_in, nesting = _PTX_REG.findall, _NESTING.search
    roots: dict[str, str | None] = {}  # opcode -> its root where it carries pointers, else None
    root_of = roots.get
    for ins in kernel.instrs:
        root = root_of(ins.opcode, "")
        if root == "":
            parts = opcode_parts(ins.opcode)
            carries = parts[0] in _POINTER_OPS and not (parts[0] == "ld" and "param" not in parts)
            root = roots[ins.opcode] = parts[0] if carries else None
        if root is None:
            continue
        ops_text = ins.operands
        if root not in ("ld", "mad", "selp") and not nesting(ops_text):
            # The common case (mov, cvta, add, sub on plain registers): destination, then every source.
            dest, comma, rest = ops_text.partition(",")
            if comma and "%" in rest:  # an immediate or a constant source derives nothing
                dests = regs_in(dest)
                for src in regs_in(rest):
                    graph[src].update(dests)
            continue
        ops = _split_operands(ins.operands)
        if len(ops) < 2:
            continue
        dests = _PTX_REG.findall(ops[0])
        if root == "ld":
            src = re.match(r"\[\s*([\w$]+)", ops[1])
            sources = [f"param:{src.group(1)}"] if src else []
        elif root == "mad":
            sources = _PTX_REG.findall(ops[3]) if len(ops) > 3 else []
        elif root == "selp":
            sources = _PTX_REG.findall(",".join(ops[1:3]))
        else:
            sources = _PTX_REG.findall(",".join(ops[1:]))
        for src in sources:
            graph[src].update(dests)
    # Keep only the edges that carry a parameter's pointer: index arithmetic (most of a kernel) never reaches an
    # address from a parameter. Forward propagation in program order, twice for loop-carried redefinitions.
    derived = {node for node in graph if node.startswith("param:")}
    for _ in range(2):
        for src in list(derived):
            derived.update(graph.get(src, ()))
        for src, dests in graph.items():
            if src in derived:
                derived.update(dests)
    pointer_flow = nx.DiGraph()
    pointer_flow.add_edges_from((src, dest) for src, dests in graph.items() if src in derived for dest in dests)
    return pointer_flow


def _address_regs(operand: str) -> list[str]:
    inside = re.search(r"\[([^\]]*)\]", operand)
    return _PTX_REG.findall(inside.group(1)) if inside else []


def param_access(kernel: Kernel) -> dict[str, ParamAccess]:
    """Global loads (cp.async copies included) and stores per 64-bit kernel parameter; "?" for the rest."""
    graph = _def_use_graph(kernel)
    reach: dict[str, set[str]] = {}
    for name, ptype in kernel.params:
        node = f"param:{name}"
        if ptype in ("u64", "b64", "s64") and node in graph:  # parameter nodes only ever start edges
            reach[name] = nx.descendants(graph, node)
    loads: dict[str, Counter] = defaultdict(Counter)
    stores: dict[str, Counter] = defaultdict(Counter)
    accesses: dict[str, tuple[str, ...] | None] = {}  # opcode -> its parts for global accesses, else None
    access_of = accesses.get
    for ins in kernel.instrs:
        parts = access_of(ins.opcode, ())
        if parts == ():
            parts = opcode_parts(ins.opcode)
            access = parts[0] in ("ld", "ldu", "st") and space_of(parts) == "global"
            # cp.async copies count as loads; bulk and tensor copies (TMA) name a tensor map, not a plain pointer
            access = access or (parts[0] == "cp" and "async" in parts and "global" in parts and "bulk" not in parts)
            parts = accesses[ins.opcode] = parts if access else None
        if parts is None:
            continue
        root = parts[0]
        if root in ("ld", "ldu", "st") and space_of(parts) == "global":
            ops = _split_operands(ins.operands)
            is_store = root == "st"
            address = ops[0] if is_store else (ops[1] if len(ops) > 1 else "")
            bits = access_bits(parts)
        elif root == "cp" and "async" in parts and "global" in parts:
            ops = _split_operands(ins.operands)
            if len(ops) <= 2:
                continue
            is_store, address = False, ops[1]
            bits = copy_bits(ops[2])
        else:
            continue
        regs = set(_address_regs(address))
        owners = [name for name, derived in reach.items() if regs & derived] or ["?"]
        for owner in owners:
            (stores if is_store else loads)[owner][bits] += 1
    names = [n for n, _ in kernel.params if n in loads or n in stores] + (
        ["?"] if "?" in loads or "?" in stores else []
    )
    return {
        n: ParamAccess(sum(loads[n].values()), sum(stores[n].values()), dict(loads[n]), dict(stores[n])) for n in names
    }


# --- SASS -------------------------------------------------------------------------------------------------------

_SASS_REG = re.compile(r"\bR(\d+)(\.64)?\b")


def sass_regs(operands: str) -> list[str]:
    regs = []
    for m in _SASS_REG.finditer(operands):
        n = int(m.group(1))
        regs.append(f"R{n}")
        if m.group(2):
            regs.append(f"R{n + 1}")
    return regs


def sass_in_flight(instrs) -> InFlight:
    """Same walk over SASS: (opcode, operands, width) triples from sass.py; LDG dests span width/32 registers."""
    walk = _Walk()
    for opcode, operands, bits in instrs:
        walk.touch(sass_regs(operands))
        root = opcode.split(".")[0]
        if root == "LDG":
            first = _SASS_REG.search(operands)
            if first:
                base = int(first.group(1))
                walk.issue([f"R{base + i}" for i in range(max(1, bits // 32))], bits)
        elif root == "LDGDEPBAR":
            walk.commit()
        elif root == "DEPBAR":
            depth = re.search(r"SB0,\s*(0x[0-9a-f]+|\d+)", operands)
            if depth:
                walk.wait(int(depth.group(1), 0))
    return walk.result()
