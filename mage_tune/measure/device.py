"""Is there a real GPU, and what is it: the context every measured number carries."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version

from mage_tune import gpu, toolchain
from mage_tune.arch import Arch, get_arch
from mage_tune.errors import NoDeviceError


@functools.cache
def has_gpu() -> bool:
    """True only where a CUDA device answers, not merely where a GPU library imports."""
    try:
        return gpu.cupy().cuda.runtime.getDeviceCount() > 0
    except Exception:  # NoDeviceError (cupy will not import), or CUDARuntimeError when the driver is absent
        return False


def gpu_hardware() -> str:
    """What shows an NVIDIA GPU on this machine without any Python GPU library ("" where nothing does): a listed
    GPU of `nvidia-smi -L`, or the device node /dev/nvidia0."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        listed = [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []
        if listed:
            return listed[0].split(" (UUID")[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return "/dev/nvidia0" if os.path.exists("/dev/nvidia0") else ""


@functools.cache
def gpu_mode() -> tuple[str, str]:
    """("measured", on what) where a CUDA device answers through cupy and torch imports; ("static", why) where this
    machine shows no NVIDIA GPU. A GPU that is here but cannot be used (cupy or torch will not import, no driver, no
    device answers) is a NoDeviceError that says what is missing, never a quiet static run."""
    hardware = gpu_hardware()
    try:
        cupy = gpu.cupy()
    except NoDeviceError as exc:  # "cupy will not import (why); the fix"
        if not hardware:
            return "static", "no NVIDIA GPU here (nvidia-smi lists none, no /dev/nvidia0)"
        raise NoDeviceError(f"an NVIDIA GPU is here ({hardware}) but {exc.message}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, or a driver older than cupy's CUDA
        if not hardware:
            return "static", f"no NVIDIA GPU here (cupy: {exc})"
        raise NoDeviceError(
            f"an NVIDIA GPU is here ({hardware}) but CUDA does not answer through cupy: {exc}"
        ) from None
    if count == 0:
        if not hardware:
            return "static", "no NVIDIA GPU here (CUDA counts no device)"
        raise NoDeviceError(f"an NVIDIA GPU is here ({hardware}) but CUDA counts no device it may use")
    try:
        torch = gpu.torch()  # the baselines (torch, Triton) need it
    except NoDeviceError as exc:
        raise NoDeviceError(f"cupy sees {count} CUDA device(s) but {exc.message}") from None
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return "measured", f"{name} (cupy {cupy.__version__}, torch {torch.__version__})"


def require_gpu() -> None:
    if gpu_mode()[0] != "measured":
        raise NoDeviceError(
            "no CUDA device found (this command times kernels on a GPU); the CPU commands census, compare, "
            f"space, render and search --static work without one ({gpu_mode()[1]})"
        )


def _smi(query: str) -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment() -> dict:
    """GPU, driver, clocks, library and toolchain versions: stored in every record."""
    env: dict = {"host": platform.node(), "python": platform.python_version()}
    for package in ("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "cuda-bindings", "optuna", "mage-tune"):
        with contextlib.suppress(PackageNotFoundError):
            env[package] = version(package)
    env["toolchain"] = toolchain.fingerprint()
    if has_gpu():
        cupy = gpu.cupy()
        props = cupy.cuda.runtime.getDeviceProperties(0)
        env["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        env["sm_count"] = props["multiProcessorCount"]
        env["compute_capability"] = f"{props['major']}.{props['minor']}"
        env["l2_bytes"] = props["l2CacheSize"]
        env["memory_bytes"] = props["totalGlobalMem"]
        env["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        env["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
        env["driver"] = _smi("driver_version")
        env["clocks_mhz"] = _smi("clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem")
        env["power_limit"] = _smi("power.limit")
        if os.environ.get("CUDA_VISIBLE_DEVICES"):  # a worker pinned to one GPU of the host
            env["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


def gpu_name() -> str:
    """The name of the GPU this process measures on ("" where none is present)."""
    if not has_gpu():
        return ""
    name = gpu.cupy().cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def gpu_count() -> int:
    if not has_gpu():
        return 0
    return gpu.cupy().cuda.runtime.getDeviceCount()


def arch_of_device() -> Arch:
    """The Arch of device 0; InputError where mage-tune has no facts for it."""
    props = gpu.cupy().cuda.runtime.getDeviceProperties(0)
    return get_arch(f"sm_{props['major']}{props['minor']}")
