"""A large PTX module split into parts that ptxas and the disassembler can take side by side.

ptxas compiles each `.entry` on its own, so a module whose kernels are spread over several modules, each keeping every
top-level item that is not a kernel (declarations, `.func` definitions, `.global`/`.const`/`.shared` variables, the
`.version`/`.target`/`.address_size` header), assembles each kernel to the same SASS. The census of a 1 MB PTX is
mostly ptxas and cuobjdump time; in parts on several cores it is the slowest part's.
"""

from __future__ import annotations

import re

_BLANKED = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:[^\"\\\n]|\\.)*\"", re.S)  # comments and strings: no brace counts
_ENTRY = re.compile(r"(?:\.(?:visible|weak)\s+)?\.entry\b")


def blanked(text: str) -> str:
    """`text` with its comments and string literals as spaces (PTX's and C's are written alike): same length, so
    positions found in it hold in `text`."""
    return _BLANKED.sub(lambda m: " " * len(m.group(0)), text)


def top_level_items(ptx: str) -> list[tuple[str, bool]] | None:
    """The module as (text, is_kernel) items in order; their texts joined give the module back exactly. An item ends
    at a `;` or a closing `}` outside every brace; a kernel starts at its `.entry` (or the `.visible` before it), so
    directives without a `;` before it (nvcc's `.version`, `.target`, `.address_size`) are an item of their own, in
    every part. None when the braces do not balance."""
    scan = blanked(ptx)
    items, start, depth = [], 0, 0
    for m in re.finditer(r"[;{}]", scan):
        char = m.group(0)
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return None
        if depth == 0 and char != "{":
            entry = _ENTRY.search(scan, start, m.end()) if char == "}" else None
            if entry is not None and scan[start : entry.start()].strip():
                items.append((ptx[start : entry.start()], False))
                start = entry.start()
            items.append((ptx[start : m.end()], entry is not None))
            start = m.end()
    if depth:
        return None
    if ptx[start:]:
        items.append((ptx[start:], False))
    return items


def split(ptx: str, parts: int) -> list[str]:
    """Up to `parts` modules that together hold each kernel once and each other item in all of them; the module
    itself when it has fewer than two kernels or its braces do not balance (ptxas will say why)."""
    items = top_level_items(ptx)
    kernels = [i for i, (_, is_kernel) in enumerate(items or []) if is_kernel]
    if parts < 2 or len(kernels) < 2:
        return [ptx]
    parts = min(parts, len(kernels))
    share = {index: n % parts for n, index in enumerate(kernels)}  # round robin: neighbours differ in cost alike
    return [
        "".join(text for i, (text, is_kernel) in enumerate(items) if not is_kernel or share[i] == part)
        for part in range(parts)
    ]


_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


def entry_params(ptx: str, kernel: str) -> list[tuple[str, str, int]] | None:
    """The parameters of `.entry kernel(...)` as (name, kind, bytes): kind "float" for .f16/.f32/.f64, "int" for
    .u/.s/.b/.pred types (PTX keeps no signedness for a C parameter), "bytes" for an aggregate (`.b8 name[N]`, a
    struct passed by value); None when the module has no such entry."""
    scan = blanked(ptx)
    found = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*(\(|(?=[{.;]))", scan)
    if found is None:
        return None
    if not found.group(1):  # `.entry kernel { ... }`: PTX lets a kernel without parameters leave the list out
        return []
    close = scan.find(")", found.end())
    if close < 0:
        return None
    params = []
    for item in scan[found.end() : close].split(","):
        tokens = item.split()
        if not tokens:
            continue
        name = tokens[-1]
        count = 1
        array = re.fullmatch(r"([\w$]+)\[(\d+)\]", name)
        if array:
            name, count = array.group(1), int(array.group(2))
        kinds = [t for t in tokens if re.fullmatch(r"\.[fusb]\d+|\.pred", t)]
        if not kinds:
            params.append((name, "bytes", 0))
            continue
        ptx_type = kinds[0]
        size = 1 if ptx_type == ".pred" else _TYPE_BYTES.get(ptx_type[2:], 0)
        kind = "float" if ptx_type.startswith(".f") else "int"
        params.append((name, "bytes" if array else kind, size * count))
    return params
