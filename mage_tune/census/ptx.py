"""PTX text -> kernels -> instructions -> a census View.

A hand-rolled reader, not a full PTX grammar: it splits each `.entry` body into `;`-terminated statements, drops
labels, scope braces and directives, and keeps (line, guard, opcode, operands) for every instruction. It is strict
where garbled input would otherwise be counted silently: an opcode must look like one, an entry must close.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import re
from collections import Counter

from mage_tune.census import flight
from mage_tune.census.model import View, counted_fields, new_counters, optional_tallies
from mage_tune.census.ptx_ir import (
    Instr,
    Kernel,
    Module,
    _new_instr,
    access_bits,
    copy_bits,
    opcode_parts,
    ptx_int,
    space_of,
    wait_depth,
)
from mage_tune.errors import InputError

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# A kernel or function: its kind, name, and "(" where a parameter list follows (PTX lets both leave it out: `.entry
# k .maxntid 128, 1, 1 { ... }`, `.func f { ... }`), else "" before its directives, body or `;`.
_ENTRY = re.compile(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)\s*(\(|(?=[{.;]))", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)(?:\s+\.ptr)?(?:\s+\.\w+)*?(?:\s+\.align\s+\d+)?\s+([\w$]+)")
_LABEL = re.compile(r"^[\w$.]+\s*:(?!:)")  # `prototype_4 : .callprototype …` too
_OPCODE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[A-Za-z0-9_:]+)*$")
_GUARD = re.compile(r"^@!?%?[\w$]+\s+")
_BOUNDS = re.compile(r"\.(reqntid|maxntid|minnctapersm|maxnreg)\s+([\d\s,]+)")
_CLUSTER = re.compile(r"\.(reqnctapercluster|maxclusterrank|explicitcluster)\b\s*([\d\s,]*)")
# `.reg .b32 %r<12>;`, `.reg .pred p;`, `.reg .b64 a, b;`, `.reg .v4 .b32 v;` (inline asm declares single names)
_REG_DECL = re.compile(r"\.reg\s+((?:\.\w+\s+)+)(.+)", re.S)
_REG_NAME = re.compile(r"^%?[\w$]+(?:<(\d+)>)?$")
_SHARED_DECL = re.compile(r"^(\.extern\s+)?\.shared\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([\w$]+)((?:\[\d*\])*)")


def _count_registers(regs: Counter, types: list[str], names: str) -> None:
    """Add one `.reg` declaration's registers by type: N for a name<N>, 1 for a plain name, times a vector's width."""
    kind = types[-1].lstrip(".")
    width = next((int(t[2:]) for t in types[:-1] if re.fullmatch(r"\.v\d+", t)), 1)
    for name in names.split(","):
        found = _REG_NAME.match(name.strip())
        if found:
            regs[kind] += width * (int(found.group(1)) if found.group(1) else 1)


def _gc_paused(fn):
    """Run `fn` with the cyclic garbage collector paused. Parsing and counting build some 10^5 small acyclic objects
    (instructions, register sets) that the collector would otherwise scan again and again, for no garbage."""

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return paused


def header(text: str, label: str) -> tuple[str, str]:
    """(version, target) of a PTX module, from its directives alone: what an assembler needs before the parse."""
    if not text.strip():
        raise InputError("empty file", file=label)
    version = re.search(r"^\s*\.version\s+(\d+\.\d+)", text, re.M)
    target = re.search(r"^\s*\.target\s+(\w+)", text, re.M)
    if not version or not target:
        raise InputError("not PTX: no .version/.target directive", file=label, line=1)
    return version.group(1), target.group(1)


# The last modules read, by text: a file's census parses it while ptxas runs, and the census then finds it here.
@functools.lru_cache(maxsize=2)
@_gc_paused
def parse(text: str, label: str) -> Module:
    """Read a PTX module; raise InputError naming `label` and the line for anything that is not PTX."""
    version, target = header(text, label)
    # Blank comments out but keep their newlines so line numbers stay true.
    clean = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    module_shared = _shared_decls(clean)
    lines = _LineCounter(clean)
    parsed = []  # (entry or func, its parse with its own .shared only), in module order
    for match in _ENTRY.finditer(clean):
        if match.group(1) == "func" and _declared_only(clean, match):
            continue
        parsed.append((match.group(1), _kernel(clean, match, label, {}, lines)))
    functions = {k.name: k for kind, k in parsed if kind == "func"}
    links = _Links(functions, module_shared, clean, [k for _, k in parsed])
    kernels = [links.linked(k) for kind, k in parsed if kind == "entry"]
    if not kernels:
        # About the whole module, so no line: for a .cu file the PTX is the compiler's, its lines none of the file's.
        raise InputError("holds no kernel: no .entry in its PTX (a .cu file needs a __global__ function)", file=label)
    return Module(version, target, tuple(kernels))


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


class _LineCounter:
    """Line numbers for positions met in increasing order, counting each newline once (not from the top each time)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            return _line_of(self.text, pos)
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _shared_decls(text: str) -> dict[str, int]:
    """The module's own .shared declarations, outside every function body: one inside a body is that function's
    alone (its kernel's parse adds it)."""
    found = {}
    depth, counted = 0, 0  # braces open at `counted`, counted once from the start
    pos = text.find(".shared")
    while pos >= 0:  # only lines that mention .shared can declare it
        depth += text.count("{", counted, pos) - text.count("}", counted, pos)
        counted = pos
        if depth > 0:
            pos = text.find(".shared", pos + 1)
            continue
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        m = _SHARED_DECL.match(text[start:end].strip())
        if m:
            found[m.group(3)] = _decl_bytes(m)
        pos = text.find(".shared", end)
    return found


_CALLEE = re.compile(r"(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")  # a direct call's operands: the callee's name


def _params_close(text: str, match: re.Match) -> int:
    """Where the parameter list of an _ENTRY match closes (-1 where it never does); its name's end where it has none."""
    return text.find(")", match.end()) if match.group(3) else match.end()


def _declared_only(text: str, match: re.Match) -> bool:
    """A .func declared without a body (`.extern .func vprintf(...);`): nothing to count."""
    close = _params_close(text, match)
    brace, semicolon = text.find("{", close), text.find(";", close)
    return close < 0 or brace < 0 or 0 <= semicolon < brace


class _Links:
    """What a kernel reaches through calls, and the module-scope .shared arrays it references. Each function's
    callees and references are read once, however many kernels reach it."""

    def __init__(self, functions: dict[str, Kernel], module_shared: dict[str, int], text: str, parsed: list[Kernel]):
        self.functions, self.module_shared = functions, module_shared
        # a module-scope array belongs to a block whose code names it (ptxas allocates no other's): a global
        # __shared__, relocatable code's static __shared__ of a function (`_ZZ6helperPKfE3buf`, wherever inlined)
        self.names = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, module_shared)) + r")(?![\w$])")
        self.read: dict[str, tuple[list[str], set[str], bool]] = {}
        self.text, self.parsed, self.taken = text, parsed, None

    def _read(self, function: Kernel) -> tuple[list[str], set[str], bool]:
        """(direct callees, module-scope arrays named, whether it calls through a pointer) of a function or kernel."""
        if function.name not in self.read:
            calls = [_CALLEE.match(ins.operands) for ins in function.instrs if ins.opcode.startswith("call")]
            arrays = set()
            if self.module_shared:
                arrays = set(self.names.findall("\n".join(ins.operands for ins in function.instrs)))
            self.read[function.name] = ([m.group(1) for m in calls if m], arrays, None in calls)
        return self.read[function.name]

    def address_taken(self) -> list[str]:
        """The functions a call through a pointer may reach: those the module names other than in their own
        declarations and in direct calls (a `mov.u64 %rd1, f;`, a table's `generic(f)` initializer)."""
        if self.taken is None:
            named = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, self.functions)) + r")(?![\w$])")
            left = collections.Counter(named.findall(self.text))
            left.subtract(m.group(2) for m in _ENTRY.finditer(self.text))
            left.subtract(name for function in self.parsed for name in self._read(function)[0])
            self.taken = [name for name in self.functions if left[name] > 0]
        return self.taken

    def linked(self, kernel: Kernel) -> Kernel:
        """The kernel with the instructions of every device function it calls, directly or through others, once each
        (ptxas places one copy of each in the kernel's code; where it calls through a pointer, one of every function
        whose address the module takes), and the .shared arrays of its block: the module-scope ones its code or
        theirs names, its own and theirs (nvcc declares a __noinline__ function's __shared__ array in that
        function's body)."""
        reached: dict[str, None] = {}  # in the order met
        callees, _, pointer = self._read(kernel)
        todo, taken_added = collections.deque(callees), False
        while todo or (pointer and not taken_added):
            if not todo:  # a call through a pointer: every function whose address is taken, once
                todo.extend(self.address_taken())
                taken_added = True
                continue
            name = todo.popleft()
            if name in self.functions and name not in reached:
                reached[name] = None
                callees, _, through_pointer = self._read(self.functions[name])
                todo.extend(callees)
                pointer = pointer or through_pointer
        arrays = set(self._read(kernel)[1]).union(*(self._read(self.functions[name])[1] for name in reached))
        shared = {array: size for array, size in self.module_shared.items() if array in arrays}
        shared.update(kernel.shared_declared)
        called: list[Instr] = []
        for name in reached:
            shared.update(self.functions[name].shared_declared)
            called += self.functions[name].instrs
        return dataclasses.replace(kernel, shared_declared=shared, called=tuple(called))


def _decl_bytes(m: re.Match) -> int:
    if m.group(1) or "[]" in m.group(4):
        return -1  # extern / dynamic: the launch decides its size
    bits = re.match(r"[bsuf](\d+)", m.group(2))
    count = 1
    for dim in re.findall(r"\[(\d+)\]", m.group(4)):
        count *= int(dim)
    return count * (int(bits.group(1)) // 8 if bits else 1)


def _kernel(
    text: str, match: re.Match, label: str, module_shared: dict[str, int], line_of: _LineCounter | None = None
) -> Kernel:
    line_of = line_of or _LineCounter(text)
    name = match.group(2)
    close = _params_close(text, match)
    if close < 0:
        raise InputError(f"kernel {name}: parameter list never closes", file=label, line=line_of(match.start()))
    params = tuple((m.group(2), m.group(1)) for m in _PARAM.finditer(text, match.end(), close))
    open_brace = text.find("{", close)
    if open_brace < 0:
        raise InputError(f"kernel {name}: no body", file=label, line=line_of(close))
    header = text[close:open_brace]
    dims = {m.group(1): tuple(int(v) for v in m.group(2).replace(",", " ").split()) for m in _BOUNDS.finditer(header)}
    # A block size is the product of its dimensions (.reqntid 32, 4 is 128 threads); the others are single numbers.
    bounds = {key: _product(values) if key in ("reqntid", "maxntid") else values[0] for key, values in dims.items()}
    cluster = {
        m.group(1): tuple(int(v) for v in m.group(2).replace(",", " ").split()) for m in _CLUSTER.finditer(header)
    }
    end = _matching_brace(text, open_brace, name, label)
    body = text[open_brace + 1 : end]
    first_line = line_of(open_brace)
    regs: Counter[str] = Counter()
    shared = dict(module_shared)
    instrs = []
    line = first_line
    for chunk in body.split(";"):
        line += chunk.count("\n")
        stmt = chunk.strip()
        # Braces, labels and directives need a closer look; a plain instruction starts with a letter or '@'.
        while stmt and (stmt[0] in "{}." or ":" in stmt):
            if stmt[0] in "{}":
                stmt = stmt[1:].lstrip()
                continue
            lab = _LABEL.match(stmt) if ":" in stmt else None
            if lab:
                stmt = stmt[lab.end() :].lstrip()
                continue
            if stmt.startswith((".loc", ".file")):  # line-terminated directives: no ';' of their own
                newline = stmt.find("\n")
                stmt = stmt[newline + 1 :].lstrip() if newline >= 0 else ""
                continue
            break
        if not stmt:
            continue
        start_line = line - stmt.count("\n")
        first = stmt[0]
        if first == ".":
            reg = _REG_DECL.match(stmt)
            if reg:
                _count_registers(regs, reg.group(1).split(), reg.group(2))
            decl = _SHARED_DECL.match(stmt)
            if decl:
                shared[decl.group(3)] = _decl_bytes(decl)
            continue
        if first == "@":
            instrs.append(_instr(stmt, start_line, label))
            continue
        # An unguarded instruction, the common case, built inline. split() already dropped the whitespace around
        # the operands (stmt is stripped), and tuple.__new__ skips the named tuple's Python-level constructor.
        parts = stmt.split(None, 1)
        if not _valid_opcode(parts[0]):
            raise InputError(f"not a PTX instruction: {stmt[:40]!r}", file=label, line=start_line)
        instrs.append(_new_instr(Instr, (start_line, None, parts[0], parts[1] if len(parts) > 1 else "")))
    block_dims = {k: v for k, v in dims.items() if k in ("reqntid", "maxntid")}
    return Kernel(name, params, tuple(instrs), bounds, dict(regs), shared, block_dims, cluster)


def _product(values: tuple[int, ...]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


_BRACE = re.compile(r"[{}]")


def _matching_brace(text: str, open_brace: int, name: str, label: str) -> int:
    depth = 0
    for m in _BRACE.finditer(text, open_brace):
        depth += 1 if m.group(0) == "{" else -1
        if depth == 0:
            return m.start()
    raise InputError(f"kernel {name}: body never closes (truncated PTX?)", file=label, line=_line_of(text, len(text)))


def _instr(stmt: str, line: int, label: str) -> Instr:
    guard = None
    if stmt[0] == "@":
        g = _GUARD.match(stmt)
        if not g:
            raise InputError(f"unreadable guard in {stmt[:40]!r}", file=label, line=line)
        guard = g.group(0)[1:].strip()
        stmt = stmt[g.end() :]
    parts = stmt.split(None, 1)
    opcode = parts[0]
    if not _valid_opcode(opcode):
        raise InputError(f"not a PTX instruction: {stmt[:40]!r}", file=label, line=line)
    return Instr(line, guard, opcode, parts[1].strip() if len(parts) > 1 else "")


# A module repeats a few hundred distinct opcodes: check and split each once.
@functools.lru_cache(maxsize=8192)
def _valid_opcode(opcode: str) -> bool:
    return _OPCODE.match(opcode) is not None


_LOAD_HINTS = ("nc", "ca", "cg", "cs", "lu", "cv")
_STORE_HINTS = ("wb", "cg", "cs", "wt")
_HINT_COUNTERS = {"global_loads": ("hints", _LOAD_HINTS), "global_stores": ("store_hints", _STORE_HINTS)}
_SPECIAL = ("rsqrt", "sqrt", "rcp", "ex2", "lg2", "sin", "cos", "tanh", "div")
_MATRIX = ("mma", "wgmma", "wmma", "tcgen05")  # of tcgen05, its mma alone is a matrix op
_HOPPER_ROOTS = ("ldmatrix", "stmatrix", "mbarrier", "setmaxnreg")
_FENCE_ROOTS = ("membar", "fence")
# memory-order qualifiers of ld/st and their scopes (`.weak`, the default, is no order)
_ORDER_MARKS = frozenset(("mmio", "volatile", "relaxed", "acquire", "release", "cta", "cluster", "gpu", "sys"))
_COUNTED_ROOTS = frozenset(
    (
        "ld",
        "ldu",
        "st",
        "cp",
        "bar",
        "barrier",
        "shfl",
        "atom",
        "red",
        *_SPECIAL,
        *_MATRIX,
        *_HOPPER_ROOTS,
        *_FENCE_ROOTS,
        "griddepcontrol",
        "elect",
    )
)
_SHAPE = re.compile(r"^m\d+n\d+k\d+$")
_MMA_TYPES = frozenset(
    ("f64", "f32", "f16", "bf16", "tf32", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "s32", "s8", "u8", "s4", "u4", "b1")
)
_STATE_SPACES = ("global", "shared")


@functools.lru_cache(maxsize=1024)
def matrix_shape_key(parts: tuple[str, ...]) -> str:
    """`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` -> "mma.m16n8k16.f32.f16.f16.f32" (op, shape, types)."""
    shape = next((p for p in parts if _SHAPE.match(p)), "")
    types = [p for p in parts[1:] if p in _MMA_TYPES]
    # the kind (kind::f8f6f4, tcgen05's kind::f16) and a block scale set an op apart as much as its types do
    marks = (p for p in parts[1:] if p in ("sp", "ws", "block_scale") or p.startswith(("kind::", "cta_group::")))
    kind = [*parts[:2], *marks] if parts[0] == "tcgen05" else [parts[0], *marks]  # tcgen05.mma.cta_group::1.kind::f16
    return ".".join([*kind, *([shape] if shape else []), *types])


@functools.lru_cache(maxsize=1024)
def matrix_move_key(parts: tuple[str, ...]) -> tuple[str, int]:
    """ldmatrix/stmatrix -> ("x4.trans", 4 bytes per matrix per thread x 4); shapes other than m8n8 prefix the key."""
    count = next((p for p in parts if p in ("x1", "x2", "x4")), "x1")
    shape = next((p for p in parts if re.match(r"^m\d+n\d+$", p)), "m8n8")
    key = ("" if shape == "m8n8" else shape + ".") + count + (".trans" if "trans" in parts else "")
    return key, 4 * int(count[1:])


@functools.lru_cache(maxsize=256)
def bulk_kind(parts: tuple[str, ...]) -> str:
    """Direction of a bulk / tensor copy: load (global -> shared), store, shared (cluster), prefetch, multicast."""
    if "prefetch" in parts:
        return "prefetch"
    if parts[1] == "reduce":
        return "reduce"
    if any(p.startswith("multicast") for p in parts):
        return "multicast"
    spaces = [p.split("::")[0] for p in parts[2:] if p.split("::")[0] in _STATE_SPACES]
    if len(spaces) >= 2:
        dst, src = spaces[:2]
        if dst == "global":
            return "store"
        return "load" if src == "global" else "shared"
    return "other"


def mbarrier_kind(parts: tuple[str, ...]) -> str:
    """`mbarrier.arrive.expect_tx.shared::cta.b64` -> "arrive_expect_tx"; `mbarrier.try_wait.parity` -> "try_wait"."""
    kind = parts[1] if len(parts) > 1 else "?"
    if kind in ("arrive", "arrive_drop") and "expect_tx" in parts:
        kind += "_expect_tx"
    return kind


@_gc_paused
def view(kernel: Kernel) -> View:
    """Count every census category in one kernel's PTX."""
    c = new_counters()
    commits = barriers = shuffles = atomics = bulk = 0
    waits: list[int] = []
    t = {**optional_tallies(), "wmma_loads": 0, "wmma_stores": 0}
    counted: dict[str, tuple[str, ...] | None] = {}  # opcode -> its parts, None where no branch below takes it
    counted_parts = counted.get
    for ins in kernel.instrs + kernel.called if kernel.called else kernel.instrs:
        parts = counted_parts(ins.opcode, ())
        if parts == ():
            parts = opcode_parts(ins.opcode)
            parts = counted[ins.opcode] = parts if parts[0] in _COUNTED_ROOTS else None
        if parts is None:
            continue
        root = parts[0]
        if root in ("ld", "ldu", "st"):
            space = space_of(parts)
            if space in ("param", "const"):
                continue
            key = f"{space}_{'stores' if root == 'st' else 'loads'}"
            c[key][access_bits(parts)] += 1
            if key in _HINT_COUNTERS:
                counter, known = _HINT_COUNTERS[key]
                for hint in parts[2:]:
                    if hint in known or hint.startswith(("L1::", "L2::")):
                        c[counter][hint] += 1
                order = [p for p in parts[1:] if p in _ORDER_MARKS]
                if order:
                    c["global_ordering"][".".join(["store" if root == "st" else "load", *order])] += 1
            if ins.guard:
                c["predicated"][key] += 1
        elif root == "cp" and len(parts) > 2 and parts[1] == "reduce" and "bulk" in parts:
            bulk += 1
            c["bulk"]["reduce"] += 1
        elif root == "cp" and len(parts) > 1 and parts[1] == "async":
            if "bulk" in parts:
                if "commit_group" in parts:
                    t["bulk_commits"] += 1
                elif "wait_group" in parts:
                    depth = wait_depth(ins.operands)
                    if depth is not None:
                        t["bulk_waits"].append(depth)
                else:
                    bulk += 1
                    c["bulk"][bulk_kind(parts)] += 1
            elif "mbarrier" in parts:
                c["mbarrier"]["cp_async_arrive"] += 1
            elif "commit_group" in parts:
                commits += 1
            elif "wait_group" in parts:
                depth = wait_depth(ins.operands)
                if depth is not None:
                    waits.append(depth)
            elif "wait_all" in parts:
                waits.append(0)
            elif "shared" in ins.opcode and "global" in ins.opcode:
                size = ins.operands.split(",")[2].strip()
                c["cp_async"][copy_bits(size)] += 1
                if ins.guard:
                    c["predicated"]["cp_async"] += 1
        elif root == "barrier" and len(parts) > 2 and parts[1] == "cluster":
            c["cluster_barriers"][parts[2]] += 1
        elif root in ("bar", "barrier") and "warp" not in parts:
            barriers += 1
        elif root in _FENCE_ROOTS:
            c["memory_fences"][ins.opcode] += 1
        elif root == "shfl":
            shuffles += 1
        elif root in ("atom", "red"):
            atomics += 1
        elif root in _SPECIAL:
            if root == "div" and not any(p in ("f32", "f64") for p in parts):
                continue  # integer division is arithmetic, not a special-function op
            mode = next((p for p in parts[1:] if p in ("approx", "rn", "full", "rz", "rm", "rp")), "")
            c["special"][f"{root}.{mode}" if mode else root] += 1
        elif root in _MATRIX:
            op = parts[1] if len(parts) > 1 else ""
            if root == "wgmma" and op != "mma_async":
                if op == "fence":
                    t["wgmma_fences"] += 1
                elif op == "commit_group":
                    t["wgmma_commits"] += 1
                elif op == "wait_group":
                    depth = wait_depth(ins.operands)
                    if depth is not None:
                        t["wgmma_waits"].append(depth)
            elif root == "tcgen05" and op != "mma":  # alloc, ld, st, cp, commit, fence::…, wait::ld: no matrix op
                c["tensor_memory"][op.replace("::", "_")] += 1
            elif root == "wmma" and op in ("load", "store"):
                if op == "load":
                    t["wmma_loads"] += 1
                else:
                    t["wmma_stores"] += 1
            else:
                c["matrix"][root] += 1
                c["matrix_shapes"][matrix_shape_key(parts)] += 1
        elif root in ("ldmatrix", "stmatrix"):
            key, nbytes = matrix_move_key(parts)
            if root == "ldmatrix":
                c["matrix_loads"][key] += 1
                t["matrix_load_bytes"] += nbytes
            else:
                c["matrix_stores"][key] += 1
                t["matrix_store_bytes"] += nbytes
        elif root == "mbarrier":
            c["mbarrier"][mbarrier_kind(parts)] += 1
        elif root == "griddepcontrol" and len(parts) > 1:
            c["grid_dependency"][parts[1]] += 1
        elif root == "elect":
            t["elects"] += 1
        elif root == "setmaxnreg" and len(parts) > 1:
            regs = ptx_int(ins.operands)
            if regs is not None:
                t["setmaxnreg"].append((parts[1], regs))
    in_flight = flight.ptx_in_flight(kernel)
    return View(
        instructions=len(kernel.instrs) + len(kernel.called),
        cp_async_commits=commits,
        cp_async_wait=tuple(waits),
        bulk_copies=bulk,
        barriers=barriers,
        shuffles=shuffles,
        atomics=atomics,
        **counted_fields(c, t, in_flight),
        params=flight.param_access(kernel),
        registers_declared=kernel.registers_declared,
        shared_declared=kernel.shared_declared,
    )
