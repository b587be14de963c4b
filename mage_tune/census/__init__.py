"""The census: what a kernel binary holds, counted offline from its PTX, SASS and NVIDIA's resource reports.

`census_path(path)` reads .cu, .ptx, a binary (.cubin, host object, executable, .fatbin: one record per kernel and
arch) or a saved SASS listing; `census_artifact(artifact)` censuses a compile the caller already made (templates,
Triton). Both return one `Census` per kernel; `census_variant(variant)` is the one of a built family variant.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mage_tune.arch import ARCH_NAMES, ARCHS, DEFAULT_ARCH, Arch, arch_of_ptx_target, assembler_note, get_arch
from mage_tune.census import fatbin, triton_meta
from mage_tune.census import ptx as ptx_view
from mage_tune.census import resources as res
from mage_tune.census import sass as sass_view
from mage_tune.census.elf import ElfFacts, entry_functions, parse_elf
from mage_tune.census.model import SCHEMA, Census, Cluster, ParamAccess, Resources, View
from mage_tune.census.names import demangle, demangle_all, ordered, select
from mage_tune.census.occupancy import Occupancy, occupancy
from mage_tune.census.source_params import source_param_names
from mage_tune.compile import (
    ARCH_TAIL,
    Artifact,
    SourceOptions,
    UnsupportedTarget,
    build_from_cu,
    build_from_cubin,
    build_from_ptx,
    compile_cu,
)
from mage_tune.errors import CompileError, InputError
from mage_tune.inputs import read_input

__all__ = [
    "SCHEMA",
    "Census",
    "Cluster",
    "ParamAccess",
    "Resources",
    "SourceOptions",
    "View",
    "census_artifact",
    "census_path",
    "census_variant",
    "demangle",
]


def _rename_params(view: View | None, kernel: ptx_view.Kernel, names: list[str]) -> View | None:
    if view is None or not view.params:
        return view
    mapping = {}
    for i, (ptx_name, _) in enumerate(kernel.params):
        mapping[ptx_name] = names[i] if i < len(names) else re.sub(rf"^{re.escape(kernel.name)}_", "", ptx_name)
    renamed = {mapping.get(k, k): v for k, v in view.params.items()}
    return View(**{**view.__dict__, "params": renamed})


def census_variant(variant) -> Census:
    """The census of a built family variant (a `kernels.base.Variant`): its own kernel, block and parameter names."""
    return census_artifact(
        variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )[0]


def _threads(block: int | tuple[int, ...] | None) -> int | None:
    """Threads per block of a block given as an int or as (x, y, z)."""
    if block is None or isinstance(block, int):
        return block
    return math.prod(block)


def census_artifact(
    art: Artifact,
    kernel: str | None = None,
    block: int | tuple[int, ...] | None = None,
    param_names: list[str] | None = None,
) -> list[Census]:
    """One Census per kernel of a compiled artifact, in one order for every input kind (by readable name), or only
    `kernel` (symbol, full demangled name such as `reduce6<256u>`, or an unambiguous prefix)."""
    module = ptx_view.parse(art.ptx, art.label) if art.ptx is not None else None
    sass_funcs = sass_view.parse(art.sass, art.label) if art.sass is not None else {}
    names, readable = _kernel_names(art, module, sass_funcs)
    if kernel is not None:
        names = select(kernel, names, readable, art.label)
    reports = res.parse_ptxas(art.ptxas_log) if art.ptxas_log else {}
    usage = res.parse_res_usage(art.res_usage) if art.res_usage else {}
    if art.sass is not None and not usage:  # a saved listing may carry cuobjdump -res-usage lines of its own
        usage = res.parse_res_usage(art.sass)
    elf = parse_elf(art.res_usage) if art.res_usage else {}
    out = []
    for name in names:
        k = next((k for k in module.kernels if k.name == name), None) if module else None
        ptx = ptx_view.view(k) if k else None
        if k is not None:
            names_here = param_names or source_param_names(art.source, readable[name], len(k.params))
            ptx = _rename_params(ptx, k, names_here)
        sass = sass_view.view(sass_funcs[name]) if name in sass_funcs else None
        facts = elf.get(name)
        resources = _resources(art, reports.get(name), usage.get(name), facts)
        bounds = dict(k.launch_bounds) if k else _elf_bounds(facts)
        threads = _threads(block) or bounds.get("reqntid") or bounds.get("maxntid")
        occ = _occupancy(art.arch, threads, resources)
        refused = _over_bounds(threads, bounds)
        if occ is not None and refused:  # the resources would fit, but the kernel's bounds refuse the launch
            occ = dataclasses.replace(occ, blocks_per_sm=0, warps_per_sm=0, fraction=0.0, limiter="invalid")
        dims = _block_dims(block, k, facts) if threads else None
        out.append(
            Census(
                name,
                readable[name],
                art.label,
                art.arch,
                resources,
                occ,
                bounds,
                ptx,
                sass,
                art.tools,
                notes=(*art.notes, *([f"{art.label}: {refused}"] if refused else [])),
                cluster=_cluster(k, facts),
                block_dims=dims,
            )
        )
    return out


def _kernel_names(
    art: Artifact, module: ptx_view.Module | None, sass_funcs: dict[str, list[sass_view.SassInstr]]
) -> tuple[list[str], dict[str, str]]:
    """The kernels in their one order, and their readable names. Only entry functions are kernels: the PTX's
    `.entry`s, else the listing's functions that the symbol table marks as entries, since relocatable (-rdc) and -G
    code lists its device functions as functions of their own."""
    names = [k.name for k in module.kernels] if module is not None else _entries(art, sass_funcs)
    readable = demangle_all(names)
    return ordered(names, readable), readable


def _entries(art: Artifact, sass_funcs: dict[str, list[sass_view.SassInstr]]) -> list[str]:
    """The functions of a binary or listing that are kernels: those its symbol table marks as entries. A cuobjdump
    -sass listing has none: there a function that returns (RET) and never exits (EXIT) is a device function (an
    -rdc object lists each on its own), every other one a kernel (one that only spins has neither)."""
    functions = list(sass_funcs)
    entries = entry_functions(art.res_usage) if art.res_usage else None
    if entries is None:
        entries = entry_functions(art.sass or "")
    if entries is None:
        entries = {name for name, code in sass_funcs.items() if not _returns_only(code)}
    kernels = [name for name in functions if name in entries]
    if functions and not kernels:
        raise InputError(
            f"holds no kernel: its functions ({', '.join(functions)}) are device functions, none an entry "
            "(relocatable device code, for a kernel in another file to call)",
            file=art.label,
        )
    return kernels


def _returns_only(code: list[sass_view.SassInstr]) -> bool:
    """Whether SASS code returns to a caller and never exits: a device function's."""
    opcodes = {i.opcode.split(".")[0] for i in code}
    return "RET" in opcodes and "EXIT" not in opcodes


def _block_dims(
    block: int | tuple[int, ...] | None, kernel: ptx_view.Kernel | None, facts: ElfFacts | None
) -> tuple[int, int, int] | None:
    """The block's (x, y, z) where known, from where its thread count came: as given, else the PTX's .reqntid or
    .maxntid as written, else the cubin's."""
    if block:
        return _dims3((block,) if isinstance(block, int) else tuple(block))
    if kernel is not None:
        return _dims3(kernel.block_dims.get("reqntid") or kernel.block_dims.get("maxntid"))
    if facts is not None:
        return _dims3(facts.reqntid or facts.max_threads)
    return None


def _elf_bounds(facts: ElfFacts | None) -> dict[str, int]:
    """Launch bounds a cubin states (EIATTR_REQNTID / EIATTR_MAX_THREADS), as PTX would write them."""
    if facts is None:
        return {}
    bounds = {}
    for key, dims in (("reqntid", facts.reqntid), ("maxntid", facts.max_threads)):
        if dims:
            bounds[key] = math.prod(dims)
    if facts.min_ctas_per_sm:
        bounds["minnctapersm"] = facts.min_ctas_per_sm
    return bounds


def _cluster(kernel: ptx_view.Kernel | None, facts: ElfFacts | None) -> Cluster | None:
    """The thread-block cluster a kernel declares: from its PTX directives, else from the cubin's ELF."""
    if kernel is not None and kernel.cluster:
        dims = kernel.cluster.get("reqnctapercluster")
        rank = kernel.cluster.get("maxclusterrank")
        return Cluster(
            dims=_dims3(dims), explicit="explicitcluster" in kernel.cluster, max_rank=rank[0] if rank else None,
            source="PTX",
        )  # fmt: skip
    if facts is not None and (facts.cluster_dims or facts.explicit_cluster or facts.max_cluster_rank):
        return Cluster(_dims3(facts.cluster_dims), facts.explicit_cluster, facts.max_cluster_rank, "cubin ELF")
    return None


def _dims3(dims: tuple[int, ...] | None) -> tuple[int, int, int] | None:
    if not dims:
        return None
    padded = (*dims, 1, 1)[:3]
    return (padded[0], padded[1], padded[2])


def _resources(
    art: Artifact, report: res.PtxasReport | None, usage: dict[str, int] | None, facts: ElfFacts | None = None
) -> Resources:
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
        # a relocatable ELF (-rdc, ptxas -c) is not linked yet: cuobjdump folds no reservation into its SHARED
        relocatable = bool(art.res_usage) and "type=ET_REL" in art.res_usage
        reserved = 0 if relocatable else res.reserved_in_res_usage(art.arch)
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
    if facts is not None:
        # ptxas writes EIATTR_NUM_BARRIERS only for a kernel that uses one: its absence is 0, as ptxas -v says
        for field, value in (("registers", facts.registers), ("barriers_used", facts.barriers or 0)):
            if values[field] is None and value is not None:
                values[field], sources[field] = value, "cuobjdump -elf"
    if art.dynamic_shared:
        sources["dynamic_shared_bytes"] = "launcher metadata"
    return Resources(dynamic_shared_bytes=art.dynamic_shared, sources=sources, **values)


def _over_bounds(threads: int | None, bounds: dict) -> str | None:
    """Why a block of `threads` cannot launch a kernel whose launch bounds say otherwise (a launch of more threads
    than `.maxntid`, or other than `.reqntid`, fails); None where it can."""
    if not threads:
        return None
    if bounds.get("reqntid") and threads != bounds["reqntid"]:
        return f"a block of {threads} threads cannot launch it: its .reqntid is {bounds['reqntid']}"
    if bounds.get("maxntid") and threads > bounds["maxntid"]:
        return f"a block of {threads} threads cannot launch it: its launch bounds allow {bounds['maxntid']} at most"
    return None


def _occupancy(arch_name: str, threads: int | None, resources: Resources) -> Occupancy | None:
    arch = ARCHS.get(arch_name)  # the binary's own arch: none for one mage-tune has no facts for
    if not threads or resources.registers is None or arch is None:
        return None
    shared = (resources.shared_bytes or 0) + resources.dynamic_shared_bytes
    return occupancy(arch, threads, resources.registers, shared, barriers=resources.barriers_used or 1)


def load(
    path: str | Path,
    arch: str | Arch | None = None,
    ptxas_options: tuple[str, ...] | None = None,
    source_options: SourceOptions | None = None,
) -> Artifact:
    """Read and compile a file as what its suffix or content says it is: the code of one arch (`arch` chooses it
    from a binary that holds several; load_all takes them all)."""
    found = load_all(path, arch, ptxas_options, source_options)
    if len(found) > 1:
        raise InputError(f"holds SASS for {_arch_list(found)}: pass --arch to choose one", file=str(path))
    return found[0]


# A cubin or a host object or executable (ELF), or a .fatbin: cuobjdump reads each
_ELF_MAGIC, _FATBIN_MAGIC = b"\x7fELF", b"\x50\xed\x55\xba"


def load_all(
    path: str | Path,
    arch: str | Arch | None = None,
    ptxas_options: tuple[str, ...] | None = None,
    source_options: SourceOptions | None = None,
) -> list[Artifact]:
    """Read and compile a file as what its suffix or content says it is: one artifact, or one per arch of SASS in a
    binary or listing that holds several (in arch order; `arch` keeps only its own)."""
    path = Path(path)
    label = str(path)
    data = read_input(path)  # a regular file, bounded: never a device read for ever
    if not data.strip():
        raise InputError("empty file", file=label)
    if arch is not None:
        try:
            arch = get_arch(arch)  # the arch name a user gave becomes an Arch here, once
        except InputError as exc:
            raise InputError(exc.message, file=label) from None  # say which input the arch was meant for
    if data[:4] in (_ELF_MAGIC, _FATBIN_MAGIC):
        return _choose_arch(fatbin.by_arch(build_from_cubin(data, label)), arch, label)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start}) and not a cubin", file=label) from None
    if "\x00" in text:
        raise InputError("binary data, not PTX, CUDA source, SASS text or a cubin", file=label)
    suffix = path.suffix.lower()
    if suffix == ".ptx" or (suffix not in (".cu", ".cuh") and re.search(r"^\s*\.version\s", text, re.M)):
        return [_assemble_while_parsing(path, text, arch, label, ptxas_options)]
    if suffix in (".cu", ".cuh"):
        opts = source_options or SourceOptions()
        return [_load_cu(text, arch, label, opts) if arch else _load_cu_default_arch(text, label, opts)]
    if sass_view.looks_like_sass(text):
        listing = Artifact(label, sass_view.arch_of(text) or DEFAULT_ARCH, sass=text)
        listings = fatbin.by_arch(listing)
        if len(listings) > 1:  # a fatbinary's listing: as its binary would be
            return _choose_arch(listings, arch, label)
        return [dataclasses.replace(listing, arch=arch.name) if arch else listing]
    raise InputError("not PTX, CUDA source (.cu), SASS text or a cubin", file=label)


def _arch_list(arts: list[Artifact]) -> str:
    return ", ".join(a.arch for a in arts)


def _choose_arch(arts: list[Artifact], arch: Arch | None, label: str) -> list[Artifact]:
    """A binary's code for `arch`, else all of it (a note on each where that is several archs). A binary is built
    for its archs: --arch chooses among them and cannot change them."""
    if arch is None:
        if len(arts) == 1:
            return arts
        note = f"{label}: holds SASS for {_arch_list(arts)}, censused one arch at a time; --arch chooses one"
        return [dataclasses.replace(a, notes=(*a.notes, note)) for a in arts]
    chosen = [a for a in arts if a.arch == arch.name]
    if chosen:
        return chosen
    if len(arts) == 1:
        raise InputError(f"the cubin is built for {arts[0].arch}, not --arch {arch.name}", file=label)
    raise InputError(f"holds SASS for {_arch_list(arts)}, none for --arch {arch.name}", file=label)


def _assemble_while_parsing(
    path: Path, text: str, arch: Arch | None, label: str, ptxas_options: tuple[str, ...] | None
) -> Artifact:
    """ptxas and the disassembler run (as processes, from a thread) while this thread parses the PTX, which the
    census then takes from the parser's cache. A garbled file's parse error (with its line) wins over whatever ptxas
    says of it."""
    _, target = ptx_view.header(text, label)
    with ThreadPoolExecutor(1) as pool:
        assembling = pool.submit(_load_ptx_file, path, text, target, arch, label, ptxas_options)
        ptx_view.parse(text, label)
        return assembling.result()


def _ptx_only(ptx: str, arch_name: str, label: str, why: str, source: str | None = None) -> Artifact:
    """An artifact with the PTX view only, and a note that names the file, why SASS is missing and the fix."""
    return Artifact(label, arch_name, ptx=ptx, source=source, notes=(f"{label}: no SASS view: {why}",))


# ptxas's refusal of an instruction that only an arch-specific target (sm_90a) has: "Instruction 'wgmma.fence' not
# supported on .target 'sm_90'"
_NEEDS_SPECIFIC_ARCH = re.compile(r"Instruction '([^']+)' not supported on \.target '(sm_\d+)'")
# What a source tests to keep code to an arch-specific target (CUTLASS's sm90 kernels do): nvcc defines it there alone
_FEATURE_GUARD = re.compile(r"__CUDA_ARCH_FEAT_SM(\d+)_ALL")


def _load_cu_default_arch(text: str, label: str, opts: SourceOptions) -> Artifact:
    """A CUDA source with no --arch: compiled for DEFAULT_ARCH, or for its arch-specific target (sm_90 → sm_90a) where
    ptxas says an instruction needs that (wgmma, setmaxnreg), with a note saying so; a note too where the source keeps
    code to the specific target (__CUDA_ARCH_FEAT_SM90_ALL) and the census is of the code without it."""
    arch = get_arch(DEFAULT_ARCH)
    specific = ARCHS.get(arch.name + "a")
    try:
        art = _load_cu(text, arch, label, opts)
    except (InputError, CompileError) as exc:  # ptxas's refusal, through NVRTC's path or nvcc's
        refused = _NEEDS_SPECIFIC_ARCH.search(exc.message)
        if specific is None or refused is None or refused.group(2) != arch.name:
            raise
        try:
            art = _load_cu(text, specific, label, opts)
        except (InputError, CompileError) as again:  # not the specific target's alone either (tcgen05): say both
            raise type(again)(f"{exc.message}; {specific.name}, tried next: {again.message}", file=label) from None
        note = (
            f"{label}: compiled for {specific.name}, not the default {arch.name}, which ptxas refused "
            f"({refused.group(1)} needs {specific.name}){ARCH_TAIL}"
        )
        return dataclasses.replace(art, notes=(*art.notes, note))
    if specific is not None and any(f"sm_{g}a" == specific.name for g in _FEATURE_GUARD.findall(text)):
        note = (
            f"{label}: compiled for the default {arch.name}, where __CUDA_ARCH_FEAT_SM{arch.name[3:]}_ALL is not "
            f"defined: the code the source keeps to {specific.name} is left out{ARCH_TAIL}"
        )
        art = dataclasses.replace(art, notes=(*art.notes, note))
    return art


def _load_cu(text: str, arch: Arch, label: str, opts: SourceOptions) -> Artifact:
    """A CUDA source as its author wrote it (headers found, -I/-D/--std, NVRTC or nvcc); the PTX view alone where
    no ptxas here can assemble the arch."""
    note = assembler_note(arch)
    if not note:
        try:
            return build_from_cu(text, arch, label, source_options=opts, relocatable=True)
        except UnsupportedTarget as exc:
            note = exc.message + "; install a newer CUDA toolkit and set CUDA_HOME"
    ptx, tools, notes = compile_cu(text, arch, label, opts)
    art = _ptx_only(ptx, arch.name, label, note, source=text)
    return dataclasses.replace(art, tools=tools, notes=(*notes, *art.notes))


def _load_ptx_file(
    path: Path, text: str, target: str, arch: Arch | None, label: str, ptxas_options: tuple[str, ...] | None
) -> Artifact:
    """A PTX file, assembled with the options given, else with Triton's when its metadata JSON lies beside it."""
    meta = triton_meta.beside(path) if ptxas_options is None else None
    options = meta.ptxas_options if meta else tuple(ptxas_options or ())
    art = _load_ptx(text, target, arch, label, options)
    tools = dict(art.tools)
    if meta:
        tools["ptxas options"] = f"{' '.join(options)} (Triton {meta.triton_version}'s, from {meta.path})"
        return dataclasses.replace(art, tools=tools, dynamic_shared=meta.shared)
    if options:
        tools["ptxas options"] = f"{' '.join(options)} (--ptxas-options)"
        return dataclasses.replace(art, tools=tools)
    return art


def _load_ptx(text: str, target: str, arch: Arch | None, label: str, ptxas_options: tuple[str, ...] = ()) -> Artifact:
    """PTX -> artifact for `arch`, or for the arch its `.target` names; the PTX view alone where ptxas cannot help."""
    if arch is None:
        try:
            arch = arch_of_ptx_target(target)
        except InputError:
            why = f".target {target} is not an arch mage-tune models ({', '.join(ARCH_NAMES)})"
            return _ptx_only(text, target, label, why + "; pass --arch to assemble it for one of them")
    elif target[-1] in "af" and re.fullmatch(r"sm_\d+[af]", target) and arch.name != target:
        raise InputError(
            f".target {target} holds arch-specific code that assembles only for {target}, not {arch.name}: "
            f"drop --arch or pass --arch {target}",
            file=label,
        )
    note = assembler_note(arch)
    if note:
        return _ptx_only(text, arch.name, label, note)
    try:
        return build_from_ptx(text, arch, label, ptxas_options=ptxas_options)
    except UnsupportedTarget as exc:
        return _ptx_only(text, arch.name, label, exc.message + "; install a newer CUDA toolkit and set CUDA_HOME")


def census_path(
    path: str | Path,
    arch: str | Arch | None = None,
    kernel: str | None = None,
    block: int | tuple[int, ...] | None = None,
    ptxas_options: tuple[str, ...] | None = None,
    source_options: SourceOptions | None = None,
) -> list[Census]:
    """Census every kernel in a file (or only `kernel`); `block` is threads per block or (x, y[, z]).
    `ptxas_options` go to ptxas for a PTX input (None: Triton's own when its metadata JSON lies beside the PTX, else
    none);
    `source_options` (include folders, macros, C++ standard, compiler) to the compile of a `.cu`."""
    arts = load_all(path, arch, ptxas_options=ptxas_options, source_options=source_options)
    if kernel is not None and len(arts) > 1:
        # a kernel that some archs' code lacks (an executable linked from files built for other archs) is
        # censused where it is; where none has it, the first arch's error lists the kernels there are
        arts = [a for a in arts if _holds(a, kernel)] or arts[:1]
    return [c for art in arts for c in census_artifact(art, kernel=kernel, block=block)]


def _holds(art: Artifact, kernel: str) -> bool:
    """Whether `kernel` names exactly one kernel of `art`."""
    sass_funcs = sass_view.parse(art.sass, art.label) if art.sass is not None else {}
    names, readable = _kernel_names(art, None, sass_funcs)
    try:
        select(kernel, names, readable, art.label)
    except InputError:
        return False
    return True


class _CallableModule(types.ModuleType):
    """`mage_tune.census` is this package and, called, `census_path`: `mage_tune.census("k.cu")` works whatever was
    imported before (a plain function of that name in `mage_tune` would be replaced by the subpackage on import)."""

    def __call__(self, *args, **kwargs) -> list[Census]:
        """`census_path(path, arch=None, kernel=None, block=None, ptxas_options=None, source_options=None)`."""
        return census_path(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
