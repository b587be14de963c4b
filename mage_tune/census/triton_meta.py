"""What Triton's cache keeps beside a kernel's PTX (`NAME.json`): the options its ptxas run used, and launch facts.

Triton 3.9 assembles with `ptxas -lineinfo [--fmad=false] -v --regAllocOptLevel=2 [ptx_options] --gpu-name=sm_XX`
(backends/nvidia/compiler.py, `make_cubin`): `--fmad=false` when the kernel was compiled with
`enable_fp_fusion=False`, `ptx_options` as the user set them. The same options give the census the registers and
SASS Triton's own cubin has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TritonMeta:
    path: str  # the metadata file read
    ptxas_options: tuple[str, ...]
    shared: int  # dynamic shared memory Triton allocates at launch, bytes
    num_warps: int
    triton_version: str


def _version(text: str) -> tuple[int, int]:
    parts = [int(p) for p in text.split(".")[:2] if p.isdigit()]
    return (parts[0], parts[1]) if len(parts) == 2 else (0, 0)


def ptxas_options_of(meta: dict) -> tuple[str, ...]:
    """The ptxas options Triton used for a kernel with this metadata (beyond -v and the arch)."""
    options = ["-lineinfo"]
    if meta.get("enable_fp_fusion") is False:
        options.append("--fmad=false")
    if _version(str(meta.get("triton_version", ""))) >= (3, 9):
        options.append("--regAllocOptLevel=2")  # Triton 3.9 works around a ptxas 13 register-allocation bug
    extra = meta.get("ptx_options")
    if extra:
        options += str(extra).split()
    return tuple(options)


def beside(ptx_path: Path) -> TritonMeta | None:
    """Triton's metadata for `k.ptx` from `k.json` in the same folder, or None where there is none (or not Triton's)."""
    path = ptx_path.with_suffix(".json")
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or "num_warps" not in meta or "triton_version" not in meta:
        return None
    return TritonMeta(
        str(path),
        ptxas_options_of(meta),
        int(meta.get("shared") or 0),
        int(meta["num_warps"]),
        str(meta["triton_version"]),
    )
