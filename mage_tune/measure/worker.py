"""Isolation: measurements run in a spawned worker process, one job at a time, each with a timeout.

An illegal address poisons a CUDA context and a hung kernel never returns, so the caller never touches the GPU:
it hands jobs to a worker, and when one dies or overruns its timeout that job is recorded failed (with the CUDA
error, "timed out" or the exit code) and a fresh worker takes the next. A new worker is a new session: it measures
the control kernel, the ceilings and the baselines again, so every comparison stays within one process.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import traceback
from collections.abc import Callable

from mage_tune.errors import MeasureError
from mage_tune.kernels import load_family
from mage_tune.measure import device, harness, shipped
from mage_tune.measure.records import BenchRun, Job, Plan, Result, Session

SESSION_TIMEOUT_S = 600.0


def _worker_main(plan: Plan, session_index: int, jobs: mp.Queue, out: mp.Queue) -> None:
    try:
        session = harness.measure_session(session_index, device.environment())
        runner = harness.Runner(plan, session_index)
    except Exception as exc:
        out.put(("fatal", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"))
        return
    out.put(("session", session))
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            result = runner.run(job)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}".strip()
            out.put(
                (
                    "result",
                    Result(
                        job.label,
                        job.kind,
                        session_index,
                        False,
                        error=error,
                        config=job.config,
                        cubin_sha256=job.cubin_sha256,
                    ),
                )
            )
            if harness.is_sticky(error):
                leave_now(out)  # a sticky CUDA error: this context is gone; the caller starts a fresh worker
            continue
        out.put(("result", result))


def leave_now(out: mp.Queue) -> None:
    """End the worker once `out` has delivered what was put in it, without the interpreter's shutdown: the CUDA
    libraries' finalizers would touch a context a sticky error poisoned and print their tracebacks on the search's
    terminal (seen on a loaded machine, where the worker reaches its shutdown before the search stops it)."""
    out.close()
    out.join_thread()
    os._exit(0)


class Measurer:
    """A worker process that outlives single jobs; restarted (as a new session) whenever one kills it."""

    def __init__(self, plan: Plan, baselines: list[Job], on_result: Callable[[Result], None] | None = None):
        self.plan = plan
        self.baselines = list(baselines)
        self.on_result = on_result
        self.sessions: list[Session] = []
        self.results: list[Result] = []
        self._ctx = mp.get_context("spawn")
        self._proc = None

    def start(self) -> None:
        """Spawn a worker, take its session, then run the baselines in it."""
        while True:
            index = len(self.sessions)
            self._jobs, self._out = self._ctx.Queue(), self._ctx.Queue()
            self._proc = self._ctx.Process(
                target=_worker_main, args=(self.plan, index, self._jobs, self._out), daemon=True
            )
            self._proc.start()
            kind, payload = self._next(SESSION_TIMEOUT_S)
            if kind != "session":
                self._stop()
                raise MeasureError(f"measurement session failed to start: {payload or kind}")
            self.sessions.append(payload)
            for job in list(self.baselines):
                self._run(job)
                if self._proc is None:  # it broke the context: drop it, or it would break every session
                    self.baselines.remove(job)
                    break
            else:
                return

    def _next(self, timeout: float) -> tuple[str, object]:
        waited = 0.0
        while waited < timeout:
            try:
                return self._out.get(timeout=0.5)
            except queue.Empty:
                waited += 0.5
                if not self._proc.is_alive():
                    try:
                        return self._out.get(timeout=0.5)
                    except queue.Empty:
                        return "died", None
        return "timeout", None

    def _run(self, job: Job) -> Result:
        self._jobs.put(job)
        kind, payload = self._next(self.plan.job_timeout_s)
        if kind == "result":
            result = payload
            if not self._proc.is_alive() or (not result.ok and harness.is_sticky(result.error)):
                self._stop()
        else:
            why = (
                f"timed out after {self.plan.job_timeout_s:.0f} s"
                if kind == "timeout"
                else f"worker died (exit code {self._proc.exitcode})"
            )
            result = Result(
                job.label,
                job.kind,
                len(self.sessions) - 1,
                False,
                error=why,
                config=job.config,
                cubin_sha256=job.cubin_sha256,
            )
            self._stop()
        self.results.append(result)
        if self.on_result:
            self.on_result(result)
        return result

    def measure(self, job: Job) -> Result:
        if self._proc is None:
            self.start()
        return self._run(job)

    def _stop(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(timeout=30)
        self._proc = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._jobs.put(None)
            self._proc.join(timeout=10)
        self._stop()


def run_plan(plan: Plan, on_result: Callable[[Result], None] | None = None) -> BenchRun:
    """Measure every job of the plan: baselines first in each session, then the variants."""
    family = load_family(plan.family)
    # the shipped config launches as a variant but is a baseline: timed again in every session
    is_variant = [j.kind == "variant" and not shipped.is_shipped(j) for j in plan.jobs]
    variants = [j for j, v in zip(plan.jobs, is_variant, strict=True) if v]
    measurer = Measurer(plan, [j for j, v in zip(plan.jobs, is_variant, strict=True) if not v], on_result)
    try:
        if not variants:
            measurer.start()
        for job in variants:
            measurer.measure(job)
    finally:
        measurer.close()
    return BenchRun(
        family.name,
        plan.shape,
        tuple(measurer.sessions),
        tuple(measurer.results),
        family.bytes_moved(plan.shape),
        family.flops(plan.shape),
        measurer.sessions[-1].environment,
        plan.family,
    )
