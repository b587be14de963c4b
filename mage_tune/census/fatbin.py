"""A fatbinary's code one arch at a time.

cuobjdump lists every ELF of a host object, executable or .fatbin one after another, each under a `Fatbin elf code:`
header naming its arch (`arch = sm_90a`, then `code for sm_90a` in a listing), and each embedded PTX under
`Fatbin ptx code:`. Censused as one text, two archs' functions of one name would be summed into one record; split,
each arch's kernels are censused from that arch's ELF alone. The PTX is left out: the SASS is what runs.
"""

from __future__ import annotations

import dataclasses
import re

from mage_tune.compile import Artifact

_HEADER = re.compile(r"^Fatbin (elf|ptx) code:", re.M)
_ARCH = re.compile(r"^arch = (sm_\d+[af]?)|code for (sm_\d+[af]?)", re.M)


def _elf_parts(text: str) -> dict[str, str]:
    """Arch -> the text of its ELFs (several where an executable was linked from several files), PTX parts dropped.
    Text before the first header is an ELF's: the census's listing starts at its first `code for`."""
    heads = list(_HEADER.finditer(text))
    bounds = [0, *(h.start() for h in heads), len(text)]
    kinds = ["elf", *(h.group(1) for h in heads)]
    parts: dict[str, str] = {}
    for kind, start, end in zip(kinds, bounds, bounds[1:], strict=False):
        named = _ARCH.search(text, start, end)
        if kind == "elf" and named:
            arch = named.group(1) or named.group(2)
            parts[arch] = parts.get(arch, "") + text[start:end]
    return parts


def _arch_order(arch: str) -> tuple[int, str]:
    return int(re.sub(r"\D", "", arch)), arch


def by_arch(art: Artifact) -> list[Artifact]:
    """One artifact per arch of SASS in `art` (in arch order), each with that arch's listing and ELF dump only;
    `art` itself where it holds one arch (a cubin, or an object built for one)."""
    listings = _elf_parts(art.sass or "")
    if len(listings) < 2:
        return [art]
    dumps = _elf_parts(art.res_usage or "")
    # cubin None: the bytes are the whole fatbinary's, not one arch's cubin
    return [
        dataclasses.replace(art, arch=arch, sass=listings[arch], res_usage=dumps.get(arch), cubin=None)
        for arch in sorted(listings, key=_arch_order)
    ]
