"""The CUDA driver through ctypes on libcuda: the calls matmul-bf16's tensor maps need, and a kernel launch that costs
a few microseconds of host time (runtime.py's tuned kernels are launched once per PyTorch operator call, where cupy's
launch path cost about 20 µs).

Nothing here runs at import: libcuda is loaded on the first call (only where a kernel is launched, so the CPU path
never needs it).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Sequence
from typing import ClassVar

import numpy as np


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig (no attributes here: a kernel's cluster shape is its own __cluster_dims__)."""

    _fields_ = (
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("attr_count", ctypes.c_uint),
    )


class Driver:
    """The CUDA driver's C entry points mage-tune calls, through ctypes on libcuda (loaded on first use, where a
    kernel is launched); every call's status is checked, a failure raised with the driver's name for it."""

    _SIGNATURES: ClassVar[dict[str, list]] = {
        "cuInit": [ctypes.c_uint],
        "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        "cuModuleLoadData": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p],
        "cuModuleGetFunction": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p],
        "cuFuncSetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_int],
        "cuCtxGetCurrent": [ctypes.POINTER(ctypes.c_void_p)],
        "cuCtxGetDevice": [ctypes.POINTER(ctypes.c_int)],
        "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
        "cuOccupancyMaxActiveClusters": [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(LaunchConfig)],
        "cuTensorMapEncodeTiled": [
            ctypes.c_void_p,  # CUtensorMap* (64-byte aligned)
            ctypes.c_int,  # CUtensorMapDataType
            ctypes.c_uint32,  # rank
            ctypes.c_void_p,  # global address
            ctypes.POINTER(ctypes.c_uint64),  # global dims, innermost first
            ctypes.POINTER(ctypes.c_uint64),  # global strides in bytes, rank - 1 of them
            ctypes.POINTER(ctypes.c_uint32),  # box dims
            ctypes.POINTER(ctypes.c_uint32),  # element strides
            ctypes.c_int,  # interleave
            ctypes.c_int,  # swizzle
            ctypes.c_int,  # L2 promotion
            ctypes.c_int,  # out-of-bounds fill
        ],
        "cuLaunchKernel": [
            ctypes.c_void_p,
            *[ctypes.c_uint] * 7,  # grid x y z, block x y z, dynamic shared bytes
            ctypes.c_void_p,  # stream
            ctypes.POINTER(ctypes.c_void_p),  # kernel parameters
            ctypes.POINTER(ctypes.c_void_p),  # extra
        ],
    }

    def __init__(self, lib=None):
        self._lib = lib

    @property
    def lib(self):
        if self._lib is None:
            self._lib = _libcuda()
        return self._lib

    def call(self, name: str, *args) -> None:
        self.check(name, self.entry(name)(*args))

    def entry(self, name: str):
        """The entry point itself, returning its CUresult unchecked (for a caller on a hot path that checks the
        status with `check`)."""
        return getattr(self.lib, name)

    def check(self, name: str, status: int) -> None:
        if status != 0:
            text = ctypes.c_char_p()
            if name != "cuGetErrorName" and self.lib.cuGetErrorName(status, ctypes.byref(text)) == 0 and text.value:
                raise RuntimeError(f"{name} failed: {text.value.decode()} ({status})")
            raise RuntimeError(f"{name} failed: CUresult {status}")


@functools.cache
def _libcuda():
    """libcuda with the signatures of the calls Driver makes (loaded once per process)."""
    lib = ctypes.CDLL("libcuda.so.1")
    for name, argtypes in Driver._SIGNATURES.items():
        getattr(lib, name).argtypes = argtypes
        getattr(lib, name).restype = ctypes.c_int
    return lib


class KernelLaunch:
    """One loaded kernel launched by cuLaunchKernel with a fixed grid, block and dynamic shared memory: its parameter
    list (pointers, then packed scalars) is kept in ctypes storage from launch to launch, so a launch writes the
    pointers' values and calls the driver. The driver copies the parameters at the launch (a CUDA graph capture
    keeps the values it saw), so reusing the storage is safe; a lock keeps two threads from filling it at once.

    `launch` returns False, launching nothing, where this thread has no current CUDA context (a thread that has not
    touched the GPU yet): the caller launches by its usual path, which makes torch's context current."""

    def __init__(
        self,
        function: int,
        grid: Sequence[int],
        block: Sequence[int],
        dynamic_shared: int,
        driver: Driver | None = None,
    ):
        self.driver = driver or Driver()
        self.function = ctypes.c_void_p(function)
        self.dims = (*_three(grid), *_three(block), dynamic_shared)
        self._pointers: ctypes.Array | None = None
        self._scalars: tuple | None = None
        self._scalar_storage: list = []
        self._params: ctypes.Array | None = None
        self._lock = threading.Lock()
        self._context = threading.local()

    def _has_context(self) -> bool:
        if getattr(self._context, "ok", False):
            return True
        current = ctypes.c_void_p()
        self.driver.call("cuCtxGetCurrent", ctypes.byref(current))
        self._context.ok = bool(current.value)
        return self._context.ok

    def _layout(self, pointers: int, scalars: tuple) -> None:
        """Storage for `pointers` pointer values and the packed `scalars` (numpy scalars: their bytes as they are)."""
        self._pointers = (ctypes.c_uint64 * pointers)()
        self._scalar_storage = [(ctypes.c_char * s.nbytes).from_buffer_copy(s.tobytes()) for s in scalars]
        addresses = [ctypes.addressof(self._pointers) + 8 * i for i in range(pointers)]
        addresses += [ctypes.addressof(s) for s in self._scalar_storage]
        self._params = (ctypes.c_void_p * len(addresses))(*addresses)
        self._scalars = scalars

    def launch(self, pointers: Sequence[int], scalars: tuple[np.generic, ...], stream: int) -> bool:
        """Launch on `stream` with these pointer values and packed scalars (numpy scalars of the kernel's C types);
        False, launching nothing, where this thread has no CUDA context or a scalar is not a numpy scalar (whose
        C type would be a guess)."""
        if not self._has_context() or not all(isinstance(s, np.generic) for s in scalars):
            return False
        with self._lock:
            if self._pointers is None or len(self._pointers) != len(pointers) or self._scalars is not scalars:
                if self._pointers is not None and len(self._pointers) == len(pointers) and self._same(scalars):
                    self._scalars = scalars
                else:
                    self._layout(len(pointers), scalars)
            self._pointers[:] = pointers
            self.driver.call("cuLaunchKernel", self.function, *self.dims, ctypes.c_void_p(stream), self._params, None)
        return True

    def bind(self, scalars: tuple[np.generic, ...]) -> BoundLaunch | None:
        """This kernel with `scalars` packed once, for a caller that launches with the same ones again (a PyTorch
        operator at a shape it has met): None where a scalar is not a numpy scalar."""
        if not all(isinstance(s, np.generic) for s in scalars):
            return None
        return BoundLaunch(self, scalars)

    def _same(self, scalars: tuple) -> bool:
        """Whether `scalars` pack to the bytes held now (a caller's fresh tuple of the same values)."""
        old = self._scalars or ()
        return len(old) == len(scalars) and all(
            a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(old, scalars, strict=True)
        )


def _three(dims: Sequence[int]) -> tuple[int, int, int]:
    """x, y, z of a grid or block given as 1 to 3 numbers (the missing ones 1)."""
    x, y, z = (*dims, 1, 1)[:3]
    return int(x), int(y), int(z)


class BoundLaunch:
    """A KernelLaunch with its scalars packed into storage of its own: a launch writes the pointer values and calls
    the driver, nothing else (the path of an operator called thousands of times at one shape). Threads share it
    under a lock; `__call__` returns False, launching nothing, where this thread has no CUDA context."""

    def __init__(self, kernel: KernelLaunch, scalars: tuple[np.generic, ...]):
        self._kernel = kernel
        self._driver = kernel.driver
        self._launch = kernel.driver.entry("cuLaunchKernel")  # called as it is: no layer between, status checked
        self._head = (kernel.function, *kernel.dims)
        self._pointers: ctypes.Array | None = None
        self._scalars = [(ctypes.c_char * s.nbytes).from_buffer_copy(s.tobytes()) for s in scalars]
        self._params: ctypes.Array | None = None
        self._lock = threading.Lock()

    def _layout(self, pointers: int) -> None:
        self._pointers = (ctypes.c_uint64 * pointers)()
        addresses = [ctypes.addressof(self._pointers) + 8 * i for i in range(pointers)]
        addresses += [ctypes.addressof(s) for s in self._scalars]
        self._params = (ctypes.c_void_p * len(addresses))(*addresses)

    def __call__(self, pointers: Sequence[int], stream: int) -> bool:
        if not self._kernel._has_context():
            return False
        with self._lock:
            if self._pointers is None or len(self._pointers) != len(pointers):
                self._layout(len(pointers))
            self._pointers[:] = pointers
            status = self._launch(*self._head, stream, self._params, None)
        if status:
            self._driver.check("cuLaunchKernel", status)
        return True
