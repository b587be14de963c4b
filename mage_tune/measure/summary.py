"""From a BenchRun to the numbers people compare: floor, % of floor, ratio to each baseline in the same session."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mage_tune.kernels.base import OUT
from mage_tune.measure.baselines import is_context
from mage_tune.measure.records import BenchRun, OutputCheck, Result, Session


@dataclass(frozen=True)
class Row:
    result: Result
    time_us: float | None
    floor_us: float | None
    rate: str  # "3.9 TB/s" or "41.2 TFLOP/s"
    pct_of_floor: float | None  # floor / time: 100% is at the floor
    vs: dict[str, float]  # baseline group -> our time / best baseline time in the same session
    errors: str = ""  # each output's error in its metric (errors_text)
    vs_context: float | None = None  # our time / the fastest context-only baseline's in the same session (not a best)


def errors_text(result: Result) -> str:
    """A result's errors for a table: the relative error of a kernel with one unnamed output (and of records made
    before outputs were checked one by one), else each output's in its metric ("y 0.5 ulp, sums 9.4e-08")."""
    named = [o for o in result.outputs if o.name != OUT]
    if not named:
        return f"{result.rel_err:.1e}" if result.rel_err is not None else "-"
    return ", ".join(f"{o.name} {_error_text(o)}" for o in named)


def check_text(result: Result) -> str:
    """A result's check for a table: "ok", "FAILED: why", or for a context-only baseline over its tolerance (timed
    all the same) "context only: why"."""
    if not result.ok:
        return f"FAILED: {result.error}"
    if is_context(result) and result.error:
        return f"context only: {result.error}"
    return "ok"


def _error_text(check: OutputCheck) -> str:
    if check.error is None or math.isnan(check.error):
        return "not finite"
    if check.metric == "ulp":
        return f"{check.error:.2g} ulp"
    return f"{check.error:.1e}" + (" max" if check.metric == "max_rel" else "")


def floor_us(run: BenchRun, session: Session) -> float:
    if run.flops:
        return run.flops / (session.fp32_tflops * 1e12) * 1e6
    return run.bytes_moved / (session.copy_gbs * 1e9) * 1e6


def _group(result: Result) -> str:
    return result.kind if result.kind in ("triton", "torch", "copy") else "variant"


def best_baselines(run: BenchRun, regime: str) -> dict[tuple[int, str], Result]:
    """Per (session, group): the fastest passing baseline; a context-only one is never among them."""
    best: dict[tuple[int, str], Result] = {}
    for r in run.results:
        if r.kind == "variant" or is_context(r) or not r.ok or r.time(regime) is None:
            continue
        key = (r.session, _group(r))
        if key not in best or r.time(regime) < best[key].time(regime):
            best[key] = r
    return best


def context_baselines(run: BenchRun, regime: str) -> dict[int, Result]:
    """Per session: the fastest timed context-only baseline (its error may be over the tolerance)."""
    fastest: dict[int, Result] = {}
    for r in run.results:
        if not is_context(r) or not r.ok or r.time(regime) is None:
            continue
        if r.session not in fastest or r.time(regime) < fastest[r.session].time(regime):
            fastest[r.session] = r
    return fastest


def rows(run: BenchRun, regime: str) -> list[Row]:
    best = best_baselines(run, regime)
    context = context_baselines(run, regime)
    out = []
    for r in run.results:
        session = run.sessions[r.session]
        t = r.time(regime)
        floor = floor_us(run, session)
        if t is None:
            out.append(Row(r, None, floor, "-", None, {}, errors_text(r)))
            continue
        rate = f"{run.flops / t / 1e6:.1f} TFLOP/s" if run.flops else f"{run.bytes_moved / t / 1e6:.2f} TB/s"
        vs = {g: t / b.time(regime) for (s, g), b in best.items() if s == r.session and b is not r}
        other = context.get(r.session)
        vs_context = t / other.time(regime) if other is not None and other is not r else None
        out.append(Row(r, t, floor, rate, floor / t, vs, errors_text(r), vs_context))
    return out
