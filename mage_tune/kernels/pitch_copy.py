"""Row-pitch copies on the GPU (kernels/templates/pitch_copy.cu): a matrix copied into one whose rows are further
apart, the gap written with zeros, or back into rows of its own width. matmul-bf16 runs a shape whose K or N is off a
tensor map's 16-byte pitch on such copies (PaddedLauncher); one launch per copy, on the caller's stream, so a CUDA
graph captures the copies and a timing counts them. On an H200 the three copies at 2900 × 4700 × 3100 take about
55 µs, where torch's strided copies took 90 (records/h200-2026-12-04-ragged.tar.xz).

Compiled through NVRTC (the artifact cache keeps the cubin, so a compile happens once per cache), loaded through the
driver by each PitchCopier, which each padded launcher makes; nothing here runs at import.
"""

from __future__ import annotations

import ctypes

import numpy as np

from mage_tune.arch import Arch
from mage_tune.compile import build_from_cu
from mage_tune.cuda_driver import Driver
from mage_tune.errors import ConfigError
from mage_tune.kernels.base import builtin_template_dir

SOURCE = "pitch_copy.cu"
THREADS = 256  # the source's THREADS and PER_THREAD: a block takes THREADS × PER_THREAD columns of a row
PER_THREAD = 4
MAX_GRID_ROWS = 65535  # gridDim.y's limit: the blocks walk the rows beyond it
KERNELS = {2: "copy_rows_2", 4: "copy_rows_4"}  # by bytes per element: the bits are copied, never converted


def grid(rows: int, columns: int) -> tuple[int, int, int]:
    """A block per THREADS × PER_THREAD columns of a row, a grid row per matrix row (up to gridDim.y's limit)."""
    span = THREADS * PER_THREAD
    return (max(1, -(-columns // span)), max(1, min(rows, MAX_GRID_ROWS)), 1)


def row_pitch(matrix, name: str) -> int:
    """Elements between rows of a row-major 2-D tensor (its columns adjacent), else a ConfigError naming it."""
    if matrix.dim() != 2 or (matrix.shape[1] > 1 and matrix.stride(1) != 1):
        raise ConfigError(f"{name}: a row-major matrix (adjacent columns) is needed, not strides {matrix.stride()}")
    return matrix.stride(0)


class PitchCopier:
    """Launches the copies on `stream_of()`'s stream, the kernels compiled for `arch` and loaded in the current
    context (the caller makes torch's current: see matmul_bf16's _torch_context)."""

    def __init__(self, arch: Arch, stream_of, driver: Driver | None = None):
        self.driver, self.stream_of = driver or Driver(), stream_of
        source = (builtin_template_dir() / SOURCE).read_text()
        artifact = build_from_cu(source, arch, SOURCE)
        self.driver.call("cuInit", 0)
        self.image = ctypes.create_string_buffer(artifact.cubin, len(artifact.cubin))  # the module is read from it
        self.module = ctypes.c_void_p()
        self.driver.call("cuModuleLoadData", ctypes.byref(self.module), self.image)
        self.functions = {}
        for size, name in KERNELS.items():
            function = ctypes.c_void_p()
            self.driver.call("cuModuleGetFunction", ctypes.byref(function), self.module, name.encode())
            self.functions[size] = function

    def copy(self, src, dst, rows: int, width: int, columns: int) -> None:
        """dst[r, c] = src[r, c] for c < width, 0 for width <= c < columns, for r < rows: src and dst 2-D tensors
        of one element size with adjacent columns."""
        size = src.element_size()
        if size != dst.element_size() or size not in self.functions:
            got = f"{size} into {dst.element_size()}"
            raise ConfigError(f"a pitch copy moves 2- or 4-byte elements of one size, not {got}")
        if not 0 <= width <= columns:
            raise ConfigError(f"a pitch copy writes {columns} columns, fewer than the {width} it copies")
        scalars = (
            ctypes.c_uint64(src.data_ptr()),
            ctypes.c_uint64(dst.data_ptr()),
            ctypes.c_uint(rows),
            ctypes.c_uint(width),
            ctypes.c_uint(columns),
            ctypes.c_uint64(row_pitch(src, "the copy's source")),
            ctypes.c_uint64(row_pitch(dst, "the copy's destination")),
        )
        pointers = (ctypes.c_void_p * len(scalars))(*(ctypes.addressof(s) for s in scalars))
        self.driver.call(
            "cuLaunchKernel",
            self.functions[size],
            *grid(rows, columns),
            THREADS,
            1,
            1,
            0,
            ctypes.c_void_p(self.stream_of()),
            pointers,
            None,
        )


def host_copy(src: np.ndarray, dst: np.ndarray, rows: int, width: int, columns: int) -> None:
    """What PitchCopier.copy does, on host arrays: the reference its GPU test compares with."""
    dst[:rows, :width] = src[:rows, :width]
    dst[:rows, width:columns] = 0
