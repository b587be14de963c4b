"""GPU measurement: correctness first, then CUDA-graph timing, baselines and ceilings in the same worker process.

Nothing here imports torch or cupy at module level; the worker process does, through mage_tune.gpu.
"""

from __future__ import annotations

import dataclasses
import os

from mage_tune.errors import ConfigError
from mage_tune.kernels.base import Variant
from mage_tune.measure import baselines as _baselines  # `bench` has a parameter named baselines
from mage_tune.measure import device, shipped, worker
from mage_tune.measure.records import BenchRun, Job, Plan, Result
from mage_tune.problem import Problem


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
    """The family's baselines of the kinds named (default: the family's own default kinds). "shipped" may be among
    the names where the family has an as_shipped config; its job needs a build: shipped_job gives it."""
    chosen = family.baselines if names is None else tuple(names)
    if shipped.KIND in chosen and family.as_shipped is None:
        raise ConfigError(f"{family.name} names no as_shipped config: it has no {shipped.KIND} baseline")
    try:
        return _baselines.baseline_jobs(family, shape, tuple(n for n in chosen if n != shipped.KIND))
    except ConfigError as exc:
        if family.as_shipped is None:
            raise
        raise ConfigError(f"{exc.message}; and {shipped.KIND} (its as_shipped config)") from None


def shipped_job(problem: Problem) -> tuple[Job | None, str]:
    """The job of the family's as_shipped config (built here, launched as a variant, labelled `as shipped[...]`), or
    None and the line that says why it is left out ("" where the family names none)."""
    variant, note = shipped.build(problem)
    return (None, note) if variant is None else (shipped_job_of(problem.family, variant), "")


def shipped_job_of(family, variant: Variant) -> Job:
    """The shipped config's built variant as a job: a variant's, labelled `as shipped[...]`."""
    return dataclasses.replace(variant_job(variant), label=shipped.label(family, variant.config))


def plan_jobs(
    problem: Problem, variants: list[Variant], baselines: tuple[str, ...] | None = None, on_note=None
) -> list[Job]:
    """What `bench` measures, in order: the baselines of the kinds named (None: the family's defaults, its shipped
    config included where it names one), then the variants. `on_note(line)` hears why the shipped config is left
    out, where it is."""
    jobs = baseline_jobs(problem.family, problem.shape, baselines)
    if shipped.wanted(problem.family, baselines):
        job, note = shipped_job(problem)
        if job is not None:
            jobs.append(job)
        elif note and on_note is not None:
            on_note(note)
    return jobs + [variant_job(v) for v in variants]


def bench(
    problem: Problem,
    variants: list[Variant],
    regimes: tuple[str, ...] = ("cold",),
    baselines: tuple[str, ...] | None = None,
    rounds: int = 7,
    seed: int | None = None,
    job_timeout_s: float = 60.0,
    timed: bool = True,
    on_result=None,
    on_plan=None,
    on_note=None,
) -> BenchRun:
    """Check and time `variants` (built for `problem`) with the family's baselines, and its shipped config built
    for the problem's arch, in one worker session; `on_plan(n)` is told how many results will come (baselines
    included) before the first, `on_result(result)` each as it lands, `on_note(line)` why the shipped config is
    left out."""
    device.require_gpu()
    family = problem.family
    plan = Plan(
        family=family.origin or family.name,
        shape=dict(problem.shape),
        jobs=tuple(plan_jobs(problem, variants, baselines, on_note)),
        regimes=regimes,
        rounds=rounds,
        seed=seed if seed is not None else int.from_bytes(os.urandom(4), "little"),
        job_timeout_s=job_timeout_s,
        timed=timed,
    )
    if on_plan is not None:
        on_plan(len(plan.jobs))
    return worker.run_plan(plan, on_result=on_result)


__all__ = ["BenchRun", "Job", "Plan", "Result", "bench", "plan_jobs", "shipped_job", "shipped_job_of", "variant_job"]
