"""Source -> Artifact: CUDA C++ through NVRTC to PTX, PTX through ptxas to a cubin, the cubin through cuobjdump.

Every step keeps the tool's own text (ptxas -v report, SASS listing, -res-usage) so the census reads what NVIDIA's
tools say. Results are cached on disk under a key built from the input bytes, the options and the versions of every
tool used, so an edit to a kernel or a toolchain upgrade never returns a stale binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mage_tune import toolchain
from mage_tune.arch import ARCH_NAMES, get_arch
from mage_tune.errors import CompileError, InputError

SUPPORTED_ARCHS = ARCH_NAMES


def check_arch(arch: str) -> str:
    """The canonical name of `arch` ("90a" -> "sm_90a"); InputError naming the choices for an unknown one."""
    return get_arch(arch).name


@dataclass(frozen=True)
class Artifact:
    """Everything one compile produced, as the tools wrote it."""

    label: str  # file name or variant id: what errors and tables call it
    arch: str
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


def cache_dir() -> Path:
    root = os.environ.get("MAGE_TUNE_CACHE") or Path.home() / ".cache" / "mage-tune"
    return Path(root) / "compile"


def _key(kind: str, payload: bytes, arch: str, options: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([kind, arch, list(options), toolchain.fingerprint()]).encode())
    digest.update(payload)
    return digest.hexdigest()[:32]


_FILES = {"ptx": "kernel.ptx", "ptxas_log": "ptxas.log", "sass": "kernel.sass", "res_usage": "res-usage.txt"}


def _load_cached(key: str, label: str, arch: str, source: str | None) -> Artifact | None:
    folder = cache_dir() / key
    if not (folder / "done").exists():
        return None
    texts = {attr: (folder / name).read_text() if (folder / name).exists() else None for attr, name in _FILES.items()}
    cubin = (folder / "kernel.cubin").read_bytes() if (folder / "kernel.cubin").exists() else None
    tools = json.loads((folder / "tools.json").read_text())
    return Artifact(label=label, arch=arch, cubin=cubin, source=source, tools=tools, **texts)


def _store(key: str, art: Artifact) -> None:
    folder = cache_dir() / key
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for attr, name in _FILES.items():
            text = getattr(art, attr)
            if text is not None:
                (folder / name).write_text(text)
        if art.cubin is not None:
            (folder / "kernel.cubin").write_bytes(art.cubin)
        (folder / "tools.json").write_text(json.dumps(art.tools))
        (folder / "done").touch()  # written last: a half-written entry is never read
    except OSError:
        pass  # the cache is an optimisation; a read-only home must not stop a census


def nvrtc_ptx(source: str, arch: str, label: str, options: tuple[str, ...] = ()) -> str:
    """Compile CUDA C++ to PTX for `arch` with NVRTC; a compile error quotes NVRTC's log and names `label`."""
    toolchain.nvrtc_version()
    from cuda.bindings import nvrtc

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), label.encode(), 0, [], [])
    if err != ok:
        raise CompileError(f"NVRTC could not create a program: {err}", file=label)
    try:
        opts = [f"--gpu-architecture=compute_{arch[3:]}".encode(), b"-std=c++17", *[o.encode() for o in options]]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if status != ok:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            text = log.decode(errors="replace").strip().rstrip("\x00")
            flat = " | ".join(part.strip() for part in text.splitlines() if part.strip())  # errors print as one line
            first = re.search(r"\((\d+)\): error: (.*)", text)
            if first:
                raise CompileError(f"{first.group(2)} (NVRTC log: {flat})", file=label, line=int(first.group(1)))
            raise CompileError(f"NVRTC failed: {flat}", file=label)
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.rstrip(b"\x00").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class UnsupportedTarget(InputError):
    """No ptxas found here can assemble this PTX for this arch (too old for its .version or its target)."""


_PTXAS_ERROR = re.compile(r"line (\d+); (?:error|fatal)\s*:\s*(.*)")
_TOO_NEW = re.compile(r"Unsupported \.version|Unsupported \.target|not supported by|PTX ISA", re.I)


def ptxas(
    ptx: str,
    arch: str,
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
        src.write_text(ptx)
        for tool in tools:
            run = subprocess.run(
                [tool.path, "-v", *options, f"-arch={arch}", str(src), "-o", str(out)],
                capture_output=True,
                text=True,
                timeout=300,
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
        raise UnsupportedTarget(f"no ptxas here ({versions}) can assemble it for {arch}: {why}", file=label)
    first = _PTXAS_ERROR.search(last_error)
    if first:
        raise InputError(f"ptxas: {first.group(2).strip()}", file=label, line=int(first.group(1)))
    raise InputError(
        f"ptxas failed: {last_error.strip().splitlines()[-1] if last_error.strip() else 'no output'}", file=label
    )


def disassemble(cubin: bytes, label: str) -> tuple[str, str, str]:
    """(SASS listing, -elf dump followed by the -res-usage report, cuobjdump version) for a cubin, from one
    cuobjdump run (it is slow)."""
    tool = toolchain.find("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="mage-cuobjdump-") as tmp:
        path = Path(tmp) / "in.cubin"
        path.write_bytes(cubin)
        run = subprocess.run(
            [tool.path, "-elf", "-res-usage", "-sass", str(path)], capture_output=True, text=True, timeout=300
        )
    if run.returncode != 0:
        why = (run.stderr or run.stdout).strip().splitlines()
        raise InputError(f"not a readable cubin (cuobjdump: {why[-1] if why else 'failed'})", file=label)
    # The resource report comes first, then the listing, which starts at its "code for sm_XX" header.
    split = re.search(r"^.*code for sm_", run.stdout, re.M)
    cut = split.start() if split else len(run.stdout)
    return run.stdout[cut:], run.stdout[:cut], tool.version


def build_from_cu(source: str, arch: str, label: str, options: tuple[str, ...] = ()) -> Artifact:
    check_arch(arch)
    key = _key("cu+elf", source.encode(), arch, options)
    cached = _load_cached(key, label, arch, source)
    if cached:
        return cached
    ptx = nvrtc_ptx(source, arch, label, options)
    art = _from_ptx(ptx, arch, label, source=source, tools={"nvrtc": toolchain.nvrtc_version()})
    _store(key, art)
    return art


def build_from_ptx(ptx: str, arch: str, label: str, ptxas_options: tuple[str, ...] = ()) -> Artifact:
    """Assemble and disassemble a PTX file; `ptxas_options` are passed to ptxas (Triton's, when known)."""
    check_arch(arch)
    key = _key("ptx+elf", ptx.encode(), arch, ptxas_options)
    cached = _load_cached(key, label, arch, None)
    if cached:
        return cached
    art = _from_ptx(ptx, arch, label, ptxas_options=ptxas_options)
    _store(key, art)
    return art


def _from_ptx(
    ptx: str,
    arch: str,
    label: str,
    source: str | None = None,
    tools: dict | None = None,
    ptxas_options: tuple[str, ...] = (),
) -> Artifact:
    cubin, report, ptxas_version = ptxas(ptx, arch, label, options=ptxas_options)
    sass, res, cuobjdump_version = disassemble(cubin, label)
    tools = {**(tools or {}), "ptxas": ptxas_version, "cuobjdump": cuobjdump_version}
    return Artifact(
        label, arch, ptx=ptx, cubin=cubin, ptxas_log=report, sass=sass, res_usage=res, source=source, tools=tools
    )


def build_from_cubin(cubin: bytes, label: str) -> Artifact:
    sass, res, version = disassemble(cubin, label)
    found = re.search(r"code for (sm_\d+[af]?)", sass) or re.search(r"EF_CUDA_SM(\d+)", sass)
    if not found:
        raise InputError("cubin names no sm_ architecture", file=label)
    arch = found.group(1) if found.group(1).startswith("sm_") else f"sm_{found.group(1)}"
    return Artifact(label, arch, cubin=cubin, sass=sass, res_usage=res, tools={"cuobjdump": version})
