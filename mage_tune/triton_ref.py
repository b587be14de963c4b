"""Triton kernels compiled offline for any arch and handed to the same census as our templates.

`compile_jit(fn, signature, constexprs, arch, num_warps, ...)` compiles any `@triton.jit` function (the families'
reference kernels, a Triton family's configs); `compile_user(spec, signature, constexprs, arch, num_warps)` compiles
a user's own `@triton.jit` function from `path.py:kernel`. Both go through `triton.compiler.ASTSource` and
`GPUTarget("cuda", cc, 32)`: no GPU, no launch. What the census reads:

- PTX: Triton's own.
- SASS and `-res-usage`: `cuobjdump` on Triton's own cubin (the binary that would run).
- `ptxas -v`: the ptxas Triton runs for that arch (its bundled one) run again on Triton's PTX, same arch; Triton
  drops its own report. Where the registers it reports differ from the binary's, the report is dropped.
- `metadata.shared` (shared memory Triton allocates at launch) -> `Artifact.dynamic_shared`; `num_warps` -> the
  block (32 x num_warps threads); `metadata.name` -> the kernel name.

Specialization. At launch Triton's JIT specializes on the arguments: 16-byte aligned pointers and integers
divisible by 16 get `tt.divisibility=16`, and an integer equal to 1 becomes a constant. `ASTSource` sees none of
that unless told. By default we compile without it (the plain offline compile); `specialize=True` adds what the
JIT would add for the shape (pointers from an allocator are 16-byte aligned), which lets Triton vectorize masked
loads. The two can differ a lot (the layer norm's 24 scalar loads become 6 quad loads), so every TritonKernel says
which it is.

Triton 3.5+ appends scratch pointers (global / profile scratch) after the kernel's own parameters; the census's
parameter names map the jit arguments (constexprs removed) onto the first PTX parameters and call the extras
`scratch_0`, `scratch_1`. Compiles are cached by Triton's own cache (~/.triton/cache, or TRITON_CACHE_DIR).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mage_tune import toolchain
from mage_tune.arch import Arch, get_arch
from mage_tune.compile import Artifact, disassemble, ptxas
from mage_tune.errors import InputError, ToolchainError
from mage_tune.user_files import import_file

# triton loads on first use (about 0.15 s): every built-in family imports this module, and only compiling a Triton
# kernel needs it.

_OPTION_KEYS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class TritonKernel:
    """One Triton kernel compiled for one arch, config and num_warps, ready for `census_artifact`."""

    name: str
    config: dict  # constexprs plus num_warps / num_stages
    grid: tuple[int, int, int] | None  # None where the caller did not say (a user kernel without --grid)
    block: int  # 32 * num_warps
    artifact: Artifact
    param_names: tuple[str, ...]
    specialized: bool = False  # compiled with the JIT's launch-time divisibility / equal-to-1 specialization

    @property
    def num_warps(self) -> int:
        return self.block // 32


def next_power_of_2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- a user's kernel ------------------------------------------------------------------------------------------
def compile_user(
    spec: str,
    signature: str | None,
    constexprs: list[str] | tuple[str, ...],
    arch: Arch,
    num_warps: int | None = None,
    num_stages: int | None = None,
    grid: tuple[int, int, int] | None = None,
) -> TritonKernel:
    """Compile `path.py:kernel` with `signature` ("name:type,...") and `constexprs` ("NAME=value", ...).

    Every argument of the kernel needs a type in `signature`, in the function's order; an argument given a value
    with `constexprs` may be left out of `signature` (it is a constexpr). Errors name the file (and line where
    Python or Triton says).
    """
    path, name = _split_spec(spec)
    fn = _load_kernel(path, name)
    values = _parse_constexprs(constexprs, path)
    sig = _parse_signature(signature, fn, values, path)
    warps = num_warps or 4
    kernel = compile_jit(fn, sig, values, arch, warps, num_stages, "user", None, False, file=path)
    return dataclasses.replace(kernel, grid=grid)


def _split_spec(spec: str) -> tuple[str, str]:
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise InputError(f"expected path.py:kernel, got {spec!r}")
    if not Path(path).is_file():
        raise InputError("no such file", file=path)
    if not name.isidentifier():
        raise InputError(f"{name!r} is not a Python function name", file=path)
    return path, name


def _load_kernel(path: str, name: str):
    """Import the user's file under a module name of its own and return its @triton.jit function `name`."""
    module = import_file(Path(path), shown=path)
    fn = getattr(module, name, None)
    from triton.runtime.jit import JITFunction

    kernels = sorted(k for k, v in vars(module).items() if isinstance(v, JITFunction))
    if fn is None:
        known = ", ".join(kernels) or "none"
        raise InputError(f"no kernel named {name!r}; @triton.jit kernels here: {known}", file=path)
    if not isinstance(fn, JITFunction):
        line = _def_line(fn)
        raise InputError(f"{name!r} is not a @triton.jit kernel", file=path, line=line)
    return fn


def _def_line(fn) -> int | None:
    """Line of `def` in the file (decorators skipped)."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return start + i
    return start


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    return text


def _parse_constexprs(items, path: str) -> dict:
    values = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise InputError(f"--constexpr expects NAME=value, got {item!r}", file=path)
        values[key.strip()] = _parse_value(text.strip())
    return values


def _check_type(ty: str) -> bool:
    """Whether Triton's own type parser accepts `ty` (constexpr aside)."""
    if ty == "constexpr":
        return True
    from triton import language as tl

    try:
        params = inspect.signature(tl.str_to_ty).parameters
        tl.str_to_ty(ty, None) if len(params) > 1 else tl.str_to_ty(ty)
    except (KeyError, ValueError, IndexError, AttributeError, TypeError):
        return False
    return True


def _parse_signature(text: str | None, fn, values: dict, path: str) -> dict:
    args = list(fn.arg_names)
    typed: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        arg, sep, ty = (s.strip() for s in item.partition(":"))
        if not sep or not arg or not ty:
            raise InputError(f"--signature expects name:type,..., got {item.strip()!r}", file=path)
        if arg in typed:
            raise InputError(f"--signature names {arg!r} twice", file=path)
        typed[arg] = ty
    line = _def_line(getattr(fn, "fn", fn))
    unknown = list(dict.fromkeys(a for a in [*typed, *values] if a not in args))
    if unknown:
        verb = "is not an argument" if len(unknown) == 1 else "are not arguments"
        raise InputError(f"{', '.join(unknown)} {verb} of {fn.__name__}({', '.join(args)})", file=path, line=line)
    given = [a for a in args if a in typed]
    if given != list(typed):
        raise InputError(f"--signature must follow the kernel's order: {', '.join(args)}", file=path, line=line)
    sig = {}
    for i, arg in enumerate(args):
        declared = bool(getattr(fn.params[i], "is_constexpr", False)) if hasattr(fn, "params") else False
        ty = typed.get(arg) or ("constexpr" if arg in values or declared else None)
        if ty is None:
            raise InputError(
                f"--signature gives no type for {arg!r} (kernel arguments: {', '.join(args)})", file=path, line=line
            )
        if not _check_type(ty):
            raise InputError(
                f"type {ty!r} of {arg!r} is not a Triton type (e.g. *fp32, *fp16, i32, i64, fp32, constexpr)",
                file=path,
                line=line,
            )
        if ty == "constexpr" and arg not in values:
            raise InputError(f"{arg} is a constexpr and needs a value: --constexpr {arg}=...", file=path, line=line)
        if ty != "constexpr" and (declared or arg in values):
            why = "is declared tl.constexpr" if declared else "has a --constexpr value"
            raise InputError(f"{arg} {why} but --signature types it {ty!r}; make it constexpr", file=path, line=line)
        sig[arg] = ty
    return sig


# --- the compile ----------------------------------------------------------------------------------------------
def _triton_version() -> str:
    import triton

    return triton.__version__


@cache
def triton_ptxas(cc: int) -> toolchain.Tool:
    """The ptxas Triton itself runs for compute capability `cc` (3.9 takes its newer `ptxas-blackwell` for sm_90
    and up), else the `ptxas` bundled in Triton's backends/nvidia/bin."""
    path = None
    try:
        from triton.backends.nvidia import compiler as nv

        get = getattr(nv, "get_ptxas", None)
        if get is not None:
            try:
                found = get(cc)
            except TypeError:  # older Triton: get_ptxas() without the arch
                found = get()
            path = getattr(found, "path", None)
    except Exception:  # any Triton-internal change: fall back to the bundled binary
        path = None
    if not path:
        folder = toolchain.triton_bin_dir()
        exe = folder / "ptxas" if folder else None
        if exe is None or not exe.is_file():
            raise ToolchainError("Triton's bundled ptxas not found (backends/nvidia/bin); pip install triton")
        path = str(exe)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found = re.search(r"V(\d+\.\d+\.\d+)", out)
    return toolchain.Tool("ptxas", path, found.group(1) if found else "", "triton")


def _attrs(fn, sig: dict, values: dict | None, backend) -> tuple[dict, dict, dict]:
    """What the JIT would specialize at launch: (signature, extra constexprs, attrs)."""
    divisible = backend.parse_attr("D") if hasattr(backend, "parse_attr") else [["tt.divisibility", 16]]
    sig = dict(sig)
    constexprs, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        ty = sig.get(arg)
        if ty is None or ty == "constexpr":
            continue
        if ty.startswith("*"):
            attrs[(i,)] = divisible
        elif ty[0] in "iu" and values and values.get(arg) is not None:
            if values[arg] == 1:
                sig[arg], constexprs[arg] = "constexpr", 1
            elif values[arg] % 16 == 0:
                attrs[(i,)] = divisible
    return sig, constexprs, attrs


def compile_jit(
    fn,
    signature: dict,
    constexprs: dict,
    arch: Arch,
    num_warps: int,
    num_stages: int | None,
    origin: str,
    values: dict | None,
    specialize: bool,
    file: str | None = None,
    extra_options: dict | None = None,
) -> TritonKernel:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile
    from triton.compiler.errors import CompilationError

    if num_warps < 1 or num_warps & (num_warps - 1):
        raise InputError(f"num_warps must be a power of two, got {num_warps}", file=file)
    major, minor = arch.capability
    target = GPUTarget("cuda", major * 10 + minor, 32)  # Triton names sm_90 (and sm_90a) 90
    attrs = {}
    constexprs = dict(constexprs)
    if specialize:
        signature, extra, attrs = _attrs(fn, signature, values, make_backend(target))
        constexprs.update(extra)
    options = {"num_warps": num_warps, "enable_fp_fusion": True}  # Triton's default, said aloud (3.9 warns if not)
    if num_stages is not None:
        options["num_stages"] = num_stages
    options.update(extra_options or {})  # num_ctas, maxnreg: what this Triton version's CUDAOptions take
    label = f"{origin}:{fn.__name__}[{','.join(f'{k}={v}' for k, v in {**constexprs, **options}.items())}]"
    try:
        compiled = triton_compile(ASTSource(fn, signature, constexprs=constexprs, attrs=attrs), target, options)
    except CompilationError as exc:
        def_line = _def_line(fn.fn)
        node_line = getattr(getattr(exc, "node", None), "lineno", None)
        line = def_line + node_line - 1 if def_line and node_line else def_line
        why = (exc.error_message or str(exc).strip().splitlines()[-1]) if hasattr(exc, "error_message") else str(exc)
        raise InputError(f"Triton could not compile {fn.__name__}: {why}", file=file or label, line=line) from None
    except Exception as exc:  # Triton's type checks raise KeyError, AssertionError, ValueError...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise InputError(
            f"Triton could not compile {fn.__name__}: {type(exc).__name__}: {first}", file=file or label
        ) from None
    meta = compiled.metadata
    ptx = compiled.asm["ptx"]
    cubin = compiled.asm["cubin"]
    target_line = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    tool = triton_ptxas(target.arch)
    assembled_for = get_arch(target_line.group(1)) if target_line else arch  # the arch Triton's PTX names
    _, report, ptxas_version = ptxas(ptx, assembled_for, label, ptxas_tools=(tool,))
    sass, res_usage, cuobjdump_version = disassemble(cubin, label)
    said, counted = re.search(r"Used (\d+) registers", report), re.search(r"REG:(\d+)", res_usage)
    if said and counted and said.group(1) != counted.group(1):
        report = None  # our assembly is not Triton's binary: let the census read the binary's own -res-usage
    tools = {"triton": _triton_version(), "ptxas": ptxas_version, "cuobjdump": cuobjdump_version}
    art = Artifact(
        label,
        arch.name,
        ptx=ptx,
        cubin=cubin,
        ptxas_log=report,
        sass=sass,
        res_usage=res_usage,
        dynamic_shared=int(getattr(meta, "shared", 0) or 0),
        tools=tools,
    )
    jit_args = [a for a in fn.arg_names if signature.get(a) != "constexpr"]
    n_params = len(_ptx_params(ptx, meta.name))
    names = jit_args + [f"scratch_{i}" for i in range(max(0, n_params - len(jit_args)))]
    config = {**constexprs, "num_warps": int(meta.num_warps)}
    if num_stages is not None:
        config["num_stages"] = int(meta.num_stages)
    return TritonKernel(meta.name, config, None, 32 * int(meta.num_warps), art, tuple(names), specialize)


def _ptx_params(ptx: str, name: str) -> list[str]:
    entry = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    return re.findall(r"\.param\s+[^,\n]*?(\w+)\s*(?:,|$)", entry.group(1), re.M) if entry else []
