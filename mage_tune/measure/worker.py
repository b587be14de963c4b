"""Isolation: each measurement batch runs in a spawned worker process with a per-job timeout.

An illegal address poisons a CUDA context and a hung kernel never returns, so the parent never touches the GPU:
it hands jobs to a worker, and when one dies or overruns its timeout the job is recorded failed (with the CUDA
error or "timed out") and a fresh worker takes the rest. A new worker is a new session: it re-measures the control
kernel, the ceilings and the baselines, so every comparison stays within one process.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import traceback
from collections.abc import Callable

from mage_tune.errors import MeasureError
from mage_tune.measure.records import BenchRun, Job, Plan, Result, Session

SESSION_TIMEOUT_S = 600.0


def _worker_main(plan: Plan, session_index: int, jobs: list[Job], out: mp.Queue) -> None:
    try:
        from mage_tune.measure import device, harness

        env = device.environment()
        session = harness.measure_session(session_index, env)
        runner = harness.Runner(plan, session_index)
        out.put(("session", session))
    except Exception as exc:  # the session itself failed: report and stop
        out.put(("fatal", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))
        return
    for job in jobs:
        out.put(("start", job.label))
        try:
            result = runner.run(job)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}".strip()
            out.put(("result", Result(job.label, job.kind, session_index, False, error=error, config=job.config,
                                      cubin_sha256=job.cubin_sha256)))
            if _context_lost(exc):
                return  # a sticky CUDA error: this context is gone, the parent starts a fresh worker
            continue
        out.put(("result", result))
    out.put(("done", None))


def _context_lost(exc: Exception) -> bool:
    text = str(exc)
    return any(s in text for s in ("IllegalAddress", "illegal", "LaunchFailure", "unspecified launch", "misaligned",
                                   "Assert", "ILLEGAL", "LAUNCH_FAILED", "cudaErrorLaunchTimeout"))


def _next(out: mp.Queue, proc, timeout: float) -> tuple[str, object]:
    """The worker's next message; ("died", None) as soon as it is gone, ("timeout", None) past the deadline."""
    waited = 0.0
    while waited < timeout:
        try:
            return out.get(timeout=0.5)
        except queue.Empty:
            waited += 0.5
            if not proc.is_alive():
                try:
                    return out.get(timeout=0.5)  # it may have said something just before exiting
                except queue.Empty:
                    return "died", None
    return "timeout", None


def run_plan(plan: Plan, on_result: Callable[[Result], None] | None = None) -> BenchRun:
    """Measure every job of the plan, restarting the worker after a crash or a hang."""
    from mage_tune.kernels import get_family

    family = get_family(plan.family)
    ctx = mp.get_context("spawn")
    baselines = [j for j in plan.jobs if j.kind != "variant"]
    pending = [j for j in plan.jobs if j.kind == "variant"]
    sessions: list[Session] = []
    results: list[Result] = []
    while not sessions or pending:
        jobs = baselines + pending
        index = len(sessions)
        out: mp.Queue = ctx.Queue()
        proc = ctx.Process(target=_worker_main, args=(plan, index, jobs, out), daemon=True)
        proc.start()
        kind, payload = _next(out, proc, SESSION_TIMEOUT_S)
        if kind != "session":
            _stop(proc)
            raise MeasureError(f"measurement session failed to start: {payload or kind}")
        sessions.append(payload)
        current: Job | None = None
        while True:
            kind, payload = _next(out, proc, plan.job_timeout_s)
            if kind == "start":
                current = next(j for j in jobs if j.label == payload)
            elif kind == "result":
                results.append(payload)
                if on_result:
                    on_result(payload)
                current = None
            else:  # done, died or timeout
                if current is not None:
                    why = f"timed out after {plan.job_timeout_s:.0f} s" if kind == "timeout" else (
                        f"worker died (exit code {proc.exitcode})")
                    failed = Result(current.label, current.kind, index, False, error=why, config=current.config,
                                    cubin_sha256=current.cubin_sha256)
                    results.append(failed)
                    if on_result:
                        on_result(failed)
                break
        _stop(proc)
        done = {r.label for r in results}
        # A baseline that broke its context is not retried: it would break every later session too.
        broken = {r.label for r in results if r.session == index and not r.ok and r.kind != "variant"}
        baselines = [j for j in baselines if j.label not in broken]
        pending = [j for j in pending if j.label not in done]
    return BenchRun(plan.family, plan.shape, tuple(sessions), tuple(results), family.bytes_moved(plan.shape),
                    family.flops(plan.shape), sessions[-1].environment)


def _stop(proc) -> None:
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=30)
