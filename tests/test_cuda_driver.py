"""The driver launch (mage_tune/cuda_driver.py) without a GPU: a recording driver stands in for libcuda and the
parameter list it is handed is read back through ctypes, as the driver reads it."""

from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from mage_tune.cuda_driver import Driver, KernelLaunch


class Recorder(Driver):
    """Answers cuCtxGetCurrent with `context` and keeps what each cuLaunchKernel would launch."""

    def __init__(self, context: int = 0x1234):
        super().__init__(lib=object())
        self.context = context
        self.launches: list[tuple] = []

    def call(self, name: str, *args) -> None:
        if name == "cuCtxGetCurrent":
            ctypes.cast(args[0], ctypes.POINTER(ctypes.c_void_p))[0] = self.context
            return
        assert name == "cuLaunchKernel"
        function, *dims, stream, params, extra = args
        self.launches.append((function.value, tuple(dims), getattr(stream, "value", stream), params, extra))

    def entry(self, name: str):
        def recorded(*args) -> int:
            self.call(name, *args)
            return 0

        return recorded


def _read(params, pointers: int, scalars: tuple) -> tuple:
    """The values the driver would read: each parameter's bytes at the address the list holds."""
    out = [ctypes.c_uint64.from_address(params[i]).value for i in range(pointers)]
    for i, s in enumerate(scalars, start=pointers):
        out.append(np.frombuffer(ctypes.string_at(params[i], s.nbytes), dtype=s.dtype)[0])
    return tuple(out)


def test_a_launch_hands_the_driver_the_pointers_and_packed_scalars():
    driver = Recorder()
    launch = KernelLaunch(0xABC, (40, 1, 1), (256,), 1024, driver)
    scalars = (np.int32(8192), np.int64(32000), np.float32(1e-5))
    assert launch.launch([0x1000, 0x2000, 0x3000], scalars, 77)
    function, dims, stream, params, extra = driver.launches[0]
    assert (function, dims, stream, extra) == (0xABC, (40, 1, 1, 256, 1, 1, 1024), 77, None)
    assert _read(params, 3, scalars) == (0x1000, 0x2000, 0x3000, 8192, 32000, np.float32(1e-5))
    # the next launch's pointers and (equal, fresh) scalars go into the same storage
    again = (np.int32(8192), np.int64(32000), np.float32(1e-5))
    assert launch.launch([0x4000, 0x5000, 0x6000], again, 78)
    assert driver.launches[1][3] is params and _read(params, 3, again)[:3] == (0x4000, 0x5000, 0x6000)
    # other scalar values are packed anew
    other = (np.int32(5), np.int64(7), np.float32(0.5))
    assert launch.launch([1, 2, 3], other, 79)
    assert _read(driver.launches[2][3], 3, other) == (1, 2, 3, 5, 7, np.float32(0.5))


def test_no_launch_without_a_context_or_with_a_scalar_of_unknown_c_type():
    none = Recorder(context=0)
    assert not KernelLaunch(1, (1,), (32,), 0, none).launch([0x10], (np.int32(1),), 0)
    assert none.launches == []
    driver = Recorder()
    launch = KernelLaunch(1, (1,), (32,), 0, driver)
    assert not launch.launch([0x10], (1,), 0)  # a Python int: int32 or int64? the caller's path decides
    assert driver.launches == []
    assert launch.launch([0x10], (np.float64(2.5),), 0)
    assert _read(driver.launches[0][3], 1, (np.float64(2.5),)) == (0x10, 2.5)


def test_a_bound_launch_packs_its_scalars_once_and_takes_pointers_per_call():
    driver = Recorder()
    launch = KernelLaunch(0xABC, (40,), (128,), 0, driver)
    bound = launch.bind((np.int32(8192), np.float32(1e-5)))
    assert bound([0x10, 0x20, 0x30], 5) and bound([0x40, 0x50, 0x60], 6)
    first, second = driver.launches
    assert first[:3] == (0xABC, (40, 1, 1, 128, 1, 1, 0), 5) and second[2] == 6
    assert _read(second[3], 3, (np.int32(0), np.float32(0))) == (0x40, 0x50, 0x60, 8192, np.float32(1e-5))
    assert launch.bind((8192,)) is None  # a Python int's C type would be a guess
    assert not KernelLaunch(1, (1,), (32,), 0, Recorder(context=0)).bind((np.int32(1),))([0x10], 0)


def test_a_bound_launch_the_driver_refuses_raises_with_the_driver_s_status():
    class Refusing(Recorder):
        def entry(self, name: str):
            return lambda *args: 700  # CUDA_ERROR_ILLEGAL_ADDRESS

    driver = Refusing()
    driver._lib = types.SimpleNamespace(cuGetErrorName=lambda status, text: 1)  # no name known for it
    bound = KernelLaunch(0xABC, (40,), (128,), 0, driver).bind((np.int32(1),))
    with pytest.raises(RuntimeError, match=r"cuLaunchKernel failed: CUresult 700"):
        bound([0x10], 0)
