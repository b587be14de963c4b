"""Tables, plots and explanations rebuilt from a run directory alone (see record.py for its files)."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import numpy as np

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.census.features import diff, features, fmt, spearman
from mage_tune.census.model import census_from_json
from mage_tune.census.table import hopper_profile
from mage_tune.errors import InputError, MageError
from mage_tune.kernels import recorded
from mage_tune.kernels.base import shape_words
from mage_tune.measure import shipped as shipped_config
from mage_tune.measure.baselines import is_context
from mage_tune.measure.saved import is_grid
from mage_tune.records import reader
from mage_tune.search import record
from mage_tune.textwidth import constant_columns, short_config, table

# matplotlib loads on first use, in plots() (about 0.4 s, and its backend is chosen before pyplot loads): explain
# and `report --no-plots` import this module and draw nothing.

CENSUS_COLUMNS = (
    "registers",
    "shared_bytes",
    "occupancy",
    "limiter",
    "global_load_bits",
    "loads_in_flight",
    "cp_async_groups_in_flight",
    "barriers",
)
CENSUS_SHORT = ("regs", "smem B", "occ", "limiter", "load bits", "loads in flight", "cp.async groups", "barriers")


def _search_meta(run_dir: Path) -> dict:
    """What the run directory says of its search (search.json, with run.json's family digest and defaults), or {}
    (reported on stderr) where it is missing or damaged: tables need only trials.jsonl."""
    meta: dict = {}
    for name in ("run.json", "search.json"):
        path = run_dir / name
        try:
            found = record.read_identity(path)
        except MageError as exc:
            record.skipped(path, 1, f"not readable ({exc.message})", "read without it")
            continue
        if found is None:
            continue
        if not all(isinstance(found.get(k, ""), str) for k in ("family", "arch")):
            record.skipped(path, 1, "not a search record", "read without it")
            continue
        meta |= found
    return meta


def scored(run_dir: Path) -> list[dict]:
    return sorted(
        (t for t in record.trials(run_dir) if t.get("outcome") in ("measured", "modelled")), key=lambda t: t["value"]
    )


def baselines(run_dir: Path) -> list[dict]:
    return record.baselines(run_dir)


def top_table(run_dir: Path, n: int = 10, fit: bool = False) -> str:
    """The n best trials; `fit`: a plain table that fits the terminal (textwidth), else Markdown at full width.
    Configs are shown as the knobs that differ from the family's defaults."""
    defaults = recorded.defaults(_search_meta(run_dir))
    rows = []
    for t in scored(run_dir)[:n]:
        census = t.get("census", {})
        config = short_config(defaults, t["config"]) if "config" in t else _name(t)
        source = t.get("source", "")
        rows.append([t["number"], f"{t['value']:.2f}", source, config, *(fmt(census.get(c)) for c in CENSUS_COLUMNS)])
    unit = "µs (model)" if (scored(run_dir)[:1] or [{}])[0].get("outcome") == "modelled" else "µs (cold)"
    if fit:  # short names, columns equal in every row said once: the table fits the terminal
        rows, headers, note = constant_columns(rows, ["trial", unit, "from", "config (≠ defaults)", *CENSUS_SHORT])
        # Rather than split a knob=value item or stack a config on many lines, census columns go, rightmost first.
        return table(rows, headers, "simple", optional=CENSUS_SHORT[::-1]) + (f"\n{note}" if note else "")
    return table(rows, ["trial", unit, "from", "config (≠ defaults)", *CENSUS_COLUMNS], "github", fit=False)


def source_kind(source: str) -> str:
    """ "nearest m1024-n1024-k1024 #1 (…)" -> "nearest shapes"; "model #2" -> "model"; a sampler's name as it is."""
    first = (source or "sampler").split(" ", 1)[0]
    named = {
        "nearest": "nearest shapes (tuning database)",
        "new": "knob values new to the database",
        "model": "model (tuning database)",
        "polish": "polish (neighbours of the best)",
        "default": "the family's defaults (nothing measured)",
        "family": "the family's picks for the shape",
    }
    return named.get(first, first)


def source_rows(run_dir: Path) -> list[list]:
    """Per source of trials: how many, how many scored, the best value and the first trial within 3 % of the run's
    best (trial order = the order the search ran them)."""
    trials = sorted(record.trials(run_dir), key=lambda t: t["number"])
    best = min((t["value"] for t in trials if t["outcome"] in ("measured", "modelled")), default=None)
    kinds: dict[str, list[dict]] = {}
    for t in trials:
        kinds.setdefault(source_kind(t.get("source", "")), []).append(t)
    rows = []
    for kind, group in kinds.items():
        values = [t["value"] for t in group if t["outcome"] in ("measured", "modelled")]
        scored_group = [t for t in group if t["outcome"] in ("measured", "modelled")]
        near = next((t["number"] for t in scored_group if best and t["value"] <= best * 1.03), None)
        rows.append([kind, len(group), len(values), fmt(min(values)) if values else "-", "-" if near is None else near])
    return rows


def source_table(run_dir: Path, fit: bool = False) -> str:
    headers = ["trials from", "trials", "scored", "best", "first trial within 3 % of the run's best"]
    return table(source_rows(run_dir), headers, "simple" if fit else "github", fit=fit)


def _name(trial: dict) -> str:
    """A trial's label as its search wrote it, else its knobs (a record edited or cut by hand may lack either)."""
    config = trial.get("config") or {}
    return trial.get("label") or " ".join(f"{k}={v}" for k, v in config.items()) or f"trial {trial['number']}"


def _check(result: dict) -> str:
    """A recorded baseline's check: "ok", why it failed, or a context-only baseline's error over its tolerance (timed
    all the same, never the best)."""
    if not result["ok"]:
        return result.get("error") or "failed"
    if is_context(result) and result.get("error"):
        return f"context only: {result['error']}"
    return "ok"


def baseline_table(run_dir: Path, best_us: float | None, fit: bool = False) -> str:
    rows = []
    for b in baselines(run_dir):
        r, s = b["result"], b["session"]
        t = next((x["median_us"] for x in r["timings"] if x["regime"] == "cold"), None)
        ratio = f"{best_us / t:.2f}" if (t and best_us) else "-"
        rows.append(
            [
                r["label"],
                r.get("session", "-"),
                _check(r),
                fmt(t),
                ratio,
                f"{s['copy_gbs']:.0f}",
                f"{s['control_us']:.2f}",
            ]
        )
    headers = ["baseline", "session", "check", "cold µs", "best / baseline", "copy GB/s", "control µs"]
    return table(rows, headers, "simple" if fit else "github", fit=fit)


def outcome_counts(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in record.trials(run_dir):
        counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
    return counts


UNSCORED = ("failed", "compile_error", "pruned")  # outcomes of a trial that reached no time
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def unscored_lines(run_dir: Path, most: int = 5) -> list[str]:
    """Why trials did not score: one line per outcome and message (its numbers aside), most common first, with the
    knob values every trial of it shares and no scored trial has, e.g. "failed 42: relative error 9.11e-07 is over
    … (the accuracy bar); every one with chain=4"."""
    trials = record.trials(run_dir)
    scored_configs = [t.get("config") or {} for t in trials if t.get("outcome") in ("measured", "modelled")]
    groups: dict[tuple[str, str], list[tuple[str, dict]]] = {}  # (outcome, message sans numbers) -> (message, config)
    for t in trials:
        if t.get("outcome") in UNSCORED:
            said = str(t.get("error") or t.get("reason") or "no reason recorded").strip().split("\n")[0]
            groups.setdefault((t["outcome"], _NUMBER.sub("#", said)), []).append((said, t.get("config") or {}))
    lines = []
    for (outcome, _), group in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:most]:
        said = group[0][0]
        line = f"{outcome} {len(group)}: {said if len(said) <= 160 else said[:159] + '…'}"
        configs = [config for _, config in group]
        shared = [
            f"{k}={v}"
            for k, v in configs[0].items()
            if all(c.get(k) == v for c in configs) and all(c.get(k) != v for c in scored_configs)
        ]
        if shared and len(group) > 1:
            line += f"; every one with {', '.join(shared)}, which no scored trial has"
        lines.append(line)
    if len(groups) > most:
        lines.append(f"and {len(groups) - most} more reasons (trials.jsonl has each trial's)")
    return lines


def recorded_trials(study) -> int:
    """Trials of an Optuna study that ended with an outcome that counts toward --trials (resumed from an earlier
    run)."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.user_attrs.get("outcome") in record.COUNTED)


def shipped(run_dir: Path) -> dict | None:
    """The family's as_shipped config beside the run's best: label, config, value (µs, modelled or measured; None
    where no passing timing of it is recorded), best and ratio (best / shipped: ours / yours); {"error": why} where
    it was left out; None where the family names none. A measured value is the one timed in the best trial's
    session where there is one (the last such), else the last timed."""
    data = record.read_shipped(run_dir)
    if data is None:
        return None
    if data.get("error"):
        return {"error": data["error"]}
    best = (scored(run_dir)[:1] or [None])[0]
    out = {"label": data.get("label"), "config": data.get("config"), "objective": data.get("objective")}
    modelled = "value" in data
    value = data["value"] if modelled and isinstance(data["value"], int | float) else None
    session = None
    if not modelled:
        timed, why = [], ""
        for b in baselines(run_dir):
            r = b["result"]
            if not shipped_config.is_shipped(r):
                continue
            t = next((x["median_us"] for x in r["timings"] if x["regime"] == "cold"), None)
            if r["ok"] and t:
                timed.append((r.get("session"), t))
            elif not r["ok"]:
                why = str(r.get("error") or "")
        same = [pair for pair in timed if best is not None and pair[0] == best.get("session")]
        session, value = (same or timed or [(None, None)])[-1]
        if value is None and why:
            out["error"] = why
    ratio = best["value"] / value if best is not None and value else None
    return {**out, "value": value, "modelled": modelled, "session": session,
            "best": best["value"] if best else None, "ratio": ratio}  # fmt: skip


def shipped_line(run_dir: Path) -> str | None:
    """ "as shipped: 17.03 µs; best 14.48 µs, 0.85 × as shipped", or why there is no such line; None where the family
    names no as_shipped config."""
    info = shipped(run_dir)
    if info is None:
        return None
    if "label" not in info:
        return info["error"]
    if info["value"] is None:
        why = info.get("error", "").split("\n")[0][:200]
        return f"as shipped: {info['label']} has no passing timing in this run" + (f" ({why})" if why else "")
    unit = " µs (model)" if info["modelled"] else " µs"
    if info["best"] is None:
        return f"as shipped: {info['value']:.2f}{unit}; no trial scored"
    return f"as shipped: {info['value']:.2f}{unit}; best {info['best']:.2f}{unit}, {info['ratio']:.2f} × as shipped"


def markdown(run_dir: Path) -> str:
    meta = _search_meta(run_dir)
    best = scored(run_dir)[:1]
    lines = [f"# Search {meta.get('family', '?')} {meta.get('shape', '')} on {meta.get('arch', '?')}", ""]
    lines.append(
        f"Objective: {(best[0].get('objective') if best else '?')}. Trials by outcome: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(outcome_counts(run_dir).items()))}."
    )
    said = shipped_line(run_dir)
    if said:
        lines += ["", said]
    unscored = unscored_lines(run_dir)
    if unscored:
        lines += ["", "## Trials that did not score", "", *(f"- {line}" for line in unscored)]
    lines += ["", "## Top configs", "", top_table(run_dir), ""]
    lines += ["## Where the trials came from", "", source_table(run_dir), ""]
    if baselines(run_dir):
        lines += [
            "## Baselines measured in the same run",
            "",
            baseline_table(run_dir, best[0]["value"] if best else None),
            "",
        ]
    lines += ["## Why the winner wins", "", "```", explain_text(run_dir, with_triton=False), "```", ""]
    return "\n".join(lines)


def terminal(run_dir: Path) -> str:
    """What `report` prints: report.md's content as plain tables that fit the terminal."""
    meta = _search_meta(run_dir)
    best = scored(run_dir)[:1]
    counts = outcome_counts(run_dir)
    lines = [
        f"search {meta.get('family', '?')} {shape_words(meta.get('shape', {}))} on "
        f"{meta.get('arch', '?')}; trials by outcome: "
        + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none recorded"),
        *filter(None, [shipped_line(run_dir)]),
    ]
    unscored = unscored_lines(run_dir)
    if unscored:
        lines += ["trials that did not score:", *(f"  {line}" for line in unscored)]
    if counts:  # a search stopped before its first trial has only its baselines to show
        lines += ["", top_table(run_dir, fit=True), "", source_table(run_dir, fit=True)]
    if baselines(run_dir):
        lines += [
            "",
            "baselines measured in the same run",
            baseline_table(run_dir, best[0]["value"] if best else None, fit=True),
        ]
    return "\n".join([*lines, "", explain_text(run_dir, with_triton=False)])


def correlations(run_dir: Path) -> list[tuple[str, float, int]]:
    trials = scored(run_dir)
    keys = sorted({k for t in trials for k, v in t.get("census", {}).items() if isinstance(v, int | float)})
    out = []
    for key in keys:
        pairs = [
            (t["census"][key], t["value"]) for t in trials if isinstance(t.get("census", {}).get(key), int | float)
        ]
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
        if rho is not None:
            out.append((key, rho, len(pairs)))
    return sorted(out, key=lambda item: -abs(item[1]))


def explain_text(run_dir: Path, with_triton: bool = True, family: str | None = None) -> str:
    trials = scored(run_dir)
    if not trials:
        return "no scored trial in this run"
    best = trials[0]
    lines = [f"winner: trial {best['number']} {_name(best)} at {best['value']:.2f} µs", *launch_lines(best)]
    lines += _winner_profile(run_dir, best.get("label"))
    for other in trials[1:4]:
        knobs = diff(best.get("config", {}), other.get("config", {}))
        cdiff = diff(best.get("census", {}), other.get("census", {}))
        lines.append(
            f"vs trial {other['number']} ({other['value']:.2f} µs, +{other['value'] / best['value'] - 1:.1%}):"
            f" knobs {'; '.join(knobs) or 'same'}; census {'; '.join(cdiff[:8]) or 'same'}"
        )
    corr = correlations(run_dir)
    if corr:
        lines.append("census features that track time across trials (Spearman rho; + means more is slower):")
        lines += [f"  {key:28s} {rho:+.2f}  (n={n})" for key, rho, n in corr[:10]]
    if with_triton:
        lines += _triton_lines(run_dir, best, family)
    return "\n".join(lines)


def _winner_profile(run_dir: Path, label: str | None) -> list[str]:
    """The winner's Hopper profile from the census its run directory keeps (best/census.json), read through the
    bounded reader and its schema; nothing where the run kept none (a static or Triton run), a line where it is
    damaged."""
    path = run_dir / "best" / "census.json"
    if not path.is_file():
        return []
    try:
        census = census_from_json(reader.read_json(path), str(path))
    except InputError as exc:
        return [f"  Hopper profile: not shown ({exc})"]
    if label and census.source != label:  # a best/ left by another search into this directory: not the winner's
        return [f"  Hopper profile: not shown ({path} is of {census.source}, not the winner)"]
    return ["  " + line for line in hopper_profile(census, "the winner")]


def launch_lines(trial: dict) -> list[str]:
    """What the trial's measurement kept of its launch, where its launcher said (a kernel in clusters): the blocks
    resident at once by the driver's count, and the grid launched where it was fitted to them (cut, or grown past a
    plan made for the arch's part)."""
    measured = trial.get("measurement") or {}
    resident = measured.get("resident_blocks")
    if type(resident) is not int or resident < 1:
        return []
    launched, variant = _blocks(measured.get("launched_grid")), _blocks(trial.get("grid"))
    blocks = launched or variant
    said = f"{blocks} blocks" if blocks else "its grid"
    fitted = f", {'cut' if launched < variant else 'grown'} from {variant}" if launched and variant else ""
    return [f"  launched: {said}{fitted}; {resident} blocks of its clusters resident at once (the driver's count)"]


def _blocks(grid) -> int | None:
    """The blocks of a recorded grid, None for anything else."""
    return math.prod(grid) if is_grid(grid) else None


def _triton_lines(run_dir: Path, best: dict, named: str | None = None) -> list[str]:
    meta = _search_meta(run_dir)
    family, why = recorded.family_for(meta, named)
    if family is None:
        return [f"(Triton comparison skipped: {why})"]
    try:
        # The comparison is with the reference's first config: compile only that one (a matmul's lists eight).
        first = (family.reference_configs() or [None])[0]
        refs = family.reference_kernels(meta["shape"], get_arch(meta["arch"]), config=first)
        if not refs:
            return [f"({family.name} names no Triton reference kernel to compare with)"]
        ref = refs[0]
        c = census_artifact(ref.artifact, kernel=ref.name, block=ref.block, param_names=list(ref.param_names))[0]
        census_diff = diff(best.get("census", {}), features(c))
        how = "as its JIT launches it" if getattr(ref, "specialized", False) else "generic, unspecialized"
        return [
            f"vs Triton's {ref.name} {ref.config} (census, offline, {how}): "
            + ("; ".join(census_diff) or "same census")
        ]
    except Exception as exc:  # explain must still print what it has when Triton cannot compile here
        return [f"(Triton comparison unavailable: {type(exc).__name__}: {exc})"]


def plots(run_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = [t for t in record.trials(run_dir) if t.get("outcome") in ("measured", "modelled")]
    if not trials:
        return []
    trials.sort(key=lambda t: t["number"])
    written = []
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key in zip(axes, ("registers", "occupancy", "loads_in_flight"), strict=True):
        xs = [t.get("census", {}).get(key) for t in trials]
        pts = [(x, t["value"]) for x, t in zip(xs, trials, strict=True) if isinstance(x, int | float)]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=12)
        ax.set_xlabel(key)
        ax.set_ylabel("µs")
    written.append(_save(plt, fig, run_dir / "time_vs_census.png"))
    fig, ax = plt.subplots(figsize=(6, 4))
    best = np.minimum.accumulate([t["value"] for t in trials])
    ax.plot([t["number"] for t in trials], best, drawstyle="steps-post")
    ax.set_xlabel("trial")
    ax.set_ylabel("best µs so far")
    written.append(_save(plt, fig, run_dir / "best_so_far.png"))
    return written


def write_markdown(run_dir: Path) -> record.RecordError | None:
    """Write report.md whole; the error (read-only or full run directory) is returned, for the caller to raise once
    it has printed what it could. A run directory holding a symbolic link is refused first (record.refuse_links)."""
    record.refuse_links(run_dir)
    try:
        record.write_atomic(run_dir / "report.md", markdown(run_dir))
    except record.RecordError as exc:
        return exc
    return None


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, format="png", dpi=90)
    finally:
        plt.close(fig)
    record.write_atomic(path, image.getvalue())  # replaces a link in its place, never writes through one
    return path
