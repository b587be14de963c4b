"""The census: what a kernel binary holds, counted offline from its PTX, SASS and NVIDIA's resource reports.

`census_path(path)` reads .cu, .ptx, .cubin or a saved SASS listing; `census_artifact(artifact)` censuses a compile
the caller already made (templates, Triton). Both return one `Census` per kernel.
"""

from __future__ import annotations

import re
from pathlib import Path

from mage_tune.census import ptx as ptx_view
from mage_tune.census import resources as res
from mage_tune.census import sass as sass_view
from mage_tune.census.model import SCHEMA, Census, ParamAccess, Resources, View
from mage_tune.census.occupancy import Occupancy, occupancy
from mage_tune.compile import Artifact, build_from_cu, build_from_cubin, build_from_ptx, check_arch
from mage_tune.errors import InputError

__all__ = ["SCHEMA", "Census", "ParamAccess", "Resources", "View", "census_artifact", "census_path"]


def demangle(name: str) -> str:
    """The qualified function name inside an Itanium-mangled symbol (`_Z6kernelPfi` -> `kernel`)."""
    if not name.startswith("_Z"):
        return name
    rest = name[2:]
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:]
    parts = []
    while rest and rest[0].isdigit():
        digits = re.match(r"\d+", rest).group(0)
        size = int(digits)
        parts.append(rest[len(digits) : len(digits) + size])
        rest = rest[len(digits) + size :]
        if not nested:
            break
    return "::".join(parts) if parts else name


def _source_param_names(source: str | None, kernel: str) -> list[str]:
    """Parameter names from the CUDA source's signature of `kernel` (PTX keeps only `kernel_param_N`)."""
    if not source:
        return []
    bounds = r"(?:__launch_bounds__\([^)]*\)\s*)?"  # allowed before or after `void`, as the guide writes it
    m = re.search(r"__global__\s+" + bounds + r"void\s+" + bounds + re.escape(kernel) + r"\s*\(", source)
    if not m:
        return []
    depth, end = 1, m.end()
    while end < len(source) and depth:
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        end += 1
    names = []
    for param in source[m.end() : end - 1].split(","):
        ident = re.findall(r"[A-Za-z_]\w*", param.split("=")[0])
        if ident:
            names.append(ident[-1])
    return names


def _rename_params(view: View | None, kernel: ptx_view.Kernel, names: list[str]) -> View | None:
    if view is None or not view.params:
        return view
    mapping = {}
    for i, (ptx_name, _) in enumerate(kernel.params):
        mapping[ptx_name] = names[i] if i < len(names) else re.sub(rf"^{re.escape(kernel.name)}_", "", ptx_name)
    renamed = {mapping.get(k, k): v for k, v in view.params.items()}
    return View(**{**view.__dict__, "params": renamed})


def _matches(wanted: str, name: str) -> bool:
    return wanted in (name, demangle(name), demangle(name).split("::")[-1])


def census_artifact(
    art: Artifact,
    kernel: str | None = None,
    block: int | None = None,
    param_names: list[str] | None = None,
) -> list[Census]:
    """One Census per kernel of a compiled artifact (or only `kernel`, by mangled or demangled name)."""
    module = ptx_view.parse(art.ptx, art.label) if art.ptx is not None else None
    sass_funcs = sass_view.parse(art.sass, art.label) if art.sass is not None else {}
    names = [k.name for k in module.kernels] if module else list(sass_funcs)
    if kernel is not None:
        names = [n for n in names if _matches(kernel, n)]
        if not names:
            known = ", ".join(k.name for k in module.kernels) if module else ", ".join(sass_funcs)
            raise InputError(f"no kernel named {kernel!r}; kernels here: {known}", file=art.label)
    reports = res.parse_ptxas(art.ptxas_log) if art.ptxas_log else {}
    usage = res.parse_res_usage(art.res_usage) if art.res_usage else {}
    out = []
    for name in names:
        k = next((k for k in module.kernels if k.name == name), None) if module else None
        ptx = ptx_view.view(k) if k else None
        if k is not None:
            ptx = _rename_params(ptx, k, param_names or _source_param_names(art.source, demangle(name)))
        sass = sass_view.view(sass_funcs[name]) if name in sass_funcs else None
        resources = _resources(art, reports.get(name), usage.get(name))
        bounds = k.launch_bounds if k else {}
        threads = block or bounds.get("reqntid") or bounds.get("maxntid")
        occ = _occupancy(art.arch, threads, resources)
        out.append(Census(name, demangle(name), art.label, art.arch, resources, occ, bounds, ptx, sass, art.tools))
    return out


def _resources(art: Artifact, report: res.PtxasReport | None, usage: dict[str, int] | None) -> Resources:
    """Prefer ptxas -v (it separates spills from local arrays); fill the rest from cuobjdump -res-usage."""
    sources: dict[str, str] = {}
    values: dict[str, int | None] = dict.fromkeys(
        (
            "registers",
            "shared_bytes",
            "stack_bytes",
            "spill_store_bytes",
            "spill_load_bytes",
            "barriers_used",
            "local_bytes",
        )
    )
    if report:
        for field, value in (
            ("registers", report.registers),
            ("shared_bytes", report.shared_bytes),
            ("stack_bytes", report.stack_bytes),
            ("spill_store_bytes", report.spill_store_bytes),
            ("spill_load_bytes", report.spill_load_bytes),
            ("barriers_used", report.barriers),
        ):
            if value is not None:
                values[field], sources[field] = value, "ptxas -v"
    if usage:
        reserved = res.reserved_in_res_usage(art.arch)
        for field, key, adjust in (
            ("registers", "REG", 0),
            ("shared_bytes", "SHARED", -reserved),
            ("stack_bytes", "STACK", 0),
            ("local_bytes", "LOCAL", 0),
        ):
            if values[field] is None and key in usage:
                values[field] = max(0, usage[key] + adjust)
                # Without static shared memory -res-usage shows 0, not the reservation: nothing was taken out.
                note = f" (minus the {reserved} B reservation)" if adjust and usage[key] else ""
                sources[field] = "cuobjdump -res-usage" + note
    if art.dynamic_shared:
        sources["dynamic_shared_bytes"] = "launcher metadata"
    return Resources(dynamic_shared_bytes=art.dynamic_shared, sources=sources, **values)


def _occupancy(arch: str, threads: int | None, resources: Resources) -> Occupancy | None:
    if not threads or resources.registers is None:
        return None
    shared = (resources.shared_bytes or 0) + resources.dynamic_shared_bytes
    return occupancy(arch, threads, resources.registers, shared, barriers=resources.barriers_used or 1)


def load(path: str | Path, arch: str | None = None) -> Artifact:
    """Read and compile a file as what its suffix or content says it is."""
    path = Path(path)
    label = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=label) from None
    if not data.strip():
        raise InputError("empty file", file=label)
    if arch is not None:
        try:
            check_arch(arch)
        except InputError as exc:
            raise InputError(exc.message, file=label) from None  # say which input the arch was meant for
    if data[:4] == b"\x7fELF":
        return build_from_cubin(data, label)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start}) and not a cubin", file=label) from None
    if "\x00" in text:
        raise InputError("binary data, not PTX, CUDA source, SASS text or a cubin", file=label)
    suffix = path.suffix.lower()
    if suffix == ".ptx" or (suffix not in (".cu", ".cuh") and re.search(r"^\s*\.version\s", text, re.M)):
        target = re.search(r"^\s*\.target\s+(sm_\d+)", text, re.M)
        ptx_view.parse(text, label)  # a garbled file fails here, with its line, before ptxas sees it
        return build_from_ptx(text, arch or (target.group(1) if target else "sm_90"), label)
    if suffix in (".cu", ".cuh"):
        return build_from_cu(text, arch or "sm_90", label)
    if sass_view.looks_like_sass(text):
        return Artifact(label, arch or sass_view.arch_of(text) or "sm_90", sass=text)
    raise InputError("not PTX, CUDA source (.cu), SASS text or a cubin", file=label)


def census_path(
    path: str | Path, arch: str | None = None, kernel: str | None = None, block: int | None = None
) -> list[Census]:
    """Census every kernel in a file (or only `kernel`)."""
    return census_artifact(load(path, arch), kernel=kernel, block=block)
