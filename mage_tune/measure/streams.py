"""CuPy launches on the stream torch is on: inside a graph capture that is the capturing stream, so the graph holds
the kernel instead of coming out empty."""

from __future__ import annotations

from mage_tune import gpu
from mage_tune.gpu import raw_stream

__all__ = ["raw_stream", "torch_stream"]

_streams: dict[int, object] = {}  # cupy's handle of each torch stream met: one launch costs microseconds, not tens


def torch_stream():
    handle = raw_stream()
    found = _streams.get(handle)
    if found is None:
        found = _streams[handle] = gpu.cupy().cuda.ExternalStream(handle)
    return found
