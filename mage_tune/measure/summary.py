"""From a BenchRun to the numbers people compare: floor, % of floor, ratio to each baseline in the same session."""

from __future__ import annotations

from dataclasses import dataclass

from mage_tune.measure.records import BenchRun, Result, Session


@dataclass(frozen=True)
class Row:
    result: Result
    time_us: float | None
    floor_us: float | None
    rate: str  # "3.9 TB/s" or "41.2 TFLOP/s"
    pct_of_floor: float | None  # floor / time: 100% is at the floor
    vs: dict[str, float]  # baseline group -> our time / best baseline time in the same session


def floor_us(run: BenchRun, session: Session) -> float:
    if run.flops:
        return run.flops / (session.fp32_tflops * 1e12) * 1e6
    return run.bytes_moved / (session.copy_gbs * 1e9) * 1e6


def _group(result: Result) -> str:
    return result.kind if result.kind in ("triton", "torch", "copy") else "variant"


def best_baselines(run: BenchRun, regime: str) -> dict[tuple[int, str], Result]:
    """Per (session, group): the fastest passing baseline."""
    best: dict[tuple[int, str], Result] = {}
    for r in run.results:
        if r.kind == "variant" or not r.ok or r.time(regime) is None:
            continue
        key = (r.session, _group(r))
        if key not in best or r.time(regime) < best[key].time(regime):
            best[key] = r
    return best


def rows(run: BenchRun, regime: str) -> list[Row]:
    best = best_baselines(run, regime)
    out = []
    for r in run.results:
        session = run.sessions[r.session]
        t = r.time(regime)
        floor = floor_us(run, session)
        if t is None:
            out.append(Row(r, None, floor, "-", None, {}))
            continue
        rate = f"{run.flops / t / 1e6:.1f} TFLOP/s" if run.flops else f"{run.bytes_moved / t / 1e6:.2f} TB/s"
        vs = {g: t / b.time(regime) for (s, g), b in best.items() if s == r.session and b is not r}
        out.append(Row(r, t, floor, rate, floor / t, vs))
    return out
