"""A large PTX module split into parts that ptxas and the disassembler can take side by side.

ptxas compiles each `.entry` on its own, so a module whose kernels are spread over several modules, each keeping every
top-level item that is not a kernel (declarations, `.func` definitions, `.global`/`.const`/`.shared` variables, the
`.version`/`.target`/`.address_size` header), assembles each kernel to the same SASS. The census of a 1 MB PTX is
mostly ptxas and cuobjdump time; in parts on several cores it is the slowest part's.
"""

from __future__ import annotations

import re

_BLANKED = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:[^\"\\\n]|\\.)*\"", re.S)  # comments and strings: no brace counts
_KERNEL = re.compile(r"\s*(?:\.(?:visible|weak)\s+)?\.entry\b")


def top_level_items(ptx: str) -> list[tuple[str, bool]] | None:
    """The module as (text, is_kernel) items in order; their texts joined give the module back exactly. An item ends
    at a `;` or a closing `}` outside every brace. None when the braces do not balance."""
    scan = _BLANKED.sub(lambda m: " " * len(m.group(0)), ptx)
    items, start, depth = [], 0, 0
    for m in re.finditer(r"[;{}]", scan):
        char = m.group(0)
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return None
        if depth == 0 and char != "{":
            text = ptx[start : m.end()]
            items.append((text, char == "}" and bool(_KERNEL.match(_BLANKED.sub(" ", text)))))
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
