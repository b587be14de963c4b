"""Find the CUDA tools mage-tune drives: NVRTC (a library), ptxas, cuobjdump and nvdisasm (programs).

Programs are looked up, in order, in `$CUDA_HOME/bin`, on `PATH`, in the pip `nvidia-cuda-*` wheels and in
Triton's bundled `backends/nvidia/bin`. Every candidate is kept, not only the first: a PTX file written by a newer
compiler needs a newer ptxas, and `compile.py` falls back along the list.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mage_tune.errors import ToolchainError

try:
    import nvidia  # the namespace of the pip nvidia-cuda-* wheels (Linux only): where their tools and headers lie
except ImportError:
    nvidia = None

# cuda.bindings' NVRTC loads on first use, in nvrtc(): its shared library may be missing (ToolchainError then says
# the fix), and finding ptxas, cuobjdump or the headers needs none of it.

PROGRAMS = ("ptxas", "cuobjdump", "nvdisasm")
FIXES = {
    "nvrtc": "pip install cuda-bindings nvidia-cuda-nvrtc",
    "ptxas": "install the CUDA toolkit and set CUDA_HOME, or pip install triton (it bundles ptxas)",
    "cuobjdump": "pip install triton (it bundles cuobjdump) or nvidia-cuda-cuobjdump",
    "nvdisasm": "pip install triton (it bundles nvdisasm) or nvidia-cuda-nvdisasm",
    "nvcc": "install the CUDA toolkit and set CUDA_HOME (or put nvcc on PATH), or use --compiler nvrtc",
    "headers": "install the CUDA toolkit and set CUDA_HOME, or pip install nvidia-cuda-runtime nvidia-cuda-cccl",
}


@dataclass(frozen=True)
class Tool:
    name: str
    path: str
    version: str  # "13.0.88" style release, or "" when the tool does not say
    origin: str  # CUDA_HOME, PATH, pip wheel, triton

    @property
    def release(self) -> tuple[int, int]:
        parts = [int(p) for p in self.version.split(".")[:2] if p.isdigit()]
        return (parts[0], parts[1]) if len(parts) == 2 else (0, 0)


def _version_of(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    return found.group(1) if found else ""


def _candidate_dirs() -> list[tuple[str, Path]]:
    dirs: list[tuple[str, Path]] = []
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        dirs.append(("CUDA_HOME", Path(cuda_home) / "bin"))
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry:
            dirs.append(("PATH", Path(entry)))
    dirs.append(("CUDA default", Path("/usr/local/cuda/bin")))
    for root in nvidia.__path__ if nvidia else ():
        dirs.append(("pip wheel", Path(root) / "cu13" / "bin"))
        dirs.append(("pip wheel", Path(root) / "cuda_nvcc" / "bin"))
    triton_bin = triton_bin_dir()
    if triton_bin:
        dirs.append(("triton", triton_bin))
    return dirs


def triton_bin_dir() -> Path | None:
    """Triton's bundled CUDA binaries, found without importing triton (importing it is slow)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "backends" / "nvidia" / "bin"
    return path if path.is_dir() else None


@functools.cache
def candidates(name: str) -> tuple[Tool, ...]:
    """Every distinct copy of program `name`, in lookup order."""
    seen: set[str] = set()
    tools = []
    # Triton ships a second, newer assembler as ptxas-blackwell: the fallback for PTX too new for its ptxas.
    names = (name, "ptxas-blackwell") if name == "ptxas" else (name,)
    for (origin, directory), exe_name in ((d, n) for d in _candidate_dirs() for n in names):
        exe = directory / exe_name
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            continue
        real = os.path.realpath(exe)
        if real in seen:
            continue
        seen.add(real)
        tools.append(Tool(name, str(exe), _version_of(str(exe)), origin))
    return tuple(tools)


def find(name: str) -> Tool:
    """The first copy of a program, or a ToolchainError that says how to get one."""
    found = candidates(name)
    if not found:
        raise ToolchainError(f"{name} not found; {FIXES[name]}")
    return found[0]


def which(name: str) -> str | None:
    return shutil.which(name)


def nvrtc():
    """cuda.bindings' NVRTC module, or raise ToolchainError with the fix."""
    try:
        from cuda.bindings import nvrtc
    except Exception as exc:  # ImportError, or the shared library missing (RuntimeError from the loader)
        raise ToolchainError(f"NVRTC not available ({exc}); {FIXES['nvrtc']}") from None
    return nvrtc


@functools.cache
def nvrtc_version() -> str:
    """NVRTC's version as "13.0", or raise ToolchainError with the fix."""
    lib = nvrtc()
    try:
        err, major, minor = lib.nvrtcVersion()
    except Exception as exc:  # the shared library missing (RuntimeError from the loader)
        raise ToolchainError(f"NVRTC not available ({exc}); {FIXES['nvrtc']}") from None
    if err != lib.nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainError(f"NVRTC failed to report its version ({err}); {FIXES['nvrtc']}")
    return f"{major}.{minor}"


def fingerprint() -> dict[str, str]:
    """Versions that decide compiled output: part of every cache key and every run record."""
    info = {}
    try:
        info["nvrtc"] = nvrtc_version()
    except ToolchainError:
        info["nvrtc"] = ""
    for name in PROGRAMS:
        found = candidates(name)
        info[name] = f"{found[0].version} ({found[0].path})" if found else ""
    return info


@functools.cache
def cuda_include_dirs() -> tuple[Path, ...]:
    """Folders holding the CUDA headers a kernel source may include (`cuda_runtime.h`, `cooperative_groups.h`,
    `mma.h`, `cuda_fp16.h`, and CCCL's `cuda/std/...`), in lookup order: `$CUDA_HOME/include`, the include folder
    beside an nvcc or ptxas on PATH, `/usr/local/cuda/include`, then the pip `nvidia-cuda-runtime`,
    `nvidia-cuda-nvrtc` and `nvidia-cuda-cccl` wheels. Each toolkit's `include/cccl` comes right after it."""
    roots: list[Path] = []
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        roots.append(Path(cuda_home) / "include")
    for exe in ("nvcc", "ptxas"):
        found = shutil.which(exe)
        if found:
            roots.append(Path(os.path.realpath(found)).parent.parent / "include")
    roots.append(Path("/usr/local/cuda/include"))
    for root in nvidia.__path__ if nvidia else ():
        for sub in ("cu13", "cu12", "cuda_runtime", "cuda_nvrtc", "cuda_cccl"):
            roots.append(Path(root) / sub / "include")
    dirs: list[Path] = []
    for root in roots:
        for folder in (root, root / "cccl"):
            headers = (folder / "cuda_runtime.h").is_file() or (folder / "cuda" / "std").is_dir()
            if headers and folder.resolve() not in {d.resolve() for d in dirs}:
                dirs.append(folder)
    return tuple(dirs)


def nvcc() -> Tool | None:
    """The first nvcc found (CUDA_HOME, PATH, /usr/local/cuda), or None."""
    found = candidates("nvcc")
    return found[0] if found else None
