"""GPU measurement: correctness first, then CUDA-graph timing, baselines and ceilings in the same worker process.

Nothing here imports torch or cupy at module level; the worker process does, through mage_tune.gpu.
"""

from __future__ import annotations

import os

from mage_tune.kernels.base import Variant
from mage_tune.measure import baselines as _baselines  # `bench` has a parameter named baselines
from mage_tune.measure import device, worker
from mage_tune.measure.records import BenchRun, Job, Plan, Result


def variant_job(variant: Variant) -> Job:
    art = variant.artifact
    return Job(
        label=variant.label,
        kind="variant",
        config=dict(variant.config),
        cubin=art.cubin,
        cubin_sha256=art.cubin_sha256,
        kernel_name=variant.kernel_name,
        grid=variant.launch.grid,
        block=variant.launch.block,
        dynamic_shared=variant.launch.dynamic_shared,
    )


def baseline_jobs(family, shape: dict, names: tuple[str, ...] | None = None) -> list[Job]:
    """The family's baselines of the kinds named (default: the family's own default kinds)."""
    return _baselines.baseline_jobs(family, shape, family.baselines if names is None else tuple(names))


def bench(
    family,
    shape: dict,
    variants: list[Variant],
    regimes: tuple[str, ...] = ("cold",),
    baselines: tuple[str, ...] | None = None,
    rounds: int = 7,
    seed: int | None = None,
    job_timeout_s: float = 60.0,
    timed: bool = True,
    on_result=None,
    on_plan=None,
) -> BenchRun:
    """Check and time `variants` with the family's baselines in one worker session; `on_plan(n)` is told how many
    results will come (baselines included) before the first, `on_result(result)` each as it lands."""
    device.require_gpu()
    plan = Plan(
        family=family.origin or family.name,
        shape=dict(shape),
        jobs=tuple(baseline_jobs(family, shape, baselines) + [variant_job(v) for v in variants]),
        regimes=regimes,
        rounds=rounds,
        seed=seed if seed is not None else int.from_bytes(os.urandom(4), "little"),
        job_timeout_s=job_timeout_s,
        timed=timed,
    )
    if on_plan is not None:
        on_plan(len(plan.jobs))
    return worker.run_plan(plan, on_result=on_result)


__all__ = ["BenchRun", "Job", "Plan", "Result", "bench", "variant_job"]
