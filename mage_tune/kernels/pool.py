"""Compile many configs of a family in parallel processes (NVRTC and ptxas are single-threaded)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from mage_tune.errors import MageError
from mage_tune.kernels.base import Config, Family, Shape, Variant


def build_one(family: Family, config: Config, shape: Shape, arch: str) -> Variant | MageError:
    """Never raises for a bad config: the error is the result, so one broken variant cannot stop a batch."""
    try:
        return family.build(config, shape, arch)
    except MageError as exc:
        return exc


def default_workers() -> int:
    return max(1, min(8, (os.cpu_count() or 2)))


def build_many(
    family: Family, shape: Shape, arch: str, configs: Iterable[Config], workers: int | None = None
) -> Iterator[tuple[Config, Variant | MageError]]:
    """(config, Variant or error) in the order given; compiles run `workers` at a time."""
    configs = list(configs)
    workers = workers or default_workers()
    if workers == 1 or len(configs) <= 1:
        for config in configs:
            yield config, build_one(family, config, shape, arch)
        return
    with ProcessPoolExecutor(workers) as pool:
        futures: list[Future] = [pool.submit(build_one, family, c, shape, arch) for c in configs]
        for config, future in zip(configs, futures, strict=True):
            yield config, future.result()
