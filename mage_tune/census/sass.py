"""SASS listing (cuobjdump -sass or nvdisasm text) -> per-function instructions -> a census View.

Never-executed `@!PT` instructions are skipped, and so is the WARPSYNC.COLLECTIVE ... ENDCOLLECTIVE slow path
that sm_90 adds beside shuffles, so nothing is counted twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mage_tune.census import flight
from mage_tune.census.model import View, counted_fields, new_counters, optional_tallies
from mage_tune.errors import InputError

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)|^\s*\.section\s+\.text\.([\w$.]+)\s*,")
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
_FUNCTION_ANY_LINE = re.compile(_FUNCTION.pattern, re.M)
_GUARD = re.compile(r"^@(!?U?P(?:T|\d+))\s+")
_ARCH = re.compile(r"code for (sm_\d+[a-z]?)|\.target\s+(sm_\d+[a-z]?)|EF_CUDA_SM(\d+)")  # sm_90a keeps its a


@dataclass(frozen=True, slots=True)
class SassInstr:
    guard: str | None
    opcode: str
    operands: str


def looks_like_sass(text: str) -> bool:
    # nvdisasm prints pages of .nv.info before the first .text section, so look through the whole listing.
    return bool(_INSTR.search(text)) and bool(_FUNCTION_ANY_LINE.search(text) or "code for sm_" in text)


def arch_of(text: str) -> str | None:
    m = _ARCH.search(text)
    if not m:
        return None
    return m.group(1) or m.group(2) or f"sm_{m.group(3)}"


def parse(text: str, label: str) -> dict[str, list[SassInstr]]:
    """Function name -> instructions, in listing order. A name listed again is another ELF's copy (a template kernel
    instantiated in several files of one executable, the same code): the first is counted, never both."""
    functions: dict[str, list[SassInstr]] = {}
    current: list[SassInstr] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        head = _FUNCTION.match(line)
        if head:
            name = head.group(1) or head.group(2)
            current = None if name in functions else functions.setdefault(name, [])
            continue
        m = _INSTR.search(line)
        if not m or current is None:
            continue
        body = m.group(1)
        guard = None
        g = _GUARD.match(body)
        if g:
            guard = g.group(1)
            body = body[g.end() :]
        parts = body.split(None, 1)
        if not parts:  # `/*0000*/ ;`: an address and no instruction
            raise InputError("an instruction address with no instruction", file=label, line=number)
        current.append(SassInstr(guard, parts[0], parts[1] if len(parts) > 1 else ""))
    if not functions or not any(functions.values()):
        raise InputError("no SASS functions found (expected cuobjdump -sass or nvdisasm output)", file=label)
    return functions


_WIDTHS = {"64": 64, "128": 128, "256": 256, "U8": 8, "S8": 8, "U16": 16, "S16": 16}


def width(opcode: str) -> int:
    bits = 32
    for mod in opcode.split(".")[1:]:
        bits = _WIDTHS.get(mod, bits)
    return bits


_MEMORY = {
    "LDG": "global_loads",
    "STG": "global_stores",
    "LDS": "shared_loads",
    "STS": "shared_stores",
    "STAS": "shared_stores",  # st.async: a store into a peer block's shared memory (a cluster)
    "LDL": "local_loads",
    "STL": "local_stores",
    "LD": "generic_loads",
    "ST": "generic_stores",
    "LDGSTS": "cp_async",
}
_CACHE_HINTS = ("CONSTANT", "EF", "EL", "EU", "LU", "NA", "LTC64B", "LTC128B", "LTC256B")
_HINT_COUNTERS = {"LDG": "hints", "STG": "store_hints"}  # the counter of each opcode's cache modifiers
_MATRIX = ("HMMA", "HGMMA", "IMMA", "DMMA", "QMMA", "QGMMA", "IGMMA")  # QMMA: FP8 mma.sync (sm_89)


_MBARRIER = {  # SYNCS opcode -> the PTX mbarrier operation it implements (read off ptxas 13 output for sm_90a)
    "SYNCS.EXCH.64": "init",
    "SYNCS.ARRIVE.TRANS64.A1T0": "arrive",
    "SYNCS.ARRIVE.TRANS64": "arrive_expect_tx",
    "SYNCS.ARRIVE.TRANS64.RED.A1T0": "arrive",  # remote (cluster) arrive
    "SYNCS.ARRIVE.TRANS64.RED": "arrive_expect_tx",  # remote (cluster) arrive.expect_tx
    "SYNCS.ARRIVE.TRANS64.ART0": "arrive",  # arrive with a count
    "SYNCS.ARRIVE.TRANS64.OPTOUT.A1T0": "arrive_drop",
    "SYNCS.ARRIVE.TRANS64.RED.OPTOUT.A1T0": "arrive_drop",  # remote (cluster) arrive_drop
    "SYNCS.ARRIVE.TRANS64.OPTOUT": "arrive_drop_expect_tx",
    "SYNCS.ARRIVE.TRANS64.RED.A0TR": "expect_tx",  # no arrival (A0): the transaction count alone
    "SYNCS.ARRIVE.TRANS64.RED.A0TX": "complete_tx",
    "SYNCS.PHASECHK.TRANS64.TRYWAIT": "try_wait",
    "SYNCS.PHASECHK.TRANS64": "test_wait",
    "SYNCS.CCTL.IV": "inval",
}
_TENSOR_MEMORY = {"LDTM": "ld", "STTM": "st", "UTCCP": "cp", "UTCSHIFT": "shift", "UTCBAR": "commit"}  # tcgen05.*
_GRID_DEPENDENCY = {"ACQBULK": "wait", "PREEXIT": "launch_dependents"}  # griddepcontrol.*
_ORDERS = ("STRONG", "MMIO")  # LDG.E.STRONG.GPU: a relaxed/acquire/volatile load at a scope (SM, GPU, SYS)
_LDSM_SHAPES = {"M88": "", "MT88": ".trans"}


def matrix_move_key(opcode: str) -> tuple[str, int]:
    """`LDSM.16.MT88.2` -> ("x2.trans", 8 bytes per thread), keyed like the PTX view's ldmatrix."""
    mods = opcode.split(".")[1:]
    count = next((m for m in mods if m in ("2", "4")), "1")
    shape = next((m for m in mods if m.startswith("M")), "M88")
    if shape not in _LDSM_SHAPES:
        return opcode, 4 * int(count)
    return f"x{count}{_LDSM_SHAPES[shape]}", 4 * int(count)


def bulk_kind(opcode: str) -> str | None:
    """Direction of a TMA / bulk-copy opcode, as the PTX view names it; None for what is not a copy."""
    root = opcode.split(".")[0]
    if root == "UTMALDG":
        return "multicast" if "MULTICAST" in opcode else "load"
    if root == "UTMASTG":
        return "store"
    if root in ("UTMAPF", "UBLKPF"):
        return "prefetch"
    if root in ("UTMAREDG", "UBLKRED"):
        return "reduce"
    if root == "UBLKCP":
        mods = opcode.split(".")[1:3]
        if "MULTICAST" in opcode:
            return "multicast"
        return {("S", "G"): "load", ("G", "S"): "store", ("S", "S"): "shared"}.get(tuple(mods), "other")
    return None


def view(instrs: list[SassInstr]) -> View:
    c = new_counters()
    commits = barriers = shuffles = atomics = bulk = 0
    waits: list[int] = []
    t = optional_tallies()
    # DEPBAR.LE SB0 waits for cp.async groups (after LDGDEPBAR) and for bulk groups (after UTMACMDFLUSH) alike: a
    # wait belongs to the kind of the last commit before it in the listing, or to the only kind the function has; in
    # a function with neither (sm_100's tensor-memory allocation waits on SB0 too) it is no copy's wait.
    opcodes = {ins.opcode.split(".")[0] for ins in instrs}
    copies = "LDGDEPBAR" in opcodes or "LDGSTS" in opcodes
    last_commit = "cp_async" if copies else "bulk" if "UTMACMDFLUSH" in opcodes else None
    executed = []
    collective = False
    for ins in instrs:
        if ins.guard == "!PT":
            continue
        root = ins.opcode.split(".")[0]
        if root == "WARPSYNC" and "COLLECTIVE" in ins.opcode:
            collective = True
            continue
        if root == "ENDCOLLECTIVE":
            collective = False
            continue
        if collective:
            continue
        bits = width(ins.opcode)
        executed.append((ins.opcode, ins.operands, bits))
        if root in _MEMORY:
            key = _MEMORY[root]
            c[key][bits] += 1
            if root in _HINT_COUNTERS:
                mods = ins.opcode.split(".")[1:]
                for hint in mods:
                    if hint in _CACHE_HINTS:
                        c[_HINT_COUNTERS[root]][hint] += 1
                order = next((i for i, mod in enumerate(mods) if mod in _ORDERS), None)
                if order is not None:  # the order and the scope after it
                    kind = "load" if root == "LDG" else "store"
                    c["global_ordering"][".".join([kind, *mods[order : order + 2]])] += 1
            if ins.guard and ins.guard != "PT":
                c["predicated"][key] += 1
        elif root == "LDGDEPBAR":
            commits += 1
            last_commit = "cp_async"
        elif root == "UTMACMDFLUSH":
            t["bulk_commits"] += 1
            last_commit = "bulk"
        elif root == "DEPBAR":
            depth = re.search(r"SB0,\s*(0x[0-9a-f]+|\d+)", ins.operands)
            if depth and last_commit is not None:
                (t["bulk_waits"] if last_commit == "bulk" else waits).append(int(depth.group(1), 0))
        elif root in ("LDSM", "STSM"):
            key, nbytes = matrix_move_key(ins.opcode)
            if root == "LDSM":
                c["matrix_loads"][key] += 1
                t["matrix_load_bytes"] += nbytes
            else:
                c["matrix_stores"][key] += 1
                t["matrix_store_bytes"] += nbytes
        elif root == "SYNCS":
            c["mbarrier"][_MBARRIER.get(ins.opcode, ins.opcode)] += 1
        elif root == "ARRIVES" and "LDGSTSBAR" in ins.opcode:  # cp.async.mbarrier.arrive
            c["mbarrier"]["cp_async_arrive"] += 1
        elif root in ("UCGABAR_ARV", "UCGABAR_WAIT"):
            c["cluster_barriers"]["arrive" if root == "UCGABAR_ARV" else "wait"] += 1
        elif root == "WARPGROUP":
            if ins.opcode == "WARPGROUP.ARRIVE":
                t["wgmma_fences"] += 1
            elif ins.opcode.startswith("WARPGROUP.DEPBAR"):
                depth = re.search(r"gsb0\s*,\s*(0x[0-9a-f]+|\d+)", ins.operands)
                if depth:
                    t["wgmma_waits"].append(int(depth.group(1), 0))
        elif root in _TENSOR_MEMORY:
            c["tensor_memory"][_TENSOR_MEMORY[root]] += 1
        elif root in _GRID_DEPENDENCY:
            c["grid_dependency"][_GRID_DEPENDENCY[root]] += 1
        elif root == "ELECT":
            t["elects"] += 1
        elif root == "USETMAXREG":
            regs = re.search(r"(0x[0-9a-f]+|\d+)\s*$", ins.operands)
            if regs:
                t["setmaxnreg"].append(("dec" if "DEALLOC" in ins.opcode else "inc", int(regs.group(1), 0)))
        elif root == "BAR" and "SYNCS" not in ins.opcode:
            barriers += 1
        elif root in ("MEMBAR", "FENCE"):  # the ERRBAR / CCTL.IVALL ptxas puts after a MEMBAR belong to it
            c["memory_fences"][ins.opcode] += 1
        elif root == "SHFL":
            shuffles += 1
        elif root in ("ATOM", "ATOMG", "RED", "REDG", "ATOMS", "REDAS"):  # REDAS: red.async (a cluster)
            atomics += 1
        elif root == "MUFU":
            c["special"][ins.opcode] += 1
        elif root in _MATRIX or (root.startswith("UTC") and root.endswith("MMA")):  # UTCHMMA: tcgen05.mma
            c["matrix"][root] += 1
            c["matrix_shapes"][ins.opcode] += 1
            if root.endswith("GMMA") and re.search(r"\bgsb0\b", ins.operands):
                t["wgmma_commits"] += 1  # the last HGMMA of a wgmma.commit_group carries the group's scoreboard
        elif bulk_kind(ins.opcode) is not None:
            bulk += 1
            c["bulk"][bulk_kind(ins.opcode)] += 1
    in_flight = flight.sass_in_flight(executed)
    return View(
        instructions=len(executed),
        cp_async_commits=commits,
        cp_async_wait=tuple(waits),
        bulk_copies=bulk,
        barriers=barriers,
        shuffles=shuffles,
        atomics=atomics,
        **counted_fields(c, t, in_flight),
    )
