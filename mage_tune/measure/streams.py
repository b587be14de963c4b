"""CuPy launches on the stream torch is on: inside a graph capture that is the capturing stream, so the graph holds
the kernel instead of coming out empty."""

from __future__ import annotations

from mage_tune import gpu


def torch_stream():
    return gpu.cupy().cuda.ExternalStream(gpu.torch().cuda.current_stream().cuda_stream)
