"""Is there a real GPU, and what is it: the context every measured number carries."""

from __future__ import annotations

import contextlib
import functools
import platform
import subprocess

from mage_tune.errors import NoDeviceError


@functools.cache
def has_gpu() -> bool:
    """True only where a CUDA device answers, not merely where a GPU library imports."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # ImportError, or CUDARuntimeError when the driver is absent
        return False


def require_gpu() -> None:
    if not has_gpu():
        raise NoDeviceError(
            "no CUDA device found (this command times kernels on a GPU); the CPU commands census, compare, "
            "space, render and search --static work without one"
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
    from importlib.metadata import PackageNotFoundError, version

    from mage_tune import toolchain

    env: dict = {"host": platform.node(), "python": platform.python_version()}
    for package in ("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "cuda-bindings", "optuna", "mage-tune"):
        with contextlib.suppress(PackageNotFoundError):
            env[package] = version(package)
    env["toolchain"] = toolchain.fingerprint()
    if has_gpu():
        import cupy

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
    return env


def arch_of_device() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    return f"sm_{props['major']}{props['minor']}"
