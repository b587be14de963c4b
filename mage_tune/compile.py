"""Source -> Artifact: CUDA C++ through NVRTC (or nvcc) to PTX, PTX through ptxas to a cubin, the cubin through
cuobjdump.

Every tool runs from an argument list, never a shell, on a temporary copy of fixed name. nvcc itself runs its steps
through /bin/sh, so what reaches it is checked or renamed first (SourceOptions, nvcc_ptx).

Every step keeps the tool's own text (ptxas -v report, SASS listing, -res-usage) so the census reads what NVIDIA's
tools say. Results are cached on disk under a key built from the input bytes, the options and the versions of every
tool used, so an edit to a kernel or a toolchain upgrade never returns a stale binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mage_tune import ptx_parts, toolchain
from mage_tune.arch import ARCH_NAMES, Arch, get_arch
from mage_tune.errors import CompileError, InputError, MageError, ToolchainError

SUPPORTED_ARCHS = ARCH_NAMES


def check_arch(name: str | Arch) -> str:
    """The canonical name of an arch ("90a" -> "sm_90a"); InputError naming the choices for an unknown one."""
    return get_arch(name).name


@dataclass(frozen=True)
class Artifact:
    """Everything one compile produced, as the tools wrote it."""

    label: str  # file name or variant id: what errors and tables call it
    arch: str  # the arch's name, as the binary names it (a SASS listing may name one mage-tune has no facts for)
    ptx: str | None = None
    cubin: bytes | None = None
    ptxas_log: str | None = None
    sass: str | None = None
    res_usage: str | None = None
    source: str | None = None
    dynamic_shared: int = 0  # bytes the launcher adds (Triton's metadata.shared); PTX cannot say
    tools: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # one line each: what the census could not do for this input, and why

    @property
    def cubin_sha256(self) -> str | None:
        return hashlib.sha256(self.cubin).hexdigest() if self.cubin is not None else None


def cache_root() -> Path:
    """$MAGE_TUNE_CACHE, else ~/.cache/mage-tune: the compile cache's folder and the default tuning database's."""
    return Path(os.environ.get("MAGE_TUNE_CACHE") or Path.home() / ".cache" / "mage-tune")


def cache_dir() -> Path:
    return cache_root() / "compile"


# Bumped when what an entry holds changes for the same inputs, so no entry made before is read: 2, a large PTX's parts
# split at each `.entry` (a first kernel after nvcc's header was assembled in every part, its SASS counted twice).
ENTRY_FORMAT = 2


def _key(kind: str, payload: bytes, arch: Arch, options: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([kind, arch.name, list(options), toolchain.fingerprint(), ENTRY_FORMAT]).encode())
    digest.update(payload)
    return digest.hexdigest()[:32]


_FILES = {"ptx": "kernel.ptx", "ptxas_log": "ptxas.log", "sass": "kernel.sass", "res_usage": "res-usage.txt"}


MANIFEST = "manifest.json"  # written into the entry before it is published: file -> sha256; tools


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_cached(key: str, label: str, arch_name: str, source: str | None) -> Artifact | None:
    """A finished entry whose every file matches the digest its manifest recorded; None (compile again) for a
    missing, partial, older-format or damaged one."""
    folder = cache_dir() / key
    try:
        manifest = json.loads((folder / MANIFEST).read_bytes())
        files = manifest["files"]
        # no cubin: a PTX assembled in parts (compile a family's variant whole: it is launched from its cubin)
        if manifest["key"] != key or not {"kernel.ptx", "kernel.sass"} <= set(files):
            return None
        data = {}
        for name in (*_FILES.values(), "kernel.cubin"):
            if name in files:
                raw = (folder / name).read_bytes()
                if _digest(raw) != files[name]:
                    return None
                data[name] = raw
        texts = {attr: data[name].decode() if name in data else None for attr, name in _FILES.items()}
        tools = dict(manifest["tools"])
        # stored without the file's name, which is not part of the key; older entries have none
        notes = tuple(f"{label}: {note}" for note in manifest.get("notes", ()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return Artifact(
        label=label, arch=arch_name, cubin=data.get("kernel.cubin"), source=source, tools=tools, notes=notes, **texts
    )


def _store(key: str, art: Artifact) -> None:
    """Publish an entry whole: its files and manifest go into a temporary folder beside it, are synced, and the
    folder is renamed into place. A finished entry is never written again (a second writer of the same key drops
    its copy); a damaged one is moved aside and replaced, never rewritten in place."""
    root = cache_dir()
    folder = root / key
    tmp = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=root))
        files = {}
        blobs = {name: getattr(art, attr).encode() for attr, name in _FILES.items() if getattr(art, attr) is not None}
        if art.cubin is not None:
            blobs["kernel.cubin"] = art.cubin
        blobs[MANIFEST] = b""
        for name, raw in blobs.items():
            if name == MANIFEST:
                notes = [note.removeprefix(f"{art.label}: ") for note in art.notes]
                raw = json.dumps({"key": key, "files": files, "tools": art.tools, "notes": notes}).encode()
            with open(tmp / name, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            files[name] = _digest(raw)
        for _ in range(2):
            try:
                os.rename(tmp, folder)
                tmp = None
                return
            except OSError:  # an entry is there: keep a sound one, move a damaged one aside and try once more
                if _load_cached(key, art.label, art.arch, None) is not None:
                    return
                aside = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".old", dir=root))
                os.rename(folder, aside / "entry")
                shutil.rmtree(aside, ignore_errors=True)
    except OSError:
        pass  # the cache is an optimisation; a read-only or full cache folder must not stop a census
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


COMPILERS = ("auto", "nvrtc", "nvcc")
_MISSING_HEADER = re.compile(
    r'^(?P<file>.*?)(?:\((?P<line>\d+)\)|:(?P<line2>\d+):\d+:).*?(?:cannot|could not) open source file "(?P<h1>[^"]+)"'
    r"|^(?P<file2>.*?):(?P<line3>\d+):\d+: fatal error: (?P<h2>[^:]+): No such file or directory",
    re.M,
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# nvcc hands -D values to /bin/sh inside double quotes and splits them at commas: a value keeps to characters
# that mean the same to the shell (quoted), to nvcc and to NVRTC
DEFINE_VALUE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-*/%:[]() ")
_STD = re.compile(r"(?:c\+\+)?(\d\d)")


@dataclass(frozen=True)
class SourceOptions:
    """How to compile a CUDA source as its author wrote it: include folders, macros, C++ standard, compiler.

    Checked on creation (InputError), the same for NVRTC and nvcc, because nvcc runs its steps through /bin/sh:
    - a define is NAME or NAME=VALUE; NAME a C identifier (no function-like macros); VALUE only letters, digits,
      space and `_ . + - * / % : [ ] ( )` (no quotes, backslash, `$`, backquote, `;`, `|`, `&`, `<`, `>`, `#`,
      `,`, `=`, `{`, `}`, `!`, `~`, `^`, `?`, newline: nvcc's shell or nvcc itself would read them);
    - an include folder is any path without NUL or line breaks (nvcc sees it only through a link of a fixed name);
    - std is c++NN or NN; compiler one of COMPILERS.
    """

    includes: tuple[str, ...] = ()  # -I DIR, searched before the CUDA headers found automatically
    defines: tuple[str, ...] = ()  # -D NAME or NAME=VALUE
    std: str | None = None  # "c++17", "c++20"; None: the compiler's default for mage-tune (c++17)
    compiler: str = "auto"  # nvrtc, nvcc, or auto: NVRTC, then nvcc for a source NVRTC cannot take
    options: tuple[str, ...] = ()  # compiler options from ALLOWED_OPTIONS ("--use_fast_math", "-ftz=true", ...)

    def __post_init__(self) -> None:
        for define in self.defines:
            check_define(define)
        for option in self.options:
            check_option(option)
        for folder in self.includes:
            if not isinstance(folder, str) or not folder or any(c in folder for c in "\0\n\r"):
                raise InputError(f"-I {folder!r}: an include folder is a path without NUL or line breaks")
        if self.std is not None and not (isinstance(self.std, str) and _STD.fullmatch(self.std)):
            raise InputError(f"--std {self.std!r}: expected c++NN or NN, e.g. c++17 or 20")
        if self.compiler not in COMPILERS:
            raise InputError(f"unknown compiler {self.compiler!r}; choose one of {', '.join(COMPILERS)}")

    def to_json(self) -> dict:
        """What a record keeps of how its kernels were compiled."""
        return {
            "includes": list(self.includes),
            "defines": list(self.defines),
            "options": list(self.options),
            "std": self.std,
            "compiler": self.compiler,
        }

    def include_dirs(self, source_dir: str | None = None) -> tuple[str, ...]:
        """Folders searched for headers, in order: the user's -I, the source's folder, the CUDA headers (toolkit or
        pip wheels)."""
        dirs = [*self.includes, *([source_dir] if source_dir else []), *map(str, toolchain.cuda_include_dirs())]
        return tuple(dict.fromkeys(dirs))

    def flags(self, source_dir: str | None = None) -> tuple[str, ...]:
        """Compiler flags, the same for NVRTC and nvcc: -std, -D, then -I for each of `include_dirs`."""
        std = f"c++{_STD.fullmatch(self.std).group(1)}" if self.std else "c++17"
        return (
            f"-std={std}",
            *self.options,
            *(f"-D{d}" for d in self.defines),
            *(f"-I{d}" for d in self.include_dirs(source_dir)),
        )


# Options NVRTC and nvcc both take with the same meaning, each fixed text or a number: nothing else reaches them.
ALLOWED_OPTIONS = re.compile(
    r"--?use_fast_math|--?ftz=(true|false)|--?prec-div=(true|false)|--?prec-sqrt=(true|false)"
    r"|--?fmad=(true|false)|--?maxrregcount=\d{1,3}|--?lineinfo|--?extra-device-vectorization"
    r"|--?restrict|-G|--device-debug|-rdc=(true|false)|--relocatable-device-code=(true|false)"
)


def check_option(option: str) -> str:
    """`option` when it is one of ALLOWED_OPTIONS; else InputError naming it and what is allowed."""
    if not isinstance(option, str) or not ALLOWED_OPTIONS.fullmatch(option):
        raise InputError(
            f"compiler option {option!r} is not allowed; allowed: --use_fast_math, -ftz=, -prec-div=, -prec-sqrt=, "
            "-fmad= (true or false), -maxrregcount=N, -lineinfo, --extra-device-vectorization, --restrict, -G, "
            "-rdc= (true or false)"
        )
    return option


def check_define(define: str) -> str:
    """`define` (NAME or NAME=VALUE) when SourceOptions allows it; else InputError naming it and the character."""
    if not isinstance(define, str):
        raise InputError(f"-D {define!r}: a define is a string, NAME or NAME=VALUE")
    name, _, value = define.partition("=")
    if not _IDENTIFIER.fullmatch(name):
        kind = "function-like macros are not supported" if "(" in name else "NAME must be a C identifier"
        raise InputError(f"-D {define!r}: {kind} (NAME or NAME=VALUE)")
    bad = next((c for c in value if c not in DEFINE_VALUE_CHARS), None)
    if bad is not None:
        raise InputError(
            f"-D {define!r}: character {bad!r} is not allowed in a macro value "
            "(only letters, digits, space and _ . + - * / % : [ ] ( ))"
        )
    return define


# Headers only a CUDA toolkit (or NVIDIA's wheels) holds: where none is found here, installing one is the fix.
_CUDA_HEADER = re.compile(
    r"(cuda|cub|thrust|nv|crt)/|cuda\w*\.h|mma\.h|sm_\d+\w*\.h|cooperative_groups|curand|math_constants\.h"
    r"|(vector|driver|library)_types\.h|device_\w+\.h|host_\w+\.h|(texture|surface)_\w+\.h"
)


def _header_error(log: str, label: str, searched: tuple[str, ...]) -> CompileError | None:
    """A missing #include as one error naming the header, the including file and line, and the fix that works:
    for a header of the user's, its folder given with -I (a family's template, compiled from memory under its
    variant's label: the family's include_dirs, or -I); for a CUDA header, the CUDA headers' folder, or installing
    them where none are found. Installing CUDA is never the advice for a user's own header."""
    m = _MISSING_HEADER.search(log)
    if not m:
        return None
    header = m.group("h1") or m.group("h2")
    where = (m.group("file") or m.group("file2") or label).strip()
    line = m.group("line") or m.group("line2") or m.group("line3")
    dirs = [d[2:] for d in searched if d.startswith("-I")]
    family = not Path(label).is_file()
    cuda = toolchain.cuda_include_dirs()
    holder = next((d for d in cuda if (d / header).is_file()), None)
    looked = f"searched {', '.join(dirs)}" if dirs else "no include folder was searched"
    if holder is not None and str(holder) not in dirs:  # a CUDA header this compile did not look for
        fix = f"pass -I {holder}" + (", or add that folder to the family's include_dirs" if family else "")
    elif not cuda and _CUDA_HEADER.match(header):
        looked, fix = "no CUDA headers found here", toolchain.FIXES["headers"]
    elif family:
        fix = "add the folder that holds it to the family's include_dirs, or pass -I DIR"
    else:
        fix = "add the folder that holds it with -I DIR"
    return CompileError(
        f"header {header!r} not found ({looked}); {fix}", file=where or label, line=int(line) if line else None
    )


NVCC_SOURCE = "kernel.cu"  # the fixed name nvcc sees for every user's file
NVCC_TIMEOUT_S = 600
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_.+\-*/%:\[\]() =]*")  # means the same to /bin/sh inside "..."; no comma
_FIXED_NAME = rf"(?P<name>{re.escape(NVCC_SOURCE)}(?!\w|\.\w)|inc\d+(?=/))"  # kernel.cu, or inc0/... of a header


def nvcc_ptx(source: str, arch: Arch, label: str, options: tuple[str, ...] = ()) -> str:
    """Compile CUDA C++ to PTX for `arch` with nvcc (for sources NVRTC cannot take); errors name `label`.

    nvcc runs its steps through /bin/sh, so nothing of the user's reaches it verbatim: the source is copied to
    kernel.cu in a fresh folder, each -I folder becomes a link inc0, inc1, ... there, and any other option must be
    shell-safe (InputError otherwise). The log names the user's file and folders again."""
    tool = toolchain.nvcc()
    if tool is None:
        raise ToolchainError(f"nvcc not found; {toolchain.FIXES['nvcc']}", file=label)
    with tempfile.TemporaryDirectory(prefix="mage-nvcc-") as tmp:
        work = Path(tmp)
        if not _SHELL_SAFE.fullmatch(tmp):  # nvcc passes its working folder to the shell too
            raise ToolchainError(f"temporary folder {tmp!r} is not shell-safe for nvcc; set TMPDIR", file=label)
        args, links = _nvcc_options(work, options, label)
        _scratch_write(work / NVCC_SOURCE, source.encode(), label)
        cmd = [tool.path, "-ptx", f"-arch={arch.compute}", *args, NVCC_SOURCE, "-o", "out.ptx"]
        run = _run_tool(cmd, label, None, cwd=tmp, limit=NVCC_TIMEOUT_S)
        log = _unmap_fixed_names(run.stdout + run.stderr, tmp, label, links)
        if run.returncode != 0:
            raise _compile_error(log, label, options, "nvcc")
        return (work / "out.ptx").read_text()


def _nvcc_options(work: Path, options: tuple[str, ...], label: str) -> tuple[list[str], dict[str, str]]:
    """nvcc's options with each -I folder replaced by a link of a fixed name in `work`; {link name: folder}."""
    args, links = [], {}
    for option in options:
        if option.startswith("-I"):
            name = f"inc{len(links)}"
            os.symlink(os.path.abspath(option[2:]), work / name)
            links[name] = option[2:]
            args.append(f"-I{name}")
        elif _SHELL_SAFE.fullmatch(option):
            args.append(option)
        else:
            raise InputError(f"option {option!r} is not safe to give nvcc (its steps run through /bin/sh)", file=label)
    return args, links


def _unmap_fixed_names(log: str, work: str, label: str, links: dict[str, str]) -> str:
    """nvcc's log with the fixed names (kernel.cu, inc0, ...), bare or under the temporary folder, replaced by the
    user's file and folders in one pass (a user's name is never read again)."""
    names = {NVCC_SOURCE: label, **links}
    fixed = re.compile(rf"(?:{re.escape(work)}/|(?<![\w./-])){_FIXED_NAME}|{re.escape(work)}")
    return fixed.sub(lambda m: names[m.group("name")] if m.group("name") else ".", log)


# CUDA's front end writes FILE(LINE): error: ..., nvcc's preprocessor (gcc -E) FILE:LINE:COLUMN: error: ...
_FIRST_ERROR = re.compile(
    r"^(?P<file>[^\n]*?)(?:\((?P<line>\d+)\):|:(?P<line2>\d+):\d+:) (?:catastrophic )?error: (?P<what>.*)", re.M
)


def _compile_error(log: str, label: str, searched: tuple[str, ...], compiler: str) -> CompileError:
    """A failed compile as one error: a missing header with its fix, else the first error with the file (the
    source or a header) and line it names, and the compiler's whole log on one line."""
    missing = _header_error(log, label, searched)
    if missing:
        return missing
    flat = " | ".join(part.strip() for part in log.splitlines() if part.strip())
    first = _FIRST_ERROR.search(log)
    if first:
        where = first.group("file").strip() or label
        return CompileError(
            f"{first.group('what')} ({compiler} log: {flat})",
            file=where,
            line=int(first.group("line") or first.group("line2")),
        )
    return CompileError(f"{compiler} failed: {flat}", file=label)


def nvrtc_ptx(source: str, arch: Arch, label: str, options: tuple[str, ...] = ()) -> str:
    """Compile CUDA C++ to PTX for `arch` with NVRTC; a compile error quotes NVRTC's log and names `label`."""
    toolchain.nvrtc_version()
    nvrtc = toolchain.nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), label.encode(), 0, [], [])
    if err != ok:
        raise CompileError(f"NVRTC could not create a program: {err}", file=label)
    try:
        std = () if any(o.startswith(("-std", "--std")) for o in options) else (b"-std=c++17",)
        opts = [f"--gpu-architecture={arch.compute}".encode(), *std, *[o.encode() for o in options]]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if status != ok:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            text = log.decode(errors="replace").strip().rstrip("\x00")
            raise _compile_error(text, label, options, "NVRTC")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.rstrip(b"\x00").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class UnsupportedTarget(InputError):
    """No ptxas found here can assemble this PTX for this arch (too old for its .version or its target)."""


_PTXAS_ERROR = re.compile(r"line (\d+); (?:error|fatal)\s*:\s*(.*)")
# What ptxas says of a PTX newer than itself (its .version or .target): another ptxas may take it. An error in the
# PTX itself ("not supported on .target sm_70 and higher from PTX ISA version 6.4") is no such thing: it is reported.
_TOO_NEW = re.compile(r"Unsupported \.version|Unsupported \.target", re.I)


def ptxas(
    ptx: str,
    arch: Arch,
    label: str,
    ptxas_tools: tuple[toolchain.Tool, ...] | None = None,
    options: tuple[str, ...] = (),
) -> tuple[bytes, str, str]:
    """Assemble PTX into a cubin with `ptxas -v` (plus `options`); returns (cubin, report, ptxas version).

    Falls back to the next ptxas found when one is too old for the file's `.version` or target; when none can,
    raises UnsupportedTarget.
    """
    tools = ptxas_tools or toolchain.candidates("ptxas")
    if not tools:
        toolchain.find("ptxas")
    last_error = ""
    with tempfile.TemporaryDirectory(prefix="mage-ptxas-") as tmp:
        src, out = Path(tmp) / "in.ptx", Path(tmp) / "out.cubin"
        _scratch_write(src, ptx.encode(), label)
        for tool in tools:
            run = _run_tool(
                [tool.path, "-v", *options, f"-arch={arch.name}", str(src), "-o", str(out)], label, str(src)
            )
            report = run.stdout + run.stderr
            if run.returncode == 0:
                return out.read_bytes(), report, tool.version
            last_error = report
            if not _TOO_NEW.search(report):
                break
    if _TOO_NEW.search(last_error) or re.search(r"not defined for option 'gpu-name'", last_error):
        versions = ", ".join(t.version or "?" for t in tools)
        why = next((ln.strip() for ln in last_error.splitlines() if _TOO_NEW.search(ln)), last_error.strip()[:200])
        raise UnsupportedTarget(f"no ptxas here ({versions}) can assemble it for {arch.name}: {why}", file=label)
    first = _PTXAS_ERROR.search(last_error)
    if first:
        raise InputError(f"ptxas: {first.group(2).strip()}", file=label, line=int(first.group(1)))
    raise InputError(
        f"ptxas failed: {last_error.strip().splitlines()[-1] if last_error.strip() else 'no output'}", file=label
    )


TOOL_TIMEOUT_S = 300
TOOL_TIMEOUT_ENV = "MAGE_TUNE_TOOL_TIMEOUT"


def tool_timeout_s() -> float:
    """Seconds ptxas or cuobjdump may run on one input (TOOL_TIMEOUT_S, or MAGE_TUNE_TOOL_TIMEOUT)."""
    text = os.environ.get(TOOL_TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else TOOL_TIMEOUT_S
    except ValueError:
        value = 0
    if not value > 0:
        raise InputError(f"{TOOL_TIMEOUT_ENV} must be a positive number of seconds; got {text!r}")
    return value


def _scratch_write(path: Path, data: bytes, label: str) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise ToolchainError(f"cannot write a temporary copy for the CUDA tools: {exc.strerror}", file=label) from None


def _run_tool(
    args: list[str], label: str, scratch: str | None, cwd: str | None = None, limit: float | None = None
) -> subprocess.CompletedProcess:
    """Run a CUDA tool on `scratch`, the temporary copy of the user's `label`: a hang, a crash or a launch
    failure is an error naming `label`, and the tool's own text names `label` too, never the temporary path.
    `limit`: seconds (default tool_timeout_s()); `scratch` None: the caller puts the names back."""
    name, limit = Path(args[0]).name, limit or tool_timeout_s()
    try:
        run = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=limit, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"{name} did not finish within {limit:g} s", file=label) from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {args[0]}: {exc.strerror}", file=label) from None
    if scratch is not None:
        run.stdout, run.stderr = run.stdout.replace(scratch, label), run.stderr.replace(scratch, label)
    if run.returncode < 0:
        try:
            why = signal.Signals(-run.returncode).name
        except ValueError:
            why = f"signal {-run.returncode}"
        raise ToolchainError(f"{name} crashed ({why}) on this input", file=label)
    return run


def disassemble(cubin: bytes, label: str) -> tuple[str, str, str]:
    """(SASS listing, -elf dump followed by the -res-usage report, cuobjdump version) for a cubin. The listing is
    the slow part (about 1.4 s for a 1 MB PTX's cubin), so the ELF and resource dump runs beside it."""
    tool = toolchain.find("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="mage-cuobjdump-") as tmp:
        path = Path(tmp) / "in.cubin"
        _scratch_write(path, cubin, label)
        with ThreadPoolExecutor(2) as pool:  # two processes: the threads only wait on them
            runs = list(
                pool.map(
                    lambda flags: _run_tool([tool.path, *flags, str(path)], label, str(path)),
                    (["-sass"], ["-elf", "-res-usage"]),
                )
            )
    for run in runs:
        if run.returncode != 0:
            why = (run.stderr or run.stdout).strip().splitlines()
            raise InputError(f"not a readable cubin (cuobjdump: {why[-1] if why else 'failed'})", file=label)
    listing, dump = runs[0].stdout, runs[1].stdout
    split = re.search(r"^.*code for sm_", listing, re.M)  # the listing starts at its "code for sm_XX" header
    return listing[split.start() if split else 0 :], dump, tool.version


def cu_to_ptx(source: str, arch: Arch, label: str, opts: SourceOptions) -> tuple[str, dict[str, str]]:
    """PTX of a CUDA source with the compiler `opts` asks for: compile_cu without its notes."""
    ptx, tools, _ = compile_cu(source, arch, label, opts)
    return ptx, tools


def compile_cu(source: str, arch: Arch, label: str, opts: SourceOptions) -> tuple[str, dict[str, str], tuple[str, ...]]:
    """PTX of a CUDA source with the compiler `opts` asks for; auto is NVRTC, then nvcc (when present) for a source
    NVRTC rejects. Returns (PTX, {compiler: version}, notes): after such a fallback, one note saying why nvcc
    compiled it (see compiler_notes). When both fail, the error holds both compilers' errors."""
    source_dir = str(Path(label).parent) if Path(label).is_file() else None
    for folder in opts.includes:
        if not Path(folder).is_dir():
            raise InputError(f"-I {folder}: no such folder", file=label)
    flags = opts.flags(source_dir)
    if opts.compiler == "nvcc":
        return nvcc_ptx(source, arch, label, flags), {"nvcc": toolchain.nvcc().version}, ()
    try:
        return nvrtc_ptx(source, arch, label, flags), {"nvrtc": toolchain.nvrtc_version()}, ()
    except (CompileError, ToolchainError) as nvrtc_error:
        nvcc = toolchain.nvcc()
        if opts.compiler == "nvrtc" or nvcc is None:
            raise
        try:
            ptx = nvcc_ptx(source, arch, label, flags)
        except (CompileError, ToolchainError) as nvcc_error:
            raise _both_failed(nvrtc_error, nvcc_error, label) from None
        return ptx, {"nvcc": nvcc.version}, (_fallback_note(nvrtc_error, nvcc.version, label),)


_FALLBACK_TAIL = "; compiled with nvcc "


ARCH_TAIL = "; --arch chooses the target"  # ends a note on the target a .cu without --arch was compiled for


def compiler_notes(notes: tuple[str, ...]) -> tuple[str, ...]:
    """The notes that say how a file was compiled: nvcc for a file NVRTC rejected, or the target a .cu without --arch
    got where that matters (for the CLI to say on stderr too)."""
    return tuple(note for note in notes if (_FALLBACK_TAIL in note and ": NVRTC " in note) or note.endswith(ARCH_TAIL))


def _fallback_note(nvrtc_error: MageError, nvcc_version: str, label: str) -> str:
    """One line: NVRTC's first error, and that nvcc compiled the file instead."""
    first = nvrtc_error.message.split(" (", 1)[0]  # the error, without NVRTC's whole log
    # the line of the file it is in: a header's (cuda.h line 56) is named with it, never passed as the source's
    elsewhere = nvrtc_error.file and Path(nvrtc_error.file).name != Path(label).name
    where = (f"{nvrtc_error.file}:" if elsewhere else "line ") + f"{nvrtc_error.line}: " if nvrtc_error.line else ""
    how = "rejected it" if isinstance(nvrtc_error, CompileError) else "could not compile it"
    return f"{label}: NVRTC {how} ({where}{first}){_FALLBACK_TAIL}{nvcc_version}"


def _both_failed(nvrtc_error: MageError, nvcc_error: MageError, label: str) -> CompileError:
    if str(nvrtc_error) == str(nvcc_error) and isinstance(nvrtc_error, CompileError):
        return nvrtc_error  # the same missing header: said once
    first = nvrtc_error.message.split(" (", 1)[0]
    if (
        isinstance(nvrtc_error, CompileError)
        and isinstance(nvcc_error, CompileError)
        and (nvcc_error.line, nvcc_error.message.split(" (", 1)[0]) == (nvrtc_error.line, first)
    ):  # both stop at the same error: its message and NVRTC's log once
        return CompileError(
            f"{nvrtc_error.message.replace(' (NVRTC log: ', ' (NVRTC and nvcc agree; NVRTC log: ', 1)}",
            file=nvrtc_error.file or label,
            line=nvrtc_error.line,
        )
    return CompileError(
        f"NVRTC: {nvrtc_error.message}; nvcc: {nvcc_error}", file=nvrtc_error.file or label, line=nvrtc_error.line
    )


def build_from_cu(
    source: str,
    arch: Arch,
    label: str,
    options: tuple[str, ...] = (),
    source_options: SourceOptions | None = None,
    relocatable: bool = False,
) -> Artifact:
    """Compile a CUDA source: with `source_options` (census of user files) as its author would, headers found;
    without, through NVRTC with exactly `options` (mage-tune's own templates). A fallback to nvcc is kept in the
    artifact's notes (cached with it). `relocatable` (the census of a file): code that calls into another file
    (-rdc=true, an extern function) is assembled as relocatable code; a variant, which is loaded and launched whole,
    is not."""
    assembler = for_ptxas((*options, *(source_options.options if source_options else ())))
    if "-c" in assembler and not relocatable:
        raise InputError("-rdc=true is for the census of a file: a variant is loaded and launched whole", file=label)
    assembler_key = (*assembler, *(("relocatable",) if relocatable else ()))
    key = None
    if source_options is None:
        key = _key("cu+elf", source.encode(), arch, (*options, *assembler_key))
    else:
        source_dir = str(Path(label).parent) if Path(label).is_file() else None
        headers = headers_digest(source, [*source_options.includes, *([source_dir] if source_dir else [])])
        if headers is not None:  # else an #include through a macro: what it reads is unknown, so no cache entry
            extra = (f"compiler={source_options.compiler}", *source_options.flags(source_dir), f"headers={headers}")
            key = _key("cu+elf", source.encode(), arch, (*options, *assembler_key, *extra))
    cached = _load_cached(key, label, arch.name, source) if key else None
    if cached:
        return cached
    if source_options is None:
        ptx, tools, notes = nvrtc_ptx(source, arch, label, options), {"nvrtc": toolchain.nvrtc_version()}, ()
    else:
        ptx, tools, notes = compile_cu(source, arch, label, source_options)
    try:
        art = _from_ptx(
            ptx, arch, label, source=source, tools=tools, notes=notes, ptxas_options=assembler, relocatable=relocatable
        )
    except InputError as exc:  # ptxas's line is the PTX's, not the source's: say so rather than name the source's
        if exc.line is None or isinstance(exc, UnsupportedTarget):
            raise
        raise InputError(f"{exc.message} (line {exc.line} of the PTX compiled from it)", file=exc.file) from None
    if key:
        _store(key, art)
    return art


_MAXRREGCOUNT = re.compile(r"--?maxrregcount=(\d+)")


def for_ptxas(options: tuple[str, ...]) -> tuple[str, ...]:
    """The compiler options ptxas must be given as well: a register limit leaves no trace in the PTX that NVRTC or
    `nvcc -ptx` writes, so it is ptxas's --maxrregcount; relocatable device code is ptxas's -c (its calls into other
    files stay unresolved, as nvcc -rdc=true leaves them for the device linker)."""
    limits = [m.group(1) for m in map(_MAXRREGCOUNT.fullmatch, options) if m]
    relocatable = [o.endswith("=true") for o in options if o.startswith(("-rdc=", "--relocatable-device-code="))]
    return (*((f"--maxrregcount={limits[-1]}",) if limits else ()), *(("-c",) if relocatable[-1:] == [True] else ()))


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_ANY_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b", re.M)
MAX_HEADERS = 4096


def headers_digest(source: str, dirs: list[str]) -> str | None:
    """sha256 over every header `source` reaches in `dirs` (the user's -I folders and the source's own), followed
    through the headers' own #includes, so an edited header is compiled again rather than read from the cache. A
    header found in none of them is a CUDA or system one, which the toolchain's fingerprint covers. Every #include
    counts, even one inside `#if 0` (a header too many only costs a compile). None where an #include names its file
    through a macro, or more than MAX_HEADERS are reached: what the compile reads is then not known here."""
    digest, seen = hashlib.sha256(), set()
    todo: list[tuple[str, str | None]] = [(source, None)]
    while todo:
        text, here = todo.pop()
        found = _INCLUDE.findall(text)
        if len(found) != len(_ANY_INCLUDE.findall(text)):
            return None
        for quote, name in found:
            for folder in ([here] if quote == '"' and here else []) + dirs:
                path = Path(folder) / name.strip()
                if not path.is_file():
                    continue
                where = str(path.resolve())
                if where not in seen:
                    seen.add(where)
                    if len(seen) > MAX_HEADERS:
                        return None
                    try:
                        data = path.read_bytes()
                    except OSError:
                        return None
                    digest.update(f"{where}\0{len(data)}\0".encode() + data)
                    todo.append((data.decode("utf-8", errors="replace"), str(path.parent)))
                break
    return digest.hexdigest()


def build_from_ptx(ptx: str, arch: Arch, label: str, ptxas_options: tuple[str, ...] = ()) -> Artifact:
    """Assemble and disassemble a PTX file (a user's: one that calls into another file is assembled as relocatable
    code); `ptxas_options` are passed to ptxas (Triton's, when known)."""
    key = _key("ptx+elf", ptx.encode(), arch, ptxas_options)
    cached = _load_cached(key, label, arch.name, None)
    if cached:
        return cached
    art = _from_ptx_in_parts(ptx, arch, label, ptxas_options, _parts_for(ptx))
    _store(key, art)
    return art


PART_BYTES = 128 * 1024  # a smaller part would spend more on starting ptxas and cuobjdump than it saves


def _parts_for(ptx: str) -> int:
    return max(1, min(os.cpu_count() or 1, len(ptx) // PART_BYTES))


def _from_ptx_in_parts(ptx: str, arch: Arch, label: str, ptxas_options: tuple[str, ...], parts: int) -> Artifact:
    """A PTX module of many kernels assembled and disassembled as `parts` modules side by side (ptx_parts.py says
    why each kernel's SASS is the same); the listings, ELF dumps and ptxas reports are joined, and there is no one
    cubin. Any failure assembles the whole module instead, so an error is ptxas's own about the file."""
    modules = ptx_parts.split(ptx, parts)
    if len(modules) == 1:
        return _from_ptx(ptx, arch, label, ptxas_options=ptxas_options, relocatable=True)

    def assemble(module: str) -> Artifact:
        return _from_ptx(module, arch, label, ptxas_options=ptxas_options, relocatable=True)

    try:
        with ThreadPoolExecutor(len(modules)) as pool:  # the threads wait on processes
            done = list(pool.map(assemble, modules))
    except MageError:
        return _from_ptx(ptx, arch, label, ptxas_options=ptxas_options, relocatable=True)
    return Artifact(
        label,
        arch.name,
        ptx=ptx,
        ptxas_log="".join(a.ptxas_log for a in done),
        sass="\n".join(a.sass for a in done),
        res_usage="\n".join(a.res_usage for a in done),
        tools={**done[0].tools, "ptxas parts": str(len(done))},
        notes=tuple(dict.fromkeys(note for a in done for note in a.notes)),  # each part's, said once
    )


_UNRESOLVED = re.compile(r"Unresolved extern function '([^']+)'")


def _from_ptx(
    ptx: str,
    arch: Arch,
    label: str,
    source: str | None = None,
    tools: dict | None = None,
    ptxas_options: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
    relocatable: bool = False,
) -> Artifact:
    try:
        cubin, report, ptxas_version = ptxas(ptx, arch, label, options=ptxas_options)
    except InputError as exc:
        extern = _UNRESOLVED.search(exc.message)
        if extern is None or "-c" in ptxas_options or not relocatable:
            raise
        # It calls into another file (a device-side launch's runtime, a function of separate compilation): assembled
        # as relocatable code, as nvcc -rdc=true does, its own code is all there to count.
        cubin, report, ptxas_version = ptxas(ptx, arch, label, options=(*ptxas_options, "-c"))
        notes = (
            *notes,
            f"{label}: assembled as relocatable device code (ptxas -c, as nvcc -rdc=true does): it calls "
            f"{extern.group(1)}, defined in another file",
        )
    sass, res, cuobjdump_version = disassemble(cubin, label)
    tools = {**(tools or {}), "ptxas": ptxas_version, "cuobjdump": cuobjdump_version}
    return Artifact(
        label,
        arch.name,
        ptx=ptx,
        cubin=cubin,
        ptxas_log=report,
        sass=sass,
        res_usage=res,
        source=source,
        tools=tools,
        notes=notes,
    )


_PTX_ONLY = re.compile(r"^Fatbin ptx code:\s*=*\s*arch = (\w+)", re.M)


def build_from_cubin(cubin: bytes, label: str) -> Artifact:
    """A cubin, or a host object, executable or .fatbin, as cuobjdump lists it: every ELF in it, one after another
    (census.fatbin splits them by arch); `arch` is the first one's."""
    sass, res, version = disassemble(cubin, label)
    found = re.search(r"code for (sm_\d+[af]?)", sass) or re.search(r"EF_CUDA_SM(\d+)", sass)
    ptx_only = _PTX_ONLY.findall(sass)
    if not found and ptx_only:
        raise InputError(
            f"holds PTX only (for {', '.join(ptx_only)}), no SASS: `cuobjdump -xptx all {label}` extracts it, and a "
            ".ptx file is censused for its .target",
            file=label,
        )
    if not found:
        raise InputError("cubin names no sm_ architecture", file=label)
    arch = found.group(1) if found.group(1).startswith("sm_") else f"sm_{found.group(1)}"
    return Artifact(label, arch, cubin=cubin, sass=sass, res_usage=res, tools={"cuobjdump": version})
