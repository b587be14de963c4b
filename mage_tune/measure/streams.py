"""CuPy launches on the stream torch is on: inside a graph capture that is the capturing stream, so the graph holds
the kernel instead of coming out empty."""

from __future__ import annotations


def torch_stream():
    import cupy
    import torch

    return cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
