"""The config a family's authors ship (`Family.as_shipped`), timed as a baseline: what the tuned variants are worth
to the people who wrote the kernel is their time over this one's, ours / yours, in the same session.

It is built in the parent like any variant and launched from its cubin like any variant (its Job's kind is
"variant", which every launcher knows), but it is a baseline: the Measurer times it again in every new session, and
what is written down (bench's record, a search's baselines.jsonl) gives its result the kind "shipped", the name
`--baselines` selects it by. Its label, `as shipped[knob=value,...]`, tells it from the variants in between.
"""

from __future__ import annotations

import dataclasses

from mage_tune.errors import ConfigError, MageError
from mage_tune.kernels.base import Config, Family, Shape, Variant, config_label
from mage_tune.problem import Problem

KIND = "shipped"
NAME = "as shipped"


def label(family: Family, config: Config) -> str:
    """`as shipped[knob=value,...]`: the knobs the family's as_shipped names, in knob order (the others are at their
    defaults; records keep the whole config)."""
    named = family.as_shipped or {}
    return config_label(NAME, {k: v for k, v in config.items() if k in named})


def is_shipped(item) -> bool:
    """Whether a Job, Result or recorded result (a dict) is the shipped config's."""
    name = item.get("label", "") if isinstance(item, dict) else getattr(item, "label", "")
    return isinstance(name, str) and name.startswith(NAME + "[")


def wanted(family: Family, names: tuple[str, ...] | None) -> bool:
    """Whether the baselines `names` (None: the defaults) take the shipped config: by default wherever the family
    names one."""
    if names is None:
        return family.as_shipped is not None or KIND in family.baselines
    return KIND in names


def build(problem: Problem) -> tuple[Variant | None, str]:
    """The shipped config built, or None and the one line that says why it is left out ("" where the family names
    none)."""
    family = problem.family
    try:
        config = family.shipped_config(problem.shape, problem.arch)
    except ConfigError as exc:
        return None, f"as shipped: not valid at {_shape_text(problem.shape)} ({_one_line(exc)}); going on without it"
    if config is None:
        return None, ""
    try:
        return problem.build(config, checked=True), ""  # shipped_config checked it
    except MageError as exc:
        return None, f"as shipped: {label(family, config)} does not build ({_one_line(exc)}); going on without it"


def recorded(result):
    """A Result as records keep it: the shipped config's with kind "shipped", any other as it is."""
    if is_shipped(result) and result.kind != KIND:
        return dataclasses.replace(result, kind=KIND)
    return result


def kind(result) -> str:
    """A result's kind for a table: "shipped" for the shipped config's."""
    return KIND if is_shipped(result) else result.kind


def times(results, regime: str) -> dict[int, float]:
    """Session -> the shipped config's time there, from the passing results timed in `regime`."""
    return {r.session: r.time(regime) for r in results if is_shipped(r) and r.ok and r.time(regime) is not None}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _shape_text(shape: Shape) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


# --- what bench says of it ------------------------------------------------------------------------------------------


def vs(run, row, regime: str) -> dict[str, float]:
    """A bench summary row's ratios to the best baselines of its session, and for a variant its time over the shipped
    config's in that session beside them ("shipped": ours / yours)."""
    out = dict(row.vs)
    mine = times(run.results, regime).get(row.result.session)
    if row.time_us and mine and row.result.kind == "variant" and not is_shipped(row.result):
        out[KIND] = row.time_us / mine
    return out


def _best(run, regime: str):
    """The fastest passing variant timed in a session where the shipped config was timed too."""
    mine = times(run.results, regime)
    timed = [
        r
        for r in run.results
        if r.kind == "variant" and not is_shipped(r) and r.ok and r.time(regime) is not None and r.session in mine
    ]
    return min(timed, key=lambda r: r.time(regime), default=None)


def bench_summary(run, regimes, note: str = "") -> dict | None:
    """What bench's record says of the shipped config: its label, config and check, per regime its time (in the
    session of the best variant) and the best variant's over it; {"error": note} where it was left out; None where
    the family names none (or --baselines left it out)."""
    results = [r for r in run.results if is_shipped(r)]
    if not results:
        return {"error": note} if note else None
    out = {"label": results[0].label, "config": results[0].config, "ok": any(r.ok for r in results)}
    if not out["ok"]:
        out["error"] = results[-1].error
    for regime in regimes:
        mine, best = times(run.results, regime), _best(run, regime)
        if not mine:
            continue
        session = best.session if best is not None else min(mine)
        entry = {"session": session, "time_us": mine[session]}
        if best is not None:
            ratio = best.time(regime) / mine[session]
            entry |= {"best": best.label, "best_us": best.time(regime), "ratio": ratio}
        out[regime] = entry
    return out


def summary_line(run, regime: str) -> str | None:
    """ "as shipped: 17.03 µs; best 14.48 µs, 0.85 × as shipped" for bench's table (the best variant's session)."""
    mine, best = times(run.results, regime), _best(run, regime)
    if best is None:
        return None
    shipped_us = mine[best.session]
    return (
        f"as shipped: {shipped_us:.2f} µs; best {best.time(regime):.2f} µs, "
        f"{best.time(regime) / shipped_us:.2f} × as shipped ({best.label}, session {best.session})"
    )
