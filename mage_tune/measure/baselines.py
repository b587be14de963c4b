"""The baselines timed beside the variants: each family's own (its `baseline_kernels`, launched by its `launcher`)
and, for a family whose first written output has the bytes of one input (`copy_of`), plain copies of that input
into that output: the same bytes moved by kernels that do nothing else, timed exactly like the variants, so the
floor at a small shape (launch, ramp-up and tail included) is measured rather than extrapolated. A family whose
outputs are all in-place offers no copy.

A baseline of kind "context" (CONTEXT) is timed for context only: a kernel the family's outputs are not held to
(cuBLAS with TF32 beside an FP32-accurate matmul). Its check is recorded but does not fail it (an output not written
or not finite still does), and it is never a best baseline: not in bench's ratios to the best, a search's baselines,
the tuning database or its model.

A launcher takes one buffer set (names as the family's inputs and outputs; the one output of a family that declares
none under "__out__") and launches on torch's current stream, so graph capture sees it. It may return the output
(a tensor: the family's first output) or a dict of outputs by name, instead of writing the set's buffers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mage_tune import gpu
from mage_tune.errors import ConfigError
from mage_tune.kernels.base import CONTEXT  # a family names the kind there, without importing the measuring side
from mage_tune.measure.ceilings import COPY_SOURCE, SHAPE_COPY_KERNELS
from mage_tune.measure.records import Job
from mage_tune.measure.streams import torch_stream

COPY = "copy"


def is_context(item) -> bool:
    """Whether a Job, Result or recorded result (a dict) is a context-only baseline's."""
    kind = item.get("kind") if isinstance(item, dict) else getattr(item, "kind", None)
    return kind == CONTEXT


def baseline_jobs(family, shape: dict, names: tuple[str, ...]) -> list[Job]:
    """The family's baselines of the kinds named (its default kinds when `names` is None), copies last."""
    offered = {b.kind for b in family.baseline_kernels(shape)} | ({COPY} if copies(family, shape) else set())
    unknown = [n for n in names if n not in offered]
    if unknown:
        raise ConfigError(
            f"{family.name} has no baseline {', '.join(unknown)}; it offers: {', '.join(sorted(offered)) or 'none'}"
        )
    jobs = [Job(b.label, b.kind, dict(b.config)) for b in family.baseline_kernels(shape) if b.kind in names]
    if COPY in names:
        jobs += copy_jobs(family, shape)
    return jobs


def copies(family, shape: dict) -> bool:
    """Whether the family offers copies: it names `copy_of` and writes an output that is not in-place."""
    return bool(family.copy_of) and bool(family.output_shapes(shape))


def copy_target(family, shape: dict) -> str:
    """The buffer a copy writes: the family's first written (not in-place) output."""
    return next(iter(family.output_shapes(shape)))


def copy_jobs(family, shape: dict) -> list[Job]:
    """copy_of -> the first written output by each copy kernel of the session's ceilings, where its bytes are whole
    16-byte units."""
    if not copies(family, shape):
        return []
    nbytes = _copy_bytes(family, shape)
    if nbytes % 16:
        return []
    return [
        Job(f"copy[{name}]", COPY, {"kernel": name, "bytes": nbytes}, expect=family.copy_of)
        for name in SHAPE_COPY_KERNELS
    ]


def _copy_bytes(family, shape: dict) -> int:
    elements = int(np.prod(family.output_shapes(shape)[copy_target(family, shape)]))
    return elements * (2 if family.device_dtype(family.copy_of) in ("bfloat16", "float16") else 4)


def launcher(job: Job, family, shape: dict) -> Callable[[dict], object]:
    if job.kind == COPY:
        return _copy_launcher(job.config["kernel"], job.config["bytes"], family.copy_of, copy_target(family, shape))
    launch = family.launcher(job, shape)
    if launch is None:
        raise ConfigError(f"{family.name} gives no launcher for its baseline {job.label!r} (kind {job.kind!r})")
    return launch


def _copy_launcher(kernel: str, nbytes: int, source: str, target: str):
    fn = gpu.cupy().RawModule(code=COPY_SOURCE, options=("-std=c++17",)).get_function(kernel)
    n4 = nbytes // 16
    per_block = SHAPE_COPY_KERNELS[kernel]
    grid = ((n4 + per_block - 1) // per_block, 1, 1)

    def launch(bufs):
        with torch_stream():
            args = (np.uint64(bufs[source].data_ptr()), np.uint64(bufs[target].data_ptr()), np.int64(n4))
            fn(grid, (256, 1, 1), args)

    return launch
