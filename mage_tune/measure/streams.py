"""CuPy launches on the stream torch is on: inside a graph capture that is the capturing stream, so the graph holds
the kernel instead of coming out empty."""

from __future__ import annotations

from mage_tune import gpu

_streams: dict[int, object] = {}  # cupy's handle of each torch stream met: one launch costs microseconds, not tens


def raw_stream() -> int:
    """The handle of torch's current stream on its current device."""
    torch = gpu.torch()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton's launcher asks: a tenth of the cost
    return raw(torch.cuda.current_device()) if raw is not None else torch.cuda.current_stream().cuda_stream


def torch_stream():
    handle = raw_stream()
    found = _streams.get(handle)
    if found is None:
        found = _streams[handle] = gpu.cupy().cuda.ExternalStream(handle)
    return found
