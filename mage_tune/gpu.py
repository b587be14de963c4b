"""The GPU libraries, in one place: cupy and torch (the `gpu` extra; CUDA's runtime is reached through them) and
the families' Triton reference kernels (Triton's runtime launches them). Each is imported on first use, here and
nowhere else, so the CPU path (census, compare, space, search --static, the tuning database) installs and runs
without the `gpu` extra and `mage-tune --help` stays instant. A library that will not import is a NoDeviceError
that says how to get it. tests/test_imports.py checks that no other module imports cupy or torch."""

from __future__ import annotations

from types import ModuleType

from mage_tune.errors import NoDeviceError

FIX = "run ./setup.sh (it installs the gpu extra where it sees a GPU) or pip install -e '.[gpu]'"


def cupy() -> ModuleType:
    """cupy: loads kernels from cubins and launches them; asks CUDA how many devices answer and what they are."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a cupy built for another CUDA failing as it loads
        raise NoDeviceError(f"cupy will not import ({exc}); {FIX}") from exc
    return cupy


def torch() -> ModuleType:
    """torch: the buffers, CUDA graphs and events the harness times with, and the torch baselines."""
    try:
        import torch
    except Exception as exc:  # ImportError, or a torch built for another CUDA failing as it loads
        raise NoDeviceError(f"torch will not import ({exc}); {FIX}") from exc
    return torch


def current_device() -> int:
    """torch's current CUDA device; NoDeviceError (one line) where torch has no CUDA or sees no device, instead of
    torch's AssertionError or RuntimeError. Costs nothing more than torch's call where a device is present."""
    try:
        return torch().cuda.current_device()
    except (AssertionError, RuntimeError) as exc:
        raise NoDeviceError(f"no CUDA device for torch here ({exc}): a tuned kernel launches on a GPU") from None


def inductor() -> tuple[ModuleType, ModuleType]:
    """torch.compile's Inductor: its config module and its custom_graph_pass module (mage_tune/torch/fusion.py
    installs a post-grad pass through them)."""
    torch()
    from torch._inductor import config, custom_graph_pass

    return config, custom_graph_pass


def triton_kernels() -> ModuleType:
    """mage_tune.triton_kernels, the built-in families' Triton reference kernels: importing it imports triton
    (about 0.15 s), which only compiling a reference (compare) or launching one (bench, search) needs."""
    from mage_tune import triton_kernels

    return triton_kernels


def raw_stream() -> int:
    """The handle of torch's current stream on its current device: what Triton's launcher asks, a tenth of the cost
    of torch.cuda.current_stream() (tens of microseconds on a slow host)."""
    found = torch()
    raw = getattr(found._C, "_cuda_getCurrentRawStream", None)
    return raw(found.cuda.current_device()) if raw is not None else found.cuda.current_stream().cuda_stream
