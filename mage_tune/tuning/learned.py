"""A time model learned from the tuning database: shape, knobs, launch shape and census features -> time.

The target is a trial's log time over the fastest baseline measured in its run (a copy of the same bytes for layer
norm, cuBLAS for matmul), so runs at different shapes and sizes, and on different days, teach one ranking: what is
fast *for its shape*. A run without baselines falls back to its trials' mean log time. The run's mean alone depends on
which configs the run happened to try (a bench of a few winners against a search's spread), which cost the model much
of its ranking: `python analysis/model_holdout.py` over the published H200 records, median Spearman's rho and top-5
regret, matmul 0.60 / 1.061 with the mean against 0.71 / 1.013 with the baseline, layer norm 0.74 / 1.005 against
0.77 / 1.005 (records/h200-2026-12-01-wide-rows.tar.xz member model_holdout.md). A run whose baseline is unusually
slow for its shape (cuBLAS's slow kernel where N or K is off the 16-byte pitch) is measured against its best trial
instead, at the family's usual ratio (run_references): over the records to h100-2026-12-06-unseen-regimes,
matmul-bf16's held-out median rho 0.85 to 0.91 and mean top-5 regret 1.020 to 1.009 (`--family matmul-bf16`; its
five H100 shapes with `--gpu`, trained on both GPUs: 1.025 to 1.006), layer norm, matmul and matmul-3xtf32 within
0.002 of before. Gradient-boosted trees (scikit-learn's HistGradientBoostingRegressor) take mixed, partly missing
features as they come: a config a bench record imported without census simply has those columns missing.

Two models are fitted from the same rows: one without census features, which ranks thousands of configs before
any compile, and one with them, which re-ranks the few compiled. The launch features (blocks, waves, the share of
the last wave) come from the family's `launch` and the Arch, so they cost nothing per candidate; so do the work
features (the family's work units, a persistent grid's tiles, in waves over its blocks, and the share of bm × bn
tiles inside a ragged output), which a persistent grid's one wave of blocks hides. With them the held-out ranking
(`python analysis/model_holdout.py --family matmul --family matmul-bf16 --family layernorm`, the records of
2026-12-04) went from median rho 0.71 to 0.75 for matmul and 0.86 to 0.87 for matmul-bf16 (mean top-5 regret 1.011
to 1.008), layer norm unchanged (0.76). matmul-bf16 counts a multicast cluster's tiles as block slots (its pair or
2 × 2 group of tiles walked together, those past M or N holding a block all the same): with the records of
h200-2026-12-04-wave-fill, held-out median rho 0.86 to 0.88 and mean top-5 regret 1.015 to 1.009 (`--family
matmul-bf16`). Its transposed tiles (bm along n, bn along m) are counted in that orientation. With the records of
h200-2026-12-04-transposed the held-out median rho is 0.90 and the top-5 regret 1.000 median, 1.020 mean, but held
out, 2900 × 4704 × 3104's transposed winner is not among the model's top 5 (regret 1.131): few other shapes hold
transposed trials yet, and a search finds it through the seeds of new knob values instead. A kernel in clusters
has the slots its GPCs hold in whole clusters (Arch.resident_blocks: 120 of the H100's 132 SMs in 2 × 2 clusters,
where every launch feature counted 132): over the records to h100-2026-12-06-launch-counted, matmul-bf16's held-out
median rho 0.91 to 0.92 and top-5 regret median 1.008 to 1.005, mean 1.015 to 1.011 (`--family matmul-bf16`; its
seven H100 shapes, mean 1.029 to 1.011; its seventeen H200 shapes, whose driver was never asked its count, 1.009
to 1.012).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from mage_tune.arch import Arch
from mage_tune.census.occupancy import occupancy
from mage_tune.kernels.base import Config, Family, tile_area_inside
from mage_tune.measure.saved import positive_number
from mage_tune.problem import Problem
from mage_tune.tuning.db import Entry

# scikit-learn loads on first use, in fit() (about 0.9 s), once there are enough measured trials to learn from:
# every search imports this module, and most find none.

MIN_ROWS = 30  # fewer measured trials than this teach nothing worth ranking by
MIN_RUNS = 2
MIN_RUN_TRIALS = 3  # a run of fewer measured trials says too little about where its times sit
UNUSUAL_BASELINE = 1.3  # a run's baseline over its best trial this many times the usual ratio: run_references
USUAL_RUNS = 3  # runs with baselines needed before a median ratio says what is usual


def launch_features(problem: Problem, config: Config) -> dict[str, float]:
    try:
        launch = problem.family.launch(config, problem.shape, problem.arch)
    except Exception:  # a config the family cannot launch at this shape: the trees see missing values
        return {}
    blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
    threads = max(1, launch.threads)
    # Blocks per SM before registers are known (the census adds them): the occupancy calculator without a
    # register limit; in clusters, those the GPCs hold in whole clusters.
    per_sm = occupancy(problem.arch, threads, 0, launch.dynamic_shared).blocks_per_sm
    slots = problem.arch.resident_blocks(launch.cluster, max(1, per_sm))
    waves = blocks / slots
    out = {
        "log2_blocks": math.log2(max(1, blocks)),
        "threads": float(threads),
        "dynamic_shared": float(launch.dynamic_shared),
        "blocks_per_sm_limit": float(per_sm),
        "waves": waves,
        "last_wave_share": blocks / (math.ceil(waves) * slots) if blocks else 0.0,
    }
    return out | work_features(problem, config, min(blocks, slots))


def work_features(problem: Problem, config: Config, workers: int) -> dict[str, float]:
    """Where the family counts the work its blocks walk (work_units: a persistent grid's tiles, stream-K's k-tiles),
    its waves over the resident blocks and the share of the last one, which a persistent grid's own waves (one)
    hide; and where its tiles are bm × bn of an m × n output, the share of their area inside it."""
    out: dict[str, float] = {}
    family, shape = problem.family, problem.shape
    if hasattr(family, "work_units") and workers:
        units, _ = family.work_units(config, shape)
        unit_waves = units / workers
        out["work_waves"] = unit_waves
        out["work_last_wave_share"] = units / (math.ceil(unit_waves) * workers) if units else 0.0
    inside = tile_area_inside(config, shape)
    if inside is not None:
        out["tile_area_inside"] = inside
    return out


def features(problem: Problem, config: Config, census: dict | None) -> dict[str, float]:
    row: dict[str, float] = {f"log2_{k}": math.log2(max(1, v)) for k, v in problem.shape.items()}
    for knob in problem.family.knobs:
        value = config.get(knob.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            value = knob.domain.index(value) if value in knob.domain else math.nan  # a category's position
        row[f"knob:{knob.name}"] = float(value)
    row |= launch_features(problem, config)
    for key, value in (census or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            row[f"census:{key}"] = float(value)
    return row


@dataclass(frozen=True)
class TimeModel:
    columns: list[str]
    regressor: object
    rows: int
    runs: int

    def predict(self, rows: list[dict[str, float]]) -> list[float]:
        if not rows:  # scikit-learn refuses an empty batch (a polish whose every neighbour was tried asks this)
            return []
        x = np.array([[r.get(c, math.nan) for c in self.columns] for r in rows], dtype=float)
        return [float(v) for v in self.regressor.predict(x)]


@dataclass(frozen=True)
class Row:
    run: str
    features: dict[str, float]
    target: float  # log time over the run's reference (run_references)


def _baseline_times(baselines: dict) -> list[float]:
    return [v for v in baselines.values() if positive_number(v)]


def run_reference(baselines: dict, logs: list[float]) -> float:
    """The log time a run's trials are measured against: its fastest baseline, else their mean."""
    times = _baseline_times(baselines)
    return math.log(min(times)) if times else sum(logs) / len(logs)


def run_references(baselines: dict[str, dict], logs: dict[str, list[float]]) -> dict[str, float]:
    """Each run's reference (run_reference), except where the fastest baseline is unusually slow: where at least
    USUAL_RUNS runs have baselines, a run whose fastest baseline over its best trial is more than UNUSUAL_BASELINE
    times the median of that ratio over those runs is measured against its best trial times the median ratio. Such a
    baseline is slow for the shape, not the trials fast (matmul-bf16 where N or K is off the 16-byte pitch and cuBLAS
    runs a slow kernel: 2-3 x our best; layer norm's copy at an odd d), and measured against it every trial of the
    shape would teach the model that the shape is fast. One-sided: a run whose trials are the slow ones keeps its
    baseline (its configs were slow)."""
    references = {name: run_reference(baselines[name], run_logs) for name, run_logs in logs.items()}
    gaps = {  # log(fastest baseline / best trial)
        name: references[name] - min(run_logs) for name, run_logs in logs.items() if _baseline_times(baselines[name])
    }
    if len(gaps) >= USUAL_RUNS:
        usual = statistics.median(gaps.values())
        for name, gap in gaps.items():
            if gap - usual > math.log(UNUSUAL_BASELINE):
                references[name] = min(logs[name]) + usual
    return references


def training_rows(family: Family, arch: Arch, entries: list[Entry]) -> list[Row]:
    """The measured entries of runs with at least MIN_RUN_TRIALS of them, as feature rows and log times relative to
    their run (run_references)."""
    by_run: dict[str, list[Entry]] = {}
    for e in entries:
        if e.measured and e.value > 0:
            by_run.setdefault(e.run.name, []).append(e)
    runs = {name: group for name, group in by_run.items() if len(group) >= MIN_RUN_TRIALS}
    logs = {name: [math.log(e.value) for e in group] for name, group in runs.items()}
    references = run_references({name: group[0].run.baselines for name, group in runs.items()}, logs)
    rows = []
    for name, group in runs.items():
        for e, lt in zip(group, logs[name], strict=True):
            rows.append(
                Row(name, features(Problem(family, e.run.shape, arch), e.config, e.census), lt - references[name])
            )
    return rows


def fit(rows: list[Row], with_census: bool, seed: int = 0) -> TimeModel | None:
    """None where the rows are too few (or, with census, too few carry census features) to learn from."""
    if with_census:
        rows = [r for r in rows if any(k.startswith("census:") for k in r.features)]
    runs = len({r.run for r in rows})
    if len(rows) < MIN_ROWS or runs < MIN_RUNS:
        return None
    from sklearn.ensemble import HistGradientBoostingRegressor

    names = sorted({k for r in rows for k in r.features if with_census or not k.startswith("census:")})
    x = np.array([[r.features.get(c, math.nan) for c in names] for r in rows], dtype=float)
    keep = [
        i for i in range(len(names)) if np.unique(x[~np.isnan(x[:, i]), i]).size > 1
    ]  # constant columns teach nothing
    x = x[:, keep]
    regressor = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.08, min_samples_leaf=8, random_state=seed)
    regressor.fit(x, np.array([r.target for r in rows], dtype=float))
    return TimeModel([names[i] for i in keep], regressor, len(rows), runs)
