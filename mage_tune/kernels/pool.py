"""Compile many configs of a family in parallel processes (NVRTC and ptxas are single-threaded)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from mage_tune.arch import Arch
from mage_tune.errors import MageError
from mage_tune.kernels.base import Config, Family, Shape, Variant


def build_one(family: Family, config: Config, shape: Shape, arch: Arch, checked: bool = False) -> Variant | MageError:
    """Never raises for a bad config: the error is the result, so one broken variant cannot stop a batch. `checked`:
    the caller has checked the config's constraints (Family.build)."""
    try:
        return family.build(config, shape, arch, checked=checked)
    except MageError as exc:
        return exc


def exit_with_parent() -> None:
    """Pool initializer: end this compile process once its parent is gone. A pool worker waits on a queue whose
    writing end it holds itself, so after a kill -9 of the parent it would otherwise idle forever."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def default_workers() -> int:
    return max(1, min(8, (os.cpu_count() or 2)))


def build_many(
    family: Family, shape: Shape, arch: Arch, configs: Iterable[Config], workers: int | None = None
) -> Iterator[tuple[Config, Variant | MageError]]:
    """(config, Variant or error) in the order given; compiles run `workers` at a time."""
    configs = list(configs)
    workers = workers or default_workers()
    if workers == 1 or len(configs) <= 1:
        for config in configs:
            yield config, build_one(family, config, shape, arch)
        return
    with ProcessPoolExecutor(workers, initializer=exit_with_parent) as pool:
        futures: list[Future] = [pool.submit(build_one, family, c, shape, arch) for c in configs]
        for config, future in zip(configs, futures, strict=True):
            yield config, future.result()
